"""RELIABILITY H8 against a real ``mcphost serve``: client-chosen names never become metric values,
and ``/metrics`` (like every plugin route) passes the MCP endpoint's Host and Origin checks, with
optional authentication."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.http_plugins.bearer import TOKENS
from tests.support.http_plugins.harness import probe_env
from tests.support.http_support import HttpServer

PROMETHEUS = "[plugins.otel]\nprometheus = true\n"
OTEL_OFF = {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}


def start(tmp_path: Path, config: str, plugins: str = "demo,otel") -> HttpServer:
    env = {**probe_env(tmp_path), **OTEL_OFF, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    return HttpServer(tmp_path, plugins=plugins, env=env, config=config)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[HttpServer]:
    server = start(tmp_path, PROMETHEUS)
    try:
        yield server
    finally:
        server.stop()


def metrics_url(server: HttpServer) -> str:
    return server.url.replace("/mcp", "/metrics")


def test_unknown_tool_and_method_names_share_one_metric_value(served: HttpServer) -> None:
    with httpx.Client(timeout=10) as client:
        session_id = served.initialize(client)
        for number in range(40):
            for message in ({"jsonrpc": "2.0", "id": number, "method": "tools/call",
                             "params": {"name": f"no-such-tool-{number}", "arguments": {}}},
                            {"jsonrpc": "2.0", "id": f"m{number}", "method": f"made/up-{number}"},
                            {"jsonrpc": "2.0", "id": f"p{number}", "method": "prompts/get",
                             "params": {"name": f"no-such-prompt-{number}"}}):
                client.post(served.url, headers=served.headers(session_id), json=message)
        client.post(served.url, headers=served.headers(session_id), json={
            "jsonrpc": "2.0", "id": "e", "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "x"}}})
        scrape = client.get(metrics_url(served))
    assert scrape.status_code == 200
    assert "no-such" not in scrape.text and "made/up" not in scrape.text
    values: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(scrape.text):
        for sample in family.samples:
            for key, value in sample.labels.items():
                values.setdefault(key, set()).add(value)
    assert "_OTHER" in values["mcp_method_name"] and "_OTHER" in values["gen_ai_tool_name"], values
    assert "echo" in values["gen_ai_tool_name"] and "tools/call" in values["mcp_method_name"]
    assert len(values["gen_ai_tool_name"]) <= 3, values["gen_ai_tool_name"]


@pytest.mark.parametrize(("headers", "status"), [({"host": "evil.example"}, 421),
                                                 ({"host": "localhost:evil"}, 421),
                                                 ({"origin": "http://evil.example"}, 403)])
def test_metrics_and_plugin_routes_pass_the_host_and_origin_checks(
        served: HttpServer, headers: dict[str, str], status: int) -> None:
    with httpx.Client(timeout=10) as client:
        assert client.get(metrics_url(served)).status_code == 200
        assert client.get(metrics_url(served), headers=headers).status_code == status
        # The probes stay answerable for load balancers whatever Host they send.
        assert client.get(served.url.replace("/mcp", "/healthz"), headers=headers).status_code == 200


def test_plugin_routes_can_require_the_mcp_endpoint_authentication(tmp_path: Path) -> None:
    server = start(tmp_path, "[server]\nroutes_require_auth = true\n\n" + PROMETHEUS, plugins="demo,otel,httpbearer")
    try:
        with httpx.Client(timeout=10) as client:
            refused = client.get(metrics_url(server))
            assert refused.status_code == 401 and "www-authenticate" in refused.headers
            token = next(iter(TOKENS))
            allowed = client.get(metrics_url(server), headers={"authorization": f"Bearer {token}"})
            assert allowed.status_code == 200
    finally:
        server.stop()


def test_without_the_setting_routes_stay_open(tmp_path: Path) -> None:
    server = start(tmp_path, PROMETHEUS, plugins="demo,otel,httpbearer")
    try:
        assert httpx.get(metrics_url(server), timeout=10).status_code == 200
    finally:
        server.stop()

