"""``[endpoints.NAME]``: the settings, the selection rule, each endpoint's view through the kernel
(listing, calls, server info, counters) and ``list_changed`` reaching only the sessions whose view
changed. Over HTTP with real tokens and the official SDK: plugins/mcphost-jwt/tests/test_jwt_endpoints.py."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import mcphost
from mcphost.config import config_from_dict
from mcphost.errors import ConfigError
from mcphost.protocol.errors import McpError
from mcphost.records import Provenance
from mcphost.sessions.session import Connection
from mcphost.testing import MemoryClient, make_host

REPO_ROOT = Path(__file__).resolve().parents[2]


def endpoints(table: dict[str, Any], path: str = "/mcp") -> Any:
    return config_from_dict({"server": {"path": path}, "endpoints": table}).endpoints


# -- settings ---------------------------------------------------------------------------------------------

def test_settings_defaults_and_paths():
    found = endpoints({"a": {}, "b": {"path": "/tools/b/", "discovery": "search", "title": "B",
                                      "scopes": ["x:read"], "include": {"plugins": ["demo"]}}})
    assert found["a"].path == "/mcp/a" and found["a"].discovery == "list" and found["a"].include is None
    assert found["a"].server_name == "a"
    assert found["b"].path == "/tools/b" and found["b"].discovery == "search"
    assert found["b"].scopes == frozenset({"x:read"}) and found["b"].include.plugins == frozenset({"demo"})
    assert endpoints({"a": {}}, path="/api/mcp/")["a"].path == "/api/mcp/a"


@pytest.mark.parametrize(("table", "message"), [
    ({"a": {"discovery": "grep"}}, "[endpoints.a.discovery] 'grep' is not one of ['list', 'search', 'code']"),
    ({"a": {"colour": 1}}, "[endpoints.a] unknown key 'colour'"),
    ({"a": {"include": {"tool": ["x"]}}}, "[endpoints.a.include] unknown key 'tool' (did you mean 'tools'?)"),
    ({"a": {"scopes": ["has space"]}}, "[endpoints.a.scopes.0]"),
    ({"a b": {}}, "[endpoints] 'a b' does not match"),
    ({"a": {"path": "/mcp"}}, "path '/mcp' is already taken by server.path"),
    ({"a": {"path": "/x"}, "b": {"path": "/x/"}}, "[endpoints.b] path '/x' is already taken by [endpoints.a]"),
    ({"a": {"path": "relative"}}, "[endpoints.a.path]"),
])
def test_settings_mistakes_are_named(table, message):
    with pytest.raises(ConfigError) as caught:
        endpoints(table)
    assert message in str(caught.value)


def test_selection_rule():
    [settings] = endpoints({"e": {"include": {"plugins": ["p"], "upstreams": ["github"], "tools": ["ticket_*"],
                                              "resources": ["docs://*"]},
                                  "exclude": {"tools": ["*_delete"], "plugins": ["q"]}}}).values()
    assert settings.selects("tools", "anything", "p", None)
    assert settings.selects("tools", "gh_issue", "proxy", "github")
    assert settings.selects("tools", "ticket_open", "other", None)
    assert not settings.selects("tools", "ticket_delete", "other", None)  # exclude wins
    assert not settings.selects("tools", "ticket_open", "q", None)
    assert not settings.selects("prompts", "ticket_open", "other", None)  # tool globs select tools only
    assert settings.selects("resources", "docs://a/b", "other", None)
    [everything] = endpoints({"e": {"exclude": {"prompts": ["secret*"]}}}).values()
    assert everything.selects("tools", "x", None, None)
    assert not everything.selects("prompts", "secret_plan", None, None)


# -- views through the kernel ------------------------------------------------------------------------------

class Catalog:
    """A plugin whose tools a test changes, then reloads."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.descriptions: dict[str, str] = {}

    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        def make(name: str) -> mcphost.Tool:
            async def run(text: str = "") -> str:
                return f"{name}:{text}"
            tool = mcphost.tool(name=name, description=self.descriptions.get(name, f"The {name} tool."))(run)
            return tool  # type: ignore[no-any-return]

        return [make(name) for name in self.names]

    @mcphost.hookimpl
    def mcphost_prompts(self, host: Any) -> list[mcphost.Prompt]:
        @mcphost.prompt(name="desk_prompt")
        def prompt() -> str:
            return "hi"
        return [prompt]


