"""The one refusal rule, in every transport and both eras.

A connect hook that refuses a client fires ``mcphost_connect``, then ``mcphost_disconnect(session,
"refused")`` and ``mcphost_terminate(session, "refused")``, once each and at once: before the
client has gone (stdin still open, the HTTP connection still kept alive, the in-memory client
not yet closed), and nothing more fires when it goes. The ``refuser`` plugin
(``tests/support/refusing.py``) refuses everyone and traces each hook; the stdio and HTTP
cells run it in a real ``mcphost serve``, the memory cells in this process.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import mcphost
from mcphost.errors import Refused
from mcphost.sessions.session import Connection
from mcphost.testing import MemoryClient, make_host
from mcphost.transports.memory import MemoryTransport
from tests.support import refusing
from tests.support.fixtures.distributions import make_distribution
from tests.support.http_support import ACCEPT_BOTH, INITIALIZE, MODERN_META, HttpServer
from tests.support.matrix import CELLS, Cell, modern_headers
from tests.support.refusing import Trace
from tests.support.stdio_support import RawServer, server_env

REPO_ROOT = Path(__file__).resolve().parents[2]


def plugin_env(root: Path) -> dict[str, str]:
    """Environment that installs ``refuser`` (a fake distribution) into a server subprocess."""
    site = root / "refuser-site"
    if not site.is_dir():
        make_distribution(site, "mcphost-refuser", "0.0.1", {"refuser": "tests.support.refusing"}, {})
    paths = [str(site), str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(paths), "MCPHOST_PLUGINS": "demo,refuser",
            refusing.TRACE_ENV: str(root / "trace.txt")}


def assert_refused_once(lines: list[tuple[str, str, str]], transport: str) -> None:
    """Exactly one session, with connect, disconnect("refused"), terminate("refused") in that order."""
    sessions = {session for _, session, _ in lines}
    assert len(sessions) == 1, lines
    (session,) = sessions
    assert lines == [("connect", session, transport), ("disconnect", session, "refused"),
                     ("terminate", session, "refused")], lines


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HttpServer, Trace]]:
    root = tmp_path_factory.mktemp("refusal-http")
    server = HttpServer(root, plugins="demo,refuser", env=plugin_env(root))
    yield server, Trace(root / "trace.txt")
    assert server.stop() == 0, server.log()


@pytest.mark.parametrize("cell", CELLS, ids=[c.id for c in CELLS])
async def test_a_refused_connect_fires_disconnect_and_terminate_refused_at_once(
        cell: Cell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    if cell.transport == "memory":
        trace = Trace(tmp_path / "trace.txt")
        monkeypatch.setenv(refusing.TRACE_ENV, str(trace.path))
        host = make_host(("refuser", refusing))
        await host.start()
        try:
            if cell.modern:
                await refused_in_memory_modern(host)
            else:
                with pytest.raises(mcphost.Forbidden):
                    await MemoryClient(host).__aenter__()
            assert_refused_once(trace.lines(), "memory")  # the client is still here: nothing else fires
        finally:
            await host.stop()
        assert_refused_once(trace.lines(), "memory")
        return
    if cell.transport == "stdio":
        trace = Trace(tmp_path / "trace.txt")
        server = RawServer(server_env(tmp_path, extra=plugin_env(tmp_path)))
        try:
            if cell.modern:
                reply = server.request("tools/list", {"_meta": MODERN_META}, request_id=1)
            else:
                reply = server.request("initialize", INITIALIZE, request_id=1)
            assert reply["error"]["message"] == "refuser says no", reply
            # stdin is still open: the rule has already run, in full.
            assert_refused_once(trace.wait(3), "stdio")
            assert server.proc.poll() is None
            assert server.close() == 0
        finally:
            server.kill()
        assert_refused_once(trace.lines(), "stdio")  # EOF fires nothing more
        return
    server, trace = request.getfixturevalue("http_server")
    before = len(trace.lines())
    async with httpx.AsyncClient(timeout=10) as client:
        if cell.modern:
            params = {"_meta": MODERN_META}
            response = await client.post(server.url, headers=modern_headers("tools/list", params),
                                         content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                                                             "params": params}))
        else:
            response = await client.post(server.url, headers={"content-type": "application/json",
                                                              "accept": ACCEPT_BOTH},
                                         content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                             "params": INITIALIZE}))
        assert response.status_code == 403, response.text
        assert "mcp-session-id" not in response.headers
        # The connection is still open (kept alive): the rule has already run, in full.
        assert_refused_once(trace.wait(before + 3)[before:], "http")
    time.sleep(0.2)
    assert_refused_once(trace.lines()[before:], "http")


async def refused_in_memory_modern(host: mcphost.Host) -> None:
    """A 2026-07-28 request through the kernel's one entry, as stdio hands it over."""

    class Exchange:
        headers = None
        session_id = None
        era = None
        trusted = True
        connection = Connection(transport="memory")

        async def send(self, message: dict, related: object) -> None:
            raise AssertionError("nothing is sent to a refused client")

        async def reply(self, reply: object) -> str:
            raise AssertionError("a refused request gets no reply")

        def legacy(self, message: object) -> None:
            raise AssertionError("a 2026-07-28 request")

    assert host.kernel is not None
    work = host.kernel.serve({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}},
                             Exchange())
    assert work is not None
    with pytest.raises(Refused, match="refuser says no"):
        await work


async def test_mcphost_call_refused_fires_the_rule_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``mcphost call``'s in-memory transport: refused at once, nothing more when it closes."""
    trace = Trace(tmp_path / "trace.txt")
    monkeypatch.setenv(refusing.TRACE_ENV, str(trace.path))
    host = make_host(("refuser", refusing))
    with pytest.raises(mcphost.Forbidden):
        async with MemoryTransport(host):
            pass
    assert_refused_once(trace.lines(), "memory")
