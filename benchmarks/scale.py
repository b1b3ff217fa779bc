#!/usr/bin/env python3
"""How mcphost's throughput grows with its workers, on the memory and the Redis backend, both eras.

    python benchmarks/scale.py                                   # workers 1, 2, 4, 8 (as the cores allow)
    python benchmarks/scale.py --workers 1,2 --duration 5        # this 2-core machine
    python benchmarks/scale.py --json report.json

For each backend (memory, redis), each worker count and each era it starts ``mcphost serve
--workers N`` (demo plugin) and loads it with wrk running compare.lua (every response checked):

  stateless   echo ``tools/call``, 2026-07-28 (headers and per-request ``_meta``, no session)
  session     echo ``tools/call``, 2025-11-25 on ``--connections`` sessions, SSE replies; wrk's
              threads rotate through the sessions request by request, so a worker often serves a
              session another worker created (on Redis: loaded from the store)

Cores, when the machine has enough: the server's workers on cores 0..N-1, redis-server on the next
core, wrk on the ones after (up to four threads, one core each), all with ``taskset``; where there
are too few cores they share (the report says which). It prints per run: requests/s, p50 and p99,
server CPU per call (the supervisor and every worker), Redis's CPU per call and round trips to
Redis per call (counted inside every worker by a small plugin: one per command, pipeline or
script call), and the efficiency of N workers: req/s(N) / (N x req/s(1)).

Workers above 1 need a shared backend (``mcphost serve`` refuses the memory backend with several:
sessions would not be shared). Stateless requests keep nothing between requests, so for the
stateless rows on the memory backend this script lifts that refusal (and only there); the session
era on the memory backend runs with one worker only.

``--sdk`` adds the official ``mcp`` 2.3.0 SDK (stateless, JSON replies) on uvicorn with the same
worker counts. uvicorn's multi-worker mode leaves TCP_NODELAY off on the connections its workers
accept (each reply then waits ~40 ms for a delayed ACK; an open uvicorn issue), so it runs patched
to set it (typed_tools.py ``sdk-workers``): the comparison is fair.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT), str(ROOT / "plugins" / "mcphost-redis")]

import benchlib  # noqa: E402
from mcphost_redis.testing import RedisServer  # noqa: E402

from tests.support.fixtures.distributions import make_distribution  # noqa: E402

LUA = HERE / "compare.lua"

# Counts, in every worker, each write of a command batch to Redis (one per round trip) and writes
# the count to $SCALE_TRIPS_DIR/<pid> five times a second (a thread, started in each worker).
TRIPS_PLUGIN = '''
import os
import threading
import time

from redis.asyncio import connection

SENT = [0]
_started = [0]
_send = connection.AbstractConnection.send_packed_command


def _flush():
    path = os.path.join(os.environ["SCALE_TRIPS_DIR"], str(os.getpid()))
    while True:
        with open(path + ".tmp", "w") as handle:
            handle.write(str(SENT[0]))
        os.replace(path + ".tmp", path)
        time.sleep(0.2)


async def counted(self, command, check_health=True):
    if _started[0] != os.getpid():
        _started[0] = os.getpid()
        SENT[0] = 0
        threading.Thread(target=_flush, daemon=True).start()
    SENT[0] += 1
    return await _send(self, command, check_health)


connection.AbstractConnection.send_packed_command = counted
'''

# ``mcphost serve`` with the refusal of several workers on an unshared backend lifted (stateless only).
UNSHARED_WORKERS = """
import sys
import mcphost.serve as serve
check = serve.check_workers
def lenient(host):
    host.backend.shared = True
    try:
        check(host)
    finally:
        host.backend.shared = False
