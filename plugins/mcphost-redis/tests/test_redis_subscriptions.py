"""Resource subscriptions on the Redis backend (RELIABILITY H5: "on Redis a change writes only what
changed").

A session's subscriptions live in a set beside its state (``P u:<id>``): subscribing or
unsubscribing writes one member, never the state; the per-session budget
(``server.max_subscriptions``) holds atomically across processes; the set expires and goes with
the session; a session loaded elsewhere still follows what it subscribed to; and a state written
by an earlier version, with its subscriptions inline, still works.

Each HTTP test runs real ``mcphost serve`` processes against a private redis-server.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from mcphost_redis import RedisBackend
from mcphost_redis.testing import RedisServer, redis_settings

from tests.support.fixtures.distributions import make_distribution
from tests.support.http_plugins.harness import SseReader
from tests.support.http_support import (
    ServerGroup,
    open_session,
    session_call,
    stream_headers,
)

REPO_ROOT = Path(__file__).resolve().parents[3]

PLUGIN = '''
import mcphost
from mcphost import Context


@mcphost.tool
async def announce(uri: str, *, ctx: Context) -> str:
    """Send notifications/resources/updated for uri."""
    await ctx.notify_resource_updated(uri)
    return "announced"


@mcphost.hookimpl
def mcphost_tools(host):
    return [announce]
'''


class Nodes(ServerGroup):
    """``mcphost serve`` processes sharing one Redis under one prefix."""

    def __init__(self, tmp_path: Path, redis: RedisServer, prefix: str) -> None:
        self.prefix = prefix
        site = tmp_path / "site"
        make_distribution(site, "mcphost-subs-test", "0.0.1", {"substest": "substest_plugin"},
                          {"substest_plugin": PLUGIN})
        super().__init__(tmp_path, plugins="demo,substest,redis", env={"PYTHONPATH": f"{site}:{REPO_ROOT}"},
                         config=(f"[server]\nsse_keepalive = 1\nmax_subscriptions = 2\n\n[plugins.redis]\n"
                                 f"url = \"{redis.url}\"\nprefix = \"{prefix}\"\nlease = 2\n"))


@pytest.fixture
def nodes(tmp_path: Path, redis_server: RedisServer, request: pytest.FixtureRequest) -> Iterator[Nodes]:
    made = Nodes(tmp_path, redis_server, f"u{abs(hash(request.node.name)) % 10**8}:")
    yield made
    made.stop()


def updates(reader: SseReader) -> list[str]:
    messages = [json.loads(e["data"]) for e in reader.events if e.get("data", "").strip()]
    return [m["params"]["uri"] for m in messages if m.get("method") == "notifications/resources/updated"]


class Monitor:
    """Redis ``MONITOR`` on its own connection: every command the server runs, scripts' included."""

    def __init__(self, redis: RedisServer) -> None:
        self._sock = socket.create_connection(("127.0.0.1", redis.port), timeout=0.2)
        self._sock.sendall(b"MONITOR\r\n")
        self._data = bytearray()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                chunk = self._sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not chunk:
                return
            self._data += chunk

    def stop(self) -> list[str]:
        time.sleep(0.3)  # let the last commands arrive
        self._stop.set()
        self._thread.join()
        self._sock.close()
        return [line for line in self._data.decode(errors="replace").split("\r\n") if line.startswith("+") and
                "MONITOR" not in line and line != "+OK"]


def command_of(line: str) -> tuple[str, str]:
    """(command, first argument) of one MONITOR line ``+<time> [<db> <client>] "CMD" "arg" ...``."""
    words = line.split('"')
    return (words[1].upper() if len(words) > 1 else "", words[3] if len(words) > 3 else "")


async def test_subscribing_writes_one_set_member_and_never_the_session_state(nodes: Nodes,
                                                                           redis_server: RedisServer):
    a = nodes.start()
    async with httpx.AsyncClient(timeout=10) as client:
        session_id = await open_session(client, a)
        state_key = f"{nodes.prefix}s:{session_id}"
        before = redis_server.command("GET", state_key)
        assert session_id.encode() in before
        monitor = Monitor(redis_server)
        for method in ("resources/subscribe", "resources/unsubscribe"):
            assert (await session_call(client, a, session_id, method, {"uri": "demo://readme"}))["result"] == {}
        trace = monitor.stop()
        assert redis_server.command("GET", state_key) == before  # the state is as it was, byte for byte
    commands = [command_of(line) for line in trace]
    writes_of_state = [line for line, (name, key) in zip(trace, commands, strict=True)
                       if key == state_key and name in ("SET", "SETEX", "PSETEX", "GETSET", "APPEND")]
    assert not writes_of_state, writes_of_state
    subscriptions_key = f"{nodes.prefix}u:{session_id}"
    assert ("SADD", subscriptions_key) in commands, trace
    assert ("SREM", subscriptions_key) in commands, trace


