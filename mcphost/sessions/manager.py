"""The SessionManager: the one owner of sessions in this process.

It answers every question about a session's life, whatever transport carries it:

- the registry of sessions held here, and creation with the caps (``server.max_sessions``,
  counted in the store on a shared backend, and ``max_sessions_per_principal``, counted here or
  by a shared store that offers ``count_of``);
- per-principal admission (:class:`~mcphost.sessions.admission.Admission`, ``manager.admission``):
  the budget ledger (:mod:`mcphost.budgets`) every admission consults: requests in flight (GET
  and listen streams included, ``max_requests_per_principal``), tasks, parked calls, retained
  bytes and subscriptions; a greedy principal is refused while every other one goes on. On a
  backend that offers a budget share the per-principal limits hold across every process (the
  ledger leases allowances; the heartbeat syncs them);
- lookup with the owner check (a foreign principal gets exactly the unknown-session answer);
- on a shared backend: loading a session another process created, restarting its TTL, saving
  its durable state when it changed, and renewing the leases of the request streams this
  process writes;
- the lifecycle of every connection, whatever transport and era: :meth:`open` runs the connect
  hooks with the one refusal rule, :meth:`close` the disconnect hooks (and terminate), and
  :meth:`connected` holds one connection from the one to the other in a single block; the hooks
  arrive as one :class:`LifecycleHooks` object and nothing else calls them;
- idle and lifetime reaping (:class:`Upkeep`, with the heartbeat), and ending: DELETE, expiry,
  lifetime and shutdown each fire ``mcphost_terminate`` once;
- the ephemeral sessions of 2026-07-28 requests (never stored, never listed).

Transports keep only their per-connection state. One that needs per-session state of its own
(the HTTP transport's streams) registers a :class:`Driver` with :meth:`drive`: the manager calls it
when it creates or loads a session, asks it which sessions are busy and which streams it leases,
and saves what it returns from ``durable`` with the session.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import re
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, cast

from mcphost.budgets import Ledger
from mcphost.config import ServerSettings
from mcphost.errors import Refused
from mcphost.sessions.admission import Admission
from mcphost.sessions.backend import Backend, BackendUnavailable, EventLog, LeasedEventLog, SubscriptionStore
from mcphost.sessions.session import Connection, Principal, Session, quota_key, this_node

log = logging.getLogger("mcphost.sessions")

#: Longest session id looked up in a shared store (ours are 43 characters).
MAX_SESSION_ID = 128
#: Seconds between attempts to renew the request leases after a renewal failed.
RENEW_RETRY = 0.2
#: A session id this host mints (``secrets.token_urlsafe``); anything else is unknown without a lookup.
_SESSION_ID = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_SESSION_ID}}}")


class TooManySessions(Exception):
    """The session cap is reached; the client should retry later.

    ``per_principal``: the caller's own cap (``max_sessions_per_principal``), not the host's.
    """

    def __init__(self, *, per_principal: bool = False, cap: int = 0, retry_after: int = 5) -> None:
        super().__init__((f"Over this principal's sessions budget (server.max_sessions_per_principal = {cap})"
                          if per_principal else f"Over the host's sessions budget (server.max_sessions = {cap})")
                         + f"; the first of them to expire does so in {retry_after} s")
        self.per_principal = per_principal
        #: Seconds until a session counted against the cap expires (when none ends earlier).
        self.retry_after = retry_after


class Driver(Protocol):
    """What a transport with per-session state of its own tells the manager."""

    async def attach(self, session: Session, stored: Mapping[str, Any] | None) -> None:
        """Give a session created (``stored`` None) or loaded here its outlet and transport state."""

    async def keep(self, session: Session) -> None:
        """The session's TTL was restarted in a shared store: keep the transport's stored state alive too."""

    def durable(self, session: Session) -> dict[str, Any]:
        """Transport state saved with the session in a shared store (JSON-able)."""

    def busy(self, session: Session) -> bool:
        """Whether a connection of the transport still uses the session (it is not idle then)."""

    def leased(self, session: Session) -> Iterable[tuple[str, list[Any]]]:
        """(stream, request ids) the transport writes for the session and must keep leased."""

    async def renew(self, session: Session) -> None:
        """Shared backend, a busy session: renew what the transport holds cluster-wide for it
        (the HTTP transport: its one standalone GET stream)."""

    def forget(self, session: Session) -> None:
        """The session is let go here: what the transport counts for it against its principal's
        budgets (the HTTP transport: unread retained streams) no longer counts."""


class ClusterLink(Protocol):
    """What the manager asks of the processes sharing its backend
    (:class:`mcphost.sessions.cluster.Cluster`, a sibling in the layers, so named by shape here)."""

    #: This process's name among them.
    worker: str
    #: Per session-channel message type, what this process does with it for a session held here.
    session_handlers: dict[str, Callable[[Session, dict[str, Any]], Any]]

    def attach(self, session: Session) -> Any:
        """Hold ``session`` here: follow its channel."""

    def detach(self, session_id: str) -> None:
        """Stop following the channel of a session let go here."""

    async def publish(self, channel: str, message: dict[str, Any]) -> None:
        """Send ``message`` to every process following ``channel``."""


class LifecycleHooks(Protocol):
    """The plugins' lifecycle hooks, as one object the host hands the manager.

    Only the manager calls them: transports open and close sessions through the manager.
    """

    #: Whether any plugin implements one of them (a 2026-07-28 request then skips the calls).
    @property
    def active(self) -> bool: ...

    async def connect(self, session: Session, connection: Connection) -> None:
        """Run ``mcphost_connect``; :class:`~mcphost.errors.Refused` when a plugin turns the client away."""

    async def disconnect(self, session: Session, reason: str) -> None:
        """Run ``mcphost_disconnect`` (one connection closed, not the end of the session)."""

    async def terminate(self, session: Session, reason: str) -> None:
        """Run ``mcphost_terminate`` (the session is over)."""


class Link:
    """A connection's hold on its session: the async context manager :meth:`SessionManager.connected`
    returns (a plain class: it is entered on every session-era HTTP request)."""

    __slots__ = ("_connection", "_manager", "_opening", "handed_off", "session")

    def __init__(self, manager: SessionManager, session: Session, connection: Connection, opening: bool) -> None:
        self._manager = manager
        self.session = session
        self._connection = connection
        self._opening = opening
        self.handed_off = False

    async def __aenter__(self) -> Link:
        await self._manager.open(self.session, self._connection, opening=self._opening)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if not self.handed_off:
            await self._manager.close(self.session, "complete")

    def hand_off(self) -> None:
        """From here on the connection's writer runs the disconnect hooks when it ends."""
        self.handed_off = True


