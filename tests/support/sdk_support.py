"""The official MCP Python SDK client against a real ``mcphost serve``, over stdio or HTTP, recorded.

Whatever the transport, a :class:`SdkTarget` starts the server, hands out SDK clients for it and
keeps every JSON-RPC message of both directions, so a test checks each message the server sent
against the official schema of the negotiated revision (``tests/support/wire.py``):

- stdio: the server runs behind ``tests/support/stdio_tee.py``, which records every line;
- HTTP: the SDK's ``httpx2`` client runs over :class:`RecordingTransport`, which keeps a copy of
  every exchange (so the session id and each status are known too).

:class:`ClientSide` holds the callbacks the client answers server requests with, and what they saw.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.support.http_support import HttpServer, sse_messages
from tests.support.stdio_support import (
    LATEST,
    paired_server_messages,
    read_jsonl,
    server_env,
    tee_argv,
    validate_capture,
    validate_wire,
)

DEMO_TOOLS = {"echo", "progress", "greet_user", "summarize", "list_roots"}
ROOTS = [("file:///work/project", "project"), ("file:///work/docs", "docs")]
SUMMARY = "A one-line summary."


def text_of(result: Any) -> str:
    """The one text block of a tool result."""
    assert len(result.content) == 1, result
    assert result.content[0].type == "text"
    return result.content[0].text  # type: ignore[no-any-return]


class ClientSide:
    """The callbacks a client answers server requests with, and what they saw.

    ``elicit_actions`` are the answers to elicitations in order (then ``accept``); an accepted
    elicitation answers ``{"name": "Ada"}``.
    """

    def __init__(self, elicit_actions: list[str] | None = None) -> None:
        self.elicit_actions = list(elicit_actions or ["accept"])
        self.elicitations: list[Any] = []
        self.samplings: list[Any] = []
        self.roots_calls = 0
        self.logs: list[Any] = []
        self.notifications: list[Any] = []
        self.updated = anyio.Event()

    async def elicit(self, context: Any, params: Any) -> types.ElicitResult:
        self.elicitations.append(params)
        action = self.elicit_actions.pop(0) if self.elicit_actions else "accept"
        if action == "accept":
            return types.ElicitResult(action="accept", content={"name": "Ada"})
        return types.ElicitResult(action=action)

    async def sample(self, context: Any, params: Any) -> types.CreateMessageResult:
        self.samplings.append(params)
        return types.CreateMessageResult(role="assistant", model="sdk-test-model", stop_reason="endTurn",
                                         content=types.TextContent(type="text", text=SUMMARY))

    async def roots(self, context: Any) -> types.ListRootsResult:
        self.roots_calls += 1
        return types.ListRootsResult(roots=[types.Root(uri=uri, name=name) for uri, name in ROOTS])

    async def log(self, params: Any) -> None:
        self.logs.append(params)

    async def on_message(self, message: Any) -> None:
        """The SDK's message_handler: server notifications (and transport exceptions)."""
        self.notifications.append(message)
        if isinstance(message, types.ResourceUpdatedNotification):
            self.updated.set()

    def updates(self) -> list[str]:
        return [n.params.uri for n in self.notifications if isinstance(n, types.ResourceUpdatedNotification)]

    def client(self, server: Any, mode: str = "legacy") -> Client:
        return Client(server, mode=mode, elicitation_callback=self.elicit, sampling_callback=self.sample,
                      list_roots_callback=self.roots, logging_callback=self.log, message_handler=self.on_message,
                      read_timeout_seconds=30)


# -- HTTP: recording the SDK's traffic --------------------------------------------------------------

@dataclass
class Exchange:
    method: str
    request_headers: dict[str, str]
    request_body: bytes
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)

    @property
    def rpc(self) -> Any:
        return json.loads(self.request_body) if self.request_body else None

    def server_messages(self) -> list[Any]:
        """The JSON-RPC messages in the response; an SSE body cut mid-event keeps its complete events."""
        text = self.body.decode("utf-8", errors="replace")
        if not text.strip():
            return []
        if self.response_headers.get("content-type", "").startswith("text/event-stream"):
            complete = text if text.endswith("\n\n") else text.rpartition("\n\n")[0]
            return sse_messages(complete)
        return [json.loads(text)]


