"""The ``mqstore`` command line (a thin layer over the api and spark layers)."""
