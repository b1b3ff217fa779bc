"""The Redis backend: sessions, event log, broker, tasks and claims in one Redis server.

Every operation is bounded: a command that cannot be sent or answered within the operation
timeout (a Redis that is down, stalled, paused, out of memory or loading) raises
:class:`~mcphost.sessions.backend.BackendUnavailable` instead of hanging, and the next
operation simply tries again on a fresh connection, so the backend recovers by itself when
Redis is back. The broker's subscriber connection reconnects in the background and
subscribes again to every channel it had.

Keys (``P`` is the configured prefix):

- ``P s:<session>``: the session state as JSON; ``P sessions`` the expiry index, a sorted set of
  session ids scored by when their idle time runs out (restarted by every save or touch). The
  index decides what is alive; the state key outlives it by ``SESSION_GRACE`` for the reaper
  (``expired()``), which hands each expired session to exactly one process.
- ``P u:<session>``: the session's resource subscriptions, a set of URIs beside the state (a
  subscribe writes one member, never the state), expiring and deleted with it.
- ``P h:<key>``: a hold (``hold``/``unhold``), e.g. the one standalone GET stream of a session.
- ``P e:{<session>}`` and ``P e:{<session>}:<stream>``: the event log (see :mod:`.scripts`).
- ``P t:<task>``: one task record as JSON, with its TTL.
- ``P c:<key>``: a claim (``SET NX PX``).
- ``P health``: written by each readiness probe (expires after 10 s).
- ``P k:<name>``: a key ring shared by every process (JSON, newest first; no expiry).
- ``P l:<budget>:<principal>``: the budget allowances each process holds of a principal's
  per-principal budget (a hash by process; see :class:`RedisBudgetShare` and :mod:`.scripts`).
- Channel ``P b:<channel>``: the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
import redis.asyncio as aioredis
from redis import exceptions as redis_errors
from redis.asyncio.connection import ConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from mcphost.sessions.backend import (
    Backend,
    BackendUnavailable,
    Event,
    KeyRingUnreadable,
    SessionPage,
    SharedKey,
    StreamRead,
    UnknownEvent,
)

from . import scripts
from .packing import lighter
from .pins import RedisPinStore
from .waker import StreamWaker, shrink_idle

log = logging.getLogger("mcphost.redis")

T = TypeVar("T")

#: Error replies that mean "Redis cannot take this now", not "this command is wrong".
_TRANSIENT_REPLIES = ("OOM", "LOADING", "BUSY", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN",
                      "NOREPLICAS", "MISCONF")
_TRANSIENT_ERRORS = tuple(getattr(redis_errors, name) for name in ("OutOfMemoryError", "ReadOnlyError")
                          if hasattr(redis_errors, name))
#: Events returned by one read at most (a reader far behind catches up in several reads).
READ_BATCH = 512
#: Seconds between two trims of idle pooled connections (mcphost_redis.waker.shrink_idle).
TRIM_PERIOD = 30.0
#: Seconds a session's state is kept after its idle time ran out, for the reaper to end it with.
SESSION_GRACE = 300.0


@dataclass(frozen=True)
class RedisSettings:
    """The backend's settings, every one resolved (from ``[plugins.redis]``, declared and defaulted in
    :class:`mcphost_redis.settings.RedisConfig`, and ``[server]``)."""

    url: str
    prefix: str
    #: Seconds a single Redis command may take (socket read/write); the whole operation,
    #: reconnect included, is cut off half a second later.
    op_timeout: float
    #: Seconds to establish a connection.
    connect_timeout: float
    #: Seconds a client is told to wait (Retry-After) while Redis is unavailable.
    retry_after: int
    #: Seconds a session is kept without activity.
    session_ttl: float
    #: Events kept per stream, at least (trimming is approximate: ``MAXLEN ~``).
    stream_max_events: int
    #: Seconds an event is kept.
    stream_max_age: float
    #: Seconds without a heartbeat after which a request in flight is taken for lost; its stream is
    #: settled ("send it again") once that has been so for as long again while Redis took writes.
    lease: float
    #: Connections to Redis at most per process (stream readers wait on one shared connection).
    max_connections: int
    #: Seconds a session saved as embryonic (no second request yet) is kept (``server.embryonic_timeout``;
    #: 0: ``session_ttl``): an initialize-and-leave session stops counting against its caller's
    #: ``max_sessions_per_principal`` on every process after it.
    embryonic_ttl: float = 0.0

    @property
    def deadline(self) -> float:
        return self.op_timeout + 0.5


class RedisBackend(Backend):
    """The shared backend: any worker on any machine pointed at the same Redis sees the same state."""

    name = "redis"
    shared = True
    subscriptions_apart = True

    def __init__(self, settings: RedisSettings) -> None:
        self.settings = settings
        common: dict[str, Any] = {
            "socket_connect_timeout": settings.connect_timeout,
            # One quick retry on a fresh connection (a pooled one may be stale after a Redis
            # restart); never on a timeout, which would only double the wait.
            "retry": Retry(NoBackoff(), 1, (RedisConnectionError,)),
            "max_connections": settings.max_connections,
            "health_check_interval": 0,
            # RESP2 everywhere: pub/sub messages arrive as plain replies on the listener's
            # connection (with RESP3 the driver would route them to a push handler instead).
            "protocol": 2,
        }
        pool = lighter(ConnectionPool.from_url(settings.url, socket_timeout=settings.op_timeout, **common))
        # Blocking reads (XREAD BLOCK) wait longer than a command may; their deadline is their own.
        blocking = lighter(ConnectionPool.from_url(settings.url, socket_timeout=None, **common))
        self.redis = aioredis.Redis(connection_pool=pool)
        self.blocking = aioredis.Redis(connection_pool=blocking)
        #: Every wait for a stream's next entry shares one connection (see mcphost_redis.waker).
        self.waker = StreamWaker(blocking, self.redis, settings.deadline)
        self._trimmer: asyncio.Task[None] | None = None
        self._listener_pool = ConnectionPool.from_url(settings.url, socket_timeout=None, **common)
        self.op = Operations(settings)
        #: Seconds a request stream's lease lasts without a heartbeat (see RedisEventLog.lease).
        self.lease = settings.lease
        self.sessions: RedisSessionStore = RedisSessionStore(self)
        self.events: RedisEventLog = RedisEventLog(self)
        self.broker: RedisBroker = RedisBroker(self)
        self.tasks = RedisTaskStore(self)
        self._keyring = self.redis.register_script(scripts.KEYRING)
        self._rotate = self.redis.register_script(scripts.ROTATE)
        self._hold = self.redis.register_script(scripts.HOLD)
        self._unhold = self.redis.register_script(scripts.UNHOLD)

    def key(self, *parts: str) -> str:
        return self.settings.prefix + "".join(parts)

    def pins(self) -> RedisPinStore:
        """Pinned definitions, shared by every process on this Redis (mcphost_redis.pins)."""
        return RedisPinStore(self)

    async def start(self) -> None:
        """Start the broker's listener. Redis need not be up yet: everything reconnects by itself."""
        await self.broker.start()
        if self._trimmer is None:
            self._trimmer = asyncio.get_running_loop().create_task(self._trim_idle(), name="mcphost-redis-trim")

    async def _trim_idle(self) -> None:
        """Close the idle pooled connections every TRIM_PERIOD: a burst's connections do not stay
        open for good (see mcphost_redis.waker.shrink_idle)."""
        while True:
            await asyncio.sleep(TRIM_PERIOD)
            try:
                await shrink_idle(self.redis.connection_pool)
            except Exception:
                log.exception("trimming idle Redis connections failed")

    async def close(self) -> None:
        await self.events.close()
        if self._trimmer is not None:
            self._trimmer.cancel()
            self._trimmer = None
        await self.waker.close()
        await self.broker.close()
        for client in (self.redis, self.blocking):
            with contextlib.suppress(Exception):
                await client.aclose()
        with contextlib.suppress(Exception):
            await self._listener_pool.disconnect()

    async def health(self) -> bool:
        """Whether Redis takes a write within the operation timeout.

        A PING is answered by a Redis that refuses every write (a read-only replica, one over
        ``maxmemory``, a full disk with ``stop-writes-on-bgsave-error``): readiness must not.
        """
        try:
            return bool(await self.op(self.redis.set(self.key("health"), b"1", px=10_000)))
        except BackendUnavailable:
            return False

    def budget_share(self, node: str) -> RedisBudgetShare:
        """The per-principal budgets across every process on this Redis (see mcphost.budgets)."""
        return RedisBudgetShare(self, node)

    async def live_sessions(self, cursor: str | None = None, count: int = 100) -> SessionPage:
        """One page of a walk over the live sessions of every process (see :meth:`RedisSessionStore.page`)."""
        return await self.sessions.page(cursor, count)

    async def put_value(self, key: str, value: bytes, ttl: float | None = None) -> None:
        await self.op(self.redis.set(self.key("v:", key), value, px=None if ttl is None else _ms(ttl)))

    async def get_value(self, key: str) -> bytes | None:
        return _as_bytes(await self.op(self.redis.get(self.key("v:", key))))

    async def take_value(self, key: str) -> bytes | None:
        """Read and delete at once (``GETDEL``): only one process gets a single-use value."""
        return _as_bytes(await self.op(self.redis.getdel(self.key("v:", key))))

    async def delete_value(self, key: str) -> bool:
        return bool(await self.op(self.redis.delete(self.key("v:", key))))

    async def value_keys(self, prefix: str) -> list[str]:
        head = self.key("v:")
        found: list[str] = []
        async for name in self.redis.scan_iter(match=self.key("v:", prefix) + "*", count=500):
            text = name.decode() if isinstance(name, bytes) else str(name)
            found.append(text[len(head):])
        return sorted(found)

    async def claim(self, key: str, ttl: float) -> bool:
        """Mark ``key`` used for ``ttl`` seconds; True only for the first claim (``SET NX PX``)."""
        done = await self.op(self.redis.set(self.key("c:", key), b"1", nx=True, px=_ms(ttl)))
        return bool(done)

    async def hold(self, key: str, owner: str, ttl: float) -> bool:
        """Hold ``key`` for ``owner`` for ``ttl`` seconds (taken, or renewed by the same owner);
        False while another owner holds it."""
        return bool(await self.op(self._hold(keys=[self.key("h:", key)], args=[owner, _ms(ttl)])))

    async def unhold(self, key: str, owner: str) -> None:
        await self.op(self._unhold(keys=[self.key("h:", key)], args=[owner]))

    async def keyring(self, name: str) -> list[SharedKey]:
        """The ring ``name``, created atomically by the first process that asks (one script)."""
        raw = await self.op(self._keyring(keys=[self.key("k:", name)], args=[secrets.token_hex(32), _now_ms()]))
        return _ring(raw, self.key("k:", name))

    async def read_keyring(self, name: str) -> list[SharedKey] | None:
        """The ring ``name`` as stored, without creating it: None when it is missing,
        :class:`KeyRingUnreadable` when it is not a ring."""
        raw = await self.op(self.redis.get(self.key("k:", name)))
        return None if raw is None else _ring(raw, self.key("k:", name))

    async def rotate_keyring(self, name: str, activate_in: float, keep: float) -> list[SharedKey]:
        await self.read_keyring(name)  # a damaged ring is explained, never fed to the script
        raw = await self.op(self._rotate(keys=[self.key("k:", name)],
                                         args=[secrets.token_hex(32), _now_ms(), _ms(activate_in), _ms(keep)]))
        return _ring(raw, self.key("k:", name))