serve.check_workers = lenient
from mcphost.cli import main
sys.argv[0] = "mcphost"
main()
"""


# -- placement ----------------------------------------------------------------------------------------

def layout(workers: int) -> dict[str, Any]:
    """Which cores the server, redis-server and wrk get; ``shared`` when they overlap."""
    cores = sorted(os.sched_getaffinity(0))
    server = cores[:workers] if workers <= len(cores) else cores
    rest = cores[len(server):]
    redis = rest[:1] or cores[-1:]
    loaders = rest[1:5] or rest[:1] or cores[-1:]
    shared = not rest[1:]
    return {"server": server, "redis": redis, "wrk": loaders, "shared": shared}


def taskset(argv: list[str], cores: list[int]) -> list[str]:
    tool = shutil.which("taskset")
    return [tool, "-c", ",".join(map(str, cores)), *argv] if tool else argv


def pin_pid(pid: int, cores: list[int]) -> None:
    with contextlib.suppress(OSError):
        os.sched_setaffinity(pid, set(cores))


# -- measuring --------------------------------------------------------------------------------------------

def tree_cpu(pid: int) -> float:
    """CPU seconds used so far by ``pid`` and its living descendants."""
    total = 0.0
    try:
        root = psutil.Process(pid)
        for process in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                times = process.cpu_times()
                total += times.user + times.system
    except psutil.Error:
        pass
    return total


def trips(directory: Path) -> int:
    total = 0
    for path in directory.iterdir():
        if path.suffix != ".tmp":
            with contextlib.suppress(OSError, ValueError):
                total += int(path.read_text() or 0)
    return total


def wrk_run(url: str, mode: str, sessions: list[str], seconds: float, connections: int, cores: list[int],
            check: bool) -> dict[str, Any]:
    wrk = shutil.which("wrk")
    assert wrk is not None
    threads = len(cores)
    argv = taskset([wrk, "-t", str(threads), "-c", str(max(connections, threads)), "-d", f"{max(1, round(seconds))}s",
                    "--timeout", "5s", "--latency", "-s", str(LUA), url, "--", "1" if check else "0", str(threads),
                    mode, "echo", '{"text":"hello"}', '"text":"hello"', *sessions], cores)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60)
    match = re.search(r"^WRK_RESULT (\{.*\})$", out.stdout, re.M)
    if out.returncode != 0 or match is None:
        raise RuntimeError(f"wrk failed ({out.returncode}): {out.stderr.strip() or out.stdout.strip()}")
    totals = json.loads(match.group(1))
    errors = sum(totals[k] for k in ("connect_errors", "read_errors", "write_errors", "timeouts"))
    if check and (totals["bad_bodies"] or errors or totals["status_errors"] or totals["checked"] != totals["requests"]):
        raise AssertionError(f"{url} {mode}: {totals['bad_bodies']} bad responses, {errors} socket errors, "
                             f"{totals['status_errors']} HTTP errors, "
                             f"{totals['checked']} of {totals['requests']} checked")
    return {"requests": totals["requests"], "seconds": totals["duration_us"] / 1e6,
            "p50_ms": totals["p50_us"] / 1000, "p99_ms": totals["p99_us"] / 1000}


def open_sessions(url: str, count: int) -> list[str]:
    with httpx.Client(timeout=30) as client:
        sessions = [benchlib.open_session(client, url) for _ in range(count)]
        body = orjson.dumps({"jsonrpc": "2.0", "id": "check", "method": "tools/call",
                             "params": {"name": "echo", "arguments": {"text": "hello"}}})
        for session_id in sessions:  # every session answers, whichever worker takes it
            response = client.post(url, content=body, headers=benchlib.headers(session_id))
            benchlib.check_echo(response, "check")
    return sessions


def check_stateless(url: str) -> None:
    with httpx.Client(timeout=30) as client:
        for number in range(4):
            response = client.post(url, content=benchlib.modern_echo_call(number), headers=benchlib.modern_headers())
            assert response.status_code == 200 and '"text":"hello"' in response.text, response.text[:300]


# -- servers --------------------------------------------------------------------------------------------

class Mcphost:
    def __init__(self, backend: str, workers: int, place: dict[str, Any], root: Path, redis: RedisServer | None,
                 site: Path) -> None:
        self.port = benchlib.free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.trips_dir = root / f"trips-{backend}-{workers}"
        self.trips_dir.mkdir()
        config = root / f"{backend}-{workers}.toml"
        config.write_text(f'[plugins.redis]\nurl = "{redis.url}"\nprefix = "scale{workers}:"\n' if redis else "")
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCPHOST_")}
        env.update({"MCPHOST_CONFIG": str(config), "MCPHOST_LOG_LEVEL": "warning", "MCPHOST_WORKERS": str(workers),
                    "MCPHOST_PLUGINS": "demo,redis,trips" if redis else "demo,trips",
                    "SCALE_TRIPS_DIR": str(self.trips_dir),
                    "PYTHONPATH": os.pathsep.join([str(site), env.get("PYTHONPATH", "")])})
        command = [sys.executable, "-c", UNSHARED_WORKERS] if (redis is None and workers > 1) else \
            [benchlib.mcphost_executable()]
        argv = taskset([*command, "serve", "--host", "127.0.0.1", "--port", str(self.port)], place["server"])
        self.log = root / f"{backend}-{workers}.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        wait_ready(self.url, self.process, self.log)

    def stop(self) -> None:
        stop(self.process)


class Sdk:
    def __init__(self, workers: int, place: dict[str, Any], root: Path) -> None:
        self.port = benchlib.free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = root / f"sdk-{workers}.log"
        argv = taskset([sys.executable, str(HERE / "typed_tools.py"), "sdk-workers", "--port", str(self.port),
                        "--workers", str(workers)], place["server"])
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)
        wait_ready(self.url, self.process, self.log)

    def stop(self) -> None:
        stop(self.process)


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=5) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"{url}: exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                response = client.post(url, content=benchlib.modern_echo_call("ready"),
                                       headers=benchlib.modern_headers())
                if response.status_code == 200:
                    return
            time.sleep(0.1)
    stop(process)
    raise RuntimeError(f"{url}: not ready within {timeout} s:\n{log.read_text()[-3000:]}")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@contextlib.contextmanager
def stopping(server: Any) -> Iterator[Any]:
    try:
        yield server
    finally:
        server.stop()


# -- the runs ---------------------------------------------------------------------------------------------

def run_one(server: Any, era: str, args: argparse.Namespace, place: dict[str, Any],
            redis: RedisServer | None) -> dict[str, Any]:
    mode = "modern" if era == "stateless" else "session"
    sessions = open_sessions(server.url, args.connections) if era == "session" else []
    if era == "stateless":
        check_stateless(server.url)
    if args.warmup > 0:
        wrk_run(server.url, mode, sessions, args.warmup, args.connections, place["wrk"], False)
    time.sleep(0.3)  # the trips files catch up
    trips_dir = getattr(server, "trips_dir", None)
    trips_before = trips(trips_dir) if trips_dir else 0
    cpu_before = tree_cpu(server.process.pid)
    redis_before = benchlib.cpu_seconds(redis.pid) if redis and redis.pid else 0.0
    totals = wrk_run(server.url, mode, sessions, args.duration, args.connections, place["wrk"], True)
    cpu = tree_cpu(server.process.pid) - cpu_before
    redis_cpu = (benchlib.cpu_seconds(redis.pid) - redis_before) if redis and redis.pid else None
    time.sleep(0.5)
    trips_after = trips(trips_dir) if trips_dir else 0
    requests, seconds = totals["requests"], totals["seconds"]
    return {"era": era, "rps": round(requests / seconds, 1), "p50_ms": round(totals["p50_ms"], 2),
            "p99_ms": round(totals["p99_ms"], 2), "requests": requests,
            "server_cpu_us": round(cpu * 1e6 / requests, 1),
            "redis_cpu_us": round(redis_cpu * 1e6 / requests, 1) if redis_cpu is not None else None,
            "redis_cores": round(redis_cpu / seconds, 2) if redis_cpu is not None else None,
            # counted until a little after the run: lease heartbeats of the last moments land here too
            "round_trips": round((trips_after - trips_before) / requests, 2) if trips_dir else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2,4,8", help="comma-separated worker counts")
    parser.add_argument("--backends", default="memory,redis")
    parser.add_argument("--eras", default="stateless,session")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per timed run")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--connections", type=int, default=64, help="wrk connections (and sessions) per run")
    parser.add_argument("--sdk", action="store_true", help="also the SDK on uvicorn workers (TCP_NODELAY patched)")
    parser.add_argument("--json", help="write the report here too")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (see benchmarks/README.md)")
    counts = [int(n) for n in args.workers.split(",")]
    cpus = len(os.sched_getaffinity(0))
    report: dict[str, Any] = {"facts": benchlib.machine_facts(), "args": vars(args), "rows": []}
    print(benchlib.describe_source(report["facts"]["mcphost_source"]))
    print(f"{cpus} cores; {args.duration:g} s per run after {args.warmup:g} s warm-up, {args.connections} connections")
    with tempfile.TemporaryDirectory(prefix="mcphost-scale-") as tmp:
        root = Path(tmp)
        site = root / "site"
        make_distribution(site, "mcphost-scale-trips", "0", {"trips": "scale_trips"}, {"scale_trips": TRIPS_PLUGIN})
        redis = RedisServer(root / "redis") if "redis" in args.backends else None
        try:
            servers: list[tuple[str, Any]] = [(b, None) for b in args.backends.split(",")]
            if args.sdk:
                servers.append(("sdk", None))
            for backend, _ in servers:
                for workers in counts:
                    place = layout(workers)
                    if redis is not None and redis.pid:
                        pin_pid(redis.pid, place["redis"])
                    if backend == "sdk":
                        server: Any = Sdk(workers, place, root)
                        eras = ["stateless"]
                    else:
                        server = Mcphost(backend, workers, place, root, redis if backend == "redis" else None, site)
                        eras = [e for e in args.eras.split(",") if not (backend == "memory" and workers > 1
                                                                        and e == "session")]
                    with stopping(server):
                        for era in eras:
                            row = {"backend": backend, "workers": workers, "shared_cores": place["shared"],
                                   **run_one(server, era, args, place, redis if backend == "redis" else None)}
                            report["rows"].append(row)
                            print_row(row, place)
        finally:
            if redis is not None:
                redis.stop()
    efficiency(report["rows"])
    print_summary(report["rows"])
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


def efficiency(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        base = next((r for r in rows if r["backend"] == row["backend"] and r["era"] == row["era"]
                     and r["workers"] == 1), None)
        row["efficiency"] = round(row["rps"] / (row["workers"] * base["rps"]), 2) if base else None


def print_row(row: dict[str, Any], place: dict[str, Any]) -> None:
    cores = f"server {place['server']}, redis {place['redis']}, wrk {place['wrk']}" + \
        (" (shared)" if place["shared"] else "")
    print(f"  {row['backend']:<7}{row['workers']:>3} w  {row['era']:<10}{row['rps']:>9.0f} req/s  "
          f"p99 {row['p99_ms']:>7.2f} ms  server {row['server_cpu_us']:>7.1f} us/call"
          + (f"  redis {row['redis_cpu_us']:>6.1f} us/call ({row['redis_cores']:.2f} core)"
             f"  {row['round_trips']:.2f} trips/call" if row.get("redis_cpu_us") is not None else "")
          + f"   [{cores}]", flush=True)


def print_summary(rows: list[dict[str, Any]]) -> None:
    print(f"\n  {'backend':<8}{'era':<11}{'workers':>8}{'req/s':>9}{'p99 ms':>9}{'srv us':>8}{'redis us':>9}"
          f"{'trips':>7}{'effic.':>8}")
    for row in rows:
        redis_us = f"{row['redis_cpu_us']:.0f}" if row.get("redis_cpu_us") is not None else "-"
        trips_ = f"{row['round_trips']:.2f}" if row.get("round_trips") is not None else "-"
        print(f"  {row['backend']:<8}{row['era']:<11}{row['workers']:>8}{row['rps']:>9.0f}{row['p99_ms']:>9.2f}"
              f"{row['server_cpu_us']:>8.0f}{redis_us:>9}{trips_:>7}{row['efficiency'] or 0:>8.2f}"
              + ("  (cores shared)" if row["shared_cores"] else ""))


if __name__ == "__main__":
    main()
