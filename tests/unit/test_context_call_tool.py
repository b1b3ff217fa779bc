"""``ctx.call_tool``: a tool calls another tool as its caller, through the same path as a direct call."""

from __future__ import annotations

from typing import Any

import pytest

import mcphost
from mcphost import Context
from mcphost.testing import MemoryClient, make_host


class Tools:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        tools = self

        @mcphost.tool
        async def double(n: int) -> dict[str, int]:
            """Twice n."""
            return {"value": 2 * n}

        @mcphost.tool
        async def ask(ctx: Context) -> str:
            """Ask the user for a colour."""
            await ctx.progress(1)  # a called tool's progress is not sent: its caller reports its own
            answer = await ctx.elicit("Colour?", {"type": "object", "properties": {"colour": {"type": "string"}}})
            return str(answer.content["colour"])

        @mcphost.tool
        async def relay(name: str, arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
            """Call another tool and hand back its result."""
            await ctx.progress(1, message="relaying")
            try:
                return await ctx.call_tool(name, arguments)
            except mcphost.McpError as exc:
                return {"refused": exc.message}

        @mcphost.middleware
        async def record(request: Any, call_next: Any) -> Any:
            tools.seen.append(request.name)
            return await call_next(request)

        self.middleware = record
        return [double, ask, relay]

    @mcphost.hookimpl
    def mcphost_middleware(self, host: Any) -> list[mcphost.Middleware]:
        return [self.middleware]


async def test_a_tool_calls_another_as_its_caller_through_validation_and_middleware():
    tools = Tools()
    host = make_host(("tools", tools))
    await host.start()
    try:
        answer = {"action": "accept", "content": {"colour": "teal"}}
        async with MemoryClient(host, elicitation=lambda params: answer) as client:
            called = await client.call_tool("relay", {"name": "double", "arguments": {"n": 21}})
            assert called["structuredContent"] == {"content": [{"type": "text", "text": '{"value":42}'}],
                                                   "structuredContent": {"value": 42}}
            invalid = await client.call_tool("relay", {"name": "double", "arguments": {"n": "many"}})
            assert invalid["structuredContent"]["isError"] is True
            assert "Invalid arguments for tool 'double'" in invalid["structuredContent"]["content"][0]["text"]
            unknown = await client.call_tool("relay", {"name": "nowhere", "arguments": {}})
            assert unknown["structuredContent"] == {"refused": "Unknown tool: nowhere"}
            asked = await client.call_tool("relay", {"name": "ask", "arguments": {}}, progress_token="p")
            assert asked["structuredContent"]["content"][0]["text"] == "teal"
            progress = [m["params"] for m in client.notifications if m["method"] == "notifications/progress"]
            assert [p.get("message") for p in progress] == ["relaying"]
    finally:
        await host.stop()
    # The middleware saw each inner call as a call of its own, after the outer one.
    called = [name for name in tools.seen if name is not None]
    assert called[:2] == ["relay", "double"]
    assert "nowhere" in called and "ask" in called


@pytest.mark.parametrize("discovery", ["list", "search"])
def test_only_code_endpoints_select_the_code_mode_execute(discovery):
    from mcphost.endpoints import CODE_META, endpoints_from_dict
    from mcphost.kernel.views import _select

    class Entry:
        def __init__(self, name: str, meta: dict[str, Any] | None = None) -> None:
            self.record = type("Record", (), {"provenance": None, "name": name, "meta": meta})()

    class Catalog:
        tools = {"execute": Entry("execute", {CODE_META: True}), "other": Entry("other")}

    class Plain:  # a tool that happens to be called execute is an ordinary tool
        tools = {"execute": Entry("execute"), "other": Entry("other")}

    settings = endpoints_from_dict({"a": {"discovery": discovery}, "c": {"discovery": "code"}}, "/mcp", "test")
    assert set(_select(settings["a"], Catalog, "tools")) == {"other"}  # type: ignore[arg-type]
    assert set(_select(settings["c"], Catalog, "tools")) == {"execute", "other"}  # type: ignore[arg-type]
    assert set(_select(settings["a"], Plain, "tools")) == {"execute", "other"}  # type: ignore[arg-type]
