"""The console page in a real browser (Debian's Chromium, headless, driven by Playwright) against a real
``mcphost serve`` with the demo plugin and a plugin that fails to load, and a session of the official
Python SDK client. The screenshots in docs/console.md are taken here."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from console_support import BROKEN_REASON, Served, broken_distribution, browser, check_png, screenshot_path, shoot
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.async_api import expect

from tests.support.sdk_support import RecordingTransport

CLIENT = types.Implementation(name="console-browser-test", version="3.1.4")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path, plugins="demo,console,inventory,redis",
                    extra_path=broken_distribution(tmp_path / "dists"),
                    config="[plugins.console]\npoll_seconds = 0.5\n")
    yield server
    server.stop()


async def test_page_shows_plugins_sessions_and_traffic_and_ends_a_session(served: Served) -> None:
    async with browser(viewport={"width": 1280, "height": 900}) as context:
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        await page.goto(served.base + "/console")

        # Both plugins, the failure with its reason and where it happened.
        demo = page.locator('.plugin[data-plugin="demo"]')
        await demo.locator('.badge[data-state="active"]').wait_for(timeout=5000)
        broken = page.locator('.plugin[data-plugin="inventory"]')
        await broken.locator('.badge[data-state="failed"]').wait_for(timeout=5000)
        assert BROKEN_REASON in await broken.locator(".plugin-error").inner_text()
        assert "loading entry point inventory_probe" in await broken.locator(".plugin-where").inner_text()
        assert "echo" in await demo.inner_text()  # what it provides
        assert "inventory-probe 2.1.0" in await broken.inner_text()
        # Installed and allowed but not set up (no Redis URL): said so, with the setting it waits for.
        redis = page.locator('.plugin[data-plugin="redis"]')
        await expect(redis.locator(".badge")).to_have_text("not configured")
        assert "[plugins.redis] url" in await redis.locator(".plugin-wake").inner_text()
        # The catalog names each record's provider, and the search box narrows it.
        await page.locator('#catalog-table tr[data-record="echo"]').wait_for(timeout=5000)
        await page.fill("#catalog-search", "greet")
        await expect(page.locator("#catalog-table tbody tr")).to_have_count(1)
        assert "demo" in await page.locator('#catalog-table tr[data-record="greet_user"]').inner_text()
        await page.fill("#catalog-search", "")

        recorder = RecordingTransport()
        async with httpx2.AsyncClient(transport=recorder, timeout=httpx2.Timeout(30, read=60)) as http:
            client = Client(streamable_http_client(served.url, http_client=http), mode="legacy", client_info=CLIENT,
                            read_timeout_seconds=30)
            async with client:
                opened = time.monotonic()
                row = page.locator("#sessions-table tr[data-session]",
                                   has=page.locator(".client-name", has_text=CLIENT.name))
                await row.wait_for(timeout=2000)  # within 2 s of the session opening
                seen_after = time.monotonic() - opened
                assert seen_after < 2.0, seen_after
                assert "3.1.4" in await row.inner_text()
                session_id = recorder.session_ids()[0]
                assert await row.get_attribute("data-session") == session_id

                for text in ("one", "two", "three"):
                    result = await client.call_tool("echo", {"text": text})
                    assert not result.is_error
                calls = page.locator('.tool-traffic[data-tool="echo"] .tool-calls')
                await expect(calls).to_have_text("3", timeout=3000)
                await _check_chart(page, page.locator('.tool-traffic[data-tool="echo"]'), served.tmp_path)
                # The budgets panel draws every budget of the ledger for the caller: held / limit.
                budgets = page.locator("#budgets-table")
                for name in ("sessions", "requests", "tasks", "parked calls", "retained bytes", "subscriptions",
                             "sync pool"):
                    await expect(budgets.locator("thead")).to_contain_text(name)
                await expect(budgets.locator('tbody td[data-budget="sessions"]').first).to_contain_text(" / ")

                shot = screenshot_path(served.tmp_path, "console.png")
                await page.screenshot(path=str(shot), full_page=True)
                check_png(shot, 1280)
                phone = await context.new_page()
                await phone.set_viewport_size({"width": 390, "height": 844})
                await phone.goto(served.base + "/console")
                await phone.locator("#sessions-table tr[data-session]").first.wait_for(timeout=5000)
                await phone.locator("#sessions").scroll_into_view_if_needed()
                phone_shot = screenshot_path(served.tmp_path, "console-phone.png")
                await phone.screenshot(path=str(phone_shot))
                check_png(phone_shot, 390)
                await phone.close()

                # Ending it from the page (two clicks: End, then Confirm end) ends it for the client.
                await row.locator("button.end-session").click()
                await row.locator("button.end-session", has_text="Confirm end").click()
                await row.wait_for(state="detached", timeout=3000)
                with pytest.raises(Exception):  # noqa: B017 - the SDK's own error for a session that is gone
                    await client.call_tool("echo", {"text": "after"})
                statuses = [e.status for e in recorder.exchanges if e.method == "POST"]
                assert statuses[-1] == 404, statuses
        assert not errors, errors


async def _check_chart(page: Any, card: Any, tmp_path: Path) -> None:
    """A tool's traffic card: bars for its calls, and the chart's axes with their units (calls per
    10 s, the p99 latency, time from -5 min to now); its screenshot is in docs/console.md."""
    assert await card.locator("svg.chart rect").count() >= 1
    await expect(card.locator("svg.chart")).to_contain_text("calls / 10 s")
    drawn = await card.locator("svg.chart").text_content() or ""
    assert all(label in drawn for label in ("p99 latency", "\u22125 min", "now")), drawn
    shot = screenshot_path(tmp_path, "console-traffic.png")
    await shoot(page, card, shot)
    check_png(shot, 300)
