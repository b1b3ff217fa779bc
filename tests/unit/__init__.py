"""Tests of one module or component in-process (and the packaging checks that need no client)."""
