"""The test suite's server helpers know their own server: a port another program took between
``free_port``'s probe and the server's bind is not mistaken for it (CI, with other test runs on
the machine, once sent a test's requests to a foreign server: "Unknown tool", "Session not found").
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mcphost.testing import free_port, listens_on
from tests.support import http_support
from tests.support.http_support import HttpServer


@pytest.fixture
def squatter() -> Iterator[socket.socket]:
    """A listening socket of this process on a free port: another program's server."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port()))
        sock.listen()
        yield sock


def test_listens_on_names_the_process_holding_the_port(squatter: socket.socket) -> None:
    port = squatter.getsockname()[1]
    assert listens_on(os.getpid(), port)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not listens_on(other.pid, port)
    finally:
        other.kill()
        other.wait(10)


def test_a_server_whose_port_was_taken_is_not_taken_for_ready(tmp_path: Path, squatter: socket.socket) -> None:
    port = squatter.getsockname()[1]
    with pytest.raises(RuntimeError, match="already in use"):
        HttpServer(tmp_path, port=port)  # asked for that port: no other


def test_a_server_whose_free_port_was_taken_starts_on_another(tmp_path: Path, squatter: socket.socket,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    ports = iter([squatter.getsockname()[1], free_port()])
    monkeypatch.setattr(http_support, "free_port", lambda: next(ports))
    server = HttpServer(tmp_path)
    try:
        assert server.port != squatter.getsockname()[1]
        assert listens_on(server.process.pid, server.port)
        assert httpx.get(server.url.replace("/mcp", "/healthz"), timeout=20).status_code == 200
    finally:
        server.stop()
