#!/usr/bin/env python3
"""Reliability target 2, limits: what a real server answers to oversized and slow requests, and how fast.

    python benchmarks/bench_limits.py [--body-timeout 2] [--chunk-body-mib 5] [--json FILE]

Raw sockets against ``mcphost serve`` (one worker, demo plugin, ``max_body_bytes`` at its
default of 4 MiB), so that nothing in a client library shapes the bytes:

1. ``Content-Length: 1073741824`` and no body: the time until the status line (413 in < 100 ms).
2. 5 MiB sent as 1-byte HTTP chunks (``Transfer-Encoding: chunked``, no length to refuse up front):
   the status, the bytes sent before the answer came, and the server's RSS growth (VmRSS every
   50 ms; target 413 and < 20 MB).
3. A 17 KiB header block (one 17 KiB header): the status (431).
4. A body that never finishes (``Content-Length: 100``, one byte a second): the status and when
   it came, against ``MCPHOST_BODY_TIMEOUT`` (set to ``--body-timeout`` for the run; 408 within
   the timeout + 1 s).

Each case runs on a fresh connection; after them, an echo call still answers.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import threading
import time
from pathlib import Path
from typing import Any

import benchlib
import httpx
from benchlib import running

BODY = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}'


def _request_head(port: int, extra: str) -> bytes:
    return (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: {benchlib.ACCEPT}\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n"
            f"Mcp-Name: echo\r\n{extra}\r\n").encode()


def _status(sock: socket.socket, timeout: float) -> tuple[int | None, float]:
    """The status code of the first response line and when it arrived (monotonic); None on EOF/timeout."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    at = time.monotonic()
    line = data.split(b"\r\n", 1)[0].split()
    return (int(line[1]) if len(line) >= 2 and line[1].isdigit() else None), at


def declared_gib(port: int) -> dict[str, Any]:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        started = time.monotonic()
        sock.sendall(_request_head(port, "Content-Length: 1073741824\r\n"))
        status, at = _status(sock, 10)
    return {"status": status, "ms": round((at - started) * 1000, 2)}


