"""The replies written at once (no watcher tasks) behave like the ones written by the waiting paths.

Requests go straight into the ASGI app, as Hypercorn would hand them over, with no client library
and no event-loop turns between one request and the next: the tightest a client can follow up.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcphost.transports import http_modern
from tests.support.asgi_support import (
    ACCEPT,
    MODERN_META,
    echo,
    open_session,
    request,
    serving,
    session_headers,
    sse_events,
)


@pytest.fixture
async def app() -> AsyncIterator[Any]:
    async with serving({}, {"allow": ["demo"]}) as app:
        yield app


async def test_an_sse_reply_written_at_once_is_resumable_and_frees_its_id_at_once(app: Any) -> None:
    session_id = await open_session(app)

    status, headers, body = await request(app, "POST", echo(7, "one"), session_headers(session_id))
    assert status == 200 and headers["content-type"] == "text/event-stream"
    priming, reply = sse_events(body)
    assert priming["data"] == "" and "retry" in priming
    assert json.loads(reply["data"])["result"]["content"][0]["text"] == "one"
    # The same id again at once: the first request is over, so no 409.
    status, _, body = await request(app, "POST", echo(7, "two"), session_headers(session_id))
    assert status == 200
    assert json.loads(sse_events(body)[1]["data"])["result"]["content"][0]["text"] == "two"
    # The first stream was stored before it was written: it can be replayed from its priming event.
    resume = {"accept": "text/event-stream", "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25",
              "last-event-id": priming["id"]}
    status, _, body = await request(app, "GET", b"", resume)
    assert status == 200
    replayed = [json.loads(e["data"]) for e in sse_events(body) if e.get("data")]
    assert [m["result"]["content"][0]["text"] for m in replayed] == ["one"]
    assert sse_events(body)[-1]["id"] == reply["id"]


async def test_a_ready_stateless_reply_is_json_without_the_waiting_path(app: Any, monkeypatch: Any) -> None:
    waited: list[Any] = []
    original = http_modern._wait_and_answer

    async def counting(*args: Any) -> str:
        waited.append(args)
        return await original(*args)

    monkeypatch.setattr(http_modern, "_wait_and_answer", counting)
    headers = {"content-type": "application/json", "accept": ACCEPT, "mcp-protocol-version": "2026-07-28",
               "mcp-method": "tools/call", "mcp-name": "echo"}
    for request_id in (1, 1, 2):  # an id may come again as soon as its reply is out
        status, response_headers, body = await request(app, "POST", echo(request_id, "hi", MODERN_META), headers)
        assert status == 200 and response_headers["content-type"] == "application/json"
        reply = json.loads(body)
        assert reply["id"] == request_id and reply["result"]["content"][0]["text"] == "hi"
        assert reply["result"]["resultType"] == "complete"
    assert waited == []


async def test_a_reply_larger_than_the_retention_budget_is_still_written() -> None:
    # Retention bounds what waits unread; a reply its own request is about to write is not that,
    # however large: it goes out, and only afterwards is it let go.
    async with serving({"max_retained_bytes": 16}, {"allow": ["demo"]}) as app:
        session_id = await open_session(app)
        status, _, body = await request(app, "POST", echo(3, "x" * 200), session_headers(session_id))
        assert status == 200
        assert json.loads(sse_events(body)[-1]["data"])["result"]["content"][0]["text"] == "x" * 200


async def test_a_reply_ready_at_once_whose_write_fails_is_retained_and_resumable(app: Any) -> None:
    # The stream is counted as retained only when writing it fails: then it is unread, held in
    # the retention budget like any abandoned reply, and a resume replays it.
    from mcphost.transports.sse import state_of

    session_id = await open_session(app)

    async def broken(scope: Any, receive: Any, send: Any) -> None:
        async def failing(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                raise OSError("connection reset by peer")
            await send(message)
        await app(scope, receive, failing)

    with pytest.raises(OSError):
        await request(broken, "POST", echo(5, "lost"), session_headers(session_id))
    session = app.host.manager.sessions[session_id]
    state = state_of(session)
    assert state is not None
    [stream] = list(state.retained)
    assert state.retained[stream] > 0
    assert app.host.manager.budgets.held(state.quota, "retained bytes") == state.retained[stream]
    resume = {"accept": "text/event-stream", "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25",
              "last-event-id": f"{stream}.1"}
    status, _, body = await request(app, "GET", b"", resume)
    assert status == 200
    replayed = [json.loads(e["data"]) for e in sse_events(body) if e.get("data")]
    assert [m["result"]["content"][0]["text"] for m in replayed] == ["lost"]
    # Written in full now: no longer counted.
    assert stream not in state.retained
    assert app.host.manager.budgets.held(state.quota, "retained bytes") == 0


@pytest.mark.parametrize("leaves_after", [0.0, 0.3])
async def test_a_stateless_call_whose_client_leaves_is_cancelled_before_and_after_the_watcher_starts(
        app: Any, leaves_after: float) -> None:
    # No progress token: the handler says nothing while it sleeps, so the reply waits without a stream.
    # The client is gone at once (before http_modern starts watching, WATCH_AFTER) or later.
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "progress", "arguments": {"steps": 1, "delay_ms": 30_000}, "_meta": MODERN_META}}).encode()
    headers = {"content-type": "application/json", "accept": ACCEPT, "mcp-protocol-version": "2026-07-28",
               "mcp-method": "tools/call", "mcp-name": "progress"}
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "",
             "headers": [(b"host", b"127.0.0.1:8000")] + [(k.encode(), v.encode()) for k, v in headers.items()]
             + [(b"content-length", str(len(body)).encode())],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await asyncio.sleep(leaves_after)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    started = time.monotonic()
    await asyncio.wait_for(app(scope, receive, send), 20)  # the tool itself would sleep 30 s
    assert time.monotonic() - started < 15
    assert sent == []  # cancelled: nothing was written to the client that left
    # The host serves on, and the same tool completes when nobody leaves.
    status, _, reply = await request(app, "POST", echo(2, "after", MODERN_META),
                                     {**headers, "mcp-name": "echo"})
    assert status == 200 and json.loads(reply)["result"]["content"][0]["text"] == "after"
