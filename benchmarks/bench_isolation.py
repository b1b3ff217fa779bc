#!/usr/bin/env python3
"""Reliability target 11, isolation: a bystander's echo calls while others misbehave.

    python benchmarks/bench_isolation.py                          # 10 s baseline, 20 s attack
    python benchmarks/bench_isolation.py --attacks exit,block --attack 60 --json out.json

``mcphost serve`` (one worker, demo plugin, the benchmark-only misbehaving plugin benchunruly.py):

1. Baseline: ``--clients`` bystander threads call ``echo`` (stateless 2026-07-28) ``--rate`` times a
   second each for ``--baseline`` seconds, and one thread times ``/healthz`` every 0.1 s.
2. Attack: the same, while each attack in ``--attacks`` runs in its own threads as fast as its
   requests return for ``--attack`` seconds:

   - ``exit``: a tool that calls ``sys.exit(2)`` (argparse on bad input), ``--attack-rate`` a second;
   - ``interrupt``: a tool that raises ``KeyboardInterrupt`` on the event loop, as often;
   - ``block``: ``--blockers`` concurrent calls of a synchronous tool sleeping 5 s, back to back;
   - ``long-uri``: ``resources/read`` of a 1 MiB URI on the demo's ``demo://files/{+path}`` (session
     era: a 2026-07-28 request would have to repeat the URI in a header), 5 a second.

   Volume is not the point here (flooding is the greedy principal's attack, RELIABILITY H4):
   each misbehaviour runs at a modest rate, so what the bystander measures is its effect.

Reported: the bystander's p50/p99 and errors in both phases, the slowest ``/healthz``, what each
attack got back, and whether the server process is the one that started (no restart, no exit).
Target 11: 0 bystander errors, p99 <= 2x baseline, no restart.

Adding an attacker (the greedy principal of RELIABILITY H4, say): write ``def attack_NAME(url,
stop, counts)`` that loops until ``stop`` is set, counting outcomes in ``counts``, and add it to
:data:`ATTACKS`; it then runs with ``--attacks NAME``.
"""

from __future__ import annotations

import argparse
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


def bystander(url: str, rate: float, stop: threading.Event, latencies: list[float], errors: Counter[str],
              tag: str) -> None:
    """Echo calls at ``rate`` per second until ``stop``; latency of each success, errors by kind."""
    period = 1.0 / rate
    number = 0
    with httpx.Client(timeout=30) as client:
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
    with httpx.Client(timeout=30) as client:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                if client.get(health).status_code != 200:
                    errors["healthz"] += 1
                latencies.append(time.perf_counter() - started)
            except Exception as exc:
                errors[type(exc).__name__] += 1
            time.sleep(0.1)


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


ATTACK_RATE = [10.0]  # calls a second of the exit and interrupt attacks (--attack-rate)


def attack_exit(url: str, stop: threading.Event, counts: Counter[str]) -> None:
    with httpx.Client(timeout=30) as client:
        while not stop.wait(1.0 / ATTACK_RATE[0]):
            _call(client, url, "unruly_exit", {}, counts)


def attack_interrupt(url: str, stop: threading.Event, counts: Counter[str]) -> None:
    with httpx.Client(timeout=30) as client:
        while not stop.wait(1.0 / ATTACK_RATE[0]):
            _call(client, url, "unruly_interrupt", {}, counts)


def attack_block(url: str, stop: threading.Event, counts: Counter[str]) -> None:
    with httpx.Client(timeout=30) as client:
        while not stop.is_set():
            _call(client, url, "unruly_block", {"seconds": 5}, counts)


def attack_long_uri(url: str, stop: threading.Event, counts: Counter[str]) -> None:
    uri = "demo://files/" + "a/" * (512 * 1024)  # 1 MiB
    body = orjson.dumps({"jsonrpc": "2.0", "id": "long", "method": "resources/read", "params": {"uri": uri}})
    with httpx.Client(timeout=60) as client:
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


ATTACKS: dict[str, Callable[[str, threading.Event, Counter[str]], None]] = {
    "exit": attack_exit, "interrupt": attack_interrupt, "block": attack_block, "long-uri": attack_long_uri}


