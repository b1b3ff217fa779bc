"""``stubborn``: a tool and a resource whose handlers swallow their cancellation and sleep on.

Each ignores every cancellation until :func:`release` is called (an in-process test's cleanup); in
a ``mcphost serve`` subprocess they never end. Each appends a line to the file named by
``MCPHOST_STUBBORN_TRACE`` when it starts and each time it swallows a cancellation. Used by
``tests/interaction/test_handler_deadlines.py`` (HTTP in process, and ``mcphost serve --stdio``).
"""

from __future__ import annotations

import asyncio
import os
import threading

import mcphost

TRACE_ENV = "MCPHOST_STUBBORN_TRACE"

#: Set by :func:`release` so the handlers a test abandoned end with it.
_released = threading.Event()


def release() -> None:
    _released.set()


def rearm() -> None:
    _released.clear()


def _trace(line: str) -> None:
    path = os.environ.get(TRACE_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")


async def _sleep_on(what: str) -> None:
    _trace(f"start {what}")
    while not _released.is_set():
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            _trace(f"swallowed {what}")


@mcphost.hookimpl
def mcphost_tools(host: object) -> list[object]:
    @mcphost.tool()
    async def hang() -> str:
        """Sleeps for ever, ignoring cancellation."""
        await _sleep_on("tool")
        return "released"

    @mcphost.tool()
    async def hang_reporting(ctx: mcphost.Context) -> str:
        """Reports progress every 50 ms for ever, ignoring cancellation."""
        _trace("start tool")
        step = 0
        while not _released.is_set():
            step += 1
            try:
                await ctx.report_progress(step)
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                _trace("swallowed tool")
        return "released"
    return [hang, hang_reporting]


@mcphost.hookimpl
def mcphost_resources(host: object) -> list[object]:
    @mcphost.resource("stubborn://forever", name="forever")
    async def forever() -> str:
        await _sleep_on("resource")
        return "released"
    return [forever]
