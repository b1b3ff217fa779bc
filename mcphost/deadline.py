"""Deadlines for the per-request path: what ``asyncio.timeout`` does, at a fraction of its cost.

``asyncio.timeout`` puts a timer handle on the loop's heap for every block it guards and takes it
off again on the way out. On the request path (reading a body, running a tool, writing an SSE
event) that is paid for every request, for a deadline that is almost never reached: about 5 us of
the roughly 60 us a stateless echo call costs in-process, per block.

:func:`deadline` instead records the block in a per-loop table, and one sweep timer, armed only
while a block with a deadline is open, cancels the tasks whose deadline has passed. The behaviour
is ``asyncio.timeout``'s: the task is cancelled, and the block raises :class:`TimeoutError` when
the cancellation it sees is the deadline's own (a cancellation from elsewhere propagates
unchanged). A deadline fires at most :data:`RESOLUTION` seconds late.

    with deadline(30):          # a plain ``with``: entering and leaving never wait
        await read_body()

:func:`bounded` puts a deadline on one call of plugin code (a lifecycle or auth hook): it tells an
overrun (:class:`HookOverran`) and a CancelledError the plugin raised itself (:class:`HookCancelled`)
apart from a cancellation of the caller, which propagates, and keeps the calls running in a
:class:`RunningHooks`, so a process that must stop can name the plugins it abandons. Each call runs
in a task of its own, so one that swallows its cancellation is abandoned (and named by
:func:`abandoned`) instead of holding its caller for ever.

:func:`detachable` does the same for a tool, resource, prompt or completion handler without a task
per call: the handler runs inline, and only one still running a grace after its cancellation is
moved to a task of its own and abandoned, so its request gets its answer anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import types
import weakref
from collections.abc import Coroutine, Generator
from types import TracebackType
from typing import Any, TypeVar

log = logging.getLogger("mcphost.hooks")

#: How late a deadline may fire, in seconds: the sweep timer's period while blocks are open.
RESOLUTION = 0.05


class Deadline:
    """One guarded block (see :func:`deadline`)."""

    __slots__ = ("_cancelling", "_expired", "_task", "_watch", "_when")

    def __init__(self, watch: _Watch | None, when: float | None) -> None:
        self._watch = watch
        self._when = when
        self._expired = False
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0

    def expired(self) -> bool:
        """Whether the deadline passed (and so cancelled the task)."""
        return self._expired

    def __enter__(self) -> Deadline:
        if self._watch is None:  # no limit
            return self
        task = asyncio.current_task(self._watch.loop())
        if task is None:
            raise RuntimeError("a deadline needs a running task")
        self._task = task
        self._cancelling = task.cancelling()
        self._watch.add(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._watch is not None:
            self._watch.entries.pop(self, None)
        if self._expired:
            assert self._task is not None
            # Only the deadline's own cancellation becomes a timeout (asyncio.timeout's rule).
            if self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
                raise TimeoutError from exc

    def _fire(self) -> None:
        self._expired = True
        assert self._task is not None
        self._task.cancel()


class _Watch:
    """The open deadlines of one event loop and the timer that sweeps them."""

    __slots__ = ("earliest", "entries", "handle", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Held weakly: the table of watches is keyed by the loop, which must stay collectable.
        self.loop = weakref.ref(loop)
        self.entries: dict[Deadline, None] = {}
        self.earliest = math.inf
        self.handle: asyncio.TimerHandle | None = None

    def add(self, block: Deadline) -> None:
        self.entries[block] = None
        assert block._when is not None
        if block._when < self.earliest:
            self.earliest = block._when
        if self.handle is None:
            loop = self.loop()
            assert loop is not None  # a block is being entered on it
            self.handle = loop.call_at(loop.time() + RESOLUTION, self.sweep)

    def sweep(self) -> None:
        self.handle = None
        loop = self.loop()
        if loop is None:
            return
        now = loop.time()
        if now >= self.earliest:
            earliest = math.inf
            for block in list(self.entries):
                when = block._when
                assert when is not None
                if when <= now:
                    del self.entries[block]
                    block._fire()
                elif when < earliest:
                    earliest = when
            self.earliest = earliest
        if self.entries:
            self.handle = loop.call_at(now + RESOLUTION, self.sweep)
        else:
            self.earliest = math.inf


_watches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watch] = weakref.WeakKeyDictionary()


_last: _Watch | None = None  # the watch of the loop that asked last: almost always the one asking


def deadline(seconds: float | None) -> Deadline:
    """A block that may run ``seconds`` at most (``None``: no limit); use it as ``with``, inside a task."""
    global _last
    if seconds is None:
        return Deadline(None, None)
    loop = asyncio.get_running_loop()
    watch = _last
    if watch is None or watch.loop() is not loop:
        watch = _watches.get(loop)
        if watch is None:
            watch = _watches[loop] = _Watch(loop)
        _last = watch
    return Deadline(watch, loop.time() + seconds)


T = TypeVar("T")


class HookOverran(Exception):
    """A plugin's hook ran past its deadline (it was cancelled)."""


class HookCancelled(Exception):
    """A plugin's hook raised CancelledError of its own (nobody cancelled its caller)."""


