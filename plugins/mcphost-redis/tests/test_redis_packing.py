"""Commands packed by hiredis (mcphost_redis.packing) are the bytes redis-py would have sent."""

from __future__ import annotations

import pytest
from mcphost_redis import RedisBackend
from mcphost_redis.packing import HiredisPacking
from mcphost_redis.testing import RedisServer, redis_settings
from redis.asyncio.connection import Connection

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
