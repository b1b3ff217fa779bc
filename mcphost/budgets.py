"""Budgets: what each principal, and everyone together, may hold at once.

Every admission asks one :class:`Ledger` (the SessionManager owns it): requests in flight (GET and
listen streams included), tasks, parked resumable calls and their bytes, the bytes of questions out
to clients, retained reply bytes and subscriptions.
Each budget has a global limit and a per-principal one; principals are told apart by
:func:`~mcphost.sessions.session.quota_key` (the principal's identity, or an anonymous client's
address). A refusal (:class:`OverBudget`) names the budget and the setting that moves it, with a
``Retry-After``, so a transport can answer 429 (or the JSON-RPC error -32000) that says why.

The sessions budget is counted by the SessionManager itself (a shared store counts it across
processes); the synchronous-handler pool is shared by :class:`FairPool`, which gives each
principal at most its share of the threads and queues its extra calls behind its own.

**Across processes** (a shared backend that offers a :class:`BudgetShare`): the per-principal
limits hold for the whole cluster, without a round trip per admission. Each process holds an
*allowance* per (principal, budget), leased from the share in chunks: it admits locally while
what it holds stays within its allowance, asks the share for more (one round trip, the cluster's
total kept within the limit) only when the allowance runs short, and gives back what it no longer
needs at its next :meth:`Ledger.sync` (the heartbeat, which also renews the allowances: a process
that stops syncing loses them after the share's ``ttl``): spare units idle for
:data:`SPARE_IDLE` seconds when the principal is near its limit, :data:`SPARE_KEEP` otherwise.
When the share cannot be reached, the ledger falls back to per-process limits until a sync goes
through again, logging once each way; no admission waits on a share that is down. The global
limits (``max_requests`` and the like) guard each process's own memory and threads and stay per
process.

Written here rather than taken from a library: a counter per (principal, budget) under the event
loop needs no locking, and a fair executor keyed by the caller is not something
``concurrent.futures`` offers.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger("mcphost.budgets")

#: Principals whose refusals are counted per budget (beyond them, new principals' are not).
REFUSALS_KEPT = 1000

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
    #: Seconds a refused caller is told to wait. 1 for every budget here: a slot comes back when one
    #: of the caller's own holdings ends (a request returns, a parked call is answered), which no
    #: deadline the host holds predicts, so 1 is a poll interval (docs/configuration.md, Budgets).
    #: The sessions caps, whose wait is known, say it (SessionManager's TooManySessions).
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


class Short(OverBudget):
    """Within the limits as far as this process knows, but beyond the allowance it holds of the
    cluster's: :meth:`Ledger.take` asks the share for more. A caller that cannot wait for it treats
    it as the per-principal refusal it may turn out to be."""

    def __init__(self, budget: Budget) -> None:
        super().__init__(budget, per_principal=True)


class BudgetShare(Protocol):
    """What a shared backend offers the ledger: each process's allowance per (budget, principal),
    kept so that the allowances of all processes together stay within the per-principal limit.

    An allowance is recorded under this process's name with an expiry (``ttl`` seconds) that each
    :meth:`settle` renews, so a process that stopped gives its allowances back by itself. Writes
    carry a sequence number (``seq``, increasing per process): the share ignores a write older than
    the one it recorded, so replies and heartbeats that cross never leave a stale allowance.
    Both raise (any exception) when the share cannot be reached; they must not wait longer than the
    backend's operation timeout.
    """

    #: Seconds an allowance lasts without a :meth:`settle`.
    ttl: float

    async def lease(self, budget: str, key: str, want: int, need: int, limit: int, seq: int,
                    spare: int = 0) -> tuple[int, int]:
        """Record this process's allowance of ``budget`` for ``key`` as ``want``, or as much of it as
        keeps every process's together within ``limit``; nothing when that is less than ``need``.
        Up to ``spare`` units more when there is room, never more than half of what stays free
        (so other processes find room while the principal is far from its limit). Returns the
        allowance recorded now (-1 when refused: the recorded one unchanged) and what the other
        processes hold."""

    async def settle(self, allowances: dict[tuple[str, str], int], seq: int) -> dict[tuple[str, str], int]:
        """Record these allowances of this process as they are ((budget, key) -> units; 0 drops
        one) and renew them for ``ttl`` seconds, whatever the limits (they record what is held).
        Returns what the other processes hold, per (budget, key)."""


#: Seconds an allowance's spare units are kept without use before a sync gives them back, when
#: the principal is near its limit (the others' allowances and this one's leave less than two spares).
SPARE_IDLE = 1.0
#: The same while the principal is far from its limit: a caller of a call every few seconds keeps
#: its allowance, and its admissions ask Redis no more often than this.
SPARE_KEEP = 30.0


class Ledger:
    """Counters per (principal, budget) and per budget; see the module docstring."""

    def __init__(self, budgets: Iterable[Budget]) -> None:
        self.budgets = {budget.name: budget for budget in budgets}
        self._held: dict[str, Counter[str]] = {name: Counter() for name in self.budgets}
        self._totals: Counter[str] = Counter()
        #: The cluster's share (None: one process, the limits are this process's own).
        self.share: BudgetShare | None = None
        #: Shared only: this process's allowance per budget and principal, as the share recorded it.
        self._granted: dict[str, Counter[str]] = {name: Counter() for name in self.budgets}
        #: Shared only: when each (budget, principal) last needed its allowance (monotonic seconds).
        self._used: dict[tuple[str, str], float] = {}
        #: Shared only: what the other processes held of each allowance, as the share last said.
        self._others: dict[tuple[str, str], int] = {}
        #: Allowances to record at the next sync although they are 0 now (given back).
        self._dropped: set[tuple[str, str]] = set()
        self._leasing: dict[tuple[str, str], asyncio.Future[None]] = {}
        self._seq = 0
        #: Shared only: the share could not be reached; per-process limits until a sync goes through.
        self.degraded = False
        #: Refusals per principal and budget (for operators); at most REFUSALS_KEPT principals.
        self.refusals: dict[str, Counter[str]] = {}
        #: Per budget: all its refusals, and when the latest was (``time.monotonic()``), for operators.
        self.refused: Counter[str] = Counter()
        self.last_refused: dict[str, float] = {}

    def use_share(self, share: BudgetShare | None) -> None:
        """Hold the per-principal limits across the processes of ``share`` (None: this process only)."""
        self.share = share
        self.degraded = False

    def _shared(self, spec: Budget) -> bool:
        return self.share is not None and not self.degraded and bool(spec.per_principal)

    def refusal(self, key: str, budget: str, n: int = 1) -> OverBudget | None:
        """Why ``key`` may not take ``n`` more of ``budget`` now, or None when it may (a
        :class:`Short` when only this process's allowance of the cluster's is short)."""
        spec = self.budgets[budget]
        held = self._held[budget][key]
        if spec.per_principal and held + n > spec.per_principal:
            return OverBudget(spec, per_principal=True)
        if spec.total and self._totals[budget] + n > spec.total:
            return OverBudget(spec, per_principal=False)
        if self._shared(spec) and held + n > self._granted[budget][key]:
            return Short(spec)
        return None

    def try_acquire(self, key: str, budget: str, n: int = 1) -> OverBudget | None:
        """Take ``n`` of ``budget`` for ``key``; the refusal (nothing taken) when over a limit, or
        a :class:`Short` beyond this process's allowance (:meth:`take` then asks the share)."""
        refused = self.refusal(key, budget, n)
        if refused is None:
            self._held[budget][key] += n
            self._totals[budget] += n
            if self.share is not None:
                self._used[(budget, key)] = time.monotonic()
        elif not isinstance(refused, Short):
            self.count_refusal(key, budget)
        return refused

    async def take(self, key: str, budget: str, n: int = 1) -> OverBudget | None:
        """Like :meth:`try_acquire`, asking the cluster's share for a larger allowance first when
        this process's is short (one round trip; concurrent ones for the same principal share it).
        A refusal then is the cluster's: the principal holds its limit over all processes."""
        refused = self.try_acquire(key, budget, n)
        while isinstance(refused, Short):
            if not await self._lease(key, budget, self._held[budget][key] + n) and not self.degraded:
                break  # the cluster refused (when the share failed, this process's limits decide)
            refused = self.try_acquire(key, budget, n)
        if isinstance(refused, Short):
            self.count_refusal(key, budget)
            refused = OverBudget(refused.budget, per_principal=True)
        return refused

    async def check(self, key: str, budget: str, n: int = 1) -> OverBudget | None:
        """Like :meth:`refusal`, asking the share for a larger allowance when this process's is short
        (nothing is taken: a caller that answers before admitting, as HTTP does with 429)."""
        refused = self.refusal(key, budget, n)
        if isinstance(refused, Short):
            await self._lease(key, budget, self._held[budget][key] + n)
            refused = self.refusal(key, budget, n)
            if isinstance(refused, Short):
                refused = OverBudget(refused.budget, per_principal=True)
        if refused is not None:
            self.count_refusal(key, budget)
        return refused

    async def cover(self, key: str, budget: str) -> None:
        """After :meth:`force`: ask the share for an allowance covering what ``key`` holds, as much
        of it as the cluster has room for (:meth:`over` then says whether it holds more)."""
        if not self._shared(self.budgets[budget]):
            return
        # Again while a lease grows the allowance: one that was running already when this cover
        # came covered only what was held when it began.
        while self._held[budget][key] > self._granted[budget][key]:
            if not await self._lease(key, budget, self._held[budget][key], partial=True):
                return

    def count_refusal(self, key: str, budget: str) -> None:
        """Count one refusal of ``key`` by ``budget`` (for operators)."""
        self.refused[budget] += 1
        self.last_refused[budget] = time.monotonic()
        counts = self.refusals.get(key)
        if counts is None:
            if len(self.refusals) >= REFUSALS_KEPT:
                return
            counts = self.refusals[key] = Counter()
        counts[budget] += 1

    def _spare(self, spec: Budget) -> int:
        # Units leased beyond the need, so the next admissions do not ask again: an eighth of the limit.
        return max(1, spec.per_principal // 8)

    async def _lease(self, key: str, budget: str, need: int, *, partial: bool = False) -> bool:
        """Ask the share for an allowance of at least ``need`` (``partial``: as much as it has room
        for, up to ``need``); True when this process's allowance grew. One lease per principal and
        budget at a time: a concurrent caller waits for it and looks again."""
        share = self.share
        if share is None or self.degraded:
            return False
        slot = (budget, key)
        running = self._leasing.get(slot)
        if running is not None:
            before = self._granted[budget][key]
            await asyncio.shield(running)
            return self._granted[budget][key] > before or need <= self._granted[budget][key]
        spec = self.budgets[budget]
        granted = self._granted[budget][key]
        # Spare units spare the next admissions a round trip; a cover (what is already held) takes none.
        want = min(spec.per_principal, max(need, self._held[budget][key]))
        spare = 0 if partial else self._spare(spec)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._leasing[slot] = done
        self._seq += 1
        try:
            recorded, self._others[slot] = await share.lease(budget, key, want, granted + 1 if partial else need,
                                                             spec.per_principal, self._seq, spare)
        except Exception as exc:
            self._degrade(exc)
            return False
        finally:
            del self._leasing[slot]
            done.set_result(None)
        self._used[slot] = time.monotonic()
        if recorded < 0:
            return False
        self._granted[budget][key] = recorded
        self._dropped.discard(slot)
        return recorded > granted

    def _degrade(self, exc: BaseException) -> None:
        if not self.degraded:
            log.warning("budgets: the cluster's share is unreachable (%s); per-process limits until it is back",
                        exc or type(exc).__name__)
        self.degraded = True

    async def sync(self) -> None:
        """Record this process's allowances in the share (the heartbeat): each renewed for the
        share's ``ttl``, spare units not needed since :data:`SPARE_IDLE` seconds given back, and what
        is held counted whatever it is (after an outage). Ends a fallback to per-process limits when
        it goes through. Raises what the share raises."""
        share = self.share
        if share is None:
            return
        now = time.monotonic()
        allowances: dict[tuple[str, str], int] = {}
        for budget, granted in self._granted.items():
            spec = self.budgets[budget]
            if not spec.per_principal:
                continue  # no per-principal limit: nothing to share
            held = self._held[budget]
            for key in set(granted) | set(held):
                slot = (budget, key)
                if slot in self._leasing:
                    continue  # its lease records it
                units = max(granted[key], held[key])
                near = self._others.get(slot, 0) + units + 2 * self._spare(spec) > spec.per_principal
                if now - self._used.get(slot, 0.0) > (SPARE_IDLE if near else SPARE_KEEP):
                    units = held[key]  # idle: the spare goes back
                if units != granted[key] or units:
                    allowances[slot] = units
        for slot in self._dropped:
            allowances.setdefault(slot, 0)
        for slot in [slot for slot in self._used if not self._granted[slot[0]][slot[1]]
                     and not self._held[slot[0]][slot[1]] and slot not in self._leasing]:
            del self._used[slot]  # nothing held nor granted (after a fallback): nothing to remember
            self._others.pop(slot, None)
        if not allowances and not self.degraded:
            return  # nothing to record (a fallback is ended by a sync that reached the share)
        # The local view shrinks before the share hears of it: never more than the share records.
        for (budget, key), units in allowances.items():
            if units:
                self._granted[budget][key] = units
            else:
                self._granted[budget].pop(key, None)
                self._used.pop((budget, key), None)
                self._others.pop((budget, key), None)
        self._seq += 1
        try:
            others = await share.settle(allowances, self._seq)
        except Exception as exc:
            self._dropped.update(slot for slot, units in allowances.items() if not units)
            self._degrade(exc)
            raise
        self._dropped.difference_update(slot for slot, units in allowances.items() if not units)
        self._others.update((slot, units) for slot, units in others.items() if allowances.get(slot))
        if self.degraded:
            self.degraded = False
            log.warning("budgets: the cluster's share is back; per-principal limits hold across processes again")

    async def give_back(self) -> None:
        """Return every allowance this process holds (it stops): the others may use them at once
        rather than after the share's ``ttl``. Best effort: a failure leaves them to expire."""
        share = self.share
        if share is None or self.degraded:
            return
        allowances = {(budget, key): 0 for budget, granted in self._granted.items() for key in granted}
        allowances.update((slot, 0) for slot in self._dropped)
        for granted in self._granted.values():
            granted.clear()
        self._dropped.clear()
        self._others.clear()
        if allowances:
            self._seq += 1
            try:
                await share.settle(allowances, self._seq)
            except Exception as exc:
                log.info("budgets: could not give back %d allowances (they expire by themselves): %s",
                         len(allowances), exc)

    def granted(self, key: str, budget: str) -> int:
        """This process's allowance of ``budget`` for ``key`` (shared only; 0 otherwise)."""
        return self._granted[budget][key]

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
        """Whether ``key`` holds more of ``budget`` than its per-principal limit (across the cluster:
        than this process's allowance), or everyone more than the total."""
        spec = self.budgets[budget]
        held = self._held[budget][key]
        return bool((spec.per_principal and held > spec.per_principal)
                    or (spec.total and self._totals[budget] > spec.total)
                    or (self._shared(spec) and held > self._granted[budget][key]))

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
        Budget("parked bytes", "max_parked_bytes_per_principal", settings.max_parked_bytes,
               settings.max_parked_bytes_per_principal, "max_parked_bytes"),
        Budget("question bytes", "max_question_bytes_per_principal", settings.max_question_bytes,
               settings.max_question_bytes_per_principal, "max_question_bytes"),
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

    def by_principal(self) -> dict[str, int]:
        """Calls running now per principal (a copy, for operators)."""
        with self._lock:
            return dict(self._running)

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