class RunningHooks:
    """The plugin hook calls running now, as ``"plugin: hook"`` (several of one at once counted)."""

    __slots__ = ("_calls",)

    def __init__(self) -> None:
        self._calls: dict[str, int] = {}

    def enter(self, name: str) -> None:
        self._calls[name] = self._calls.get(name, 0) + 1

    def leave(self, name: str) -> None:
        left = self._calls.get(name, 0) - 1
        if left > 0:
            self._calls[name] = left
        else:
            self._calls.pop(name, None)

    def names(self) -> list[str]:
        """The calls running now, sorted."""
        return sorted(self._calls)


#: How long a cancelled hook gets to end before it is abandoned (seconds, at most a tenth of its
#: deadline): a hook that honours cancellation ends within a turn of the loop; one that swallows it
#: is left running. The grace is the end of the deadline, not added to it: a hook is cancelled
#: ``grace`` seconds before its deadline, so the caller has its answer by the deadline whatever the
#: hook does.
GRACE = 1.0


def _grace(seconds: float | None) -> float:
    return GRACE if seconds is None else min(GRACE, seconds / 10)

#: Hook calls abandoned while still running (cancelled, but not ended yet: a plugin that swallows
#: its cancellation never ends), as ``"plugin: hook"``, held until they end.
_abandoned: dict[asyncio.Task[Any], str] = {}


def abandoned() -> list[str]:
    """The abandoned hook calls still running, as ``"plugin: hook"``, sorted (a name once)."""
    return sorted(set(_abandoned.values()))


async def settle_abandoned(seconds: float) -> list[str]:
    """Wait up to ``seconds`` for the abandoned hook calls to end; the names of those still running."""
    tasks = [task for task in _abandoned if task.get_loop() is asyncio.get_running_loop()]
    if tasks:
        await asyncio.wait(tasks, timeout=seconds)
    return abandoned()


async def exit_if_abandoned(seconds: float = GRACE) -> None:
    """The process's last step (``mcphost serve``, HTTP or stdio): hook calls abandoned and still
    running ``seconds`` on would keep ``asyncio.run`` waiting for them for ever as it ends, so the
    process exits at once instead (status 0: it stopped as asked), naming them in the log."""
    stubborn = await settle_abandoned(seconds)
    if not stubborn:
        return
    log.error("exiting with %s still running: abandoned, they ignore their cancellation", ", ".join(stubborn))
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    os._exit(0)


def _abandon(inner: asyncio.Task[Any], name: str, seconds: float | None, after: float = GRACE,
             kind: str = "plugin ") -> None:
    """Leave ``inner`` (cancelled) running on its own; if it has not ended ``after`` seconds on, log it
    (as ``kind name``: a plugin's hook, or a tool or other handler)."""
    if inner.done() or inner in _abandoned:
        return
    _abandoned[inner] = name
    inner.add_done_callback(_forget)

    def stubborn() -> None:
        if not inner.done():
            log.error("%s%s ignored its cancellation (deadline %s) and still runs; abandoned", kind, name,
                      "none" if seconds is None else f"{seconds:g} s")

    if after > 0:
        inner.get_loop().call_later(after, stubborn)
    else:
        stubborn()


def _forget(inner: asyncio.Task[Any]) -> None:
    _abandoned.pop(inner, None)
    if not inner.cancelled():
        inner.exception()  # retrieved: an abandoned call's late failure is no "never retrieved" warning


async def _settle(inner: asyncio.Task[Any], seconds: float | None) -> None:
    """Wait up to ``seconds`` (``None``: no limit) for ``inner`` to end, never longer: unlike
    ``asyncio.timeout`` or ``wait_for``, nothing here waits for a cancelled call to end."""
    if inner.done():
        return
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()

    def wake(_: object) -> None:
        if not ended.done():
            ended.set_result(None)

    inner.add_done_callback(wake)
    handle = None if seconds is None else loop.call_later(seconds, wake, None)
    try:
        await ended
    finally:
        if handle is not None:
            handle.cancel()
        inner.remove_done_callback(wake)


async def bounded(call: Coroutine[Any, Any, T], seconds: float | None, plugin: str, hook: str,
                  running: RunningHooks | None = None) -> T:
    """Run ``call`` (plugin ``plugin``'s ``hook``) for ``seconds`` at most (``None``: no limit).

    :class:`HookOverran` when the deadline passed, :class:`HookCancelled` when the plugin raised
    CancelledError itself; a cancellation of the calling task propagates as it is. The call runs
    in a task of its own (with a copy of the caller's context variables), so a plugin that
    swallows its cancellation and carries on is abandoned, not awaited for ever: the deadline
    holds whatever the plugin does (it is cancelled a grace before the deadline: a tenth of it, at
    most :data:`GRACE`). An abandoned call still running :data:`GRACE` seconds after its
    cancellation is logged with its plugin's name and listed by :func:`abandoned`.
    """
    name = f"{plugin}: {hook}"
    if running is not None:
        running.enter(name)
    inner: asyncio.Task[T] = asyncio.get_running_loop().create_task(call)
    overran = False
    try:
        grace = _grace(seconds)
        try:
            await _settle(inner, None if seconds is None else seconds - grace)
            if not inner.done():  # at the deadline (less the grace)
                overran = True
                inner.cancel()
                await _settle(inner, grace)  # a call that honours its cancellation ends here
        except BaseException:  # the caller is cancelled: the call is cancelled and not waited for
            inner.cancel()
            _abandon(inner, name, seconds)
            raise
        if overran:
            if inner.done():
                _forget(inner)  # whatever it ended with, it ended late
            else:
                _abandon(inner, name, seconds, after=0)  # it had its grace: named now
            raise HookOverran(f"plugin {plugin}: {hook} ran past its deadline ({seconds:g} s)")
        if inner.cancelled():
            raise HookCancelled(f"plugin {plugin}: {hook} raised CancelledError")
        return inner.result()
    finally:
        if running is not None:
            running.leave(name)


