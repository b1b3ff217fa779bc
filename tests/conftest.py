"""Shared fixtures for the tests that run ``mcphost serve --stdio`` as a real subprocess."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from tests.stdio_support import RawServer, server_env


@pytest.fixture
def stdio_server(tmp_path: Path) -> Iterator[Callable[..., RawServer]]:
    """Factory: ``stdio_server(probe=False, env=None, argv=None)`` starts a server over pipes.

    ``env`` adds variables to the isolated environment of :func:`server_env`. Every server
    started is killed at teardown if the test left it running.
    """
    started: list[RawServer] = []

    def start(*, probe: bool = False, env: Mapping[str, str] | None = None,
              argv: list[str] | None = None) -> RawServer:
        server = RawServer(server_env(tmp_path, probe=probe, extra=env), argv)
        started.append(server)
        return server

    yield start
    for server in started:
        server.kill()
