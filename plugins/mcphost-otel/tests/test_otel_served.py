"""mcphost-otel as users run it: installed, found through its entry point, ``mcphost serve``.

A real ``mcphost serve`` process with ``[plugins.otel] prometheus = true`` is scraped over HTTP
and the text parsed with the Prometheus client library's own parser; ``mcphost plugins`` lists
the plugin with its hooks. Exporters are switched off with the standard ``OTEL_*`` variables.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcphost.testing import free_port

MCPHOST = Path(sys.executable).parent / "mcphost"
ACCEPT = "application/json, text/event-stream"
VERSION = "2025-11-25"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def environment(tmp_path: Path, config: str) -> dict[str, str]:
    config_file = tmp_path / "mcphost.toml"
    config_file.write_text(config, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPHOST_", "OTEL_"))}
    env.update({"MCPHOST_CONFIG": str(config_file), "MCPHOST_PLUGINS": "demo,otel",
                "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
                "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"})
    return env


def serve(tmp_path: Path, config: str, **env: str) -> Iterator[str]:
    """``mcphost serve`` on a free port; yields its base URL once ready, then stops it by pid."""
    port = free_port()
    log = open(tmp_path / "server.log", "wb")
    process = subprocess.Popen([str(MCPHOST), "serve", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT,
                               env={**environment(tmp_path, config), **env})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, (tmp_path / "server.log").read_text()
            try:
                if httpx.get(base + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "mcphost serve did not become ready"
            time.sleep(0.05)
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        log.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """A server with the Prometheus route on and every exporter off."""
    yield from serve(tmp_path, "[plugins.otel]\nprometheus = true\n")


def initialize(client: httpx.Client) -> dict[str, str]:
    response = client.post("/mcp", headers={"content-type": "application/json", "accept": ACCEPT}, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    return {"content-type": "application/json", "accept": ACCEPT, "mcp-protocol-version": VERSION,
            "mcp-session-id": response.headers["mcp-session-id"]}


class Collector(BaseHTTPRequestHandler):
    """A minimal OTLP/HTTP receiver: keeps each protobuf body by path."""

    received: dict[str, list[bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        self.received.setdefault(self.path, []).append(body)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_spans_and_metrics_reach_an_otlp_collector_configured_by_otel_variables(tmp_path: Path) -> None:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    received: dict[str, list[bytes]] = {}
    handler = type("Handler", (Collector,), {"received": received})
    collector = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=collector.serve_forever, daemon=True)
    thread.start()
    server = serve(tmp_path, "", OTEL_TRACES_EXPORTER="otlp", OTEL_METRICS_EXPORTER="otlp",
                   OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{collector.server_port}",
                   OTEL_SERVICE_NAME="weather-mcp", OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test")
    try:
        base = next(server)
        with httpx.Client(base_url=base) as client:
            headers = initialize(client)
            client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "echo", "arguments": {"text": "x"}, "_meta": {"traceparent": TRACEPARENT}}})
        next(server, None)  # SIGTERM: shutdown flushes both providers
    finally:
        server.close()
        collector.shutdown()
        thread.join(5)

    spans = []
    for body in received.get("/v1/traces", []):
        for resource_spans in ExportTraceServiceRequest.FromString(body).resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            spans.extend((resource, span) for scope in resource_spans.scope_spans for span in scope.spans)
    [(resource, span)] = [(r, s) for r, s in spans if s.name == "tools/call echo"]
    assert resource["service.name"] == "weather-mcp" and resource["deployment.environment"] == "test"
    assert span.trace_id.hex() == TRACEPARENT.split("-")[1] and span.parent_span_id.hex() == TRACEPARENT.split("-")[2]
    assert {a.key: a.value.string_value for a in span.attributes}["mcphost.plugin.name"] == "demo"
    names = {metric.name for body in received.get("/v1/metrics", [])
             for rm in ExportMetricsServiceRequest.FromString(body).resource_metrics
             for sm in rm.scope_metrics for metric in sm.metrics}
    assert {"mcp.server.operation.duration", "mcp.server.session.duration", "mcphost.server.active_sessions"} <= names


def test_a_real_scrape_shows_the_duration_histogram_with_tool_and_plugin_labels(served: str) -> None:
    with httpx.Client(base_url=served) as client:
        session = initialize(client)
        for n in range(3):
            called = client.post("/mcp", headers=session, json={
                "jsonrpc": "2.0", "id": 2 + n, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "x"}}})
            assert '"text":"x"' in called.text
        scrape = client.get("/metrics")

    assert scrape.status_code == 200 and scrape.headers["content-type"].startswith("text/plain")
    families = {family.name: family for family in text_string_to_metric_families(scrape.text)}
    histogram = families["mcp_server_operation_duration_seconds"]
    assert histogram.type == "histogram" and histogram.unit in ("", "seconds")
    echo = [s for s in histogram.samples if s.labels.get("gen_ai_tool_name") == "echo"]
    count = [s for s in echo if s.name.endswith("_count")]
    assert len(count) == 1 and count[0].value == 3
    labels = count[0].labels
    assert (labels["mcp_method_name"], labels["mcphost_plugin_name"], labels["mcphost_plugin_version"]) == (
        "tools/call", "demo", "0.1.0")
    assert labels["network_transport"] == "tcp" and labels["mcp_protocol_version"] == VERSION
    buckets = [s for s in echo if s.name.endswith("_bucket")]
    assert [s.labels["le"] for s in buckets][:3] == ["0.01", "0.02", "0.05"] and buckets[-1].value == 3
    [active] = families["mcphost_server_active_sessions"].samples
    assert active.value == 1


def test_mcphost_plugins_lists_mcphost_otel_with_its_hooks(tmp_path: Path) -> None:
    done = subprocess.run([str(MCPHOST), "plugins", "--json"], capture_output=True, text=True, timeout=60,
                          env=environment(tmp_path, ""))
    assert done.returncode == 0, done.stderr
    [otel] = [p for p in json.loads(done.stdout) if p["name"] == "otel"]
    assert (otel["distribution"], otel["version"], otel["status"]) == ("mcphost-otel", "0.1.0", "active")
    assert otel["hooks"] == ["mcphost_exception", "mcphost_middleware", "mcphost_routes", "mcphost_settings",
                             "mcphost_shutdown", "mcphost_startup", "mcphost_terminate", "mcphost_unconfigured"]
    assert otel["provides"] == {"middleware": ["otel"]}
    table = subprocess.run([str(MCPHOST), "plugins"], capture_output=True, text=True, timeout=60,
                           env=environment(tmp_path, ""))
    [row] = [line for line in table.stdout.splitlines() if line.startswith("otel ")]
    assert row.split() == ["otel", "0.1.0", "active", "1", "middleware"]


def test_without_a_destination_mcphost_otel_is_dormant_and_quiet(tmp_path: Path) -> None:
    """No OTEL_* variable, no Prometheus: listed as not configured, and a call prints nothing on stderr
    (no exporter retrying a collector that is not there)."""
    env = {k: v for k, v in environment(tmp_path, "").items() if not k.startswith("OTEL_")}
    done = subprocess.run([str(MCPHOST), "plugins", "--json"], capture_output=True, text=True, timeout=60, env=env)
    [otel] = [p for p in json.loads(done.stdout) if p["name"] == "otel"]
    assert (otel["status"], otel["wake"], otel["provides"]) == ("not configured", "OTEL_EXPORTER_OTLP_ENDPOINT", {})
    called = subprocess.run([str(MCPHOST), "call", "echo", "--arg", "text=hi"], capture_output=True, text=True,
                            timeout=60, env=env)
    assert called.returncode == 0 and called.stderr == ""
