"""What is particular to the Redis backend: selection by config, the config section, TTLs, retention."""

from __future__ import annotations

import asyncio
import time

import pytest
from mcphost_redis import ENV_URL, RedisBackend
from mcphost_redis.backend import SESSION_GRACE
from mcphost_redis.testing import redis_settings

from mcphost.builtin.memory import MemoryBackend
from mcphost.config import config_from_dict
from mcphost.errors import ConfigError
from mcphost.host import Host
from mcphost.sessions.backend import SessionPage, UnknownEvent


def _host(plugins: dict, server: dict | None = None) -> Host:
    host = Host(config_from_dict({"server": server or {}, "plugins": plugins}))
    host.prepare()
    return host


def test_without_a_url_the_memory_backend_serves(monkeypatch):
    monkeypatch.delenv(ENV_URL, raising=False)
    host = _host({})
    info = host.plugin_infos["redis"]
    assert (info.status, info.wake) == ("not configured", "[plugins.redis] url")  # dormant: no hook runs
    assert info.distribution == "mcphost-redis"
    assert host.backend.name == "memory" and not host.backend.shared


def test_a_url_switches_to_redis_with_the_server_settings_as_defaults(monkeypatch):
    monkeypatch.delenv(ENV_URL, raising=False)
    host = _host({"redis": {"url": "redis://127.0.0.1:1/0", "prefix": "app:"}},
                 {"session_idle_timeout": 120, "stream_max_events": 50})
    backend = host.backend
    assert isinstance(backend, RedisBackend) and backend.shared and backend.name == "redis"
    assert backend.settings.prefix == "app:" and backend.settings.session_ttl == 120
    assert backend.settings.stream_max_age == 120 and backend.settings.stream_max_events == 50
    assert backend.settings.op_timeout == 1.0 and backend.settings.retry_after == 1


def test_the_url_can_come_from_the_environment(monkeypatch):
    monkeypatch.setenv(ENV_URL, "redis://127.0.0.1:1/2")
    backend = _host({}).backend
    assert isinstance(backend, RedisBackend) and backend.settings.url == "redis://127.0.0.1:1/2"


@pytest.mark.parametrize("section,message", [
    ({"url": "http://localhost"}, "[plugins.redis.url] String should match pattern"),
    ({"url": "redis://x", "op_timeout": 0}, "[plugins.redis.op_timeout] Input should be greater than 0"),
    ({"url": "redis://x", "prefix": "a{b}"}, "[plugins.redis.prefix] String should match pattern"),
    ({"url": "redis://x", "retry_after": "1"}, "[plugins.redis.retry_after] Input should be a valid integer"),
    ({"url": "redis://x", "lease": 0.1}, "[plugins.redis.lease] Input should be greater than or equal to 1"),
    ({"url": "redis://x", "ur1": "redis://y"}, "[plugins.redis] unknown key 'ur1' (did you mean 'url'?)"),
])
def test_the_config_section_is_validated(section, message):
    with pytest.raises(ConfigError) as caught:
        _host({"redis": section})
    assert message in str(caught.value)


