#!/usr/bin/env python3
"""Summarize a py-spy profile in the collapsed ("raw") format that ``bench_http.py --profile`` writes.

    python benchmarks/profile_summary.py /tmp/prof/mcphost-sse.txt [--top 25]

Prints where the sampled CPU time went: by component (mcphost's own modules, Hypercorn, h11,
Quart, asyncio, ...), by function with self time (the frame on top) and inclusive time (anywhere
on the stack). py-spy records only threads that are running, so percentages are of busy time.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")

COMPONENTS = (
    ("mcphost/transports", "mcphost.transports"),
    ("mcphost/kernel", "mcphost.kernel"),
    ("mcphost/builtin", "mcphost.builtin (memory backend)"),
    ("mcphost/", "mcphost (other)"),
    ("mcphost_demo", "demo plugin"),
    ("hypercorn/", "hypercorn"),
    ("h11/", "h11"),
    ("quart/", "quart"),
    ("werkzeug/", "werkzeug"),
    ("jsonschema", "jsonschema"),
    ("asyncio/", "asyncio"),
    ("raw_quart_app", "raw app route"),
)


def parse(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        stacks.append((stack.split(";"), int(count)))
    return stacks


def where(frame: str) -> tuple[str, str]:
    match = FRAME.match(frame)
    if match is None:
        return frame, ""
    return match.group("func"), match.group("file")


def short(frame: str) -> str:
    func, file = where(frame)
    parts = Path(file).parts
    for anchor in ("mcphost", "mcphost_demo", "hypercorn", "h11", "quart", "werkzeug", "asyncio", "jsonschema"):
        if anchor in parts:
            return f"{func} ({'/'.join(parts[parts.index(anchor):])})"
    if not func:
        return "(frame without a name: native or not resolved)"
    return f"{func} ({Path(file).name})" if file else func


def component(frame: str) -> str:
    _, file = where(frame)
    for needle, name in COMPONENTS:
        if needle in file:
            return name
    return "other (stdlib, C, interpreter)"


def _quiet_pipe() -> None:
    import signal
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` is fine


def main() -> int:
    _quiet_pipe()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    stacks = parse(args.profile)
    total = sum(count for _, count in stacks)
    if not total:
        print("no samples", file=sys.stderr)
        return 1
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    by_component: Counter[str] = Counter()
    for frames, count in stacks:
        frames = [f for f in frames if not f.startswith("process ") and not f.startswith("thread ")]
        if not frames:
            continue
        top = frames[-1]
        own[short(top)] += count
        by_component[component(top)] += count
        for name in {short(f) for f in frames}:
            inclusive[name] += count
    print(f"{args.profile.name}: {total} samples of busy CPU\n")
    print("self time by component (the function on top of the stack):")
    for name, count in by_component.most_common():
        print(f"  {100 * count / total:5.1f}%  {name}")
    print(f"\ntop {args.top} functions by self time:")
    for name, count in own.most_common(args.top):
        print(f"  {100 * count / total:5.1f}%  {name}")
    print(f"\ntop {args.top} functions by inclusive time (event-loop and CLI frames left out):")
    skip = ("asyncio/runners.py", "asyncio/base_events.py", "asyncio/events.py", "core.py", "decorators.py",
            "mcphost/cli.py", "<module>")
    shown = 0
    for name, count in inclusive.most_common():
        if any(part in name for part in skip):
            continue
        print(f"  {100 * count / total:5.1f}%  {name}")
        shown += 1
        if shown == args.top:
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
