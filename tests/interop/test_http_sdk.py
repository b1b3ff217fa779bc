"""The official MCP Python SDK client, and raw HTTP, against a real ``mcphost serve`` (Streamable HTTP).

The SDK sessions run over an ``httpx2`` client whose transport records every exchange, so the
session id is known and, afterwards, every JSON-RPC message the server sent (SSE events and JSON
bodies alike) is validated against the official 2025-11-25 schema (``tests/support/wire.py``). The
resumption and session-end tests use raw httpx for exact control of the connection.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.http_support import HttpServer, sse_events, sse_messages
from tests.support.stdio_support import LATEST, paired_server_messages, validate_wire

DEMO_TOOLS = {"echo", "progress", "greet_user", "summarize", "list_roots"}
WATCHED = "test://watched-resource"
FAST_WATCH = "[plugins.conformance]\nwatched_interval_seconds = 0.2\n"

# logging/setLevel and ping are deprecated in 2026-07-28; these sessions are 2025-era on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")


# -- recording the SDK's HTTP traffic ------------------------------------------------------------------

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


class ClientSide:
    """The callbacks the client answers server requests with, and what they saw."""

    def __init__(self) -> None:
        self.elicitations: list[Any] = []
        self.samplings: list[Any] = []
        self.notifications: list[Any] = []
        self.updated = anyio.Event()

    async def elicit(self, context: Any, params: Any) -> types.ElicitResult:
        self.elicitations.append(params)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def sample(self, context: Any, params: Any) -> types.CreateMessageResult:
        self.samplings.append(params)
        return types.CreateMessageResult(role="assistant", model="sdk-test-model", stop_reason="endTurn",
                                         content=types.TextContent(type="text", text="An HTTP summary."))

    async def on_message(self, message: Any) -> None:
        """The SDK's message_handler: server notifications (and transport exceptions)."""
        self.notifications.append(message)
        if isinstance(message, types.ResourceUpdatedNotification):
            self.updated.set()

    def updates(self) -> list[str]:
        return [n.params.uri for n in self.notifications if isinstance(n, types.ResourceUpdatedNotification)]

    def client(self, server: Any, mode: str = "legacy") -> Client:
        return Client(server, mode=mode, elicitation_callback=self.elicit, sampling_callback=self.sample,
                      message_handler=self.on_message, read_timeout_seconds=30)


def recorded_client(url: str, recorder: RecordingTransport, side: ClientSide, mode: str = "legacy"
                    ) -> tuple[httpx2.AsyncClient, Client]:
    http = httpx2.AsyncClient(transport=recorder, timeout=httpx2.Timeout(30, read=300))
    return http, side.client(streamable_http_client(url, http_client=http), mode)


def _text(result: Any) -> str:
    assert len(result.content) == 1, result
    assert result.content[0].type == "text"
    return result.content[0].text


def _post_status(server: HttpServer, session_id: str) -> httpx.Response:
    with httpx.Client(timeout=10) as raw:
        return raw.post(server.url, headers=server.headers(session_id, mcp_protocol_version=LATEST),
                        json={"jsonrpc": "2.0", "id": 99, "method": "ping"})


# -- the SDK client ------------------------------------------------------------------------------------