CONFIG = {"endpoints": {
    "desk": {"include": {"tools": ["desk_*"]}, "title": "Desk", "instructions": "Desk only.", "version": "9"},
    "ops": {"include": {"tools": ["ops_*"]}, "exclude": {"tools": ["ops_secret"]}},
    "find": {"discovery": "search", "include": {"tools": ["desk_*", "ops_*"]}},
}}


def client(host: Any, endpoint: str | None, **options: Any) -> MemoryClient:
    return MemoryClient(host, connection=Connection(transport="memory", endpoint=endpoint), **options)


async def test_views_list_call_and_describe_only_their_selection():
    host = make_host(Catalog(["desk_open", "desk_close", "ops_restart", "ops_secret", "other"]), config=CONFIG)
    async with client(host, "desk") as desk, client(host, "ops") as ops, client(host, None) as whole:
        assert {t["name"] for t in await desk.list_tools()} == {"desk_open", "desk_close"}
        assert {t["name"] for t in await ops.list_tools()} == {"ops_restart"}
        assert len(await whole.list_tools()) == 5
        assert desk.initialize_result["serverInfo"] == {"name": "desk", "version": "9", "title": "Desk"}
        assert desk.initialize_result["instructions"] == "Desk only."
        assert "instructions" not in ops.initialize_result
        assert (await desk.call_tool("desk_open", {"text": "x"}))["content"][0]["text"] == "desk_open:x"
        hidden = await desk.raw_request("tools/call", {"name": "ops_restart", "arguments": {}})
        unknown = await desk.raw_request("tools/call", {"name": "no_such", "arguments": {}})
        assert hidden["error"]["code"] == unknown["error"]["code"]
        assert hidden["error"]["message"] == "Unknown tool: ops_restart"
        assert unknown["error"]["message"] == "Unknown tool: no_such"
        # Prompts are selected by their own globs: none here.
        assert await desk.list_prompts() == []
        assert len(await whole.list_prompts()) == 1
        assert host.endpoint_stats()["desk"]["sessions"] == 1
    stats = host.endpoint_stats()
    # desk_open, then two calls answered "Unknown tool" (one hidden, one that exists nowhere).
    assert stats["desk"] == {"path": "/mcp/desk", "discovery": "list", "tools": 2, "calls": 3, "errors": 2,
                             "searches": 0, "executions": 0, "sessions": 0}
    assert stats["ops"]["calls"] == 0


def list_changes(memory: MemoryClient) -> int:
    return sum(1 for n in memory.notifications if n.get("method") == "notifications/tools/list_changed")


async def test_list_changed_reaches_only_the_sessions_whose_view_changed():
    plugin = Catalog(["desk_open", "ops_restart", "other"])
    host = make_host(plugin, config=CONFIG)
    async with client(host, "desk") as desk, client(host, "ops") as ops, client(host, None) as whole:
        plugin.names.append("ops_stop")  # in ops' view only
        await host.reload()
        assert (list_changes(desk), list_changes(ops), list_changes(whole)) == (0, 1, 1)
        plugin.names.append("ops_secret")  # excluded from ops: no view changed but the whole catalog's
        await host.reload()
        assert (list_changes(desk), list_changes(ops), list_changes(whole)) == (0, 1, 2)
        plugin.descriptions["desk_open"] = "Opens a desk ticket, now better."  # a definition changed
        await host.reload()
        assert (list_changes(desk), list_changes(ops), list_changes(whole)) == (1, 1, 3)
        assert {t["name"] for t in await ops.list_tools()} == {"ops_restart", "ops_stop"}
        desk_open = [t for t in await desk.list_tools() if t["name"] == "desk_open"]
        assert desk_open[0]["description"] == "Opens a desk ticket, now better."


