#!/usr/bin/env python3
"""Memory per idle session, two ways: a real server's RSS, and tracemalloc in-process.

    python benchmarks/bench_sessions.py [--sessions 10000] [--clients 4] [--json]

1. RSS: starts ``mcphost serve`` (one worker, only the demo plugin), warms it up (sessions
   opened, called and deleted), reads VmRSS from /proc/<pid>/status, opens ``--sessions``
   sessions (initialize + notifications/initialized, the default SSE replies) over keep-alive
   HTTP connections from ``--clients`` concurrent httpx clients, waits, reads VmRSS again.
   Bytes per session = growth / sessions. RSS moves in pages and arenas and includes what the
   allocator keeps around, so this is the figure an operator sees, not an exact one.
2. tracemalloc: builds the same host in this process, calls its real ASGI app directly (the
   scope, receive and send Hypercorn would pass; no client library whose own allocations would
   be counted), opens ``--traced`` sessions the same way and divides the growth of
   traced memory by their number (after gc.collect()), with the allocation sites that grew the
   most. Then walks one session's own objects (Session, HttpSessionState + Outlet, the event
   log's streams and events for it) for a breakdown.

The design target is < 4 KiB per idle session.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import linecache
import os
import sys
import time
import tracemalloc
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import benchlib
import httpx
from benchlib import running

benchlib.use_source_in_process()

KIB = 1024


# -- 1. RSS of a real server ---------------------------------------------------------------------

async def _open_many(url: str, count: int, clients: int) -> float:
    """Open ``count`` sessions from ``clients`` concurrent keep-alive clients; returns seconds taken."""
    remaining = iter(range(count))
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)

    async def worker() -> None:
        async with httpx.AsyncClient(timeout=30, limits=limits) as client:
            for _ in remaining:
                response = await client.post(url, content=benchlib.INITIALIZE_BODY, headers=benchlib.headers())
                session_id = benchlib.check_initialize(response)
                done = await client.post(url, content=benchlib.INITIALIZED, headers=benchlib.headers(session_id))
                if done.status_code != 202:
                    raise AssertionError(f"notifications/initialized: HTTP {done.status_code}")

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(clients)))
    return time.monotonic() - started


def _warm_up(url: str, count: int = 300) -> None:
    """Exercise every path the measured sessions take (and calls), then end those sessions."""
    with httpx.Client(timeout=10) as client:
        for number in range(count):
            session_id = benchlib.open_session(client, url)
            benchlib.check_echo(client.post(url, content=benchlib.echo_call(number),
                                            headers=benchlib.headers(session_id)), number)
            gone = client.delete(url, headers=benchlib.headers(session_id))
            if gone.status_code != 204:
                raise AssertionError(f"DELETE: HTTP {gone.status_code}")


def measure_rss(sessions: int, clients: int, settle: float, logdir: Path) -> dict[str, Any]:
    server = benchlib.mcphost_server("mcphost-sessions", logdir,
                                     extra_env={"MCPHOST_MAX_SESSIONS": str(sessions + 1000),
                                                "MCPHOST_MAX_SESSIONS_PER_PRINCIPAL": "0"})
    with running(server):
        _warm_up(server.url)
        time.sleep(settle)
        before = benchlib.rss_bytes(server.pid)
        seconds = asyncio.run(_open_many(server.url, sessions, clients))
        time.sleep(settle)
        after = benchlib.rss_bytes(server.pid)
        # The sessions are there and usable: one call on a fresh one still answers.
        with httpx.Client(timeout=10) as client:
            session_id = benchlib.open_session(client, server.url)
            benchlib.check_echo(client.post(server.url, content=benchlib.echo_call(1),
                                            headers=benchlib.headers(session_id)), 1)
    return {"sessions": sessions, "clients": clients, "seconds_to_open": round(seconds, 2),
            "sessions_per_second": round(sessions / seconds, 1), "rss_before_bytes": before,
            "rss_after_bytes": after, "bytes_per_session": round((after - before) / sessions, 1)}


# -- 2. tracemalloc in-process ----------------------------------------------------------------------

def _build_app() -> Any:
    from mcphost.app import create_app
    from mcphost.config import config_from_dict
    from mcphost.host import Host

    config = config_from_dict({"server": {"log_level": "warning", "max_sessions": 1_000_000,
                                          "max_sessions_per_principal": 0},
                               "plugins": {"allow": ["demo"]}}, env={})
    return create_app(Host(config))


def _shared_roots(app: Any) -> set[int]:
    """Objects every session points at but does not own: stop the walk there."""
    host = app.host
    roots = [app, host, app.transport, host.kernel, host.backend, host.backend.events, host.backend.sessions,
             host.catalog, host.config, host.pm, asyncio.get_running_loop()]
    return {id(obj) for obj in roots if obj is not None}


def deep_size(roots: Iterable[Any], stop: set[int]) -> int:
    """Bytes of the objects reachable from ``roots``, not crossing ``stop``, types, modules or functions."""
    import types
    seen: set[int] = set(stop)
    todo = list(roots)
    total = 0
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type | types.ModuleType | types.FunctionType |
                                         types.BuiltinFunctionType | asyncio.AbstractEventLoop):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        todo.extend(gc.get_referents(obj))
    return total


class AsgiResponse:
    """What benchlib's checks read from a response (httpx.Response itself leaves objects behind)."""

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], content: bytes) -> None:
        self.status_code = status
        self.headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in headers}
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode()


