"""Lifecycle hooks over Streamable HTTP, against a real ``mcphost serve`` with the ``httpprobe`` plugin.

``mcphost_connect`` runs on every HTTP request and may refuse it (401 with a challenge, 403) or
narrow the session's allow-lists; ``mcphost_disconnect`` runs once per request that connected
(``complete``, ``dropped`` when the client leaves an SSE stream, ``refused``);
``mcphost_terminate`` runs exactly once per session, with the reason it ended.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.http_plugins.harness import (
    PROBE_PLUGINS,
    SSE_ACCEPT,
    SseReader,
    Trace,
    call,
    check_wire,
    json_body,
    probe_env,
    rpc,
)
from tests.support.http_support import HttpServer, sse_messages
from tests.support.probe import CHALLENGE


@pytest.fixture(scope="module")
def probe_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("http-hooks")


@pytest.fixture(scope="module")
def server(probe_root: Path) -> Iterator[HttpServer]:
    """One server with the probe for the tests that need no special settings."""
    server = HttpServer(probe_root, plugins=PROBE_PLUGINS, env=probe_env(probe_root))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def trace(probe_root: Path) -> Trace:
    return Trace(probe_root / "trace.txt")


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as client:
        yield client


def post(client: httpx.Client, server: HttpServer, session_id: str | None, message: dict, **headers: str
         ) -> httpx.Response:
    return client.post(server.url, headers=server.headers(session_id, **headers), json=message)


def result_of(response: httpx.Response, request_id: object, method: str) -> dict:
    assert response.status_code == 200, response.text
    messages = sse_messages(response.text)
    check_wire(messages, method)
    replies = [m for m in messages if m.get("id") == request_id]
    assert len(replies) == 1, messages
    return replies[0]


# -- mcphost_connect: refusals -------------------------------------------------------------------

@pytest.mark.parametrize(("status", "challenge"), [("401", CHALLENGE), ("403", None)])
def test_connect_refusal_on_initialize_answers_the_status_and_mints_no_session(
        server: HttpServer, client: httpx.Client, trace: Trace, status: str, challenge: str | None) -> None:
    before = {line.split(" ")[1] for line in trace.lines(kind="connect")}
    response = post(client, server, None, rpc(1, "initialize", {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        x_probe_refuse=status)
    assert response.status_code == int(status)
    assert response.headers.get("www-authenticate") == challenge
    assert "mcp-session-id" not in response.headers
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == -32600
    assert ("probe wants a token" if status == "401" else "probe says no") in body["error"]["message"]
    # The refused session was never handed out: its connect is paired with a "refused" disconnect
    # and a "refused" terminate, at once (the one refusal rule of every transport).
    minted = [line.split(" ")[1] for line in trace.lines(kind="connect")
              if line.split(" ")[1] not in before]
    assert len(minted) == 1
    trace.wait(lambda t: t.details(minted[0], "terminate") == ["refused"])
    assert trace.details(minted[0], "disconnect") == ["refused"]
    # The server keeps serving, and the refused id is unknown.
    assert client.post(server.url, headers=server.headers(minted[0]), json=rpc(2, "ping")).status_code == 404
    session_id = server.initialize(client)
    assert result_of(post(client, server, session_id, rpc(3, "ping")), 3, "ping")["result"] == {}


@pytest.mark.parametrize(("status", "challenge"), [("401", CHALLENGE), ("403", None)])
@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
def test_connect_refusal_on_an_existing_session_applies_to_every_method(
        server: HttpServer, client: httpx.Client, trace: Trace, method: str, status: str,
        challenge: str | None) -> None:
    session_id = server.initialize(client)
    headers = server.headers(session_id, x_probe_refuse=status)
    if method == "POST":
        response = client.post(server.url, headers=headers, json=rpc(7, "tools/list"))
    elif method == "GET":
        response = client.get(server.url, headers={**headers, **SSE_ACCEPT})
    else:
        response = client.delete(server.url, headers=headers)
    assert response.status_code == int(status)
    assert response.headers.get("www-authenticate") == challenge
    body = response.json()
    assert body["id"] is None and body["error"]["code"] == -32600
    trace.wait(lambda t: "refused" in t.details(session_id, "disconnect"))
    # A refused DELETE ends nothing: the session still works.
    assert trace.details(session_id, "terminate") == []
    assert result_of(post(client, server, session_id, rpc(8, "ping")), 8, "ping")["result"] == {}


async def test_a_session_ended_while_an_async_connect_hook_runs_is_not_served(server: HttpServer,
                                                                             trace: Trace) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(server.url, headers=server.headers(), json=rpc(1, "initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}))
        session_id = response.headers["mcp-session-id"]
        slow = {**server.headers(session_id), "x-probe-delay": "0.4"}
        pending = [asyncio.ensure_future(client.post(server.url, headers=slow, json=call(2, "echo", {"text": "x"}))),
                   asyncio.ensure_future(client.get(server.url, headers={**slow, **SSE_ACCEPT}))]
        await asyncio.sleep(0.15)
        assert (await client.delete(server.url, headers=server.headers(session_id))).status_code == 204
        for response in await asyncio.gather(*pending):
            assert response.status_code == 404
            assert json_body(response)["error"]["message"] == "Session not found"
    trace.wait(lambda t: len(t.details(session_id, "disconnect")) == len(t.details(session_id, "connect")))
    assert trace.details(session_id, "terminate") == ["deleted"]


# -- mcphost_connect: allow-lists ------------------------------------------------------------------

def test_allow_list_set_in_connect_narrows_listing_and_calls(server: HttpServer, client: httpx.Client) -> None:
    response = post(client, server, None, rpc(1, "initialize", {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        x_probe_tools="echo, leak")
    session_id = response.headers["mcp-session-id"]
    post(client, server, session_id, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    listed = result_of(post(client, server, session_id, rpc(2, "tools/list")), 2, "tools/list")
    assert sorted(tool["name"] for tool in listed["result"]["tools"]) == ["echo", "leak"]
    # A tool the catalog has but the session may not see: the same -32602 as an unknown tool.
    for request_id, name in ((3, "progress"), (4, "no-such-tool")):
        refused = result_of(post(client, server, session_id, call(request_id, name, {"steps": 1})),
                            request_id, "tools/call")
        assert refused["error"]["code"] == -32602
        assert refused["error"]["message"] == f"Unknown tool: {name}"
    echoed = result_of(post(client, server, session_id, call(5, "echo", {"text": "hi"})), 5, "tools/call")
    assert echoed["result"]["content"] == [{"type": "text", "text": "hi"}]
    # Another session without the header sees everything.
    other = server.initialize(client)
    everything = result_of(post(client, server, other, rpc(6, "tools/list")), 6, "tools/list")
    assert {"echo", "progress", "leak"} <= {tool["name"] for tool in everything["result"]["tools"]}


# -- mcphost_disconnect ----------------------------------------------------------------------------

async def test_disconnect_runs_once_per_request_complete_or_dropped(server: HttpServer, trace: Trace) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(server.url, headers=server.headers(), json=rpc(1, "initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}))
        session_id = response.headers["mcp-session-id"]
        await client.post(server.url, headers=server.headers(session_id),
                          json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        await client.post(server.url, headers=server.headers(session_id), json=rpc(2, "tools/list"))
        trace.wait(lambda t: t.details(session_id, "disconnect") == ["complete"] * 3)
        # The client leaves an SSE stream (a tool still running, then a standalone GET): dropped.
        async with client.stream("POST", server.url, headers=server.headers(session_id),
                                 json=call(3, "progress", {"steps": 3, "delay_ms": 300}, progress="p")) as stream:
            reader = SseReader(stream)
            await reader.until(lambda r: len(r.events) >= 1)
        priming = reader.events[0]["id"]
        trace.wait(lambda t: t.details(session_id, "disconnect")[3:] == ["dropped"])
        async with client.stream("GET", server.url, headers={**server.headers(session_id), **SSE_ACCEPT}) as stream:
            reader = SseReader(stream)
            await reader.until(lambda r: len(r.events) >= 1)  # the priming event
        trace.wait(lambda t: t.details(session_id, "disconnect")[4:] == ["dropped"])
        # Resuming the dropped call's stream follows it to its end: complete.
        async with client.stream("GET", server.url, headers={**server.headers(session_id), **SSE_ACCEPT,
                                                              "last-event-id": priming}) as stream:
            reader = SseReader(stream)
            await reader.to_end()
        assert reader.response_to(3) is not None
        check_wire(reader.messages(), "tools/call")
        deleted = await client.delete(server.url, headers=server.headers(session_id))
        assert deleted.status_code == 204
    trace.wait(lambda t: t.details(session_id, "terminate") == ["deleted"])
    connects = trace.details(session_id, "connect")
    disconnects = trace.details(session_id, "disconnect")
    assert connects == ["POST"] * 4 + ["GET"] * 2 + ["DELETE"]
    assert disconnects == ["complete"] * 3 + ["dropped", "dropped", "complete", "complete"]
    # terminate is the session's last event.
    assert trace.lines(session_id)[-1] == f"terminate {session_id} deleted"


# -- mcphost_terminate -----------------------------------------------------------------------------

def test_terminate_runs_once_on_delete_and_the_id_is_gone(server: HttpServer, client: httpx.Client,
                                                         trace: Trace) -> None:
    session_id = server.initialize(client)
    assert client.delete(server.url, headers=server.headers(session_id)).status_code == 204
    trace.wait(lambda t: t.details(session_id, "terminate") == ["deleted"])
    for _ in range(2):  # a repeated DELETE or a late request ends nothing again
        assert client.delete(server.url, headers=server.headers(session_id)).status_code == 404
        assert post(client, server, session_id, rpc(2, "ping")).status_code == 404
    time.sleep(0.1)
    assert trace.details(session_id, "terminate") == ["deleted"]


def test_terminate_reasons_expired_and_lifetime(tmp_path: Path) -> None:
    server = HttpServer(tmp_path, plugins=PROBE_PLUGINS, env=probe_env(tmp_path, {
        "MCPHOST_SESSION_IDLE_TIMEOUT": "0.5", "MCPHOST_SESSION_MAX_LIFETIME": "1.5"}))
    trace = Trace(tmp_path / "trace.txt")
    try:
        with httpx.Client(timeout=10) as client:
            idle = server.initialize(client)
            busy = server.initialize(client)
            started = time.monotonic()
            # Keep one session active: only the idle one expires; then the busy one hits its lifetime.
            while not trace.details(busy, "terminate") and time.monotonic() - started < 5:
                response = post(client, server, busy, rpc(1, "ping"))
                assert response.status_code in (200, 404)
                time.sleep(0.1)
            lived = time.monotonic() - started
            assert trace.details(idle, "terminate") == ["expired"]
            assert trace.details(busy, "terminate") == ["lifetime"]
            assert 1.4 < lived < 3.5
            for session_id in (idle, busy):
                response = post(client, server, session_id, rpc(2, "ping"))
                assert response.status_code == 404
                assert json_body(response)["error"]["message"] == "Session not found"
            time.sleep(0.3)
            assert trace.details(idle, "terminate") == ["expired"]
            assert trace.details(busy, "terminate") == ["lifetime"]
    finally:
        server.stop()


def test_terminate_runs_once_per_session_on_shutdown(tmp_path: Path) -> None:
    server = HttpServer(tmp_path, plugins=PROBE_PLUGINS, env=probe_env(tmp_path))
    trace = Trace(tmp_path / "trace.txt")
    with httpx.Client(timeout=10) as client:
        sessions = [server.initialize(client) for _ in range(3)]
        assert client.delete(server.url, headers=server.headers(sessions[0])).status_code == 204
    assert server.stop(signal.SIGTERM) == 0
    assert trace.details(sessions[0], "terminate") == ["deleted"]
    for session_id in sessions[1:]:
        assert trace.details(session_id, "terminate") == ["shutdown"]
