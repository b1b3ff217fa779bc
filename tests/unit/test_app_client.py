"""``mcphost.testing.app_client`` and ``running_app``: the real ASGI app in process, its lifespan
around the block, HTTP requests through httpx's ASGI transport (no socket, no process)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import mcphost
from mcphost.testing import app_client, make_host, running_app

ACCEPT = "application/json, text/event-stream"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "t", "version": "1"}}}


class Recorder:
    """Records the startup and shutdown hooks; serves one tool."""

    def __init__(self) -> None:
        self.events: list[str] = []

    @mcphost.hookimpl
    def mcphost_startup(self, host: Any) -> None:
        self.events.append("startup")

    @mcphost.hookimpl
    def mcphost_shutdown(self, host: Any) -> None:
        self.events.append("shutdown")

    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        return [mcphost.tool(name="shout", description="Upper-case the text.")(lambda text: text.upper())]


async def test_the_lifespan_runs_around_the_block_and_requests_reach_the_app() -> None:
    recorder = Recorder()
    host = make_host(recorder)
    async with app_client(host) as client:
        assert recorder.events == ["startup"] and host.started
        assert client.app.host is host  # type: ignore[attr-defined]
        live = await client.get("/healthz")
        ready = await client.get("/readyz")
        assert (live.status_code, live.json()) == (200, {"status": "ok"})
        assert (ready.status_code, ready.json()) == (200, {"status": "ready", "backend": "memory"})
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "shout", "arguments": {"text": "hi"},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}}
        answer = await client.post("/mcp", json=call, headers={
            "accept": ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "shout"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"]["content"] == [{"type": "text", "text": "HI"}]
    assert recorder.events == ["startup", "shutdown"] and not host.started


async def test_a_config_mapping_is_served_by_the_installed_plugins_and_a_session_answers_over_sse() -> None:
    async with app_client({"server": {"log_level": "warning"}, "plugins": {"allow": ["demo"]}}) as client:
        opened = await client.post("/mcp", json=INITIALIZE, headers={"accept": ACCEPT})
        assert opened.status_code == 200 and opened.headers["content-type"].startswith("text/event-stream")
        [reply] = [json.loads(line[6:]) for line in opened.text.splitlines() if line.startswith("data: {")]
        assert reply["result"]["protocolVersion"] == "2025-11-25"
        assert opened.headers["mcp-session-id"]


async def test_the_host_header_check_applies() -> None:
    async with app_client({"server": {"log_level": "warning"}}, base_url="http://evil.example") as client:
        refused = await client.post("/mcp", json=INITIALIZE, headers={"accept": ACCEPT})
    assert refused.status_code == 421, refused.text
    assert "invalid Host header" in refused.json()["error"]["message"]


async def test_a_failed_startup_raises_with_its_message_and_the_block_never_runs() -> None:
    class Broken:
        @mcphost.hookimpl
        def mcphost_startup(self, host: Any) -> None:
            raise RuntimeError("no store today")

    with pytest.raises(RuntimeError, match="lifespan startup failed: no store today"):
        async with running_app(make_host(Broken())):
            pytest.fail("the block ran although startup failed")