async def asgi_request(app: Any, method: str, body: bytes = b"", session_id: str | None = None) -> Any:
    """One request straight into the ASGI app, as Hypercorn would make it (no client library in the way)."""
    # the client stays connected until the response is complete
    scope, receive, stay = benchlib.asgi_exchange(method, body, benchlib.headers(session_id))

    status = 0
    response_headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, response_headers
        if message["type"] == "http.response.start":
            status, response_headers = message["status"], message.get("headers", [])
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    stay.set()
    return AsgiResponse(status, response_headers, b"".join(chunks))


async def _open_in_process(app: Any, check: bool = True) -> str:
    """initialize + notifications/initialized through the ASGI app; returns the session id.

    ``check=False`` skips decoding the reply body (status, content-type and session id are still
    checked): the measured loop must not leave client-side parsing in the traced memory.
    """
    response = await asgi_request(app, "POST", benchlib.INITIALIZE_BODY)
    if check:
        session_id = benchlib.check_initialize(response)
    else:
        session_id = response.headers.get("mcp-session-id", "")
        if response.status_code != 200 or not session_id or b'"protocolVersion"' not in response.content:
            raise AssertionError(f"initialize: HTTP {response.status_code}: {response.text[:200]}")
    done = await asgi_request(app, "POST", benchlib.INITIALIZED, session_id)
    if done.status_code != 202:
        raise AssertionError(f"notifications/initialized: HTTP {done.status_code}")
    return session_id