async def test_the_budget_holds_across_processes_with_the_memory_backends_error(nodes: Nodes):
    a, b = nodes.start(), nodes.start()
    async with httpx.AsyncClient(timeout=10) as client:
        session_id = await open_session(client, a)
        assert (await session_call(client, a, session_id, "resources/subscribe", {"uri": "demo://one"}))["result"] == {}
        # b loads the session, then follows a second URI: the budget (2) is used up, though a
        # itself holds only one subscription in memory.
        assert (await session_call(client, b, session_id, "resources/subscribe", {"uri": "demo://two"}))["result"] == {}
        for node in (a, b):
            refused = await session_call(client, node, session_id, "resources/subscribe", {"uri": "demo://three"})
            assert refused["error"]["code"] == -32602, refused
            assert refused["error"]["message"] == ("Too many subscriptions on this session (server.max_subscriptions "
                                                   "is 2); unsubscribe first")
        again = await session_call(client, a, session_id, "resources/subscribe", {"uri": "demo://one"})
        assert again["result"] == {}  # one it follows costs nothing more
        await session_call(client, b, session_id, "resources/unsubscribe", {"uri": "demo://two"})
        room = await session_call(client, a, session_id, "resources/subscribe", {"uri": "demo://three"})
        assert room["result"] == {}, room


async def test_a_session_moved_to_another_process_still_gets_its_updates(nodes: Nodes):
    a = nodes.start()
    async with httpx.AsyncClient(timeout=10) as client:
        session_id = await open_session(client, a)
        await session_call(client, a, session_id, "resources/subscribe", {"uri": "demo://readme"})
        await session_call(client, a, session_id, "resources/subscribe", {"uri": "demo://gone"})
        await session_call(client, a, session_id, "resources/unsubscribe", {"uri": "demo://gone"})
        a.stop()  # gracefully: the session stays in the store
        b = nodes.start()  # has never seen the session: it loads it, subscriptions included
        async with client.stream("GET", b.url, headers=stream_headers(session_id)) as stream:
            assert stream.status_code == 200
            reader = SseReader(stream)
            other = await open_session(client, b)
            for uri in ("demo://gone", "demo://readme"):
                await session_call(client, b, other, "tools/call", {"name": "announce", "arguments": {"uri": uri}})
            await reader.until(lambda r: bool(updates(r)), timeout=5)
            with pytest.raises(AssertionError):  # nothing more comes (not the unsubscribed one)
                await reader.until(lambda r: len(updates(r)) > 1, timeout=1)
        assert updates(reader) == ["demo://readme"]


# -- the store itself -----------------------------------------------------------------------------------

@pytest.fixture
async def store(redis_server: RedisServer) -> Any:
    backend = RedisBackend(redis_settings(redis_server.url, session_ttl=1.0))
    await backend.start()
    yield backend
    await backend.close()


async def test_the_set_expires_and_goes_with_the_session(store: RedisBackend, redis_server: RedisServer):
    sessions = store.sessions
    await sessions.save({"id": "gone", "quota": "a:"})
    assert await sessions.subscribe("gone", "x://1", 5)
    key = store.key("u:gone")
    ttl = int(redis_server.command("PTTL", key).strip(b":\r\n"))
    state_ttl = int(redis_server.command("PTTL", store.key("s:gone")).strip(b":\r\n"))
    assert 0 < ttl <= state_ttl + 50  # expires with the state
    await sessions.delete("gone")
    assert redis_server.command("EXISTS", key).strip() == b":0"

    await sessions.save({"id": "idle"})
    assert await sessions.subscribe("idle", "x://1", 5)
    await asyncio.sleep(1.1)  # its idle time runs out: the reaper takes it, subscriptions included
    [(session_id, state)] = await sessions.expired()
    assert session_id == "idle" and state is not None and state["subscriptions"] == ["x://1"]
    assert redis_server.command("EXISTS", store.key("u:idle")).strip() == b":0"


async def test_subscriptions_are_loaded_and_bounded_and_a_save_leaves_them_alone(store: RedisBackend):
    sessions = store.sessions
    await sessions.save({"id": "s", "log_level": None})
    assert await sessions.subscribe("s", "x://1", 2)
    assert await sessions.subscribe("s", "x://2", 2)
    assert await sessions.subscribe("s", "x://1", 2)  # held already
    assert not await sessions.subscribe("s", "x://3", 2)
    await sessions.save({"id": "s", "log_level": "debug"})  # a state change, without subscriptions
    assert await sessions.load("s") == {"id": "s", "log_level": "debug", "subscriptions": ["x://1", "x://2"]}
    await sessions.unsubscribe("s", "x://1")
    assert (await sessions.load("s"))["subscriptions"] == ["x://2"]
    assert await sessions.touch("s")


async def test_a_state_with_inline_subscriptions_from_an_earlier_version_still_works(store: RedisBackend,
                                                                                     redis_server: RedisServer):
    sessions = store.sessions
    await sessions.save({"id": "old"})
    legacy = orjson.dumps({"id": "old", "subscriptions": ["x://a", "x://b"]}).decode()
    assert redis_server.command("SET", store.key("s:old"), legacy, "KEEPTTL").startswith(b"+OK")
    assert (await sessions.load("old"))["subscriptions"] == ["x://a", "x://b"]
    # Moved into the set once: an unsubscribe now sticks.
    assert b"subscriptions" not in redis_server.command("GET", store.key("s:old"))
    await sessions.unsubscribe("old", "x://a")
    assert (await sessions.load("old"))["subscriptions"] == ["x://b"]
