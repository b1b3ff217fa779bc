"""Upstream lifecycle: a killed upstream fails its in-flight call, is restarted, and serves again."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from proxy_support import front, sdk_upstream

import mcphost


def _text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def _wait_for(predicate, timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_upstream_killed_mid_call_then_restarted(side, tmp_path):
    pid_file = tmp_path / "pid"
    upstream = sdk_upstream(env={"PROXY_TEST_PID_FILE": str(pid_file)})
    async with front({"sdk": upstream}) as live, side.client(live.url) as client:
        call = asyncio.ensure_future(client.call_tool("sdk_slow", {"seconds": 60}))
        await _wait_for(pid_file.exists)
        pid = int(pid_file.read_text())
        os.kill(pid, signal.SIGKILL)  # the upstream process this test's host started
        result = await asyncio.wait_for(call, 30)
        assert result.is_error
        assert "sdk" in _text(result) and ("went away" in _text(result) or "failed" in _text(result)), _text(result)
        upstream_state = live.plugin.upstreams["sdk"]
        await _wait_for(lambda: upstream_state.restarts >= 1 and upstream_state.state == "running")
        assert _text(await client.call_tool("sdk_add", {"a": 1, "b": 1})) == "2"
        info = live.host.plugin_infos["proxy"]
        assert any("sdk (stdio: running" in line for line in info.provides["upstreams"]), info.provides


async def test_upstream_that_cannot_start_answers_a_clear_error(side):
    broken = {"command": "/nonexistent/mcp-server"}
    async with front({"gone": broken, "sdk": sdk_upstream()}, proxy={"startup_timeout": 3}) as live, \
            side.client(live.url) as client:
        # The host serves the upstreams that work.
        assert await live.plugin.upstreams["sdk"].wait_ready(30)
        assert _text(await client.call_tool("sdk_add", {"a": 1, "b": 2})) == "3"
        gone = live.plugin.upstreams["gone"]
        assert gone.state in ("restarting", "starting")
        assert gone.error
        status = next(line for line in live.host.plugin_infos["proxy"].provides["upstreams"] if line.startswith("gone"))
        assert "last error" in status


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_allow_list_from_a_connect_hook_hides_mounted_tools(side, mode):
    class Policy:
        @mcphost.hookimpl
        def mcphost_connect(self, session, request):
            session.allowed_tools = {"sdk_add"}

    async with front({"sdk": sdk_upstream()}, ("policy", Policy())) as live, side.client(live.url, mode) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {"sdk_add"}
        assert _text(await client.call_tool("sdk_add", {"a": 2, "b": 2})) == "4"
        try:
            result = await client.call_tool("sdk_slow", {"seconds": 0})
        except Exception as exc:  # the SDK raises for a JSON-RPC error
            assert "Unknown tool" in str(exc)
        else:
            raise AssertionError(f"a hidden tool was called: {result}")


async def test_lazy_upstream_starts_with_the_first_request(side):
    async with front({"py": sdk_upstream(start="lazy")}) as live:
        assert live.plugin.upstreams["py"].state == "stopped"
        assert "py_add" not in live.host.catalog.tools
        async with side.client(live.url) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "py_add" in names
            assert _text(await client.call_tool("py_add", {"a": 3, "b": 4})) == "7"
        assert live.plugin.upstreams["py"].state == "running"


def test_mcphost_plugins_shows_each_upstream(tmp_path):
    import json

    from click.testing import CliRunner

    from mcphost.cli import cli

    config = tmp_path / "mcphost.toml"
    config.write_text('[plugins.proxy.servers.files]\ncommand = "npx"\nargs = ["-y", "some-server"]\n'
                      '[plugins.proxy.servers.remote]\nurl = "https://mcp.example.com/mcp"\n')
    result = CliRunner().invoke(cli, ["--config", str(config), "plugins", "--json"],
                                env={"MCPHOST_PLUGINS": "proxy"})
    assert result.exit_code == 0, result.output
    proxy = next(plugin for plugin in json.loads(result.output) if plugin["name"] == "proxy")
    assert proxy["status"] == "active"
    assert proxy["provides"]["upstreams"] == ["files (stdio: stopped)", "remote (http: stopped)"]


async def test_a_cancelled_call_is_cancelled_at_the_upstream(side, tmp_path):
    pid_file, cancel_file = tmp_path / "pid", tmp_path / "cancelled"
    upstream = sdk_upstream(env={"PROXY_TEST_PID_FILE": str(pid_file), "PROXY_TEST_CANCEL_FILE": str(cancel_file)})
    async with front({"sdk": upstream}) as live, side.client(live.url) as client:
        call = asyncio.ensure_future(client.call_tool("sdk_slow", {"seconds": 60}))
        await _wait_for(pid_file.exists)
        call.cancel()  # the SDK client sends notifications/cancelled
        await _wait_for(cancel_file.exists)
        assert cancel_file.read_text() == "cancelled"
        assert _text(await client.call_tool("sdk_add", {"a": 1, "b": 1})) == "2"
        assert live.plugin.upstreams["sdk"].restarts == 0
