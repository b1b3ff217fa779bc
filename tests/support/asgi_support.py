"""Requests straight into the ASGI app, as Hypercorn would hand them over: no client library, no
socket, and no event-loop turns between one request and the next (the tightest a client can follow
up). For looser HTTP tests :func:`mcphost.testing.app_client` is the simpler tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from mcphost.testing import running_app

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
    async with running_app({"server": {"log_level": "warning", **server}, "plugins": plugins}) as app:
        yield app


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
