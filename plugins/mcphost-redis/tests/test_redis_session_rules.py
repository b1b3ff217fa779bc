"""The per-session rules hold across processes sharing one real redis-server.

- One standalone GET stream per session: a second one on another process gets 409; it is free
  again once the first ends (or, if its process dies, within a lease).
- A notification for a session no process holds waits in the session's stream log and is
  delivered on its next GET, on any process; a held session gets it once.
- Idle expiry fires the terminate hook exactly once across all processes (the store's expiry
  index hands each expired session to one process), and the session is gone everywhere.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcphost_redis import RedisBackend
from mcphost_redis.testing import RedisServer, redis_settings

from tests.support.fixtures.distributions import make_distribution
from tests.support.http_plugins.harness import SseReader
from tests.support.http_support import (
    ServerGroup,
    open_session,
    session_call,
    session_headers,
    sse_messages,
    stream_headers,
)

REPO_ROOT = Path(__file__).resolve().parents[3]

PLUGIN = '''
import os

import mcphost
from mcphost import Context

LOG = os.environ["RULES_TERMINATE_LOG"]


@mcphost.tool
async def announce(uri: str = "", kind: str = "", *, ctx: Context) -> str:
    """Send notifications/resources/updated for uri and/or list_changed for kind."""
    if uri:
        await ctx.notify_resource_updated(uri)
    if kind:
        await ctx.host.notify_list_changed(kind)
    return "announced"


@mcphost.hookimpl
def mcphost_tools(host):
    return [announce]


@mcphost.hookimpl
def mcphost_terminate(session, reason):
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(f"{session.id} {reason} {os.getpid()}\\n")
'''


class Nodes(ServerGroup):
    def __init__(self, tmp_path: Path, redis: RedisServer, prefix: str, server: str = "") -> None:
        site = tmp_path / "site"
        make_distribution(site, "mcphost-rules-test", "0.0.1", {"rulestest": "rulestest_plugin"},
                          {"rulestest_plugin": PLUGIN})
        self.terminated = tmp_path / "terminated.log"
        self.terminated.touch()
        super().__init__(tmp_path, plugins="demo,conformance,rulestest,redis",
                         env={"PYTHONPATH": f"{site}:{REPO_ROOT}", "RULES_TERMINATE_LOG": str(self.terminated)},
                         config=(f"[server]\nsse_keepalive = 1\n{server}\n[plugins.redis]\nurl = \"{redis.url}\"\n"
                                 f"prefix = \"{prefix}\"\nlease = 2\n"))

    def terminations(self) -> list[list[str]]:
        return [line.split() for line in self.terminated.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def nodes(tmp_path: Path, redis_server: RedisServer, request: pytest.FixtureRequest) -> Iterator[Nodes]:
    made = Nodes(tmp_path, redis_server, f"r{abs(hash(request.node.name)) % 10**8}:")
    yield made
    made.stop()


@pytest.fixture
def idle_nodes(tmp_path: Path, redis_server: RedisServer, request: pytest.FixtureRequest) -> Iterator[Nodes]:
    """Nodes whose sessions expire after 2 idle seconds."""
    made = Nodes(tmp_path, redis_server, f"i{abs(hash(request.node.name)) % 10**8}:", "session_idle_timeout = 2")
    yield made
    made.stop()


def notes(reader: SseReader) -> list[dict[str, Any]]:
    return [json.loads(e["data"]) for e in reader.events if e.get("data", "").strip()]


# -- one standalone GET stream per session, cluster-wide ------------------------------------------------

async def test_a_second_get_stream_on_another_process_gets_409(nodes: Nodes):
    a, b = nodes.start(), nodes.start()
    async with httpx.AsyncClient(timeout=10) as client:
        session_id = await open_session(client, a)
        async with client.stream("GET", a.url, headers=stream_headers(session_id)) as first:
            assert first.status_code == 200
            second = await client.get(b.url, headers=stream_headers(session_id))
            assert second.status_code == 409, second.text
            assert second.json()["error"]["message"].startswith("Conflict: only one standalone SSE stream")
            same = await client.get(a.url, headers=stream_headers(session_id))
            assert same.status_code == 409
        # The first stream ended: the next GET, on any process, gets the stream.
        for _ in range(50):
            async with client.stream("GET", b.url, headers=stream_headers(session_id)) as again:
                if again.status_code == 200:
                    break
            await asyncio.sleep(0.1)
        assert again.status_code == 200


async def test_the_get_stream_of_a_killed_process_is_free_again_within_a_lease(nodes: Nodes):
    a, b = nodes.start(), nodes.start()
    async with httpx.AsyncClient(timeout=10) as client:
        session_id = await open_session(client, a)
        async with client.stream("GET", a.url, headers=stream_headers(session_id)) as first:
            assert first.status_code == 200
            await SseReader(first).until(lambda r: bool(r.events), timeout=5)
            a.stop(signal.SIGKILL)
        killed = time.monotonic()
        status = 0
        while time.monotonic() - killed < 10:
            async with client.stream("GET", b.url, headers=stream_headers(session_id)) as again:
                status = again.status_code
            if status == 200:
                break
            assert status == 409
            await asyncio.sleep(0.2)
        assert status == 200 and time.monotonic() - killed < 2 * 2 + 1  # within about a lease (2 s)


# -- notifications for sessions no process holds --------------------------------------------------------

async def test_a_notification_for_a_session_no_process_holds_waits_for_its_next_get(nodes: Nodes):
    a = nodes.start()
    async with httpx.AsyncClient(timeout=10) as client:
        session_id = await open_session(client, a)
        await session_call(client, a, session_id, "resources/subscribe", {"uri": "demo://readme"})
        a.stop()  # gracefully: the session is released, not ended; no process holds it now
        b = nodes.start()  # has never seen the session
        other = await open_session(client, b)
        await session_call(client, b, other, "tools/call", {"name": "announce", "arguments": {
            "uri": "demo://readme", "kind": "tools"}})
        await asyncio.sleep(0.5)  # kept in the background by the announcing process
        async with client.stream("GET", b.url, headers=stream_headers(session_id)) as stream:
            assert stream.status_code == 200
            reader = SseReader(stream)
            await reader.until(lambda r: len(notes(r)) >= 2, timeout=5)
        got = notes(reader)
        assert [n["method"] for n in got] == ["notifications/resources/updated", "notifications/tools/list_changed"]
        assert got[0]["params"] == {"uri": "demo://readme"}


async def test_a_held_session_gets_a_notification_once(nodes: Nodes):
    a, b = nodes.start(), nodes.start()
    async with httpx.AsyncClient(timeout=10) as client:
        session_id = await open_session(client, a)
        await session_call(client, b, session_id, "resources/subscribe", {"uri": "demo://readme"})  # both hold it
        async with client.stream("GET", a.url, headers=stream_headers(session_id)) as stream:
            reader = SseReader(stream)
            other = await open_session(client, b)
            for n in range(3):
                await session_call(client, b, other, "tools/call", {"name": "announce", "arguments": {"uri": "demo://readme"}},
                           request_id=10 + n)
            await reader.until(lambda r: len(notes(r)) >= 3, timeout=5)
            with pytest.raises(AssertionError):  # nothing more comes
                await reader.until(lambda r: len(notes(r)) > 3, timeout=1.5)
        assert [n["params"]["uri"] for n in notes(reader)] == ["demo://readme"] * 3


# -- idle expiry: the terminate hook once across processes ----------------------------------------------

async def test_idle_expiry_fires_the_terminate_hook_exactly_once_across_processes(idle_nodes: Nodes):
    nodes = idle_nodes
    servers = [nodes.start(), nodes.start(), nodes.start()]
    async with httpx.AsyncClient(timeout=10) as client:
        sessions = [await open_session(client, servers[n % 3]) for n in range(6)]
        for n, session_id in enumerate(sessions):  # every process holds every session
            for m, server in enumerate(servers):
                await session_call(client, server, session_id, "tools/list", request_id=100 + 10 * n + m)
        deadline = time.monotonic() + 15
        while len(nodes.terminations()) < len(sessions) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.5)  # a few more reaper rounds on every process: nothing fires twice
        ended = nodes.terminations()
        assert sorted(sid for sid, _, _ in ended) == sorted(sessions), ended
        assert {reason for _, reason, _ in ended} == {"expired"}
        for session_id in sessions:  # gone on every process
            for server in servers:
                gone = await client.post(server.url, headers=session_headers(session_id),
                                         json={"jsonrpc": "2.0", "id": 9, "method": "ping"})
                assert gone.status_code == 404, gone.text


async def test_a_session_busy_on_one_process_does_not_expire(idle_nodes: Nodes):
    nodes = idle_nodes
    a, b = nodes.start(), nodes.start()
    async with httpx.AsyncClient(timeout=15) as client:
        session_id = await open_session(client, a)
        async with client.stream("GET", b.url, headers=stream_headers(session_id)) as stream:
            assert stream.status_code == 200
            await asyncio.sleep(4)  # twice the idle timeout, with only the GET stream open
        response = await client.post(a.url, headers=session_headers(session_id),
                                     json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        replies = sse_messages(response.text)
        assert replies and "tools" in replies[-1].get("result", {}), (response.status_code, response.text)
    assert nodes.terminations() == []


async def test_the_store_hands_each_expired_session_to_one_caller(redis_server: RedisServer):
    settings = redis_settings(redis_server.url, session_ttl=0.2)
    backends = [RedisBackend(settings) for _ in range(4)]
    try:
        for n in range(20):
            await backends[0].sessions.save({"id": f"s{n}", "x": n})
        assert await backends[1].sessions.load("s3") == {"id": "s3", "x": 3}
        assert await backends[1].sessions.touch("s3")
        await asyncio.sleep(0.3)
        assert await backends[2].sessions.load("s3") is None  # expired: gone for load at once
        assert not await backends[2].sessions.touch("s3")  # and a touch does not revive it
        taken = await asyncio.gather(*(b.sessions.expired(limit=7) for b in backends for _ in range(2)))
        ids = [sid for batch in taken for sid, _ in batch]
        assert sorted(ids) == sorted(f"s{n}" for n in range(20)), ids
        states = {sid: state for batch in taken for sid, state in batch}
        assert states["s5"] == {"id": "s5", "x": 5}
        assert await backends[3].sessions.expired() == []
    finally:
        for backend in backends:
            await backend.close()
