"""Helpers for the mcphost-console tests: a real ``mcphost serve``, a plugin that fails to load, and
Debian's Chromium driven headless by Playwright (``scripts/ensure-tools`` installs it)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

from mcphost.testing import ServeProcess
from tests.support.browser import browser, chromium  # noqa: F401  (the console tests import them from here)
from tests.support.fixtures.distributions import make_distribution

MCPHOST = Path(sys.executable).parent / "mcphost"
REPO = Path(__file__).resolve().parents[3]
#: Where the screenshots for docs/console.md go: the browser tests always take them, and write them
#: there with MCPHOST_UPDATE_SCREENSHOTS=1 (so that a test run leaves the work tree as it was).
ASSETS = REPO / "docs" / "assets"
UPDATE_SCREENSHOTS = "MCPHOST_UPDATE_SCREENSHOTS"


def screenshot_path(tmp_path: Path, name: str) -> Path:
    """Where to write screenshot ``name``: docs/assets when asked to update them, else ``tmp_path``."""
    folder = ASSETS if os.environ.get(UPDATE_SCREENSHOTS) == "1" else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def check_png(path: Path, min_width: int) -> None:
    """``path`` is a PNG at least ``min_width`` pixels wide (a real screenshot, not an empty file)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    assert int.from_bytes(data[16:20], "big") >= min_width, path


async def shoot(page: Any, locator: Any, path: Path) -> None:
    """A screenshot of what ``locator`` shows, taken by its place on the page (the page redraws a
    section when its data changes, so the element itself may be replaced while it is taken)."""
    deadline = time.monotonic() + 30
    box = await locator.bounding_box()
    while box is None:
        assert time.monotonic() < deadline, f"{locator} never showed"
        await asyncio.sleep(0.05)
        box = await locator.bounding_box()
    await page.screenshot(path=str(path), clip=box)


#: What the failing plugin's import raises: the page must show it.
BROKEN_REASON = "cannot reach the inventory database at db.internal:5432"
BROKEN_MODULE = f"""
import mcphost

raise RuntimeError({BROKEN_REASON!r})
"""


def broken_distribution(root: Path) -> Path:
    """A fake installed distribution whose ``mcphost`` entry point raises on import; returns the
    folder to put on ``PYTHONPATH``."""
    make_distribution(root, "inventory-probe", "2.1.0", {"inventory": "inventory_probe"},
                      {"inventory_probe": BROKEN_MODULE})
    return root


class Served(ServeProcess):
    """``mcphost serve`` on a free loopback port (``plugins``: the allow list)."""

    def __init__(self, tmp_path: Path, *, plugins: str, config: str = "", extra_path: Path | None = None) -> None:
        self.tmp_path = tmp_path
        super().__init__(tmp_path, config, plugins=plugins, extra_path=extra_path)