async def test_python_sdk_over_http_initialize_progress_elicitation_sampling_and_session_end(http_server):
    server = http_server(plugins="demo,conformance")
    recorder, side = RecordingTransport(), ClientSide()
    http, client = recorded_client(server.url, recorder, side)
    async with http, client:
        assert client.protocol_version == LATEST
        assert client.server_info is not None and client.server_info.name == "mcphost"
        caps = client.server_capabilities
        for capability in (caps.tools, caps.resources, caps.prompts, caps.completions, caps.logging):
            assert capability is not None, caps
        assert caps.resources.subscribe is True

        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert DEMO_TOOLS | {"test_simple_text", "test_reconnection"} <= tools
        assert _text(await client.call_tool("echo", {"text": "über HTTP"})) == "über HTTP"

        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        result = await client.call_tool("progress", {"steps": 4, "delay_ms": 20}, progress_callback=on_progress)
        assert _text(result) == "completed 4 steps"
        assert seen == [(n, 4, f"step {n} of 4") for n in (1, 2, 3, 4)]

        assert _text(await client.call_tool("greet_user", {})) == "Hello, Ada!"
        [elicitation] = side.elicitations
        assert elicitation.message == "What is your name?"
        assert elicitation.requested_schema["required"] == ["name"]

        text = "MCP over Streamable HTTP."
        assert _text(await client.call_tool("summarize", {"text": text})) == "An HTTP summary."
        [sampling] = side.samplings
        assert sampling.max_tokens == 200 and text in sampling.messages[0].content.text

        assert _text(await client.call_tool("test_simple_text", {})) == "This is a simple text response for testing."
        await client.set_logging_level("warning")
        await client.send_ping()
        [session_id] = recorder.session_ids()
        assert _post_status(server, session_id).status_code == 200  # live while the client is

    # Every request after initialize carried the session and the negotiated revision.
    posts = [e for e in recorder.exchanges if e.method == "POST"]
    assert posts[0].rpc["method"] == "initialize" and "mcp-session-id" not in posts[0].request_headers
    for exchange in posts[1:]:
        assert exchange.request_headers.get("mcp-session-id") == session_id, exchange
        assert exchange.request_headers.get("mcp-protocol-version") == LATEST, exchange
    # The client's replies to elicitation/create and sampling/createMessage were accepted.
    replies = [e for e in posts if e.rpc and "method" not in e.rpc]
    assert len(replies) == 2 and {e.status for e in replies} == {202}
    # Leaving the context ended the session with DELETE; the id is now unknown.
    [delete] = [e for e in recorder.exchanges if e.method == "DELETE"]
    assert delete.request_headers["mcp-session-id"] == session_id and delete.status == 204
    gone = _post_status(server, session_id)
    assert gone.status_code == 404, gone.text
    assert recorder.validate() >= 15
    server_requests = [m["method"] for m in recorder.server_messages() if "method" in m and "id" in m]
    assert server_requests == ["elicitation/create", "sampling/createMessage"]


async def test_python_sdk_over_http_resource_subscription_receives_updates(http_server):
    server = http_server(plugins="demo,conformance", config=FAST_WATCH)
    recorder, side = RecordingTransport(), ClientSide()
    http, client = recorded_client(server.url, recorder, side)
    async with http, client:
        resources = {r.uri for r in (await client.list_resources()).resources}
        assert WATCHED in resources
        before = (await client.read_resource(WATCHED, cache_mode="bypass")).contents[0].text
        await client.subscribe_resource(WATCHED)
        with anyio.fail_after(10):
            while len(side.updates()) < 3:
                await anyio.sleep(0.05)
        after = (await client.read_resource(WATCHED, cache_mode="bypass")).contents[0].text
        assert after != before  # each update is a new revision of the content
        await client.unsubscribe_resource(WATCHED)
        await anyio.sleep(1.0)  # let an update announced before the unsubscribe arrive
        settled = len(side.updates())
        await anyio.sleep(1.0)  # five more intervals
        assert len(side.updates()) == settled
    assert set(side.updates()) == {WATCHED}
    # They arrived on the standalone GET stream (they belong to no request), not on a POST's.
    [get] = [e for e in recorder.exchanges if e.method == "GET"]
    assert "last-event-id" not in get.request_headers
    on_get = [m for m in get.server_messages() if m.get("method") == "notifications/resources/updated"]
    assert len(on_get) == settled
    assert all(m["params"] == {"uri": WATCHED} for m in on_get)
    assert recorder.validate() == 6 + settled  # initialize, list, 2 reads, (un)subscribe and the updates