def phase(url: str, seconds: float, args: argparse.Namespace, attacks: list[str]) -> dict[str, Any]:
    stop = threading.Event()
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    health: list[float] = []
    outcomes: dict[str, Counter[str]] = {name: Counter() for name in attacks}
    threads = [threading.Thread(target=bystander, args=(url, args.rate, stop, latencies, errors, f"b{n}"))
               for n in range(args.clients)]
    threads.append(threading.Thread(target=health_prober, args=(url, stop, health, errors)))
    for name in attacks:
        copies = args.blockers if name == "block" else 1
        threads += [threading.Thread(target=ATTACKS[name], args=(url, stop, outcomes[name])) for _ in range(copies)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(60)
    return {"calls": len(latencies), "errors": dict(errors), "error_count": sum(errors.values()),
            "p50_ms": round(benchlib.percentile(latencies, 50) * 1000, 2),
            "p99_ms": round(benchlib.percentile(latencies, 99) * 1000, 2),
            "healthz_max_ms": round(max(health, default=float("nan")) * 1000, 1),
            "attacks": {name: dict(counts) for name, counts in outcomes.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=float, default=10.0, help="seconds of the baseline phase")
    parser.add_argument("--attack", type=float, default=20.0, help="seconds of the attack phase")
    parser.add_argument("--clients", type=int, default=4, help="bystander threads")
    parser.add_argument("--rate", type=float, default=20.0, help="echo calls per second per bystander")
    parser.add_argument("--blockers", type=int, default=4, help="concurrent calls of the 5 s blocking tool")
    parser.add_argument("--attack-rate", type=float, default=10.0, help="calls a second of exit and interrupt each")
    parser.add_argument("--attacks", default=",".join(ATTACKS), help=f"comma-separated, of {', '.join(ATTACKS)}")
    parser.add_argument("--json", help="write the report here")
    args = parser.parse_args()
    attacks = [name for name in args.attacks.split(",") if name]
    unknown = [name for name in attacks if name not in ATTACKS]
    if unknown:
        parser.error(f"unknown attacks: {', '.join(unknown)}")
    ATTACK_RATE[0] = args.attack_rate
    report = benchlib.new_report(args)
    with benchlib.sigterm_as_interrupt(), benchlib.workdir() as tmp:
        server = benchlib.mcphost_server("mcphost-isolation", Path(tmp),
                                         extra_env={"MCPHOST_PLUGINS": "demo,benchunruly"})
        server.argv = [sys.executable, str(HERE / "benchunruly.py"), *server.argv[1:]]
        with running(server):
            pid = server.pid
            with httpx.Client() as warm:  # the first calls pay imports and caches
                for number in range(50):
                    warm.post(server.url, content=benchlib.modern_echo_call(number), headers=benchlib.modern_headers())
            baseline = phase(server.url, args.baseline, args, [])
            attacked = phase(server.url, args.attack, args, attacks)
            alive = server.proc is not None and server.proc.poll() is None
            log = server.log_path.read_text(errors="replace")
    report.update({"baseline": baseline, "attack": attacked, "server_alive": alive, "server_pid": pid,
                   "log_mentions_exit": "exited with" in log})
    ratio = attacked["p99_ms"] / baseline["p99_ms"] if baseline["p99_ms"] else float("nan")
    print(f"bystander echo, {args.clients} x {args.rate:g}/s, stateless 2026-07-28")
    for name, figures in (("baseline", baseline), (f"attack ({', '.join(attacks)})", attacked)):
        print(f"  {name:<40} calls {figures['calls']:>6}  p50 {figures['p50_ms']:>7.2f} ms  "
              f"p99 {figures['p99_ms']:>7.2f} ms  errors {figures['error_count']}  "
              f"/healthz max {figures['healthz_max_ms']} ms")
    for name, counts in attacked["attacks"].items():
        print(f"  attack {name:<10} {counts}")
    print(f"  p99 ratio {ratio:.2f}; server alive {alive} (pid {pid})")
    report["targets"] = {"0 bystander errors": attacked["error_count"] == 0 and baseline["error_count"] == 0,
                         "p99 <= 2x baseline": ratio <= 2.0, "no restart": alive}
    benchlib.finish_report(args.json, report)


if __name__ == "__main__":
    main()
