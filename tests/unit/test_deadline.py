"""mcphost.deadline: asyncio.timeout's behaviour from one sweep timer per loop."""

from __future__ import annotations

import asyncio
import contextvars
import time

import pytest

from mcphost.deadline import (
    RESOLUTION,
    HookCancelled,
    HookOverran,
    abandoned,
    bounded,
    deadline,
    detachable,
    settle_abandoned,
)


async def stubborn(release: asyncio.Event, swallowed: list[int] | None = None) -> str:
    """A call with the bug these tests are about: it catches its cancellation and carries on (noting
    each in ``swallowed``) until ``release`` is set."""
    while not release.is_set():
        try:
            await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            if swallowed is not None:
                swallowed.append(1)
    return "late"


async def test_a_block_past_its_deadline_raises_timeout_in_time() -> None:
    started = time.monotonic()
    limited = deadline(0.1)
    with pytest.raises(TimeoutError):
        with limited:
            await asyncio.sleep(5)
    took = time.monotonic() - started
    assert limited.expired()
    assert 0.1 <= took < 0.1 + RESOLUTION + 0.1


async def test_a_block_that_finishes_in_time_is_untouched_and_leaves_nothing_armed() -> None:
    limited = deadline(1)
    with limited:
        await asyncio.sleep(0.01)
    assert not limited.expired()
    # The task is not cancelled later by a deadline that was left behind.
    await asyncio.sleep(1.2)
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_no_limit_never_fires() -> None:
    limited = deadline(None)
    with limited:
        await asyncio.sleep(0.01)
    assert not limited.expired()


async def test_a_cancellation_from_elsewhere_propagates_unchanged() -> None:
    async def guarded() -> None:
        with deadline(10):
            await asyncio.sleep(5)

    task = asyncio.ensure_future(guarded())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_inner_deadline_of_two_nested_blocks_is_the_one_that_fires() -> None:
    outer, inner = deadline(5), deadline(0.05)
    with outer:
        with pytest.raises(TimeoutError):
            with inner:
                await asyncio.sleep(5)
        await asyncio.sleep(0.01)  # the outer block goes on
    assert inner.expired() and not outer.expired()


async def test_many_blocks_each_fire_at_their_own_deadline() -> None:
    async def guarded(seconds: float) -> float:
        started = time.monotonic()
        try:
            with deadline(seconds):
                await asyncio.sleep(5)
        except TimeoutError:
            return time.monotonic() - started
        raise AssertionError("not timed out")

    limits = [0.05, 0.2, 0.1, 0.3]
    took = await asyncio.gather(*(guarded(s) for s in limits))
    for limit, spent in zip(limits, took, strict=True):
        assert limit <= spent < limit + RESOLUTION + 0.1


def test_entering_outside_a_task_is_an_error() -> None:
    async def make() -> object:
        return deadline(1)

    loop = asyncio.new_event_loop()
    try:
        limited = loop.run_until_complete(make())
        with pytest.raises(RuntimeError):
            with limited:  # type: ignore[attr-defined]
                pass
    finally:
        loop.close()


# -- bounded: one call of plugin code under a deadline ------------------------------------------

async def test_bounded_returns_what_a_hook_returns_whether_it_waits_or_not() -> None:
    seen = contextvars.ContextVar("seen", default="")
    seen.set("caller's")

    async def at_once() -> str:
        return "now " + seen.get()

    async def later() -> str:
        await asyncio.sleep(0.01)
        await asyncio.sleep(0)
        return "later " + seen.get()

    assert await bounded(at_once(), 5, "p", "h") == "now caller's"
    assert await bounded(later(), 5, "p", "h") == "later caller's"  # the caller's context variables


async def test_bounded_passes_a_hooks_own_failure_on_and_tells_its_cancelled_error_apart() -> None:
    async def fails() -> None:
        await asyncio.sleep(0)
        raise ValueError("its bug")

    async def cancels(wait: bool) -> None:
        if wait:
            await asyncio.sleep(0)
        raise asyncio.CancelledError

    with pytest.raises(ValueError, match="its bug"):
        await bounded(fails(), 5, "p", "h")
    for wait in (False, True):
        with pytest.raises(HookCancelled, match="plugin p: h raised CancelledError"):
            await bounded(cancels(wait), 5, "p", "h")


