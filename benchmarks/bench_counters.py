#!/usr/bin/env python3
"""What the per-tool counters (mcphost/stats.py, read by mcphost-console) cost per tools/call.

    python benchmarks/bench_counters.py [--calls 10000] [--rounds 8]

Two figures, both in this process and bounded in time (a few seconds):

1. ``ToolStats.add`` alone: the two ``perf_counter()`` reads and the integer adds and ring store
   that every call pays, in nanoseconds per call.
2. A whole echo ``tools/call`` through the kernel (in-memory client, session era, no HTTP), with
   the counters as shipped and with them switched off (``ToolStats.add`` a no-op and the kernel's
   clock reads answering a constant: what is left, two trivial calls, is under 0.1 us), alternating
   rounds; CPU microseconds per call and the difference, for the fastest
   round (the least disturbed by other work on the machine) and the median one.
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
    clock, add = handlers.perf_counter, ToolStats.add
    if not counted:
        handlers.perf_counter = float  # type: ignore[assignment]  # float() answers 0.0 at once
        ToolStats.add = lambda self, started, ended, error: None  # type: ignore[method-assign]
    try:
        host = make_host(("echo", Echo()))
        await host.start()
        try:
            async with MemoryClient(host) as client:
                for _ in range(200):  # warm-up
                    await client.call_tool("echo", {"text": "hi"})
                started = time.process_time()  # CPU time: a busy machine's scheduling does not count
                for _ in range(calls):
                    await client.call_tool("echo", {"text": "hi"})
                return (time.process_time() - started) / calls
        finally:
            await host.stop()
    finally:
        handlers.perf_counter, ToolStats.add = clock, add  # type: ignore[method-assign]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    print(f"ToolStats.add with two perf_counter() reads: {add_cost(200_000) * 1e9:.0f} ns per call")
    with_counters: list[float] = []
    without: list[float] = []
    for number in range(args.rounds):  # alternate which goes first: a busy machine drifts
        for counted in ((False, True) if number % 2 == 0 else (True, False)):
            (with_counters if counted else without).append(await calls_cost(args.calls, counted=counted))
    print(f"echo tools/call through the kernel, {args.rounds} rounds x {args.calls} calls:")
    for label, pick in (("fastest round", min), ("median round", statistics.median)):
        on, off = pick(with_counters), pick(without)
        print(f"  {label}: counters off {off * 1e6:.2f} us, counted {on * 1e6:.2f} us, "
              f"difference {(on - off) * 1e9:+.0f} ns ({(on / off - 1) * 100:+.2f}%)")
    print(f"  rounds off:     {', '.join(f'{v * 1e6:.2f}' for v in without)}")
    print(f"  rounds counted:  {', '.join(f'{v * 1e6:.2f}' for v in with_counters)}")


if __name__ == "__main__":
    asyncio.run(main())