class RedisBudgetShare:
    """The allowances of one process (``node``) in the cluster's per-principal budgets.

    One hash per (budget, principal), one field per process: ``BUDGET_LEASE`` grows this process's
    allowance when the others' live ones leave room under the limit, ``BUDGET_SETTLE`` (the heartbeat,
    every third of ``lease`` seconds) records and renews all of them at once. A process that stops
    renewing loses its allowances ``lease`` seconds (6 by default) after its last heartbeat.
    """

    #: Keys written by one SETTLE at most (a larger sync is sent in several).
    BATCH = 500

    def __init__(self, backend: RedisBackend, node: str) -> None:
        self.node = node
        self.ttl = backend.settings.lease
        self._key = backend.key
        self._op = backend.op
        self._lease = backend.redis.register_script(scripts.BUDGET_LEASE)
        self._settle = backend.redis.register_script(scripts.BUDGET_SETTLE)
        self._redis = backend.redis

    def key(self, budget: str, principal: str) -> str:
        return self._key("l:", budget.replace(" ", "-"), ":", principal)

    async def lease(self, budget: str, key: str, want: int, need: int, limit: int, seq: int,
                    spare: int = 0) -> tuple[int, int]:
        granted, others = await self._op(self._lease(keys=[self.key(budget, key)],
                                                     args=[self.node, want, need, limit, _ms(self.ttl), seq, spare]))
        return int(granted), int(others)

    async def settle(self, allowances: dict[tuple[str, str], int], seq: int) -> dict[tuple[str, str], int]:
        items = list(allowances.items())
        if not items:
            await self._op(self._redis.ping())  # a fallback ends once Redis answers again
        others: dict[tuple[str, str], int] = {}
        for start in range(0, len(items), self.BATCH):
            batch = items[start:start + self.BATCH]
            held = await self._op(self._settle(keys=[self.key(budget, key) for (budget, key), _ in batch],
                                               args=[self.node, _ms(self.ttl), seq, *(units for _, units in batch)]))
            others.update((slot, int(units)) for (slot, _), units in zip(batch, held, strict=True))
        return others

    async def allowances(self, budget: str, key: str) -> dict[str, int]:
        """Every process's live allowance of ``budget`` for ``key`` (for tests and operators; by
        this machine's clock)."""
        raw = await self._op(self._redis.hgetall(self.key(budget, key)))
        now = _now_ms()
        found: dict[str, int] = {}
        for node, value in raw.items():
            units, deadline, _ = (int(part) for part in _text(value).split(":"))
            if deadline > now:
                found[_text(node)] = units
        return found


