"""Budgets: what each principal, and everyone together, may hold at once in this process.

Every admission asks one :class:`Ledger` (the SessionManager owns it): requests in flight (GET and
listen streams included), tasks, parked resumable calls, retained reply bytes and subscriptions.
Each budget has a global limit and a per-principal one; principals are told apart by
:func:`~mcphost.sessions.session.quota_key` (the principal's identity, or an anonymous client's
address). A refusal (:class:`OverBudget`) names the budget and the setting that moves it, with a
``Retry-After``, so a transport can answer 429 (or the JSON-RPC error -32000) that says why.

The sessions budget is counted by the SessionManager itself (a shared store counts it across
processes); the synchronous-handler pool is shared by :class:`FairPool`, which gives each
principal at most its share of the threads and queues its extra calls behind its own.

Written here rather than taken from a library: a counter per (principal, budget) under the event
loop needs no locking, and a fair executor keyed by the caller is not something
``concurrent.futures`` offers.
"""

from __future__ import annotations

import contextvars
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any

#: The quota key of the request running in this context (set by the kernel for each request's
#: task; tasks and threads it starts inherit it). The sync pool shares its threads by it.
current_quota: contextvars.ContextVar[str] = contextvars.ContextVar("mcphost_quota", default="")


@dataclass(frozen=True)
class Budget:
    """One budget: ``total`` for everyone together, ``per_principal`` for each (0: no limit)."""

    name: str
    #: The setting that moves the per-principal limit (``server.<setting>``), named in refusals.
    setting: str
    total: int
    per_principal: int
    #: The setting that moves the global limit.
    total_setting: str = ""
    #: Seconds a refused caller is told to wait.
    retry_after: int = 1


class OverBudget(Exception):
    """A budget is spent: the caller (or, ``per_principal`` False, everyone) must wait."""

    def __init__(self, budget: Budget, *, per_principal: bool) -> None:
        self.budget = budget
        self.per_principal = per_principal
        self.retry_after = budget.retry_after
        if per_principal:
            message = (f"Over this principal's {budget.name} budget (server.{budget.setting} = "
                       f"{budget.per_principal}); retry later")
        else:
            message = (f"Over the host's {budget.name} budget (server.{budget.total_setting} = "
                       f"{budget.total}); retry later")
        super().__init__(message)
        self.message = message

    @property
    def data(self) -> dict[str, Any]:
        """The JSON-RPC error's ``data``: which budget, and when to retry."""
        return {"budget": self.budget.name, "perPrincipal": self.per_principal, "retryAfter": self.retry_after}


class Ledger:
    """Counters per (principal, budget) and per budget; see the module docstring."""

    def __init__(self, budgets: Iterable[Budget]) -> None:
        self.budgets = {budget.name: budget for budget in budgets}
        self._held: dict[str, Counter[str]] = {name: Counter() for name in self.budgets}
        self._totals: Counter[str] = Counter()

    def refusal(self, key: str, budget: str, n: int = 1) -> OverBudget | None:
        """Why ``key`` may not take ``n`` more of ``budget`` now, or None when it may."""
        spec = self.budgets[budget]
        if spec.per_principal and self._held[budget][key] + n > spec.per_principal:
            return OverBudget(spec, per_principal=True)
        if spec.total and self._totals[budget] + n > spec.total:
            return OverBudget(spec, per_principal=False)
        return None

    def try_acquire(self, key: str, budget: str, n: int = 1) -> OverBudget | None:
        """Take ``n`` of ``budget`` for ``key``; the refusal (nothing taken) when over a limit."""
        refused = self.refusal(key, budget, n)
        if refused is None:
            self._held[budget][key] += n
            self._totals[budget] += n
        return refused

    def acquire(self, key: str, budget: str, n: int = 1) -> None:
        """Like :meth:`try_acquire`, raising the :class:`OverBudget`."""
        refused = self.try_acquire(key, budget, n)
        if refused is not None:
            raise refused

    def force(self, key: str, budget: str, n: int = 1) -> None:
        """Count ``n`` of ``budget`` for ``key`` whatever the limits (the caller then gives some
        back, as retained bytes drop their oldest streams)."""
        self._held[budget][key] += n
        self._totals[budget] += n

    def release(self, key: str, budget: str, n: int = 1) -> None:
        """Give back ``n`` of ``budget`` taken for ``key``."""
        held = self._held[budget]
        n = min(n, held[key])
        held[key] -= n
        if held[key] <= 0:
            del held[key]
        self._totals[budget] -= n

    def held(self, key: str, budget: str) -> int:
        """How much of ``budget`` ``key`` holds."""
        return self._held[budget][key]

    def by_principal(self, budget: str) -> dict[str, int]:
        """What each principal holding some of ``budget`` holds (a copy)."""
        return dict(self._held[budget])

    def total(self, budget: str) -> int:
        """How much of ``budget`` everyone together holds."""
        return self._totals[budget]

    def over(self, key: str, budget: str) -> bool:
        """Whether ``key`` holds more of ``budget`` than its per-principal limit, or everyone more than the total."""
        spec = self.budgets[budget]
        return bool((spec.per_principal and self._held[budget][key] > spec.per_principal)
                    or (spec.total and self._totals[budget] > spec.total))

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Per budget: its limits, the total held and what each principal holds (for a console)."""
        return {name: {"total": spec.total, "perPrincipal": spec.per_principal, "held": self._totals[name],
                       "byPrincipal": dict(self._held[name])}
                for name, spec in self.budgets.items()}


def ledger_for(settings: Any) -> Ledger:
    """The ledger of a host's ``[server]`` settings."""
    return Ledger([
        Budget("requests", "max_requests_per_principal", settings.max_requests,
               settings.max_requests_per_principal, "max_requests"),
        Budget("tasks", "max_tasks_per_principal", settings.max_tasks, settings.max_tasks_per_principal, "max_tasks"),
        Budget("parked calls", "max_parked_per_principal", settings.max_parked, settings.max_parked_per_principal,
               "max_parked"),
        Budget("retained bytes", "max_retained_bytes_per_principal", settings.max_retained_bytes_total,
               settings.max_retained_bytes_per_principal, "max_retained_bytes_total"),
        Budget("subscriptions", "max_subscriptions_per_principal", settings.max_subscriptions_total,
               settings.max_subscriptions_per_principal, "max_subscriptions_total"),
    ])


