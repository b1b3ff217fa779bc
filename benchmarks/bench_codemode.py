#!/usr/bin/env python3
"""Code mode: the bytes a client reads to do one task with list, search and code discovery, and
/healthz while a program burns CPU.

    python benchmarks/bench_codemode.py [--tools 1000] [--health 300] [--json]

The task: the current time in Tokyo, its conversion to London, and storing the result in a
knowledge graph. Its tools come from the official time server (``mcp-server-time``, PyPI) and
memory server (``@modelcontextprotocol/server-memory``, npm, from tests/support/js), mounted
through mcphost-proxy; generated distractor tools fill the catalog up to ``--tools``. Three
endpoints serve the same catalog: ``discovery = "list"``, ``"search"`` and ``"code"``.

Bytes: what the client's model reads and writes for the task over real HTTP (session era):
every page of tools/list, then each request it sends and each reply it reads, counted as the
compact JSON-RPC messages (no HTTP or SSE framing). With list: the full listing, then the
three calls. With search: the short listing, one search_tools per step (the three queries
below), then three call_tool calls. With code: the short listing, the same three searches (to
learn the schemas), then one execute running the whole chain. Each answer is checked.

Health: ``--health`` GETs of /healthz one after another, first idle, then while an ``execute``
program burns CPU (its own worker process) in the same run: p50, p99 and max in milliseconds, and
the CPU this process (the host and the probing client) spent per probe: equal in both phases means
the program costs the host's event loop nothing, and any difference in latency is the machine's
cores being shared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
from mcphost_codemode import CodeModePlugin
from mcphost_proxy import ProxyPlugin

import mcphost
from mcphost.testing import make_host, serve_http

REPO = Path(__file__).resolve().parents[1]
MEMORY = REPO / "tests" / "support" / "js" / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / \
    "index.js"
VERSION = "2025-11-25"
QUERIES = ("current time in a time zone", "convert a time from one time zone to another",
           "store facts about an entity in the knowledge graph memory")
HHMM = "09:30"
CHAIN = f"""
tokyo = await call_tool("get_current_time", {{"timezone": "Asia/Tokyo"}})
london = await call_tool("convert_time", {{"source_timezone": "Asia/Tokyo", "time": "{HHMM}",
                                          "target_timezone": "Europe/London"}})
await call_tool("create_entities", {{"entities": [{{"name": "meeting", "entityType": "event",
    "observations": ["Tokyo {HHMM} is London " + london["target"]["datetime"][11:16]]}}]}})