def _text(value: Any) -> str:
    """A Redis reply item as text (this client reads bytes; the stubs allow str too)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _ring(raw: bytes | str, where: str = "the key ring") -> list[SharedKey]:
    try:
        ring = [SharedKey(bytes.fromhex(entry["k"]), float(entry["f"]) / 1000) for entry in orjson.loads(raw)]
        if not ring or any(len(key.secret) < 16 for key in ring):
            raise ValueError("no key of at least 16 bytes")
    except (ValueError, TypeError, KeyError) as exc:
        raise KeyRingUnreadable(
            f"the requestState key ring in Redis ({where}) is unreadable ({type(exc).__name__}: "
            f"{str(exc)[:80]}); delete that key to start a new ring (every outstanding requestState "
            "becomes invalid)") from None
    return ring


class Operations:
    """Runs one Redis operation under the deadline and maps every failure that is Redis being
    unavailable to :class:`BackendUnavailable`. Other errors (a bug) propagate unchanged."""

    __slots__ = ("deadline", "retry_after")

    def __init__(self, settings: RedisSettings) -> None:
        self.deadline = settings.deadline
        self.retry_after = settings.retry_after

    async def __call__(self, operation: Awaitable[T], deadline: float | None = None) -> T:
        try:
            async with asyncio.timeout(self.deadline if deadline is None else deadline):
                return await operation
        except (RedisConnectionError, RedisTimeoutError, TimeoutError, OSError) as exc:
            raise self.unavailable(exc) from None
        except ResponseError as exc:
            text = str(exc)
            if isinstance(exc, _TRANSIENT_ERRORS) or text.startswith(_TRANSIENT_REPLIES) or "maxmemory" in text:
                raise self.unavailable(exc) from None
            raise

    def unavailable(self, exc: BaseException) -> BackendUnavailable:
        reason = type(exc).__name__ if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
        return BackendUnavailable(f"Redis is unavailable ({reason})", retry_after=self.retry_after)


def _as_bytes(value: bytes | str | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _now_ms() -> int:
    return int(time.time() * 1000)


# -- sessions ---------------------------------------------------------------------------------------

class RedisSessionStore:
    """Session states as JSON strings, with an expiry index that the processes reap together.

    The index (a sorted set of ids scored by when their idle time runs out) is what decides
    whether a session is alive; the state key outlives it by :data:`SESSION_GRACE` so that the
    one process whose reap removes an id from the index still has the state to run the
    terminate hook with. No keyspace notifications are needed (they may be off).
    """

    def __init__(self, backend: RedisBackend) -> None:
        self._redis = backend.redis
        self._op = backend.op
        self._key = backend.key
        self._index = backend.key("sessions")
        self._ttl = backend.settings.session_ttl
        self._key_ttl = _ms(self._ttl + SESSION_GRACE)
        embryonic = backend.settings.embryonic_ttl
        self._embryonic_ttl = min(embryonic, self._ttl) if embryonic > 0 else self._ttl
        register = backend.redis.register_script
        self._reap = register(scripts.REAP)
        self._touch = register(scripts.TOUCH)
        self._subscribe = register(scripts.SUBSCRIBE)
        self._migrate = register(scripts.MIGRATE)

    async def load(self, session_id: str) -> dict[str, Any] | None:
        pipe = self._redis.pipeline(transaction=False)  # one round trip
        pipe.get(self._key("s:", session_id))
        pipe.zscore(self._index, session_id)
        pipe.smembers(self._key("u:", session_id))
        raw, expires, members = await self._op(pipe.execute())
        if raw is None or expires is None or expires <= _now_ms():
            return None  # gone, or idle past its time (the reaper ends it)
        state: dict[str, Any] = orjson.loads(raw)
        subscriptions = {member.decode() for member in members}
        inline = state.pop("subscriptions", None)
        if inline is not None:  # written by an earlier version: move them into the set, once
            subscriptions.update(inline)
            await self._op(self._migrate(keys=[self._key("s:", session_id), self._key("u:", session_id)],
                                         args=[raw, orjson.dumps(state), *inline]))
        if subscriptions:
            state["subscriptions"] = sorted(subscriptions)
        return state

    async def save(self, state: dict[str, Any]) -> None:
        """Write the state. Its subscriptions are not part of it (see :meth:`subscribe`): a state
        that lists them anyway (``"subscriptions"``) replaces the set with them."""
        session_id = state["id"]
        pipe = self._redis.pipeline(transaction=True)
        now = _now_ms()
        subscriptions = state.get("subscriptions")
        if subscriptions is not None:
            state = {name: value for name, value in state.items() if name != "subscriptions"}
            pipe.delete(self._key("u:", session_id))
            if subscriptions:
                pipe.sadd(self._key("u:", session_id), *subscriptions)
        # An embryonic session (initialized, no second request yet) lives embryonic_ttl: one that
        # never comes back leaves the index and its caller's count then, on every process.
        ttl = self._embryonic_ttl if state.get("embryonic") else self._ttl
        key_ttl = _ms(ttl + SESSION_GRACE)
        pipe.set(self._key("s:", session_id), orjson.dumps(state), px=key_ttl)
        pipe.pexpire(self._key("u:", session_id), key_ttl)
        pipe.zadd(self._index, {session_id: now + _ms(ttl)})
        quota = state.get("quota")
        if isinstance(quota, str):  # the caller's sessions, for max_sessions_per_principal
            pipe.zadd(self._key("q:", quota), {session_id: now + _ms(ttl)})
            # Its members count by score; the set itself outlives any of them (never shortened by an
            # embryonic save, which would drop an ordinary session's entry).
            pipe.pexpire(self._key("q:", quota), _ms(self._ttl))
        await self._op(pipe.execute())

    async def subscribe(self, session_id: str, uri: str, limit: int) -> bool:
        """Add ``uri`` to the session's subscriptions, writing only that (one set member); False,
        adding nothing, when it already has ``limit`` others. Atomic across processes."""
        done = await self._op(self._subscribe(keys=[self._key("u:", session_id), self._key("s:", session_id)],
                                              args=[uri, limit, self._key_ttl]))
        return bool(done)

    async def unsubscribe(self, session_id: str, uri: str) -> None:
        await self._op(self._redis.srem(self._key("u:", session_id), uri))

    async def touch(self, session_id: str) -> bool:
        """Restart the session's idle time without rewriting it; False when it is gone or expired."""
        now = _now_ms()
        alive = await self._op(self._touch(
            keys=[self._key("s:", session_id), self._index, self._key("u:", session_id)],
            args=[session_id, now, now + _ms(self._ttl), self._key_ttl]))
        return bool(alive)

    async def delete(self, session_id: str) -> None:
        raw = await self._op(self._redis.get(self._key("s:", session_id)))
        quota = orjson.loads(raw).get("quota") if raw is not None else None
        pipe = self._redis.pipeline(transaction=True)
        pipe.delete(self._key("s:", session_id), self._key("u:", session_id))
        pipe.zrem(self._index, session_id)
        if isinstance(quota, str):
            pipe.zrem(self._key("q:", quota), session_id)
        await self._op(pipe.execute())

    async def count(self) -> int:
        return int(await self._op(self._redis.zcount(self._index, _now_ms(), "+inf")))

    async def count_of(self, quota: str) -> int:
        """Live sessions of one caller (its quota key), on every process: a sorted set per caller
        scored by expiry, written with each save. A session only touched since its last save
        drops out of the count after a TTL (the cap is then lenient, never too strict)."""
        return int(await self._op(self._redis.zcount(self._key("q:", quota), _now_ms(), "+inf")))

    async def first_expiry(self, quota: str) -> float | None:
        """Seconds until the first of one caller's counted sessions drops out of :meth:`count_of`
        (None: it has none): the true wait of a refusal at its ``max_sessions_per_principal``,
        unless a save renews that session first."""
        now = _now_ms()
        first = await self._op(self._redis.zrangebyscore(self._key("q:", quota), f"({now}", "+inf",
                                                         start=0, num=1, withscores=True))
        return max(0.0, (float(first[0][1]) - now) / 1000) if first else None

    async def ids(self) -> list[str]:
        """Ids of every live session (for notifications sent to all sessions)."""
        raw = await self._op(self._redis.zrangebyscore(self._index, _now_ms(), "+inf"))
        return [_text(item) for item in raw]

    async def page(self, cursor: str | None, count: int) -> SessionPage:
        """About ``count`` live sessions with their states, walking the expiry index with ``ZSCAN``
        (bounded work per call, never ``KEYS``), then their states and subscriptions in one round
        trip. ``last_active`` is when the idle time last restarted, as the index says (every
        process's requests restart it), not the last save's time."""
        position = int(cursor) if cursor and cursor.isdigit() else 0
        following, pairs = await self._op(self._redis.zscan(self._index, position, count=max(1, count)))
        now, ttl = _now_ms(), _ms(self._ttl)
        alive = [(_text(member), float(score)) for member, score in pairs if float(score) > now]
        states: list[dict[str, Any]] = []
        if alive:
            pipe = self._redis.pipeline(transaction=False)
            for session_id, _ in alive:
                pipe.get(self._key("s:", session_id))
                pipe.smembers(self._key("u:", session_id))
            raw = await self._op(pipe.execute())
            for i, (_, score) in enumerate(alive):
                if raw[2 * i] is None:
                    continue  # deleted between the two steps
                state: dict[str, Any] = orjson.loads(raw[2 * i])
                state["subscriptions"] = sorted({*(state.get("subscriptions") or ()),
                                                 *(member.decode() for member in raw[2 * i + 1])})
                state["last_active"] = (score - ttl) / 1000
                states.append(state)
        return SessionPage(states, str(following) if following else None)

    async def expired(self, limit: int = 100) -> list[tuple[str, dict[str, Any] | None]]:
        """Take up to ``limit`` sessions whose idle time ran out out of the store, with their last
        state (None when it was lost). Atomic: each expired session is returned to exactly one
        caller, whichever process asks first."""
        raw = await self._op(self._reap(keys=[self._index], args=[self._key("s:"), self._key("u:"), _now_ms(), limit]))
        out: list[tuple[str, dict[str, Any] | None]] = []
        for i in range(0, len(raw), 3):
            state: dict[str, Any] | None = orjson.loads(raw[i + 1]) if raw[i + 1] else None
            if state is not None and raw[i + 2]:
                inline = state.get("subscriptions") or ()
                state["subscriptions"] = sorted({*inline, *(member.decode() for member in raw[i + 2])})
            out.append((raw[i].decode(), state))
        return out


