"""The backend's connections (mcphost_redis.packing): commands packed by hiredis are the bytes
redis-py would have sent, and a write that cannot finish is still bounded by the socket timeout."""

from __future__ import annotations

import os
import signal
import time

import pytest
from mcphost_redis import RedisBackend
from mcphost_redis.packing import HiredisPacking, TasklessWrites
from mcphost_redis.testing import RedisServer, redis_settings
from redis.asyncio.connection import Connection

from mcphost.sessions.backend import BackendUnavailable

COMMANDS = [
    ("EVALSHA", "0123abcd", 2, "k:{s}", "k:{s}:1", b"\x00\xffpayload", 1.5, -7, "héllo"),
    ("SCRIPT LOAD", "return 1"),
    ("SET", "health", b"1", "PX", 10_000),
]


@pytest.mark.parametrize("command", COMMANDS)
def test_hiredis_packs_what_redis_py_packs(command: tuple[object, ...]) -> None:
    theirs = b"".join(Connection().pack_command(*command))
    packed = type("Packed", (HiredisPacking, Connection), {})().pack_command(*command)
    assert b"".join(packed) == theirs


async def test_the_backend_talks_to_redis_through_hiredis_packing(redis_server: RedisServer) -> None:
    backend = RedisBackend(redis_settings(redis_server.url, prefix="pack:"))
    try:
        assert issubclass(backend.redis.connection_pool.connection_class, HiredisPacking)
        await backend.redis.set("pack:k", "héllo \r\n wörld")
        assert (await backend.redis.get("pack:k")).decode() == "héllo \r\n wörld"
        assert await backend.health()
    finally:
        await backend.close()


async def test_a_write_a_stopped_redis_cannot_take_times_out_and_the_next_command_reconnects(
        redis_server: RedisServer) -> None:
    backend = RedisBackend(redis_settings(redis_server.url, prefix="slow:", op_timeout=1.0))
    assert issubclass(backend.redis.connection_pool.connection_class, TasklessWrites)
    assert redis_server.process is not None
    try:
        await backend.health()  # connected before Redis stops reading
        os.kill(redis_server.process.pid, signal.SIGSTOP)
        started = time.monotonic()
        try:
            with pytest.raises(BackendUnavailable, match="Timeout writing"):
                # Far more than the socket buffers hold: the write itself has to wait on Redis. Small
                # enough to pack in milliseconds, so the write's timeout (1 s) comes before the
                # operation's own deadline (1.5 s) even on a loaded machine.
                await backend.op(backend.redis.set("slow:big", b"x" * (16 << 20)))
        finally:
            os.kill(redis_server.process.pid, signal.SIGCONT)
        assert time.monotonic() - started < 3.0
        assert await backend.health()
    finally:
        await backend.close()
