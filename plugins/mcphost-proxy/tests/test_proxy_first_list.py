"""A host whose tools all come from upstreams, at the default settings (startup_wait = 0): the
official SDK client's first tools/list after initialize succeeds, and list_changed follows the mount."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from pathlib import Path

import mcp_types as types
import pytest
from mcphost_proxy import ProxyPlugin
from proxy_support import SDK_SERVER, Side, front

from mcphost.testing import make_host, serve_http


def _gated(gate) -> dict[str, object]:
    """The SDK upstream, started only once ``gate`` exists (so the client surely lists before it mounts)."""
    script = f"while [ ! -e {shlex.quote(str(gate))} ]; do sleep 0.02; done; " \
             f"exec {shlex.quote(sys.executable)} {shlex.quote(str(SDK_SERVER))}"
    return {"command": "sh", "args": ["-c", script]}


class Listening(Side):
    def __init__(self) -> None:
        super().__init__()
        self.tools_changed = asyncio.Event()

    async def on_message(self, message) -> None:
        await super().on_message(message)
        if isinstance(message, types.ToolListChangedNotification):
            self.tools_changed.set()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_first_list_before_any_upstream_mounted(tmp_path, mode):
    gate = tmp_path / "go"
    plugin = ProxyPlugin()
    host = make_host(("proxy", plugin), config={"plugins": {"proxy": {"servers": {"sdk": _gated(gate)}}}})
    side = Listening()
    async with serve_http(host) as live, side.client(live.url, mode) as client:
        assert not host.catalog.tools  # nothing mounted yet: the upstream waits for the gate
        capabilities = client.server_capabilities
        assert capabilities is not None
        assert capabilities.tools is not None and capabilities.tools.list_changed
        assert capabilities.resources is not None and capabilities.prompts is not None
        assert (await client.list_tools()).tools == []
        assert (await client.list_prompts()).prompts == []
        assert (await client.list_resources()).resources == []
        gate.touch()
        assert await plugin.wait_mounted(30)
        if mode == "legacy":  # session era: the notification comes on the session's GET stream
            await asyncio.wait_for(side.tools_changed.wait(), 30)
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "sdk_add" in names


async def test_host_without_upstreams_declares_no_tools():
    """The proxy with no server configured promises nothing."""
    host = make_host(("proxy", ProxyPlugin()), config={"plugins": {"proxy": {"servers": {}}}})
    async with serve_http(host):
        assert "tools" not in host.catalog.capabilities()


@pytest.mark.filterwarnings("error::mcp.MCPDeprecationWarning")
async def test_a_clean_start_warns_of_nothing_and_roots_outside_any_call_are_none(tmp_path):
    """Many servers ask for roots once initialized, at the host's start: no call is in flight and no
    client can be asked, so the answer is no roots (an error was logged by them at every clean start).
    Starting a session-era upstream gives no MCPDeprecationWarning (made an error here: the upstream
    would not mount)."""
    answer = tmp_path / "roots.json"
    raw = {"command": sys.executable, "args": [str(Path(__file__).parent / "upstreams" / "raw_server.py")],
           "env": {"RAW_ROOTS": str(answer)}}
    async with front({"raw": raw}) as live:
        assert "raw_echo" in live.host.catalog.tools
        for _ in range(600):
            if answer.exists() and answer.read_text():
                break
            await asyncio.sleep(0.05)
    reply = json.loads(answer.read_text())
    assert reply.get("result") == {"roots": []}, reply
