#!/usr/bin/env python3
"""Reliability target 11, isolation: a bystander's echo calls while a plugin misbehaves and a greedy
principal exhausts its quotas, all at once.

    python benchmarks/bench_isolation.py                          # 10 s baseline, 20 s attack, all attacks
    python benchmarks/bench_isolation.py --attacks exit,block --attack 60 --json out.json
    python benchmarks/bench_isolation.py --attacks greedy         # the greedy principal alone (bench_greedy.py)

``mcphost serve`` (one worker, demo plugin, the benchmark-only misbehaving plugin benchunruly.py,
``max_sessions_per_principal`` = ``--sessions-cap``, ``max_requests_per_principal`` =
``--requests-cap``), pinned to core 0 with ``taskset``. Three principals, all anonymous and so told
apart by their client address: the bystander connects from 127.0.0.1, the greedy principal from
127.0.0.2, the misbehaving plugin's callers from 127.0.0.3.

1. Baseline: ``--clients`` bystander threads call ``echo`` (stateless 2026-07-28) ``--rate`` times a
   second each for ``--baseline`` seconds, and one thread times ``/healthz`` every 0.1 s. This
   process, which measures, is pinned to core 1.
2. Attack: the attackers start in a separate process (pinned to ``--attacker-core``, 1 by default,
   at niceness ``--attacker-nice``, 10: their client-side work never holds this process's GIL, and
   the greedy one's flood, which keeps its core busy, yields it to the bystanders' few calls), each
   attack in ``--attacks`` in its own threads; ``--ramp`` seconds after they report running, the
   bystanders measure again for ``--attack`` seconds while every attack keeps going:

   - ``exit``: a tool that calls ``sys.exit(2)`` (argparse on bad input), ``--attack-rate`` a second;
   - ``interrupt``: a tool that raises ``KeyboardInterrupt`` on the event loop, as often;
   - ``block``: ``--blockers`` concurrent calls of a synchronous tool sleeping 5 s, back to back;
   - ``long-uri``: ``resources/read`` of a 1 MiB URI on the demo's ``demo://files/{+path}`` (session
     era: a 2026-07-28 request would have to repeat the URI in a header), 5 a second;
   - ``greedy`` (RELIABILITY H4): opens sessions until it gets 429, fills its request quota with long
     ``progress`` calls, then keeps sending calls and initializes back to back (each answered 429).
   - ``hoard`` (RELIABILITY target 14, from 127.0.0.4): twice ``--blockers`` slow synchronous calls
     back to back (more than its share of the sync pool: they queue behind its own) and a GET stream
     on each session it opens, until its request budget answers 429.

   The misbehaving plugin's attacks run at a modest rate, so what the bystander measures is their
   effect; flooding is the greedy principal's part, bounded by its quotas.

Reported: the bystander's p50/p99 and errors in both phases, the slowest ``/healthz``, what each
attack got back, the load average before and after, and whether the server process is the one that
started (no restart, no exit). Target 11: 0 bystander errors, p99 <= 2x baseline, no restart.

Adding an attacker: write ``def attack_NAME(url, stop, counts, args)`` that loops until ``stop`` is
set, counting outcomes in ``counts`` (``args`` holds the command-line options), and add it to
:data:`ATTACKS`; it then runs with ``--attacks NAME`` and in the default run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import benchlib
import httpx
import orjson
from benchlib import running

HERE = Path(__file__).resolve().parent
SERVER_CORE = "0"
CLIENT_CORE = "1"
BYSTANDER = "127.0.0.1"
GREEDY = "127.0.0.2"
UNRULY = "127.0.0.3"
HOARDER = "127.0.0.4"


def client_from(address: str, timeout: float = 30.0) -> httpx.Client:
    """An HTTP client whose connections leave from ``address`` (a loopback alias: another principal)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=timeout)


# -- the bystander (this process) ------------------------------------------------------------------

