"""The tasks-extension fixtures (2026-07-28, ``io.modelcontextprotocol/tasks``).

Each is an ordinary tool with a ``task`` declaration. A client that declared the extension gets
a CreateTaskResult once the call becomes a task: when the handler calls ``ctx.start_task()``,
or runs past the host's ``task_after``, or (``task="required"``) finishes. Questions asked
before that are input-required rounds; questions asked after it park the task in
``input_required`` until ``tasks/update`` answers them.
"""

from __future__ import annotations

import asyncio

import mcphost
from mcphost import Context, ToolError
from mcphost.protocol.errors import INTERNAL_ERROR
from mcphost_conformance.stateless import CONFIRM_SCHEMA, NAME_SCHEMA

__all__ = ["TASK_TOOLS"]


@mcphost.tool(name="greet", annotations={"readOnlyHint": True})
async def greet(name: str) -> str:
    """Greet someone synchronously (never a task): "Hello, <name>!"."""
    return f"Hello, {name}!"


@mcphost.tool(name="slow_compute", task="optional")
async def slow_compute(seconds: float = 1.0, label: str = "compute") -> str:
    """Sleep ``seconds`` (0 answers at once), then report; runs as a task when it takes a while."""
    if seconds < 0 or seconds > 3600:
        raise ToolError("seconds must be between 0 and 3600")
    await asyncio.sleep(seconds)
    return f"{label}: computed after {seconds:g}s"


@mcphost.tool(name="failing_job", task="required")
async def failing_job() -> str:
    """Work for about a second, then fail with a tool error (isError); runs only as a task."""
    await asyncio.sleep(1.0)
    raise ToolError("failing_job failed on purpose")


@mcphost.tool(name="protocol_error_job", task="optional")
async def protocol_error_job(*, ctx: Context) -> str:
    """Become a task, then fail with a protocol-level (JSON-RPC) error: the task ends failed."""
    await ctx.start_task()
    await asyncio.sleep(0.1)
    raise mcphost.McpError(INTERNAL_ERROR, "protocol_error_job hit an internal error on purpose")


@mcphost.tool(name="confirm_delete", task="optional")
async def confirm_delete(filename: str, *, ctx: Context) -> str:
    """Become a task, ask the user to confirm deleting ``filename`` (elicitation), report the outcome."""
    await ctx.start_task()
    answer = await ctx.elicit(f"Delete {filename}?", CONFIRM_SCHEMA)
    if answer.accepted and (answer.content or {}).get("confirm") is True:
        return f"Deleted {filename}"
    return f"Kept {filename} (action={answer.action})"


@mcphost.tool(name="multi_input", task="optional")
async def multi_input(*, ctx: Context) -> str:
    """Become a task and ask two questions at once (name, confirmation); both must be answered."""
    await ctx.start_task()
    name, confirm = await asyncio.gather(ctx.elicit("What is your name?", NAME_SCHEMA),
                                         ctx.elicit("Shall I go on?", CONFIRM_SCHEMA))
    return (f"name={(name.content or {}).get('name')!s} "
            f"confirm={(confirm.content or {}).get('confirm')!s}")


@mcphost.tool(name="test_tool_with_task", task="required")
async def tool_with_task(*, ctx: Context) -> str:
    """Ask the user's name first (an input-required round, key "user_name"), then answer as a task."""
    answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    name = (answer.content or {}).get("name") if answer.accepted else None
    return f"Hello, {name}! (answered from a task)" if name else f"No name given (action={answer.action})."


TASK_TOOLS = (greet, slow_compute, failing_job, protocol_error_job, confirm_delete, multi_input, tool_with_task)
