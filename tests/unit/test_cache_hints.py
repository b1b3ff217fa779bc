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


class Scoped:
    """Records of every listed kind, one of each needing the ``admin`` scope."""

    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        @mcphost.tool(name="open_tool")
        def open_tool() -> str:
            return "anyone"

        @mcphost.tool(name="admin_tool", scopes=["admin"])
        def admin_tool() -> str:
            return "admins"

        @mcphost.tool(name="app_tool", meta={"ui": {"resourceUri": "ui://x/app.html", "visibility": ["app"]}})
        def app_tool() -> str:
            return "the app's"

        return [open_tool, admin_tool, app_tool]

    @mcphost.hookimpl
    def mcphost_prompts(self, host: Any) -> list[mcphost.Prompt]:
        @mcphost.prompt(name="admin_prompt", scopes=["admin"])
        def admin_prompt() -> str:
            return "hi"

        @mcphost.prompt(name="open_prompt")
        def open_prompt() -> str:
            return "hi"

        return [admin_prompt, open_prompt]

    @mcphost.hookimpl
    def mcphost_resources(self, host: Any) -> list[mcphost.Resource]:
        @mcphost.resource("cache://admin", scopes=["admin"])
        def admin() -> str:
            return "secret"

        @mcphost.resource("cache://open")
        def opened() -> str:
            return "open"

        return [admin, opened]


LISTS = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources"}


async def _pages(host: Any, method: str, principal: Any = None) -> list[dict[str, Any]]:
    pages, cursor = [], None
    while True:
        result = (await modern_call(host, method, {"cursor": cursor} if cursor else {}, principal=principal))["result"]
        pages.append(result)
        cursor = result.get("nextCursor")
        if not cursor:
            return pages


async def test_a_list_filtered_per_principal_never_carries_cache_scope_public():
    """Every page of every list the host filters by the caller's scopes is private, whoever asks,
    and the lists do differ per principal (so a public cache would hand one caller's to another)."""
    host = make_host(("scoped", Scoped()), config={"server": {"page_size": 1}})
    await host.start()
    try:
        alice = mcphost.Principal(subject="alice")
        root = mcphost.Principal(subject="root", scopes=frozenset({"admin"}))
        for method, key in LISTS.items():
            seen = {}
            for who, principal in (("anonymous", None), ("alice", alice), ("root", root)):
                pages = await _pages(host, method, principal)
                assert [page["cacheScope"] for page in pages] == ["private"] * len(pages), (method, who)
                seen[who] = [item.get("name") or item.get("uri") for page in pages for item in page[key]]
            assert len(seen["alice"]) < len(seen["root"]), (method, seen)
        tools = [t["name"] for page in await _pages(host, "tools/list", root) for t in page["tools"]]
        assert "app_tool" not in tools  # for its app alone: not listed to a client without the extension
    finally:
        await host.stop()


async def test_an_endpoints_list_is_private_and_the_whole_unfiltered_catalog_public():
    from mcphost.testing import app_client
    from tests.support.http_support import modern

    config = {"plugins": {"allow": ["demo"]}, "endpoints": {"some": {"include": {"tools": ["echo"]}}}}
    async with app_client(config) as http:
        async def listed(path: str) -> dict[str, Any]:
            payload, headers = modern("tools/list", {})
            return (await http.post(path, json=payload, headers=headers)).json()["result"]

        whole, some = await listed("/mcp"), await listed("/mcp/some")
    assert [t["name"] for t in some["tools"]] == ["echo"] and len(whole["tools"]) > 1
    assert (whole["cacheScope"], some["cacheScope"]) == ("public", "private")
