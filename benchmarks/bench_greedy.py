#!/usr/bin/env python3
"""Reliability target 11, the greedy-principal half: another principal's echo latency and errors
while one principal exhausts its own quotas.

    python benchmarks/bench_greedy.py                     # 10 s baseline, 20 s greedy phase
    python benchmarks/bench_greedy.py --duration 60 --json greedy.json

``mcphost serve`` (one worker, demo plugin, ``max_sessions_per_principal`` = ``--sessions-cap``,
``max_requests_per_principal`` = ``--requests-cap``). Both principals are anonymous callers, told
apart by their client address (anonymous callers share quotas per address): the victim connects
from 127.0.0.1, the greedy one from 127.0.0.2.

1. Baseline: the victim calls ``echo`` back to back on one session for ``--baseline`` seconds.
2. Greedy: the other principal opens sessions until it gets 429, fills its request quota with
   long ``progress`` calls, and keeps sending more calls and initializes (all answered 429) for
   ``--duration`` seconds, while the victim keeps calling ``echo``.

Printed: the victim's p50/p99 and error count in both phases (target: 0 errors and p99 <= 2x
baseline), and how many of the greedy principal's requests were refused with 429 and Retry-After.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import benchlib
import httpx
import orjson
from benchlib import running

VICTIM = "127.0.0.1"
GREEDY = "127.0.0.2"


def client_from(address: str) -> httpx.AsyncClient:
    """An HTTP client whose connections leave from ``address`` (a loopback alias)."""
    return httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(local_address=address),
                             timeout=httpx.Timeout(30.0))


async def initialize(client: httpx.AsyncClient, url: str) -> httpx.Response:
    return await client.post(url, content=benchlib.INITIALIZE_BODY, headers=benchlib.headers())


async def open_session(client: httpx.AsyncClient, url: str) -> str:
    session_id = benchlib.check_initialize(await initialize(client, url))
    await client.post(url, content=benchlib.INITIALIZED, headers=benchlib.headers(session_id))
    return session_id


async def victim(url: str, seconds: float) -> tuple[list[float], int]:
    """Echo back to back for ``seconds``: latencies (ms) and errors."""
    latencies: list[float] = []
    errors = 0
    async with client_from(VICTIM) as client:
        session_id = await open_session(client, url)
        deadline = time.monotonic() + seconds
        request_id = 0
        while time.monotonic() < deadline:
            request_id += 1
            started = time.perf_counter()
            try:
                response = await client.post(url, content=benchlib.echo_call(request_id),
                                             headers=benchlib.headers(session_id))
                benchlib.check_echo(response, request_id)
            except Exception:
                errors += 1
                continue
            latencies.append((time.perf_counter() - started) * 1000)
    return latencies, errors


async def greedy(url: str, seconds: float, stats: dict[str, Any]) -> None:
    """Exhaust the session and request quotas, then keep knocking."""
    async with client_from(GREEDY) as client:
        sessions: list[str] = []
        while True:  # sessions until the cap
            response = await initialize(client, url)
            if response.status_code == 429:
                stats["retry_after"] = response.headers.get("retry-after")
                break
            session_id = benchlib.check_initialize(response)
            await client.post(url, content=benchlib.INITIALIZED, headers=benchlib.headers(session_id))
            sessions.append(session_id)
        stats["sessions"] = len(sessions)
        held: list[asyncio.Task[Any]] = []
        hold = orjson.dumps({"jsonrpc": "2.0", "id": "hold", "method": "tools/call",
                             "params": {"name": "progress", "arguments": {"steps": 1000, "delay_ms": 100}}})

        async def hold_one(session_id: str) -> int:
            async with client.stream("POST", url, content=hold, headers=benchlib.headers(session_id)) as response:
                if response.status_code != 200:
                    return response.status_code
                async for _ in response.aiter_raw():
                    pass
            return 200

        for session_id in sessions:  # one long call per session until the request quota is full
            task = asyncio.ensure_future(hold_one(session_id))
            await asyncio.sleep(0.02)
            if task.done():
                break
            held.append(task)
        stats["held"] = len(held)
        deadline = time.monotonic() + seconds
        n = 0
        while time.monotonic() < deadline:  # keep knocking: calls and initializes
            n += 1
            session_id = sessions[n % len(sessions)]
            call = await client.post(url, content=benchlib.echo_call(n), headers=benchlib.headers(session_id))
            stats["calls_refused"] += call.status_code == 429
            stats["calls"] += 1
            again = await initialize(client, url)
            stats["initializes_refused"] += again.status_code == 429
            stats["initializes"] += 1
        for task in held:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*held, return_exceptions=True)


def summary(latencies: list[float]) -> dict[str, float]:
    return {"n": len(latencies), "p50_ms": round(benchlib.percentile(latencies, 50), 2),
            "p99_ms": round(benchlib.percentile(latencies, 99), 2)}


async def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    base, base_errors = await victim(url, args.baseline)
    stats: dict[str, Any] = {"calls": 0, "calls_refused": 0, "initializes": 0, "initializes_refused": 0}
    greedy_task = asyncio.ensure_future(greedy(url, args.duration, stats))
    await asyncio.sleep(args.ramp)  # let it reach its caps first
    during, during_errors = await victim(url, args.duration - args.ramp)
    await greedy_task
    return {"baseline": {**summary(base), "errors": base_errors},
            "greedy_phase": {**summary(during), "errors": during_errors},
            "greedy": stats}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=float, default=10.0, help="seconds of baseline echo calls")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of the greedy phase")
    parser.add_argument("--ramp", type=float, default=3.0, help="seconds the greedy principal gets to reach its caps")
    parser.add_argument("--sessions-cap", type=int, default=50, help="max_sessions_per_principal")
    parser.add_argument("--requests-cap", type=int, default=32, help="max_requests_per_principal")
    parser.add_argument("--json", help="also write the report to this file")
    args = parser.parse_args()
    report = benchlib.new_report(args)
    with benchlib.workdir() as tmp, benchlib.sigterm_as_interrupt():
        server = benchlib.mcphost_server("greedy", Path(tmp), extra_env={
            "MCPHOST_MAX_SESSIONS_PER_PRINCIPAL": str(args.sessions_cap),
            "MCPHOST_MAX_REQUESTS_PER_PRINCIPAL": str(args.requests_cap)})
        with running(server):
            result = asyncio.run(measure(server.url, args))
            restarted = server.proc is None or server.proc.poll() is not None
    report.update(result)
    report["server_exited"] = restarted
    base, during, stats = result["baseline"], result["greedy_phase"], result["greedy"]
    ratio = during["p99_ms"] / base["p99_ms"] if base["p99_ms"] else float("inf")
    print(f"victim baseline      : n={base['n']} p50={base['p50_ms']} ms p99={base['p99_ms']} ms "
          f"errors={base['errors']}")
    print(f"victim, greedy phase : n={during['n']} p50={during['p50_ms']} ms p99={during['p99_ms']} ms "
          f"errors={during['errors']} (p99 {ratio:.2f}x baseline; target <= 2x and 0 errors)")
    print(f"greedy principal     : {stats.get('sessions')} sessions, {stats.get('held')} calls held; "
          f"{stats['calls_refused']}/{stats['calls']} calls and {stats['initializes_refused']}/{stats['initializes']} "
          f"initializes refused with 429 (Retry-After {stats.get('retry_after')})")
    print(f"server exited        : {restarted}")
    report["targets"] = {"0 errors for the other principal": during["errors"] == 0,
                         "its p99 <= 2x baseline": ratio <= 2.0,
                         "the greedy principal refused with 429": stats["calls_refused"] > 0,
                         "the process never restarts": not restarted}
    benchlib.finish_report(args.json, report)


if __name__ == "__main__":
    main()