async def test_python_sdk_over_http_resumes_when_the_server_closes_the_call_stream(http_server):
    """``test_reconnection`` closes its POST stream mid-call (SSE polling); the SDK reconnects with
    GET + Last-Event-ID after the announced retry interval and gets the rest of the call there."""
    server = http_server(plugins="conformance", config="[plugins.conformance]\nreconnect_retry_ms = 200\n")
    recorder, side = RecordingTransport(), ClientSide()
    http, client = recorded_client(server.url, recorder, side)
    async with http, client:
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        result = await client.call_tool("test_reconnection", {}, progress_callback=on_progress)
        assert _text(result) == "Reconnection test completed: result sent after the stream was closed."
        assert seen == [0, 1]
    [post] = [e for e in recorder.exchanges if e.method == "POST" and (e.rpc or {}).get("method") == "tools/call"]
    events = sse_events(post.body.decode())
    assert not events[0]["data"].strip() and "id" in events[0]  # priming
    assert events[-1] == {"retry": "200"}  # the close announced the handler's retry interval
    on_post = post.server_messages()
    assert [m.get("method") for m in on_post] == ["notifications/message", "notifications/progress"]
    last_id = [e["id"] for e in events if "id" in e][-1]
    resumes = [e for e in recorder.exchanges if e.method == "GET" and "last-event-id" in e.request_headers]
    assert [e.request_headers["last-event-id"] for e in resumes] == [last_id]
    assert resumes[0].status == 200
    replay = resumes[0].server_messages()
    assert [m.get("method") for m in replay] == ["notifications/progress", None]
    assert replay[-1]["id"] == post.rpc["id"] and "result" in replay[-1]
    assert recorder.validate() >= 4


async def test_python_sdk_over_http_in_auto_mode_speaks_2026_07_28(http_server):
    server = http_server(plugins="demo")
    side = ClientSide()
    async with side.client(server.url, mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        assert client.server_info is not None and client.server_info.name == "mcphost"
        assert _text(await client.call_tool("echo", {"text": "auto"})) == "auto"
        assert DEMO_TOOLS <= {tool.name for tool in (await client.list_tools()).tools}
        # The same ctx.elicit answered through an input-required round instead of a server request.
        assert _text(await client.call_tool("greet_user", {})) == "Hello, Ada!"
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        assert _text(await client.call_tool("progress", {"steps": 3}, progress_callback=on_progress)) \
            == "completed 3 steps"
        assert seen == [1, 2, 3]


async def test_python_sdk_over_http_auto_mode_wire(http_server):
    """What auto mode does on the wire: server/discover answered, then stateless requests, no session."""
    server = http_server(plugins="demo")
    recorder, side = RecordingTransport(), ClientSide()
    http, client = recorded_client(server.url, recorder, side, mode="auto")
    async with http, client:
        assert client.protocol_version == "2026-07-28"
        assert _text(await client.call_tool("echo", {"text": "wire"})) == "wire"
    posts = [e for e in recorder.exchanges if e.method == "POST"]
    assert posts[0].rpc["method"] == "server/discover" and posts[0].status == 200
    assert "initialize" not in [e.rpc.get("method") for e in posts if e.rpc]
    assert recorder.validate("2026-07-28") >= 2


# -- raw HTTP: resumption and session end ----------------------------------------------------------------

def _read_events(response: httpx.Response, until: int) -> list[dict[str, str]]:
    """Read SSE events off a streaming response until ``until`` events that carry data have arrived."""
    events: list[dict[str, str]] = []
    buffer = ""
    for chunk in response.iter_text():
        buffer += chunk
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            events.extend(sse_events(block + "\n\n"))
            if sum(1 for e in events if e.get("data", "").strip()) >= until:
                return events
    raise AssertionError(f"the stream ended after {events}")


def _seq(event_id: str) -> tuple[str, int]:
    stream, _, seq = event_id.partition(".")
    return stream, int(seq)


@pytest.mark.parametrize("resume", ["after-completion", "while-running"])
def test_raw_http_resumes_a_dropped_stream_with_last_event_id(http_server, resume):
    server = http_server(plugins="demo")
    validator_pairs: list[tuple[dict[str, Any], str | None]] = []
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "progress", "arguments": {"steps": 5, "delay_ms": 200},
                       "_meta": {"progressToken": "resume-me"}}}
    with httpx.Client(timeout=httpx.Timeout(10, read=10)) as raw:
        session = server.initialize(raw)
        headers = server.headers(session, mcp_protocol_version=LATEST)
        started = time.monotonic()
        with raw.stream("POST", server.url, headers=headers, json=call) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            first = _read_events(response, until=1)
        # Leaving the block closed the connection mid-body.
        priming, progress = first[0], [e for e in first if e.get("data", "").strip()]
        assert set(priming) >= {"id", "data"} and not priming["data"].strip(), first
        assert int(priming["retry"]) > 0
        assert len(progress) == 1
        first_message = json.loads(progress[0]["data"])
        assert first_message["method"] == "notifications/progress"
        assert first_message["params"]["progress"] == 1
        last_id = progress[-1]["id"]
        stream, last_seq = _seq(last_id)
        assert _seq(priming["id"]) == (stream, last_seq - 1)

        if resume == "after-completion":
            time.sleep(max(0.0, started + 1.6 - time.monotonic()))  # the call takes ~1 s
        replay = raw.get(server.url, headers={**server.headers(session, mcp_protocol_version=LATEST),
                                              "last-event-id": last_id})
        assert replay.status_code == 200, replay.text
        assert replay.headers["content-type"].startswith("text/event-stream")

        events = sse_events(replay.text)
        # A priming event pointing at the resume position first, then exactly what was missed.
        assert events[0]["id"] == last_id and not events[0].get("data", "").strip(), events[0]
        data_events = [e for e in events if e.get("data", "").strip()]
        ids = [_seq(e["id"]) for e in data_events]
        assert [s for s, _ in ids] == [stream] * len(ids)
        assert [n for _, n in ids] == list(range(last_seq + 1, last_seq + 1 + len(ids)))  # in order, no gaps
        messages = [json.loads(e["data"]) for e in data_events]
        assert messages == sse_messages(replay.text)
        progress_after = [m for m in messages if m.get("method") == "notifications/progress"]
        assert [p["params"]["progress"] for p in progress_after] == [2, 3, 4, 5]
        assert all(p["params"]["progressToken"] == "resume-me" for p in progress_after)
        assert messages[:-1] == progress_after  # nothing else, and no duplicate of what was seen
        final = messages[-1]
        assert final["id"] == 7 and final["result"]["content"] == [{"type": "text", "text": "completed 5 steps"}]

        # The stream is finished: resuming from its last event gives nothing more.
        again = raw.get(server.url, headers={**server.headers(session, mcp_protocol_version=LATEST),
                                             "last-event-id": data_events[-1]["id"]})
        assert again.status_code == 200 and sse_messages(again.text) == []
        validator_pairs += [(first_message, None), *[(m, None) for m in progress_after], (final, "tools/call")]
        raw.delete(server.url, headers=server.headers(session))
    assert validate_wire(LATEST, validator_pairs) == 6


