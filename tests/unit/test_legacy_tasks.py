"""2025-11-25 tasks (core protocol) in memory: the capability, a cancel that the handler swallows, and
questions a task asks (they travel on the client's tasks/result).

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


CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
RELATED = "io.modelcontextprotocol/related-task"


async def _status(client: MemoryClient, task_id: str, wanted: str) -> dict[str, Any]:
    for _ in range(3000):
        task = await client.request("tasks/get", {"taskId": task_id})
        if task["status"] == wanted:
            return task
        await asyncio.sleep(0.01)
    raise AssertionError(f"the task is still {task['status']}, not {wanted}")


async def test_a_2025_11_25_task_asks_its_questions_on_the_clients_tasks_result() -> None:
    """The task parks in input_required; nothing is sent until the client calls tasks/result, which
    carries each question (tagged with the related-task _meta) and brings the answer to the task."""

    @mcphost.tool(task="optional")
    async def confirm(*, ctx: mcphost.Context) -> str:
        """Asks twice, then reports the answers."""
        first = await ctx.elicit("Go on?", CONFIRM)
        roots = await ctx.list_roots()
        return f"ok={(first.content or {}).get('ok')} roots={[root['name'] for root in roots]}"

    host = make_host(("kit", Kit(confirm)))
    host.prepare()
    answers = {"action": "accept", "content": {"ok": True}}
    async with MemoryClient(host, elicitation=lambda params: answers,
                            roots=[{"uri": "file:///home/ada", "name": "Ada"}]) as client:
        created: Any = await client.request("tools/call", {"name": "confirm", "arguments": {}, "task": {}})
        task_id = created["task"]["taskId"]
        await _status(client, task_id, "input_required")
        assert client.server_requests == []  # its request ended: the question waits for tasks/result
        result = await client.request("tasks/result", {"taskId": task_id})
        assert result["content"][0]["text"] == "ok=True roots=['Ada']"
        assert result["_meta"][RELATED] == {"taskId": task_id}
        assert [request["method"] for request in client.server_requests] == ["elicitation/create", "roots/list"]
        for request in client.server_requests:
            assert request["params"]["_meta"][RELATED] == {"taskId": task_id}
        assert (await client.request("tasks/get", {"taskId": task_id}))["status"] == "completed"


async def test_a_question_the_client_refuses_reaches_the_task_as_an_error_and_a_cancel_ends_a_waiting_task() -> None:
    """The client's error answer is the handler's ClientRequestError; a task left waiting for an answer
    (its client never calls tasks/result) is still cancelled by tasks/cancel."""
    seen: list[str] = []

    @mcphost.tool(task="optional")
    async def sample(*, ctx: mcphost.Context) -> str:
        """Asks for a sample; reports the client's refusal."""
        try:
            await ctx.sample([{"role": "user", "content": {"type": "text", "text": "hi"}}], max_tokens=5)
        except mcphost.ClientRequestError as exc:
            seen.append(exc.message)
            return f"refused: {exc.code}"
        return "sampled"

    def refuse(params: dict[str, Any]) -> Any:
        raise McpError(-1, "The user said no")

    host = make_host(("kit", Kit(sample)))
    host.prepare()
    async with MemoryClient(host, sampling=refuse) as client:
        created: Any = await client.request("tools/call", {"name": "sample", "arguments": {}, "task": {}})
        task_id = created["task"]["taskId"]
        result = await client.request("tasks/result", {"taskId": task_id})
        assert result["content"][0]["text"] == "refused: -1" and seen == ["The user said no"]
        # Left waiting: cancelled while input_required, it ends cancelled and asks nothing more.
        waiting: Any = await client.request("tools/call", {"name": "sample", "arguments": {}, "task": {}})
        await _status(client, waiting["task"]["taskId"], "input_required")
        cancelled = await client.request("tasks/cancel", {"taskId": waiting["task"]["taskId"]})
        assert cancelled["status"] == "cancelled"
        assert len(client.server_requests) == 1
