"""mqstore.storage layer."""
