#!/usr/bin/env python3
"""What the console's answers weigh and how long they hold the event loop, with a huge catalog.

    python benchmarks/bench_console.py [--tools 200000] [--callers 5000] [--rounds 20]

A child process serves mcphost (console, and a plugin providing ``--tools`` tools credited to an
upstream, plus ``--callers`` callers the budgets ledger has refused) over real HTTP on loopback,
with a monitor task on its loop: a 1 ms sleep, again and again, noting how late it wakes (the
longest time the loop could not run it). A route of the child (``/bench/lag``) answers the worst
lateness since it was last asked, and forgets it. This process then asks, ``--rounds`` times each:

- ``/console/api/state`` (what the page polls every second);
- ``/console/api/catalog`` (the first page), a page at the end of the catalog, and a search;
- ``/console/api/budgets`` (a page of the callers);

and prints, per request kind, the answer's size and the loop's worst lateness during it (p50 and
max over the rounds), the request's wall time and the longest garbage collection during it (a
full collection walks every object of a heap holding 200 000 records), next to the lateness of an
idle second (the floor: the machine's own noise).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import httpx


def serve(tools: int, callers: int) -> None:
    """The child: build the host, serve it, print its base URL, run until stdin closes."""
    from mcphost_console import ConsolePlugin

    import mcphost
    from mcphost.records import Provenance, Tool
    from mcphost.testing import make_host, serve_http

    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}

    def look(q: str) -> str:
        return q

    origin = Provenance(plugin="many", origin="vendor")
    records = [Tool(name=f"vendor_tool_{i}", fn=look, input_schema=schema, provenance=origin,
                    description=f"Look up vendor record {i} in the inventory") for i in range(tools)]
    worst = [0.0, 0.0]  # the loop's worst lateness, the longest garbage collection, since last asked
    collecting = [0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collecting[0] = time.perf_counter()
        else:
            worst[1] = max(worst[1], time.perf_counter() - collecting[0])

    gc.callbacks.append(timed)

    class Many:
        @mcphost.hookimpl
        def mcphost_tools(self, host: Any) -> list[Any]:
            return records

        @mcphost.hookimpl
        def mcphost_routes(self, app: Any) -> None:
            async def lag() -> Any:
                seen, collected = worst
                worst[:] = [0.0, 0.0]
                return {"worst_ms": seen * 1000, "gc_ms": collected * 1000}
            app.add_url_rule("/bench/lag", "bench_lag", lag, methods=["GET"])

    async def monitor() -> None:
        while True:
            began = time.perf_counter()
            await asyncio.sleep(0.001)
            worst[0] = max(worst[0], time.perf_counter() - began - 0.001)

    async def main() -> None:
        host = make_host(("console", ConsolePlugin()), ("many", Many()))
        for i in range(callers):
            host.manager.budgets.count_refusal(f"a:10.{i // 65536}.{i // 256 % 256}.{i % 256}", "requests")
        async with serve_http(host) as live:
            task = asyncio.get_running_loop().create_task(monitor())
            print(json.dumps({"base": live.base, "url": live.url}), flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
            task.cancel()

    asyncio.run(main())


def measure(base: str, url: str, rounds: int, tools: int) -> dict[str, Any]:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
    accept = {"accept": "application/json, text/event-stream"}
    out: dict[str, Any] = {}
    with httpx.Client(timeout=120) as client:
        opened = client.post(url, json=init, headers=accept)
        session = {**accept, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        for i, arguments in enumerate([{"q": "x"}, {"q": "y"}, {}, {"q": 3}]):  # two served, two refused
            client.post(url, headers=session, json={"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                                                    "params": {"name": f"vendor_tool_{i * 7}", "arguments": arguments}})
        asks = {
            "state (each poll)": "/console/api/state",
            "catalog, first page": "/console/api/catalog",
            "catalog, last page": f"/console/api/catalog?offset={max(0, tools - 100)}",
            "catalog, search": "/console/api/catalog?q=vendor_tool_1999",
            "budgets, a page": "/console/api/budgets?offset=100",
        }
        client.get(base + "/bench/lag")
        time.sleep(1.0)
        out["idle second"] = client.get(base + "/bench/lag").json()
        first = time.perf_counter()
        client.get(base + asks["catalog, search"])  # the index is built once, in a worker thread
        out["first search (builds the index)"] = {"wall_ms": (time.perf_counter() - first) * 1000,
                                                  **client.get(base + "/bench/lag").json()}
        for name, path in asks.items():
            sizes, lags, walls, collections = [], [], [], []
            for _ in range(rounds):
                client.get(base + "/bench/lag")
                began = time.perf_counter()
                answer = client.get(base + path)
                walls.append((time.perf_counter() - began) * 1000)
                assert answer.status_code == 200, answer.text
                sizes.append(len(answer.content))
                lag = client.get(base + "/bench/lag").json()
                lags.append(lag["worst_ms"])
                collections.append(lag["gc_ms"])
                time.sleep(0.05)
            out[name] = {"bytes": max(sizes), "worst_ms_p50": statistics.median(lags), "worst_ms_max": max(lags),
                         "wall_ms_p50": statistics.median(walls), "gc_ms_max": max(collections)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=200_000)
    parser.add_argument("--callers", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.tools, args.callers)
        return
    began = time.perf_counter()
    child = subprocess.Popen([sys.executable, __file__, "--serve", "--tools", str(args.tools),
                              "--callers", str(args.callers)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert child.stdout is not None and child.stdin is not None
        where = json.loads(child.stdout.readline())
        print(f"{args.tools} tools, {args.callers} callers: serving after {time.perf_counter() - began:.1f} s "
              f"(load average {os.getloadavg()[0]:.1f})")
        results = measure(where["base"], where["url"], args.rounds, args.tools)
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=60)
    for name, figures in results.items():
        print(f"{name:34} " + "  ".join(f"{k} {v:,.1f}" if isinstance(v, float) else f"{k} {v:,}"
                                          for k, v in figures.items()))
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