def bystander(url: str, rate: float, stop: threading.Event, latencies: list[float], errors: Counter[str],
              tag: str) -> None:
    """Echo calls at ``rate`` per second until ``stop``; latency of each success, errors by kind."""
    period = 1.0 / rate
    number = 0
    with client_from(BYSTANDER) as client:
        next_at = time.monotonic()
        while not stop.is_set():
            number += 1
            request_id = f"{tag}-{number}"
            started = time.perf_counter()
            try:
                response = client.post(url, content=benchlib.modern_echo_call(request_id),
                                       headers=benchlib.modern_headers())
                benchlib.check_modern_echo(response, request_id)
                latencies.append(time.perf_counter() - started)
            except Exception as exc:  # counted, not raised: the run goes on
                errors[type(exc).__name__] += 1
            next_at += period
            time.sleep(max(0.0, next_at - time.monotonic()))


def health_prober(url: str, stop: threading.Event, latencies: list[float], errors: Counter[str]) -> None:
    health = url.replace("/mcp", "/healthz")
    with client_from(BYSTANDER) as client:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                if client.get(health).status_code != 200:
                    errors["healthz"] += 1
                latencies.append(time.perf_counter() - started)
            except Exception as exc:
                errors[type(exc).__name__] += 1
            time.sleep(0.1)


# -- the attacks (the attacker process) ------------------------------------------------------------

def _call(client: httpx.Client, url: str, tool: str, arguments: dict[str, Any], counts: Counter[str]) -> None:
    body, sent = benchlib.modern_call(f"attack-{tool}", tool, arguments)
    try:
        response = client.post(url, content=body, headers=sent)
        reply = orjson.loads(response.content) if response.content else {}
        result = reply.get("result") or {}
        counts["isError" if result.get("isError") else f"HTTP {response.status_code}"] += 1
    except Exception as exc:
        counts[type(exc).__name__] += 1
        time.sleep(0.05)  # a dead server: do not spin


def attack_exit(url: str, stop: threading.Event, counts: Counter[str], args: argparse.Namespace) -> None:
    with client_from(UNRULY) as client:
        while not stop.wait(1.0 / args.attack_rate):
            _call(client, url, "unruly_exit", {}, counts)


def attack_interrupt(url: str, stop: threading.Event, counts: Counter[str], args: argparse.Namespace) -> None:
    with client_from(UNRULY) as client:
        while not stop.wait(1.0 / args.attack_rate):
            _call(client, url, "unruly_interrupt", {}, counts)


def attack_block(url: str, stop: threading.Event, counts: Counter[str], args: argparse.Namespace) -> None:
    with client_from(UNRULY) as client:
        while not stop.is_set():
            _call(client, url, "unruly_block", {"seconds": 5}, counts)


def attack_long_uri(url: str, stop: threading.Event, counts: Counter[str], args: argparse.Namespace) -> None:
    uri = "demo://files/" + "a/" * (512 * 1024)  # 1 MiB
    body = orjson.dumps({"jsonrpc": "2.0", "id": "long", "method": "resources/read", "params": {"uri": uri}})
    with client_from(UNRULY, timeout=60) as client:
        sent = benchlib.headers(benchlib.open_session(client, url))
        while not stop.wait(0.2):
            started = time.perf_counter()
            try:
                response = client.post(url, content=body, headers=sent)
                replies = benchlib.messages_of(response)
                code = (replies[-1].get("error") or {}).get("code") if replies else None
                counts[f"HTTP {response.status_code} {code}"] += 1
            except Exception as exc:
                counts[type(exc).__name__] += 1
            counts["max_ms"] = max(counts["max_ms"], round((time.perf_counter() - started) * 1000))


def attack_greedy(url: str, stop: threading.Event, counts: Counter[str], args: argparse.Namespace) -> None:
    asyncio.run(_greedy(url, stop, counts))


