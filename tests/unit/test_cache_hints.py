"""2026-07-28 cache hints (``ttlMs`` / ``cacheScope``) on resources/read, configurable per record."""

from __future__ import annotations

from typing import Any

import pytest

import mcphost
from mcphost.testing import make_host
from tests.support.modern_support import modern_call


class Cached:
    @mcphost.hookimpl
    def mcphost_resources(self, host: Any) -> list[mcphost.Resource]:
        @mcphost.resource("cache://daily", cache_ttl_ms=86_400_000)
        def daily() -> str:
            return "the same for everyone today"

        @mcphost.resource("cache://mine", cache_scope="private", cache_ttl_ms=5_000)
        def mine() -> str:
            return "depends on who asks"

        @mcphost.resource("cache://plain")
        def plain() -> str:
            return "server default"

        return [daily, mine, plain]


async def read(host: Any, uri: str, principal: Any = None) -> dict[str, Any]:
    return (await modern_call(host, "resources/read", {"uri": uri}, principal=principal))["result"]


@pytest.fixture
async def host():
    host = make_host(("cached", Cached()), config={"server": {"cache_ttl_ms": 1000}})
    await host.start()
    yield host
    await host.stop()


async def test_a_record_sets_its_own_ttl_and_scope(host):
    daily = await read(host, "cache://daily")
    assert (daily["ttlMs"], daily["cacheScope"]) == (86_400_000, "public")
    mine = await read(host, "cache://mine")
    assert (mine["ttlMs"], mine["cacheScope"]) == (5_000, "private")
    plain = await read(host, "cache://plain")
    assert (plain["ttlMs"], plain["cacheScope"]) == (1000, "public")


async def test_an_authenticated_caller_always_gets_private(host):
    alice = mcphost.Principal(subject="alice")
    daily = await read(host, "cache://daily", alice)
    assert (daily["ttlMs"], daily["cacheScope"]) == (86_400_000, "private")


def test_bad_cache_hints_are_refused_when_the_record_is_built():
    with pytest.raises(ValueError, match="cache_scope"):
        mcphost.resource("cache://x", cache_scope="shared")(lambda: "x")
    with pytest.raises(ValueError, match="cache_ttl_ms"):
        mcphost.resource("cache://x", cache_ttl_ms=-1)(lambda: "x")
