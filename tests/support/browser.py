"""Debian's Chromium driven headless by Playwright (``scripts/ensure-tools`` installs it), for the tests
that need a real browser (the console's page, CORS, an OAuth sign-in)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator
from typing import Any

import pytest


def chromium() -> str:
    """The system Chromium; the test is skipped where it is missing (``scripts/ensure-tools`` installs it)."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no system chromium (scripts/ensure-tools installs Debian's)")


@contextlib.asynccontextmanager
async def browser(**context: Any) -> AsyncIterator[Any]:
    """A fresh headless Chromium context (``context``: Playwright's new_context options)."""
    from playwright.async_api import async_playwright

    executable = chromium()
    async with async_playwright() as playwright:
        # --no-sandbox: the tests run as root in CI, where Chromium's sandbox refuses to start.
        launched = await playwright.chromium.launch(executable_path=executable, headless=True,
                                                    args=["--no-sandbox", "--disable-gpu"])
        try:
            yield await launched.new_context(**context)
        finally:
            await launched.close()
