"""Helpers for the proxy tests: a front host mounting real upstream servers, served over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client
from mcphost_proxy import ProxyPlugin

from mcphost.testing import free_port, make_host, serve_http

HERE = Path(__file__).resolve().parent
SDK_SERVER = HERE / "upstreams" / "sdk_server.py"
RAW_SERVER = HERE / "upstreams" / "raw_server.py"
APPS_SERVER = HERE / "upstreams" / "apps_server.py"
REPO = HERE.parents[2]
TS_SERVER = REPO / "tests" / "support" / "js" / "upstream_server.mjs"
#: The npm @modelcontextprotocol/server-everything (pinned in tests/support/js; stdio unless told otherwise).
EVERYTHING = REPO / "tests" / "support" / "js" / "node_modules" / "@modelcontextprotocol" / "server-everything" / \
    "dist" / "index.js"


def sdk_upstream(**extra: Any) -> dict[str, Any]:
    """A [plugins.proxy.servers.X] table running the official Python SDK server over stdio."""
    return {"command": sys.executable, "args": [str(SDK_SERVER)], **extra}


def raw_upstream(tmp_path: Path, tools: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    """A [plugins.proxy.servers.X] table running tests/upstreams/raw_server.py (no SDK) with ``tools``."""
    env: dict[str, str] = {}
    if tools is not None:
        path = tmp_path / "tools.json"
        path.write_text(json.dumps(tools))
        env["RAW_TOOLS"] = str(path)
    return {"command": sys.executable, "args": [str(RAW_SERVER)], "env": env, **extra}


@contextlib.asynccontextmanager
async def sdk_http_upstream(json_response: bool = False) -> AsyncIterator[str]:
    """The official Python SDK server over Streamable HTTP, as its own process on a free port
    (``json_response``: its replies are JSON bodies, not SSE streams)."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(sys.executable, str(HERE / "upstreams" / "sdk_server.py"),
                                                   env={**os.environ, "PROXY_TEST_HTTP_PORT": str(port),
                                                        "PROXY_TEST_JSON_RESPONSE": "1" if json_response else "0"})
    try:
        for _ in range(400):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        await process.wait()


class Side:
    """The downstream client's callbacks: answers elicitation with a name, records notifications."""

    def __init__(self, name: str = "Ada") -> None:
        self.name = name
        self.elicitations: list[Any] = []
        self.notifications: list[Any] = []

    async def elicit(self, context: Any, params: Any) -> types.ElicitResult:
        self.elicitations.append(params)
        schema = getattr(params, "requested_schema", None) or {}
        wanted = schema.get("required") or ["name"]
        return types.ElicitResult(action="accept", content={key: self.name for key in wanted})

    async def on_message(self, message: Any) -> None:
        self.notifications.append(message)

    def client(self, url: str, mode: str = "legacy", read_timeout: float = 60) -> Client:
        return Client(url, mode=mode, elicitation_callback=self.elicit, message_handler=self.on_message,
                      read_timeout_seconds=read_timeout)


@contextlib.asynccontextmanager
async def front(servers: dict[str, Any], *plugins: Any, proxy: dict[str, Any] | None = None,
                server: dict[str, Any] | None = None, endpoints: dict[str, Any] | None = None) -> AsyncIterator[Any]:
    """A host mounting ``servers`` through the proxy plugin, served over HTTP in this loop."""
    plugin = ProxyPlugin()
    config = {"plugins": {"proxy": {"servers": servers, "restart_backoff": 0.2, **(proxy or {})}},
              "server": server or {}, **({"endpoints": endpoints} if endpoints else {})}
    host = make_host(("proxy", plugin), *plugins, config=config)
    async with serve_http(host) as live:
        # The host serves at once; the upstreams are mounted as they list (wait for them here).
        await plugin.wait_mounted(float((proxy or {}).get("startup_timeout", 30)))
        live.plugin = plugin
        live.host = host
        yield live

