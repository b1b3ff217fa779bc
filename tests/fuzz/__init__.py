"""Hypothesis fuzzing of the stdio and HTTP transports."""
