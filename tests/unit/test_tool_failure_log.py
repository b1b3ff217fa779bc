"""A tool that keeps failing logs its traceback once per place and a short line for each repeat."""

from __future__ import annotations

import logging

import mcphost
from mcphost.kernel import handlers
from mcphost.testing import MemoryClient, make_host


@mcphost.tool
def broken(where: str) -> str:
    """Fails at one of two places."""
    if where == "a":
        raise RuntimeError("first place")
    raise ValueError("second place")


class Failing:
    @mcphost.hookimpl
    def mcphost_tools(self, host):
        return [broken]


async def test_a_repeated_failure_logs_its_traceback_once_per_place(caplog, monkeypatch):
    monkeypatch.setattr(handlers, "_tracebacks", {})
    host = make_host(Failing())
    caplog.set_level(logging.ERROR, logger="mcphost.kernel")
    async with MemoryClient(host) as client:
        for where in ("a", "a", "a", "b", "b"):
            result = await client.call_tool("broken", {"where": where})
            assert result["isError"] and "internal error" in result["content"][0]["text"]
    records = [r for r in caplog.records if "broken" in r.getMessage()]
    assert len(records) == 5  # every failure is logged
    with_traceback = [r for r in records if r.exc_info]
    assert [type(r.exc_info[1]) for r in with_traceback] == [RuntimeError, ValueError]  # once per place
    assert sum("again at the same place" in r.getMessage() for r in records) == 3


async def test_the_traceback_is_logged_again_once_the_interval_passed(caplog, monkeypatch):
    monkeypatch.setattr(handlers, "_tracebacks", {})
    monkeypatch.setattr(handlers, "TRACEBACK_EVERY", 0.0)
    host = make_host(Failing())
    caplog.set_level(logging.ERROR, logger="mcphost.kernel")
    async with MemoryClient(host) as client:
        for _ in range(3):
            await client.call_tool("broken", {"where": "a"})
    assert sum(1 for r in caplog.records if r.exc_info) == 3