class _Tee(httpx2.AsyncByteStream):
    def __init__(self, stream: Any, sink: bytearray) -> None:
        self._stream = stream
        self._sink = sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            self._sink.extend(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class RecordingTransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport that keeps a copy of every request and response body it carries."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        exchange = Exchange(request.method, {k.lower(): v for k, v in request.headers.items()},
                            await request.aread())
        self.exchanges.append(exchange)
        response = await self._inner.handle_async_request(request)
        exchange.status = response.status_code
        exchange.response_headers = {k.lower(): v for k, v in response.headers.items()}
        return httpx2.Response(response.status_code, headers=response.headers, request=request,
                               stream=_Tee(response.stream, exchange.body), extensions=response.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()

    # -- what was recorded ---------------------------------------------------------------------------

    def session_ids(self) -> list[str]:
        return [e.response_headers["mcp-session-id"] for e in self.exchanges if "mcp-session-id" in e.response_headers]

    def client_messages(self) -> list[Any]:
        return [e.rpc for e in self.exchanges if e.method == "POST" and e.request_body]

    def server_messages(self) -> list[Any]:
        return [m for e in self.exchanges for m in e.server_messages()]

    def validate(self, revision: str = LATEST) -> int:
        return validate_wire(revision, paired_server_messages(self.server_messages(), self.client_messages()))


def recorded_client(url: str, recorder: RecordingTransport, side: ClientSide, mode: str = "legacy"
                    ) -> tuple[httpx2.AsyncClient, Client]:
    http = httpx2.AsyncClient(transport=recorder, timeout=httpx2.Timeout(30, read=300))
    return http, side.client(streamable_http_client(url, http_client=http), mode)


# -- stdio: recording a tee'd session ----------------------------------------------------------------

class Recording:
    """Where one tee'd stdio session is recorded, and the SDK parameters that start it."""

    def __init__(self, tmp_path: Path, name: str = "session", plugins: str | None = None) -> None:
        self.server_out = tmp_path / f"{name}-server.jsonl"
        self.client_in = tmp_path / f"{name}-client.jsonl"
        argv = tee_argv(self.server_out, self.client_in)
        env = server_env(tmp_path, extra={"MCPHOST_PLUGINS": plugins} if plugins else None)
        self.params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)

    def server_messages(self) -> list[Any]:
        return read_jsonl(self.server_out)

    def client_messages(self) -> list[Any]:
        return read_jsonl(self.client_in)

    def validate(self, revision: str) -> int:
        return validate_capture(revision, self.server_out, self.client_in)


# -- one API for both --------------------------------------------------------------------------------

class SdkTarget:
    """A server for the SDK client over ``transport`` (``stdio`` or ``http``) with ``plugins``.

    ``connect(side, mode)`` opens a recorded SDK client; afterwards ``validate``,
    ``server_messages`` and ``client_messages`` cover every session it opened. Over HTTP
    ``recorder`` has the exchanges (statuses, headers); over stdio each session is its own process.
    """

    def __init__(self, transport: str, tmp_path: Path, plugins: str) -> None:
        self.transport = transport
        self.tmp_path = tmp_path
        self.plugins = plugins
        self.recordings: list[Recording] = []
        self.recorder = RecordingTransport()
        self.server: HttpServer | None = HttpServer(tmp_path, plugins=plugins) if transport == "http" else None

    @contextlib.asynccontextmanager
    async def connect(self, side: ClientSide, mode: str = "legacy") -> AsyncIterator[Client]:
        if self.server is not None:
            http, client = recorded_client(self.server.url, self.recorder, side, mode)
            async with http, client:
                yield client
        else:
            recording = Recording(self.tmp_path, f"session{len(self.recordings)}", self.plugins)
            self.recordings.append(recording)
            async with side.client(recording.params, mode) as client:
                yield client

    def server_messages(self) -> list[Any]:
        if self.server is not None:
            return self.recorder.server_messages()
        return [m for r in self.recordings for m in r.server_messages()]

    def client_messages(self) -> list[Any]:
        if self.server is not None:
            return self.recorder.client_messages()
        return [m for r in self.recordings for m in r.client_messages()]

    def validate(self, revision: str) -> int:
        if self.server is not None:
            return self.recorder.validate(revision)
        return sum(r.validate(revision) for r in self.recordings)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