# -- event log --------------------------------------------------------------------------------------

class _Tail:
    """What this process appended to a request stream it began: the events a local reader has not
    taken yet (after ``base``), the last seq and whether the stream is done. A reader of the
    stream here is answered from it, without a round trip; anything it cannot vouch for (an
    event appended elsewhere, an earlier position) is read from Redis."""

    __slots__ = ("base", "changed", "done", "events", "seq")

    def __init__(self, seq: int) -> None:
        self.base = seq
        self.seq = seq
        self.done = False
        self.events: list[Event] = []
        self.changed: asyncio.Event | None = None

    def notify(self) -> None:
        changed, self.changed = self.changed, None
        if changed is not None:
            changed.set()

    def read(self, after: int) -> StreamRead | None:
        """The events after ``after`` (a position at or past ``base``); None while there are none
        and the stream goes on. Events up to ``after`` are let go: the reader has them."""
        if after > self.base:
            del self.events[:after - self.base]
            self.base = after
        if self.done:  # the last read of it here: later ones (a resumption) ask Redis
            events, self.events, self.base = self.events, [], self.seq
            return StreamRead(events, True)
        if self.events:
            return StreamRead(list(self.events), False)
        return None


#: Request streams whose appends a process keeps for its local readers, at most (the oldest are
#: forgotten first; their readers then read from Redis).
MAX_TAILS = 4096
#: Seconds a discard of a stream this process wrote to its end may wait to go out with the
#: session's next request (one round trip less); past that it goes alone.
DISCARD_DELAY = 0.5


