"""The budget ledger and the fair sync pool (mcphost.budgets), in process."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from types import SimpleNamespace

import pytest

from mcphost.budgets import Budget, FairPool, Ledger, current_quota, ledger_for, sync_share
from mcphost.config import ServerSettings


def test_a_principal_is_refused_at_its_own_limit_while_others_go_on() -> None:
    ledger = Ledger([Budget("requests", "max_requests_per_principal", 5, 2, "max_requests")])
    assert ledger.try_acquire("a", "requests") is None
    assert ledger.try_acquire("a", "requests") is None
    refused = ledger.try_acquire("a", "requests")
    assert refused is not None and refused.per_principal
    assert "requests budget" in refused.message and "max_requests_per_principal = 2" in refused.message
    assert refused.data == {"budget": "requests", "perPrincipal": True, "retryAfter": 1}
    assert ledger.held("a", "requests") == 2  # a refusal takes nothing
    assert ledger.try_acquire("b", "requests") is None
    assert ledger.try_acquire("b", "requests") is None
    ledger.release("a", "requests")
    assert ledger.try_acquire("a", "requests") is None  # a slot given back is free at once


def test_the_global_limit_is_named_when_everyone_together_reaches_it() -> None:
    ledger = Ledger([Budget("tasks", "max_tasks_per_principal", 3, 2, "max_tasks")])
    for key in ("a", "a", "b"):
        assert ledger.try_acquire(key, "tasks") is None
    refused = ledger.try_acquire("c", "tasks")
    assert refused is not None and not refused.per_principal and "max_tasks = 3" in refused.message
    assert ledger.total("tasks") == 3


def test_release_never_goes_below_what_was_held() -> None:
    ledger = Ledger([Budget("subscriptions", "s", 0, 0)])
    ledger.force("a", "subscriptions", 2)
    ledger.release("a", "subscriptions", 5)
    assert ledger.held("a", "subscriptions") == 0 and ledger.total("subscriptions") == 0
    assert ledger.snapshot()["subscriptions"]["byPrincipal"] == {}


def test_default_per_principal_limits_leave_room_that_ten_principals_cannot_fill() -> None:
    settings = ServerSettings()
    ledger = ledger_for(settings)
    for budget in ledger.budgets.values():
        assert budget.per_principal * 10 < budget.total, budget
    assert settings.max_sessions_per_principal * 10 < settings.max_sessions
    assert sync_share(settings) * 10 > settings.sync_workers  # the pool is shared by turns instead
    assert sync_share(SimpleNamespace(sync_workers=4, sync_workers_per_principal=0)) == 1
    assert sync_share(SimpleNamespace(sync_workers=4, sync_workers_per_principal=9)) == 4


class _SlowShare:
    """A share that records every allowance asked for, after a turn of the loop (a round trip)."""

    ttl = 6.0

    def __init__(self) -> None:
        self.leases: list[int] = []

    async def lease(self, budget: str, key: str, want: int, need: int, limit: int, seq: int,
                    spare: int = 0) -> tuple[int, int]:
        await asyncio.sleep(0.01)
        self.leases.append(want)
        return want, 0

    async def settle(self, allowances: dict[tuple[str, str], int], seq: int) -> dict[tuple[str, str], int]:
        return {}


async def test_covers_that_overlap_a_running_lease_end_covered() -> None:
    # Two streams stored at once: the second cover comes while the first one's lease is out,
    # which covers only what was held when it began. Neither may leave the principal "over" (its
    # retention would then drop unread streams with room to spare).
    ledger = Ledger([Budget("retained bytes", "max_retained_bytes_per_principal", 10_000, 1_000,
                            "max_retained_bytes_total")])
    share = _SlowShare()
    ledger.use_share(share)

    async def store(size: int) -> None:
        ledger.force("a", "retained bytes", size)
        await ledger.cover("a", "retained bytes")

    first = asyncio.ensure_future(store(100))
    await asyncio.sleep(0)  # its lease is out
    await asyncio.gather(store(200), first)
    assert ledger.held("a", "retained bytes") == 300
    assert not ledger.over("a", "retained bytes")
    assert share.leases == [100, 300]


def _submit(pool: FairPool, key: str, fn, *args):
    context = contextvars.copy_context()
    context.run(current_quota.set, key)
    return context.run(pool.submit, fn, *args)


def test_the_fair_pool_runs_another_principals_call_while_one_holds_its_share() -> None:
    pool = FairPool(workers=4, share=1)
    release = threading.Event()
    try:
        held = [_submit(pool, "greedy", release.wait, 10) for _ in range(8)]
        time.sleep(0.2)
        assert pool.running("greedy") == 1 and pool.waiting("greedy") == 7
        started = time.monotonic()
        assert _submit(pool, "other", lambda: "answered").result(timeout=2) == "answered"
        assert time.monotonic() - started < 0.5
    finally:
        release.set()
    assert all(future.result(timeout=5) for future in held)


def test_principals_with_calls_waiting_take_turns() -> None:
    pool = FairPool(workers=1, share=1)
    order: list[str] = []
    gate = threading.Event()
    first = _submit(pool, "a", gate.wait, 5)
    futures = [_submit(pool, key, order.append, f"{key}{n}") for n in range(3) for key in ("a", "b")]
    time.sleep(0.05)
    gate.set()
    first.result(timeout=5)
    for future in futures:
        future.result(timeout=5)
    # "a" was running when the others came in, so "b" goes first; then they alternate.
    assert order == ["b0", "a0", "b1", "a1", "b2", "a2"]


def test_a_failing_call_raises_in_its_future_and_frees_the_slot() -> None:
    pool = FairPool(workers=1, share=1)
    with pytest.raises(ZeroDivisionError):
        _submit(pool, "a", lambda: 1 / 0).result(timeout=5)
    assert _submit(pool, "a", lambda: 2).result(timeout=5) == 2
    pool.shutdown(cancel_futures=True)
    with pytest.raises(RuntimeError):
        _submit(pool, "a", lambda: 3)


def test_a_caller_without_an_address_may_use_every_thread() -> None:
    """The one client of a stdio process (quota key ``a:``) has nobody to share the pool with."""
    pool = FairPool(workers=3, share=1)
    release = threading.Event()
    try:
        held = [_submit(pool, "a:", release.wait, 10) for _ in range(3)]
        time.sleep(0.1)
        assert pool.running("a:") == 3
    finally:
        release.set()
    assert all(future.result(timeout=5) for future in held)


def test_a_reserve_keeps_threads_for_principals_running_nothing() -> None:
    """8 threads, a share of 4, a reserve of 2: two greedy principals take the 6 threads outside
    the reserve, neither more than its share (4 and 2, or 3 and 3, as the threads pick up their
    work); two newcomers still start at once, each on a thread of the reserve."""
    pool = FairPool(workers=8, share=4)
    release = threading.Event()
    try:
        greedy = [_submit(pool, key, release.wait, 10) for key in ("a", "b") for _ in range(10)]
        deadline = time.monotonic() + 5
        while pool.running("a") + pool.running("b") < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # and no more than that
        running = (pool.running("a"), pool.running("b"))
        assert sum(running) == 6 and max(running) <= 4, running
        newcomers = [_submit(pool, key, lambda: "answered") for key in ("c", "d")]
        assert [future.result(timeout=2) for future in newcomers] == ["answered", "answered"]
    finally:
        release.set()
    assert all(future.result(timeout=10) for future in greedy)