def sync_share(settings: Any) -> int:
    """Threads of the sync pool one principal may hold at once (``sync_workers_per_principal``;
    0: a quarter of ``sync_workers``, at least one)."""
    share = int(settings.sync_workers_per_principal)
    return min(share, int(settings.sync_workers)) if share > 0 else max(1, settings.sync_workers // 4)


#: Quota keys the sync pool does not limit to a share: no address to tell callers apart by.
UNSHARED = frozenset({"", "a:"})


class FairPool(Executor):
    """A bounded thread pool shared fairly between principals.

    At most ``workers`` threads run calls; one principal (the :data:`current_quota` of the
    submitting context) runs at most ``share`` of them at once. Its further calls wait in its own
    queue, and principals with calls waiting take turns for free threads (round robin), so one
    that submits many slow calls delays only itself. A quarter of the threads (``reserve``) is
    kept for principals running nothing: one already running a call takes another only while
    more than ``reserve`` threads are free, so several greedy principals together cannot leave a
    newcomer waiting. Threads start on demand and end after ``idle`` seconds without work.

    Calls of a caller with no address (quota key ``a:``: the one client of a stdio process, an
    in-process client) or of no request at all (key ``""``) may use every thread: there is no
    one to tell apart from them.
    """

    def __init__(self, workers: int, share: int, *, name: str = "mcphost-sync", idle: float = 60.0) -> None:
        self.workers = workers
        self.share = max(1, min(share, workers))
        self.reserve = workers // 4
        self._name = name
        self._idle_timeout = idle
        self._lock = threading.Condition()
        self._queues: dict[str, deque[tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]]] = {}
        #: Principals with calls waiting and a thread to spare under their share, in turn order.
        self._ready: deque[str] = deque()
        self._running: Counter[str] = Counter()
        self._busy = 0  # calls running, all principals together
        self._threads = 0
        self._idle = 0
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        key = current_quota.get()
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new calls after shutdown")
            queue = self._queues.get(key)
            if queue is None:
                queue = self._queues[key] = deque()
            queue.append((future, fn, args, kwargs))
            self._mark_ready(key)
            self._dispatch()
        return future

    def _dispatch(self) -> None:
        # Under the lock: when a call may start now, wake an idle thread or start one. Each thread
        # that takes a call dispatches again, so calls submitted together never wait on one wakeup.
        if not any(self._allowed(key) for key in self._ready):
            return
        if self._idle:
            self._lock.notify()
        elif self._threads < self.workers:
            self._threads += 1
            threading.Thread(target=self._work, name=f"{self._name}-{self._threads}", daemon=True).start()

    def running(self, key: str) -> int:
        """Calls of ``key`` running now."""
        with self._lock:
            return self._running[key]

    def waiting(self, key: str) -> int:
        """Calls of ``key`` waiting for a thread."""
        with self._lock:
            return len(self._queues.get(key, ()))

    def _mark_ready(self, key: str) -> None:
        # Under the lock: ``key`` takes a turn when it has calls waiting and its share is not used up.
        share = self.workers if key in UNSHARED else self.share
        if self._queues.get(key) and self._running[key] < share and key not in self._ready:
            self._ready.append(key)

    def _allowed(self, key: str) -> bool:
        # Under the lock: a principal running nothing may take any free thread; one running calls
        # only while more than the reserve stays free.
        return key in UNSHARED or not self._running[key] or self.workers - self._busy > self.reserve

    def _take(self) -> tuple[str, Any] | None:
        # Under the lock: the next call, taking turns between principals; None once shut down.
        while True:
            key = next((k for k in self._ready if self._allowed(k)), None)
            if key is not None:
                break
            if self._closed and not self._ready:
                return None
            self._idle += 1
            woke = self._lock.wait(self._idle_timeout)
            self._idle -= 1
            if not woke and not self._ready:
                return None
        self._ready.remove(key)
        queue = self._queues[key]
        item = queue.popleft()
        if not queue:
            del self._queues[key]
        self._running[key] += 1
        self._busy += 1
        self._mark_ready(key)  # at the back of the line: others take their turn first
        self._dispatch()
        return key, item

    def _work(self) -> None:
        while True:
            with self._lock:
                taken = self._take()
                if taken is None:
                    self._threads -= 1
                    return
            key, (future, fn, args, kwargs) = taken
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        result = fn(*args, **kwargs)
                    except BaseException as exc:
                        future.set_exception(exc)
                    else:
                        future.set_result(result)
            finally:
                del future, fn, args, kwargs  # no reference to a finished call's result lingers
                with self._lock:
                    self._running[key] -= 1
                    self._busy -= 1
                    if self._running[key] <= 0:
                        del self._running[key]
                    self._mark_ready(key)
                    self._dispatch()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            if cancel_futures:
                for queue in self._queues.values():
                    for future, *_ in queue:
                        future.cancel()
                self._queues.clear()
                self._ready.clear()
            self._lock.notify_all()