async def _greedy(url: str, stop: threading.Event, counts: Counter[str]) -> None:
    """Exhaust the session and request quotas, then keep knocking until ``stop``."""
    # Keep-alive for every connection: httpcore 1.0 closes an idle connection after each response once
    # a pool holds more than max_keepalive_connections in all (it counts busy ones too), which with
    # the held calls would make every knock a new connection: a connection flood, not this attack.
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(local_address=GREEDY, limits=limits),
                                 timeout=httpx.Timeout(30.0)) as client:

        async def initialize() -> httpx.Response:
            return await client.post(url, content=benchlib.INITIALIZE_BODY, headers=benchlib.headers())

        sessions: list[str] = []
        while not stop.is_set():  # sessions until the cap
            response = await initialize()
            if response.status_code == 429:
                counts[f"Retry-After {response.headers.get('retry-after')}"] += 1
                break
            session_id = benchlib.check_initialize(response)
            await client.post(url, content=benchlib.INITIALIZED, headers=benchlib.headers(session_id))
            sessions.append(session_id)
        counts["sessions"] = len(sessions)
        if not sessions:
            return
        hold = orjson.dumps({"jsonrpc": "2.0", "id": "hold", "method": "tools/call",
                             "params": {"name": "progress", "arguments": {"steps": 10_000, "delay_ms": 100}}})

        async def hold_one(session_id: str) -> int:
            async with client.stream("POST", url, content=hold, headers=benchlib.headers(session_id)) as response:
                if response.status_code != 200:
                    return response.status_code
                async for _ in response.aiter_raw():
                    pass
            return 200

        held: list[asyncio.Task[int]] = []
        for session_id in sessions:  # one long call per session until the request quota is full
            task = asyncio.ensure_future(hold_one(session_id))
            held.append(task)
            await asyncio.sleep(0.02)
            if task.done():
                break
        await asyncio.sleep(0.2)
        counts["held"] = sum(not task.done() for task in held)  # what the server let in
        n = 0
        while not stop.is_set():  # keep knocking: calls and initializes
            n += 1
            try:
                call = await client.post(url, content=benchlib.echo_call(n),
                                         headers=benchlib.headers(sessions[n % len(sessions)]))
                counts["calls"] += 1
                counts["calls_refused"] += call.status_code == 429
                again = await initialize()
                counts["initializes"] += 1
                counts["initializes_refused"] += again.status_code == 429
            except Exception as exc:
                counts[type(exc).__name__] += 1
                await asyncio.sleep(0.05)  # a dead server: do not spin
        for task in held:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*held, return_exceptions=True)


def attack_hoard(url: str, stop: threading.Event, counts: Counter[str], args: argparse.Namespace) -> None:
    asyncio.run(_hoard(url, stop, counts, args))