async def test_a_hook_that_swallows_its_cancellation_is_abandoned_not_awaited() -> None:
    release = asyncio.Event()
    started = time.monotonic()
    with pytest.raises(HookOverran, match="plugin p: connect ran past its deadline"):
        await bounded(stubborn(release), 0.2, "p", "connect")
    assert time.monotonic() - started < 10  # deadline + grace, not for ever
    assert abandoned() == ["p: connect"]
    release.set()
    assert await settle_abandoned(10) == []


async def test_a_cancelled_caller_is_not_held_by_a_stubborn_hook() -> None:
    release = asyncio.Event()
    caller = asyncio.ensure_future(bounded(stubborn(release), None, "p", "h"))
    await asyncio.sleep(0.05)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(caller, 10)
    assert abandoned() == ["p: h"]
    release.set()
    assert await settle_abandoned(10) == []


async def test_a_hook_that_binds_to_its_task_works_under_bounded() -> None:
    """anyio cancel scopes (httpx) and asyncio.timeout belong to the task they were entered in: the
    whole hook runs in one task (an inline first step broke mcphost-jwt's authenticate)."""
    import anyio

    async def scoped() -> str:
        with anyio.fail_after(5):
            await anyio.sleep(0.01)
        async with asyncio.timeout(5):
            await asyncio.sleep(0.01)
        return "fine"

    assert await bounded(scoped(), 5, "p", "h") == "fine"


# -- detachable: a handler awaited inline, left behind if it swallows its cancellation -------------

async def test_detachable_passes_values_exceptions_and_honoured_cancellations_through() -> None:
    async def value() -> int:
        await asyncio.sleep(0)
        return 7

    async def fails() -> None:
        await asyncio.sleep(0)
        raise ValueError("its own")

    async def polite() -> None:
        await asyncio.sleep(3600)

    assert await detachable(value(), "value", 1) == 7
    with pytest.raises(ValueError, match="its own"):
        await detachable(fails(), "fails", 1)
    started = time.monotonic()
    with pytest.raises(TimeoutError), deadline(0.2):
        await detachable(polite(), "polite", 0.2)
    assert time.monotonic() - started < 5
    assert abandoned() == []
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_detachable_leaves_a_call_that_swallows_its_cancellation_behind() -> None:
    released = asyncio.Event()
    swallowed: list[int] = []
    started = time.monotonic()
    with pytest.raises(TimeoutError), deadline(0.5):  # the deadline's, after a grace of 0.05 s
        await detachable(stubborn(released, swallowed), "stubborn call", 0.5)
    assert time.monotonic() - started < 5
    assert swallowed and abandoned() == ["stubborn call"]
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]

    # A cancellation from elsewhere (a client's) is not held either, and stays a cancellation.
    async def caller() -> str:
        return await detachable(stubborn(released, swallowed), "cancelled call", None)

    task = asyncio.ensure_future(caller())
    await asyncio.sleep(0.1)
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=10)
    assert done and task.cancelled()
    assert abandoned() == ["cancelled call", "stubborn call"]
    released.set()
    assert await settle_abandoned(10) == []


async def test_detachable_keeps_a_call_whose_own_timeouts_fire_and_are_handled() -> None:
    """A call that uses ``asyncio.timeout`` itself (polling, waiting for an answer with retries) sees
    CancelledErrors its own timeouts make and take back: that is no swallowed cancellation, and the
    call runs to its end however long past the grace it goes on."""

    async def polling() -> int:
        fired = 0
        for _ in range(12):  # 12 x 0.05 s: well past the grace of 0.1 s
            try:
                async with asyncio.timeout(0.05):
                    await asyncio.sleep(1)
            except TimeoutError:
                fired += 1
        return fired

    started = time.monotonic()
    with deadline(5):
        assert await detachable(polling(), "polling call", 1.0) == 12
    assert time.monotonic() - started < 4
    assert "polling call" not in abandoned()
