"""The state backend's interfaces: session store, event log, broker and task store.

The kernel and transports use only these; the built-in in-memory backend implements them for
one process, a shared backend (Redis) for many. Everything stored is JSON-able, so a
store shared between processes can hold it.

Event log: each session has streams (one per POST that answers with SSE, plus the standalone
GET stream); each stream is an append-only sequence of events numbered from 1. An event is
stored before it is written to any socket (write-ahead), so a client that reconnects with
``Last-Event-ID`` gets exactly what it missed. ``read`` blocks until there is something after
a position, like Redis ``XREAD BLOCK``, which is how live SSE writers follow a stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from mcphost.budgets import BudgetShare
from mcphost.pins import PinStore


@dataclass(frozen=True, slots=True)
class Event:
    """One stored SSE event. ``message`` is None for the priming event (empty data). ``data`` is
    the message as the log stored it (``jsonrpc.encode``), when it has it: written out as is, so a
    reply is encoded once on its way from the handler to the socket."""

    seq: int
    message: dict[str, Any] | None
    data: bytes | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class StreamRead:
    """What ``EventLog.read`` returns: events after the position, and whether the stream ended."""

    events: list[Event]
    done: bool


@dataclass(frozen=True, slots=True)
class SharedKey:
    """One key of a key ring the processes on a backend share (see ``Backend.keyring``).

    ``active_from`` (Unix time) is when it may start signing: a rotated-in key is first only
    verified, for long enough that every process has read it before any of them signs with it.
    """

    secret: bytes
    active_from: float


@dataclass(frozen=True, slots=True)
class SessionPage:
    """One page of ``Backend.live_sessions``: the stored states of some live sessions (as
    ``SessionStore.load`` returns them, ``last_active`` as the store last knew it), and the cursor
    that asks for the next page (None: this was the last one). A session may appear on two pages
    of one walk (callers drop the repeats); one alive from the first page to the last appears."""

    states: list[dict[str, Any]]
    cursor: str | None


class KeyRingUnreadable(ValueError):
    """A shared key ring exists but cannot be read (not the JSON a backend writes): a one-line
    explanation, never a silent replacement (outstanding sealed states would all break)."""


class UnknownEvent(LookupError):
    """The stream or position is unknown, or was trimmed away (retention)."""


class BackendUnavailable(Exception):
    """The shared state store cannot be reached or used right now (outage, stall, out of memory).

    Raised by any backend operation instead of hanging or leaking a driver exception. The
    transports answer a request that needed the backend with 503 and ``Retry-After:
    retry_after`` (whole seconds); nothing else is affected and the backend recovers by itself.
    """

    def __init__(self, message: str = "The state backend is unavailable", *, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class SessionStore(Protocol):
    """Session states by id. On a shared store a session whose idle time ran out is gone for
    ``load`` at once; ``expired()`` then hands it, with its last state, to exactly one caller
    across every process (who runs the terminate hook), and ``touch`` restarts the idle time.
    ``ids()`` lists the live sessions. ``count_of(quota)`` counts the live sessions whose state's
    ``quota`` is ``quota`` (on a shared store it makes ``max_sessions_per_principal`` hold across
    processes). ``first_expiry(quota)``: seconds until the first of those sessions drops out of the
    count (None: none, or the store cannot say), the ``Retry-After`` of a refusal at that cap.
    A state saved with ``"embryonic": True`` (no second request yet) may be kept for
    ``server.embryonic_timeout`` only; the manager saves it again, without the flag, at its second request."""

    async def load(self, session_id: str) -> dict[str, Any] | None: ...
    async def save(self, state: dict[str, Any]) -> None: ...
    async def delete(self, session_id: str) -> None: ...
    async def count(self) -> int: ...
    async def touch(self, session_id: str) -> bool: ...
    async def ids(self) -> list[str]: ...
    async def expired(self, limit: int = 100) -> list[tuple[str, dict[str, Any] | None]]: ...
    async def count_of(self, quota: str) -> int: ...
    async def first_expiry(self, quota: str) -> float | None: ...


class EventLog(Protocol):
    """``begin(session, stream, request_ids, lease)`` opens a request stream, takes its lease for
    ``lease`` seconds (0: no leases) and appends the priming event, in one step (a round trip).

    ``append(..., data=)`` hands over the message already encoded (``jsonrpc.encode``) when the
    caller has it: a log that stores bytes (Redis) stores those instead of encoding the message
    again, and may return them as the event's ``data``; one that keeps the message itself may
    ignore them."""

    async def open(self, session_id: str, stream_id: str) -> None: ...
    async def begin(self, session_id: str, stream_id: str, request_ids: list[Any], lease: float) -> None: ...
    async def append(self, session_id: str, stream_id: str, message: dict[str, Any] | None, *,
                     final: bool = False, data: bytes | None = None) -> int: ...
    async def finish(self, session_id: str, stream_id: str) -> None: ...
    async def read(self, session_id: str, stream_id: str, after: int, timeout: float) -> StreamRead: ...
    async def exists(self, session_id: str, stream_id: str) -> bool: ...
    async def discard(self, session_id: str, stream_id: str) -> None: ...
    async def drop(self, session_id: str) -> None: ...


class SubscriptionStore(Protocol):
    """The session store of a backend with ``subscriptions_apart``: subscriptions kept one by one."""

    async def subscribe(self, session_id: str, uri: str, limit: int) -> bool: ...
    async def unsubscribe(self, session_id: str, uri: str) -> None: ...


class LeasedEventLog(EventLog, Protocol):
    """The event log of a backend with a ``lease``: request streams leased to the process writing them."""

    async def lease(self, streams: list[tuple[str, str, list[Any]]], ttl: float) -> None: ...
    async def orphaned(self, session_id: str, stream_id: str) -> list[Any] | None: ...
    async def settle(self, session_id: str, stream_id: str, messages: list[dict[str, Any]]) -> bool: ...


class TaskStore(Protocol):
    """Tasks (the 2026-07-28 tasks extension): one JSON record per task id, kept ``ttl`` seconds.

    ``create`` returns only once the record is durable: a ``tasks/get`` on any process must
    find it. ``ttl`` None keeps the record until deleted.
    """

    async def create(self, task_id: str, record: dict[str, Any], ttl: float | None) -> None: ...
    async def load(self, task_id: str) -> dict[str, Any] | None: ...
    async def save(self, task_id: str, record: dict[str, Any], ttl: float | None) -> None: ...
    async def delete(self, task_id: str) -> None: ...


class Subscription(Protocol):
    """What ``Broker.subscribe`` returns. Calling it unsubscribes (idempotent)."""

    def __call__(self) -> None: ...

    async def ready(self) -> None:
        """Return once messages published from now on reach the callback (the store confirmed it)."""
        ...


class Broker(Protocol):
    """Routes a message to whichever process waits for it (a reply, a cancellation, a notification).

    Delivery is at most once and only to subscribers present when the message is published;
    ``callback(message)`` may be a coroutine function. Channels are plain strings.
    """

    async def publish(self, channel: str, message: dict[str, Any]) -> None: ...
    def subscribe(self, channel: str, callback: Any) -> Subscription: ...


class Backend:
    """The state backend a ``mcphost_backend`` hook returns: subclass it.

    The defaults are those of a backend for one process: not ``shared``, no leases (``lease``
    0), subscriptions saved with the session state, always healthy, nothing to start or close.
    A subclass provides ``sessions``, ``events``, ``broker`` and ``tasks`` and implements the
    operations below that have no default. The host and the kernel never probe a backend for
    optional parts: what is optional has a default here.

    ``shared`` says whether several processes can use it together.

    ``lease`` (seconds, 0: none): a shared backend that leases request streams to the process
    writing them; its event log then also offers ``lease(streams, ttl)``, ``orphaned(session,
    stream)`` and ``settle(session, stream, messages)`` (see the Redis backend).

    ``subscriptions_apart``: the session store keeps each session's resource subscriptions apart
    from its state, with ``subscribe(session_id, uri, limit) -> bool`` and ``unsubscribe(session_id,
    uri)``; a subscription then writes only itself.

    ``claim(key, ttl)`` marks ``key`` as used for ``ttl`` seconds and returns True only for the
    first claim: the single-use tracking of sealed 2026-07-28 request states (claim a digest of
    the state when it is redeemed; a second redemption within its validity is then refused).

    ``hold(key, owner, ttl)`` holds ``key`` for ``owner`` for ``ttl`` seconds and returns True
    when it was free, expired or already ``owner``'s (a renewal), False while another owner holds
    it; ``unhold(key, owner)`` lets go of it if ``owner`` holds it. This is how a per-session rule
    that one process enforces for itself (one standalone GET stream) holds across processes.

    ``read_keyring(name)``: the ring as stored without creating it (None when it is missing;
    :class:`KeyRingUnreadable` when it cannot be read), so a running cluster notices a ring that
    was deleted or damaged instead of silently starting a new one. The default reads it through
    ``keyring(name)`` (creating it when missing): override it on a shared backend.

    ``keyring(name)`` returns the key ring called ``name`` that every process on this backend
    shares, newest first, creating it (one random key, active at once) when there is none:
    concurrent first calls from many processes agree on one key. ``rotate_keyring(name,
    activate_in, keep)`` adds a new random key that starts signing ``activate_in`` seconds from
    now, drops keys superseded more than ``keep`` seconds ago, and returns the new ring. The
    2026-07-28 ``requestState`` is sealed with the ring ``"state"`` unless ``[server]
    state_keys`` is set. Both raise BackendUnavailable when the backend cannot be reached.

    ``budget_share(node)``: a shared backend that holds the per-principal budgets across
    processes returns a :class:`~mcphost.budgets.BudgetShare` for the process named ``node`` (the
    ledger leases allowances from it; see :mod:`mcphost.budgets`). The default, None, keeps each
    process's budgets its own.

    ``live_sessions(cursor, count)`` walks the live sessions in the store, for operators (the
    console lists a cluster's sessions with it): one :class:`SessionPage` of about ``count``
    states per call (None as ``cursor`` starts a walk; each call is bounded, so a caller caps
    the walk by stopping). A shared backend overrides it; the default, for a backend of one
    process, returns an empty last page: the process's own session manager holds every session.

    ``health()`` is asked by the ``/readyz`` probe: True when the backend can serve requests now
    (for a networked store: it answered a round trip such as PING); False, or an exception, when
    it cannot. It must answer quickly (it runs on every probe) and must not try to repair
    anything; the host bounds it with a 2 s timeout and counts a timeout as unhealthy.
    """

    name: str = "backend"
    shared: bool = False
    lease: float = 0.0
    subscriptions_apart: bool = False
    sessions: SessionStore
    events: EventLog
    broker: Broker
    tasks: TaskStore

    async def start(self) -> None:
        """Connect, or whatever the backend needs before it serves (default: nothing)."""

    async def close(self) -> None:
        """Let go of connections and background work (default: nothing)."""

    async def health(self) -> bool:
        return True

    def budget_share(self, node: str) -> BudgetShare | None:
        return None

    async def live_sessions(self, cursor: str | None = None, count: int = 100) -> SessionPage:
        return SessionPage([], None)

    async def claim(self, key: str, ttl: float) -> bool:
        raise NotImplementedError

    async def hold(self, key: str, owner: str, ttl: float) -> bool:
        raise NotImplementedError

    async def unhold(self, key: str, owner: str) -> None:
        raise NotImplementedError

    async def keyring(self, name: str) -> list[SharedKey]:
        raise NotImplementedError

    async def rotate_keyring(self, name: str, activate_in: float, keep: float) -> list[SharedKey]:
        raise NotImplementedError

    async def read_keyring(self, name: str) -> list[SharedKey] | None:
        return await self.keyring(name)

    def pins(self) -> PinStore | None:
        """Where pinned definitions live on this backend (see :mod:`mcphost.pins`); None (the
        default): the host keeps them in a file under the platform's state directory."""
        return None

    # -- small values (plugins' records: the proxy's upstream credentials, sign-in states) --------
    # ``put_value(key, value, ttl)`` stores opaque bytes under ``key`` (``ttl`` seconds, None: kept
    # until deleted), ``get_value`` reads them (None when absent or expired), ``take_value`` reads and
    # deletes them at once (single use: only one caller across processes gets them), ``delete_value``
    # removes them (True when they were there), ``value_keys(prefix)`` lists the keys under ``prefix``.
    # Callers encrypt what must not be readable at rest: the backend stores the bytes as given.

    async def put_value(self, key: str, value: bytes, ttl: float | None = None) -> None:
        raise NotImplementedError

    async def get_value(self, key: str) -> bytes | None:
        raise NotImplementedError

    async def take_value(self, key: str) -> bytes | None:
        raise NotImplementedError

    async def delete_value(self, key: str) -> bool:
        raise NotImplementedError

    async def value_keys(self, prefix: str) -> list[str]:
        raise NotImplementedError
