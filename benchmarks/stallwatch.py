"""Run an ``mcphost`` command in this process and report where its event loop stalls.

    python benchmarks/stallwatch.py OUT.txt [--threshold-ms 20] -- serve --port 8000 ...

A heartbeat callback on the event loop stamps the time every 2 ms; a watchdog thread samples the
loop thread's Python stack every 2 ms while the heartbeat is late. Each stall longer than the
threshold is written to OUT.txt with its length and its most frequent stacks (innermost frames
last), and garbage-collector passes longer than 5 ms are written with their generation. The
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
        self._gc_started = 0.0

    # -- on the loop ----------------------------------------------------------------------------
    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop_thread = threading.get_ident()

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
    def run(self) -> None:
        stacks: collections.Counter[tuple[str, ...]] = collections.Counter()
        stalled_since: float | None = None
        while True:
            time.sleep(_HEARTBEAT)
            now = time.monotonic()
            late = now - self.beat > 2 * _HEARTBEAT + 0.003
            if late and self.loop_thread is not None:
                if stalled_since is None:
                    stalled_since = self.beat
                frame = sys._current_frames().get(self.loop_thread)
                if frame is not None:
                    stack = tuple(f"{s.filename.rsplit('/', 2)[-2:][-1]}:{s.lineno} {s.name}"
                                  for s in traceback.extract_stack(frame)[-14:])
                    stacks[stack] += 1
            elif stalled_since is not None:
                took = self.beat - stalled_since
                if took >= self.threshold:
                    self.out.write(f"{stalled_since:.3f} stall {took * 1000:.0f} ms, {sum(stacks.values())} samples\n")
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
    watch = StallWatch(open(out_path, "a", buffering=1), threshold)  # noqa: SIM115 - lives as long as the process
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
