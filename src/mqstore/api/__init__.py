"""mqstore.api layer."""
