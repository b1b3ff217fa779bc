"""Shared fixtures: an isolated config environment, and real ``mcphost serve --stdio`` subprocesses."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from hypothesis import settings

from mcphost.redaction import RedactingFilter
from tests.support.http_support import HttpServer
from tests.support.js.run import ensure_ts_client
from tests.support.stdio_support import RawServer, server_env

# Property tests check what holds, not how fast: Hypothesis' default 200 ms deadline per example fails
# them on a loaded CI machine (4 xdist workers on 2 busy cores). Tests that set their own settings
# (``@settings(max_examples=...)``) inherit this profile's deadline.
settings.register_profile("mcphost", deadline=None)
settings.load_profile("mcphost")


@pytest.fixture(autouse=True)
def _no_redacting_filter_left_behind() -> Iterator[None]:
    """mcphost's CLI run in process (click's runner) puts a RedactingFilter on the root logger's
    handlers, and pytest's own handlers there live for the whole session: one test's CLI call would
    redact what every later test's ``caplog`` sees (a serial run of tests/unit failed that way).
    Each test ends with the filter taken off again."""
    yield
    for handler in logging.getLogger().handlers:
        for stale in [f for f in handler.filters if isinstance(f, RedactingFilter)]:
            handler.removeFilter(stale)


@pytest.fixture(scope="module")
def ts_client() -> None:
    """The TypeScript SDK client harness, installed on first use; in CI its absence is a failure."""
    status = ensure_ts_client()
    if not status:
        if os.environ.get("CI"):
            pytest.fail(f"the TypeScript MCP client is required in CI but unavailable: {status.reason}")
        pytest.skip(f"TypeScript MCP client unavailable: {status.reason}")


@pytest.fixture
def isolated_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No MCPHOST_* variables and a private XDG config home (returned), so no user config leaks in."""
    for name in list(os.environ):
        if name.startswith("MCPHOST_"):
            monkeypatch.delenv(name)
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    # Only the demo plugin, whatever else is installed (the conformance fixtures, say).
    monkeypatch.setenv("MCPHOST_PLUGINS", "demo")
    return home


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[Callable[..., HttpServer]]:
    """Factory: ``http_server(plugins="demo", env=None, args=None, config="")`` starts ``mcphost serve``
    on a free loopback port; every server started is stopped by its pid at teardown."""
    started: list[HttpServer] = []

    def start(**options: object) -> HttpServer:
        server = HttpServer(tmp_path, **options)  # type: ignore[arg-type]
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


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
