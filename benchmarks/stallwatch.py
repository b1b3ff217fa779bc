"""Run an ``mcphost`` command in this process and report where its event loop stalls.

    python benchmarks/stallwatch.py OUT.txt [--threshold-ms 20] -- serve --port 8000 ...

A heartbeat callback on the event loop stamps the time every 2 ms; a watchdog thread samples the
loop thread's Python stack every 2 ms while the heartbeat is late. Each stall longer than the
threshold is written to OUT.txt with its length, how long the loop thread ran and waited for a
CPU meanwhile (Linux schedstat: a stall the thread spent waiting for a CPU is the machine's load,
not the host's code; neither running nor waiting is mostly waiting for the interpreter lock), its
most frequent stacks (innermost frames last); collections longer than 5 ms are written too. The
samples need the interpreter lock, so a stall inside one long C call (a collection, one big
``orjson.loads``) shows as the frame that made the call.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import sys
import threading
import time
import traceback
from typing import Any, TextIO

_HEARTBEAT = 0.002


class StallWatch(threading.Thread):
    def __init__(self, out: TextIO, threshold: float) -> None:
        super().__init__(daemon=True, name="stallwatch")
        self.out = out
        self.threshold = threshold
        self.beat = time.monotonic()
        self.loop_thread: int | None = None
        self.loop_native: int | None = None
        self._gc_started = 0.0

    # -- on the loop ----------------------------------------------------------------------------
    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop_thread = threading.get_ident()
        self.loop_native = threading.get_native_id()

        def heartbeat() -> None:
            self.beat = time.monotonic()
            loop.call_later(_HEARTBEAT, heartbeat)

        loop.call_soon(heartbeat)
        gc.callbacks.append(self._gc)

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        if threading.get_ident() != self.loop_thread:
            return
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            took = time.perf_counter() - self._gc_started
            if took > 0.005:
                self.out.write(f"{time.monotonic():.3f} gc generation {info['generation']}: {took * 1000:.1f} ms, "
                               f"collected {info['collected']}\n")
                self.out.flush()

    # -- in the watchdog thread -------------------------------------------------------------------
    def schedstat(self) -> tuple[float, float]:
        """The loop thread's CPU time and time spent waiting for a CPU (s), from Linux's schedstat."""
        try:
            with open(f"/proc/self/task/{self.loop_native}/schedstat") as f:
                ran, waited, _ = f.read().split()
            return int(ran) / 1e9, int(waited) / 1e9
        except (OSError, ValueError):
            return float("nan"), float("nan")

    def run(self) -> None:
        stacks: collections.Counter[tuple[str, ...]] = collections.Counter()
        stalled_since: float | None = None
        sched = (0.0, 0.0)
        while True:
            time.sleep(_HEARTBEAT)
            now = time.monotonic()
            late = now - self.beat > 2 * _HEARTBEAT + 0.003
            if late and self.loop_thread is not None:
                if stalled_since is None:
                    stalled_since = self.beat
                    sched = self.schedstat()
                frame = sys._current_frames().get(self.loop_thread)
                if frame is not None:
                    stack = tuple(f"{s.filename.rsplit('/', 2)[-2:][-1]}:{s.lineno} {s.name}"
                                  for s in traceback.extract_stack(frame)[-14:])
                    stacks[stack] += 1
            elif stalled_since is not None:
                took = self.beat - stalled_since
                if took >= self.threshold:
                    ran, waited = (b - a for a, b in zip(sched, self.schedstat(), strict=True))
                    self.out.write(f"{stalled_since:.3f} stall {took * 1000:.0f} ms, {sum(stacks.values())} samples; "
                                   f"the loop thread ran {ran * 1000:.0f} ms and waited for a CPU {waited * 1000:.0f} "
                                   "ms\n")
                    for stack, count in stacks.most_common(4):
                        self.out.write(f"  [{count}]\n" + "".join(f"      {line}\n" for line in stack))
                    self.out.flush()
                stacks.clear()
                stalled_since = None


def main() -> None:
    args = sys.argv[1:]
    out_path, args = args[0], args[1:]
    threshold = 0.02
    if args[:1] == ["--threshold-ms"]:
        threshold, args = float(args[1]) / 1000, args[2:]
    if args[:1] == ["--switch-interval-ms"]:  # an experiment: how the interpreter lock is handed over
        sys.setswitchinterval(float(args[1]) / 1000)
        args = args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    watch = StallWatch(open(out_path, "a", buffering=1), threshold)  # lives as long as the process
    original = asyncio.BaseEventLoop.run_forever

    def run_forever(self: asyncio.BaseEventLoop) -> None:
        if watch.loop_thread is None:
            watch.attach(self)
        return original(self)

    asyncio.BaseEventLoop.run_forever = run_forever  # type: ignore[method-assign]
    watch.start()
    from mcphost.cli import main as cli

    sys.argv = ["mcphost", *args]
    cli()


if __name__ == "__main__":
    main()
