"""mcphost-otel over real HTTP: spans and metrics recorded in the SDK's in-memory exporter and reader.

The host runs in the test's event loop (``mcphost.testing.serve_http``: Hypercorn on a free
loopback port, the same app as ``mcphost serve``) with the installed ``demo`` plugin from its
entry point (so the owning plugin has a distribution version), a ``faulty`` plugin registered in
code, and an :class:`~mcphost_otel.OtelPlugin` given in-memory providers. Requests are real MCP
messages over raw httpx, both the session era (2025-11-25) and 2026-07-28.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from mcphost_otel import ACTIVE_SESSIONS, OPERATION_DURATION, SESSION_DURATION, OtelPlugin
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import mcphost
from mcphost.host import Host
from mcphost.plugins import PluginSelection
from mcphost.testing import LiveServer, serve_http

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
HEADER_TRACE = "0af7651916cd43dd8448eb211c80319c"
HEADER_SPAN = "b7ad6b7169203331"
HEADER_TRACEPARENT = f"00-{HEADER_TRACE}-{HEADER_SPAN}-01"
VERSION = "2025-11-25"
MODERN = "2026-07-28"
ACCEPT = "application/json, text/event-stream"


@mcphost.tool
def explode(text: str = "") -> str:
    """Fail with an internal error."""
    raise RuntimeError(f"database password is hunter2 {text}")


faulty = type("Faulty", (), {"mcphost_tools": mcphost.hookimpl(lambda self, host: [explode])})()


@dataclass
class Telemetry:
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader
    plugin: OtelPlugin

    def finished(self, name: str) -> list[Any]:
        return [span for span in self.spans.get_finished_spans() if span.name == name]

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found = []
        for resource_metrics in data.resource_metrics if data else ():
            for scope_metrics in resource_metrics.scope_metrics:
                for item in scope_metrics.metrics:
                    if item.name == metric:
                        found.extend(item.data.data_points)
        return found


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Telemetry(spans, reader, OtelPlugin(tracer_provider=tracer_provider, meter_provider=meter_provider))
    tracer_provider.shutdown()
    meter_provider.shutdown()


def make_host(plugin: Any, *extra: tuple[str, Any]) -> Host:
    """The installed demo plugin (from its entry point) plus the given in-code plugins."""
    names = {"demo", "otel-test", "faulty", *(name for name, _ in extra)}
    return Host(plugins=[("otel-test", plugin), ("faulty", faulty), *extra],
                selection=PluginSelection(allow=frozenset(names)))


@pytest.fixture
async def served(telemetry: Telemetry) -> AsyncIterator[tuple[LiveServer, httpx.AsyncClient]]:
    async with serve_http(make_host(telemetry.plugin)) as server, httpx.AsyncClient() as client:
        yield server, client


def messages(response: httpx.Response) -> list[dict[str, Any]]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        out = []
        for block in response.text.split("\n\n"):
            data = [line[5:].strip() for line in block.split("\n") if line.startswith("data:")]
            if data and any(data):
                out.append(json.loads("\n".join(data)))
        return out
    return [response.json()] if response.content else []


async def initialize(server: LiveServer, client: httpx.AsyncClient) -> str:
    response = await client.post(server.url, headers={"content-type": "application/json", "accept": ACCEPT},
                                 json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                                     "protocolVersion": VERSION, "capabilities": {},
                                     "clientInfo": {"name": "otel-tests", "version": "0"}}})
    assert response.status_code == 200
    session_id = response.headers["mcp-session-id"]
    await client.post(server.url, headers=session_headers(session_id),
                      json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return session_id


def session_headers(session_id: str, **extra: str) -> dict[str, str]:
    return {"content-type": "application/json", "accept": ACCEPT, "mcp-session-id": session_id,
            "mcp-protocol-version": VERSION, **extra}


async def call(server: LiveServer, client: httpx.AsyncClient, session_id: str, request_id: Any, tool: str,
               arguments: dict[str, Any] | None = None, meta: dict[str, Any] | None = None,
               **headers: str) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments or {}}
    if meta is not None:
        params["_meta"] = meta
    response = await client.post(server.url, headers=session_headers(session_id, **headers),
                                 json={"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
    [reply] = messages(response)
    return reply


async def test_tools_call_is_one_server_span_with_the_conventions_and_the_clients_parent(
        served: tuple[LiveServer, httpx.AsyncClient], telemetry: Telemetry) -> None:
    server, client = served
    session_id = await initialize(server, client)
    reply = await call(server, client, session_id, "call-7", "echo", {"text": "hi"},
                       meta={"traceparent": TRACEPARENT, "tracestate": "rojo=00f067aa0ba902b7"},
                       traceparent=HEADER_TRACEPARENT)
    assert reply["result"]["content"] == [{"type": "text", "text": "hi"}]

    [span] = telemetry.finished("tools/call echo")
    assert span.kind is SpanKind.SERVER
    # The parent is the client's span from params._meta; the HTTP header's context is a link.
    assert span.parent is not None and span.parent.is_remote
    assert (format(span.parent.trace_id, "032x"), format(span.parent.span_id, "016x")) == (CLIENT_TRACE, CLIENT_SPAN)
    assert format(span.context.trace_id, "032x") == CLIENT_TRACE
    assert span.context.trace_state.get("rojo") == "00f067aa0ba902b7"
    assert [(format(link.context.trace_id, "032x"), format(link.context.span_id, "016x")) for link in span.links] == [
        (HEADER_TRACE, HEADER_SPAN)]
    attributes = dict(span.attributes)
    assert attributes.pop("client.port") > 0
    assert attributes == {
        "mcp.method.name": "tools/call",
        "mcp.session.id": session_id,
        "mcp.protocol.version": VERSION,
        "gen_ai.tool.name": "echo",
        "gen_ai.operation.name": "execute_tool",
        "jsonrpc.request.id": "call-7",
        "network.transport": "tcp",
        "network.protocol.name": "http",
        "client.address": "127.0.0.1",
        "mcphost.plugin.name": "demo",
        "mcphost.plugin.version": "0.1.0",
    }
    assert span.status.status_code is StatusCode.UNSET
    # Exactly one span per request: initialize, then the call.
    assert [s.name for s in telemetry.spans.get_finished_spans()] == ["initialize", "tools/call echo"]

    [point] = [p for p in telemetry.points(OPERATION_DURATION) if p.attributes["mcp.method.name"] == "tools/call"]
    assert point.count == 1 and point.explicit_bounds[:3] == (0.01, 0.02, 0.05)
    assert dict(point.attributes) == {
        "mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "gen_ai.operation.name": "execute_tool",
        "network.transport": "tcp", "mcp.protocol.version": VERSION, "mcphost.plugin.name": "demo",
        "mcphost.plugin.version": "0.1.0"}


async def test_a_failing_tool_sets_the_error_status_and_records_the_exception(
        served: tuple[LiveServer, httpx.AsyncClient], telemetry: Telemetry) -> None:
    server, client = served
    session_id = await initialize(server, client)
    failed = await call(server, client, session_id, 2, "explode", meta={"traceparent": TRACEPARENT})
    unknown = await call(server, client, session_id, 3, "no-such-tool")

    assert failed["result"]["isError"] is True and "hunter2" not in json.dumps(failed)
    [span] = telemetry.finished("tools/call explode")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "tool_error"
    assert span.attributes["mcphost.plugin.name"] == "faulty"  # attributed to the plugin that owns the tool
    assert "mcphost.plugin.version" not in span.attributes  # registered in code: no distribution
    [event] = span.events
    assert event.name == "exception" and event.attributes["exception.type"] == "RuntimeError"
    assert "hunter2" in event.attributes["exception.message"]  # the operator's trace has the detail

    assert unknown["error"]["code"] == -32602
    [span] = telemetry.finished("tools/call no-such-tool")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == unknown["error"]["message"]
    assert (span.attributes["error.type"], span.attributes["rpc.response.status_code"]) == ("-32602", "-32602")
    assert "mcphost.plugin.name" not in span.attributes

    errors = {(p.attributes["gen_ai.tool.name"], p.attributes.get("error.type"), p.attributes.get(
        "mcphost.plugin.name")): p.count for p in telemetry.points(OPERATION_DURATION)
        if p.attributes["mcp.method.name"] == "tools/call"}
    # A tool name outside the catalog is recorded as _OTHER on metrics (RELIABILITY H8).
    assert errors == {("explode", "tool_error", "faulty"): 1, ("_OTHER", "-32602", None): 1}


async def test_session_metrics_rise_and_fall_with_initialize_and_delete(
        served: tuple[LiveServer, httpx.AsyncClient], telemetry: Telemetry) -> None:
    server, client = served

    def active() -> float:
        return sum(p.value for p in telemetry.points(ACTIVE_SESSIONS))

    assert active() == 0
    first = await initialize(server, client)
    second = await initialize(server, client)
    assert active() == 2
    # A second initialize on a live session is refused and changes nothing.
    again = await client.post(server.url, headers=session_headers(first), json={
        "jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {"protocolVersion": VERSION}})
    assert again.status_code == 400 and active() == 2

    assert (await client.delete(server.url, headers=session_headers(first))).status_code == 204
    assert active() == 1
    [duration] = telemetry.points(SESSION_DURATION)
    assert duration.count == 1 and 0 < duration.sum < 30
    assert dict(duration.attributes) == {"mcp.protocol.version": VERSION, "mcphost.session.end_reason": "deleted"}

    assert (await client.delete(server.url, headers=session_headers(second))).status_code == 204
    assert active() == 0
    assert sum(p.count for p in telemetry.points(SESSION_DURATION)) == 2
    [point] = telemetry.points(ACTIVE_SESSIONS)
    assert dict(point.attributes) == {"mcp.protocol.version": VERSION}


async def test_a_2026_request_is_parented_from_http_headers_and_has_no_session_id(
        served: tuple[LiveServer, httpx.AsyncClient], telemetry: Telemetry) -> None:
    server, client = served
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    headers = {"content-type": "application/json", "accept": ACCEPT, "mcp-protocol-version": MODERN,
               "mcp-method": "tools/call", "traceparent": HEADER_TRACEPARENT}
    echoed = await client.post(server.url, headers={**headers, "mcp-name": "echo"}, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "modern"}, "_meta": meta}})
    asked = await client.post(server.url, headers={**headers, "mcp-name": "greet_user"}, json={
        "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "greet_user", "_meta": meta}})
    assert messages(echoed)[-1]["result"]["content"] == [{"type": "text", "text": "modern"}]
    assert messages(asked)[-1]["result"]["resultType"] == "input_required"

    [span] = telemetry.finished("tools/call echo")
    assert (format(span.parent.trace_id, "032x"), format(span.parent.span_id, "016x")) == (HEADER_TRACE, HEADER_SPAN)
    assert span.attributes["mcp.protocol.version"] == MODERN
    assert "mcp.session.id" not in span.attributes  # a 2026-07-28 request has no session
    assert span.attributes["mcphost.plugin.name"] == "demo"
    # Asking the client for input is not a failure.
    [span] = telemetry.finished("tools/call greet_user")
    assert span.status.status_code is StatusCode.UNSET and "error.type" not in span.attributes
    assert telemetry.points(ACTIVE_SESSIONS) == []  # per-request stand-ins are not sessions
    assert telemetry.points(SESSION_DURATION) == []


class BrokenTracerProvider:
    """A tracer provider whose tracer fails on every span: a telemetry bug, as the host meets it."""

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("exporter configuration is broken")


async def test_a_plugin_that_raises_inside_middleware_leaves_the_request_unaffected_and_is_logged_once(
        caplog: pytest.LogCaptureFixture) -> None:
    plugin = OtelPlugin(tracer_provider=BrokenTracerProvider(), meter_provider=MeterProvider())
    with caplog.at_level(logging.DEBUG, logger="mcphost"):
        async with serve_http(make_host(plugin)) as server, httpx.AsyncClient() as client:
            session_id = await initialize(server, client)
            replies = [await call(server, client, session_id, n, "echo", {"text": f"t{n}"}) for n in range(2, 5)]

    assert [r["result"]["content"][0]["text"] for r in replies] == ["t2", "t3", "t4"]
    logged = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(logged) == 1, [r.getMessage() for r in logged]
    assert "plugin otel-test: middleware otel raised and was skipped" in logged[0].getMessage()
    assert "exporter configuration is broken" in caplog.text
    assert caplog.text.count("middleware otel raised again") == 3  # initialize and two calls, at debug level


async def test_span_text_that_quotes_a_url_or_a_credential_is_redacted(
        served: tuple[LiveServer, httpx.AsyncClient], telemetry: Telemetry) -> None:
    server, client = served
    session_id = await initialize(server, client)
    leak = "https://bob:pw4411xyz@upstream.example/mcp?token=tok8822 with key sk-proj-Q7vL2mN8xB4cR1tY6wE0"
    await call(server, client, session_id, 2, "explode", {"text": leak})
    response = await client.post(server.url, headers=session_headers(session_id), json={
        "jsonrpc": "2.0", "id": 3, "method": "resources/read",
        "params": {"uri": "https://files.example/report.csv?sig=sig5533abc"}})
    assert response.status_code == 200

    [span] = telemetry.finished("tools/call explode")
    [event] = span.events
    recorded = json.dumps({**dict(event.attributes), **dict(span.attributes)})
    for secret in ("pw4411xyz", "tok8822", "sk-proj-Q7vL2mN8xB4cR1tY6wE0"):
        assert secret not in recorded
    assert "https://bob:[redacted]@upstream.example/mcp?token=[redacted]" in event.attributes["exception.message"]
    assert "hunter2" in event.attributes["exception.message"]  # the rest of the detail stays
    [read] = [s for s in telemetry.spans.get_finished_spans() if s.attributes.get("mcp.method.name") ==
              "resources/read"]
    assert read.attributes["mcp.resource.uri"] == "https://files.example/report.csv?sig=[redacted]"
    assert "sig5533abc" not in (read.status.description or "")
