"""Requests/s and server CPU per call of echo and the seven-parameter plan_trip: mcphost, the SDK, FastMCP.

The same functions (``typed_tools.py``) are served by ``mcphost serve`` (one worker, Hypercorn), by
the official ``mcp`` 2.3.0 ``MCPServer`` (stateless, JSON replies, uvicorn) and, when a FastMCP
environment is given, by FastMCP (stateless HTTP, JSON replies), one server after another in the
same run. Each tools/call is a stateless 2026-07-28 request (per-request ``_meta``, no session);
a server that does not speak 2026-07-28 gets a 2025-11-25 stateless request (no session id), and
the report says which it was. The load comes from this script: ``--connections`` keep-alive
connections over raw asyncio streams, each sending the next request when the previous reply has
arrived. The server's CPU per call (its /proc utime+stime over the requests answered) is the
figure that holds on a shared machine; requests/s depends on the load generator sharing the cores.

    python benchmarks/bench_typed.py                                     # mcphost and the SDK, 2 x 10 s each
    python benchmarks/bench_typed.py --fastmcp-python /tmp/fastmcp-venv/bin/python
    python benchmarks/bench_typed.py --duration 3 --warmup 1 --json      # a short check
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import benchlib  # noqa: E402
from typed_tools import PLAN_TRIP_ARGUMENTS, PLAN_TRIP_TEXT  # noqa: E402

TOOLS = {"echo": ({"text": "hello"}, "hello"), "plan_trip": (PLAN_TRIP_ARGUMENTS, PLAN_TRIP_TEXT)}
MODERN = "2026-07-28"
LEGACY = "2025-11-25"


def request_bytes(port: int, tool: str, era: str) -> bytes:
    arguments, _ = TOOLS[tool]
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    headers = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": era}
    if era == MODERN:
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                           "io.modelcontextprotocol/clientCapabilities": {}}
        headers.update({"Mcp-Method": "tools/call", "Mcp-Name": tool})
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return f"POST /mcp HTTP/1.1\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    if "content-length" in fields:
        return status, await reader.readexactly(int(fields["content-length"]))
    body = bytearray()
    while True:  # chunked
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        chunk = await reader.readexactly(size + 2)
        if size == 0:
            return status, bytes(body)
        body.extend(chunk[:-2])


def reply_text(body: bytes) -> str | None:
    text = body.decode(errors="replace")
    if text.startswith(("event:", "data:", "id:")):  # an SSE reply: take the data line
        text = next((line[5:].strip() for line in text.splitlines() if line.startswith("data:")), "")
    try:
        reply = json.loads(text)
        return str(reply["result"]["content"][0]["text"])
    except (ValueError, KeyError, IndexError, TypeError):
        return None


async def one_call(port: int, request: bytes) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        return await read_response(reader)
    finally:
        writer.close()


async def pick_era(port: int, tool: str) -> str:
    """2026-07-28 if the server answers it correctly, else 2025-11-25 stateless."""
    for era in (MODERN, LEGACY):
        status, body = await one_call(port, request_bytes(port, tool, era))
        if status == 200 and reply_text(body) == TOOLS[tool][1]:
            return era
    raise RuntimeError(f"port {port}: no correct {tool} reply in either era: {status} {body[:300]!r}")


async def load(port: int, request: bytes, expected: str, connections: int, seconds: float) -> dict[str, int]:
    stop = time.monotonic() + seconds
    counts = {"ok": 0, "bad": 0}

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        checked = False
        try:
            while time.monotonic() < stop:
                writer.write(request)
                status, body = await read_response(reader)
                if status != 200 or (not checked and reply_text(body) != expected):
                    counts["bad"] += 1
                else:
                    counts["ok"] += 1
                checked = True  # the first reply per connection is checked in full, the rest by status
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(connections)))
    return counts


def measure(server: benchlib.Server, tool: str, args: argparse.Namespace) -> dict[str, Any]:
    era = asyncio.run(pick_era(server.port, tool))
    request = request_bytes(server.port, tool, era)
    expected = TOOLS[tool][1]
    asyncio.run(load(server.port, request, expected, args.connections, args.warmup))
    cpu_before, busy_before = benchlib.cpu_seconds(server.pid), benchlib.machine_busy_seconds()
    started = time.monotonic()
    counts = asyncio.run(load(server.port, request, expected, args.connections, args.duration))
    elapsed = time.monotonic() - started
    cpu = benchlib.cpu_seconds(server.pid) - cpu_before
    busy = benchlib.machine_busy_seconds() - busy_before
    calls = counts["ok"] + counts["bad"]
    return {"server": server.name, "tool": tool, "era": era, "requests": calls, "bad": counts["bad"],
            "seconds": round(elapsed, 2), "rps": round(calls / elapsed, 1),
            "server_cpu_us_per_call": round(cpu / calls * 1e6, 1) if calls else None,
            "server_cpu_share": round(cpu / elapsed, 2),
            "machine_busy_share": round(busy / elapsed / (os.cpu_count() or 1), 2)}


def servers(args: argparse.Namespace, logdir: Path) -> list[benchlib.Server]:
    env = {**os.environ, "MCPHOST_PLUGINS": "typed", "MCPHOST_CONFIG": str(logdir / "empty.toml"),
           "MCPHOST_LOG_LEVEL": "warning", "MCPHOST_WORKERS": "1"}
    (logdir / "empty.toml").write_text("")
    script = str(HERE / "typed_tools.py")
    found = []
    for name, python, kind in (("mcphost", sys.executable, "mcphost"), ("mcp-sdk", sys.executable, "sdk"),
                               ("fastmcp", args.fastmcp_python, "fastmcp")):
        if python is None or (args.only and name not in args.only):
            continue
        port = benchlib.free_port()
        found.append(benchlib.Server(name, [python, script, kind, "--port", str(port)], port, env, logdir))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per timed run")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--fastmcp-python", help="a Python with fastmcp installed (its own venv)")
    parser.add_argument("--only", action="append", help="mcphost, mcp-sdk or fastmcp (repeatable)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: list[dict[str, Any]] = []
    with benchlib.workdir() as tmp, benchlib.sigterm_as_interrupt():
        logdir = Path(tmp)
        for server in servers(args, logdir):
            with benchlib.running(server):
                for tool in TOOLS:
                    results.append(measure(server, tool, args))
    if args.json:
        print(json.dumps({"results": results, "machine": benchlib.machine_facts()}, indent=2))
        return 0
    print(f"{args.connections} connections, {args.duration:g} s per run after {args.warmup:g} s warm-up, "
          "one server at a time; load generator in this process")
    print(f"{'server':<10}{'tool':<11}{'era':<12}{'req/s':>9}{'CPU us/call':>13}{'bad':>6}{'busy':>7}")
    for row in results:
        print(f"{row['server']:<10}{row['tool']:<11}{row['era']:<12}{row['rps']:>9.0f}"
              f"{row['server_cpu_us_per_call']:>13.0f}{row['bad']:>6}{row['machine_busy_share']:>7.2f}")
    by = {(r["server"], r["tool"]): r for r in results}
    for tool in TOOLS:
        ours, sdk = by.get(("mcphost", tool)), by.get(("mcp-sdk", tool))
        if ours and sdk:
            print(f"{tool}: mcphost {ours['rps'] / sdk['rps']:.2f}x the SDK's requests/s, "
                  f"{sdk['server_cpu_us_per_call'] / ours['server_cpu_us_per_call']:.2f}x less CPU per call")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
