#!/usr/bin/env python3
"""The gateway's CPU per proxied call, in process: the proxy's ASGI app called directly (no downstream socket).

    python benchmarks/bench_proxy_asgi.py [--requests 3000] [--rounds 5] [--only http --only stdio --only direct]

``direct``: the demo's echo through the host's ASGI app (what the upstream spends on a direct call, less
its HTTP parsing); ``http`` / ``stdio``: the same stateless 2026-07-28 ``tools/call`` through a host with only
the proxy plugin, mounting ``mcphost serve`` (demo) over HTTP (a process on a free loopback port) or over
stdio (the gateway starts it). The figure is this process's CPU time per request (user + system: the
gateway's loopback writes and reads to the upstream included), the best of ``--rounds`` rounds; the
upstream's own CPU is not in it. Steadier than ``bench_proxy.py``'s requests/s on a busy machine, so a
change to the proxy's per-call path can be measured before and after in minutes; ``bench_proxy.py`` gives
the figures of record.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib

benchlib.use_source_in_process()  # MCPHOST_BENCH_SOURCE: another copy of mcphost (the proxy: PYTHONPATH)

EXPECTED = b'"text":"hello"'


async def call(app: Any, request_id: int) -> bytes:
    """One stateless echo call through the ASGI app, as Hypercorn would hand it over; the reply's body."""
    scope, receive, stay = benchlib.asgi_exchange("POST", benchlib.modern_echo_call(request_id),
                                                  benchlib.modern_headers())
    reply: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            reply.append(message.get("body", b""))

    await app(scope, receive, send)
    stay.set()
    return b"".join(reply)


def build(plugins: dict[str, Any]) -> Any:
    from mcphost.app import create_app
    from mcphost.config import config_from_dict
    from mcphost.host import Host

    config = config_from_dict({"server": {"log_level": "warning"}, "plugins": plugins}, env={})
    return create_app(Host(config))


@contextlib.asynccontextmanager
async def upstream_process(tmp: Path) -> AsyncIterator[str]:
    server = benchlib.mcphost_server("upstream", tmp)
    server.argv = benchlib.pinned(server.argv, "1")  # off this process's core where there are two
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def _stdio_table(tmp: Path) -> dict[str, Any]:
    command = [c for c in benchlib.mcphost_server("x", tmp).argv if c != "--host"]
    command = [*command[:command.index("serve") + 1], "--stdio"]
    return {"command": command[0], "args": command[1:], "prefix": "",
            "env": {"MCPHOST_PLUGINS": "demo", "MCPHOST_CONFIG": str(tmp / "empty.toml"),
                    "MCPHOST_LOG_LEVEL": "warning"}}


async def measure(mode: str, requests: int, rounds: int, era: str) -> float:
    with tempfile.TemporaryDirectory() as tmpname:
        async with contextlib.AsyncExitStack() as stack:
            return await _measure(stack, Path(tmpname), mode, requests, rounds, era)


async def _measure(stack: contextlib.AsyncExitStack, tmp: Path, mode: str, requests: int, rounds: int,
                   era: str) -> float:
    if True:
        if mode == "direct":
            plugins: dict[str, Any] = {"allow": ["demo"]}
        elif mode == "http":
            url = await stack.enter_async_context(upstream_process(tmp))
            plugins = {"allow": ["proxy"], "proxy": {"servers": {"up": {"url": url, "prefix": "", "era": era}}}}
        else:
            plugins = {"allow": ["proxy"], "proxy": {"servers": {"up": {**_stdio_table(tmp), "era": era}}}}
        app = build(plugins)
        await app.host.start()
        await app.transport.start()
        try:
            for _ in range(600):  # the upstream is mounted: its echo answers
                if EXPECTED in await call(app, 0):
                    break
                await asyncio.sleep(0.05)

            async def one(number: int) -> None:
                reply = await call(app, number)
                if EXPECTED not in reply or b'"isError":true' in reply:
                    raise AssertionError(f"{mode}: {reply[:300]!r}")

            return await benchlib.best_cpu_per_call(one, requests, rounds)
        finally:
            await app.transport.stop()
            await app.host.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--era", choices=("session", "auto"), default="session")
    parser.add_argument("--only", action="append", choices=["direct", "http", "stdio"])
    args = parser.parse_args()
    benchlib.pin_self("0")
    os.environ.setdefault("MCPHOST_LOG_LEVEL", "warning")
    for mode in args.only or ["direct", "http", "stdio"]:
        us = asyncio.run(measure(mode, args.requests, args.rounds, args.era))
        print(f"{mode:7} {us:7.1f} us CPU per request (this process)", flush=True)


if __name__ == "__main__":
    main()
