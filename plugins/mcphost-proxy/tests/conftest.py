"""Fixtures for the mcphost-proxy tests; the helpers live in proxy_support.py."""

from __future__ import annotations

import pytest
from proxy_support import Side


@pytest.fixture
def side() -> Side:
    return Side()
