"""mqstore.kernels layer."""
