"""With mcphost-proxy mounting a real upstream (the official SDK's server over stdio), the page shows
the upstream running; killed, it shows it restarting (with the backoff's next try), then running
again, in a real browser."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from console_support import browser, check_png, screenshot_path
from mcp import Client
from mcphost_console import ConsolePlugin
from mcphost_proxy import ProxyPlugin
from playwright.async_api import expect

from mcphost.testing import make_host, serve_http

SDK_SERVER = Path(__file__).resolve().parents[2] / "mcphost-proxy" / "tests" / "upstreams" / "sdk_server.py"


async def test_a_killed_upstream_shows_restarting_then_running(tmp_path: Path) -> None:
    upstream = {"command": sys.executable, "args": [str(SDK_SERVER)]}
    # A backoff long enough for the page (polling every 0.3 s) to see the restart waiting.
    config = {"plugins": {"proxy": {"servers": {"sdk": upstream}, "restart_backoff": 2.5},
                          "console": {"poll_seconds": 0.3}}}
    host = make_host(("proxy", ProxyPlugin()), ("console", ConsolePlugin()), config=config)
    async with serve_http(host) as live, browser(viewport={"width": 1280, "height": 800}) as context:
        page = await context.new_page()
        await page.goto(live.base + "/console")
        row = page.locator('#upstreams-table tr[data-upstream="sdk"]')
        state = row.locator(".upstream-state .badge")
        await expect(state).to_have_text("running", timeout=20000)
        assert "stdio" in await row.inner_text() and str(SDK_SERVER) in await row.inner_text()

        async with Client(live.url, mode="legacy", read_timeout_seconds=30) as client:
            result = await client.call_tool("sdk_pid", {})
            pid = int(result.content[0].text)  # type: ignore[union-attr]
        os.kill(pid, signal.SIGKILL)  # the upstream process this test's host started

        await expect(state).to_have_text("restarting", timeout=5000)
        await expect(row.locator(".upstream-restarts")).to_have_text("1")
        await expect(row.locator(".upstream-state")).to_contain_text("next try in", timeout=2000)
        shot = screenshot_path(tmp_path, "console-upstream-restarting.png")
        await page.locator("#upstreams").screenshot(path=str(shot))  # the section stays; its rows are redrawn
        check_png(shot, 600)
        await expect(state).to_have_text("running", timeout=20000)
        await expect(row.locator(".upstream-restarts")).to_have_text("1")
        async with Client(live.url, mode="legacy", read_timeout_seconds=30) as client:
            again = await client.call_tool("sdk_pid", {})
            assert int(again.content[0].text) != pid  # type: ignore[union-attr]
