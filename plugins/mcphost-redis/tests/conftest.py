"""Fixtures: a private redis-server per test module, and both backends for the contract tests."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcphost_redis import RedisBackend
from mcphost_redis.testing import RedisServer, redis_server_path, redis_settings

from mcphost.builtin.memory import MemoryBackend


def _need_redis() -> None:
    if redis_server_path() is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is required in CI (scripts/ensure-tools installs it)")
        pytest.skip("redis-server is not installed")


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server (no persistence) on a free loopback port for the module, killed by pid after."""
    _need_redis()
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server for this test alone (the fault tests kill and restart it)."""
    _need_redis()
    server = RedisServer(tmp_path / "redis")
    yield server
    server.stop()


@pytest.fixture(params=["memory", "redis"])
async def make_backend(request: pytest.FixtureRequest) -> AsyncIterator[Callable[..., Awaitable[Any]]]:
    """Factory for each backend in turn, started: ``await make_backend(stream_max_events=10)``."""
    made: list[Any] = []

    async def make(stream_max_events: int = 1000) -> Any:
        if request.param == "memory":
            backend: Any = MemoryBackend(max_events=stream_max_events)
        else:
            server = request.getfixturevalue("redis_server")
            backend = RedisBackend(redis_settings(server.url, stream_max_events=stream_max_events))
        await backend.start()
        made.append(backend)
        return backend

    yield make
    for backend in made:
        await backend.close()


@pytest.fixture
async def backend(make_backend: Callable[..., Awaitable[Any]]) -> Any:
    """Each backend in turn, started; the contract tests assert the same things of both."""
    return await make_backend()
