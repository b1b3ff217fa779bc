"""Test-only plugins for the HTTP transport tests, and the helpers that install them.

They are installed into a ``mcphost serve`` subprocess through a fake dist-info on PYTHONPATH
(see :func:`tests.support.http_plugins.harness.install`); the probe they install with them is
``tests/support/probe.py``, the one the stdio tests install too.
"""
