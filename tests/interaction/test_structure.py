"""The owners of issue 11, seen from outside: one 2026-07-28 lifecycle for every transport, and one
narrow-only visibility for every method.

- Each 2026-07-28 request fires connect, disconnect and terminate exactly once, over stdio (which
  never fired disconnect before the kernel ran the lifecycle for every transport) and over HTTP.
- A connect hook cannot widen an allow-list an earlier hook narrowed, and a static resource the
  allow-lists hide is neither listed, read nor subscribable (session era and 2026-07-28 alike).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import mcphost
from mcphost.protocol.era import META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION
from mcphost.testing import MemoryClient, app_client, make_host
from mcphost.transports.stdio import StdioServer

MODERN = "2026-07-28"


def modern_meta() -> dict[str, Any]:
    return {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {},
            META_CLIENT_INFO: {"name": "lifecycle-test", "version": "0"}}


def modern_call(request_id: int, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}, "_meta": modern_meta()}}


@mcphost.tool
async def echo(text: str) -> str:
    """Echo the text."""
    return text


class Recorder:
    """Records every lifecycle hook, by session id."""

    def __init__(self) -> None:
        self.events: list[tuple[str, mcphost.Session, str]] = []

    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[Any]:
        return [echo]

    @mcphost.hookimpl
    def mcphost_connect(self, session: mcphost.Session, request: mcphost.Connection) -> None:
        self.events.append(("connect", session, request.transport))

    @mcphost.hookimpl
    def mcphost_disconnect(self, session: mcphost.Session, reason: str) -> None:
        self.events.append(("disconnect", session, reason))

    @mcphost.hookimpl
    def mcphost_terminate(self, session: mcphost.Session, reason: str) -> None:
        self.events.append(("terminate", session, reason))

    def modern(self) -> dict[str, list[tuple[str, str]]]:
        """Per 2026-07-28 (short-lived) session: the hooks in order, with their detail."""
        out: dict[str, list[tuple[str, str]]] = {}
        for hook, session, detail in self.events:
            if session.era == "modern":
                out.setdefault(session.id, []).append((hook, detail))
        return out


class _Pipe:
    """stdout for an in-process StdioServer: lines written are kept, parsed."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.lines.extend(line for line in data.split(b"\n") if line)

    async def drain(self) -> None:
        return None


async def test_stdio_2026_requests_fire_connect_disconnect_and_terminate_once_each() -> None:
    recorder = Recorder()
    host = make_host(recorder)
    reader = asyncio.StreamReader()
    writer = _Pipe()
    for number in range(3):
        reader.feed_data(mcphost_line(modern_call(number + 1, f"hi {number}")))
    reader.feed_eof()
    await asyncio.wait_for(StdioServer(host, reader, writer).serve(), 20)
    replies = [line for line in writer.lines if b'"result"' in line]
    assert len(replies) == 3
    per_request = recorder.modern()
    assert len(per_request) == 3
    for hooks in per_request.values():
        assert hooks == [("connect", "stdio"), ("disconnect", "complete"), ("terminate", "complete")]


async def test_http_2026_requests_fire_connect_disconnect_and_terminate_once_each() -> None:
    recorder = Recorder()
    host = make_host(recorder)
    async with app_client(host) as client:
        for number in range(3):
            response = await client.post("/mcp", json=modern_call(number + 1, f"hi {number}"), headers={
                "accept": "application/json, text/event-stream", "mcp-protocol-version": MODERN,
                "mcp-method": "tools/call", "mcp-name": "echo"})
            assert response.status_code == 200, response.text
            assert response.json()["result"]["content"][0]["text"] == f"hi {number}"
        await asyncio.sleep(0.05)  # the last request's hooks run as its response ends
    per_request = recorder.modern()
    assert len(per_request) == 3
    for hooks in per_request.values():
        assert hooks == [("connect", "http"), ("disconnect", "complete"), ("terminate", "complete")]


def mcphost_line(message: dict[str, Any]) -> bytes:
    from mcphost.protocol import jsonrpc
    return jsonrpc.encode(message) + b"\n"


# -- visibility: narrow only, static resources too ----------------------------------------------------

@mcphost.tool
async def other() -> str:
    """Another tool."""
    return "other"


@mcphost.resource("test://open", name="open")
async def open_resource() -> str:
    return "open"


@mcphost.resource("test://hidden", name="hidden")
async def hidden_resource() -> str:
    return "hidden"


class FirstNarrows:
    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[Any]:
        return [echo, other]

    @mcphost.hookimpl
    def mcphost_resources(self, host: Any) -> list[Any]:
        return [open_resource, hidden_resource]

    @mcphost.hookimpl
    def mcphost_connect(self, session: mcphost.Session, request: mcphost.Connection) -> None:
        session.allowed_tools = {"echo"}
        session.narrow(resources={"test://open"})


class ThenTriesToWiden:
    @mcphost.hookimpl
    def mcphost_connect(self, session: mcphost.Session, request: mcphost.Connection) -> None:
        session.allowed_tools = {"echo", "other"}  # assigning intersects: "other" stays hidden
        session.allowed_resources = None  # None narrows nothing
        session.narrow(resources={"test://open", "test://hidden"})


@pytest.fixture
def narrowed_host() -> mcphost.host.Host:  # type: ignore[name-defined]
    return make_host(FirstNarrows(), ThenTriesToWiden())


async def test_a_connect_hook_cannot_widen_an_allow_list_an_earlier_one_narrowed(narrowed_host: Any) -> None:
    async with MemoryClient(narrowed_host) as client:
        assert client.session is not None
        assert client.session.allowed_tools == {"echo"}
        assert client.session.allowed_resources == {"test://open"}
        assert [tool["name"] for tool in await client.list_tools()] == ["echo"]
        reply = await client.raw_request("tools/call", {"name": "other", "arguments": {}})
        assert reply["error"]["message"].startswith("Unknown tool")


async def test_a_narrowed_static_resource_is_neither_listed_read_nor_subscribable(narrowed_host: Any) -> None:
    async with MemoryClient(narrowed_host) as client:
        assert [r["uri"] for r in await client.list_resources()] == ["test://open"]
        assert (await client.read_resource("test://open"))["contents"][0]["text"] == "open"
        read = await client.raw_request("resources/read", {"uri": "test://hidden"})
        assert read["error"]["code"] == -32002
        subscribe = await client.raw_request("resources/subscribe", {"uri": "test://hidden"})
        assert subscribe["error"]["code"] == -32002
        assert client.session is not None and "test://hidden" not in client.session.subscriptions
        assert "result" in await client.raw_request("resources/subscribe", {"uri": "test://open"})


async def test_a_narrowed_static_resource_is_hidden_in_2026_requests_too(narrowed_host: Any) -> None:
    async with app_client(narrowed_host) as client:
        headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": MODERN}

        async def post(request_id: int, method: str, params: dict[str, Any], **extra: str) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": modern_meta()}}
            response = await client.post("/mcp", json=body, headers={**headers, "mcp-method": method, **extra})
            return response.json()  # type: ignore[no-any-return]

        listed = await post(1, "resources/list", {})
        assert [r["uri"] for r in listed["result"]["resources"]] == ["test://open"]
        assert listed["result"]["cacheScope"] == "private"  # narrowed: answers differ per caller
        read = await post(2, "resources/read", {"uri": "test://hidden"}, **{"mcp-name": "test://hidden"})
        assert "error" in read and read["error"]["code"] == -32602