async def _traced(count: int) -> dict[str, Any]:
    try:
        from mcphost.transports.sse import state_of as _state
    except ImportError:  # a copy from before the SSE writer moved out of transports/http.py
        from mcphost.transports.http import _state  # type: ignore[attr-defined,no-redef]

    app = _build_app()
    host = app.host
    await host.start()  # no gc.freeze here: tracemalloc counts allocations, not collector work
    await app.transport.start()
    try:
        for number in range(50):  # warm every cache on the path
            session_id = await _open_in_process(app)
            benchlib.check_echo(await asgi_request(app, "POST", benchlib.echo_call(number), session_id), number)
            gone = await asgi_request(app, "DELETE", b"", session_id)
            assert gone.status_code == 204, gone.status_code
        await asyncio.sleep(0.05)
        gc.collect()
        tracemalloc.start(10)
        first = tracemalloc.take_snapshot()
        base, _ = tracemalloc.get_traced_memory()
        for _ in range(count):
            last = await _open_in_process(app, check=False)
        await asyncio.sleep(0.05)  # let the finished streams' tasks complete
        gc.collect()
        grown, _ = tracemalloc.get_traced_memory()
        second = tracemalloc.take_snapshot()
        tracemalloc.stop()
        stats = second.compare_to(first, "lineno")
        sites = [{"site": f"{Path(s.traceback[0].filename).name}:{s.traceback[0].lineno}",
                  "code": linecache.getline(s.traceback[0].filename, s.traceback[0].lineno).strip(),
                  "bytes_per_session": round(s.size_diff / count, 1)}
                 for s in stats[:12] if s.size_diff > 0]

        # One session's own objects, walked.
        session = host.sessions[last]
        stop = _shared_roots(app)
        state = _state(session)
        streams = host.backend.events._streams.get(session.id, {})
        stop.add(id(streams))  # counted below, per stream
        session_only = deep_size([session], stop | {id(session.outlet)})
        http_state = deep_size([session.outlet], stop | {id(session)})
        stream_sizes = {sid: deep_size([stream], stop | {id(session), id(session.outlet)})
                        for sid, stream in streams.items()}
        index = (sys.getsizeof(streams) +  # the per-session dict of streams, and its slot in the log
                 sys.getsizeof(host.sessions) // max(1, len(host.sessions)))
        breakdown = {
            "session_object_and_fields": session_only,
            "http_state_and_outlet": http_state,
            "event_log_streams": stream_sizes,
            "event_log_index_and_sessions_dict_share": index,
            "stream_events": {sid: [None if e.message is None else sorted(e.message) for e in s.events]
                              for sid, s in streams.items()},
            "held_state": state is not None,
        }
    finally:
        await app.transport.stop()
        await host.stop()
    return {"sessions": count, "bytes_per_session": round((grown - base) / count, 1),
            "top_sites": sites, "one_session_walk": breakdown}


def measure_traced(count: int) -> dict[str, Any]:
    return asyncio.run(_traced(count))


# -- report ---------------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=10_000, help="sessions opened on the real server")
    parser.add_argument("--clients", type=int, default=4, help="concurrent keep-alive clients opening them")
    parser.add_argument("--traced", type=int, default=2_000, help="sessions opened in-process under tracemalloc")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds to wait before each RSS reading")
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument("--skip-traced", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict[str, Any] = {"facts": benchlib.machine_facts(), "target_bytes_per_session": 4 * KIB}
    with benchlib.sigterm_as_interrupt(), benchlib.workdir() as tmp:
        try:
            if not args.skip_rss:
                if not args.json:
                    print(f"RSS: opening {args.sessions} sessions on mcphost serve ...", flush=True)
                report["rss"] = measure_rss(args.sessions, args.clients, args.settle, Path(tmp))
            if not args.skip_traced:
                if not args.json:
                    print(f"tracemalloc: opening {args.traced} sessions in-process ...", flush=True)
                os.environ.pop("MCPHOST_PLUGINS", None)
                report["traced"] = measure_traced(args.traced)
        except KeyboardInterrupt:
            print("interrupted; server stopped", file=sys.stderr)
            return 130
        except (AssertionError, RuntimeError, httpx.HTTPError) as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    target = report["target_bytes_per_session"]
    print(f"\n{benchlib.describe_source(report['facts']['mcphost_source'])}")
    if "rss" in report:
        r = report["rss"]
        print(f"RSS: {r['sessions']} idle sessions opened in {r['seconds_to_open']} s "
              f"({r['sessions_per_second']}/s, {r['clients']} clients): VmRSS {r['rss_before_bytes'] / 2**20:.1f} -> "
              f"{r['rss_after_bytes'] / 2**20:.1f} MiB = {r['bytes_per_session']:.0f} B/session "
              f"({'meets' if r['bytes_per_session'] < target else 'misses'} the < {target} B target)")
    if "traced" in report:
        t = report["traced"]
        print(f"tracemalloc: {t['bytes_per_session']:.0f} B/session over {t['sessions']} sessions "
              f"({'meets' if t['bytes_per_session'] < target else 'misses'} the < {target} B target)")
        print("  grew most (bytes per session, allocation site):")
        for site in t["top_sites"]:
            print(f"    {site['bytes_per_session']:>8.1f}  {site['site']:<18} {site['code'][:70]}")
        walk = t["one_session_walk"]
        print("  one session, walked (bytes):")
        print(f"    {walk['session_object_and_fields']:>8}  Session and its own fields")
        print(f"    {walk['http_state_and_outlet']:>8}  HttpSessionState + Outlet")
        for sid, size in walk["event_log_streams"].items():
            kinds = walk["stream_events"][sid]
            print(f"    {size:>8}  event-log stream {sid!r} ({len(kinds)} events held: "
                  f"{', '.join('priming' if k is None else 'message ' + '/'.join(k) for k in kinds) or 'none'})")
        print(f"    {walk['event_log_index_and_sessions_dict_share']:>8}  per-session dicts (streams index, "
              f"share of host.sessions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
