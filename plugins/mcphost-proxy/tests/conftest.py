"""Fixtures for the mcphost-proxy tests; the helpers live in proxy_support.py."""

from __future__ import annotations

import pytest
from proxy_support import Side

from tests.support.js.run import ensure_ts_client, node_executable


@pytest.fixture
def side() -> Side:
    return Side()


@pytest.fixture(scope="module")
def node() -> str:
    """The node executable, with the pinned TypeScript SDK client installed (skipped without node)."""
    status = ensure_ts_client()
    if not status:
        pytest.skip(status.reason)
    return node_executable()
