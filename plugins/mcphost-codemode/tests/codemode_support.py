"""Helpers for the mcphost-codemode tests: local tools, a token-per-principal auth plugin, SDK clients."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcphost_codemode import CodeModePlugin

import mcphost
from mcphost import Context
from mcphost.testing import make_host, serve_http

REPO = Path(__file__).resolve().parents[3]
MEMORY_SERVER = REPO / "tests" / "support" / "js" / "node_modules" / "@modelcontextprotocol" / "server-memory" / \
    "dist" / "index.js"
ERAS = ["legacy", "2026-07-28"]


class LocalTools:
    """Tools a program calls: plain, failing, asking the user, waiting to be cancelled, scoped, hidden."""

    def __init__(self) -> None:
        self.waiting = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.signalled = asyncio.Event()

    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        tools = self

        @mcphost.tool
        async def add(a: int, b: int) -> dict[str, int]:
            """Add two integers."""
            return {"sum": a + b}

        @mcphost.tool
        async def shout(text: str) -> str:
            """Upper-case a text."""
            return text.upper()

        @mcphost.tool
        async def fail(reason: str = "broken") -> str:
            """Always fails."""
            raise mcphost.ToolError(f"cannot do it: {reason}")

        @mcphost.tool
        async def ask_name(ctx: Context) -> str:
            """Ask the user for their name, then greet them."""
            schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
            answer = await ctx.elicit("What is your name?", schema)
            return f"hello {answer.content['name']}" if answer.accepted else "no name"

        @mcphost.tool
        async def summarize(text: str, ctx: Context) -> str:
            """Ask the client's model to summarize a text."""
            answer = await ctx.sample(f"Summarize: {text}", max_tokens=50)
            return str(answer["content"]["text"])

        @mcphost.tool
        async def signal() -> str:
            """Say that the program got this far."""
            tools.signalled.set()
            return "ok"

        @mcphost.tool
        async def wait_forever() -> str:
            """Wait until cancelled."""
            tools.waiting.set()
            try:
                await asyncio.Event().wait()
            finally:
                tools.cancelled.set()
            return "never"

        @mcphost.tool(scopes=["admin"])
        async def admin_only() -> str:
            """Needs the admin scope."""
            return "secret"

        @mcphost.tool
        async def hidden_tool() -> str:
            """Not on the code endpoint."""
            return "hidden"

        return [add, shout, fail, ask_name, summarize, signal, wait_forever, admin_only, hidden_tool]


class TokenAuth:
    """``Authorization: Bearer NAME[.SCOPE...]`` is the principal NAME with those scopes."""

    @mcphost.hookimpl
    def mcphost_authenticate(self, request: mcphost.Connection) -> mcphost.Principal | None:
        token = mcphost.bearer_token(request.headers.get("authorization"))
        if not token:
            return None
        name, *scopes = token.split(".")
        return mcphost.Principal(subject=name, scopes=frozenset(scopes))


CODE_ENDPOINT = {"discovery": "code", "exclude": {"tools": ["hidden_tool"]},
                 "code": {"time_limit": 60, "max_calls": 6, "max_output_bytes": 120}}


@contextlib.asynccontextmanager
async def serving(*plugins: Any, config: dict[str, Any] | None = None) -> AsyncIterator[Any]:
    """The local tools and code mode behind a ``code`` endpoint, over HTTP in this loop."""
    tools = LocalTools()
    config = {"endpoints": {"code": CODE_ENDPOINT}, **(config or {})}
    host = make_host(("tools", tools), ("codemode", CodeModePlugin()), *plugins, config=config)
    async with serve_http(host) as live:
        live.tools = tools
        live.code_url = live.url + "/code"
        yield live


class Recorder:
    """A client's side: answers elicitation with a name, records progress and notifications."""

    def __init__(self, name: str = "Ada") -> None:
        self.name = name
        self.asked: list[Any] = []
        self.progress: list[tuple[float, float | None, str | None]] = []

    async def elicit(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.append(params)
        return types.ElicitResult(action="accept", content={"name": self.name})

    async def sample(self, context: Any, params: Any) -> types.CreateMessageResult:
        self.asked.append(params)
        return types.CreateMessageResult(role="assistant", model="test-model",
                                         content=types.TextContent(type="text", text=f"{self.name}'s summary"))

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))

    def client(self, url: str, mode: str, token: str | None = None) -> Client:
        server: Any = url
        if token is not None:
            server = streamable_http_client(url, http_client=httpx2.AsyncClient(
                headers={"authorization": f"Bearer {token}"}, timeout=120))
        return Client(server, mode=mode, elicitation_callback=self.elicit, sampling_callback=self.sample,
                      read_timeout_seconds=120, cache=None)


def time_server() -> dict[str, Any]:
    """The official time server (``mcp-server-time`` from PyPI) over stdio, its tools unprefixed."""
    return {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"], "prefix": ""}


def memory_server(path: Path) -> dict[str, Any] | None:
    """The official memory server (``@modelcontextprotocol/server-memory`` from npm), or None without node."""
    node = shutil.which("node")
    if node is None or not MEMORY_SERVER.exists():
        return None
    return {"command": node, "args": [str(MEMORY_SERVER)], "env": {"MEMORY_FILE_PATH": str(path)}, "prefix": ""}


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)
