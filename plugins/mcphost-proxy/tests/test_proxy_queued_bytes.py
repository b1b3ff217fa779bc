"""Calls queued for an upstream process are budgeted in bytes per principal.

``questions = "own_process"`` with one process: while a call holds it, the same caller's further
calls wait in line with their arguments. Past ``[plugins.proxy] max_queued_bytes_per_principal`` the
next one is refused at once with -32000 whose message says "bytes" and names the setting, instead of
joining the queue; with no limit it joins. Real components: the official Python SDK server over
stdio, the SDK client, the host over loopback HTTP.
"""

from __future__ import annotations

import asyncio

import pytest
from proxy_support import Side, front, sdk_upstream

NO_ECHO = {"env": {"OTEL_PROPAGATORS": "none"}}
SIZE = 300_000


class Silent(Side):
    """A client that is asked and never answers: its call holds the one process."""

    async def elicit(self, context, params):
        self.elicitations.append(params)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def _until(predicate, what: str) -> None:
    for _ in range(400):
        if predicate():
            return
        await asyncio.sleep(0.025)
    raise AssertionError(what)


@pytest.mark.parametrize("limit", [500_000, 0])
async def test_queued_calls_past_the_byte_budget_are_refused(limit: int) -> None:
    silent, ada = Silent(), Side("Ada")
    table = sdk_upstream(questions="own_process", max_instances=1, **NO_ECHO)
    async with front({"sdk": table}, proxy={"max_queued_bytes_per_principal": limit}) as live, \
            silent.client(live.url, "legacy") as holder, ada.client(live.url, "legacy") as other:
        held = asyncio.ensure_future(holder.call_tool("sdk_ask_name", {}))
        await _until(lambda: silent.elicitations, "the holder was never asked")
        pool = live.plugin.upstreams["sdk"].pool
        queued = asyncio.ensure_future(other.call_tool("sdk_summarize", {"text": "x" * SIZE}))
        await _until(lambda: sum(pool.queued.held.values()) > SIZE, "the first call never queued")
        second = asyncio.ensure_future(other.call_tool("sdk_summarize", {"text": "y" * SIZE}))
        try:
            if limit:
                with pytest.raises(Exception) as refused:  # the SDK client raises its McpError
                    await asyncio.wait_for(second, 10)
                message = str(refused.value)
                assert "bytes" in message and "max_queued_bytes_per_principal" in message, message
                assert len(pool.queued.held) == 1 and sum(pool.queued.held.values()) < limit
            else:  # no limit: both wait in line
                await _until(lambda: sum(pool.queued.held.values()) > 2 * SIZE, "the second call never queued")
        finally:
            held.cancel()
            await asyncio.gather(held, return_exceptions=True)
            done = await asyncio.wait_for(asyncio.gather(queued, second, return_exceptions=True), 60)
        # The queued calls got the process once the holder let go (whatever the upstream then said).
        assert not any("max_queued_bytes" in str(result) for result in done[:1 if limit else 2]), done
        assert pool.queued.held == {}


@pytest.mark.parametrize("limit", [500_000, 0])
async def test_calls_waiting_for_a_per_session_instance_count_against_the_byte_budget(limit: int, tmp_path) -> None:
    """A per_session instance made for the caller is still starting: the calls that wait for it hold
    their arguments meanwhile, counted against the same per-principal budget as a pool's line."""
    gate = tmp_path / "gate"
    table = sdk_upstream(per_session=True, max_instances=4, env={"PROXY_TEST_START_GATE": str(gate)})
    async with front({"sdk": table}, proxy={"max_queued_bytes_per_principal": limit}) as live, \
            Side("Ada").client(live.url, "legacy") as client:
        gate.write_text("closed")  # the shared connection is up; the session's own instance will wait
        queued = live.plugin._queued
        first = asyncio.ensure_future(client.call_tool("sdk_summarize", {"text": "x" * SIZE}))
        await _until(lambda: sum(queued.held.values()) > SIZE, "the first call never waited for its instance")
        assert len(live.plugin.bound) == 1  # its own instance, starting
        second = asyncio.ensure_future(client.call_tool("sdk_summarize", {"text": "y" * SIZE}))
        try:
            if limit:
                with pytest.raises(Exception) as refused:
                    await asyncio.wait_for(second, 30)
                message = str(refused.value)
                assert "bytes" in message and "max_queued_bytes_per_principal" in message, message
                assert len(queued.held) == 1 and sum(queued.held.values()) < limit
            else:
                await _until(lambda: sum(queued.held.values()) > 2 * SIZE, "the second call never waited")
        finally:
            gate.unlink()  # the instance starts; the waiting calls go on
            done = await asyncio.wait_for(asyncio.gather(first, second, return_exceptions=True), 120)
        # The waiting calls reached the instance once it started (whatever it then said: summarize
        # asks the client to sample, which this one cannot).
        assert not any("max_queued_bytes" in str(result) for result in done[:1 if limit else 2]), done
        assert all("sampling" in str(result) for result in done[:1 if limit else 2]), done
        assert queued.held == {}
