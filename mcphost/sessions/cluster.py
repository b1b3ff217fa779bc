"""Working with other processes on a shared backend: who holds what, and how messages reach it.

Only built when the backend is shared (``backend.shared``); on the in-memory backend there is
one process and nothing here runs. Nothing in it knows which backend it runs on: it uses the
broker, the claims and the event log through their interfaces.

- Every process that holds a session (it loaded it to serve a request) subscribes to the
  session's channel ``s:<id>``. A message for the session that this process cannot act on
  (the client's answer to a server-to-client request, a cancellation, a deferred reply, the
  end of the session) is published there, and the process that holds the waiting future, the
  task or the stream acts on it. Outbound request ids are numbered from a random base per
  process, so answers never reach the wrong waiter.
- Notifications for many sessions (a resource update, a list change) are published once on
  the channel ``all``; each process delivers them to the sessions it holds, and a claim per
  (notification, session) makes sure a session held by two processes gets it once.
- Answers, cancellations and deferred replies (:data:`ACKNOWLEDGED`) are sent with an id and
  re-sent (backing off, for up to :data:`RESEND_FOR` seconds) until the process that acted on
  one acknowledges it on the sender's own channel ``w:<worker>``: a message published while the
  receiver was disconnected from the broker (a Redis restart, a dropped connection), or while
  the sender could not reach it, is not lost. A receiver that already acted on an id only
  acknowledges it again, so a re-sent message never acts twice.
- Without ``[server] state_keys``, the key that seals 2026-07-28 ``requestState`` is the
  backend's shared key ring ``state``: created once by whichever process asks first, read by
  every process at startup and every :data:`KEY_REFRESH` seconds, so a state sealed on one
  process opens on any other, and a rotation (``mcphost rotate-state-key``) reaches them all.
  A process that cannot read the ring at startup does not start: a private key would make
  every input-required retry that lands elsewhere fail.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mcphost.sessions.backend import BackendUnavailable, KeyRingUnreadable, SharedKey, UnknownEvent

if TYPE_CHECKING:
    from mcphost.protocol.sealed import StateSealer
    from mcphost.sessions.session import Session

log = logging.getLogger("mcphost.cluster")

ALL = "all"
#: Seconds a (notification, session) delivery claim is kept: longer than any broker delay.
CLAIM_TTL = 120.0
#: Seconds the cluster remembers the catalogs it served (for list_changed after an upgrade).
CATALOG_MEMORY = 7 * 24 * 3600.0
#: Session messages sent until acknowledged by the process that acts on them.
ACKNOWLEDGED = frozenset(("response", "cancel", "respond"))
#: Seconds an unacknowledged message is re-sent (a broker outage longer than this loses it).
RESEND_FOR = 30.0
#: First wait for an acknowledgement before re-sending; it doubles up to 2 s.
RESEND_FIRST = 0.25
#: Message ids a process remembers having acted on (duplicates are then only acknowledged).
SEEN_MAX = 4096
#: The event-log stream of a session's standalone GET stream (the HTTP transport's stream "0").
STANDALONE_STREAM = "0"
#: Stored sessions loaded at once when a notification is kept for the sessions no process holds.
STORED_BATCH = 64
#: The backend key ring that seals 2026-07-28 requestState when [server] state_keys is not set.
STATE_RING = "state"
#: Seconds between two reads of the shared key ring by each process.
KEY_REFRESH = 30.0
#: Seconds a rotated-in key only verifies before it signs: every process has read it by then.
KEY_ACTIVATION = 2 * KEY_REFRESH + 10
#: Seconds a process waits at startup for the backend to hand it the shared key ring.
KEY_STARTUP_WAIT = 10.0


def sealing_keys(ring: list[SharedKey], now: float) -> list[bytes]:
    """The ring (newest first) in sealer order: the newest active key signs, every key verifies.

    Keys not yet active come last (verify only). A ring with no active key at all (clocks far
    apart) signs with the oldest pending one rather than not at all.
    """
    active = [key.secret for key in ring if key.active_from <= now]
    pending = [key.secret for key in ring if key.active_from > now]
    if not active:
        active, pending = pending[-1:], pending[:-1]
    return active + pending


class Cluster:
    """This process's side of the cooperation between processes sharing a backend."""

    def __init__(self, backend: Any, held: Callable[[str], Session | None]) -> None:
        self.backend = backend
        self.broker = backend.broker
        #: ``held(session_id)``: the session this process holds under that id, or None.
        self._held = held
        #: A short random name of this process, part of its stream ids.
        self.worker = secrets.token_hex(4)
        # Outbound request ids: a random 31-bit base shifted left by 20 bits (below 2**51, safe
        # as a JavaScript number), so each process numbers its own.
        self.outbound_base = (secrets.randbelow(2**31 - 1) + 1) << 20
        self._subscriptions: dict[str, Any] = {}
        self._all: Any = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._key_follower: asyncio.Future[None] | None = None
        #: Why the shared requestState key ring cannot be followed now (missing or unreadable in
        #: the backend), or None: readiness reports it; the keys read before keep sealing.
        self.key_problem: str | None = None
        self._own: Any = None
        self._acks: dict[str, asyncio.Future[None]] = {}
        self._acted: OrderedDict[str, None] = OrderedDict()
        self._stored_lock = asyncio.Lock()
        #: Handlers by message type for session channels: ``handler(session, message)``.
        self.session_handlers: dict[str, Callable[[Session, dict[str, Any]], Any]] = {}
        #: Handlers by message type for the ``all`` channel: ``handler(message)``.
        self.broadcast_handlers: dict[str, Callable[[dict[str, Any]], Awaitable[None]]] = {}

    async def start(self) -> None:
        self._all = self.broker.subscribe(ALL, self._on_broadcast)
        self._own = self.broker.subscribe(f"w:{self.worker}", self._on_ack)
        try:
            await self._all.ready()
            await self._own.ready()
        except BackendUnavailable:
            log.warning("the broker is not reachable yet; it subscribes when the backend is back")

    async def share_state_keys(self, sealer: StateSealer, wait: float | None = None) -> None:
        """Seal with the backend's shared key ring from now on, and follow its rotations.

        Waits up to ``wait`` seconds for the backend; then raises BackendUnavailable, saying why.
        """
        deadline = time.monotonic() + (KEY_STARTUP_WAIT if wait is None else wait)
        while True:
            try:
                ring = await self.backend.keyring(STATE_RING)
                break
            except KeyRingUnreadable as exc:  # no silent new ring: an operator decides
                raise BackendUnavailable(f"{exc}; not serving with a private key") from None
            except BackendUnavailable as exc:
                if time.monotonic() >= deadline:
                    raise BackendUnavailable(
                        f"cannot read the shared requestState key from the {self.backend.name} backend ({exc}); "
                        "not serving with a private key, which would make 2026-07-28 input-required retries "
                        "fail on every other process. Check the backend (e.g. [plugins.redis] url), or set "
                        "[server] state_keys") from None
                log.warning("waiting for the backend to hand out the shared requestState key: %s", exc)
                await asyncio.sleep(0.5)
        sealer.rekey(sealing_keys(ring, time.time()))
        self._key_follower = asyncio.ensure_future(self._follow_state_keys(sealer))

    async def announce_catalog(self, digests: dict[str, str], notify: Callable[[str], Awaitable[None]]) -> None:
        """Call ``notify(kind)`` for each list whose digest the cluster has not served before.

        Each digest is claimed once in the backend (for :data:`CATALOG_MEMORY`): the first
        process serving a new catalog notifies, the others of the same version do not. The very
        first catalog of a cluster notifies nobody (there was nothing before it).
        """
        for kind, digest in digests.items():
            try:
                if not await self.backend.claim(f"catalog:{kind}:{digest}", CATALOG_MEMORY):
                    continue  # served before (another process of this version announced it)
                if await self.backend.claim(f"catalog:{kind}", CATALOG_MEMORY):
                    continue  # the cluster's first catalog
                log.info("the %s list differs from the one served before: telling connected clients", kind)
                await notify(kind)
            except BackendUnavailable as exc:
                log.warning("could not compare the %s list with the cluster's: %s", kind, exc)

    async def _follow_state_keys(self, sealer: StateSealer) -> None:
        while True:
            await asyncio.sleep(KEY_REFRESH)
            try:
                # Read without creating: a ring deleted under a running cluster is an error to
                # fix, never a silent new key that invalidates every outstanding requestState.
                ring = await self.backend.read_keyring(STATE_RING)
                if ring is None:
                    self._key_trouble(f"the shared requestState key ring is missing from the {self.backend.name} "
                                      "backend (deleted?); still sealing with the keys read before. Run "
                                      "`mcphost rotate-state-key` to start a new ring")
                    continue
                sealer.rekey(sealing_keys(ring, time.time()))
                if self.key_problem is not None:
                    log.warning("the shared requestState key ring is readable again")
                    self.key_problem = None
            except KeyRingUnreadable as exc:
                self._key_trouble(f"{exc}; still sealing with the keys read before")
            except BackendUnavailable as exc:  # keep the keys we have; the next round tries again
                log.warning("could not refresh the shared requestState key: %s", exc)
            except Exception:
                log.exception("refreshing the shared requestState key failed")

    def _key_trouble(self, problem: str) -> None:
        if problem != self.key_problem:  # logged once per change, not every round
            log.error("%s", problem)
        self.key_problem = problem

    async def stop(self) -> None:
        if self._key_follower is not None:
            self._key_follower.cancel()
        if self._own is not None:
            self._own()
        if self._all is not None:
            self._all()
        for unsubscribe in self._subscriptions.values():
            unsubscribe()
        self._subscriptions.clear()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2)

    # -- sessions held here ---------------------------------------------------------------------

    def attach(self, session: Session) -> Any:
        """Hold ``session`` here: number its outbound requests, follow its channel."""
        session.number_outbound_from(self.outbound_base + 1)
        subscription = self._subscriptions.get(session.id)
        if subscription is None:
            subscription = self.broker.subscribe(f"s:{session.id}", lambda m, s=session.id: self._on_session(s, m))
            self._subscriptions[session.id] = subscription
        return subscription

    def detach(self, session_id: str) -> None:
        unsubscribe = self._subscriptions.pop(session_id, None)
        if unsubscribe is not None:
            unsubscribe()

    def tell(self, session_id: str, message: dict[str, Any]) -> None:
        """Publish ``message`` on the session's channel, in the background (from sync code).

        Answers, cancellations and deferred replies are re-sent until acknowledged."""
        if message.get("t") in ACKNOWLEDGED:
            self.spawn(self._send_until_acknowledged(f"s:{session_id}", message))
        else:
            self.spawn(self.publish(f"s:{session_id}", message))

    async def _send_until_acknowledged(self, channel: str, message: dict[str, Any]) -> None:
        key = secrets.token_hex(8)
        message = {**message, "k": key, "w": self.worker}
        acknowledged = asyncio.get_running_loop().create_future()
        self._acks[key] = acknowledged
        deadline = time.monotonic() + RESEND_FOR
        wait = RESEND_FIRST
        try:
            while True:
                try:
                    await self.broker.publish(channel, message)
                except BackendUnavailable:
                    pass  # sent again below, once the broker is back
                try:
                    await asyncio.wait_for(asyncio.shield(acknowledged), wait)
                    return
                except TimeoutError:
                    pass
                if time.monotonic() >= deadline:
                    log.warning("%s on %s was not acknowledged within %ss; nobody waits for it any more",
                                message.get("t"), channel, RESEND_FOR)
                    return
                wait = min(2.0, wait * 2)
        finally:
            self._acks.pop(key, None)

    def _on_ack(self, message: dict[str, Any]) -> None:
        acknowledged = self._acks.get(str(message.get("k")))
        if acknowledged is not None and not acknowledged.done():
            acknowledged.set_result(None)

    def _acknowledge(self, message: dict[str, Any]) -> None:
        self.spawn(self.publish(f"w:{message.get('w')}", {"t": "ack", "k": message.get("k")}))

    async def publish(self, channel: str, message: dict[str, Any]) -> None:
        try:
            await self.broker.publish(channel, message)
        except BackendUnavailable as exc:
            log.warning("could not publish %s on %s: %s", message.get("t"), channel, exc)

    async def broadcast(self, message: dict[str, Any],
                        stored: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any] | None] | None = None
                        ) -> None:
        """Publish to every process (this one included); raises BackendUnavailable.

        ``stored(message, session_state)``, when given, says which notification a stored session
        should get (None: none). Sessions no process holds would miss a broadcast, so this process
        also appends the notification to the standalone stream log of every stored session it is
        for, in the background: it waits there for the session's next GET, on any process. The
        same claim as the holders' makes each session get it once, whoever delivers it.
        """
        message = {**message, "n": secrets.token_hex(8)}
        await self.broker.publish(ALL, message)
        if stored is not None:
            self.spawn(self._deliver_stored(message, stored))

    async def _deliver_stored(self, message: dict[str, Any],
                              stored: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any] | None]) -> None:
        async with self._stored_lock:  # one at a time, in the order sent: a session gets them in order
            await self._deliver_stored_now(message, stored)

    async def _deliver_stored_now(self, message: dict[str, Any],
                                  stored: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any] | None]) -> None:
        sessions, events = self.backend.sessions, self.backend.events
        try:
            ids = await sessions.ids()
            for start in range(0, len(ids), STORED_BATCH):
                states = await asyncio.gather(*(sessions.load(i) for i in ids[start:start + STORED_BATCH]))
                for state in states:
                    note = None if state is None else stored(message, state)
                    if note is None or not await self.first_delivery(str(message["n"]), state["id"]):
                        continue
                    try:
                        await events.append(state["id"], STANDALONE_STREAM, note)
                    except UnknownEvent:
                        pass  # ended meanwhile
        except BackendUnavailable as exc:
            log.warning("could not keep %s for sessions no process holds: %s", message.get("t"), exc)
        except Exception:
            log.exception("keeping %s for sessions no process holds failed", message.get("t"))

    async def first_delivery(self, nonce: str, session_id: str) -> bool:
        """True for exactly one process delivering notification ``nonce`` to ``session_id``."""
        return bool(await self.backend.claim(f"n:{nonce}:{session_id}", CLAIM_TTL))

    def spawn(self, coroutine: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_session(self, session_id: str, message: dict[str, Any]) -> Any:
        key = message.get("k")
        if isinstance(key, str) and key in self._acted:
            self._acknowledge(message)  # a re-send of what was done here: its ack was lost
            return None
        session = self._held(session_id)
        handler = self.session_handlers.get(str(message.get("t")))
        if session is None or handler is None or session.closed:
            return None
        acted = handler(session, message)
        if isinstance(key, str) and acted is True:
            self._acted[key] = None
            while len(self._acted) > SEEN_MAX:
                self._acted.popitem(last=False)
            self._acknowledge(message)
        return None if isinstance(acted, bool) else acted

    async def _on_broadcast(self, message: dict[str, Any]) -> None:
        handler = self.broadcast_handlers.get(str(message.get("t")))
        if handler is not None:
            try:
                await handler(message)
            except Exception:
                log.exception("handling the broadcast %s failed", message.get("t"))
