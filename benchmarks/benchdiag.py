"""A diagnostic plugin for the reliability benchmarks, and ``mcphost serve`` with it loaded.

    python benchmarks/benchdiag.py serve --host 127.0.0.1 --port 8123     # what benchlib.diag_server runs

Loaded only by the benchmarks (never installed, no entry point): ``mcphost`` has no production
route that reports its own task count or session registry, and none should exist. The tools:

- ``diag_stats``: the server's own view: sessions in the registry (``host.sessions``),
  ``asyncio.all_tasks()``, open file descriptors, RSS. The benchmarks call it with a stateless
  2026-07-28 request, which adds no session (its own task is counted, the same in every reading).
- ``diag_wait(token, steps, interval_ms)``: sends ``steps`` progress notifications ``interval_ms``
  apart and records, under ``token``, when it started, how far it got and when (``time.monotonic()``,
  the same clock in every process on Linux) its ``CancelledError`` arrived.
- ``diag_report(tokens)``: those records (and forgets them).
- ``diag_flood(count, interval_ms, pad)``: ``count`` progress notifications with a ``pad``-byte message.
- ``diag_memory(top)``: with ``PYTHONTRACEMALLOC`` set, the allocation sites that grew most since
  the previous call (for hunting a slow RSS growth).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

import mcphost
from mcphost import Context

RECORDS: dict[str, dict[str, Any]] = {}


@mcphost.tool
async def diag_stats(*, ctx: Context) -> dict[str, Any]:
    """The server's sessions, asyncio tasks, open file descriptors and RSS."""
    rss = 0
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return {"sessions": len(ctx.host.sessions), "tasks": len(asyncio.all_tasks()),
            "fds": len(os.listdir("/proc/self/fd")), "rss": rss, "records": len(RECORDS)}


@mcphost.tool
async def diag_wait(token: str, steps: int = 20, interval_ms: int = 10, *, ctx: Context) -> str:
    """Progress every interval_ms, steps times; records when a cancellation arrives."""
    record = RECORDS[token] = {"started": time.monotonic(), "step": 0, "cancelled": None, "finished": None}
    try:
        for step in range(1, steps + 1):
            await asyncio.sleep(interval_ms / 1000)
            await ctx.progress(step, total=steps)
            record["step"] = step
    except asyncio.CancelledError:
        record["cancelled"] = time.monotonic()
        raise
    record["finished"] = time.monotonic()
    return f"done {steps}"


@mcphost.tool
async def diag_report(tokens: list[str]) -> dict[str, Any]:
    """The records of diag_wait for these tokens (removed once reported)."""
    return {token: RECORDS.pop(token, None) for token in tokens}


@mcphost.tool
async def diag_flood(count: int = 1000, interval_ms: int = 20, pad: int = 1024, *, ctx: Context) -> str:
    """count progress notifications interval_ms apart, each with a pad-byte message."""
    message = "x" * pad
    for step in range(1, count + 1):
        await ctx.progress(step, total=count, message=message)
        await asyncio.sleep(interval_ms / 1000)
    return f"flooded {count}"


SNAPSHOT: list[Any] = []


@mcphost.tool
async def diag_memory(top: int = 15) -> list[str]:
    """With PYTHONTRACEMALLOC set: the allocation sites that grew most since the previous call."""
    import gc
    import tracemalloc

    if not tracemalloc.is_tracing():
        return ["tracemalloc is not tracing (start the server with PYTHONTRACEMALLOC=1)"]
    gc.collect()
    snapshot = tracemalloc.take_snapshot()
    previous = SNAPSHOT[:] or [snapshot]
    SNAPSHOT[:] = [snapshot]
    return [str(stat) for stat in snapshot.compare_to(previous[0], "lineno")[:top]]


class Diag:
    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        return [diag_stats, diag_wait, diag_report, diag_flood, diag_memory]


def main() -> None:
    """``mcphost`` on the command line, with this plugin registered next to the installed ones."""
    from mcphost import cli
    from mcphost.host import Host

    original = Host.__init__

    def with_diag(self: Host, config: Any = None, *, plugins: Any = (), **options: Any) -> None:
        original(self, config, plugins=[*plugins, ("benchdiag", Diag())], **options)

    Host.__init__ = with_diag  # type: ignore[method-assign]
    sys.argv[0] = "mcphost"
    cli.main()


if __name__ == "__main__":
    main()
