"""2025-11-25 tasks (core protocol) in memory: the capability, and a cancel that the handler swallows.

The matrix tests (tests/interaction/test_tasks.py) cover the methods on every transport; these
need a tool of their own.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import mcphost
from mcphost.protocol.errors import McpError
from mcphost.testing import MemoryClient, make_host


class Kit:
    """A plugin serving the tools it is given."""

    def __init__(self, *tools: Any) -> None:
        self.tools = list(tools)

    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[Any]:
        return self.tools


async def test_a_2025_11_25_server_declares_tasks_only_with_a_task_tool() -> None:
    @mcphost.tool
    def plain() -> str:
        """Answers at once."""
        return "plain"

    @mcphost.tool(task="optional")
    async def long() -> str:
        """May run as a task."""
        return "long"

    for tools, declared in (([plain], False), ([plain, long], True)):
        host = make_host(("kit", Kit(*tools)))
        host.prepare()
        async with MemoryClient(host) as client:
            assert client.initialize_result is not None
            capabilities = client.initialize_result["capabilities"]
        assert ("tasks" in capabilities) is declared
        if declared:
            assert capabilities["tasks"] == {"cancel": {}, "requests": {"tools": {"call": {}}}}
        async with MemoryClient(host, protocol_version="2025-06-18") as older:
            assert older.initialize_result is not None
            assert "tasks" not in older.initialize_result["capabilities"]  # tasks came with 2025-11-25


async def test_a_cancelled_task_whose_handler_swallows_the_cancel_stays_cancelled() -> None:
    """The handler turns its cancellation into a result (as an HTTP client's call may): the task
    still ends cancelled, not completed with that result."""
    ended = asyncio.Event()

    @mcphost.tool(task="optional")
    async def stubborn() -> str:
        """Waits; a cancel becomes a result."""
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            return "finished anyway"
        finally:
            ended.set()
        return "slept"

    host = make_host(("kit", Kit(stubborn)))
    host.prepare()
    async with MemoryClient(host) as client:
        created: Any = await client.request("tools/call", {"name": "stubborn", "arguments": {}, "task": {}})
        task_id = created["task"]["taskId"]
        cancelled = await client.request("tasks/cancel", {"taskId": task_id})
        assert cancelled["status"] == "cancelled"
        await asyncio.wait_for(ended.wait(), 30)
        running = host.kernel.tasks.running  # type: ignore[union-attr]
        for _ in range(3000):  # its end is stored after the handler returns
            if task_id not in running:
                break
            await asyncio.sleep(0.01)
        assert task_id not in running
        assert (await client.request("tasks/get", {"taskId": task_id}))["status"] == "cancelled"
        with pytest.raises(McpError) as refused:
            await client.request("tasks/result", {"taskId": task_id})
        assert refused.value.code == -32800
