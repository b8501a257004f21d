"""loggers package."""
