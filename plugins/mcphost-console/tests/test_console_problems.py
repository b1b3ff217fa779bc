"""The console's problems-first data over real HTTP on loopback (the host in this process): the
problems strip (failed plugins, budgets refusing, error rates above normal, what plugins report
through ``mcphost_problems``), refused calls counted per tool and reason, the settings that differ
from their defaults, and the budgets table paged on the server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from mcphost_console import ConsolePlugin

import mcphost
from mcphost.testing import make_host, serve_http
from tests.support.http_support import open_session, session_call, session_headers

ADMIN, USER = "admin-token", "user-token"


@mcphost.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@mcphost.tool
def flaky() -> str:
    """Always fails."""
    raise RuntimeError("the inventory service answered 503")


@mcphost.tool(scopes=["notes:write"])
def write_note(text: str) -> str:
    """Needs notes:write."""
    return text


class Tools:
    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[Any]:
        return [add, flaky, write_note]


class Reporter:
    """A plugin reporting one problem of its own (a password in its detail), and one that raises."""

    @mcphost.hookimpl
    def mcphost_problems(self, host: Any) -> list[dict[str, str]]:
        return [{"kind": "held", "severity": "warning", "title": "Tool vendor_lookup awaits approval",
                 "detail": "changed at https://bob:hunter2@vendor.example/mcp", "link": "#catalog"}]


class Raising:
    @mcphost.hookimpl
    def mcphost_problems(self, host: Any) -> list[dict[str, str]]:
        raise RuntimeError("cannot look")


class Tokens:
    """Bearer tokens: the admin sees the console, the user may call tools but lacks notes:write."""

    @mcphost.hookimpl
    def mcphost_authenticate(self, request: Any) -> mcphost.Principal | None:
        token = mcphost.bearer_token(request.headers.get("authorization"))
        scopes = {ADMIN: {"mcphost:admin"}, USER: {"notes:read"}}.get(token or "")
        return None if scopes is None else mcphost.Principal(token or "", scopes=frozenset(scopes))


async def _state(client: httpx.AsyncClient, base: str, **headers: str) -> dict[str, Any]:
    response = await client.get(base + "/console/api/state", headers=headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_problems_name_failed_plugins_and_what_plugins_report_with_links() -> None:
    broken_config = {"plugins": {"console": {"poll_seconds": 0.5}}}

    class Broken:
        @mcphost.hookimpl
        def mcphost_tools(self, host: Any) -> list[Any]:
            raise RuntimeError("cannot reach db.internal:5432")

    host = make_host(("console", ConsolePlugin()), ("broken", Broken()), ("reporter", Reporter()),
                     ("raising", Raising()), config=broken_config)
    async with serve_http(host) as live, httpx.AsyncClient(timeout=10) as client:
        problems = (await _state(client, live.base))["problems"]
    by_title = {p["title"]: p for p in problems}
    assert by_title["Plugin broken failed"]["severity"] == "error"
    assert "db.internal:5432" in by_title["Plugin broken failed"]["detail"]
    assert by_title["Plugin broken failed"]["link"] == "#plugin-broken"
    held = by_title["Tool vendor_lookup awaits approval"]
    assert held == {"kind": "held", "severity": "warning", "title": "Tool vendor_lookup awaits approval",
                    "detail": "changed at https://bob:[redacted]@vendor.example/mcp", "link": "#catalog"}
    raised = by_title["Plugin raising could not report its problems"]
    assert "cannot look" in raised["detail"] and raised["link"] == "#plugin-raising"
    severities = [p["severity"] for p in problems]
    assert severities == sorted(severities, key=["error", "warning"].index)  # errors first
    assert "hunter2" not in json.dumps(problems)


async def test_refused_calls_are_counted_per_tool_and_reason_and_errors_above_normal_are_problems() -> None:
    host = make_host(("console", ConsolePlugin()), ("tools", Tools()), ("tokens", Tokens()))
    user = {"authorization": f"Bearer {USER}"}
    async with serve_http(host) as live, httpx.AsyncClient(timeout=10, headers=user) as client:
        session_id = await open_session(client, live.url)
        for arguments in ({"a": 1}, {"a": 1, "b": "two"}):  # a missing and a wrong argument
            reply = await _tool(client, live.url, session_id, "add", arguments)
            assert reply["result"]["isError"] is True
        assert (await _tool(client, live.url, session_id, "add", {"a": 1, "b": 2}))["result"].get("isError") is not True
        refused = await client.post(live.url, headers=session_headers(session_id), json={
            "jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "write_note", "arguments": {}}})
        assert refused.status_code == 403  # insufficient_scope
        for _ in range(5):
            assert (await _tool(client, live.url, session_id, "flaky", {}))["result"]["isError"] is True
        state = await _state(client, live.base, authorization=f"Bearer {ADMIN}")
    traffic = state["traffic"]
    assert traffic["add"]["refused"] == {"invalid arguments": 2}
    assert traffic["add"]["calls"] == 1  # the two refused never ran the tool
    assert traffic["write_note"]["refused"] == {"scope": 1} and traffic["write_note"]["calls"] == 0
    assert traffic["flaky"]["errors"] == 5 and traffic["flaky"]["refused"] == {}
    [errors] = [p for p in state["problems"] if p["kind"] == "errors"]
    assert errors["title"] == "Tool flaky: 100% of its calls failed" and errors["link"] == "#tool-flaky"
    assert errors["detail"] == "5 of 5 calls in the last 5 min"


async def test_a_budget_refusing_callers_is_a_problem_and_a_refused_call_counts_for_its_tool() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @mcphost.tool
    async def slow() -> str:
        """Waits for the test."""
        started.set()
        await release.wait()
        return "done"

    class Slow:
        @mcphost.hookimpl
        def mcphost_tools(self, host: Any) -> list[Any]:
            return [slow]

    config = {"server": {"max_requests_per_principal": 1}}
    host = make_host(("console", ConsolePlugin()), ("slow", Slow()), config=config)
    async with serve_http(host) as live, httpx.AsyncClient(timeout=30) as client:
        session_id = await open_session(client, live.url)
        first = asyncio.ensure_future(_tool(client, live.url, session_id, "slow", {}, request_id=3))
        await asyncio.wait_for(started.wait(), 30)
        second = await client.post(live.url, headers=session_headers(session_id), json={
            "jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "slow", "arguments": {}}})
        assert second.status_code == 429, second.text
        release.set()
        assert (await first)["result"]["content"][0]["text"] == "done"
        state = await _state(client, live.base)
    assert state["traffic"]["slow"]["refused"] == {"budget": 1}
    [budget] = [p for p in state["problems"] if p["kind"] == "budget"]
    assert budget["title"] == "Budget requests is refusing callers" and budget["link"] == "#budgets"
    assert budget["severity"] == "warning" and "server.max_requests_per_principal" in budget["detail"]


async def test_config_changes_list_what_differs_from_the_defaults_redacted() -> None:
    config = {"server": {"max_sessions_per_principal": 3, "name": "mcphost"},
              "plugins": {"console": {"poll_seconds": 0.5, "path": "/console"},
                          "redis": {"url": "redis://app:hunter2@cache.internal:6379/0"}}}
    host = make_host(("console", ConsolePlugin()), config=config)
    async with serve_http(host) as live, httpx.AsyncClient(timeout=10) as client:
        state = await _state(client, live.base)
    changes = {(c["section"], c["key"]): c for c in state["config_changes"]}
    assert changes[("server", "max_sessions_per_principal")]["value"] == 3
    assert ("server", "name") not in changes  # set, but to its default
    assert changes[("plugins.console", "poll_seconds")] == {"section": "plugins.console", "key": "poll_seconds",
                                                            "value": 0.5, "default": 1.0}
    assert ("plugins.console", "path") not in changes
    # a section no loaded plugin declares a model for: every key it sets, redacted
    assert changes[("plugins.redis", "url")]["value"] == "redis://app:[redacted]@cache.internal:6379/0"
    assert "hunter2" not in json.dumps(state)


async def test_the_budgets_table_is_paged_on_the_server() -> None:
    host = make_host(("console", ConsolePlugin()), ("tools", Tools()))
    async with serve_http(host) as live, httpx.AsyncClient(timeout=10) as client:
        for i in range(130):  # callers the ledger remembers (as refused ones are)
            host.manager.budgets.count_refusal(f"a:10.0.{i // 100}.{i % 100}", "requests")
        first = (await _state(client, live.base))["budgets"]
        assert len(first["callers"]) == 50 and first["callers_total"] == 130 and first["offset"] == 0
        page = (await client.get(live.base + "/console/api/state?budgets_offset=100")).json()["budgets"]
        assert len(page["callers"]) == 30 and page["offset"] == 100
        listed = (await client.get(live.base + "/console/api/budgets?offset=120&limit=1000")).json()
        assert len(listed["callers"]) == 10 and listed["callers_total"] == 130
        seen = {row["caller"] for row in first["callers"] + page["callers"]}
        assert len(seen) == 80


async def _tool(client: httpx.AsyncClient, url: str, session_id: str, name: str, arguments: dict[str, Any],
                request_id: int = 2) -> dict[str, Any]:
    return await session_call(client, url, session_id, "tools/call", {"name": name, "arguments": arguments},
                              request_id)
