"""Prometheus with ``mcphost serve --workers 2``: one ``/metrics`` counting the calls every worker served.

A real supervisor with two workers on a real Redis backend; a ``whoami`` tool answers the pid of
the worker that ran it, so the test knows both served calls, and one scrape must count them all.
``OTEL_METRICS_EXPORTER=prometheus`` is set too: it must not make any process bind a port of its own.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcphost_otel.workers import Snapshots, merge
from mcphost_redis.testing import RedisServer, redis_server_path
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from tests.support.fixtures.distributions import make_distribution
from tests.support.http_support import ACCEPT_BOTH, HttpServer

REPO_ROOT = Path(__file__).resolve().parents[3]
MODERN = "2026-07-28"
WHOAMI = '''
import os

import mcphost


@mcphost.tool
def whoami() -> str:
    """The pid of the worker that answers."""
    return str(os.getpid())


@mcphost.hookimpl
def mcphost_tools(host):
    return [whoami]
'''


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    if redis_server_path() is None:
        pytest.skip("redis-server is not installed (scripts/ensure-tools installs it)")
    server = RedisServer(tmp_path / "redis")
    yield server
    server.stop()


def call(url: str) -> str:
    # A new connection each time, so the kernel hands calls to both workers.
    response = httpx.post(url, headers={"content-type": "application/json", "accept": ACCEPT_BOTH,
                                        "mcp-protocol-version": MODERN, "mcp-method": "tools/call",
                                        "mcp-name": "whoami"},
                          json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                "params": {"name": "whoami", "arguments": {},
                                           "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                                                     "io.modelcontextprotocol/clientCapabilities": {}}}},
                          timeout=10)
    assert response.status_code == 200, response.text
    return str(response.json()["result"]["content"][0]["text"])


def whoami_calls(text: str) -> float:
    families = {family.name: family for family in text_string_to_metric_families(text)}
    histogram = families["mcp_server_operation_duration_seconds"]
    return sum(s.value for s in histogram.samples
               if s.name.endswith("_count") and s.labels.get("gen_ai_tool_name") == "whoami")


def test_one_scrape_counts_the_calls_of_both_workers_and_nothing_else_binds(tmp_path: Path,
                                                                            redis: RedisServer) -> None:
    site = tmp_path / "site"
    make_distribution(site, "mcphost-whoami", "1.0", {"whoami": "whoami_plugin"}, {"whoami_plugin": WHOAMI})
    config = (f'[plugins.redis]\nurl = "{redis.url}"\nprefix = "prom{os.getpid()}:"\n\n'
              "[plugins.otel]\nprometheus_interval = 0.2\n")
    env = {"PYTHONPATH": f"{site}:{REPO_ROOT}", "OTEL_METRICS_EXPORTER": "prometheus",
           "OTEL_TRACES_EXPORTER": "none", "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    server = HttpServer(tmp_path, plugins="whoami,redis,otel", env=env, config=config, args=["--workers", "2"])
    try:
        deadline = time.monotonic() + 30
        pids: list[str] = []
        while len(set(pids)) < 2 or len(pids) < 20:
            assert time.monotonic() < deadline, f"both workers never answered: {set(pids)}\n{server.log()}"
            try:
                pids.append(call(server.url))
            except (httpx.TransportError, AssertionError):
                time.sleep(0.1)  # a worker still starting
        time.sleep(0.5)  # the other worker's snapshot is at most prometheus_interval old
        scrape = httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=10)
        assert scrape.status_code == 200
        assert whoami_calls(scrape.text) == len(pids)
        # The SDK's own Prometheus server (port 9464) was never started: no second bind, no bind error.
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", 9464)) != 0
        assert "Address already in use" not in server.log() and "Traceback" not in server.log()
    finally:
        server.stop()


def test_merging_adds_counters_and_histograms_and_keeps_target_info_once() -> None:
    worker = ('# HELP target_info Target metadata\n# TYPE target_info gauge\ntarget_info{service_name="m"} 1.0\n'
              "# HELP calls_total Calls\n# TYPE calls_total counter\ncalls_total{tool=\"a\"} {n}\n"
              "# HELP d Duration\n# TYPE d histogram\n"
              'd_bucket{le="1.0"} {n}\nd_bucket{le="+Inf"} {n}\nd_count {n}\nd_sum {n}\n')
    families = {f.name: f for f in merge([worker.replace("{n}", "2"), worker.replace("{n}", "3")])}
    assert [s.value for s in families["target_info"].samples] == [1.0]
    assert [s.value for s in families["calls"].samples] == [5.0]
    assert {s.name: s.value for s in families["d"].samples if s.name != "d_bucket"} == {"d_count": 5.0,
                                                                                     "d_sum": 5.0}


def test_a_scrape_writing_while_the_snapshot_thread_writes_never_fails(tmp_path: Path) -> None:
    # A scrape writes this worker's snapshot fresh while the snapshot thread may be writing it too;
    # both share one temporary file, and a replace that found it moved made the scrape a 500.
    registry = CollectorRegistry()
    Counter("calls", "Calls", registry=registry).inc()
    snapshots = Snapshots(registry, tmp_path)
    errors: list[BaseException] = []

    def write_often() -> None:
        for _ in range(500):
            try:
                snapshots.write()
            except Exception as error:
                errors.append(error)

    writers = [threading.Thread(target=write_often) for _ in range(2)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert errors == []
    assert [s.value for s in merge([snapshots.path.read_text()])[0].samples if s.name == "calls_total"] == [1.0]
