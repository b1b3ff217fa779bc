"""RELIABILITY B16: a tool running past ``[server] max_tool_seconds`` is cancelled.

Session era: the call fails with -32001; 2026-07-28: an ``isError`` result. A tool's own
TimeoutError (an HTTP client timing out inside it) is an ordinary tool failure, not the limit.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import mcphost
from mcphost.testing import MemoryClient, make_host
from tests.support.modern_support import modern_call

STOPPED: list[str] = []


class Slow:
    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        @mcphost.tool
        async def nap(seconds: float) -> str:
            """Sleep, then answer."""
            try:
                await asyncio.sleep(seconds)
            except asyncio.CancelledError:
                STOPPED.append("nap")
                raise
            return "rested"

        @mcphost.tool
        async def own_timeout() -> str:
            """Fail with a TimeoutError of its own."""
            raise TimeoutError("the upstream API did not answer")

        return [nap, own_timeout]


def host_with(limit: float) -> Any:
    return make_host(("slow", Slow()), config={"server": {"max_tool_seconds": limit}})


async def test_session_era_a_tool_past_the_limit_is_cancelled_with_32001():
    STOPPED.clear()
    async with MemoryClient(host_with(0.2)) as client:
        reply = await client.raw_request("tools/call", {"name": "nap", "arguments": {"seconds": 30}})
        assert reply["error"]["code"] == -32001 and "timed out after 0.2s" in reply["error"]["message"]
        assert STOPPED == ["nap"]  # the handler itself was cancelled
        quick = await client.raw_request("tools/call", {"name": "nap", "arguments": {"seconds": 0}})
        assert quick["result"]["content"][0]["text"] == "rested"


async def test_2026_a_tool_past_the_limit_ends_in_an_error_result():
    host = host_with(0.2)
    await host.start()
    try:
        reply = await modern_call(host, "tools/call", {"name": "nap", "arguments": {"seconds": 30}})
        assert reply["result"]["isError"] is True
        assert "timed out after 0.2s" in reply["result"]["content"][0]["text"]
    finally:
        await host.stop()


@pytest.mark.parametrize("limit", [0.2, 0])
async def test_a_tools_own_timeout_is_a_tool_failure_and_zero_means_no_limit(limit: float):
    async with MemoryClient(host_with(limit)) as client:
        own = await client.raw_request("tools/call", {"name": "own_timeout", "arguments": {}})
        assert own["result"]["isError"] is True and "internal error" in own["result"]["content"][0]["text"]
        if limit == 0:
            slow = await client.raw_request("tools/call", {"name": "nap", "arguments": {"seconds": 0.4}})
            assert slow["result"]["content"][0]["text"] == "rested"
