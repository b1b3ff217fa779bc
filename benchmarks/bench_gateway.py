"""mcphost-proxy at gateway scale: 50 upstreams x 200 tools, the host loop's stalls, CPU per re-collection.

Part 1 starts ``mcphost serve`` with only the proxy plugin mounting ``--upstreams`` generated
upstreams of ``--tools`` tools each (benchmarks/gateway_upstream.py, the official Python SDK's
``MCPServer`` or a raw JSON-RPC one), probes ``/healthz`` every 50 ms from a thread of this process,
and reports the time until every upstream is mounted and the probe latencies during start-up and
during ``--changes`` ``list_changed`` spread over the upstreams (each a call of an upstream's
``bump`` tool through the host, which adds a tool upstream and announces it).

Part 2 runs a host in this process with one (raw) upstream of 200, 2 000 and 20 000 tools (stdio;
then 2 000 and 20 000 over Streamable HTTP, JSON bodies) and measures
the CPU (this process, worker threads included) and the loop's longest stall per re-collection
after a ``list_changed``: it should grow linearly with the upstream's tools.

Part 3, in this process too: one upstream reply line of 300 MiB (over ``max_message_bytes``) and a
flood of 200 000 log notifications: the loop's longest stall, the error, the next call, the host log.

    python benchmarks/bench_gateway.py [--upstream sdk|raw] [--json out.json]

Bounded: every wait has a deadline; the servers are stopped by pid.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
from benchlib import (
    free_port,
    headers,
    machine_facts,
    mcphost_executable,
    messages_of,
    open_session,
    percentile,
    save_report,
    session_call,
    sigterm_as_interrupt,
    workdir,
)

HERE = Path(__file__).resolve().parent
UPSTREAM = HERE / "gateway_upstream.py"


class Prober(threading.Thread):
    """GET /healthz every 50 ms; records (time sent, latency) of every answered probe."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.samples: list[tuple[float, float]] = []
        self.failures = 0
        self.stop = threading.Event()
        self.first: float | None = None

    def run(self) -> None:
        with httpx.Client(timeout=10) as client:
            while not self.stop.is_set():
                sent = time.monotonic()
                try:
                    response = client.get(self.url)
                    if response.status_code == 200:
                        self.samples.append((sent, time.monotonic() - sent))
                        if self.first is None:
                            self.first = sent
                    else:
                        self.failures += 1
                except httpx.HTTPError:
                    if self.first is not None:
                        self.failures += 1
                self.stop.wait(max(0.0, 0.05 - (time.monotonic() - sent)))

    def window(self, start: float, end: float) -> dict[str, Any]:
        values = [latency * 1000 for sent, latency in self.samples if start <= sent <= end]
        return {"probes": len(values), "p50_ms": round(percentile(values, 50), 1),
                "p99_ms": round(percentile(values, 99), 1), "max_ms": round(max(values, default=float("nan")), 1)}


def _count(log: Path, pattern: re.Pattern[str]) -> int:
    try:
        return len(pattern.findall(log.read_text(errors="replace")))
    except OSError:
        return 0


def _wait_count(log: Path, pattern: re.Pattern[str], want: int, deadline: float) -> float | None:
    while time.monotonic() < deadline:
        if _count(log, pattern) >= want:
            return time.monotonic()
        time.sleep(0.05)
    return None


