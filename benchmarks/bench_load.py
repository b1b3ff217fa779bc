#!/usr/bin/env python3
"""Reliability target 3, sustained mixed load: errors, echo latency, RSS slope, and what is left after.

    python benchmarks/bench_load.py                          # 60 s (20 s warm-up), about 1.5 min
    python benchmarks/bench_load.py --duration 600 --warmup 120   # the 10-minute CI figure

``mcphost serve`` (one worker, the demo plugin and the benchmark-only diagnostic plugin,
``session_idle_timeout`` = ``--idle-timeout``) gets ``--clients`` concurrent clients, half
session-era (2025-11-25: initialize, then calls on the session; replies are SSE streams) and half
stateless 2026-07-28, each sending ``tools/call`` on a fixed schedule so that together they make
about ``--rate`` requests/s:

- 85 % ``echo`` (checked: the text comes back),
- 10 % ``progress`` with 20 steps and a progress token (checked: 20 progress notifications, then the result),
- 5 % ``greet_user``, an elicitation round trip: session era, the server's ``elicitation/create``
  arrives on the call's stream and the client POSTs the answer; 2026-07-28, the first call gets an
  ``input_required`` result and the retry carries the answer and the ``requestState``
  (checked: "Hello, bench!").

Every 5 s the server's RSS and open file descriptors are read (psutil). The RSS slope is a
least-squares fit over the samples after ``--warmup``; the plateau is the mean of the samples in
the first 20 s after the warm-up. When the load stops, the session clients walk away without
DELETE, and after ``--idle-timeout`` + 10 s the open FDs, ``asyncio.all_tasks()`` and the session
registry are read again (the diagnostic plugin's ``diag_stats``, over a stateless request) and
compared with the same readings taken before the load.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from pathlib import Path
from typing import Any

import benchlib
import httpx
import orjson
import psutil
from benchlib import running

ELICIT_CAPS = {"elicitation": {}}
SESSION_INIT = orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                             "params": {"protocolVersion": benchlib.PROTOCOL_VERSION, "capabilities": ELICIT_CAPS,
                                        "clientInfo": {"name": "bench-load", "version": "1"}}})


class Stats:
    def __init__(self) -> None:
        self.latency: dict[str, list[float]] = {"echo": [], "progress": [], "elicit": []}
        self.count: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.samples: list[str] = []
        self.status_429 = 0

    def error(self, kind: str, detail: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1
        if len(self.samples) < 10:
            self.samples.append(f"{kind}: {detail[:300]}")


def sse(text: str) -> list[dict[str, Any]]:
    out = []
    for event in text.split("\n\n"):
        data = "\n".join(line[5:].lstrip(" ") for line in event.split("\n") if line.startswith("data:"))
        if data.strip():
            out.append(orjson.loads(data))
    return out


def result_text(message: dict[str, Any]) -> str | None:
    content = (message.get("result") or {}).get("content") or [{}]
    return content[0].get("text")


class SessionClient:
    """A 2025-11-25 client: one session, calls on it; answers the server's elicitation requests."""

    def __init__(self, url: str, stats: Stats) -> None:
        self.url = url
        self.stats = stats
        self.client = httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=4))
        self.session_id = ""
        self.next_id = 1

    async def open(self) -> None:
        response = await self.client.post(self.url, content=SESSION_INIT, headers=benchlib.headers())
        self.session_id = benchlib.check_initialize(response)
        done = await self.client.post(self.url, content=benchlib.INITIALIZED, headers=benchlib.headers(self.session_id))
        assert done.status_code == 202, done.status_code

    async def call(self, kind: str) -> None:
        request_id = self.next_id
        self.next_id += 1
        hdrs = benchlib.headers(self.session_id)
        if kind == "echo":
            response = await self.client.post(self.url, content=benchlib.session_call(request_id, "echo",
                                                                                      {"text": "hi"}), headers=hdrs)
            messages = sse(response.text) if response.status_code == 200 else []
            if not messages or result_text(messages[-1]) != "hi":
                raise AssertionError(f"echo: HTTP {response.status_code} {response.text[:200]}")
        elif kind == "progress":
            response = await self.client.post(self.url, content=benchlib.session_call(
                request_id, "progress", {"steps": 20}, progress_token=f"p{request_id}"), headers=hdrs)
            messages = sse(response.text) if response.status_code == 200 else []
            progress = [m for m in messages if m.get("method") == "notifications/progress"]
            if len(progress) != 20 or not messages or result_text(messages[-1]) != "completed 20 steps":
                raise AssertionError(f"progress: HTTP {response.status_code}, {len(progress)} progress, "
                                     f"{response.text[-200:]}")
        else:
            body = benchlib.session_call(request_id, "greet_user", {})
            async with self.client.stream("POST", self.url, content=body, headers=hdrs) as response:
                if response.status_code != 200:
                    raise AssertionError(f"elicit: HTTP {response.status_code}")
                buffer = ""
                final = None
                async for text in response.aiter_text():
                    buffer += text
                    while "\n\n" in buffer:
                        event, buffer = buffer.split("\n\n", 1)
                        for message in sse(event + "\n\n"):
                            if message.get("method") == "elicitation/create":
                                answer = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {
                                    "action": "accept", "content": {"name": "bench"}}})
                                posted = await self.client.post(self.url, content=answer, headers=hdrs)
                                if posted.status_code != 202:
                                    raise AssertionError(f"elicit answer: HTTP {posted.status_code}")
                            elif message.get("id") == request_id:
                                final = message
                if final is None or result_text(final) != "Hello, bench!":
                    raise AssertionError(f"elicit: final {final!r:.200}")