def chunked(port: int, pid: int, mib: int, chunk: int, limit: float) -> dict[str, Any]:
    total = mib * 1024 * 1024
    before = benchlib.rss_bytes(pid)
    peak = [before]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], benchlib.rss_bytes(pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    frame = f"{chunk:x}\r\n".encode() + b"x" * chunk + b"\r\n"
    batch = frame * max(1, 65536 // len(frame))  # many chunks per send(); TCP decides the segments
    pending = b""
    framed = 0  # bytes of chunk framing written so far
    started = time.monotonic()
    status = None
    answer = b""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(_request_head(port, "Transfer-Encoding: chunked\r\n"))
        sock.setblocking(False)
        while framed // len(frame) * chunk < total and time.monotonic() - started < limit:
            try:
                answer += sock.recv(4096)
                if b"\r\n" in answer:
                    break
            except BlockingIOError:
                pass
            except OSError:
                break
            if not pending:
                pending = batch
            try:
                written = sock.send(pending)
                pending = pending[written:]
                framed += written
            except BlockingIOError:
                time.sleep(0.0005)
            except OSError:
                break
        else:
            if not pending:
                with contextlib.suppress(OSError):
                    sock.setblocking(True)
                    sock.sendall(b"0\r\n\r\n")
        sock.setblocking(True)
        if b"\r\n" in answer:
            status = int(answer.split(b"\r\n", 1)[0].split()[1])
        else:
            status, _ = _status(sock, limit)
    sent = framed // len(frame) * chunk
    seconds = time.monotonic() - started
    time.sleep(0.3)
    stop.set()
    sampler.join()
    after = benchlib.rss_bytes(pid)
    return {"status": status, "chunk_bytes": chunk, "body_bytes_sent_before_answer": sent,
            "seconds": round(seconds, 2), "rss_before": before, "rss_peak": peak[0], "rss_after": after,
            "rss_growth_mb": round((peak[0] - before) / 1e6, 2)}


def big_headers(port: int, kib: int) -> dict[str, Any]:
    pad = "a" * (kib * 1024)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(_request_head(port, f"X-Pad: {pad}\r\nContent-Length: {len(BODY)}\r\n") + BODY)
        status, _ = _status(sock, 10)
    return {"header_kib": kib, "status": status}


def slow_body(port: int, body_timeout: float) -> dict[str, Any]:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(_request_head(port, "Content-Length: 100\r\n"))
        started = time.monotonic()
        sock.settimeout(1.0)
        data = b""
        while time.monotonic() - started < body_timeout + 30:
            try:
                sock.send(b" ")
            except OSError:
                break
            try:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
                if b"\r\n" in data:
                    break
            except TimeoutError:
                continue
        at = time.monotonic()
    line = data.split(b"\r\n", 1)[0].split()
    status = int(line[1]) if len(line) >= 2 and line[1].isdigit() else None
    return {"status": status, "seconds": round(at - started, 2), "body_timeout": body_timeout,
            "limit_seconds": body_timeout + 1}


def check_alive(url: str) -> None:
    body, sent = benchlib.modern_call(1, "echo", {"text": "hello"})
    benchlib.check_modern_echo(httpx.post(url, content=body, headers=sent, timeout=10), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--body-timeout", type=float, default=2.0, help="MCPHOST_BODY_TIMEOUT for the run (s)")
    parser.add_argument("--chunk-body-mib", type=int, default=5)
    parser.add_argument("--chunk-body-timeout", type=float, default=60.0,
                        help="MCPHOST_BODY_TIMEOUT for the chunked case (s); at the default 30 s, 1-byte chunks "
                             "are too slow to reach 4 MiB on a 2-core box and get 408 instead")
    parser.add_argument("--chunk-bytes", type=int, default=1)
    parser.add_argument("--header-kib", type=int, default=17)
    parser.add_argument("--json", metavar="FILE", help="also write the report here")
    args = parser.parse_args()

    report = benchlib.new_report()
    with benchlib.sigterm_as_interrupt(), benchlib.workdir() as tmp:
        # Cases 1-3 on a server whose body timeout leaves the 1-byte chunks time to reach the limit.
        server = benchlib.mcphost_server("mcphost-limits", Path(tmp),
                                         extra_env={"MCPHOST_BODY_TIMEOUT": str(args.chunk_body_timeout)})
        with running(server):
            report["declared_1gib"] = declared_gib(server.port)
            report["chunked_body"] = chunked(server.port, server.pid, args.chunk_body_mib, args.chunk_bytes,
                                             args.chunk_body_timeout + 5)
            report["chunked_body"]["body_timeout"] = args.chunk_body_timeout
            report["big_headers"] = big_headers(server.port, args.header_kib)
            report["headers_under_limit"] = big_headers(server.port, 15)
            check_alive(server.url)
        server = benchlib.mcphost_server("mcphost-slow-body", Path(tmp),
                                         extra_env={"MCPHOST_BODY_TIMEOUT": str(args.body_timeout)})
        with running(server):
            report["slow_body"] = slow_body(server.port, args.body_timeout)
            check_alive(server.url)
    report["load_average_after"] = benchlib.load_average()
    d, c, h, s = (report[k] for k in ("declared_1gib", "chunked_body", "big_headers", "slow_body"))
    report["targets"] = {
        "1 GiB declared -> 413 in < 100 ms": d["status"] == 413 and d["ms"] < 100,
        "5 MiB in 1-byte chunks -> 413, RSS growth < 20 MB": c["status"] == 413 and c["rss_growth_mb"] < 20,
        "17 KiB header block -> 431": h["status"] == 431,
        "slow body -> 408 within body timeout + 1 s": s["status"] == 408 and s["seconds"] <= s["limit_seconds"],
    }
    print(benchlib.describe_source(report["facts"]["mcphost_source"]))
    print(f"load average before/after: {report['load_average_before']} / {report['load_average_after']}")
    print(f"1 GiB declared body:     HTTP {d['status']} after {d['ms']} ms")
    print(f"{args.chunk_body_mib} MiB in {args.chunk_bytes}-byte chunks: HTTP {c['status']} after "
          f"{c['body_bytes_sent_before_answer']} body bytes, {c['seconds']} s (body timeout {c['body_timeout']} s); "
          f"RSS peak growth {c['rss_growth_mb']} MB")
    print(f"{args.header_kib} KiB header block:    HTTP {h['status']} "
          f"(15 KiB: HTTP {report['headers_under_limit']['status']}, the body is an incomplete request on purpose: "
          "400 means the head was accepted)")
    print(f"slow body:               HTTP {s['status']} after {s['seconds']} s (body timeout {s['body_timeout']} s)")
    print("both servers still answered an echo call afterwards")
    benchlib.finish_report(args.json, report)


if __name__ == "__main__":
    main()
