#!/usr/bin/env python3
"""Reliability target 7, elicitation timeout (session era): the server gives up, says so, and goes on.

    python benchmarks/bench_elicit_timeout.py [--trials 100] [--timeout 0.1] [--json FILE]

``mcphost serve`` (one worker, demo plugin) with ``client_request_timeout`` = ``--timeout``.
One 2025-11-25 session that declares the elicitation capability; each trial calls the demo's
``greet_user`` and never answers the ``elicitation/create`` that arrives on the call's SSE
stream. Checked per trial: a ``notifications/cancelled`` naming that request id arrives on the
same stream (and how long after the request), the call ends with a reply (error or tool error),
a late answer POSTed afterwards is accepted and ignored (202), and an ``echo`` call on the same
session answers. A trial that misses any of these is counted, with the first few reasons.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import benchlib
import httpx
import orjson
from benchlib import running

INIT = orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                     "params": {"protocolVersion": benchlib.PROTOCOL_VERSION, "capabilities": {"elicitation": {}},
                                "clientInfo": {"name": "bench-elicit", "version": "1"}}})


def trial(client: httpx.Client, url: str, session_id: str, number: int) -> dict[str, Any]:
    request_id = f"g{number}"
    hdrs = benchlib.headers(session_id)
    body = benchlib.session_call(request_id, "greet_user", {})
    asked_at = cancelled_at = None
    asked_id = None
    final = None
    started = time.monotonic()
    with client.stream("POST", url, content=body, headers=hdrs) as response:
        if response.status_code != 200:
            return {"ok": False, "why": f"HTTP {response.status_code}"}
        buffer = ""
        for text in response.iter_text():
            buffer += text
            while "\n\n" in buffer:
                event, buffer = buffer.split("\n\n", 1)
                data = "\n".join(line[5:].lstrip(" ") for line in event.split("\n") if line.startswith("data:"))
                if not data.strip():
                    continue
                message = orjson.loads(data)
                if message.get("method") == "elicitation/create":
                    asked_at, asked_id = time.monotonic(), message.get("id")
                elif message.get("method") == "notifications/cancelled":
                    if message.get("params", {}).get("requestId") == asked_id and asked_id is not None:
                        cancelled_at = time.monotonic()
                elif message.get("id") == request_id:
                    final = message
    ended = time.monotonic()
    why = []
    if asked_at is None:
        why.append("no elicitation/create")
    if cancelled_at is None:
        why.append("no notifications/cancelled for it")
    if final is None:
        why.append("no reply to the call")
    late = client.post(url, content=orjson.dumps({"jsonrpc": "2.0", "id": asked_id, "result": {
        "action": "accept", "content": {"name": "late"}}}), headers=hdrs)
    if late.status_code != 202:
        why.append(f"late answer: HTTP {late.status_code}")
    try:
        benchlib.check_echo(client.post(url, content=benchlib.echo_call(f"e{number}"), headers=hdrs), f"e{number}")
    except AssertionError as exc:
        why.append(f"next request: {exc}")
    reply = "error" if final and "error" in final else "tool error" if final and final.get("result", {}).get(
        "isError") else "result" if final else None
    return {"ok": not why, "why": "; ".join(why), "reply": reply,
            "cancel_after_ms": round((cancelled_at - asked_at) * 1000, 1) if asked_at and cancelled_at else None,
            "call_ms": round((ended - started) * 1000, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=0.1, help="MCPHOST_CLIENT_REQUEST_TIMEOUT (s)")
    parser.add_argument("--json", metavar="FILE", help="also write the report here")
    args = parser.parse_args()
    report = benchlib.new_report(args)
    with benchlib.sigterm_as_interrupt(), benchlib.workdir() as tmp:
        server = benchlib.mcphost_server("mcphost-elicit", Path(tmp), extra_env={
            "MCPHOST_CLIENT_REQUEST_TIMEOUT": str(args.timeout)})
        with running(server), httpx.Client(timeout=30) as client:
            response = client.post(server.url, content=INIT, headers=benchlib.headers())
            session_id = benchlib.check_initialize(response)
            assert client.post(server.url, content=benchlib.INITIALIZED,
                               headers=benchlib.headers(session_id)).status_code == 202
            trials = [trial(client, server.url, session_id, n) for n in range(args.trials)]
    report["load_average_after"] = benchlib.load_average()
    ok = [t for t in trials if t["ok"]]
    delays = [t["cancel_after_ms"] for t in trials if t["cancel_after_ms"] is not None]
    replies: dict[str, int] = {}
    for t in trials:
        replies[str(t.get("reply"))] = replies.get(str(t.get("reply")), 0) + 1
    report["summary"] = {"trials": len(trials), "ok": len(ok), "ok_pct": round(100 * len(ok) / len(trials), 1),
                         "replies": replies,
                         "cancel_after_p50_ms": benchlib.percentile(delays, 50),
                         "cancel_after_max_ms": max(delays, default=None),
                         "failures": [t["why"] for t in trials if not t["ok"]][:5]}
    report["trials"] = trials
    report["targets"] = {"100 % send notifications/cancelled and the session serves the next request":
                         len(ok) == len(trials)}
    s = report["summary"]
    print(benchlib.describe_source(report["facts"]["mcphost_source"]))
    print(f"load average before/after: {report['load_average_before']} / {report['load_average_after']}")
    print(f"{s['trials']} trials, client_request_timeout {args.timeout} s: {s['ok']} ok ({s['ok_pct']} %); "
          f"replies to the call {replies}")
    print(f"notifications/cancelled after the elicitation/create: p50 {s['cancel_after_p50_ms']} ms, "
          f"max {s['cancel_after_max_ms']} ms")
    for why in s["failures"]:
        print(f"  failed: {why}")
    benchlib.finish_report(args.json, report)


if __name__ == "__main__":
    main()
