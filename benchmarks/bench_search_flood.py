#!/usr/bin/env python3
"""Oversized search queries against a real server: each is refused at once, and the host stays live.

    python benchmarks/bench_search_flood.py [--seconds 10] [--clients 4] [--query-mb 3.6] [--json]

``mcphost serve`` (one worker, the demo plugin, ``[endpoints.find] discovery = "search"`` with the
default ``search_max_query`` of 1 KiB) on a free loopback port. ``--clients`` threads each send
``search_tools`` calls (2026-07-28, stateless) whose query is ``--query-mb`` MB (under the 4 MiB
body limit) in a loop for ``--seconds``; meanwhile one more thread asks ``/healthz`` every 20 ms.
Reported: how long each oversized call took to be answered and whether every answer was the clear
tool error (``isError``, "longer than 1024 bytes"); the server's CPU time per refusal (all of its
threads, over the flood, the probes included) and the load average at the start; ``/healthz`` p50,
p99 and max. Targets: every
refusal within 1 s; ``/healthz`` p99 < 50 ms and max < 250 ms.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib
import httpx
import orjson
from benchlib import running


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def flood(url: str, body: bytes, headers: dict[str, str], stop: float, results: Any) -> None:
    """One client: oversized searches until ``stop``; puts (answer times, answers that were not clear)."""
    took: list[float] = []
    wrong: list[str] = []
    with httpx.Client(timeout=30) as client:
        while time.monotonic() < stop:
            started = time.perf_counter()
            response = client.post(url, content=body, headers=headers)
            took.append(time.perf_counter() - started)
            reply = orjson.loads(response.content) if response.status_code == 200 else None
            result = reply.get("result") if isinstance(reply, dict) else None
            if not (isinstance(result, dict) and result.get("isError") is True
                    and "longer than 1024 bytes" in result["content"][0]["text"]):
                wrong.append(f"HTTP {response.status_code}: {response.text[:200]}")
    results.put((took, wrong))


def run(seconds: float, clients: int, query_mb: float) -> dict[str, Any]:
    with benchlib.workdir() as work:
        logdir = Path(work)
        server = benchlib.mcphost_server("flood", logdir)
        config = logdir / "search.toml"
        config.write_text('[endpoints.find]\ndiscovery = "search"\n')
        server.env["MCPHOST_CONFIG"] = str(config)
        with running(server):
            base = f"http://127.0.0.1:{server.port}"
            query = "x" * int(query_mb * 1_000_000)
            body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                 "params": {"name": "search_tools", "arguments": {"query": query},
                                            "_meta": benchlib.MODERN_META}})
            headers = benchlib.modern_headers("tools/call", "search_tools")
            load = os.getloadavg()[0]
            server_cpu = benchlib.cpu_seconds(server.pid)
            stop = time.monotonic() + seconds
            refusals: list[float] = []
            wrong: list[str] = []
            health: list[float] = []

            def probe() -> None:
                with httpx.Client(timeout=30) as client:
                    while time.monotonic() < stop:
                        started = time.perf_counter()
                        response = client.get(f"{base}/healthz")
                        health.append(time.perf_counter() - started)
                        if response.status_code != 200:
                            wrong.append(f"/healthz HTTP {response.status_code}")
                        time.sleep(0.02)

            # The flooding clients are processes of their own: in threads of this one they would hold
            # its interpreter lock while the probe waits, and /healthz would look slower than it is.
            results: multiprocessing.Queue[tuple[list[float], list[str]]] = multiprocessing.Queue()
            processes = [multiprocessing.Process(target=flood, args=(f"{base}/mcp/find", body, headers, stop, results))
                         for _ in range(clients)]
            for process in processes:
                process.start()
            probe()
            for _ in processes:
                took, bad = results.get(timeout=60)
                refusals.extend(took)
                wrong.extend(bad)
            for process in processes:
                process.join()
            server_cpu = benchlib.cpu_seconds(server.pid) - server_cpu
    return {"clients": clients, "query_bytes": len(query), "seconds": seconds, "refusals": len(refusals),
            "load_average": round(load, 1), "server_cpu_s": round(server_cpu, 2),
            "server_cpu_per_refusal_ms": server_cpu / len(refusals) * 1000 if refusals else float("nan"),
            "not_clear": len(wrong), "examples": wrong[:3],
            "refusal_p50_ms": percentile(refusals, 0.5) * 1000,
            "refusal_max_ms": max(refusals, default=float("nan")) * 1000,
            "healthz": len(health), "healthz_p50_ms": percentile(health, 0.5) * 1000,
            "healthz_p99_ms": percentile(health, 0.99) * 1000, "healthz_max_ms": max(health) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--query-mb", type=float, default=3.6)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    quiet = run(min(args.seconds, 5.0), 0, args.query_mb)  # /healthz alone first: the machine's own noise
    print(f"/healthz with no flood ({quiet['healthz']} probes): p50 {quiet['healthz_p50_ms']:.1f} ms, "
          f"p99 {quiet['healthz_p99_ms']:.1f} ms, max {quiet['healthz_max_ms']:.1f} ms")
    result = run(args.seconds, args.clients, args.query_mb)
    result["quiet"] = quiet
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['clients']} clients x {result['query_bytes'] / 1e6:.1f} MB queries for {result['seconds']:.0f} s: "
          f"{result['refusals']} refused, {result['not_clear']} without the clear error; each answered in "
          f"p50 {result['refusal_p50_ms']:.0f} ms, max {result['refusal_max_ms']:.0f} ms; server CPU "
          f"{result['server_cpu_s']:.2f} s ({result['server_cpu_per_refusal_ms']:.1f} ms per refusal), "
          f"load average {result['load_average']}")
    print(f"/healthz meanwhile ({result['healthz']} probes): p50 {result['healthz_p50_ms']:.1f} ms, "
          f"p99 {result['healthz_p99_ms']:.1f} ms, max {result['healthz_max_ms']:.1f} ms")
    for example in result["examples"]:
        print("  not clear:", example)


if __name__ == "__main__":
    main()
