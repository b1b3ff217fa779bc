"""``parking``: a resumable tool that keeps its (large) argument while it waits for its one
question's answer, for the parked-bytes budget test (RELIABILITY J2)."""

from __future__ import annotations

import mcphost
from mcphost import Context


@mcphost.tool(resumable=True)
async def park(payload: str, *, ctx: Context) -> str:
    """Ask to go on; the call (and ``payload``) stays parked until the retry brings the answer."""
    answer = await ctx.elicit("Go on?", {"type": "object", "properties": {"go": {"type": "boolean"}}}, key="go")
    return f"{len(payload)} {answer.action}"


@mcphost.hookimpl
def mcphost_tools(host):
    return [park]
