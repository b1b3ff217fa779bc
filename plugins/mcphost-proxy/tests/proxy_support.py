"""Helpers for the proxy tests: a front host mounting real upstream servers, served over HTTP."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client
from mcphost_proxy import ProxyPlugin

from mcphost.testing import make_host, serve_http

HERE = Path(__file__).resolve().parent
SDK_SERVER = HERE / "upstreams" / "sdk_server.py"
REPO = HERE.parents[2]
TS_SERVER = REPO / "tests" / "support" / "js" / "upstream_server.mjs"


def sdk_upstream(**extra: Any) -> dict[str, Any]:
    """A [plugins.proxy.servers.X] table running the official Python SDK server over stdio."""
    return {"command": sys.executable, "args": [str(SDK_SERVER)], **extra}


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

    def client(self, url: str, mode: str = "legacy") -> Client:
        return Client(url, mode=mode, elicitation_callback=self.elicit, message_handler=self.on_message,
                      read_timeout_seconds=60)


@contextlib.asynccontextmanager
async def front(servers: dict[str, Any], *plugins: Any, proxy: dict[str, Any] | None = None,
                server: dict[str, Any] | None = None) -> AsyncIterator[Any]:
    """A host mounting ``servers`` through the proxy plugin, served over HTTP in this loop."""
    plugin = ProxyPlugin()
    config = {"plugins": {"proxy": {"servers": servers, "restart_backoff": 0.2, **(proxy or {})}},
              "server": server or {}}
    host = make_host(("proxy", plugin), *plugins, config=config)
    async with serve_http(host) as live:
        # The host serves at once; the upstreams are mounted as they list (wait for them here).
        await plugin.wait_mounted(float((proxy or {}).get("startup_timeout", 30)))
        live.plugin = plugin
        live.host = host
        yield live

