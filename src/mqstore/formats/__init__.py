"""mqstore.formats layer."""
