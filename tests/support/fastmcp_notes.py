"""A server written for the ``fastmcp`` package (4.x), exactly as its authors write one; nothing here
knows about mcphost. ``tests/interop/test_dev.py`` serves it with ``mcphost dev`` to the official SDK client."""

from __future__ import annotations

from fastmcp import Context, FastMCP
from pydantic import BaseModel

mcp = FastMCP("notes")

NOTES = {"1": "buy milk", "2": "call Ada"}


class Confirm(BaseModel):
    ok: bool
    reason: str = ""


@mcp.tool
def add_note(text: str) -> str:
    """Add a note; returns its id."""
    key = str(len(NOTES) + 1)
    NOTES[key] = text
    return key


@mcp.tool()
async def clear_notes(ctx: Context) -> str:
    """Clear every note, after asking; reports progress and logs."""
    await ctx.info("asking before clearing")
    answer = await ctx.elicit(message="Clear every note?", response_type=Confirm)
    if answer.action != "accept" or not answer.data.ok:
        return "kept"
    total = len(NOTES)
    for done, key in enumerate(list(NOTES), start=1):
        del NOTES[key]
        await ctx.report_progress(done, total, f"cleared {key}")
    return f"cleared {total}"


@mcp.resource("notes://all", mime_type="text/plain")
def all_notes() -> str:
    """Every note, one a line."""
    return "\n".join(NOTES.values())


@mcp.resource("notes://note/{key}")
def one_note(key: str) -> str:
    """One note by id."""
    return NOTES.get(key, "")


@mcp.prompt
def summarize(topic: str) -> str:
    """Ask for a summary of the notes about a topic."""
    return f"Summarize my notes about {topic}."


if __name__ == "__main__":
    mcp.run()
