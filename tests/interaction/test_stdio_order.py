"""stdio writes every message to its client through one ordered writer.

A client that pipelines ``initialize``, ``notifications/initialized`` and a call that reports
progress, in one write, reads the initialize reply first, then the call's progress, then the
call's reply: a notification never overtakes the reply it follows. The loop of 50 drives the
real :class:`~mcphost.transports.stdio.StdioServer` over OS pipes in this process (a fresh
session each run); one more run goes through a real ``mcphost serve --stdio``.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import mcphost_demo

from mcphost.testing import make_host
from mcphost.transports.stdio import StdioServer, open_stdio
from tests.support.stdio_support import RawServer, server_env

RUNS = 50


def pipelined(steps: int = 3) -> bytes:
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "pipelining", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "progress", "arguments": {"steps": steps}, "_meta": {"progressToken": "p"}}},
    ]
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def assert_in_order(received: list[dict[str, Any]], steps: int = 3) -> None:
    assert received[0].get("id") == 1 and "result" in received[0], received[:2]
    progress = [m for m in received if m.get("method") == "notifications/progress"]
    assert [m["params"]["progress"] for m in progress] == list(range(1, steps + 1))
    assert received[1:] == [*progress, received[-1]]
    assert received[-1].get("id") == 2 and "result" in received[-1], received[-1]


async def one_run(data: bytes | None = None, last_id: int = 2, config: dict[str, Any] | None = None
                  ) -> list[dict[str, Any]]:
    """Serve one stdio session over OS pipes: write ``data`` at once, read until reply ``last_id``."""
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    with open(stdin_r, "rb", buffering=0) as server_in, open(stdout_w, "wb", buffering=0) as server_out, \
            open(stdout_r, "rb", buffering=0) as client_in:
        reader, writer = await open_stdio(server_in, server_out)
        server = StdioServer(make_host(("demo", mcphost_demo), config=config), reader, writer)
        serving = asyncio.ensure_future(server.serve())
        os.write(stdin_w, pipelined() if data is None else data)
        lines: list[dict[str, Any]] = []
        buffer = b""
        while not any(m.get("id") == last_id for m in lines):
            chunk = await asyncio.wait_for(asyncio.to_thread(os.read, client_in.fileno(), 65536), 10)
            assert chunk, "stdout closed early"
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            lines.extend(json.loads(line) for line in complete if line.strip())
        os.close(stdin_w)
        await asyncio.wait_for(serving, 10)
        writer.close()
    return lines


async def test_pipelined_initialize_reply_comes_first_in_every_run_of_50() -> None:
    for run in range(RUNS):
        received = await one_run()
        try:
            assert_in_order(received)
        except AssertionError as exc:
            raise AssertionError(f"run {run}: {exc}") from None


def test_pipelined_initialize_reply_comes_first_through_mcphost_serve(tmp_path: Path) -> None:
    server = RawServer(server_env(tmp_path))
    try:
        server.send_bytes(pipelined())
        received = [server.recv() for _ in range(5)]
        assert_in_order(received)
        assert server.close() == 0
    finally:
        server.kill()


async def test_2026_requests_beyond_max_inflight_at_once_are_refused_before_they_run() -> None:
    """stdio admits at most ``server.max_inflight`` 2026-07-28 requests at once; the rest are
    answered -32000 without running (no lifecycle, no handler)."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    calls = [{"jsonrpc": "2.0", "id": n, "method": "tools/call",
              "params": {"name": "progress", "arguments": {"steps": 1, "delay_ms": 300}, "_meta": meta}}
             for n in range(1, 6)]
    data = b"".join(json.dumps(m).encode() + b"\n" for m in calls)
    # The refusals are written while the lines are read, well before call 1 ends (300 ms).
    received = await one_run(data, last_id=1, config={"server": {"max_inflight": 2}})
    replies = {m["id"]: m for m in received if "id" in m}
    busy = [n for n, m in replies.items() if m.get("error", {}).get("code") == -32000]
    assert busy == [3, 4, 5], received
    assert all(replies[n]["error"]["message"] == "Too many requests in flight; retry later" for n in busy)