class RedisEventLog:
    """Each stream a Redis stream; ``read`` waits for the next entry through the process's one
    :class:`~mcphost_redis.waker.StreamWaker` (a shared ``XREAD BLOCK``).

    Round trips: a request stream costs one to begin (open, lease and priming event in one
    script, with the discards of older streams this process had put off) and one per appended
    reply. Its local reader is answered from what this process appended (:class:`_Tail`), and
    the discard of a stream that this process wrote to its end is put off until the session's
    next ``begin`` (at most :data:`DISCARD_DELAY`), behaving meanwhile, here, as done. Scripts
    are sent by their SHA and loaded only when Redis answers NOSCRIPT.
    """

    def __init__(self, backend: RedisBackend) -> None:
        settings = backend.settings
        self._redis = backend.redis
        self._waker = backend.waker
        self._op = backend.op
        self._prefix = settings.prefix
        self._max_events = settings.stream_max_events
        self._max_age_ms = _ms(settings.stream_max_age)
        # Keys outlive the events by a margin, so a session idle for its whole TTL still has its log.
        self._ttl_ms = _ms(max(settings.stream_max_age, settings.session_ttl) + 60)
        #: Seconds a lapsed lease must stay lapsed, while Redis takes writes, before its stream is
        #: settled: a full lease, three heartbeats of its owner.
        self.grace = settings.lease
        register = backend.redis.register_script
        self._open = register(scripts.OPEN)
        self._begin = register(scripts.BEGIN)
        self._append = register(scripts.APPEND)
        self._finish = register(scripts.FINISH)
        self._read = register(scripts.READ)
        self._discard = register(scripts.DISCARD)
        self._drop = register(scripts.DROP)
        self._lease = register(scripts.LEASE)
        self._orphaned = register(scripts.ORPHANED)
        self._settle = register(scripts.SETTLE)
        self._tails: dict[tuple[str, str], _Tail] = {}
        #: Per stream, the append that last failed here (payload, final, token): it may have run.
        self._unsure: dict[tuple[str, str], tuple[bytes, bool, bytes]] = {}
        #: Streams of each session this process wrote to their end and discarded, not yet in Redis.
        self._pending: dict[str, list[str]] = {}
        self._flusher: asyncio.Task[None] | None = None

    def _keys(self, session_id: str, stream_id: str) -> list[str]:
        base = f"{self._prefix}e:{{{session_id}}}"
        return [base, f"{base}:{stream_id}"]

    def _gone(self, session_id: str, stream_id: str) -> bool:
        """Whether the stream was discarded here and Redis has not been told yet."""
        pending = self._pending.get(session_id)
        return pending is not None and stream_id in pending

    async def open(self, session_id: str, stream_id: str) -> None:
        if self._gone(session_id, stream_id):
            await self._flush_session(session_id)
        await self._op(self._open(keys=self._keys(session_id, stream_id), args=[stream_id, self._ttl_ms]))

    async def begin(self, session_id: str, stream_id: str, request_ids: list[Any], lease: float) -> None:
        """Open, lease and prime a request stream in one script (one round trip), discarding first
        what this process put off discarding of the session's streams."""
        hash_key, stream_key = self._keys(session_id, stream_id)
        discards = self._pending.pop(session_id, [])
        keys = [hash_key, stream_key, f"{hash_key}:lease:{stream_id}", *(f"{hash_key}:{d}" for d in discards)]
        args: list[Any] = [stream_id, orjson.dumps(request_ids) if lease else b"", _ms(lease or 1),
                           self._max_events, _now_ms(), self._ttl_ms, *discards]
        try:
            seq = await self._op(self._begin(keys=keys, args=args))
        except BaseException:
            if discards:  # not done: they go later
                self._pending.setdefault(session_id, []).extend(discards)
                self._flush_soon()
            raise
        self._remember(session_id, stream_id, _Tail(int(seq)))

    def _remember(self, session_id: str, stream_id: str, tail: _Tail) -> None:
        tails = self._tails
        tails.pop((session_id, stream_id), None)
        if len(tails) >= MAX_TAILS:
            tails.pop(next(iter(tails))).notify()
        tails[(session_id, stream_id)] = tail

    def _forget(self, session_id: str, stream_id: str) -> None:
        tail = self._tails.pop((session_id, stream_id), None)
        if tail is not None:
            tail.notify()

    async def append(self, session_id: str, stream_id: str, message: dict[str, Any] | None, *,
                     final: bool = False, data: bytes | None = None) -> int:
        if self._gone(session_id, stream_id):
            raise UnknownEvent(stream_id)
        now = _now_ms()
        payload = b"" if message is None else data if data is not None else orjson.dumps(message)
        # An append that failed may have run in Redis all the same (its reply was late): the
        # caller's retry of the same message passes the same token, and Redis answers with the
        # entry that attempt added instead of adding a second copy of the reply.
        unsure = self._unsure.pop((session_id, stream_id), None)
        retry = unsure is not None and unsure[0] == payload and unsure[1] == final
        token = unsure[2] if retry and unsure is not None else secrets.token_bytes(8)
        try:
            seq = await self._op(self._append(
                keys=self._keys(session_id, stream_id),
                args=[stream_id, payload, b"1" if final else b"0", self._max_events, now, now - self._max_age_ms,
                      self._ttl_ms, token, b"1" if retry else b"0"]))
        except BackendUnavailable:
            if payload:
                self._unsure[(session_id, stream_id)] = (payload, final, token)
                if len(self._unsure) > MAX_TAILS:
                    self._unsure.pop(next(iter(self._unsure)))
            raise
        if seq < 0:
            self._forget(session_id, stream_id)
            raise UnknownEvent(stream_id)
        tail = self._tails.get((session_id, stream_id))
        if tail is not None:
            if seq == tail.seq + 1 and not tail.done and len(tail.events) < self._max_events:
                tail.events.append(Event(seq, message, payload or None))
                tail.seq = seq
                tail.done = final
                tail.notify()
            else:  # appended elsewhere too (settled by another process), or far ahead of its reader
                self._forget(session_id, stream_id)
        return int(seq)

    async def finish(self, session_id: str, stream_id: str) -> None:
        if self._gone(session_id, stream_id):
            raise UnknownEvent(stream_id)
        done = await self._op(self._finish(keys=self._keys(session_id, stream_id),
                                           args=[stream_id, _now_ms(), self._ttl_ms]))
        tail = self._tails.get((session_id, stream_id))
        if done < 0:
            self._forget(session_id, stream_id)
            raise UnknownEvent(stream_id)
        if tail is not None:
            tail.done = True
            tail.notify()

    async def _read_now(self, keys: list[str], stream_id: str, after: int) -> StreamRead:
        raw = await self._op(self._read(keys=keys, args=[stream_id, after, READ_BATCH]))
        if raw[0] < 0:
            raise UnknownEvent(f"{stream_id}.{after}")
        events = [Event(int(raw[i]), orjson.loads(raw[i + 1]), raw[i + 1]) if raw[i + 1] else Event(int(raw[i]), None)
                  for i in range(2, len(raw), 2)]
        return StreamRead(events, bool(raw[1]))

    async def read(self, session_id: str, stream_id: str, after: int, timeout: float) -> StreamRead:
        if self._gone(session_id, stream_id):
            raise UnknownEvent(f"{stream_id}.{after}")
        keys = self._keys(session_id, stream_id)
        tail = self._tails.get((session_id, stream_id))
        if tail is not None and tail.base <= after <= tail.seq:
            # A stream this process writes: its appends are here, no need to ask Redis.
            result = tail.read(after)
            if result is None and timeout > 0:
                changed = tail.changed = tail.changed or asyncio.Event()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await changed.wait()
                if self._tails.get((session_id, stream_id)) is tail:
                    result = tail.read(after)
            if result is not None:
                return result
            # Nothing appended here for a while (a long call), or the tail was let go: what Redis
            # holds is the truth (another process may have settled the stream meanwhile).
            return await self._read_now(keys, stream_id, after)
        result = await self._read_now(keys, stream_id, after)
        if result.events or result.done or timeout <= 0:
            return result
        # Nothing yet: block until an entry after ``after`` arrives (an event, or the marker of
        # finish/discard), then read again. The XREAD answer itself is not used: the script
        # decides what is an event and whether the stream is done, atomically.
        await self._waker.wait(keys[1], after, timeout)  # one connection for every waiting reader
        return await self._read_now(keys, stream_id, after)

    async def exists(self, session_id: str, stream_id: str) -> bool:
        if self._gone(session_id, stream_id):
            return False
        keys = self._keys(session_id, stream_id)
        return bool(await self._op(self._redis.hexists(keys[0], stream_id)))

    async def discard(self, session_id: str, stream_id: str) -> None:
        tail = self._tails.pop((session_id, stream_id), None)
        if tail is not None and tail.done:
            # Written here to its end: no reader waits on it anywhere (a read of a done stream
            # returns at once), so the discard can go with the session's next request.
            tail.notify()
            pending = self._pending.setdefault(session_id, [])
            if stream_id not in pending:
                pending.append(stream_id)
            self._flush_soon()
            return
        if tail is not None:
            tail.notify()
        await self._op(self._discard(keys=self._keys(session_id, stream_id), args=[stream_id, _now_ms()]))

    def _flush_soon(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_later(), name="mcphost-redis-discards")

    async def _flush_later(self) -> None:
        """Send the discards no request took along within :data:`DISCARD_DELAY`, in one pipeline."""
        while self._pending:
            await asyncio.sleep(DISCARD_DELAY)
            pending, self._pending = self._pending, {}
            calls = [(self._discard, self._keys(session_id, stream), [stream, _now_ms()])
                     for session_id, streams in pending.items() for stream in streams]
            try:
                await self._op(_run_scripts(self._redis, calls))
            except BackendUnavailable as exc:
                log.debug("put-off stream discards not sent (the keys expire anyway): %s", exc)
            except Exception:
                log.exception("sending the put-off stream discards failed")

    async def _flush_session(self, session_id: str) -> None:
        streams = self._pending.pop(session_id, [])
        calls = [(self._discard, self._keys(session_id, stream), [stream, _now_ms()]) for stream in streams]
        await self._op(_run_scripts(self._redis, calls))

    async def drop(self, session_id: str) -> None:
        self._pending.pop(session_id, None)  # every stream of the session goes now
        for key in [key for key in self._tails if key[0] == session_id]:
            self._forget(*key)
        base = f"{self._prefix}e:{{{session_id}}}"
        await self._op(self._drop(keys=[base], args=[base + ":", _now_ms()]))

    async def close(self) -> None:
        """Send the put-off discards now (best effort: the keys expire anyway)."""
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(BaseException):
                await self._flusher
        pending, self._pending = self._pending, {}
        calls = [(self._discard, self._keys(session_id, stream), [stream, _now_ms()])
                 for session_id, streams in pending.items() for stream in streams]
        with contextlib.suppress(Exception):
            await self._op(_run_scripts(self._redis, calls))

    # Leases: how a stream whose process died is told apart from one still being written.

    def _lease_keys(self, session_id: str, stream_id: str) -> list[str]:
        base = f"{self._prefix}e:{{{session_id}}}"
        return [base, f"{base}:lease:{stream_id}"]

    async def lease(self, streams: list[tuple[str, str, list[Any]]], ttl: float) -> None:
        """Renew the lease of each ``(session, stream, request ids)`` for ``ttl`` seconds, in one round trip."""
        if not streams:
            return
        await self._op(_run_scripts(self._redis, [
            (self._lease, self._lease_keys(session_id, stream_id), [stream_id, orjson.dumps(request_ids), _ms(ttl)])
            for session_id, stream_id, request_ids in streams]))

    async def orphaned(self, session_id: str, stream_id: str) -> list[Any] | None:
        """The request ids of a stream that is not done and whose lease expired; None otherwise."""
        raw = await self._op(self._orphaned(keys=self._lease_keys(session_id, stream_id), args=[stream_id]))
        return None if not raw else orjson.loads(raw)

    async def settle(self, session_id: str, stream_id: str, messages: list[dict[str, Any]]) -> bool:
        """Append ``messages`` and end a stream orphaned for at least :attr:`grace` seconds; False
        when it is not (or no longer, or not yet) orphaned.

        The grace counts from the first settle that found the lease gone, in Redis time, and the
        owner's next renewal cancels it: a lease that lapsed only because Redis refused writes for
        a while (its owner's renewals failed, and so did every settle) is renewed once Redis takes
        writes again, before anyone may settle the stream (see :mod:`.scripts`).
        """
        base, lease = self._lease_keys(session_id, stream_id)
        done = await self._op(self._settle(
            keys=[base, f"{base}:{stream_id}", lease],
            args=[stream_id, _now_ms(), self._ttl_ms, _ms(self.grace), *(orjson.dumps(m) for m in messages)]))
        return bool(done == 1)


