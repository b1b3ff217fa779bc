"""Built-in plugins: the host's default behaviour, registered after installed plugins."""