def test_raw_http_delete_ends_the_session_and_its_id_gets_404(http_server):
    server = http_server(plugins="demo")
    pairs: list[tuple[dict[str, Any], str | None]] = []
    with httpx.Client(timeout=10) as raw:
        session = server.initialize(raw)
        headers = server.headers(session, mcp_protocol_version=LATEST)
        alive = raw.post(server.url, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert alive.status_code == 200
        [tools] = sse_messages(alive.text)
        pairs.append((tools, "tools/list"))
        other = server.initialize(raw)  # a second session is not affected

        deleted = raw.delete(server.url, headers=headers)
        assert deleted.status_code == 204, deleted.text
        for method in ("POST", "GET", "DELETE"):
            kwargs: dict[str, Any] = {}
            if method == "POST":
                kwargs["json"] = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
            response = raw.request(method, server.url, headers=headers, **kwargs)
            assert response.status_code == 404, (method, response.status_code, response.text)
            if response.content:
                body = response.json()
                assert body["error"]["message"] == "Session not found"
                pairs.append((body, None))
        still = raw.post(server.url, headers=server.headers(other, mcp_protocol_version=LATEST),
                         json={"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert still.status_code == 200
        [pong] = sse_messages(still.text)
        pairs.append((pong, "ping"))
        assert raw.delete(server.url, headers=server.headers(other)).status_code == 204
    # The 404 bodies are transport-level errors with a null id: validate_wire checks them by hand
    # (envelope, a standard code) and counts only the two results.
    assert len(pairs) == 5 and validate_wire(LATEST, pairs) == 2
