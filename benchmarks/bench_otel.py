#!/usr/bin/env python3
"""CPU per echo tools/call inside the kernel, with and without the mcphost-otel plugin.

    python benchmarks/bench_otel.py [--requests 20000] [--rounds 5] [--json]

No HTTP and no load generator: the requests go straight into the kernel (the in-memory client
for the session era; validate + short-lived session + receive_modern for 2026-07-28, as the
HTTP transport does), and the figure is this process's CPU time per request, the best of
``--rounds`` rounds. That isolates what a middleware costs and stays steady on a busy machine,
where requests/s under wrk does not. Configurations:

  none       the demo tools only: the request path without telemetry;
  otel       plus OtelPlugin recording spans and metrics into SDK providers with no exporter;
  otel+bsp   plus a batch span processor feeding an exporter that drops everything (the
             per-request share of a real exporter, minus its encoding and network work).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import mcphost_demo

from mcphost.testing import MemoryClient, make_host

MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}}


def otel_plugin(batch: bool) -> Any:
    from mcphost_otel import OtelPlugin
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    tracer_provider = TracerProvider()
    if batch:
        tracer_provider.add_span_processor(BatchSpanProcessor(Drop()))
    return OtelPlugin(tracer_provider=tracer_provider, meter_provider=MeterProvider())


async def legacy_round(client: MemoryClient, count: int, start: int) -> float:
    params = {"name": "echo", "arguments": {"text": "hello"}}
    began = time.process_time()
    for number in range(start, start + count):
        reply = await client.raw_request("tools/call", params, request_id=number)
        assert reply["result"]["content"][0]["text"] == "hello"
    return time.process_time() - began


async def modern_round(host: Any, count: int, start: int) -> float:
    from mcphost.protocol.modern import validate_modern
    from mcphost.sessions.session import Connection

    kernel = host.kernel
    connection = Connection(transport="http", headers={}, remote="127.0.0.1:1")

    async def outlet(message: Any, related: Any) -> None:
        return None

    takes_connection = _takes_connection(kernel)  # once: inspect.signature costs more than the call
    began = time.process_time()
    for number in range(start, start + count):
        payload = {"jsonrpc": "2.0", "id": number, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"text": "hello"}, "_meta": MODERN_META}}
        request = validate_modern(payload, None)
        session = kernel.modern_session(request, None, outlet)
        await host.manager.open(session, connection, opening=True)
        try:
            args = (session, payload, connection) if takes_connection else (session, payload)
            reply = await kernel.receive_modern(*args)
        finally:
            await host.manager.close(session, "complete", end="complete")
        assert reply["result"]["content"][0]["text"] == "hello"
    return time.process_time() - began


def _takes_connection(kernel: Any) -> bool:
    import inspect
    return "connection" in inspect.signature(kernel.receive_modern).parameters


async def measure(config: str, requests: int, rounds: int) -> dict[str, Any]:
    plugins: list[Any] = [("demo", mcphost_demo)]
    if config != "none":
        plugins.append(("otel", otel_plugin(batch=config == "otel+bsp")))
    host = make_host(*plugins)
    out: dict[str, Any] = {"config": config}
    async with MemoryClient(host) as client:
        await legacy_round(client, 500, 0)  # warm up
        gc.collect()
        gc.freeze()
        out["legacy_us"] = round(min([await legacy_round(client, requests, 1000 + i * requests)
                                      for i in range(rounds)]) * 1e6 / requests, 1)
        await modern_round(host, 500, 0)
        out["modern_us"] = round(min([await modern_round(host, requests, 1000 + i * requests)
                                      for i in range(rounds)]) * 1e6 / requests, 1)
        gc.unfreeze()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", action="append", choices=("none", "otel", "otel+bsp"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    configs = args.only or ["none", "otel", "otel+bsp"]
    results = [asyncio.run(measure(config, args.requests, args.rounds)) for config in configs]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"CPU per echo tools/call in the kernel, best of {args.rounds} x {args.requests} requests")
    print(f"{'config':<10} {'session era µs':>15} {'2026-07-28 µs':>14}")
    base = next((r for r in results if r["config"] == "none"), None)
    for r in results:
        extra = ""
        if base is not None and r is not base:
            extra = f"   (+{r['legacy_us'] - base['legacy_us']:.1f} / +{r['modern_us'] - base['modern_us']:.1f} µs)"
        print(f"{r['config']:<10} {r['legacy_us']:>15} {r['modern_us']:>14}{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
