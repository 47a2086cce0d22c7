"""The ``quarry`` command line."""
