#!/usr/bin/env python3
"""What the per-tool counters (mcphost/stats.py, read by mcphost-console) cost per tools/call.

    python benchmarks/bench_counters.py [--calls 20000] [--rounds 5]

Two figures, both in this process and bounded in time (a few seconds):

1. ``ToolStats.add`` alone: the two ``perf_counter()`` reads and the integer adds and ring store
   that every call pays, in nanoseconds per call.
2. A whole echo ``tools/call`` through the kernel (in-memory client, session era, no HTTP), with
   the counters as shipped and with them bypassed (``_invoke_tool`` replaced by the uncounted
   ``_run_tool``), alternating rounds; microseconds per call and the difference, median of rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import timeit

import mcphost
from mcphost.kernel import handlers
from mcphost.stats import ToolStats
from mcphost.testing import MemoryClient, make_host


@mcphost.tool
async def echo(text: str) -> str:
    """Return the text."""
    return text


class Echo:
    @mcphost.hookimpl
    def mcphost_tools(self, host: object) -> list[object]:
        return [echo]


def add_cost(number: int) -> float:
    stats = ToolStats()
    clock = time.perf_counter

    def one() -> None:
        started = clock()
        stats.add(started, clock(), False)

    return min(timeit.repeat(one, number=number, repeat=5)) / number


async def calls_cost(calls: int, counted: bool) -> float:
    original = handlers._invoke_tool
    if not counted:
        handlers._invoke_tool = handlers._run_tool
    try:
        host = make_host(("echo", Echo()))
        await host.start()
        try:
            async with MemoryClient(host) as client:
                for _ in range(200):  # warm-up
                    await client.call_tool("echo", {"text": "hi"})
                started = time.perf_counter()
                for _ in range(calls):
                    await client.call_tool("echo", {"text": "hi"})
                return (time.perf_counter() - started) / calls
        finally:
            await host.stop()
    finally:
        handlers._invoke_tool = original


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"ToolStats.add with two perf_counter() reads: {add_cost(200_000) * 1e9:.0f} ns per call")
    with_counters: list[float] = []
    without: list[float] = []
    for _ in range(args.rounds):
        without.append(await calls_cost(args.calls, counted=False))
        with_counters.append(await calls_cost(args.calls, counted=True))
    on, off = statistics.median(with_counters), statistics.median(without)
    print(f"echo tools/call through the kernel, median of {args.rounds} rounds x {args.calls} calls:")
    print(f"  counters bypassed {off * 1e6:.2f} us, counted {on * 1e6:.2f} us, "
          f"difference {(on - off) * 1e9:+.0f} ns ({(on / off - 1) * 100:+.2f}%)")
    print(f"  rounds bypassed: {', '.join(f'{v * 1e6:.2f}' for v in without)}")
    print(f"  rounds counted:  {', '.join(f'{v * 1e6:.2f}' for v in with_counters)}")


if __name__ == "__main__":
    asyncio.run(main())