class SessionManager:
    """Sessions of one host in this process; see the module docstring."""

    def __init__(self, settings: ServerSettings, backend: Backend, hooks: LifecycleHooks) -> None:
        self.settings = settings
        #: The lifecycle hooks; only :meth:`open`, :meth:`close` and :meth:`terminate` call them.
        self.hooks = hooks
        #: Sessions held in this process, by id.
        self.sessions: dict[str, Session] = {}
        self.use(backend)
        #: Cooperation with other processes on a shared backend (set by :meth:`join`).
        self.cluster: ClusterLink | None = None
        self.driver: Driver | None = None
        # Shared backend only: per session, the state last saved and when the TTL was last restarted.
        self._saved: dict[str, dict[str, Any]] = {}
        self._touched: dict[str, float] = {}
        self._modern_ids = itertools.count(1)
        #: Per quota key (see :func:`~mcphost.sessions.session.quota_key`): sessions held here.
        self.held_by: Counter[str] = Counter()
        #: Per-principal admission: requests in flight, every budget, the refusals of each cap.
        self.admission = Admission(settings)
        #: What each principal holds of every other budget in this process (``admission.budgets``).
        self.budgets: Ledger = self.admission.budgets
        #: Per quota key: how often a budget refused it (``admission.refused_by``), for operators.
        self.refused_by: Counter[str] = self.admission.refused_by
        #: The background work: the reaper and, on a backend with leases, the heartbeat.
        self.upkeep = Upkeep(self)

    # -- wiring ---------------------------------------------------------------------------------

    def use(self, backend: Backend) -> None:
        """Keep sessions in ``backend`` (the host sets it once plugins are loaded)."""
        self.backend = backend
        #: Sessions live in a store shared with other processes (any of them serves any session).
        self.shared = backend.shared
        #: Seconds a request stream's lease lasts; 0 when the backend has no leases (one process).
        self.lease = float(backend.lease) if backend.shared else 0.0
        #: A shared store that keeps each session's subscriptions apart from its state: a
        #: subscription then writes only itself, never the state.
        self._subscriptions_apart = backend.shared and backend.subscriptions_apart

    def join(self, cluster: ClusterLink) -> None:
        """Share sessions with other processes through ``cluster``: an end elsewhere lets go here."""
        self.cluster = cluster
        cluster.session_handlers["end"] = lambda session, _m: self.release(session)
        # The per-principal budgets hold across the processes sharing the backend, when it offers it.
        self.budgets.use_share(self.backend.budget_share(cluster.worker))

    def drive(self, driver: Driver) -> None:
        """Register the transport that keeps per-session state (one per manager)."""
        self.driver = driver

    @property
    def events(self) -> EventLog:
        """The backend's event log (a transport's session streams write and follow it)."""
        return self.backend.events

    @property
    def worker(self) -> str | None:
        """This process's id among those sharing the backend (None on a backend of its own)."""
        return self.cluster.worker if self.cluster is not None else None

    async def hold(self, key: str) -> bool:
        """Hold ``key`` cluster-wide for this process for a lease (taken again to renew it); False
        while another process holds it. Always True without leases (one process: nothing to share)."""
        if not self.lease or self.cluster is None:
            return True
        return await self.backend.hold(key, self.cluster.worker, self.lease)

    async def unhold(self, key: str) -> None:
        """Let go of a key :meth:`hold` took."""
        if self.lease and self.cluster is not None:
            await self.backend.unhold(key, self.cluster.worker)

    def get(self, session_id: str) -> Session | None:
        """The session held here under ``session_id`` (no store lookup, no owner check)."""
        return self.sessions.get(session_id)

    # -- creation ---------------------------------------------------------------------------------

    def new(self, principal: Principal | None = None, remote: str | None = None) -> Session:
        """A fresh session with a random id (256 bits, URL-safe, visible ASCII only), held here.

        No cap: for a transport that serves one session (stdio) or for in-process use.
        """
        session = Session(secrets.token_urlsafe(32), principal=principal)
        session.quota = quota_key(principal, remote)
        session.node = this_node()
        self.sessions[session.id] = session
        self.held_by[session.quota] += 1
        return session

    async def create(self, principal: Principal | None, remote: str | None = None) -> Session:
        """A new session for a network client (``remote``: its ``host:port``), within the caps;
        :class:`TooManySessions` beyond them.

        The per-principal cap counts the sessions held in this process, or on a shared backend
        whose session store offers ``count_of(quota)`` the sessions it holds for the caller (so
        the cap holds across processes).
        """
        held = await self.backend.sessions.count() if self.shared else len(self.sessions)
        if held >= self.settings.max_sessions:
            raise TooManySessions(cap=self.settings.max_sessions, retry_after=next_expiry(self, None))
        cap = self.settings.max_sessions_per_principal
        if cap:
            key = quota_key(principal, remote)
            shared_count = await self.backend.sessions.count_of(key) if self.shared else None
            if (shared_count if shared_count is not None else self.held_by[key]) >= cap and (
                    shared_count is not None or not await self._expire_idle(key) or self.held_by[key] >= cap):
                self.admission.refused(key)
                self.budgets.count_refusal(key, "sessions")
                retry_after = await shared_expiry(self, key) if shared_count is not None else None
                raise TooManySessions(per_principal=True, cap=cap,
                                      retry_after=next_expiry(self, key) if retry_after is None else retry_after)
        session = self.new(principal, remote)
        session.embryonic = True  # until its next request (see open)
        if self.cluster is not None:
            self.cluster.attach(session)
        if self.driver is not None:
            await self.driver.attach(session, None)
        return session

    async def _expire_idle(self, key: str) -> bool:
        """At the caller's session cap: end its sessions held here whose idle time ran out, now
        rather than at the reaper's next round, so their slots come back the moment their window
        ends. True when any was ended."""
        now = time.time()
        ended = False
        for session in [s for s in self.sessions.values() if s.quota == key]:
            busy = bool(session.inflight) or (self.driver is not None and self.driver.busy(session))
            if not busy and now - session.last_active > idle_limit(session, self.settings):
                await self.end(session, "expired")
                ended = True
        return ended

    def ephemeral(self, request: Any, principal: Principal | None, outlet: Any, remote: str | None = None
                  ) -> Session:
        """The short-lived session of one 2026-07-28 request (never stored, never listed)."""
        session = Session(f"m{next(self._modern_ids)}", principal=principal, protocol_version=request.version)
        session.quota = quota_key(principal, remote)
        session.era = "modern"
        session.client_capabilities = request.client_capabilities
        session.client_info = request.client_info or {}
        session.log_level = request.log_level
        session.initialized = True
        session.outlet = outlet
        return session

    # -- lookup -----------------------------------------------------------------------------------

    async def lookup(self, session_id: str, principal: Principal | None) -> Session | None:
        """The live session ``session_id`` of ``principal``; None when unknown, ended or foreign.

        On a shared backend a session another process created is loaded from the store, and a
        held one is checked to be still there (restarting its TTL).
        """
        session = self.sessions.get(session_id)
        if self.shared:
            if session is None:
                session = await self._load(session_id) if _SESSION_ID.fullmatch(session_id) else None
            elif not session.closed and not await self._still_there(session):
                session = None
        # A foreign principal gets exactly the unknown-session answer: no existence oracle.
        if session is None or session.closed or _key(session.principal) != _key(principal):
            return None
        return session

    async def find(self, session_id: str) -> Session | None:
        """The live session ``session_id`` whoever it belongs to: held here or, on a shared backend,
        loaded from the store (as a request of its client on this process would load it). For
        operators, who end sessions they do not own: no owner check. None when unknown or ended."""
        session = self.sessions.get(session_id)
        if self.shared:  # as lookup does, owner check aside
            if session is None:
                session = await self._load(session_id) if _SESSION_ID.fullmatch(session_id) else None
            elif not session.closed and not await self._still_there(session):
                session = None
        return None if session is None or session.closed else session

    async def _load(self, session_id: str) -> Session | None:
        """A session another process (or an earlier run of this one) created, from the store."""
        data = await self.backend.sessions.load(session_id)
        if data is None:
            return None
        held = self.sessions.get(session_id)
        if held is not None:  # a concurrent request loaded it meanwhile
            return held
        session = Session.from_state(data)
        self.sessions[session.id] = session
        self.held_by[session.quota] += 1
        self.budgets.force(session.quota, "subscriptions", len(session.subscriptions))
        if self.cluster is not None:
            self.cluster.attach(session)
        if self.driver is not None:
            await self.driver.attach(session, data)
        self._saved[session_id] = self._snapshot(session)
        self._touched[session_id] = time.monotonic()
        return session

    async def _still_there(self, session: Session) -> bool:
        """Restart the session's TTL in the store (at most once a second); False when it is gone."""
        now = time.monotonic()
        if now - self._touched.get(session.id, 0.0) < 1.0:
            return True
        self._touched[session.id] = now
        if not await self.backend.sessions.touch(session.id):
            self.release(session)  # ended elsewhere (or expired): gone here too
            return False
        if self.driver is not None:
            await self.driver.keep(session)
        return True

    # -- subscriptions ----------------------------------------------------------------------------

    async def subscribe(self, session: Session, uri: str) -> bool:
        """Follow ``uri`` for ``session`` within ``server.max_subscriptions``; False, following
        nothing new, when it already follows that many other URIs.

        A shared store that keeps subscriptions apart gets just this one (it checks the budget
        itself, atomically, whichever processes hold the session); otherwise the set is saved
        with the session's state.
        """
        if uri in session.subscriptions:
            return True
        limit = self.settings.max_subscriptions
        if len(session.subscriptions) >= limit:
            return False
        if await self.budgets.take(session.quota, "subscriptions") is not None:
            return False
        if self._subscriptions_apart and not await cast(SubscriptionStore, self.backend.sessions).subscribe(
                session.id, uri, limit):
            self.budgets.release(session.quota, "subscriptions")
            return False
        if session.closed or uri in session.subscriptions:  # ended, or followed by a concurrent call meanwhile
            self.budgets.release(session.quota, "subscriptions")
        session.subscriptions.add(uri)
        return True

    async def unsubscribe(self, session: Session, uri: str) -> None:
        """Stop following ``uri`` for ``session`` (nothing when it did not)."""
        if self._subscriptions_apart:
            await cast(SubscriptionStore, self.backend.sessions).unsubscribe(session.id, uri)
        if uri in session.subscriptions and not session.closed:
            session.subscriptions.discard(uri)
            self.budgets.release(session.quota, "subscriptions")

    # -- the store (shared backend) ---------------------------------------------------------------

    def _snapshot(self, session: Session) -> dict[str, Any]:
        """What a shared store keeps of a session (activity time aside, which is in the TTL;
        subscriptions aside when the store keeps them apart)."""
        snapshot = session.to_state()
        del snapshot["last_active"]
        if session.embryonic:  # the store keeps it for embryonic_timeout; saved again at its second request
            snapshot["embryonic"] = True
        if self._subscriptions_apart:
            del snapshot["subscriptions"]
        if self.driver is not None:
            snapshot.update(self.driver.durable(session))
        return snapshot

    async def persist(self, session: Session) -> None:
        """Save the session's durable state when it changed (shared backend only)."""
        if not self.shared or session.closed or session.id not in self.sessions:
            return
        snapshot = self._snapshot(session)
        if snapshot != self._saved.get(session.id):
            await self.backend.sessions.save({**snapshot, "last_active": session.last_active})
            self._saved[session.id] = snapshot
            self._touched[session.id] = time.monotonic()

    # -- the lifecycle: open, close, terminate (the only callers of the lifecycle hooks) ---------------

    async def open(self, session: Session, connection: Connection, *, opening: bool = False) -> None:
        """Run the connect hooks for one connection of ``session``.

        The one refusal rule, for every transport and both eras: a refused connect fires
        ``mcphost_disconnect(session, "refused")`` at once; when this connection is the one that
        opened the session (``opening``: an initialize, the start of a stdio or in-memory session,
        every 2026-07-28 request) ``mcphost_terminate(session, "refused")`` follows at once and the
        session is forgotten. Then :class:`~mcphost.errors.Refused` propagates for the transport to
        word. A refused connection to a session already running leaves the session as it was.
        """
        if not opening:
            session.embryonic = False  # a second request: an ordinary session from now on
        try:
            await self.hooks.connect(session, connection)
        except Refused:
            await self.hooks.disconnect(session, "refused")
            if opening:
                await self.terminate(session, "refused")
                if session.era != "modern":  # a session-era session may have opened its event log
                    await self.backend.events.drop(session.id)
            raise

    def connected(self, session: Session, connection: Connection, *, opening: bool = False) -> Link:
        """One connection of ``session`` from its connect hooks to its disconnect hooks, in one block:
        ``async with manager.connected(session, connection) as link``.

        :meth:`open` runs on entry (a refusal propagates, the refusal rule having run); when the
        block is left, whichever way, :meth:`close` runs with ``complete``, unless the block
        handed the connection over (:meth:`Link.hand_off`) to a writer that reports its own end
        (an SSE stream: ``complete`` or ``dropped``).
        """
        return Link(self, session, connection, opening)

    async def close(self, session: Session, reason: str, *, end: str | None = None) -> None:
        """One connection of ``session`` closed: ``mcphost_disconnect(reason)``; with ``end`` the
        session is over too, and ``mcphost_terminate(end)`` follows (once: see :meth:`terminate`)."""
        await self.hooks.disconnect(session, reason)
        if end is not None:
            await self.terminate(session, end)

    async def terminate(self, session: Session, reason: str) -> None:
        """End ``session`` here: cancel its work, forget it, run ``mcphost_terminate`` once."""
        if session.closed:
            return
        self.release(session)
        await self.hooks.terminate(session, reason)

    def release(self, session: Session) -> None:
        """Stop holding ``session`` in this process: cancel its local work, forget it.

        On a shared backend this is not the end of the session (another process, or this one
        later, loads it again from the store), so no hook runs; :meth:`terminate` ends it.
        """
        if session.closed and session.id not in self.sessions:
            return
        session.closed = True
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]
            self.held_by[session.quota] -= 1
            if self.held_by[session.quota] <= 0:
                del self.held_by[session.quota]
            self.budgets.release(session.quota, "subscriptions", len(session.subscriptions))
            if self.driver is not None:
                self.driver.forget(session)  # the transport's per-session budgets
            self._saved.pop(session.id, None)
            self._touched.pop(session.id, None)
        for task in list(session.inflight.values()):
            task.cancel()
        for future in list(session.pending.values()):
            if not future.done():
                future.cancel()
        if self.cluster is not None and session.id not in self.sessions:
            self.cluster.detach(session.id)

    async def end(self, session: Session, reason: str) -> None:
        """The session is over everywhere (DELETE, expiry, lifetime, shutdown): terminate it once,
        drop its event logs and its stored state, and tell other holders to let go."""
        await self.terminate(session, reason)
        await self.backend.events.drop(session.id)
        await self.backend.sessions.delete(session.id)
        if self.shared and self.cluster is not None:
            await self.cluster.publish(f"s:{session.id}", {"t": "end"})  # other holders let go

    # -- background work --------------------------------------------------------------------------

    async def start(self) -> None:
        """Start reaping idle and over-age sessions, and renewing leases on a shared backend."""
        self.upkeep.start()

    async def drain(self, timeout: float) -> None:
        """Stop reaping, and give requests in flight up to ``timeout`` seconds to finish."""
        self.upkeep.stop_reaping()
        inflight = [t for s in self.sessions.values() for t in s.inflight.values()]
        if inflight:
            await asyncio.wait(inflight, timeout=timeout)

    async def stop(self) -> None:
        """End every session held here (reason ``shutdown``), once.

        On a shared backend the store keeps them: their clients go on with another process.
        """
        await self.drain(0)
        self.upkeep.stop_beating()
        for session in list(self.sessions.values()):
            if self.shared:
                self.release(session)
            else:
                try:
                    await self.end(session, "shutdown")
                except Exception:
                    log.exception("could not end session %s…", session.id[:8])
        await self.budgets.give_back()  # the cluster's budget allowances this process held


