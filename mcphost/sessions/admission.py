"""Per-principal admission: the budget ledger every admission consults, and who it refused.

A request (a GET or listen stream included) is counted in flight for its caller (its quota key,
:func:`~mcphost.sessions.session.quota_key`) from its admission until it is done, within
``max_requests_per_principal`` and everyone's ``max_requests``; a greedy principal is refused
while every other one goes on. On a backend that offers a budget share the ledger leases
allowances across processes (:mod:`mcphost.budgets`). The SessionManager holds one
:class:`Admission` (``manager.admission``); its ``budgets`` and ``refused_by`` are the same objects.
"""

from __future__ import annotations

from collections import Counter

from mcphost.budgets import Ledger, OverBudget, ledger_for
from mcphost.config import ServerSettings
from mcphost.sessions.session import Session

#: Callers whose refusals are counted (beyond them, new callers' refusals are not).
REFUSALS_KEPT = 1000


class Admission:
    """Requests in flight per principal, and the refusals of every per-principal cap."""

    def __init__(self, settings: ServerSettings) -> None:
        #: What each principal holds of every budget in this process.
        self.budgets: Ledger = ledger_for(settings)
        #: Per quota key: how often a budget refused it (a 429), for operators; at most REFUSALS_KEPT keys.
        self.refused_by: Counter[str] = Counter()

    def crowded(self, key: str) -> OverBudget | None:
        """Why the caller ``key`` may not start one more request now (its ``max_requests_per_principal``,
        or everyone's ``max_requests``), or None when it may (counted as a refusal when not: callers
        refuse the request then)."""
        refused = self.budgets.refusal(key, "requests")
        if refused is not None:
            self.refused(key)
        return refused

    @property
    def busy_by(self) -> dict[str, int]:
        """Requests in flight per quota key (the ledger's requests budget; for operators)."""
        return self.budgets.by_principal("requests")

    async def crowding(self, key: str) -> OverBudget | None:
        """Like :meth:`crowded`, asking the cluster for a larger allowance of requests first when
        this process's is short (nothing is taken: the request is admitted afterwards)."""
        refused = await self.budgets.check(key, "requests")
        if refused is not None:
            self.refused(key)
        return refused

    def admit(self, session: Session) -> OverBudget | None:
        """Count one more request of ``session``'s caller in flight: None when counted, else why
        not, without waiting (a :class:`~mcphost.budgets.Short` when only this process's allowance
        of the cluster's is short: :meth:`take_request` then asks). Let go with :meth:`done`."""
        return self.budgets.try_acquire(session.quota, "requests")

    async def take_request(self, session: Session) -> OverBudget | None:
        """Like :meth:`admit`, asking the cluster for more when this process's allowance is short:
        None when counted, else why not (counted as a refusal). Let go with :meth:`done`."""
        refused = await self.budgets.take(session.quota, "requests")
        if refused is not None:
            self.refused(session.quota)
        return refused

    def refused(self, key: str) -> None:
        """Count one refusal of caller ``key`` by a per-principal cap."""
        if key in self.refused_by or len(self.refused_by) < REFUSALS_KEPT:
            self.refused_by[key] += 1

    def done(self, session: Session) -> None:
        """A request admitted with :meth:`admit` is over."""
        self.budgets.release(session.quota, "requests")