def baseline(args: argparse.Namespace, tmp: Path, seconds: float = 8.0) -> dict[str, Any]:
    """/healthz of the same host with no upstream, probed as in part 1: what this machine's load costs."""
    config = tmp / "empty.toml"
    config.write_text("")
    port = free_port()
    env = {**os.environ, "MCPHOST_PLUGINS": "proxy", "MCPHOST_CONFIG": str(config), "MCPHOST_WORKERS": "1"}
    proc = subprocess.Popen([mcphost_executable(), "serve", "--host", "127.0.0.1", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    prober = Prober(f"http://127.0.0.1:{port}/healthz")
    prober.start()
    try:
        deadline = time.monotonic() + args.deadline
        while prober.first is None and time.monotonic() < deadline:
            time.sleep(0.05)
        start = time.monotonic()
        time.sleep(seconds)
        return prober.window(start, time.monotonic())
    finally:
        prober.stop.set()
        proc.terminate()
        proc.wait(30)


def part_one(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    servers = "\n".join(
        f'[plugins.proxy.servers.u{i}]\ncommand = "{sys.executable}"\nargs = ["{UPSTREAM}", "{args.upstream}", '
        f'"{args.tools}"]\n' for i in range(args.upstreams))
    config = tmp / "gateway.toml"
    config.write_text(f"[plugins.proxy]\nstartup_timeout = {args.deadline}\n\n{servers}")
    port = free_port()
    env = {**os.environ, "MCPHOST_PLUGINS": "proxy", "MCPHOST_CONFIG": str(config), "MCPHOST_LOG_LEVEL": "info",
           "MCPHOST_WORKERS": "1"}
    log_path = tmp / "host.log"
    log = log_path.open("wb")
    started = time.monotonic()
    command = [mcphost_executable()]
    if args.stall_trace:  # the same host, its loop watched: where each stall over 20 ms was (stallwatch.py)
        command = [sys.executable, str(HERE / "stallwatch.py"), args.stall_trace,
                   *(["--switch-interval-ms", os.environ["SWITCH_MS"]] if os.environ.get("SWITCH_MS") else []), "--"]
    proc = subprocess.Popen([*command, "serve", "--host", "127.0.0.1", "--port", str(port)], env=env,
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    prober = Prober(f"http://127.0.0.1:{port}/healthz")
    prober.start()
    report: dict[str, Any] = {"upstreams": args.upstreams, "tools_each": args.tools, "upstream_kind": args.upstream}
    mounted = re.compile(r"upstream u\d+ mounted: ")
    try:
        deadline = started + args.deadline
        all_mounted = _wait_count(log_path, mounted, args.upstreams, deadline)
        if prober.first is None:
            raise SystemExit(f"the host never answered /healthz:\n{log_path.read_text()[-3000:]}")
        report["listening_s"] = round(prober.first - started, 2)
        if all_mounted is None:
            report["all_mounted_s"] = None
            report["mounted"] = _count(log_path, mounted)
            return report
        report["all_mounted_s"] = round(all_mounted - started, 2)
        time.sleep(1.0)
        report["startup_probes"] = prober.window(started, all_mounted + 1.0)
        url = f"http://127.0.0.1:{port}/mcp"
        with httpx.Client(timeout=60) as client:
            session = open_session(client, url)
            total = 0
            cursor = None
            while True:
                body = orjson.dumps({"jsonrpc": "2.0", "id": "l", "method": "tools/list",
                                     "params": {"cursor": cursor} if cursor else {}})
                reply = messages_of(client.post(url, content=body, headers=headers(session)))[-1]["result"]
                total += len(reply["tools"])
                cursor = reply.get("nextCursor")
                if not cursor:
                    break
            report["tools_listed"] = total
            before = _count(log_path, mounted)
            first_change = time.monotonic()
            for n in range(args.changes):
                sent = time.monotonic()
                answer = messages_of(client.post(url, content=session_call(f"b{n}", f"u{n % args.upstreams}_bump", {}),
                                                 headers=headers(session)))[-1]
                if "error" in answer or answer["result"].get("isError"):
                    raise SystemExit(f"bump {n} failed: {answer}")
                time.sleep(max(0.0, args.change_interval - (time.monotonic() - sent)))
            done = _wait_count(log_path, mounted, before + args.changes, time.monotonic() + args.deadline)
            end = done if done is not None else time.monotonic()
            report["changes"] = args.changes
            report["changes_mounted"] = _count(log_path, mounted) - before
            report["changes_s"] = round(end - first_change, 2)
            time.sleep(0.5)
            report["change_probes"] = prober.window(first_change, end + 0.5)
        prober.stop.set()
        report["probe_failures"] = prober.failures
        stop_sent = time.monotonic()
        proc.terminate()
        proc.wait(60)
        report["sigterm_exit_s"] = round(time.monotonic() - stop_sent, 2)
        ms = [float(m) for m in re.findall(r"upstream u\d+ mounted: .*\((\d+) ms\)", log_path.read_text())]
        report["mount_ms_p50"] = percentile(ms, 50)
        return report
    finally:
        prober.stop.set()
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(10)


class _LoopStalls:
    """How late a 5 ms sleep wakes up on this process's loop, one sample a tick, between start and stop."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._task: asyncio.Future[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._tick())

    async def _tick(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.005)
            self.samples.append(time.monotonic() - before - 0.005)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def _one_upstream(*args: str, url: str | None = None) -> tuple[Any, Any]:
    """A host (started as ``mcphost serve`` starts it) mounting one gateway_upstream.py with ``args``
    (or the one listening at ``url``)."""
    from mcphost_proxy import ProxyPlugin

    from mcphost.testing import make_host

    plugin = ProxyPlugin()
    server = {"url": url} if url else {"command": sys.executable, "args": [str(UPSTREAM), *args]}
    config = {"plugins": {"proxy": {"servers": {"u": server}}}}
    host = make_host(("proxy", plugin), config=config)
    await host.start(freeze_gc=True)
    return plugin, host


async def _recollect(kind: str, tools: int, rounds: int) -> dict[str, Any]:
    server = None
    if kind == "raw-http":  # its own process, listing as one JSON body; lists again when told (no notification)
        port = free_port()
        server = subprocess.Popen([sys.executable, str(UPSTREAM), kind, str(tools), str(port)],
                                  stdin=subprocess.DEVNULL, start_new_session=True)
        for _ in range(200):
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            await asyncio.sleep(0.05)
        plugin, host = await _one_upstream(url=f"http://127.0.0.1:{port}/mcp")
    else:
        plugin, host = await _one_upstream(kind, str(tools))
    stalls = _LoopStalls()
    try:
        if not await plugin.wait_mounted(300):
            raise SystemExit(f"the {tools}-tool upstream did not mount")
        upstream = plugin.upstreams["u"]
        stalls.start()
        cpu: list[float] = []
        wall: list[float] = []
        worst: list[float] = []
        for _ in range(rounds):
            listed = plugin._listed["u"]
            stalls.samples.clear()
            cpu0, wall0 = time.process_time(), time.monotonic()
            await upstream.request(None, lambda session: session.call_tool("bump", {}))
            if server is not None:
                upstream._schedule_relist()
            async with asyncio.timeout(300):
                while plugin._listed["u"] is listed or plugin._mounting["u"].locked():
                    await asyncio.sleep(0.01)
            cpu.append(time.process_time() - cpu0)
            wall.append(time.monotonic() - wall0)
            worst.append(max(stalls.samples, default=0.0))
        await stalls.stop()
        assert len(host.catalog.tools) == tools + 1 + rounds, len(host.catalog.tools)
        return {"tools": tools, "upstream": kind, "cpu_s": round(min(cpu), 3),
                "cpu_s_all": [round(c, 3) for c in cpu], "wall_s": round(min(wall), 3),
                "loop_max_stall_ms": round(max(worst) * 1000, 1)}
    finally:
        await stalls.stop()
        await host.stop()
        if server is not None:
            server.kill()
            server.wait(10)


async def _big_line(mib: float) -> dict[str, Any]:
    """One upstream reply line of ``mib`` MiB (over max_message_bytes): the loop's longest stall, the
    error the call gets, and whether the upstream answers the next call."""
    import mcphost

    plugin, host = await _one_upstream("raw", "10")
    stalls = _LoopStalls()
    try:
        await plugin.wait_mounted(60)
        upstream = plugin.upstreams["u"]
        stalls.start()
        started = time.monotonic()
        error = None
        try:
            await upstream.request(None, lambda session: session.call_tool("big", {"mib": mib}))
        except mcphost.McpError as exc:
            error = str(exc)
        took = time.monotonic() - started
        next_started = time.monotonic()
        answer = await upstream.request(None, lambda session: session.call_tool("t1", {"x1": 1}))
        next_took = time.monotonic() - next_started
        big_max, big_p99 = max(stalls.samples) * 1000, percentile([x * 1000 for x in stalls.samples], 99)
        records: list[logging.LogRecord] = []
        handler = logging.Handler()
        handler.emit = records.append  # type: ignore[method-assign]
        logging.getLogger("mcphost.proxy").addHandler(handler)
        logging.getLogger("mcphost.proxy").setLevel(logging.INFO)  # the host's default log level
        stalls.samples.clear()
        flood_started = time.monotonic()
        await upstream.request(None, lambda session: session.call_tool("flood", {"count": 200_000}))
        flooded = time.monotonic()
        await upstream.request(None, lambda session: session.call_tool("t1", {"x1": 1}))
        after_flood = time.monotonic() - flooded
        logging.getLogger("mcphost.proxy").removeHandler(handler)
        flood = {"messages": 200_000, "call_s": round(flooded - flood_started, 2), "next_call_s": round(after_flood, 3),
                 "host_log_bytes": sum(len(r.getMessage()) + 80 for r in records),
                 "loop_max_stall_ms": round(max(stalls.samples, default=0) * 1000, 1)}
        await stalls.stop()
        return {"flood": flood, "mib": mib, "error": error, "call_s": round(took, 2),
                "loop_max_stall_ms": round(big_max, 1), "loop_p99_stall_ms": round(big_p99, 1),
                "next_call_ok": not answer.is_error, "next_call_s": round(next_took, 3),
                "restarts": upstream.restarts}
    finally:
        await stalls.stop()
        await host.stop()


def part_two(args: argparse.Namespace) -> list[dict[str, Any]]:
    sizes = [int(size) for size in args.sizes.split(",")]
    rows = [asyncio.run(_recollect(args.recollect_upstream, size, args.rounds)) for size in sizes]
    http = [int(size) for size in args.http_sizes.split(",") if size]
    return rows + [asyncio.run(_recollect("raw-http", size, args.rounds)) for size in http]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", choices=["sdk", "raw"], default="sdk")
    parser.add_argument("--upstreams", type=int, default=50)
    parser.add_argument("--tools", type=int, default=200)
    parser.add_argument("--changes", type=int, default=100)
    parser.add_argument("--change-interval", type=float, default=0.1, help="seconds between two list_changed")
    parser.add_argument("--sizes", default="200,2000,20000", help="upstream sizes of part 2")
    parser.add_argument("--recollect-upstream", choices=["sdk", "raw"], default="raw",
                        help="part 2's upstream: the host's cost does not depend on what wrote the listing, and the "
                             "SDK takes minutes to register 20 000 generated tools on a small machine")
    parser.add_argument("--http-sizes", default="2000,20000",
                        help="part 2 again with one Streamable HTTP upstream (JSON bodies) of these sizes")
    parser.add_argument("--rounds", type=int, default=3, help="re-collections per size in part 2")
    parser.add_argument("--deadline", type=float, default=240.0, help="longest wait for any phase (s)")
    parser.add_argument("--big-mib", type=float, default=300, help="part 3: one upstream reply line this long")
    parser.add_argument("--skip", choices=["one", "two", "three"], action="append", default=[],
                        help="skip a part (repeatable)")
    parser.add_argument("--stall-trace", help="part 1: write where the host's loop stalled over 20 ms to this file "
                                              "(benchmarks/stallwatch.py)")
    parser.add_argument("--json", help="write the report here")
    args = parser.parse_args()
    report: dict[str, Any] = {"facts": machine_facts(), "args": vars(args)}
    with sigterm_as_interrupt(), workdir() as tmp:
        if "one" not in args.skip:
            base = report["baseline_probes"] = baseline(args, Path(tmp))
            print(f"load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}; /healthz of an idle host: "
                  f"p50 {base['p50_ms']} ms, p99 {base['p99_ms']} ms, max {base['max_ms']} ms")
            one = report["gateway"] = part_one(args, Path(tmp))
            print(f"{one['upstreams']} upstreams x {one['tools_each']} tools ({one['upstream_kind']}): listening after "
                  f"{one['listening_s']} s, all mounted after {one['all_mounted_s']} s, "
                  f"{one.get('tools_listed')} tools listed")
            for phase in ("startup_probes", "change_probes"):
                if phase in one:
                    p = one[phase]
                    print(f"  /healthz during {phase.split('_')[0]}: {p['probes']} probes, p50 {p['p50_ms']} ms, "
                          f"p99 {p['p99_ms']} ms, max {p['max_ms']} ms")
            if "changes" in one:
                print(f"  {one['changes']} list_changed: {one['changes_mounted']} re-mounted in {one['changes_s']} s; "
                      f"SIGTERM exit in {one['sigterm_exit_s']} s; probe failures {one['probe_failures']}")
            report["targets"] = {
                "startup p99 < 50 ms": one.get("startup_probes", {}).get("p99_ms", 1e9) < 50,
                "startup max < 250 ms": one.get("startup_probes", {}).get("max_ms", 1e9) < 250,
                "list_changed p99 < 50 ms": one.get("change_probes", {}).get("p99_ms", 1e9) < 50,
                "list_changed max < 250 ms": one.get("change_probes", {}).get("max_ms", 1e9) < 250,
            }
        if "two" not in args.skip:
            two = report["recollection"] = part_two(args)
            for row in two:
                per = row["cpu_s"] / row["tools"] * 1e6
                print(f"  re-collection of one {'HTTP' if row['upstream'] == 'raw-http' else 'stdio'} upstream "
                      f"of {row['tools']:>6} tools: CPU {row['cpu_s']:.3f} s "
                      f"({per:.0f} us/tool), wall {row['wall_s']:.3f} s, loop max stall {row['loop_max_stall_ms']} ms")
        if "three" not in args.skip:
            big = report["big_line"] = asyncio.run(_big_line(args.big_mib))
            print(f"  one {big['mib']:.0f} MiB upstream line: loop max stall {big['loop_max_stall_ms']} ms (p99 "
                  f"{big['loop_p99_stall_ms']} ms), call answered in {big['call_s']} s with: {big['error']}; next call "
                  f"{'ok' if big['next_call_ok'] else 'FAILED'} in {big['next_call_s']} s, restarts {big['restarts']}")
            flood = big["flood"]
            print(f"  {flood['messages']} upstream log messages: the flooding call took {flood['call_s']} s, the next "
                  f"call {flood['next_call_s']} s; host log {flood['host_log_bytes']} bytes; loop max stall "
                  f"{flood['loop_max_stall_ms']} ms")
            report.setdefault("targets", {})["log flood: host log < 1 MB"] = flood["host_log_bytes"] < 1_000_000
            report["targets"]["log flood: next call within 1 s"] = flood["next_call_s"] < 1.0
            report["targets"]["300 MiB line: loop max stall < 250 ms"] = big["loop_max_stall_ms"] < 250
            report["targets"]["300 MiB line: clear error, next call ok"] = bool(
                big["error"] and "max_message_bytes" in big["error"] and big["next_call_ok"])
        for name, met in report.get("targets", {}).items():
            print(f"  {'met ' if met else 'MISS'}  {name}")
    save_report(args.json, report)


if __name__ == "__main__":
    main()
