#!/usr/bin/env python3
"""Reliability target 5, slow clients: stalled SSE readers while the server floods notifications.

    python benchmarks/bench_slow.py                               # 20 s flood, write timeout 5 s
    python benchmarks/bench_slow.py --duration 60 --write-timeout 30   # the full figure (default timeout)

``mcphost serve`` (one worker, demo plugin, the benchmark-only diagnostic plugin,
``sse_write_timeout`` = ``--write-timeout``):

1. Baseline: ``--healthy`` session-era clients call ``echo`` ``--healthy-rate`` times a second
   each for ``--baseline`` seconds; their latencies give the baseline p50/p99.
2. Flood: ``--stalled`` more sessions each POST ``diag_flood`` on a raw socket with a small
   receive buffer (``SO_RCVBUF`` 4 KiB) and then never read: together the server emits ``--rate``
   progress notifications a second (``--pad``-byte messages) for ``--duration`` seconds, into
   streams nobody reads. The healthy clients keep calling meanwhile.

Measured: the server's RSS (every 0.25 s) before and at its peak; for each stalled stream, when
its bytes stopped arriving (the client's receive queue, ``FIONREAD``, stopped growing: the
server's writes block from about then) and when the server closed the TCP connection (its
socket left ESTABLISHED, psutil); the healthy clients' p50/p99 during the flood against the baseline.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import fcntl
import socket
import termios
import time
from pathlib import Path
from typing import Any

import benchlib
import httpx
import orjson
import psutil
from benchlib import running


def queued(sock: socket.socket) -> int:
    buf = array.array("i", [0])
    fcntl.ioctl(sock.fileno(), termios.FIONREAD, buf, True)
    return buf[0]


def stalled_stream(port: int, session_id: str, count: int, interval_ms: int, pad: int) -> socket.socket:
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                         "params": {"name": "diag_flood", "arguments": {"count": count, "interval_ms": interval_ms,
                                                                        "pad": pad},
                                    "_meta": {"progressToken": "flood"}}})
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: {benchlib.ACCEPT}\r\nMCP-Protocol-Version: {benchlib.PROTOCOL_VERSION}\r\n"
            f"Mcp-Session-Id: {session_id}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(head + body)
    return sock


async def healthy(url: str, rate: float, until: float, out: list[float], errors: list[str]) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        session_id = await asyncio.to_thread(benchlib.open_session, httpx.Client(timeout=10), url)
        number = 0
        next_at = time.monotonic()
        while time.monotonic() < until:
            next_at += 1 / rate
            number += 1
            started = time.monotonic()
            try:
                benchlib.check_echo(await client.post(url, content=benchlib.echo_call(number),
                                                      headers=benchlib.headers(session_id)), number)
                out.append(time.monotonic() - started)
            except Exception as exc:  # counted
                errors.append(f"{type(exc).__name__}: {exc}"[:200])
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))


async def watch(pid: int, port: int, socks: dict[int, socket.socket], until: float, report: dict[str, Any]) -> None:
    proc = psutil.Process(pid)
    last_size = {p: -1 for p in socks}
    last_growth: dict[int, float] = {}
    closed: dict[int, float] = {}
    seen: set[int] = set()
    peak = 0
    while time.monotonic() < until:
        now = time.monotonic()
        peak = max(peak, proc.memory_info().rss)
        for local_port, sock in socks.items():
            size = queued(sock)
            if size > last_size[local_port]:
                last_size[local_port] = size
                last_growth[local_port] = now
        established = {c.raddr.port for c in proc.net_connections(kind="tcp")
                       if c.raddr and c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port}
        seen |= established & socks.keys()
        for local_port in seen - established:
            closed.setdefault(local_port, now)
        await asyncio.sleep(0.25)
    report.update(peak=peak, last_growth=last_growth, closed=closed, queued=last_size, seen=len(seen))


async def phase(url: str, args: argparse.Namespace, seconds: float) -> tuple[list[float], list[str]]:
    until = time.monotonic() + seconds
    latencies: list[float] = []
    errors: list[str] = []
    await asyncio.gather(*(healthy(url, args.healthy_rate, until, latencies, errors) for _ in range(args.healthy)))
    return latencies, errors


async def flood(server: benchlib.Server, args: argparse.Namespace) -> dict[str, Any]:
    per_stream = args.rate / args.stalled
    interval_ms = max(1, round(1000 / per_stream))
    count = int(per_stream * args.duration)
    with httpx.Client(timeout=10) as client:
        sessions = [benchlib.open_session(client, server.url) for _ in range(args.stalled)]
    started = time.monotonic()
    socks = {}
    for session_id in sessions:
        sock = stalled_stream(server.port, session_id, count, interval_ms, args.pad)
        socks[sock.getsockname()[1]] = sock
    watched: dict[str, Any] = {}
    until = started + args.duration + args.write_timeout + 10
    watcher = asyncio.ensure_future(watch(server.pid, server.port, socks, until, watched))
    latencies, errors = await phase(server.url, args, args.duration)
    await watcher
    for sock in socks.values():
        sock.close()
    delays = [watched["closed"][p] - watched["last_growth"][p] for p in socks if p in watched["closed"]]
    return {"streams": len(socks), "seen_established": watched["seen"], "per_stream_rate": per_stream,
            "interval_ms": interval_ms, "count": count,
            "latencies": latencies, "errors": errors, "peak_rss": watched["peak"],
            "closed": len(watched["closed"]), "close_after_stall_s": sorted(round(d, 2) for d in delays),
            "close_after_start_s": sorted(round(watched["closed"][p] - started, 2) for p in watched["closed"]),
            "queued_bytes": sorted(watched["queued"].values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of flood (60 for the full figure)")
    parser.add_argument("--write-timeout", type=float, default=5.0, help="MCPHOST_SSE_WRITE_TIMEOUT (s)")
    parser.add_argument("--stalled", type=int, default=20)
    parser.add_argument("--rate", type=float, default=1000.0, help="notifications/s over all stalled streams")
    parser.add_argument("--pad", type=int, default=512, help="bytes of message text per notification")
    parser.add_argument("--healthy", type=int, default=5)
    parser.add_argument("--healthy-rate", type=float, default=20.0, help="echo calls/s per healthy client")
    parser.add_argument("--baseline", type=float, default=10.0, help="seconds of healthy-only traffic")
    parser.add_argument("--json", metavar="FILE", help="also write the report here")
    args = parser.parse_args()
    report = benchlib.new_report(args)
    with benchlib.sigterm_as_interrupt(), benchlib.workdir() as tmp:
        server = benchlib.diag_server("mcphost-slow", Path(tmp), extra_env={
            "MCPHOST_SSE_WRITE_TIMEOUT": str(args.write_timeout)})
        with running(server):
            asyncio.run(phase(server.url, args, 2))  # warm-up
            rss_before = benchlib.rss_bytes(server.pid)
            base, base_errors = asyncio.run(phase(server.url, args, args.baseline))
            result = asyncio.run(flood(server, args))
            rss_after = benchlib.rss_bytes(server.pid)
            stats = benchlib.diag_stats(server.url)
    report["load_average_after"] = benchlib.load_average()
    lat = result.pop("latencies")
    summary = {
        "rss_before_mb": round(rss_before / 1e6, 1), "rss_peak_mb": round(result["peak_rss"] / 1e6, 1),
        "rss_after_mb": round(rss_after / 1e6, 1),
        "rss_increase_mb": round((result["peak_rss"] - rss_before) / 1e6, 1),
        "baseline_p50_ms": round(benchlib.percentile(base, 50) * 1000, 2),
        "baseline_p99_ms": round(benchlib.percentile(base, 99) * 1000, 2),
        "flood_p50_ms": round(benchlib.percentile(lat, 50) * 1000, 2),
        "flood_p99_ms": round(benchlib.percentile(lat, 99) * 1000, 2),
        "healthy_calls": [len(base), len(lat)], "healthy_errors": base_errors + result["errors"],
        "server_after": stats,
    }
    report.update(flood=result, summary=summary)
    limit = args.write_timeout + 5
    report["targets"] = {
        "RSS increase < 50 MB": summary["rss_increase_mb"] < 50,
        "stalled streams closed <= write timeout + 5 s": result["closed"] == result["streams"] and
            all(d <= limit for d in result["close_after_stall_s"]),
        "healthy p99 <= 2x baseline": summary["flood_p99_ms"] <= 2 * summary["baseline_p99_ms"],
    }
    print(benchlib.describe_source(report["facts"]["mcphost_source"]))
    print(f"load average before/after: {report['load_average_before']} / {report['load_average_after']}")
    print(f"{result['streams']} stalled streams x {result['per_stream_rate']:.0f} notifications/s "
          f"({args.pad}-byte messages) for {args.duration:.0f} s; write timeout {args.write_timeout} s")
    print(f"RSS {summary['rss_before_mb']} MB -> peak {summary['rss_peak_mb']} MB (+{summary['rss_increase_mb']}) "
          f"-> {summary['rss_after_mb']} MB after")
    print(f"closed by the server: {result['closed']}/{result['streams']}; seconds from the stall to the close: "
          f"{result['close_after_stall_s']}")
    print(f"seconds from the start to the close: {result['close_after_start_s']}")
    print(f"healthy echo: baseline p50 {summary['baseline_p50_ms']} ms p99 {summary['baseline_p99_ms']} ms "
          f"({len(base)} calls); during the flood p50 {summary['flood_p50_ms']} ms p99 {summary['flood_p99_ms']} ms "
          f"({len(lat)} calls); errors {len(summary['healthy_errors'])}")
    print(f"server after: {stats}")
    benchlib.finish_report(args.json, report)


if __name__ == "__main__":
    main()
