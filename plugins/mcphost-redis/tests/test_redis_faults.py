"""Redis faults: an outage, a stall, a pause, dropped connections, out of memory.

Every operation fails fast with BackendUnavailable (well within 2 s) instead of hanging or
leaking a driver error, and the same backend object works again once Redis is back, without
being rebuilt.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from mcphost_redis import RedisBackend
from mcphost_redis.testing import RedisServer, redis_settings

from mcphost.sessions.backend import BackendUnavailable

FAIL_FAST = 2.0  # seconds within which an operation must give up
RECOVER = 5.0  # seconds within which the backend must work again once Redis is back


def operations(backend: RedisBackend) -> dict[str, Callable[[], Awaitable[Any]]]:
    return {
        "session load": lambda: backend.sessions.load("s"),
        "session save": lambda: backend.sessions.save({"id": "s"}),
        "session count": lambda: backend.sessions.count(),
        "event append": lambda: backend.events.append("s", "1", {"n": 1}),
        "event read": lambda: backend.events.read("s", "1", 0, 0),
        "event blocking read": lambda: backend.events.read("s", "1", 1, 10),
        "event exists": lambda: backend.events.exists("s", "1"),
        "publish": lambda: backend.broker.publish("c", {"n": 1}),
        "task load": lambda: backend.tasks.load("t"),
        "claim": lambda: backend.claim("k", 5),
    }


async def assert_fails_fast(operation: Callable[[], Awaitable[Any]], name: str) -> None:
    started = time.monotonic()
    with pytest.raises(BackendUnavailable) as caught:
        await operation()
    elapsed = time.monotonic() - started
    assert elapsed < FAIL_FAST, f"{name} took {elapsed:.2f}s to fail"
    assert caught.value.retry_after >= 1


async def until_works(operation: Callable[[], Awaitable[Any]], limit: float = RECOVER) -> float:
    started = time.monotonic()
    while True:
        try:
            await operation()
            return time.monotonic() - started
        except BackendUnavailable:
            if time.monotonic() - started > limit:
                raise
            await asyncio.sleep(0.05)


@pytest.fixture
async def started(own_redis: RedisServer):
    backend = RedisBackend(redis_settings(own_redis.url))
    await backend.start()
    await backend.events.open("s", "1")
    await backend.events.append("s", "1", {"n": 0})
    yield backend
    await backend.close()


async def test_killed_redis_fails_every_operation_fast_and_the_same_backend_recovers(own_redis, started):
    backend = started
    box: list = []
    subscription = backend.broker.subscribe("c", box.append)
    await subscription.ready()
    reader = asyncio.ensure_future(backend.events.read("s", "1", 1, 30))  # blocked when Redis dies
    await asyncio.sleep(0.1)
    own_redis.kill()
    started_at = time.monotonic()
    with pytest.raises(BackendUnavailable):
        await reader
    assert time.monotonic() - started_at < FAIL_FAST
    for name, operation in operations(backend).items():
        await assert_fails_fast(operation, name)
    assert await backend.health() is False

    own_redis.start()  # same port, empty (no persistence)
    took = await until_works(lambda: backend.sessions.save({"id": "s", "back": True}))
    assert took < RECOVER
    assert (await backend.sessions.load("s"))["back"] is True
    assert await backend.health() is True
    # The broker subscribed again by itself: a message published now reaches the old subscriber.
    await until_works(lambda: subscription.ready(timeout=0.2))
    await backend.broker.publish("c", {"after": "restart"})
    deadline = time.monotonic() + 2
    while not box and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert box == [{"after": "restart"}]
    assert backend.broker.reconnects >= 1


async def test_redis_down_at_start_is_no_crash_and_the_backend_connects_later(own_redis):
    own_redis.kill()
    backend = RedisBackend(redis_settings(own_redis.url))
    await backend.start()  # Redis is not there: starting still succeeds
    try:
        await assert_fails_fast(lambda: backend.sessions.load("x"), "load")
        own_redis.start()
        await until_works(lambda: backend.sessions.save({"id": "x"}))
        assert await backend.sessions.load("x") == {"id": "x"}
    finally:
        await backend.close()


def _fire(server: RedisServer, *args: str) -> socket.socket:
    """Send a command without waiting for its answer (DEBUG SLEEP blocks the server itself)."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    parts = "".join(f"${len(a)}\r\n{a}\r\n" for a in args)
    sock.sendall(f"*{len(args)}\r\n{parts}".encode())
    return sock


