"""Helpers for the tests: servers as subprocesses, the wire-schema validator, fake distributions, test plugins."""