async def _hoard(url: str, stop: threading.Event, counts: Counter[str], args: argparse.Namespace) -> None:
    """Fair shares (RELIABILITY target 14): from a fourth address, hold twice ``--blockers`` slow
    synchronous calls back to back (more than one principal's share of the pool) and a GET stream
    on every session it may open, until its request budget answers 429."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(local_address=HOARDER, limits=limits),
                                 timeout=httpx.Timeout(30.0)) as client:

        async def block(n: int) -> None:
            while not stop.is_set():
                body, sent = benchlib.modern_call(f"hoard-{n}", "unruly_block", {"seconds": 5})
                try:
                    response = await client.post(url, content=body, headers=sent)
                    counts[f"block HTTP {response.status_code}"] += 1
                except Exception as exc:
                    counts[f"block {type(exc).__name__}"] += 1
                    await asyncio.sleep(0.5)

        blockers = [asyncio.ensure_future(block(n)) for n in range(2 * args.blockers)]
        await asyncio.sleep(0.5)
        streams: list[Any] = []
        async with contextlib.AsyncExitStack() as held:
            while not stop.is_set():  # a session and its GET stream, until one is refused
                response = await client.post(url, content=benchlib.INITIALIZE_BODY, headers=benchlib.headers())
                if response.status_code != 200:
                    counts[f"initialize HTTP {response.status_code}"] += 1
                    break
                session_id = benchlib.check_initialize(response)
                await client.post(url, content=benchlib.INITIALIZED, headers=benchlib.headers(session_id))
                stream = await held.enter_async_context(client.stream(
                    "GET", url, headers={**benchlib.headers(session_id), "accept": "text/event-stream"}))
                if stream.status_code != 200:
                    counts[f"GET HTTP {stream.status_code}"] += 1
                    break
                streams.append(stream)
            counts["streams"] = len(streams)
            while not stop.wait(0):
                await asyncio.sleep(0.1)
        for task in blockers:
            task.cancel()
        await asyncio.gather(*blockers, return_exceptions=True)


Attack = Callable[[str, threading.Event, Counter[str], argparse.Namespace], None]

ATTACKS: dict[str, Attack] = {"exit": attack_exit, "interrupt": attack_interrupt, "block": attack_block,
                              "long-uri": attack_long_uri, "greedy": attack_greedy, "hoard": attack_hoard}


def _guarded(attack: Attack, url: str, stop: threading.Event, counts: Counter[str], args: argparse.Namespace) -> None:
    try:
        attack(url, stop, counts, args)
    except Exception as exc:  # an attacker's own failure shows in the report, not as a silent thread death
        counts[f"attacker failed: {type(exc).__name__}: {exc}"[:200]] += 1


def run_attackers(url: str, args: argparse.Namespace) -> None:
    """The attacker process: run ``args.attacks`` until stdin closes, then print what each got, as JSON."""
    stop = threading.Event()
    outcomes: dict[str, Counter[str]] = {name: Counter() for name in args.attacks}
    threads = []
    for name in args.attacks:
        copies = args.blockers if name == "block" else 1
        threads += [threading.Thread(target=_guarded, args=(ATTACKS[name], url, stop, outcomes[name], args))
                    for _ in range(copies)]
    for thread in threads:
        thread.start()
    print("running", flush=True)
    sys.stdin.read()  # until the measuring process closes our stdin
    stop.set()
    for thread in threads:
        thread.join(60)
    print(orjson.dumps({name: dict(counts) for name, counts in outcomes.items()}).decode(), flush=True)


def start_attackers(url: str, args: argparse.Namespace) -> subprocess.Popen[str]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--attacker-for", url, "--attacks", ",".join(args.attacks),
            "--blockers", str(args.blockers), "--attack-rate", str(args.attack_rate)]
    attackers = subprocess.Popen(benchlib.pinned(argv, args.attacker_core), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, preexec_fn=lambda: os.nice(args.attacker_nice))
    assert attackers.stdout is not None
    if attackers.stdout.readline().strip() != "running":
        attackers.kill()
        raise RuntimeError(f"the attacker process did not start (exit status {attackers.wait(10)})")
    return attackers


def stop_attackers(attackers: subprocess.Popen[str]) -> dict[str, Any]:
    try:
        out, _ = attackers.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        attackers.kill()
        return {"attacker process": {"did not stop within 90 s": 1}}
    lines = out.strip().splitlines()
    return orjson.loads(lines[-1]) if lines else {"attacker process": {f"exit status {attackers.returncode}": 1}}


# -- phases and report -----------------------------------------------------------------------------

def phase(url: str, seconds: float, args: argparse.Namespace, attacks: list[str], server_pid: int) -> dict[str, Any]:
    """Bystanders for ``seconds``; with ``attacks``, while the attacker process runs them."""
    attackers = start_attackers(url, args) if attacks else None
    try:
        if attackers is not None:
            time.sleep(args.ramp)
        stop = threading.Event()
        latencies: list[float] = []
        errors: Counter[str] = Counter()
        health: list[float] = []
        threads = [threading.Thread(target=bystander, args=(url, args.rate, stop, latencies, errors, f"b{n}"))
                   for n in range(args.clients)]
        threads.append(threading.Thread(target=health_prober, args=(url, stop, health, errors)))
        for thread in threads:
            thread.start()
        window = (time.monotonic(), time.monotonic() + seconds)
        cpu_before, preempted_before = benchlib.cpu_seconds(server_pid), benchlib.preemptions(server_pid)
        time.sleep(seconds)
        server_cpu = (benchlib.cpu_seconds(server_pid) - cpu_before) / seconds
        preempted = benchlib.preemptions(server_pid) - preempted_before
        stop.set()
        for thread in threads:
            thread.join(60)
    finally:
        outcomes = stop_attackers(attackers) if attackers is not None else {}
    return {"calls": len(latencies), "errors": dict(errors), "error_count": sum(errors.values()),
            "p50_ms": round(benchlib.percentile(latencies, 50) * 1000, 2),
            "p99_ms": round(benchlib.percentile(latencies, 99) * 1000, 2),
            "healthz_max_ms": round(max(health, default=float("nan")) * 1000, 1),
            "server_cpu_share": round(server_cpu, 2), "server_preemptions": preempted,
            "load_average": benchlib.load_average(),
            "attacks": outcomes, "window": window}


def loop_summary(recorded: dict[str, Any], window: tuple[float, float]) -> dict[str, Any]:
    """What benchunruly's LoopRecorder saw of the server's event loop during ``window``."""
    start, end = window
    stalls = [ms for at, ms in recorded.get("stalls", []) if start <= at <= end]
    collections = [(generation, ms) for at, generation, ms in recorded.get("collections", []) if start <= at <= end]
    return {"stalls_over_2ms": len(stalls), "stall_max_ms": max(stalls, default=0.0),
            "stalled_ms": round(sum(stalls), 1),
            "gc": {str(generation): {"count": sum(1 for g, _ in collections if g == generation),
                                     "max_ms": max((ms for g, ms in collections if g == generation), default=0.0)}
                   for generation in (0, 1, 2)}}


def parse_args(argv: list[str] | None = None, default_attacks: str = ",".join(ATTACKS)) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=float, default=10.0, help="seconds of the baseline phase")
    parser.add_argument("--attack", type=float, default=20.0, help="seconds of the attack phase")
    parser.add_argument("--ramp", type=float, default=1.0,
                        help="seconds the attackers run before the attack phase measures")
    parser.add_argument("--clients", type=int, default=4, help="bystander threads")
    parser.add_argument("--rate", type=float, default=20.0, help="echo calls per second per bystander")
    parser.add_argument("--blockers", type=int, default=4, help="concurrent calls of the 5 s blocking tool")
    parser.add_argument("--attack-rate", type=float, default=10.0, help="calls a second of exit and interrupt each")
    parser.add_argument("--attacks", default=default_attacks, help=f"comma-separated, of {', '.join(ATTACKS)}")
    parser.add_argument("--sessions-cap", type=int, default=50, help="server.max_sessions_per_principal")
    parser.add_argument("--requests-cap", type=int, default=32, help="server.max_requests_per_principal")
    parser.add_argument("--attacker-core", default=CLIENT_CORE, help="CPU the attacker process runs on")
    parser.add_argument("--attacker-nice", type=int, default=10,
                        help="niceness of the attacker process: the bystanders get their core when they need it")
    parser.add_argument("--loop-report", action="store_true",
                        help="record the server's loop stalls and garbage collections (benchunruly.LoopRecorder)")
    parser.add_argument("--json", help="write the report here")
    parser.add_argument("--attacker-for", metavar="URL", help=argparse.SUPPRESS)  # the attacker process
    args = parser.parse_args(argv)
    args.attacks = [name for name in args.attacks.split(",") if name]
    unknown = [name for name in args.attacks if name not in ATTACKS]
    if unknown:
        parser.error(f"unknown attacks: {', '.join(unknown)}")
    return args


def main(argv: list[str] | None = None, default_attacks: str = ",".join(ATTACKS)) -> None:
    args = parse_args(argv, default_attacks)
    if args.attacker_for:
        run_attackers(args.attacker_for, args)
        return
    report = benchlib.new_report(args)
    with benchlib.sigterm_as_interrupt(), benchlib.workdir() as tmp:
        loop_file = Path(tmp) / "loop.json"
        server = benchlib.mcphost_server("mcphost-isolation", Path(tmp), extra_env={
            "MCPHOST_PLUGINS": "demo,benchunruly",
            "MCPHOST_MAX_SESSIONS_PER_PRINCIPAL": str(args.sessions_cap),
            "MCPHOST_MAX_REQUESTS_PER_PRINCIPAL": str(args.requests_cap),
            **({"MCPHOST_BENCH_LOOP_REPORT": str(loop_file)} if args.loop_report else {})})
        server.argv = benchlib.pinned([sys.executable, str(HERE / "benchunruly.py"), *server.argv[1:]], SERVER_CORE)
        with running(server):
            pinned_here = benchlib.pin_self(CLIENT_CORE)  # after the server started: it never inherits it
            pid = server.pid
            with client_from(BYSTANDER) as warm:  # the first calls pay imports and caches
                for number in range(50):
                    warm.post(server.url, content=benchlib.modern_echo_call(number), headers=benchlib.modern_headers())
            baseline = phase(server.url, args.baseline, args, [], pid)
            attacked = phase(server.url, args.attack, args, args.attacks, pid)
            alive = server.proc is not None and server.proc.poll() is None
        log = server.log_path.read_text(errors="replace")
        recorded = orjson.loads(loop_file.read_bytes()) if args.loop_report and loop_file.exists() else None
    if recorded is not None:
        for figures in (baseline, attacked):
            figures["server_loop"] = loop_summary(recorded, figures["window"])
    report.update({"baseline": baseline, "attack": attacked, "server_alive": alive, "server_pid": pid,
                   "log_mentions_exit": "exited with" in log, "taskset": shutil.which("taskset") is not None,
                   "measuring_process_pinned": pinned_here})
    ratio = attacked["p99_ms"] / baseline["p99_ms"] if baseline["p99_ms"] else float("nan")
    print(f"bystander echo, {args.clients} x {args.rate:g}/s, stateless 2026-07-28, from {BYSTANDER}; server on "
          f"core {SERVER_CORE}, bystanders and attackers on core {CLIENT_CORE} / {args.attacker_core} "
          f"({'taskset' if report['taskset'] else 'NOT pinned: taskset missing'})")
    for name, figures in (("baseline", baseline), (f"attack ({', '.join(args.attacks)})", attacked)):
        print(f"  {name:<48} calls {figures['calls']:>6}  p50 {figures['p50_ms']:>7.2f} ms  "
              f"p99 {figures['p99_ms']:>7.2f} ms  errors {figures['error_count']}  "
              f"/healthz max {figures['healthz_max_ms']} ms  server CPU {figures['server_cpu_share']:.0%}  "
              f"(load average {figures['load_average']})")
    for name, counts in attacked["attacks"].items():
        print(f"  attack {name:<10} {counts}")
    for name, figures in (("baseline", baseline), ("attack", attacked)):
        if "server_loop" in figures:
            loop = figures["server_loop"]
            print(f"  server loop, {name:<8}: {loop['stalls_over_2ms']} stalls > 2 ms (longest "
                  f"{loop['stall_max_ms']} ms, {loop['stalled_ms']} ms in all); gc by generation {loop['gc']}; "
                  f"{figures['server_preemptions']} involuntary context switches of its main thread")
    print(f"  p99 ratio {ratio:.2f}; server alive {alive} (pid {pid}); "
          f"load average before {report['load_average_before']}, after {attacked['load_average']}")
    greedy = attacked["attacks"].get("greedy")
    report["targets"] = {"0 bystander errors": attacked["error_count"] == 0 and baseline["error_count"] == 0,
                         "p99 <= 2x baseline": ratio <= 2.0, "no restart": alive and "exited with" not in log}
    if greedy is not None:
        report["targets"]["the greedy principal refused with 429"] = greedy.get("calls_refused", 0) > 0
    benchlib.finish_report(args.json, report)


if __name__ == "__main__":
    main()
