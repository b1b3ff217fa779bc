"""The replies written at once (no watcher tasks) behave like the ones written by the waiting paths.

Requests go straight into the ASGI app, as Hypercorn would hand them over, with no client library
and no event-loop turns between one request and the next: the tightest a client can follow up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcphost.app import create_app
from mcphost.config import config_from_dict
from mcphost.host import Host
from mcphost.transports import http_modern

ACCEPT = "application/json, text/event-stream"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}}


async def request(app: Any, method: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    raw = [(b"host", b"127.0.0.1:8000"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers.items()]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "",
             "headers": raw, "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}
    delivered = False
    stay = asyncio.Event()
    status = 0
    response_headers: dict[str, str] = {}
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await stay.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            response_headers.update({k.decode(): v.decode() for k, v in message.get("headers", [])})
        else:
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    stay.set()
    return status, response_headers, b"".join(chunks)


def session_headers(session_id: str | None = None) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept": ACCEPT, "mcp-protocol-version": "2025-11-25"}
    if session_id:
        headers["mcp-session-id"] = session_id
    return headers


def echo(request_id: Any, text: str, meta: dict[str, Any] | None = None) -> bytes:
    params: dict[str, Any] = {"name": "echo", "arguments": {"text": text}}
    if meta:
        params["_meta"] = meta
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()


def sse_events(body: bytes) -> list[dict[str, str]]:
    events = []
    for block in body.decode().split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            name, _, value = line.partition(": ")
            fields[name] = value
        if fields:
            events.append(fields)
    return events


@contextlib.asynccontextmanager
async def serving(server: dict[str, Any], plugins: dict[str, Any]) -> AsyncIterator[Any]:
    """The ASGI app of a started host with these ``[server]`` and ``[plugins]`` settings."""
    config = config_from_dict({"server": {"log_level": "warning", **server}, "plugins": plugins}, env={})
    app = create_app(Host(config))
    await app.host.start()
    await app.transport.start()
    try:
        yield app
    finally:
        await app.transport.stop()
        await app.host.stop()


async def open_session(app: Any) -> str:
    """A 2025-11-25 session, initialized; its id."""
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}
    status, headers, _ = await request(app, "POST", json.dumps(init).encode(), session_headers())
    assert status == 200
    session_id = headers["mcp-session-id"]
    initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    assert (await request(app, "POST", initialized, session_headers(session_id)))[0] == 202
    return session_id


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