class StatelessClient:
    """A 2026-07-28 client: no session; elicitation by input-required retry."""

    def __init__(self, url: str, stats: Stats) -> None:
        self.url = url
        self.stats = stats
        self.client = httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=2))
        self.next_id = 1

    async def open(self) -> None:
        pass

    async def call(self, kind: str) -> None:
        request_id = self.next_id
        self.next_id += 1
        if kind == "echo":
            body, hdrs = benchlib.modern_call(request_id, "echo", {"text": "hi"})
            response = await self.client.post(self.url, content=body, headers=hdrs)
            benchlib.check_modern_echo(response, request_id, "hi")
        elif kind == "progress":
            body, hdrs = benchlib.modern_call(request_id, "progress", {"steps": 20}, progress_token=f"p{request_id}")
            response = await self.client.post(self.url, content=body, headers=hdrs)
            messages = sse(response.text) if response.status_code == 200 else []
            progress = [m for m in messages if m.get("method") == "notifications/progress"]
            if len(progress) != 20 or not messages or result_text(messages[-1]) != "completed 20 steps":
                raise AssertionError(f"progress (2026): HTTP {response.status_code}, {len(progress)} progress, "
                                     f"{response.text[-200:]}")
        else:
            body, hdrs = benchlib.modern_call(request_id, "greet_user", {}, capabilities=ELICIT_CAPS)
            response = await self.client.post(self.url, content=body, headers=hdrs)
            result = orjson.loads(response.content).get("result") or {}
            if result.get("resultType") != "input_required":
                raise AssertionError(f"elicit (2026): first round {response.text[:200]}")
            answers = {key: {"action": "accept", "content": {"name": "bench"}} for key in result["inputRequests"]}
            body, hdrs = benchlib.modern_call(request_id, "greet_user", {}, capabilities=ELICIT_CAPS,
                                              requestState=result["requestState"], inputResponses=answers)
            response = await self.client.post(self.url, content=body, headers=hdrs)
            final = orjson.loads(response.content)
            if result_text(final) != "Hello, bench!":
                raise AssertionError(f"elicit (2026): retry {response.text[:200]}")


def pick(rng: random.Random) -> str:
    roll = rng.random()
    return "echo" if roll < 0.85 else "progress" if roll < 0.95 else "elicit"