def test_every_default_is_the_models_and_the_schema_is_derived_from_it(monkeypatch):
    monkeypatch.delenv(ENV_URL, raising=False)
    host = _host({"redis": {"url": "redis://127.0.0.1:1/0"}}, {"session_idle_timeout": 90})
    settings = host.backend.settings
    assert (settings.prefix, settings.op_timeout, settings.lease) == ("mcphost:", 1.0, 6)
    assert settings.max_connections == 10000
    assert settings.session_ttl == settings.stream_max_age == 90
    schema = host.config_schemas()["redis"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["prefix"]["default"] == "mcphost:"
    assert schema["properties"]["lease"] == {"default": 6, "description": schema["properties"]["lease"]["description"],
                                             "maximum": 3600, "minimum": 1, "title": "Lease", "type": "number"}


async def test_sessions_expire_after_the_ttl_and_saves_and_touches_refresh_it(redis_server):
    backend = RedisBackend(redis_settings(redis_server.url, session_ttl=0.6))
    try:
        before = await backend.sessions.count()
        await backend.sessions.save({"id": "s"})
        # The expiry index says when the idle time runs out; the state outlives it for the reaper.
        expires = await backend.redis.zscore(backend.key("sessions"), "s")
        assert 400 < expires - time.time() * 1000 <= 600
        ttl = await backend.redis.pttl(backend.key("s:", "s"))
        assert 600 < ttl <= 600 + SESSION_GRACE * 1000
        for _ in range(3):  # kept alive by touches for longer than one TTL
            await asyncio.sleep(0.3)
            assert await backend.sessions.touch("s")
        assert await backend.sessions.load("s") == {"id": "s"}
        assert await backend.sessions.count() == before + 1
        assert await backend.sessions.ids() == ["s"]
        await asyncio.sleep(0.8)
        assert await backend.sessions.load("s") is None
        assert await backend.sessions.count() == before
        assert not await backend.sessions.touch("s")
    finally:
        await backend.close()


async def test_events_older_than_the_maximum_age_are_trimmed(redis_server):
    backend = RedisBackend(redis_settings(redis_server.url, stream_max_age=0.3, session_ttl=60))
    try:
        log = backend.events
        await log.open("s", "1")
        for n in range(3):
            await log.append("s", "1", {"n": n})
        await asyncio.sleep(0.45)
        assert await log.append("s", "1", {"n": 3}) == 4
        with pytest.raises(UnknownEvent):
            await log.read("s", "1", 0, 0)
        assert [e.seq for e in (await log.read("s", "1", 3, 0)).events] == [4]
        # The log's keys expire too, a minute after the session would.
        assert 60_000 < await backend.redis.pttl(f"{backend.settings.prefix}e:{{s}}") <= 120_000
    finally:
        await backend.close()


async def test_a_trimmed_finished_stream_still_reports_done(redis_server):
    backend = RedisBackend(redis_settings(redis_server.url, stream_max_age=0.2))
    try:
        log = backend.events
        await log.open("s", "1")
        await log.append("s", "1", {"n": 1}, final=True)
        await asyncio.sleep(0.3)
        await log.open("s", "2")
        await log.append("s", "2", {"n": 1})  # trimming happens on appends to the stream itself
        read = await log.read("s", "1", 1, 5)
        assert read.events == [] and read.done
    finally:
        await backend.close()


async def test_a_stream_whose_lease_lapses_is_settled_once_with_the_given_replies(redis_server):
    backend = RedisBackend(redis_settings(redis_server.url))
    try:
        log = backend.events
        await log.open("s", "1")
        await log.lease([("s", "1", [7, "x"])], 0.3)
        await log.append("s", "1", None)
        assert await log.orphaned("s", "1") is None  # leased: a live process writes it
        await log.lease([("s", "1", [7, "x"])], 0.3)  # renewed
        await asyncio.sleep(0.2)
        assert await log.orphaned("s", "1") is None
        await asyncio.sleep(0.25)
        assert await log.orphaned("s", "1") == [7, "x"]
        replies = [{"jsonrpc": "2.0", "id": i, "error": {"code": -32800, "message": "gone"}} for i in (7, "x")]
        log.grace = 0.3
        assert not await log.settle("s", "1", replies)  # the lapse is noted: its grace starts now
        assert not await log.settle("s", "1", replies)
        await asyncio.sleep(0.35)
        assert await log.settle("s", "1", replies)
        assert not await log.settle("s", "1", replies)  # once
        read = await log.read("s", "1", 1, 0)
        assert [e.message for e in read.events] == replies and read.done
        assert await log.orphaned("s", "1") is None  # done now
        # A finished stream is never orphaned, leased or not; nor is an unknown one.
        await log.open("s", "2")
        await log.append("s", "2", {"n": 1}, final=True)
        assert await log.orphaned("s", "2") is None and await log.orphaned("s", "9") is None
        await log.lease([("s", "9", [1])], 1)  # a lease for an unknown stream creates nothing
        assert not await log.exists("s", "9")
    finally:
        await backend.close()


async def test_a_lapsed_lease_renewed_within_the_grace_is_never_settled(redis_server):
    """H12: the owner's renewals failed (Redis refused writes) and its lease lapsed; another
    process finds the stream orphaned, but the owner renews within the grace: no "resend"."""
    backend = RedisBackend(redis_settings(redis_server.url))
    try:
        log = backend.events
        log.grace = 0.5
        await log.begin("s", "1", [7], 0.2)
        await asyncio.sleep(0.25)  # the renewals failed: the lease is gone
        assert await log.orphaned("s", "1") == [7]
        reply = [{"jsonrpc": "2.0", "id": 7, "error": {"code": -32800, "message": "send it again"}}]
        assert not await log.settle("s", "1", reply)  # noted, not settled
        await log.lease([("s", "1", [7])], 0.2)  # the owner is back
        await asyncio.sleep(0.3)
        assert await log.orphaned("s", "1") == [7]  # lapsed again, but the grace starts over
        assert not await log.settle("s", "1", reply)
        await asyncio.sleep(0.3)  # more than the grace after the first note: not settled all the same
        assert not await log.settle("s", "1", reply)
        await log.lease([("s", "1", [7])], 5)
        await log.append("s", "1", {"jsonrpc": "2.0", "id": 7, "result": {}}, final=True)
        read = await log.read("s", "1", 1, 0)
        assert [e.message for e in read.events] == [{"jsonrpc": "2.0", "id": 7, "result": {}}] and read.done
        # Dropping the session's log leaves nothing of the note behind.
        await log.drop("s")
        assert not await log.exists("s", "1")
    finally:
        await backend.close()


async def test_live_sessions_walks_every_live_session_page_by_page(redis_server):
    """The walk the console lists a cluster's sessions with: ZSCAN pages of about ``count`` (a set
    past Redis's small encoding, so it really pages), live sessions only, subscriptions and the
    idle time the expiry index knows; the memory backend, one process, lists nothing."""
    backend = RedisBackend(redis_settings(redis_server.url, session_ttl=60))
    try:
        for i in range(300):
            await backend.sessions.save({"id": f"s{i}", "node": "a:1"})
        assert await backend.sessions.subscribe("s7", "file:///x", 10)
        await backend.sessions.save({"id": "gone"})
        await backend.redis.zadd(backend.key("sessions"), {"gone": time.time() * 1000 - 1})  # idle past its time
        states: dict[str, dict] = {}
        pages, cursor = 0, None
        while True:
            page = await backend.live_sessions(cursor, 50)
            assert len(page.states) < 150  # bounded per call
            states.update((state["id"], state) for state in page.states)
            pages += 1
            cursor = page.cursor
            if cursor is None:
                break
        assert pages > 2 and set(states) == {f"s{i}" for i in range(300)}
        assert states["s7"]["subscriptions"] == ["file:///x"] and states["s8"]["subscriptions"] == []
        assert states["s3"]["node"] == "a:1" and abs(states["s3"]["last_active"] - time.time()) < 5
    finally:
        await backend.close()
    memory = MemoryBackend()
    assert await memory.live_sessions() == SessionPage([], None)
