"""With mcphost-proxy mounting a real upstream (the official SDK's server over stdio), the page shows
the upstream running; killed, it shows it restarting (with the backoff's next try), then running
again, in a real browser. An upstream that exits at once is in the problems strip, on the first
screen, within 2 s."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
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


#: An upstream that exits at once, every time it is started.
CRASHING = "import sys; sys.exit(3)"


async def test_a_crash_looping_upstream_is_on_the_first_screen_within_2_s(tmp_path: Path) -> None:
    """Problems first: with the page's default poll (1 s), an upstream that exits at once is named in
    the problems strip, above the fold of a 1280x800 screen, within 2 s of the host knowing it is
    down; the upstreams table sits right under the strip, and the catalog credits the upstream."""
    servers = {"sdk": {"command": sys.executable, "args": [str(SDK_SERVER)]},
               "inventory": {"command": sys.executable, "args": ["-c", CRASHING]}}
    proxy = ProxyPlugin()
    host = make_host(("proxy", proxy), ("console", ConsolePlugin()),
                     config={"plugins": {"proxy": {"servers": servers, "restart_backoff": 0.5}}})
    async with serve_http(host) as live, browser(viewport={"width": 1280, "height": 800}) as context:
        page = await context.new_page()
        opened = time.monotonic()
        await page.goto(live.base + "/console")
        deadline = opened + 30
        while proxy.upstreams["inventory"].state != "restarting":  # the host knows it is down
            assert time.monotonic() < deadline, proxy.upstreams["inventory"].state
            await asyncio.sleep(0.01)
        down = max(opened, time.monotonic())
        problem = page.locator('#problems-list li.problem[data-kind="upstream"]', has_text="Upstream inventory")
        await problem.wait_for(state="visible", timeout=10000)
        seen_after = time.monotonic() - down
        assert seen_after < 2.0, seen_after
        await expect(problem).to_be_in_viewport(ratio=1)  # wholly on the first screen, nothing scrolled
        row = page.locator('#upstreams-table tr[data-upstream="inventory"]')
        await expect(row).to_be_in_viewport(ratio=1)
        await expect(row).to_contain_text("sys.exit(3)")

        # The problem links to its row; the catalog names the upstream a tool comes from.
        await expect(page.locator('#upstreams-table tr[data-upstream="sdk"] .upstream-state .badge')).to_have_text(
            "running", timeout=20000)
        await expect(problem).to_contain_text("crash-looping", timeout=10000)
        await expect(page.locator('#catalog-table tr[data-record="sdk_pid"] .provider')).to_contain_text(
            "sdk (upstream via proxy)", timeout=10000)
        shot = screenshot_path(tmp_path, "console-problems.png")
        await page.screenshot(path=str(shot))  # the first screen, as the operator sees it
        check_png(shot, 1280)
        await problem.locator("a.problem-title").click()
        assert page.url.endswith("#upstream-inventory")
        await expect(page.locator("#upstream-inventory")).to_be_visible()