async def test_search_endpoint_lists_two_tools_and_searches_its_view():
    host = make_host(Catalog(["desk_open", "ops_restart", "other_thing"]), config=CONFIG)
    async with client(host, "find") as find:
        assert [t["name"] for t in await find.list_tools()] == ["search_tools", "call_tool"]
        found = await find.call_tool("search_tools", {"query": "the other_thing tool"})
        names = [t["name"] for t in found["structuredContent"]["tools"]]
        assert "other_thing" not in names and set(names) <= {"desk_open", "ops_restart"}
        bad = await find.call_tool("search_tools", {"query": "", "limit": 3})
        assert bad["isError"]
        too_many = await find.call_tool("search_tools", {"query": "tool", "limit": 500})
        assert too_many["isError"] and "limit" in too_many["content"][0]["text"]
        ran = await find.call_tool("call_tool", {"name": "desk_open", "arguments": {"text": "t"}})
        assert ran["content"][0]["text"] == "desk_open:t"
        missing = await find.raw_request("tools/call", {"name": "call_tool", "arguments": {"arguments": {}}})
        assert missing["error"]["code"] == -32602
    assert host.endpoint_stats()["find"]["searches"] == 3
    assert host.endpoint_stats()["find"]["calls"] == 1


def test_provenance_selects_upstreams():
    [settings] = endpoints({"e": {"include": {"upstreams": ["github"]}}}).values()
    record = dataclasses.replace(mcphost.tool(name="gh_x")(lambda: "x"),
                                 provenance=Provenance(plugin="proxy", origin="github"))
    assert settings.selects("tools", record.name, record.provenance.plugin, record.provenance.origin)
    assert not settings.selects("tools", record.name, "proxy", "gitlab")


class Slow:
    def __init__(self) -> None:
        self.cancelled = asyncio.Event()

    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        async def wait_forever() -> str:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
            return "never"
        return [mcphost.tool(name="desk_wait", description="Wait a long time.")(wait_forever)]


async def test_call_tool_is_cancelled_like_a_direct_call():
    plugin = Slow()
    host = make_host(plugin, config=CONFIG)
    async with client(host, "find") as find:
        reply = find.send({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
                           "params": {"name": "call_tool", "arguments": {"name": "desk_wait", "arguments": {}}}})
        assert reply is not None
        await asyncio.sleep(0.05)
        find.notify("notifications/cancelled", {"requestId": 99})
        assert await asyncio.wait_for(reply, 5) is None  # cancelled: no reply, as for a direct call
        await asyncio.wait_for(plugin.cancelled.wait(), 5)


class Large:
    """The 53 recorded tools of six reference MCP servers and 10 000 generated distractors."""

    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        data = json.loads((REPO_ROOT / "benchmarks" / "data" / "official_tools.json").read_text(encoding="utf-8"))
        specs = [(t["name"], t["description"], [p[0] for p in t["params"]])
                 for tools in data["servers"].values() for t in tools]
        services = ("drive", "mail", "crm", "jira", "slack", "s3", "billing", "calendar", "wiki", "shop")
        things = ("file", "folder", "message", "contact", "issue", "invoice", "event", "page", "order", "report")
        verbs = ("create", "get", "list", "update", "delete", "search", "archive", "share", "move", "export")
        for tenant in range(10):
            for service in services:
                for thing in things:
                    for verb in verbs:
                        specs.append((f"t{tenant}_{service}_{verb}_{thing}",
                                      f"{verb.title()} a {thing} in {service}.", ["workspace", f"{thing}_id"]))

        def make(name: str, description: str, params: list[str]) -> mcphost.Tool:
            async def run(**arguments: Any) -> str:
                return f"ran {name}"
            schema = {"type": "object", "properties": {p: {"type": "string"} for p in params}}
            return mcphost.Tool(name=name, fn=run, input_schema=schema, description=description)

        return [make(*spec) for spec in specs]