async def drive(client: Any, interval: float, until: float, stats: Stats, rng: random.Random) -> None:
    await client.open()
    next_at = time.monotonic() + rng.random() * interval
    while True:
        now = time.monotonic()
        if next_at > now:
            await asyncio.sleep(next_at - now)
        if time.monotonic() >= until:
            break
        next_at = max(next_at + interval, time.monotonic() - interval)  # no burst to catch up after a stall
        kind = pick(rng)
        started = time.monotonic()
        try:
            await client.call(kind)
        except Exception as exc:  # every failure is a counted error
            if "HTTP 429" in str(exc):
                stats.status_429 += 1
            else:
                stats.error(f"{type(client).__name__}/{kind}", f"{type(exc).__name__}: {exc}")
            continue
        stats.latency[kind].append(time.monotonic() - started)
        stats.count[kind] = stats.count.get(kind, 0) + 1
    await client.client.aclose()


async def sample(proc: psutil.Process, every: float, until: float, out: list[dict[str, float]],
                 started: float) -> None:
    while time.monotonic() < until:
        out.append({"t": time.monotonic() - started, "rss": proc.memory_info().rss, "fds": proc.num_fds(),
                    "cpu": sum(proc.cpu_times()[:2])})
        await asyncio.sleep(every)


async def run_load(url: str, pid: int, args: argparse.Namespace) -> dict[str, Any]:
    stats = Stats()
    rng = random.Random(args.seed)
    half = args.clients // 2
    clients: list[Any] = [SessionClient(url, stats) for _ in range(half)]
    clients += [StatelessClient(url, stats) for _ in range(args.clients - half)]
    interval = args.clients / args.rate
    started = time.monotonic()
    until = started + args.duration
    samples: list[dict[str, float]] = []
    proc = psutil.Process(pid)
    sampler = asyncio.ensure_future(sample(proc, args.sample_every, until, samples, started))
    await asyncio.gather(*(drive(c, interval, until, stats, random.Random(rng.random())) for c in clients))
    elapsed = time.monotonic() - started
    await sampler
    after = [(s["t"], s["rss"] / 1e6) for s in samples if s["t"] >= args.warmup]
    plateau = [rss for t, rss in after if t < args.warmup + 20] or [after[0][1]] if after else []
    plateau_mb = sum(plateau) / len(plateau) if plateau else float("nan")
    final_mb = samples[-1]["rss"] / 1e6 if samples else float("nan")
    total = sum(stats.count.values())
    echo = stats.latency["echo"]
    cpu = (samples[-1]["cpu"] - samples[0]["cpu"]) / (samples[-1]["t"] - samples[0]["t"]) if len(samples) > 1 else 0
    return {
        "seconds": round(elapsed, 1), "requests_ok": total, "requests_per_second": round(total / elapsed, 1),
        "by_kind": stats.count, "errors": sum(stats.errors.values()), "errors_by_kind": stats.errors,
        "error_samples": stats.samples, "status_429": stats.status_429,
        "echo_p50_ms": round(benchlib.percentile(echo, 50) * 1000, 2),
        "echo_p99_ms": round(benchlib.percentile(echo, 99) * 1000, 2),
        "progress_p50_ms": round(benchlib.percentile(stats.latency["progress"], 50) * 1000, 2),
        "elicit_p50_ms": round(benchlib.percentile(stats.latency["elicit"], 50) * 1000, 2),
        "rss_slope_mb_per_min": round(benchlib.slope_per_minute(after), 3),
        "rss_plateau_mb": round(plateau_mb, 1), "rss_final_mb": round(final_mb, 1),
        "rss_final_vs_plateau_pct": round((final_mb / plateau_mb - 1) * 100, 1),
        "server_cpu_cores": round(cpu, 2),
        "samples": samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load (600 for the CI figure)")
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds left out of the RSS fit (120 in CI)")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--rate", type=float, default=200.0, help="tools/call per second, all clients together")
    parser.add_argument("--idle-timeout", type=float, default=10.0, help="MCPHOST_SESSION_IDLE_TIMEOUT (s)")
    parser.add_argument("--sample-every", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", metavar="FILE", help="also write the report here")
    args = parser.parse_args()

    report = benchlib.new_report(args)
    with benchlib.sigterm_as_interrupt(), benchlib.workdir() as tmp:
        server = benchlib.diag_server("mcphost-load", Path(tmp), extra_env={
            "MCPHOST_SESSION_IDLE_TIMEOUT": str(args.idle_timeout), "MCPHOST_MAX_SESSIONS": "100000"})
        with running(server):
            # Baseline: after one call of each kind, so that lazily made things exist on both sides.
            asyncio.run(warm(server.url))
            time.sleep(6)  # past Hypercorn's 5 s keep-alive: the warm-up's connections are gone
            report["baseline"] = {**benchlib.diag_stats(server.url), "fds_proc": benchlib.open_fds(server.pid)}
            report["load"] = asyncio.run(run_load(server.url, server.pid, args))
            report["load_average_after_load"] = benchlib.load_average()
            time.sleep(args.idle_timeout + 10)
            report["after_idle"] = {**benchlib.diag_stats(server.url), "fds_proc": benchlib.open_fds(server.pid)}
    load, base, after = report["load"], report["baseline"], report["after_idle"]
    report["targets"] = {
        "0 errors except intended 429s": load["errors"] == 0,
        "echo p99 < 50 ms": load["echo_p99_ms"] < 50,
        "RSS slope after warm-up < 1 MB/min": load["rss_slope_mb_per_min"] < 1,
        "final RSS within +10 % of the plateau": load["rss_final_vs_plateau_pct"] <= 10,
        "FDs, tasks, sessions back to baseline (+-5) within idle timeout + 10 s":
            all(abs(after[k] - base[k]) <= 5 for k in ("fds", "tasks", "sessions")),
    }
    print(benchlib.describe_source(report["facts"]["mcphost_source"]))
    print(f"load average before / after the load: {report['load_average_before']} / "
          f"{report['load_average_after_load']}")
    print(f"{args.clients} clients ({args.clients // 2} session-era, {args.clients - args.clients // 2} stateless "
          f"2026-07-28), {load['seconds']} s, target {args.rate:.0f} req/s: {load['requests_ok']} ok "
          f"({load['requests_per_second']}/s) {load['by_kind']}, errors {load['errors']} {load['errors_by_kind']}, "
          f"429s {load['status_429']}")
    for line in load["error_samples"]:
        print(f"  error: {line}")
    print(f"echo p50 {load['echo_p50_ms']} ms, p99 {load['echo_p99_ms']} ms; progress (20 events) p50 "
          f"{load['progress_p50_ms']} ms; elicitation round trip p50 {load['elicit_p50_ms']} ms; "
          f"server CPU {load['server_cpu_cores']} cores")
    print(f"RSS: plateau {load['rss_plateau_mb']} MB, final {load['rss_final_mb']} MB "
          f"({load['rss_final_vs_plateau_pct']:+} %), slope after {args.warmup:.0f} s warm-up "
          f"{load['rss_slope_mb_per_min']} MB/min")
    print("RSS samples (MB): " + " ".join(f"{s['rss'] / 1e6:.1f}" for s in load["samples"]))
    for name in ("sessions", "tasks", "fds", "fds_proc", "rss"):
        print(f"  {name:9} baseline {base[name]:>10}  after idle timeout + 10 s {after[name]:>10}")
    benchlib.finish_report(args.json, report)


async def warm(url: str) -> None:
    stats = Stats()
    for client in (SessionClient(url, stats), StatelessClient(url, stats)):
        await client.open()
        for kind in ("echo", "progress", "elicit"):
            await client.call(kind)
        if isinstance(client, SessionClient):
            gone = await client.client.delete(url, headers=benchlib.headers(client.session_id))
            assert gone.status_code == 204, gone.status_code
        await client.client.aclose()


if __name__ == "__main__":
    main()
