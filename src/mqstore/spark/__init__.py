"""mqstore.spark layer."""
