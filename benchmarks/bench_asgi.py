#!/usr/bin/env python3
"""CPU per echo tools/call through the whole ASGI app, in-process (no sockets, no load generator).

    python benchmarks/bench_asgi.py [--requests 5000] [--rounds 5] [--json]
    MCPHOST_BENCH_SOURCE=/tmp/mcphost-main python benchmarks/bench_asgi.py   # another copy of mcphost

Each request is handed to the app as Hypercorn would (``bench_sessions.asgi_request``), so the
transport, the kernel's entry, the SessionManager and the handlers all run; the figure is this
process's CPU time per request, the best of ``--rounds`` rounds. Steady on a busy machine where
requests/s under wrk is not, so two copies of the code can be compared side by side. Modes:

  session   session era, one session, SSE replies (the default ``mcphost serve``);
  json      session era with ``server.json_response`` (one JSON body per request);
  modern    stateless 2026-07-28 requests (a short-lived session each).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib

benchlib.use_source_in_process()

from bench_sessions import asgi_request  # noqa: E402


def build(json_response: bool) -> Any:
    from mcphost.app import create_app
    from mcphost.config import config_from_dict
    from mcphost.host import Host

    config = config_from_dict({"server": {"log_level": "warning", "json_response": json_response},
                               "plugins": {"allow": ["demo"]}}, env={})
    return create_app(Host(config))


async def modern_request(app: Any, request_id: int) -> Any:
    scope, receive, stay = benchlib.asgi_exchange("POST", benchlib.modern_echo_call(request_id),
                                                  benchlib.modern_headers())
    status = 0

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    stay.set()
    return status


async def measure(mode: str, requests: int, rounds: int) -> float:
    app = build(mode == "json")
    await app.host.start()
    await app.transport.start()
    try:
        session_id = None
        if mode != "modern":
            response = await asgi_request(app, "POST", benchlib.INITIALIZE_BODY)
            session_id = response.headers["mcp-session-id"]
            await asgi_request(app, "POST", benchlib.INITIALIZED, session_id)

        async def one(number: int) -> None:
            if mode == "modern":
                status = await modern_request(app, number)
            else:
                status = (await asgi_request(app, "POST", benchlib.echo_call(number), session_id)).status_code
            if status != 200:
                raise AssertionError(f"{mode}: HTTP {status}")

        return await benchlib.best_cpu_per_call(one, requests, rounds)
    finally:
        await app.transport.stop()
        await app.host.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", action="append", choices=["session", "json", "modern"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = {mode: asyncio.run(measure(mode, args.requests, args.rounds))
               for mode in args.only or ["session", "json", "modern"]}
    if args.json:
        print(json.dumps({"us_per_request": figures, "code": benchlib.source_state()}))
        return
    print(benchlib.describe_source(benchlib.source_state()))
    for mode, us in figures.items():
        print(f"{mode:8} {us:7.1f} us CPU per request")


if __name__ == "__main__":
    main()
