#!/usr/bin/env python3
"""Reliability target 6, cancellation by disconnect (2026-07-28 stateless requests).

    python benchmarks/bench_cancel.py [--requests 1000] [--concurrency 20] [--json FILE]

``mcphost serve`` (one worker, demo plugin, the benchmark-only diagnostic plugin). Each request
is a stateless 2026-07-28 ``tools/call`` of ``diag_wait`` (20 progress notifications 10 ms
apart, with a progress token, so the reply is an SSE stream), sent on its own raw socket, which
the client then leaves at a random point:

- 10 %: in the middle of the body (the handler must never start),
- the rest: after a uniformly random 0-300 ms wait (the handler takes about 220 ms, so some
  finish first), either with a FIN (``shutdown(SHUT_WR)``; the client keeps reading so that it
  can count what still arrives) or with an RST (``SO_LINGER`` 0).

The tool records (``time.monotonic()``, one clock for every process on Linux) when it started,
finished, or got its ``CancelledError``; ``diag_report`` hands the records over afterwards.
Measured: the share of handlers running at the disconnect that observed the cancellation within
1 s (a handler that finished within ``--race-ms`` of the client's disconnect finished before the
disconnect could reach the server: it is counted apart, and the share with it as a miss is
printed too); handlers that ran on to the end anyway; bytes that reached the client after the handler had
observed the cancellation (+ 5 ms delivery allowance; FIN mode only: a reset socket cannot
count); asyncio tasks and file descriptors before and after (``diag_stats``).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import socket
import struct
import time
from pathlib import Path
from typing import Any

import benchlib
import httpx
import orjson
from benchlib import running


async def one(port: int, token: str, rng: random.Random) -> dict[str, Any]:
    body, hdrs = benchlib.modern_call(token, "diag_wait", {"token": token, "steps": 20, "interval_ms": 10},
                                      progress_token=token)
    head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sock = writer.get_extra_info("socket")
    roll = rng.random()
    mode = "mid-body" if roll < 0.1 else "fin" if roll < 0.55 else "rst"
    received: list[tuple[float, int]] = []
    if mode == "mid-body":
        writer.write(head.encode() + body[: len(body) // 2])
        await writer.drain()
        await asyncio.sleep(rng.random() * 0.05)
        disconnected = time.monotonic()
        writer.close()
        return {"token": token, "mode": mode, "disconnected": disconnected, "received": received}
    writer.write(head.encode() + body)
    await writer.drain()
    wait = rng.random() * 0.3

    async def read_until(deadline: float) -> None:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                data = await asyncio.wait_for(reader.read(65536), left)
            except (TimeoutError, ConnectionError):
                return
            if not data:
                return
            received.append((time.monotonic(), len(data)))

    await read_until(time.monotonic() + wait)
    disconnected = time.monotonic()
    if mode == "fin":
        writer.write_eof()
        await read_until(time.monotonic() + 1.5)
        writer.close()
    else:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
    return {"token": token, "mode": mode, "disconnected": disconnected, "received": received}


async def run(port: int, count: int, concurrency: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    tokens = iter(f"t{n}" for n in range(count))
    out: list[dict[str, Any]] = []

    async def worker() -> None:
        for token in tokens:
            out.append(await one(port, token, rng))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def report_of(url: str, tokens: list[str]) -> dict[str, Any]:
    records: dict[str, Any] = {}
    for start in range(0, len(tokens), 200):
        body, hdrs = benchlib.modern_call("r", "diag_report", {"tokens": tokens[start:start + 200]})
        reply = orjson.loads(httpx.post(url, content=body, headers=hdrs, timeout=30).content)
        result = reply["result"]
        records.update(result.get("structuredContent") or orjson.loads(result["content"][0]["text"]))
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--race-ms", type=float, default=5.0,
                        help="a handler that finished this soon after the client's disconnect is counted as "
                             "finished before the disconnect could reach it (reported separately)")
    parser.add_argument("--json", metavar="FILE", help="also write the report here")
    args = parser.parse_args()
    report = benchlib.new_report(args)
    with benchlib.sigterm_as_interrupt(), benchlib.workdir() as tmp:
        server = benchlib.diag_server("mcphost-cancel", Path(tmp))
        with running(server):
            asyncio.run(run(server.port, 20, 5, args.seed + 1))  # warm-up
            time.sleep(2)
            report_of(server.url, [f"t{n}" for n in range(20)])
            before = benchlib.diag_stats(server.url)
            started = time.monotonic()
            results = asyncio.run(run(server.port, args.requests, args.concurrency, args.seed))
            seconds = time.monotonic() - started
            time.sleep(2)
            records = report_of(server.url, [r["token"] for r in results])
            after = benchlib.diag_stats(server.url)
            time.sleep(6)  # Hypercorn's keep-alive timeout, for any connection still open
            settled = benchlib.diag_stats(server.url)
    report["load_average_after"] = benchlib.load_average()
    modes: dict[str, int] = {}
    never, finished_first, observed, late, ran_on, raced = 0, 0, [], [], [], []
    bytes_after = 0
    streams_with_bytes_after = 0
    for result in results:
        modes[result["mode"]] = modes.get(result["mode"], 0) + 1
        record = records.get(result["token"])
        if record is None:
            never += 1
            continue
        disconnected = result["disconnected"]
        if record["finished"] is not None and record["finished"] <= disconnected:
            finished_first += 1
            continue
        if record["cancelled"] is None and record["finished"] - disconnected <= args.race_ms / 1000:
            raced.append(round((record["finished"] - disconnected) * 1000, 2))
            continue
        if record["cancelled"] is None:
            last = max((at for at, _ in result["received"]), default=None)
            ran_on.append({"token": result["token"], "mode": result["mode"],
                           "finished_after_disconnect_ms": round((record["finished"] - disconnected) * 1000, 2),
                           "last_bytes_before_disconnect_ms": round((disconnected - last) * 1000, 2)
                           if last is not None else None})
            continue
        delay = record["cancelled"] - disconnected
        (observed if delay <= 1.0 else late).append(delay)
        if result["mode"] == "fin":
            extra = sum(size for at, size in result["received"] if at > record["cancelled"] + 0.005)
            bytes_after += extra
            streams_with_bytes_after += extra > 0
    running_at_disconnect = len(observed) + len(late) + len(ran_on)  # raced ones left out
    summary = {
        "requests": len(results), "seconds": round(seconds, 1), "modes": modes,
        "handler_never_started": never, "finished_before_disconnect": finished_first,
        "running_at_disconnect": running_at_disconnect, "finished_within_race_ms": raced,
        "observed_pct_counting_raced": round(100 * len(observed) / (running_at_disconnect + len(raced)), 2)
        if running_at_disconnect + len(raced) else None, "observed_within_1s": len(observed),
        "observed_late": len(late), "ran_to_completion_anyway": len(ran_on),
        "observed_pct": round(100 * len(observed) / running_at_disconnect, 2) if running_at_disconnect else None,
        "delay_p50_ms": round(benchlib.percentile(observed, 50) * 1000, 1),
        "delay_p99_ms": round(benchlib.percentile(observed, 99) * 1000, 1),
        "delay_max_ms": round(max(observed, default=0) * 1000, 1),
        "bytes_after_cancellation": bytes_after, "streams_with_bytes_after": streams_with_bytes_after,
        "tasks": [before["tasks"], after["tasks"], settled["tasks"]],
        "fds": [before["fds"], after["fds"], settled["fds"]],
        "records_left": settled["records"],
        "ran_on": ran_on,
    }
    report["summary"] = summary
    report["targets"] = {
        "100 % of handlers observe cancellation within 1 s": running_at_disconnect > 0 and
            len(observed) == running_at_disconnect,
        "0 leaked tasks": settled["tasks"] <= before["tasks"],
        "0 bytes written after disconnect": bytes_after == 0,
    }
    print(benchlib.describe_source(report["facts"]["mcphost_source"]))
    print(f"load average before/after: {report['load_average_before']} / {report['load_average_after']}")
    print(f"{summary['requests']} stateless requests in {summary['seconds']} s, disconnects {modes}")
    print(f"finished within {args.race_ms} ms after the client's disconnect, before it could reach the server "
          f"(left out below): {len(raced)} {raced}; counting them as misses: "
          f"{summary['observed_pct_counting_raced']} %")
    print(f"handler never started {never}, finished before the disconnect {finished_first}, running at the "
          f"disconnect {running_at_disconnect}: observed the cancellation within 1 s {len(observed)} "
          f"({summary['observed_pct']} %), later {len(late)}, ran to the end anyway {len(ran_on)}")
    for item in ran_on:
        print(f"  ran on: {item}")
    print(f"delay from disconnect to CancelledError: p50 {summary['delay_p50_ms']} ms, p99 "
          f"{summary['delay_p99_ms']} ms, max {summary['delay_max_ms']} ms")
    print(f"bytes received after the handler saw the cancellation (+5 ms): {bytes_after} "
          f"on {streams_with_bytes_after} streams")
    print(f"asyncio tasks before / right after / +6 s: {summary['tasks']}; fds: {summary['fds']}")
    benchlib.finish_report(args.json, report)


if __name__ == "__main__":
    main()
