"""With mcphost-otel on, each inner call of a program is a span, a child of execute's; the console's
traffic counts execute runs and each inner call under its tool."""

from __future__ import annotations

from codemode_support import CODE_ENDPOINT, LocalTools
from mcphost_codemode import CodeModePlugin
from mcphost_otel import OtelPlugin
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcphost import introspect
from mcphost.testing import MemoryClient, make_host


async def test_each_inner_call_is_a_child_span_of_execute():
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    otel = OtelPlugin(tracer_provider=tracer_provider, meter_provider=MeterProvider())
    host = make_host(("otel", otel), ("tools", LocalTools()), ("codemode", CodeModePlugin()),
                     config={"endpoints": {"code": CODE_ENDPOINT}})
    await host.start()
    try:
        async with MemoryClient(host) as client:  # /mcp: the whole catalog, execute included
            result = await client.call_tool("execute", {"code": "a = await call_tool('add', {'a': 1, 'b': 2})\n"
                                                                "b = await call_tool('shout', {'text': 'x'})\n"
                                                                "[a['sum'], b]"})
            assert result["structuredContent"]["result"] == [3, "X"]
        traffic = introspect.traffic(host)  # what the console's Traffic panel shows
        assert (traffic["execute"]["calls"], traffic["add"]["calls"], traffic["shout"]["calls"]) == (1, 1, 1)
    finally:
        await host.stop()
    finished = {span.name: span for span in spans.get_finished_spans()}
    execute = finished["tools/call execute"]
    for inner in ("tools/call add", "tools/call shout"):
        assert finished[inner].parent is not None
        assert finished[inner].parent.span_id == execute.context.span_id
        assert finished[inner].context.trace_id == execute.context.trace_id
