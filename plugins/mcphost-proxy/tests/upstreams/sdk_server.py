"""A small MCP server written with the official Python SDK (mcp 2.3.0's MCPServer), run over stdio.

The proxy tests mount it as an upstream (over stdio, or Streamable HTTP when ``PROXY_TEST_HTTP_PORT``
is set). ``PROXY_TEST_COUNT_FILE`` names a file where each run of
``ask_name`` appends a line, so a test can count how many times the tool really ran.
"""

from __future__ import annotations

import asyncio
import os
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import SamplingMessage, TextContent
from pydantic import BaseModel

server = MCPServer("sdk-upstream")


class Name(BaseModel):
    name: str


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool()
def pid() -> int:
    """The upstream process id (per_session tests tell connections apart by it)."""
    return os.getpid()


@server.tool()
async def ask_name(ctx: Context) -> str:
    """Ask the user for a name mid-call."""
    path = os.environ.get("PROXY_TEST_COUNT_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write("run\n")
    answer = await ctx.elicit("What is your name?", Name)
    if answer.action == "accept":
        return f"Hello, {answer.data.name}!"
    return f"no name ({answer.action})"


@server.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Report progress, log, then sleep."""
    await ctx.report_progress(1, 2, "started")
    await ctx.info("sleeping")
    path = os.environ.get("PROXY_TEST_PID_FILE")
    if path:
        with open(path, "w", encoding="utf-8") as file:
            file.write(str(os.getpid()))
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        cancelled = os.environ.get("PROXY_TEST_CANCEL_FILE")
        if cancelled:
            with open(cancelled, "w", encoding="utf-8") as file:
                file.write("cancelled")
        raise
    return "slept"


@server.tool()
def big(mib: float) -> str:
    """A reply of ``mib`` MiB."""
    return "x" * int(mib * 1024 * 1024)


@server.tool()
async def summarize(text: str, ctx: Context) -> str:
    """Ask the client's model (sampling) mid-call, as the SDK's own examples do."""
    result = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=text))], max_tokens=50)
    content = result.content
    return f"sampled: {content.text if isinstance(content, TextContent) else content}"


@server.tool()
async def roots(ctx: Context) -> str:
    """The client's roots, asked mid-call (roots/list)."""
    result = await ctx.session.list_roots()
    return ",".join(str(root.uri) for root in result.roots)


@server.tool()
async def touch(ctx: Context) -> str:
    """Tell subscribers that sdk://motd changed (2026-07-28 listen streams; session-era subscribers
    of this server hear nothing: MCPServer has no resources/subscribe)."""
    await ctx.notify_resource_updated("sdk://motd")
    return "touched"


@server.prompt()
def greet(name: str) -> str:
    """A greeting prompt."""
    return f"Say hello to {name}"


@server.resource("sdk://motd")
def motd() -> str:
    """Message of the day."""
    return "hello from the SDK"


if __name__ == "__main__":
    # PROXY_TEST_START_GATE=PATH: a process started while PATH exists waits for it to go before serving
    # (instances started after a test made the file stay starting, their callers waiting for them).
    gate = os.environ.get("PROXY_TEST_START_GATE")
    while gate and os.path.exists(gate):
        time.sleep(0.05)
    port = os.environ.get("PROXY_TEST_HTTP_PORT")
    if port:  # Streamable HTTP (session era) at http://127.0.0.1:PORT/mcp
        # PROXY_TEST_JSON_RESPONSE=1: every reply a JSON body instead of an SSE stream.
        server.run("streamable-http", host="127.0.0.1", port=int(port),
                   json_response=os.environ.get("PROXY_TEST_JSON_RESPONSE") == "1")
    else:
        server.run("stdio")
