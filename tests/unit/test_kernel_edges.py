"""Edge cases at the kernel's boundary with handlers: odd values that must not reach the wire."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import mcphost
from tests.support.kernel_support import connected, make


async def test_non_finite_progress_is_dropped_not_sent_as_null() -> None:
    @mcphost.tool
    async def odd(*, ctx: mcphost.Context) -> str:
        await ctx.progress(math.nan)
        await ctx.progress(math.inf)
        await ctx.progress(1)
        return "ok"

    async with connected(make(odd)) as client:
        await client.call_tool("odd", {}, progress_token="t")
    assert [n["params"]["progress"] for n in client.notifications] == [1]


async def test_a_completer_returning_one_string_completes_that_string() -> None:
    @mcphost.prompt(completions={"topic": lambda value, context: "weather"})
    def ask(topic: str) -> str:
        return topic

    async with connected(make(ask)) as client:
        completion = await client.complete({"type": "ref/prompt", "name": "ask"}, "topic", "w")
    assert completion == {"values": ["weather"]}


async def test_asking_a_closed_session_fails_at_once_instead_of_waiting_for_the_timeout() -> None:
    started = asyncio.Event()
    outcome: list[Any] = []

    @mcphost.tool
    async def ask_later(*, ctx: mcphost.Context) -> str:
        started.set()
        await asyncio.sleep(0.05)
        try:
            await ctx.list_roots()
        except mcphost.ClientRequestError as exc:
            outcome.append(exc.message)
        return "done"

    host = make(ask_later, server={"client_request_timeout": 30})
    async with connected(host, roots=[]) as client:
        call = asyncio.ensure_future(client.call_tool("ask_later", {}))
        await started.wait()
        client.session.closed = True
        loop = asyncio.get_running_loop()
        begun = loop.time()
        await asyncio.wait([call], timeout=5)
        assert loop.time() - begun < 2
        client.session.closed = False
    assert outcome == ["Cannot send roots/list: the client is no longer connected"]