async def _run_scripts(redis: aioredis.Redis, calls: list[tuple[Any, list[str], list[Any]]]) -> list[Any]:
    """Run scripts in one pipeline by their SHA, without the SCRIPT EXISTS that redis-py sends
    before every pipeline holding scripts; those Redis does not know (NOSCRIPT: after a restart or
    a SCRIPT FLUSH) are loaded and run again. For scripts that may run twice (idempotent)."""
    if not calls:
        return []
    pipe = redis.pipeline(transaction=False)
    for script, keys, args in calls:
        pipe.evalsha(script.sha, len(keys), *keys, *args)
    results: list[Any] = await pipe.execute(raise_on_error=False)
    for i, result in enumerate(results):
        if isinstance(result, NoScriptError):
            script, keys, args = calls[i]
            results[i] = await script(keys=keys, args=args)  # loads it, then runs it
        elif isinstance(result, Exception):
            raise result
    return results


# -- tasks ------------------------------------------------------------------------------------------

class RedisTaskStore:
    """Task records as JSON strings. A successful ``SET`` is durable in the sense of the interface:
    any process finds the record from then on (how well it survives a Redis crash depends on
    Redis persistence; see docs/scaling.md)."""

    def __init__(self, backend: RedisBackend) -> None:
        self._redis = backend.redis
        self._op = backend.op
        self._key = backend.key

    async def create(self, task_id: str, record: dict[str, Any], ttl: float | None) -> None:
        await self.save(task_id, record, ttl)

    async def load(self, task_id: str) -> dict[str, Any] | None:
        raw = await self._op(self._redis.get(self._key("t:", task_id)))
        return None if raw is None else orjson.loads(raw)

    async def save(self, task_id: str, record: dict[str, Any], ttl: float | None) -> None:
        await self._op(self._redis.set(self._key("t:", task_id), orjson.dumps(record),
                                       px=None if ttl is None else _ms(ttl)))

    async def delete(self, task_id: str) -> None:
        await self._op(self._redis.delete(self._key("t:", task_id)))


