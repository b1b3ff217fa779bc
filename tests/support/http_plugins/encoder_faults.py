"""Handlers that hand the host what JSON cannot carry, and an SDK-style elicitation with a model class.

Served by ``mcphost dev`` (HTTP and stdio) in ``tests/interop/test_encoder_faults.py``: each fault
must become that call's ``-32603`` error, and the connection must go on serving.
"""

from __future__ import annotations

from pydantic import BaseModel

import mcphost
from mcphost import Context


class Name(BaseModel):
    name: str


@mcphost.tool()
async def greet(ctx: Context) -> str:
    """Ask for a name with a pydantic model class, as the official SDK and FastMCP do."""
    answer = await ctx.elicit(message="What is your name?", schema=Name)
    if answer.action == "accept":
        return f"Hello, {answer.data.name}!"
    return f"no name ({answer.action})"


@mcphost.tool()
def odd_meta() -> mcphost.ToolResult:
    """A result whose _meta holds a set."""
    return mcphost.ToolResult(content=[{"type": "text", "text": "hi"}], meta={"tags": {"a", "b"}})


@mcphost.tool()
async def odd_log(ctx: Context) -> str:
    """A log message whose data holds a set."""
    await ctx.log("info", {"tags": {"a"}})
    return "logged"


@mcphost.tool()
def fine() -> str:
    """Answers normally."""
    return "fine"


@mcphost.hookimpl
def mcphost_tools() -> list[mcphost.Tool]:
    return [greet, odd_meta, odd_log, fine]