@types.coroutine
def detachable(call: Coroutine[Any, Any, T], name: str, seconds: float | None,
               record: Any = None) -> Generator[Any, None, T]:
    """``await detachable(call, name, seconds)``: ``await call``, inline (no task of its own), except
    that a call which swallows its cancellation is left behind instead of holding its caller.

    The call runs in the awaiting task, step by step through this generator: on the normal path that
    costs a generator (about 0.4 us), not a task. When the awaiting task is cancelled (its deadline
    fired, or its client cancelled it) the cancellation goes to the call as usual; a call that
    honours it ends at once. One still running a grace later (a tenth of ``seconds``, at most
    :data:`GRACE`) is detached: it goes on in a task of its own (abandoned, logged as ``name``,
    followed by ``record``'s name and plugin when a record is given, and listed by
    :func:`abandoned`), and the awaiting task gets the CancelledError it was sent, so a
    :func:`deadline` around it raises TimeoutError at its deadline plus the grace whatever the call does.
    """
    send = call.send
    value: Any = None
    error: BaseException | None = None
    grace: _Grace | None = None  # armed by the first cancellation
    while True:
        try:
            yielded = send(value) if error is None else call.throw(error)
            if grace is not None and grace.taken_back():  # the call's own timeout, handled: it goes on
                grace.handle.cancel()
                grace = None
        except StopIteration as stop:
            if grace is not None:
                grace.handle.cancel()
            return stop.value  # type: ignore[no-any-return]  # the call's own value
        except BaseException:
            if grace is not None:
                grace.handle.cancel()
            raise
        try:
            value = yield yielded
            error = None
        except GeneratorExit:  # the awaiting task itself is being closed
            call.close()
            raise
        except BaseException as exc:
            if grace is not None and grace.over:  # the call stays behind, the caller goes on
                _leave(call, yielded, _label(name, record), seconds)
                raise
            if grace is None and isinstance(exc, asyncio.CancelledError):
                grace = _Grace(seconds)
            value, error = None, exc


class _Grace:
    """The grace a cancelled call of :func:`detachable` has; when over, its caller is woken."""

    __slots__ = ("handle", "level", "over", "task")

    def __init__(self, seconds: float | None) -> None:
        self.over = False
        self.task = asyncio.current_task()
        #: The task's pending cancellations when this one arrived; a cancellation the call's own
        #: ``asyncio.timeout`` (or cancel scope) made is taken back (``uncancel``) once it handles it.
        self.level = self.task.cancelling() if self.task is not None else 0
        self.handle = asyncio.get_running_loop().call_later(_grace(seconds), self._expire, self.task)

    def taken_back(self) -> bool:
        """Whether the cancellation that armed this grace was withdrawn by whoever made it (a timeout
        inside the call that fired and was handled there), not one the call swallowed."""
        return self.task is not None and self.task.cancelling() < self.level

    def _expire(self, task: asyncio.Task[Any] | None) -> None:
        if task is not None and not task.done():
            self.over = True
            task.cancel()  # taken back by _leave: only the first cancellation counts


def _label(name: str, record: Any) -> str:
    """A detached call's name in the log (formatted only then: the normal path formats nothing)."""
    if record is None:
        return name
    provenance = getattr(record, "provenance", None)
    return f"{name} {record.name!r}" + (f" (plugin {provenance.plugin})" if provenance else "")


def _leave(call: Coroutine[Any, Any, Any], pending: Any, name: str, seconds: float | None) -> None:
    """Go on without ``call``: it runs on in a task of its own, abandoned and named."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()
    loop = asyncio.get_running_loop()

    def carry_on(_: object = None) -> None:
        _abandon(loop.create_task(call), name, seconds, after=0, kind="")

    # The call waits on what it yielded: resumed only once that is done (cancelled just now, as
    # a rule); a task it awaits ends on its own time.
    if asyncio.isfuture(pending) and not pending.done():
        pending.cancel()
        if not pending.done():
            pending.add_done_callback(carry_on)
            return
    carry_on()


__all__ = ["GRACE", "RESOLUTION", "Deadline", "HookCancelled", "HookOverran", "RunningHooks", "abandoned",
           "bounded", "deadline", "detachable", "exit_if_abandoned", "settle_abandoned"]