# -- broker -----------------------------------------------------------------------------------------

Callback = Callable[[dict[str, Any]], Any]


class RedisSubscription:
    """One local subscriber. Calling it unsubscribes; ``await ready()`` waits for Redis's confirmation."""

    __slots__ = ("_broker", "_callback", "_channel", "_closed")

    def __init__(self, broker: RedisBroker, channel: str, callback: Callback) -> None:
        self._broker = broker
        self._channel = channel
        self._callback = callback
        self._closed = False

    def __call__(self) -> None:
        if not self._closed:
            self._closed = True
            self._broker._remove(self._channel, self._callback)

    async def ready(self, timeout: float | None = None) -> None:
        """Return once Redis confirmed the channel's subscription; BackendUnavailable if it cannot."""
        await self._broker._confirmed(self._channel, timeout)


class RedisBroker:
    """Pub/sub on one dedicated connection per process, multiplexing every local channel.

    Local subscribers of a channel share one Redis subscription. The listener task reads the
    connection; when it breaks, it reconnects (with a short backoff) and subscribes again to
    every channel that still has subscribers. Messages published while this process was
    disconnected are lost (pub/sub has no memory): callers that need more keep state elsewhere.
    Callbacks run in the listener task; coroutine callbacks are started as tasks.
    """

    def __init__(self, backend: RedisBackend) -> None:
        self._redis = backend.redis
        self._op = backend.op
        self._pool = backend._listener_pool
        self._prefix = backend.key("b:")
        self._deadline = backend.settings.deadline
        self._local: dict[str, list[Callback]] = {}
        self._active: set[str] = set()  # channels Redis confirmed on the current connection
        self._changed = asyncio.Condition()
        self._connection: Any = None
        self._write_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False
        self.reconnects = 0

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._listen(), name="mcphost-redis-broker")

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        for task in list(self._tasks):
            task.cancel()
        await self._disconnect()

    async def publish(self, channel: str, message: dict[str, Any]) -> None:
        await self._op(self._redis.publish(self._prefix + channel, orjson.dumps(message)))

    def subscribe(self, channel: str, callback: Callback) -> RedisSubscription:
        callbacks = self._local.setdefault(channel, [])
        callbacks.append(callback)
        if len(callbacks) == 1:
            self._spawn(self._send("SUBSCRIBE", channel))
        return RedisSubscription(self, channel, callback)

    def _remove(self, channel: str, callback: Callback) -> None:
        callbacks = self._local.get(channel)
        if callbacks is None:
            return
        with contextlib.suppress(ValueError):
            callbacks.remove(callback)
        if not callbacks:
            del self._local[channel]
            self._spawn(self._send("UNSUBSCRIBE", channel))

    def _spawn(self, coroutine: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, command: str, channel: str) -> None:
        """Send a (un)subscription on the live connection; when there is none, the listener
        sends it on connecting. A failure breaks the connection and the listener starts over."""
        connection = self._connection
        if connection is None:
            return
        try:
            async with self._write_lock:
                await connection.send_command(command, self._prefix + channel)
        except (RedisError, OSError):
            await self._disconnect()

    async def _confirmed(self, channel: str, timeout: float | None) -> None:
        limit = self._deadline if timeout is None else timeout
        try:
            async with asyncio.timeout(limit), self._changed:
                await self._changed.wait_for(lambda: channel in self._active or channel not in self._local)
        except TimeoutError:
            raise BackendUnavailable("Redis did not confirm a subscription in time",
                                     retry_after=self._op.retry_after) from None

    async def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.disconnect()

    async def _listen(self) -> None:
        backoff = 0.05
        while not self._closed:
            try:
                connection = self._pool.make_connection()  # type: ignore[no-untyped-call]  # unannotated in redis-py
                async with asyncio.timeout(self._deadline):
                    await connection.connect()
                self._connection = connection
                async with self._write_lock:
                    for channel in list(self._local):
                        await connection.send_command("SUBSCRIBE", self._prefix + channel)
                backoff = 0.05
                await self._read(connection)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis down, connection broken: start over
                if not self._closed:
                    log.debug("redis broker connection lost: %s", exc)
            finally:
                await self._disconnect()
                async with self._changed:
                    self._active.clear()
            if self._closed:
                return
            self.reconnects += 1
            await asyncio.sleep(backoff)
            backoff = min(1.0, backoff * 2)

    async def _read(self, connection: Any) -> None:
        prefix = self._prefix.encode()
        while True:
            response = await connection.read_response()
            if not isinstance(response, list) or len(response) < 3:
                continue
            kind, raw_channel, data = response[0], response[1], response[2]
            if not isinstance(raw_channel, bytes) or not raw_channel.startswith(prefix):
                continue
            channel = raw_channel[len(prefix):].decode()
            if kind == b"message":
                self._deliver(channel, data)
            elif kind in (b"subscribe", b"unsubscribe"):
                async with self._changed:
                    if kind == b"subscribe":
                        self._active.add(channel)
                    else:
                        self._active.discard(channel)
                    self._changed.notify_all()

    def _deliver(self, channel: str, data: bytes) -> None:
        try:
            message = orjson.loads(data)
        except orjson.JSONDecodeError:
            log.warning("ignoring a malformed broker message on %s", channel)
            return
        for callback in list(self._local.get(channel, ())):
            try:
                result = callback(message)
                if asyncio.iscoroutine(result):
                    self._spawn(result)
            except Exception:
                log.exception("broker callback for %s raised", channel)