class Upkeep:
    """A SessionManager's background work: the reaper (idle and over-age sessions) and, on a
    backend with leases, the heartbeat (request leases, budget allowances, busy sessions' TTLs)."""

    def __init__(self, manager: SessionManager) -> None:
        self.manager = manager
        self._reaper: asyncio.Task[None] | None = None
        self._heartbeat: asyncio.Task[None] | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._reaper is None:
            self._reaper = loop.create_task(self.reap())
        if self.manager.lease and self._heartbeat is None:
            self._heartbeat = loop.create_task(self.beat())

    def stop_reaping(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None

    def stop_beating(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None

    async def reap(self) -> None:
        """End sessions that were idle too long or lived too long."""
        manager, settings = self.manager, self.manager.settings
        limits = [settings.session_idle_timeout, settings.embryonic_timeout]
        if settings.session_max_lifetime:
            limits.append(settings.session_max_lifetime)
        period = max(0.05, min(30.0, *(limit / 4 for limit in limits)))
        while True:
            await asyncio.sleep(period)
            if manager.shared:
                await self.reap_expired()
            now = time.time()
            for session in list(manager.sessions.values()):
                busy = bool(session.inflight) or (manager.driver is not None and manager.driver.busy(session))
                try:
                    if settings.session_max_lifetime and now - session.created_at > settings.session_max_lifetime:
                        await manager.end(session, "lifetime")
                    elif not busy and now - session.last_active > idle_limit(session, settings):
                        if manager.shared:
                            # Idle here, maybe busy elsewhere: the store expires it (its TTL is the
                            # idle timeout, restarted by every request on any process).
                            manager.release(session)
                        else:
                            await manager.end(session, "expired")
                except Exception:  # a backend hiccup must not stop the reaper for good
                    log.exception("could not end session %s…", session.id[:8])

    async def reap_expired(self) -> None:
        """Shared backend: end the sessions whose idle time ran out in the store, wherever they were
        last used. The store hands each one to exactly one process (its expiry index), so the
        terminate hook fires once across the cluster."""
        manager = self.manager
        try:
            for session_id, data in await manager.backend.sessions.expired():
                session = manager.sessions.get(session_id)
                if session is None and data is not None:
                    session = Session.from_state(data)
                if session is not None:
                    await manager.terminate(session, "expired")
                await manager.backend.events.drop(session_id)
                if manager.cluster is not None:
                    await manager.cluster.publish(f"s:{session_id}", {"t": "end"})  # other holders let go
        except BackendUnavailable as exc:
            log.warning("could not reap expired sessions: %s", exc)
        except Exception:
            log.exception("reaping expired sessions failed")

    async def beat(self) -> None:
        """Renew the leases of the request streams this process is writing, three times a lease.

        After a failed renewal it tries again every :data:`RENEW_RETRY` seconds until one goes
        through: a lease that lapsed while the store refused writes is taken back as soon as it
        takes them again, well within the grace the store gives an owner before another process
        may settle the stream (RELIABILITY H12: a renewal failure never makes a client resend a
        request still running here).
        """
        manager = self.manager
        failed = False
        while True:
            await asyncio.sleep(min(RENEW_RETRY, manager.lease / 3) if failed else manager.lease / 3)
            streams: list[tuple[str, str, list[Any]]] = []
            if manager.driver is not None:
                for session in list(manager.sessions.values()):
                    streams.extend((session.id, stream, ids) for stream, ids in manager.driver.leased(session))
            failed = True
            try:
                await cast(LeasedEventLog, manager.backend.events).lease(streams, manager.lease)
                failed = False
            except BackendUnavailable as exc:
                log.warning("could not renew %d request leases: %s", len(streams), exc)
            except Exception:
                log.exception("renewing request leases failed")
            # The budget allowances this process holds: renewed (before the sessions below, whose
            # number may delay the loop), and the spare given back. A failure is logged once by
            # the ledger, which falls back to per-process limits until a sync goes through.
            try:
                await manager.budgets.sync()
            except BackendUnavailable:
                pass  # logged by the ledger, once per outage
            except Exception:
                log.exception("syncing the budget allowances failed")
            # A session with an open GET stream or a running call is not idle, whoever holds it,
            # and what its transport holds cluster-wide stays its own.
            for session in list(manager.sessions.values()):
                if not (session.inflight or (manager.driver is not None and manager.driver.busy(session))):
                    continue
                try:
                    await manager.backend.sessions.touch(session.id)
                    if manager.driver is not None:
                        await manager.driver.renew(session)
                except BackendUnavailable as exc:
                    log.warning("could not keep session %s… alive: %s", session.id[:8], exc)
                except Exception:
                    log.exception("keeping session %s… alive failed", session.id[:8])


async def shared_expiry(manager: SessionManager, key: str) -> int | None:
    """Whole seconds until the first of ``key``'s sessions counted by the shared store drops out of
    its count (the store's ``first_expiry``: it counts sessions held by every process, and the count
    drops then unless a save renews that session first); None when the store does not say."""
    wait = await manager.backend.sessions.first_expiry(key)
    return None if wait is None else max(1, math.ceil(wait))


def next_expiry(manager: SessionManager, key: str | None) -> int:
    """Whole seconds until the first session ``manager`` holds for ``key`` (None: for anyone)
    expires if nothing else happens: a busy one counts its whole idle limit, since its idle time
    starts once it is done. The Retry-After of a refusal at a sessions cap (never shorter than the
    wait)."""
    now, wait = time.time(), manager.settings.session_idle_timeout
    for session in manager.sessions.values():
        if key is not None and session.quota != key:
            continue
        limit = idle_limit(session, manager.settings)
        busy = bool(session.inflight) or (manager.driver is not None and manager.driver.busy(session))
        wait = min(wait, limit if busy else session.last_active + limit - now)
    return max(1, math.ceil(wait))


def idle_limit(session: Session, settings: ServerSettings) -> float:
    """Seconds ``session`` may stay idle: ``embryonic_timeout`` until its second request (never more
    than ``session_idle_timeout``)."""
    if session.embryonic:
        return min(settings.embryonic_timeout, settings.session_idle_timeout)
    return settings.session_idle_timeout


def _key(principal: Any) -> Any:
    return None if principal is None else principal.key