@pytest.mark.parametrize("stall", [("DEBUG", "SLEEP", "3"), ("CLIENT", "PAUSE", "3000", "ALL")])
async def test_a_stalled_redis_fails_operations_fast_and_recovers(tmp_path, stall):
    server = RedisServer(tmp_path / "redis", extra=["--enable-debug-command", "local"])
    backend = RedisBackend(redis_settings(server.url))
    await backend.start()
    try:
        await backend.sessions.save({"id": "s"})
        sock = _fire(server, *stall)
        await asyncio.sleep(0.1)
        await assert_fails_fast(lambda: backend.sessions.save({"id": "s", "n": 2}), "save during a stall")
        assert await backend.health() is False
        took = await until_works(lambda: backend.sessions.save({"id": "s", "n": 3}))
        assert took < RECOVER
        assert (await backend.sessions.load("s"))["n"] == 3
        sock.close()
    finally:
        await backend.close()
        server.stop()


async def test_killed_client_connections_are_replaced_transparently(own_redis, started):
    backend = started
    box: list = []
    subscription = backend.broker.subscribe("c", box.append)
    await subscription.ready()
    assert b":" in own_redis.command("CLIENT", "KILL", "TYPE", "normal")
    assert b":" in own_redis.command("CLIENT", "KILL", "TYPE", "pubsub")
    # The stale pooled connection is retried once on a fresh one: the caller sees no error.
    assert (await backend.events.read("s", "1", 0, 0)).events[0].message == {"n": 0}
    await until_works(lambda: subscription.ready(timeout=0.2))
    await backend.broker.publish("c", {"n": 1})
    deadline = time.monotonic() + 2
    while not box and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert box == [{"n": 1}]


async def test_out_of_memory_writes_are_unavailable_and_reads_still_work(own_redis, started):
    backend = started
    assert own_redis.command("CONFIG", "SET", "maxmemory-policy", "noeviction").startswith(b"+OK")
    assert own_redis.command("CONFIG", "SET", "maxmemory", "1").startswith(b"+OK")
    try:
        await assert_fails_fast(lambda: backend.sessions.save({"id": "big", "x": "y" * 1000}), "save when OOM")
        await assert_fails_fast(lambda: backend.events.append("s", "1", {"n": 1}), "append when OOM")
        assert (await backend.events.read("s", "1", 0, 0)).events[0].message == {"n": 0}
    finally:
        own_redis.command("CONFIG", "SET", "maxmemory", "0")
    await backend.sessions.save({"id": "big"})
    assert await backend.sessions.load("big") == {"id": "big"}


async def test_an_append_retried_after_a_late_reply_is_stored_once(tmp_path):
    """A reply whose append timed out while Redis was stalled still ran once Redis woke up (the
    command sat in its socket): the caller's retry of that append must not store it again.
    (CI saw a batch's SSE reply carry one reply twice under heavy load: RELIABILITY's 0 duplicates.)"""
    server = RedisServer(tmp_path / "redis", extra=["--enable-debug-command", "local"])
    backend = RedisBackend(redis_settings(server.url))
    await backend.start()
    try:
        events = backend.events
        await events.begin("s", "1", [7, 8], 0)
        first = await events.append("s", "1", {"jsonrpc": "2.0", "id": 7, "result": {}})
        sock = _fire(server, "DEBUG", "SLEEP", "3")
        await asyncio.sleep(0.1)
        reply = {"jsonrpc": "2.0", "id": 8, "result": {}}
        with pytest.raises(BackendUnavailable):  # sent, but its reply comes too late
            await events.append("s", "1", reply)
        # Redis wakes up and runs the append that timed out; then the caller retries it.
        await until_works(lambda: backend.sessions.load("x"), limit=10)
        assert await events.append("s", "1", reply) == first + 1
        # Only that retry is recognised: a later append of the same bytes is a new event.
        assert await events.append("s", "1", reply) == first + 2
        await events.finish("s", "1")
        stored = await events.read("s", "1", 0, 0)
        assert [e.message for e in stored.events] == [None, {"jsonrpc": "2.0", "id": 7, "result": {}}, reply, reply]
        assert [e.seq for e in stored.events] == [1, first, first + 1, first + 2]
        sock.close()
    finally:
        await backend.close()
        server.stop()
