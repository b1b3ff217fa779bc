"""mcphost.introspect, the read-only surface the console shows: plugins with where they failed and their
live status reports, the catalog with providers, counters kept across a reload, budgets, redaction."""

from __future__ import annotations

from typing import Any

import mcphost
from mcphost import introspect
from mcphost.testing import MemoryClient, make_host


@mcphost.tool
def ping_tool() -> str:
    """Answer pong."""
    return "pong"


class Tools:
    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[Any]:
        return [ping_tool]


class Clashing:
    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[Any]:
        return [ping_tool]


class BrokenCatalog:
    @mcphost.hookimpl
    def mcphost_prompts(self, host: Any) -> list[Any]:
        raise ValueError("prompt store is read-only")


class Reporting:
    @mcphost.hookimpl
    def mcphost_status(self, host: Any) -> dict[str, Any]:
        return {"queue": 3}


class ReportingBadly:
    @mcphost.hookimpl
    def mcphost_status(self, host: Any) -> dict[str, Any]:
        raise RuntimeError("lost count")


async def test_plugins_say_where_they_failed_and_give_their_status_reports() -> None:
    host = make_host(("tools", Tools()), ("clash", Clashing()), ("broken", BrokenCatalog()),
                     ("reporting", Reporting()), ("badly", ReportingBadly()))
    host.prepare()
    by_name = {p["name"]: p for p in introspect.plugins(host)}
    assert by_name["tools"]["status"] == "active" and by_name["tools"]["provides"] == {"tools": ["ping_tool"]}
    broken = by_name["broken"]
    assert broken["status"] == "failed" and broken["error"] == "ValueError: prompt store is read-only"
    assert broken["where"].startswith("catalog collection (") and "test_introspect.py:" in broken["where"]
    assert by_name["reporting"]["report"] == {"queue": 3}
    assert by_name["badly"]["report"] == {"error": "mcphost_status raised RuntimeError: lost count"}
    catalog = introspect.catalog(host)
    assert [(t["name"], t["plugin"]) for t in catalog["tools"]] == [("ping_tool", "tools")]
    [refused] = catalog["refused"]
    assert refused["plugin"] == "clash" and "provided by both" in refused["reason"]


async def test_counters_survive_a_reload_and_sessions_are_listed() -> None:
    host = make_host(("tools", Tools()))
    await host.start()
    try:
        async with MemoryClient(host) as client:
            await client.call_tool("ping_tool")
            await client.call_tool("ping_tool")
            listing = await introspect.sessions(host)
            [session] = listing["sessions"]
            assert session["client"]["name"] and session["era"] == "legacy" and session["inflight"] == 0
            assert session["node"] == introspect.node() and session["held_here"] is True
            assert (listing["total"], listing["complete"]) == (1, True)
            assert (await introspect.sessions(host, limit=0))["complete"] is False
            assert introspect.traffic(host)["ping_tool"]["calls"] == 2
            await host.reload()
            await client.call_tool("ping_tool")
            assert introspect.traffic(host)["ping_tool"]["calls"] == 3
            budgets = introspect.budgets(host)
            assert [row["sessions"] for row in budgets["callers"]] == [1]
    finally:
        await host.stop()


def test_redact_hides_secret_keys_and_url_passwords() -> None:
    shown = introspect.redact({"api_key": "abc", "token_url": "https://id/token", "nested": {"password": "pw"},
                               "url": "redis://:pw@host:6379", "plain": "https://user@host/x", "empty_secret": ""})
    # token_url names where a token is fetched, not a token (mcphost.redaction.NOT_SECRET_TAIL)
    assert shown == {"api_key": "[redacted]", "token_url": "https://id/token", "nested": {"password": "[redacted]"},
                     "url": "redis://:[redacted]@host:6379", "plain": "https://user@host/x", "empty_secret": ""}
