#!/usr/bin/env python3
"""Reliability target 4, session churn: memory left behind by ended sessions, and idle expiry.

    python benchmarks/bench_churn.py [--sessions 10000] [--clients 4] [--idle-timeout 5] [--json FILE]

1. ``--sessions`` x (initialize -> notifications/initialized -> echo tools/call -> DELETE) from
   ``--clients`` concurrent keep-alive clients against ``mcphost serve`` (one worker, demo plugin
   and the benchmark-only diagnostic plugin). RSS (VmRSS) is read after a warm-up of 500 such
   cycles and again after the run (after a 2 s pause); growth in total and per session (target:
   < 10 MB in total, < 1 kB per session). The registry must be empty at the end.
2. A fresh server with ``session_idle_timeout`` = ``--idle-timeout``: ``--sessions`` x
   initialize (+ notifications/initialized), never DELETEd. The session registry (the diagnostic
   plugin's ``diag_stats``, through a stateless request that adds no session) is read every
   second from the last initialize on; target: 0 after 15 s.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

import benchlib
import httpx
from benchlib import running


async def _cycles(url: str, count: int, clients: int, *, call: bool, delete: bool) -> float:
    remaining = iter(range(count))
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)

    async def worker() -> None:
        async with httpx.AsyncClient(timeout=30, limits=limits) as client:
            for number in remaining:
                response = await client.post(url, content=benchlib.INITIALIZE_BODY, headers=benchlib.headers())
                session_id = benchlib.check_initialize(response)
                done = await client.post(url, content=benchlib.INITIALIZED, headers=benchlib.headers(session_id))
                if done.status_code != 202:
                    raise AssertionError(f"notifications/initialized: HTTP {done.status_code}")
                if call:
                    benchlib.check_echo(await client.post(url, content=benchlib.echo_call(number),
                                                          headers=benchlib.headers(session_id)), number)
                if delete:
                    gone = await client.delete(url, headers=benchlib.headers(session_id))
                    if gone.status_code != 204:
                        raise AssertionError(f"DELETE: HTTP {gone.status_code}")

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(clients)))
    return time.monotonic() - started


def churn(sessions: int, clients: int, logdir: Path) -> dict[str, Any]:
    server = benchlib.diag_server("mcphost-churn", logdir, extra_env={"MCPHOST_MAX_SESSIONS": "100000"})
    with running(server):
        asyncio.run(_cycles(server.url, 500, clients, call=True, delete=True))
        time.sleep(2)
        before = benchlib.rss_bytes(server.pid)
        fds_before = benchlib.open_fds(server.pid)
        seconds = asyncio.run(_cycles(server.url, sessions, clients, call=True, delete=True))
        time.sleep(2)
        after = benchlib.rss_bytes(server.pid)
        stats = benchlib.diag_stats(server.url)
        time.sleep(6)  # Hypercorn's keep-alive: the clients' connections are gone
        fds_after = benchlib.open_fds(server.pid)
    return {"sessions": sessions, "clients": clients, "seconds": round(seconds, 1),
            "cycles_per_second": round(sessions / seconds, 1), "rss_before": before, "rss_after": after,
            "rss_growth_mb": round((after - before) / 1e6, 2),
            "bytes_per_session": round((after - before) / sessions, 1),
            "registry_after": stats["sessions"], "tasks_after": stats["tasks"],
            "fds_before": fds_before, "fds_after": fds_after}


def expiry(sessions: int, clients: int, idle_timeout: float, logdir: Path) -> dict[str, Any]:
    server = benchlib.diag_server("mcphost-expiry", logdir, extra_env={
        "MCPHOST_MAX_SESSIONS": str(sessions + 1000), "MCPHOST_SESSION_IDLE_TIMEOUT": str(idle_timeout),
        "MCPHOST_MAX_SESSIONS_PER_PRINCIPAL": "0"})  # one client address holds them all
    with running(server):
        before = benchlib.rss_bytes(server.pid)
        seconds = asyncio.run(_cycles(server.url, sessions, clients, call=False, delete=False))
        opened = time.monotonic()
        peak = benchlib.rss_bytes(server.pid)
        readings = []
        while time.monotonic() - opened < 16:
            stats = benchlib.diag_stats(server.url)
            readings.append((round(time.monotonic() - opened, 1), stats["sessions"]))
            time.sleep(1)
        at_15 = next(count for t, count in readings if t >= 15)
        first_zero = next((t for t, count in readings if count == 0), None)
        after = benchlib.rss_bytes(server.pid)
    return {"sessions": sessions, "idle_timeout": idle_timeout, "seconds_to_open": round(seconds, 1),
            "registry_readings": readings, "registry_after_15s": at_15, "first_zero_after_s": first_zero,
            "rss_before": before, "rss_peak": peak, "rss_after": after}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--idle-timeout", type=float, default=5.0)
    parser.add_argument("--json", metavar="FILE", help="also write the report here")
    args = parser.parse_args()
    report = benchlib.new_report(args)
    with benchlib.sigterm_as_interrupt(), benchlib.workdir() as tmp:
        report["churn"] = churn(args.sessions, args.clients, Path(tmp))
        report["expiry"] = expiry(args.sessions, args.clients, args.idle_timeout, Path(tmp))
    report["load_average_after"] = benchlib.load_average()
    c, e = report["churn"], report["expiry"]
    report["targets"] = {
        "churn: total RSS growth < 10 MB": c["rss_growth_mb"] < 10,
        "churn: < 1 kB per session": c["bytes_per_session"] < 1000,
        "idle expiry: registry = 0 after 15 s": e["registry_after_15s"] == 0,
    }
    print(benchlib.describe_source(report["facts"]["mcphost_source"]))
    print(f"load average before/after: {report['load_average_before']} / {report['load_average_after']}")
    print(f"churn: {c['sessions']} x (initialize, call, DELETE) in {c['seconds']} s ({c['cycles_per_second']}/s): "
          f"RSS {c['rss_before'] / 1e6:.1f} -> {c['rss_after'] / 1e6:.1f} MB, growth {c['rss_growth_mb']} MB = "
          f"{c['bytes_per_session']} B/session; registry after {c['registry_after']}; fds {c['fds_before']} -> "
          f"{c['fds_after']}")
    print(f"idle expiry: {e['sessions']} x initialize in {e['seconds_to_open']} s, idle timeout {e['idle_timeout']} s; "
          f"registry after 15 s: {e['registry_after_15s']} (first 0 after {e['first_zero_after_s']} s); "
          f"RSS {e['rss_before'] / 1e6:.1f} -> peak {e['rss_peak'] / 1e6:.1f} -> {e['rss_after'] / 1e6:.1f} MB")
    print("registry (s after the last initialize, sessions): " +
          " ".join(f"{t}:{n}" for t, n in e["registry_readings"]))
    benchlib.finish_report(args.json, report)


if __name__ == "__main__":
    main()
