"""A misbehaving plugin for bench_isolation.py, and ``mcphost serve`` with it loaded.

    python benchmarks/benchunruly.py serve --host 127.0.0.1 --port 8123

Loaded only by that benchmark (never installed, no entry point). Its tools do what a careless or
hostile plugin does: ``unruly_exit`` calls ``sys.exit(2)`` synchronously (an argparse CLI given
bad arguments), ``unruly_interrupt`` raises ``KeyboardInterrupt`` on the event loop, and
``unruly_block(seconds)`` blocks its thread with ``time.sleep``.

With ``$MCPHOST_BENCH_LOOP_REPORT`` set to a file, it also records what the server's own event loop
went through (bench_isolation.py ``--loop-report``): every time a 2 ms sleep on the loop overslept
by more than 2 ms (something held the loop, or the process did not get its core), and every
garbage collection (generation, milliseconds), with ``time.monotonic()`` stamps; the file is
rewritten every second and at shutdown. With ``$MCPHOST_BENCH_PROFILE`` set to a file, the whole
server runs under cProfile and the statistics are dumped there when it exits.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

import orjson

import mcphost


@mcphost.tool
def unruly_exit() -> str:
    sys.exit(2)


@mcphost.tool
async def unruly_interrupt() -> str:
    raise KeyboardInterrupt


@mcphost.tool
def unruly_block(seconds: float = 5.0) -> str:
    time.sleep(seconds)
    return "woke up"


class LoopRecorder:
    """Loop stalls and garbage collections of this process, written to ``path`` as JSON."""

    PROBE = 0.002  # seconds the probe sleeps
    STALL = 0.002  # oversleeping beyond this is recorded

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.stalls: list[tuple[float, float]] = []  # (monotonic, ms)
        self.collections: list[tuple[float, int, float]] = []  # (monotonic, generation, ms)
        self._gc_started = 0.0
        self._task: asyncio.Task[None] | None = None

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.collections.append((time.monotonic(), info["generation"],
                                     round((time.perf_counter() - self._gc_started) * 1000, 3)))

    async def _probe(self) -> None:
        written = time.monotonic()
        while True:
            started = time.perf_counter()
            await asyncio.sleep(self.PROBE)
            late = time.perf_counter() - started - self.PROBE
            if late > self.STALL:
                self.stalls.append((time.monotonic(), round(late * 1000, 2)))
            if time.monotonic() - written > 1.0:
                written = time.monotonic()
                self.write()

    def start(self) -> None:
        gc.callbacks.append(self._on_gc)
        self._task = asyncio.get_running_loop().create_task(self._probe())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        self.write()

    def write(self) -> None:
        self.path.write_bytes(orjson.dumps({"probe_ms": self.PROBE * 1000, "stalls": self.stalls,
                                            "collections": self.collections}))


class Unruly:
    def __init__(self) -> None:
        report = os.environ.get("MCPHOST_BENCH_LOOP_REPORT")
        self.recorder = LoopRecorder(report) if report else None

    @mcphost.hookimpl
    async def mcphost_startup(self, host: Any) -> None:
        if self.recorder is not None:
            self.recorder.start()

    @mcphost.hookimpl
    async def mcphost_shutdown(self, host: Any) -> None:
        if self.recorder is not None:
            self.recorder.stop()

    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        return [unruly_exit, unruly_interrupt, unruly_block]


def main() -> None:
    """``mcphost`` on the command line, with this plugin registered next to the installed ones."""
    from mcphost import cli
    from mcphost.host import Host

    original = Host.__init__

    def with_unruly(self: Host, config: Any = None, *, plugins: Any = (), **options: Any) -> None:
        original(self, config, plugins=[*plugins, ("benchunruly", Unruly())], **options)

    Host.__init__ = with_unruly  # type: ignore[method-assign]
    sys.argv[0] = "mcphost"
    profile_path = os.environ.get("MCPHOST_BENCH_PROFILE")
    if not profile_path:
        cli.main()
        return
    import cProfile

    profiler = cProfile.Profile()
    try:
        profiler.runcall(cli.main)
    finally:
        profiler.dump_stats(profile_path)


if __name__ == "__main__":
    main()
