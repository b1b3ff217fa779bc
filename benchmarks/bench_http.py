#!/usr/bin/env python3
"""Requests/s and latency of an echo tools/call: mcphost against a bare Quart route on Hypercorn.

    python benchmarks/bench_http.py [--duration 10] [--connections 16] [--threads 2] [--json]

Starts, one after another, each on a free loopback port:

  mcphost-sse   ``mcphost serve``, one worker, only the demo plugin, session mode with SSE replies
                (the default, the headline figure);
  mcphost-json  the same with ``MCPHOST_JSON_RESPONSE=true`` (one JSON body per reply);
  mcphost-modern  the same server settings as mcphost-sse, stateless 2026-07-28 requests: no
                session, per-request ``_meta`` and the ``Mcp-Method``/``Mcp-Name`` headers, a plain
                JSON reply (the echo tool sends no notifications);
  raw-quart     benchmarks/raw_quart_app.py, the baseline: one Quart route that parses the JSON-RPC
                body and answers the echo result, on Hypercorn with the same settings.
  mcphost-redis   as mcphost-sse on the Redis backend (mcphost-redis; a private redis-server on a
                free port, no persistence); not in the default set, ask with ``--only``;
  mcphost-redis-2w  the same with ``--workers 2`` (two processes on one socket).

With ``--otel`` (or ``--only``), the telemetry plugin's cost, on the mcphost-sse and mcphost-modern
settings plus the ``otel`` plugin (plugins/mcphost-otel):

  mcphost-sse-otel, mcphost-modern-otel   spans and metrics recorded, nothing exported
                (``OTEL_TRACES_EXPORTER=none``, ``OTEL_METRICS_EXPORTER=none``): the instrumentation;
  mcphost-sse-otlp   everything exported over OTLP/HTTP to a sink in this script that answers 200
                (batch span processor, metrics every 60 s): what a deployment pays.

For mcphost's session targets, one session per wrk connection is initialized first (initialize +
notifications/initialized); the wrk script (tools_call.lua) spreads them over its threads; the
modern target opens none. Every session, the modern target and the baseline are checked with one
real request before anything is timed, and once more after, so a broken server cannot produce a
fast number. Then wrk runs a short warm-up and the timed run with ``--latency``; its ``done()``
prints machine-readable totals (errors, status >= 400, and with ``--check-bodies`` every
response's status and body).

The load generator runs on the same machine and shares its cores: on a 2-core box wrk's CPU time is
taken from the server's. The report shows both, and the server's CPU time per request, which
depends less on that sharing than requests/s does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import benchlib
import httpx
from benchlib import Server, running

HERE = Path(__file__).resolve().parent
LUA = HERE / "tools_call.lua"
TARGETS = ("mcphost-sse", "mcphost-json", "mcphost-modern", "raw-quart")
OTEL_TARGETS = ("mcphost-sse-otel", "mcphost-modern-otel", "mcphost-sse-otlp")
REDIS_TARGETS = ("mcphost-redis", "mcphost-redis-2w")
MODERN = "mcphost-modern"
OTEL_OFF = {"MCPHOST_PLUGINS": "demo,otel", "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}
MAX_DURATION = 15
#: ARCHITECTURE.md's comparison point for the modern target: official ``mcp`` 2.3.0, stateless 2026
#: mode on uvicorn, on a 2-core machine (a figure from elsewhere, not measured by this script).
SDK_STATELESS_RPS = 2781


def modern(target: str) -> bool:
    return target.startswith(MODERN)


def make_server(target: str, logdir: Path, stdlib_json: bool, sink: str | None = None) -> Server:
    if target in REDIS_TARGETS:
        from mcphost_redis.testing import RedisServer
        redis = RedisServer(logdir / f"redis-{target}")
        env = {"MCPHOST_REDIS_URL": redis.url, "MCPHOST_PLUGINS": "demo,redis",
               "MCPHOST_WORKERS": "2" if target.endswith("-2w") else "1"}
        server = benchlib.mcphost_server(target, logdir, extra_env=env)
        server.redis = redis  # type: ignore[attr-defined]  # stopped after the run
        return server
    if target in ("mcphost-sse", MODERN):
        return benchlib.mcphost_server(target, logdir)
    if target in ("mcphost-sse-otel", "mcphost-modern-otel"):
        return benchlib.mcphost_server(target, logdir, extra_env=OTEL_OFF)
    if target == "mcphost-sse-otlp":
        assert sink is not None
        return benchlib.mcphost_server(target, logdir, extra_env={
            **OTEL_OFF, "OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": sink})
    if target == "mcphost-json":
        return benchlib.mcphost_server(target, logdir, extra_env={"MCPHOST_JSON_RESPONSE": "true"})
    port = benchlib.free_port()
    argv = [sys.executable, str(HERE / "raw_quart_app.py"), "--port", str(port)]
    if stdlib_json:
        argv.append("--stdlib-json")
    return Server(target, argv, port, dict(os.environ), logdir)


def prepare(target: str, server: Server, connections: int) -> list[str]:
    """Open the sessions wrk will use and check each with one real call; returns the session ids.

    The modern target has no sessions: one stateless call is checked and the list is empty.
    """
    if modern(target):
        with httpx.Client(timeout=10) as client:
            response = client.post(server.url, content=benchlib.modern_echo_call("check-0"),
                                   headers=benchlib.modern_headers())
            benchlib.check_modern_echo(response, "check-0")
        return []
    expected_type = "text/event-stream" if target.startswith(("mcphost-sse", "mcphost-redis")) else "application/json"
    with httpx.Client(timeout=10) as client:
        if target == "raw-quart":
            sessions = ["raw"] * connections  # sent like mcphost's, ignored by the route
        else:
            sessions = [benchlib.open_session(client, server.url) for _ in range(connections)]
        for number, session_id in enumerate(dict.fromkeys(sessions)):
            request_id = f"check-{number}"
            response = client.post(server.url, content=benchlib.echo_call(request_id),
                                   headers=benchlib.headers(session_id))
            benchlib.check_echo(response, request_id, content_type=expected_type)
    return sessions


def check_after(target: str, server: Server, session_id: str | None) -> None:
    with httpx.Client(timeout=10) as client:
        if modern(target):
            response = client.post(server.url, content=benchlib.modern_echo_call("after"),
                                   headers=benchlib.modern_headers())
            benchlib.check_modern_echo(response, "after")
            return
        response = client.post(server.url, content=benchlib.echo_call("after"), headers=benchlib.headers(session_id))
        benchlib.check_echo(response, "after")


def run_wrk(wrk: str, url: str, sessions: list[str], duration: float, connections: int, threads: int,
            check: bool) -> tuple[dict[str, Any], str, float]:
    """One wrk run; returns the done() totals, wrk's text output and wrk's CPU seconds.

    No sessions: the stateless 2026-07-28 requests (tools_call.lua's "modern" mode).
    """
    mode = "session" if sessions else "modern"
    argv = [wrk, "-t", str(threads), "-c", str(connections), "-d", f"{duration:g}s", "--timeout", "5s",
            "--latency", "-s", str(LUA), url, "--", "1" if check else "0", str(threads), mode, *sessions]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 30)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise RuntimeError(f"wrk failed ({out.returncode}): {out.stderr.strip() or out.stdout.strip()}")
    match = re.search(r"^WRK_RESULT (\{.*\})$", out.stdout, re.M)
    if match is None:
        raise RuntimeError(f"wrk printed no WRK_RESULT line:\n{out.stdout}\n{out.stderr}")
    wrk_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(match.group(1)), out.stdout, wrk_cpu


def text_rps(output: str) -> float | None:
    match = re.search(r"Requests/sec:\s+([\d.]+)", output)
    return float(match.group(1)) if match else None


def measure(target: str, args: argparse.Namespace, wrk: str, logdir: Path, sink: str | None = None
            ) -> dict[str, Any]:
    server = make_server(target, logdir, args.stdlib_json, sink)
    try:
        return _measure(server, target, args, wrk)
    finally:
        redis = getattr(server, "redis", None)
        if redis is not None:
            redis.stop()


def _measure(server: Server, target: str, args: argparse.Namespace, wrk: str) -> dict[str, Any]:
    with running(server):
        sessions = prepare(target, server, args.connections)
        if args.warmup > 0:
            run_wrk(wrk, server.url, sessions, args.warmup, args.connections, args.threads, False)
        profiler = None
        if args.profile:
            Path(args.profile).mkdir(parents=True, exist_ok=True)
            profile_file = Path(args.profile) / f"{target}.txt"
            profiler = subprocess.Popen(
                ["py-spy", "record", "--pid", str(server.pid), "--duration", str(int(args.duration)),
                 "--rate", "200", "--format", "raw", "--output", str(profile_file)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        rss_before, cpu_before = benchlib.rss_bytes(server.pid), benchlib.cpu_seconds(server.pid)
        busy_before = benchlib.machine_busy_seconds()
        totals, output, wrk_cpu = run_wrk(wrk, server.url, sessions, args.duration, args.connections,
                                          args.threads, args.check_bodies)
        busy_after = benchlib.machine_busy_seconds()
        rss_after, cpu_after = benchlib.rss_bytes(server.pid), benchlib.cpu_seconds(server.pid)
        if profiler is not None:
            _, err = profiler.communicate(timeout=60)
            if profiler.returncode != 0:
                print(f"py-spy failed: {err.decode(errors='replace').strip()}", file=sys.stderr)
        check_after(target, server, sessions[0] if sessions else None)
    seconds = totals["duration_us"] / 1e6
    requests = totals["requests"]
    errors = sum(totals[k] for k in ("connect_errors", "read_errors", "write_errors", "timeouts"))
    return {
        "target": target,
        "requests": requests,
        "seconds": round(seconds, 3),
        "rps": round(requests / seconds, 1) if seconds else 0.0,
        "rps_wrk_text": text_rps(output),
        "p50_ms": totals["p50_us"] / 1000,
        "p90_ms": totals["p90_us"] / 1000,
        "p99_ms": totals["p99_us"] / 1000,
        "p999_ms": totals["p999_us"] / 1000,
        "max_ms": totals["latency_max_us"] / 1000,
        "socket_errors": errors,
        "status_errors": totals["status_errors"],
        "checked_responses": totals["checked"],
        "bad_responses": totals["bad_bodies"],
        "server_cpu_us_per_request": round((cpu_after - cpu_before) * 1e6 / requests, 1) if requests else None,
        "server_cpu_share": round((cpu_after - cpu_before) / seconds, 2) if seconds else None,
        "wrk_cpu_share": round(wrk_cpu / seconds, 2) if seconds else None,
        # Whatever else kept the cores busy meanwhile (other processes, this script, the kernel's
        # own work not charged to either); high values mean the figures are disturbed.
        "other_cpu_share": round(max(0.0, (busy_after - busy_before) - (cpu_after - cpu_before) - wrk_cpu)
                                 / seconds, 2) if seconds else None,
        "server_rss_growth_bytes": rss_after - rss_before,
        "server_rss_after_bytes": rss_after,
        "profiled": bool(args.profile),
    }


def print_table(results: list[dict[str, Any]], args: argparse.Namespace, facts: dict[str, Any]) -> None:
    print(f"\n{benchlib.describe_source(facts['mcphost_source'])}")
    print(f"wrk -t{args.threads} -c{args.connections} -d{args.duration:g}s, echo tools/call, one server at a time")
    head = f"{'target':<19} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'>=400':>6} {'bad':>5}" \
           f" {'srv µs/req':>10} {'srv CPU':>8} {'wrk CPU':>8} {'other':>6} {'RSS +MiB':>9}"
    print(head)
    print("-" * len(head))
    for r in results:
        bad = str(r["bad_responses"]) if r["checked_responses"] else "-"
        print(f"{r['target']:<19} {r['rps']:>9.1f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {r['socket_errors']:>7}"
              f" {r['status_errors']:>6} {bad:>5} {r['server_cpu_us_per_request']:>10} {r['server_cpu_share']:>8}"
              f" {r['wrk_cpu_share']:>8} {r['other_cpu_share']:>6} {r['server_rss_growth_bytes'] / 2**20:>9.1f}")
    by = {r["target"]: r for r in results}
    raw = by.get("raw-quart")
    if raw and raw["rps"]:
        for name in ("mcphost-sse", "mcphost-json", MODERN):
            if name in by:
                ratio = by[name]["rps"] / raw["rps"]
                target = "  (target >= 0.85)" if name == "mcphost-sse" else ""
                if name == MODERN:
                    target = f"  ({by[name]['rps'] / SDK_STATELESS_RPS:.2f}x the official SDK's stateless " \
                             f"2026 mode, {SDK_STATELESS_RPS} req/s in ARCHITECTURE.md; target 1.5x)"
                print(f"ratio {name} / raw-quart: {ratio:.3f}{target}")
    for plain, instrumented in (("mcphost-sse", "mcphost-sse-otel"), ("mcphost-sse", "mcphost-sse-otlp"),
                                (MODERN, "mcphost-modern-otel")):
        if plain in by and instrumented in by and by[plain]["server_cpu_us_per_request"]:
            extra = by[instrumented]["server_cpu_us_per_request"] - by[plain]["server_cpu_us_per_request"]
            print(f"telemetry {instrumented}: {extra:+.1f} µs server CPU per request, "
                  f"req/s x{by[instrumented]['rps'] / by[plain]['rps']:.3f}")
    print("srv/wrk/other CPU: cores busy on average in the server, in wrk, and in everything else "
          f"(of {os.cpu_count()})")
    if any(r["other_cpu_share"] and r["other_cpu_share"] > 0.25 for r in results):
        print("warning: other processes used a notable share of the CPU during a run; figures are disturbed")
    if any(r["profiled"] for r in results):
        print("(py-spy was attached during the timed runs: these figures are slower than unprofiled ones)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=10, help=f"seconds per timed run (<= {MAX_DURATION})")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=float, default=2, help="seconds of untimed load first (0: none)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--only", action="append", choices=TARGETS + OTEL_TARGETS + REDIS_TARGETS,
                        help="run only this target (repeatable)")
    parser.add_argument("--otel", action="store_true", help="also run the telemetry targets (mcphost-otel)")
    parser.add_argument("--check-bodies", action="store_true",
                        help="have wrk check every response's status and body (costs load-generator CPU)")
    parser.add_argument("--stdlib-json", action="store_true", help="baseline uses Quart's get_json/jsonify")
    parser.add_argument("--profile", metavar="DIR", help="record each timed run with py-spy (collapsed stacks)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the servers' logs (path printed)")
    args = parser.parse_args()
    if not 0 < args.duration <= MAX_DURATION or not 0 <= args.warmup <= 5:
        parser.error(f"--duration must be in (0, {MAX_DURATION}] and --warmup in [0, 5]")
    if args.threads < 1 or args.connections < args.threads:
        parser.error("need --threads >= 1 and --connections >= --threads")
    wrk = shutil.which("wrk")
    if wrk is None:
        print("wrk is not installed. On Debian/Ubuntu: apt-get update && apt-get install -y wrk "
              "(see benchmarks/README.md).", file=sys.stderr)
        return 2
    if args.profile and shutil.which("py-spy") is None:
        print("--profile needs py-spy: pip install py-spy", file=sys.stderr)
        return 2
    targets = args.only or [*TARGETS, *(OTEL_TARGETS if args.otel else ())]
    results = []
    started = time.monotonic()
    with benchlib.sigterm_as_interrupt(), benchlib.workdir() as tmp, otlp_sink() as sink:
        logdir = Path(tmp)
        try:
            for target in targets:
                if not args.json:
                    opening = "" if modern(target) or target == "raw-quart" else "opening sessions, "
                    print(f"{target}: starting, {opening}checking, warming up, running "
                          f"{args.duration:g} s ...", flush=True)
                results.append(measure(target, args, wrk, logdir, sink))
        except KeyboardInterrupt:
            print("interrupted; servers stopped", file=sys.stderr)
            return 130
        except (AssertionError, RuntimeError, httpx.HTTPError) as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return 1
        finally:
            if args.keep_logs:
                kept = Path(tempfile_keep(logdir))
                print(f"server logs: {kept}", file=sys.stderr)
    report = {"facts": benchlib.machine_facts(), "settings": {
        "duration": args.duration, "connections": args.connections, "threads": args.threads,
        "warmup": args.warmup, "check_bodies": args.check_bodies, "stdlib_json_baseline": args.stdlib_json},
        "results": results, "wall_seconds": round(time.monotonic() - started, 1)}
    by = {r["target"]: r for r in results}
    if "raw-quart" in by and by["raw-quart"]["rps"]:
        report["ratios"] = {f"{name}/raw-quart": round(by[name]["rps"] / by["raw-quart"]["rps"], 3)
                            for name in ("mcphost-sse", "mcphost-json", MODERN) if name in by}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(results, args, report["facts"])
    return 0


@contextlib.contextmanager
def otlp_sink() -> Iterator[str]:
    """An OTLP/HTTP endpoint that accepts every export (200, empty body), in a thread of this script."""

    class Sink(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(5)


def tempfile_keep(logdir: Path) -> str:
    keep = Path(tempfile.mkdtemp(prefix="mcphost-bench-logs-"))
    for log in logdir.glob("*.log"):
        shutil.copy(log, keep / log.name)
    return str(keep)


if __name__ == "__main__":
    sys.exit(main())