result = {{"tokyo_now": tokyo["datetime"], "london": london["target"]["datetime"]}}
"""
DIRECT = (("get_current_time", {"timezone": "Asia/Tokyo"}),
          ("convert_time", {"source_timezone": "Asia/Tokyo", "time": HHMM, "target_timezone": "Europe/London"}),
          ("create_entities", {"entities": [{"name": "meeting", "entityType": "event",
                                             "observations": [f"Tokyo {HHMM} is London 00:30"]}]}))
VERBS = ("create", "get", "list", "update", "delete", "search", "archive", "export")
RESOURCES = ("issue", "invoice", "contact", "ticket", "file", "folder", "event", "message", "report", "order",
             "payment", "deployment", "alert", "user", "team")


class Distractors:
    """``count`` generated tools of made-up services, each with a description and a small schema."""

    def __init__(self, count: int) -> None:
        self.count = count

    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        tools = []
        for index in range(self.count):
            verb, resource = VERBS[index % len(VERBS)], RESOURCES[(index // len(VERBS)) % len(RESOURCES)]
            service = f"svc{index // (len(VERBS) * len(RESOURCES))}"
            schema = {"type": "object", "properties": {
                "id": {"type": "string", "description": f"The {resource}'s identifier"},
                "fields": {"type": "object", "description": f"Fields of the {resource} to {verb}"}},
                "required": ["id"]}

            async def handler(id: str, fields: dict[str, Any] | None = None) -> str:
                return "ok"

            tools.append(mcphost.Tool(name=f"{service}_{verb}_{resource}", fn=handler, input_schema=schema,
                                      description=f"{verb.capitalize()} a {resource} in the {service} service "
                                                  f"(its {resource}s, their owners and history)."))
        return tools


class Reader:
    """A session-era client that counts the bytes of the messages it sends and reads."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url = http, url
        self.session: str | None = None
        self.bytes = 0
        self.next_id = 0

    async def post(self, message: dict[str, Any]) -> dict[str, Any] | None:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
                   "mcp-protocol-version": VERSION}
        if self.session:
            headers["mcp-session-id"] = self.session
        body = orjson.dumps(message)
        response = await self.http.post(self.url, content=body, headers=headers, timeout=120)
        self.session = response.headers.get("mcp-session-id", self.session)
        if "id" not in message:
            return None
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            replies = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")
                       and line[5:].strip()]
            reply = next(item for item in replies if item.get("id") == message["id"])
        else:
            reply = response.json()
        return reply  # type: ignore[no-any-return]

    async def start(self) -> None:
        await self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request the model makes and reads, counted."""
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        reply = await self.post(message)
        assert reply is not None and "result" in reply, reply
        self.bytes += len(orjson.dumps(message)) + len(orjson.dumps(reply))
        return reply["result"]  # type: ignore[no-any-return]

    async def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        while True:
            result = await self.request("tools/list", params)
            tools += result["tools"]
            if not result.get("nextCursor"):
                return tools
            params = {"cursor": result["nextCursor"]}


async def task_bytes(base: str) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    async with httpx.AsyncClient() as http:
        for mode in ("list", "search", "code"):
            reader = Reader(http, f"{base}/mcp/{mode}")
            await reader.start()
            listed = await reader.list_tools()
            parts = {"tools/list": reader.bytes}
            found: list[bool] = []
            if mode != "list":
                for query, (name, _) in zip(QUERIES, DIRECT, strict=True):
                    result = await reader.request("tools/call", {"name": "search_tools", "arguments": {"query": query}})
                    found.append(name in [tool["name"] for tool in result["structuredContent"]["tools"]])
                parts["search_tools"] = reader.bytes - sum(parts.values())
            if mode == "list":
                for name, arguments in DIRECT:
                    result = await reader.request("tools/call", {"name": name, "arguments": arguments})
                    assert not result.get("isError"), result
            elif mode == "search":
                for name, arguments in DIRECT:
                    result = await reader.request("tools/call", {"name": "call_tool",
                                                                 "arguments": {"name": name, "arguments": arguments}})
                    assert not result.get("isError"), result
            else:
                result = await reader.request("tools/call", {"name": "execute", "arguments": {"code": CHAIN}})
                assert not result.get("isError"), result
                assert result["structuredContent"]["result"]["london"][11:16] in ("00:30", "01:30"), result
            parts["calls"] = reader.bytes - sum(parts.values())
            rows[mode] = {"listed": len(listed), "bytes": reader.bytes, "parts": parts,
                          "searches_found_the_tool": found}
    return rows


async def health(base: str, url: str, count: int) -> dict[str, Any]:
    async def probe(http: httpx.AsyncClient) -> list[float]:
        times = []
        for _ in range(count):
            started = time.perf_counter()
            response = await http.get(base + "/healthz")
            times.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200
        return times

    def summary(times: list[float], cpu: float) -> dict[str, float]:
        ordered = sorted(times)
        return {"p50": round(statistics.median(ordered), 2), "p99": round(ordered[int(len(ordered) * 0.99) - 1], 2),
                "max": round(ordered[-1], 2), "host_cpu_ms_per_probe": round(cpu * 1000 / len(times), 3)}

    async with httpx.AsyncClient() as http:
        cpu = time.process_time()
        idle = await probe(http)
        idle_cpu = time.process_time() - cpu
        reader = Reader(http, url)
        await reader.start()
        burn = asyncio.create_task(reader.request("tools/call", {"name": "execute", "arguments": {
            "code": "n = 0\nwhile True:\n    n += 1"}}))
        await asyncio.sleep(1.0)  # the program is computing in its worker by now
        cpu = time.process_time()
        await asyncio.sleep(2.0)  # no requests: what the running program costs the host process
        quiet_cpu = time.process_time() - cpu
        cpu = time.process_time()
        busy = await probe(http)
        busy_cpu = time.process_time() - cpu
        assert not burn.done(), "the program should still be computing"
        await reader.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": reader.next_id, "reason": "measured"}})
        burn.cancel()
    return {"idle": summary(idle, idle_cpu), "while_a_program_burns_cpu": summary(busy, busy_cpu),
            "host_cpu_ms_in_2s_of_a_program_burning": round(quiet_cpu * 1000, 2)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tools", type=int, default=1000, help="tools in the catalog (default 1000)")
    parser.add_argument("--health", type=int, default=300, help="/healthz probes per phase (0: skip)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    node = shutil.which("node")
    if node is None or not MEMORY.exists():
        sys.exit("needs node and tests/support/js installed (npm ci there) for the memory server")
    with tempfile.TemporaryDirectory() as scratch:
        servers = {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                            "prefix": ""},
                   "memory": {"command": node, "args": [str(MEMORY)], "prefix": "",
                              "env": {"MEMORY_FILE_PATH": str(Path(scratch) / "memory.jsonl")}}}
        proxy = ProxyPlugin()
        real = 2 + 9  # the time server's tools and the memory server's
        host = make_host(("proxy", proxy), ("distractors", Distractors(args.tools - real)),
                         ("codemode", CodeModePlugin()),
                         config={"plugins": {"proxy": {"servers": servers}},
                                 "endpoints": {"list": {"discovery": "list"}, "search": {"discovery": "search"},
                                               "code": {"discovery": "code", "code": {"time_limit": 600}}}})
        async with serve_http(host) as live:
            await proxy.wait_mounted(60)
            report: dict[str, Any] = {"tools": len(host.catalog.tools), "task": await task_bytes(live.base)}
            if args.health:
                report["healthz_ms"] = await health(live.base, live.base + "/mcp/code", args.health)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"catalog: {report['task']['list']['listed']} tools (11 real: mcp-server-time, server-memory; "
          "the rest generated)")
    print(f"{'discovery':<10} {'listed':>6} {'bytes':>9} {'tools/list':>10} {'search_tools':>12} {'calls':>7}  "
          "searches found the tool")
    for mode, row in report["task"].items():
        parts = row["parts"]
        print(f"{mode:<10} {row['listed']:>6} {row['bytes']:>9,} {parts['tools/list']:>10,} "
              f"{parts.get('search_tools', 0):>12,} {parts['calls']:>7,}  {row['searches_found_the_tool'] or '-'}")
    if "healthz_ms" in report:
        probes = report["healthz_ms"]
        print(f"host process CPU in 2 s while a program burns (no requests): "
              f"{probes.pop('host_cpu_ms_in_2s_of_a_program_burning')} ms")
        for phase, row in probes.items():
            print(f"/healthz {phase}: p50 {row['p50']} ms, p99 {row['p99']} ms, max {row['max']} ms; "
                  f"this process's CPU per probe (client and host) {row['host_cpu_ms_per_probe']} ms")


if __name__ == "__main__":
    asyncio.run(main())
