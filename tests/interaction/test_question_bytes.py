"""Questions a principal's calls have out to their client are budgeted in bytes.

A tool asks its client a large elicitation and waits; the client does not answer yet. Past
``max_question_bytes_per_principal`` the next such question fails its call with -32000 whose
message says "bytes" and names the setting, while another principal's calls still ask; once the
client answers, the budget is free again. In-process host, real kernel and sessions.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import mcphost
from mcphost import Context
from mcphost.protocol.errors import McpError
from mcphost.sessions.session import Connection, Principal
from mcphost.testing import MemoryClient, make_host
from tests.support.modern_support import modern_call

SIZE = 300_000  # bytes of each question's message
LIMIT = 1_000_000  # three such questions fit, a fourth does not


def plugin() -> Any:
    @mcphost.tool()
    async def ask(ctx: Context, text: str) -> str:
        answer = await ctx.elicit(text, {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        return answer.action

    class Plugin:
        @mcphost.hookimpl
        def mcphost_tools(self) -> list[mcphost.Tool]:
            return [ask]

    return Plugin()


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_questions_past_the_byte_budget_are_refused(version: str) -> None:
    host = make_host(("asking", plugin()), config={"server": {"max_question_bytes_per_principal": LIMIT}})
    release = asyncio.Event()
    asked: list[dict[str, Any]] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        await release.wait()
        return {"action": "accept", "content": {"ok": True}}

    def client(subject: str) -> MemoryClient:
        return MemoryClient(host, protocol_version=version, elicitation=answer,
                            connection=Connection(transport="memory", principal=Principal(subject)))

    await host.start()
    try:
        async with client("greedy") as greedy, client("other") as other:
            assert host.kernel is not None
            budgets = host.kernel.sessions.budgets
            calls = [asyncio.ensure_future(greedy.raw_request("tools/call", {
                "name": "ask", "arguments": {"text": "x" * SIZE}})) for _ in range(3)]
            while len(asked) < 3:
                await asyncio.sleep(0.01)
            held = budgets.by_principal("question bytes")
            assert len(held) == 1 and 3 * SIZE < sum(held.values()) <= LIMIT, held

            # The fourth question of the same principal: refused, saying why.
            with pytest.raises(McpError) as refused:
                await greedy.call_tool("ask", {"text": "x" * SIZE})
            assert refused.value.code == -32000
            assert "bytes" in refused.value.message
            assert "max_question_bytes_per_principal" in refused.value.message, refused.value.message
            assert refused.value.data["budget"] == "question bytes"
            assert len(asked) == 3  # the refused question never reached the client

            # Another principal still asks.
            other_call = asyncio.ensure_future(other.call_tool("ask", {"text": "x" * SIZE}))
            while len(asked) < 4:
                await asyncio.sleep(0.01)

            release.set()
            replies = await asyncio.gather(*calls)
            assert all(r is not None and r["result"]["content"][0]["text"] == "accept" for r in replies), replies
            assert (await other_call)["content"][0]["text"] == "accept"
            assert budgets.total("question bytes") == 0

            # Answered: the same principal asks again.
            assert (await greedy.call_tool("ask", {"text": "x" * SIZE}))["content"][0]["text"] == "accept"
            assert budgets.total("question bytes") == 0
    finally:
        await host.stop()


async def test_without_the_limit_every_question_is_held() -> None:
    """The budget is what refuses: with no per-principal limit the same questions all go out."""
    host = make_host(("asking", plugin()), config={"server": {"max_question_bytes_per_principal": 0}})
    release = asyncio.Event()
    asked: list[dict[str, Any]] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        await release.wait()
        return {"action": "decline"}

    await host.start()
    try:
        async with MemoryClient(host, protocol_version="2025-11-25", elicitation=answer) as client:
            calls = [asyncio.ensure_future(client.call_tool("ask", {"text": "x" * SIZE})) for _ in range(5)]
            while len(asked) < 5:
                await asyncio.sleep(0.01)
            release.set()
            assert all(r["content"][0]["text"] == "decline" for r in await asyncio.gather(*calls))
    finally:
        await host.stop()


async def test_questions_of_parked_resumable_calls_count_too() -> None:
    """2026-07-28: a resumable call's question stays held while the call is parked; the arguments are
    small (the tool makes the large question), so the question bytes, not the parked bytes, refuse."""

    @mcphost.tool(resumable=True)
    async def parked(size: int, *, ctx: Context) -> str:
        answer = await ctx.elicit("x" * size, {"type": "object", "properties": {"ok": {"type": "boolean"}}},
                                  key="go")
        return answer.action

    class Plugin:
        @mcphost.hookimpl
        def mcphost_tools(self) -> list[mcphost.Tool]:
            return [parked]

    host = make_host(("parking", Plugin()), config={"server": {"max_question_bytes_per_principal": LIMIT}})
    await host.start()
    try:
        assert host.kernel is not None
        budgets = host.kernel.sessions.budgets
        replies = [await modern_call(host, "tools/call", {"name": "parked", "arguments": {"size": SIZE}},
                                     remote="10.0.0.1:1000") for _ in range(4)]
        assert [r.get("result", {}).get("resultType") for r in replies[:3]] == ["input_required"] * 3, replies[0]
        error = replies[3]["error"]
        assert error["code"] == -32000 and error["data"]["budget"] == "question bytes", error
        assert "bytes" in error["message"] and "max_question_bytes_per_principal" in error["message"]
        assert 3 * SIZE < budgets.total("question bytes") <= LIMIT
        assert budgets.total("parked bytes") < 1000  # the arguments were small
        # Another address still parks its question.
        other = await modern_call(host, "tools/call", {"name": "parked", "arguments": {"size": SIZE}},
                                  remote="10.0.0.2:1000")
        assert other["result"]["resultType"] == "input_required", other
    finally:
        await host.stop()
