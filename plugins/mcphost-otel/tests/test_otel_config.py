"""Configuration of mcphost-otel: its config section, the OTEL_* variables, and switching it off."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from mcphost_otel import OtelPlugin, providers
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import mcphost
from mcphost.errors import ConfigError
from mcphost.sessions.session import Connection
from mcphost.testing import MemoryClient, make_host


@mcphost.tool
def echo(text: str) -> str:
    """Return the text."""
    return text


tools = type("Tools", (), {"mcphost_tools": mcphost.hookimpl(lambda self, host: [echo])})()


def in_memory() -> tuple[OtelPlugin, InMemorySpanExporter, InMemoryMetricReader]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    return OtelPlugin(tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])), \
        spans, reader


@pytest.mark.parametrize(("section", "key"), [({"prometheus": "yes"}, "plugins.otel.prometheus"),
                                              ({"prometheus_path": "metrics"}, "plugins.otel.prometheus_path"),
                                              ({"exporter": "otlp"}, "plugins.otel")])
def test_the_config_section_is_validated_before_start(section: dict[str, Any], key: str) -> None:
    host = make_host(("otel", OtelPlugin()), config={"plugins": {"otel": section}})
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        host.prepare()


@pytest.mark.parametrize(("env", "expected"), [
    ({}, [("otlp", HttpSpanExporter)]),  # the specification's defaults: otlp over http/protobuf
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, [("otlp", GrpcSpanExporter)]),
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
     [("otlp", HttpSpanExporter)]),
    ({"OTEL_TRACES_EXPORTER": "console, otlp"}, [("console", ConsoleSpanExporter), ("otlp", HttpSpanExporter)]),
    ({"OTEL_TRACES_EXPORTER": "none"}, []),
])
def test_trace_exporters_come_from_the_standard_variables(monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
                                                          expected: list[tuple[str, type]]) -> None:
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert providers.exporter_classes("traces") == expected


def test_metric_exporters_and_mistakes(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "otlp,zipkin-ish")
    with caplog.at_level(logging.ERROR, logger="mcphost.otel"):
        assert providers.exporter_classes("metrics") == [("otlp", HttpMetricExporter)]
    assert "'zipkin-ish', but no such exporter is installed" in caplog.text
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "carrier-pigeon")
    assert providers.exporter_classes("metrics") == [] and "'carrier-pigeon' is not supported" in caplog.text


def test_the_resource_takes_otel_variables_and_falls_back_to_the_server_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod")
    fallback = providers.resource("mcphost", "1.2")
    assert (fallback.attributes["service.name"], fallback.attributes["service.version"]) == ("mcphost", "1.2")
    assert fallback.attributes["deployment.environment"] == "prod"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "weather")
    assert providers.resource("mcphost", "1.2").attributes["service.name"] == "weather"


async def test_otel_sdk_disabled_records_nothing_and_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    plugin = OtelPlugin()  # no providers given: it would configure from the environment
    async with MemoryClient(make_host(("otel", plugin), tools)) as client:
        assert (await client.call_tool("echo", {"text": "on"}))["content"][0]["text"] == "on"
    assert plugin.tracer is None and plugin.providers.owned == []


async def test_switching_traces_or_metrics_off(monkeypatch: pytest.MonkeyPatch) -> None:
    plugin, spans, reader = in_memory()
    host = make_host(("otel", plugin), tools, config={"plugins": {"otel": {"traces": False}}})
    async with MemoryClient(host) as client:
        await client.call_tool("echo", {"text": "x"})
    assert spans.get_finished_spans() == () and reader.get_metrics_data() is not None

    plugin, spans, reader = in_memory()
    host = make_host(("otel", plugin), tools, config={"plugins": {"otel": {"metrics": False}}})
    async with MemoryClient(host) as client:
        await client.call_tool("echo", {"text": "x"})
    assert [s.name for s in spans.get_finished_spans()] == ["initialize", "tools/call echo"]
    assert reader.get_metrics_data() is None


async def test_stdio_is_a_pipe_and_in_memory_use_has_no_transport() -> None:
    plugin, spans, _ = in_memory()
    host = make_host(("otel", plugin), tools)
    await host.start()
    async with MemoryClient(host, connection=Connection(transport="stdio", remote="stdio")) as client:
        await client.call_tool("echo", {"text": "x"})
    async with MemoryClient(host) as client:
        await client.call_tool("echo", {"text": "y"})
    await host.stop()
    piped, memory = [s for s in spans.get_finished_spans() if s.name == "tools/call echo"]
    assert piped.attributes["network.transport"] == "pipe" and "client.address" not in piped.attributes
    assert "network.transport" not in memory.attributes


async def test_garbage_trace_context_is_ignored() -> None:
    plugin, spans, _ = in_memory()
    async with MemoryClient(make_host(("otel", plugin), tools)) as client:
        for meta in ({"traceparent": 42}, {"traceparent": "00-zz-yy-01"}, {"traceparent": ["x"]}, "not a dict"):
            reply = await client.raw_request("tools/call", {"name": "echo", "arguments": {"text": "k"},
                                                            "_meta": meta})
            assert reply["result"]["content"][0]["text"] == "k"
    calls = [s for s in spans.get_finished_spans() if s.name == "tools/call echo"]
    assert len(calls) == 4 and all(s.parent is None for s in calls)


async def test_telemetry_that_cannot_be_set_up_does_not_stop_the_host(caplog: pytest.LogCaptureFixture) -> None:
    class Unusable:
        def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("no tracer for you")

    plugin = OtelPlugin(tracer_provider=Unusable(), meter_provider=MeterProvider())
    with caplog.at_level(logging.ERROR, logger="mcphost.otel"):
        async with MemoryClient(make_host(("otel", plugin), tools)) as client:
            assert (await client.call_tool("echo", {"text": "still"}))["content"][0]["text"] == "still"
    assert "could not be set up; serving without traces and metrics" in caplog.text
    assert plugin.tracer is None and plugin.operation_duration is None