async def test_a_search_endpoint_over_ten_thousand_tools():
    host = make_host(Large(), config={"endpoints": {"find": {"discovery": "search"}}})
    async with client(host, "find") as find:
        assert len(host.catalog.tools) == 10_053
        assert [t["name"] for t in await find.list_tools()] == ["search_tools", "call_tool"]
        found = await find.call_tool("search_tools", {"query": "create a directory", "limit": 5})
        assert "create_directory" in [t["name"] for t in found["structuredContent"]["tools"]]
        found = await find.call_tool("search_tools", {"query": "show the working tree status", "limit": 10})
        assert "git_status" in [t["name"] for t in found["structuredContent"]["tools"]]
        ran = await find.call_tool("call_tool", {"name": "create_directory", "arguments": {"path": "/tmp/x"}})
        assert ran["content"][0]["text"] == "ran create_directory"
    assert host.kernel.views.last_update["tools_total"] == 10_053


class Policy:
    """A policy middleware keyed on tool names: it must see the tool call_tool runs."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []

    @mcphost.hookimpl
    def mcphost_middleware(self, host: Any) -> list[mcphost.Middleware]:
        @mcphost.middleware(name="deny-ops", fail_closed=True)
        async def deny(request: Any, call_next: Any) -> dict[str, Any]:
            self.seen.append((request.method, request.name))
            if request.method == "tools/call" and (request.name or "").startswith("ops_"):
                raise McpError(-32001, f"policy: {request.name} is not allowed")
            return await call_next(request)  # type: ignore[no-any-return]
        return [deny]


async def test_call_tool_goes_through_middleware_like_a_direct_call():
    policy = Policy()
    host = make_host(Catalog(["desk_open", "ops_restart"]), policy, config=CONFIG)
    async with client(host, "find") as find:
        refused = await find.raw_request("tools/call", {"name": "call_tool",
                                                        "arguments": {"name": "ops_restart", "arguments": {}}})
        assert refused["error"]["message"] == "policy: ops_restart is not allowed"
        ran = await find.call_tool("call_tool", {"name": "desk_open", "arguments": {"text": "y"}})
        assert ran["content"][0]["text"] == "desk_open:y"
        loop = await find.raw_request("tools/call", {"name": "call_tool",
                                                     "arguments": {"name": "call_tool", "arguments": {}}})
        assert loop["error"]["message"] == "Unknown tool: call_tool"
    calls = [name for method, name in policy.seen if method == "tools/call"]
    assert calls == ["call_tool", "ops_restart", "call_tool", "desk_open", "call_tool"]
    assert host.endpoint_stats()["find"]["calls"] == 1  # desk_open; the refused one never reached the tool


def test_a_stored_session_is_told_only_of_its_view_changing():
    from mcphost.kernel.fanout import _stored_list_changed
    event = {"t": "list-changed", "kind": "tools", "views": ["ops"]}
    assert _stored_list_changed(event, {"initialized": True, "endpoint": "desk"}) is None
    assert _stored_list_changed(event, {"initialized": True, "endpoint": "ops"}) is not None
    assert _stored_list_changed(event, {"initialized": True}) is not None  # the whole catalog's session
    # From a process that knows no endpoints (no "views"): everyone is told, as before.
    assert _stored_list_changed({"t": "list-changed", "kind": "tools"},
                                {"initialized": True, "endpoint": "desk"}) is not None


def test_session_state_keeps_its_endpoint():
    from mcphost.sessions.session import Session
    session = Session("s1")
    session.endpoint = "desk"
    assert Session.from_state(session.to_state()).endpoint == "desk"
    assert Session.from_state(Session("s2").to_state()).endpoint is None
