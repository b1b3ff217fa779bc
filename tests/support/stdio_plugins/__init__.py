"""Plugins used only by the stdio transport tests (installed at run time through a fake dist-info)."""
