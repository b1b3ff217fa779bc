"""The built-in state backend: sessions, event log and broker in this process's memory.

Registered ``trylast``, so an installed backend plugin (for instance mcphost-redis) wins. It
serves one process: with several workers, sessions would not be shared, so ``mcphost serve``
refuses more than one worker with this backend.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from typing import Any

from mcphost.hookspecs import hookimpl
from mcphost.sessions.backend import Backend, Event, SharedKey, StreamRead, UnknownEvent


class MemorySessionStore:
    def __init__(self) -> None:
        self._states: dict[str, dict[str, Any]] = {}

    async def load(self, session_id: str) -> dict[str, Any] | None:
        return self._states.get(session_id)

    async def save(self, state: dict[str, Any]) -> None:
        self._states[state["id"]] = state

    async def delete(self, session_id: str) -> None:
        self._states.pop(session_id, None)

    async def count(self) -> int:
        return len(self._states)

    async def touch(self, session_id: str) -> bool:
        return session_id in self._states

    async def ids(self) -> list[str]:
        return list(self._states)

    async def expired(self, limit: int = 100) -> list[tuple[str, dict[str, Any] | None]]:
        """Nothing: with one process the transport's own reaper ends idle sessions it holds."""
        return []

    async def count_of(self, quota: str) -> int:
        """Sessions stored for one caller (see ``SessionStore``); a scan: one process, few sessions."""
        return sum(1 for state in self._states.values() if state.get("quota") == quota)

    async def first_expiry(self, quota: str) -> float | None:
        """None: one process's store; the manager knows its own sessions' idle times better."""
        return None


class _Stream:
    """One stream's events; small until used (most streams hold two events and are read once)."""

    __slots__ = ("_changed", "done", "events", "first")

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.first = 1  # seq of the oldest event still held
        self.done = False
        self._changed: asyncio.Event | None = None  # created when a reader has to wait

    def changed(self) -> asyncio.Event:
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    def notify(self) -> None:
        if self._changed is not None:
            self._changed.set()


class MemoryEventLog:
    """Streams as bounded lists; ``read`` waits on an asyncio.Event per stream."""

    def __init__(self, max_events: int = 1000) -> None:
        self.max_events = max_events
        self._streams: dict[str, dict[str, _Stream]] = {}

    def _get(self, session_id: str, stream_id: str) -> _Stream:
        try:
            return self._streams[session_id][stream_id]
        except KeyError:
            raise UnknownEvent(f"{stream_id}") from None

    async def open(self, session_id: str, stream_id: str) -> None:
        self._streams.setdefault(session_id, {}).setdefault(stream_id, _Stream())

    async def begin(self, session_id: str, stream_id: str, request_ids: list[Any], lease: float) -> None:
        """Open the stream and append its priming event (one process: no leases)."""
        await self.open(session_id, stream_id)
        await self.append(session_id, stream_id, None)

    async def append(self, session_id: str, stream_id: str, message: dict[str, Any] | None, *,
                     final: bool = False, data: bytes | None = None) -> int:
        stream = self._get(session_id, stream_id)
        seq = stream.first + len(stream.events)
        if len(stream.events) >= self.max_events:
            del stream.events[0]  # retention: the oldest goes
            stream.first += 1
        # ``data`` is not kept: beside the message it would double what an idle session holds (its
        # initialize reply, ~4 KB); the writer encodes the message when it sends it.
        stream.events.append(Event(seq, message))
        stream.done = stream.done or final
        stream.notify()
        return seq

    async def finish(self, session_id: str, stream_id: str) -> None:
        stream = self._get(session_id, stream_id)
        stream.done = True
        stream.notify()

    async def read(self, session_id: str, stream_id: str, after: int, timeout: float) -> StreamRead:
        stream = self._get(session_id, stream_id)
        last = stream.first + len(stream.events) - 1
        if after < stream.first - 1 or after > last:
            raise UnknownEvent(f"{stream_id}.{after}")
        if after == last and not stream.done:
            changed = stream.changed()
            changed.clear()
            try:
                async with asyncio.timeout(timeout):
                    await changed.wait()
            except TimeoutError:
                return StreamRead([], False)
        return StreamRead(stream.events[after - stream.first + 1:], stream.done)

    async def exists(self, session_id: str, stream_id: str) -> bool:
        return stream_id in self._streams.get(session_id, {})

    async def discard(self, session_id: str, stream_id: str) -> None:
        stream = self._streams.get(session_id, {}).pop(stream_id, None)
        if stream is not None:
            stream.done = True
            stream.notify()

    async def drop(self, session_id: str) -> None:
        streams = self._streams.pop(session_id, {})
        for stream in streams.values():
            stream.done = True
            stream.notify()


class MemoryTaskStore:
    """Task records with an expiry; expired ones are dropped when looked at or on the next write."""

    def __init__(self) -> None:
        self._records: dict[str, tuple[dict[str, Any], float | None]] = {}
        self._writes = 0

    def _purge(self, now: float) -> None:
        self._writes += 1
        if self._writes % 256:
            return  # sweep now and then, not on every write
        expired = [key for key, (_, until) in self._records.items() if until is not None and until <= now]
        for key in expired:
            del self._records[key]

    async def create(self, task_id: str, record: dict[str, Any], ttl: float | None) -> None:
        await self.save(task_id, record, ttl)

    async def load(self, task_id: str) -> dict[str, Any] | None:
        entry = self._records.get(task_id)
        if entry is None:
            return None
        record, until = entry
        if until is not None and until <= time.monotonic():
            del self._records[task_id]
            return None
        return record

    async def save(self, task_id: str, record: dict[str, Any], ttl: float | None) -> None:
        now = time.monotonic()
        self._purge(now)
        self._records[task_id] = (record, None if ttl is None else now + ttl)

    async def delete(self, task_id: str) -> None:
        self._records.pop(task_id, None)


class _MemorySubscription:
    __slots__ = ("_broker", "_callback", "_channel")

    def __init__(self, broker: MemoryBroker, channel: str, callback: Callable[[dict[str, Any]], Any]) -> None:
        self._broker = broker
        self._channel = channel
        self._callback = callback

    def __call__(self) -> None:
        callbacks = self._broker._subscribers.get(self._channel, [])
        if self._callback in callbacks:
            callbacks.remove(self._callback)
        if not callbacks:
            self._broker._subscribers.pop(self._channel, None)

    async def ready(self) -> None:
        return None  # in-process: subscribed the moment subscribe() returned


class MemoryBroker:
    """Delivers to local subscribers only (there is one process)."""

    def __init__(self) -> None:
        self._subscribers: dict[str, list[Callable[[dict[str, Any]], Any]]] = {}

    async def publish(self, channel: str, message: dict[str, Any]) -> None:
        for callback in list(self._subscribers.get(channel, ())):
            result = callback(message)
            if asyncio.iscoroutine(result):
                await result

    def subscribe(self, channel: str, callback: Callable[[dict[str, Any]], Any]) -> _MemorySubscription:
        self._subscribers.setdefault(channel, []).append(callback)
        return _MemorySubscription(self, channel, callback)


class MemoryBackend(Backend):
    """One process's state: nothing survives a restart, nothing is shared with other workers."""

    name = "memory"

    def __init__(self, max_events: int = 1000) -> None:
        self.sessions = MemorySessionStore()
        self.events = MemoryEventLog(max_events)
        self.broker = MemoryBroker()
        self.tasks = MemoryTaskStore()
        self._claims: dict[str, float] = {}
        self._claim_count = 0
        self._keyrings: dict[str, list[SharedKey]] = {}
        self._holds: dict[str, tuple[str, float]] = {}
        #: put_value's records: key -> (bytes, expiry on the monotonic clock or None).
        self._values: dict[str, tuple[bytes, float | None]] = {}

    async def claim(self, key: str, ttl: float) -> bool:
        now = time.monotonic()
        self._claim_count += 1
        if self._claim_count % 256 == 0:  # sweep expired claims now and then
            for old in [k for k, until in self._claims.items() if until <= now]:
                del self._claims[old]
        until = self._claims.get(key)
        if until is not None and until > now:
            return False
        self._claims[key] = now + ttl
        return True

    async def hold(self, key: str, owner: str, ttl: float) -> bool:
        now = time.monotonic()
        held = self._holds.get(key)
        if held is not None and held[0] != owner and held[1] > now:
            return False
        self._holds[key] = (owner, now + ttl)
        return True

    async def unhold(self, key: str, owner: str) -> None:
        held = self._holds.get(key)
        if held is not None and held[0] == owner:
            del self._holds[key]

    async def put_value(self, key: str, value: bytes, ttl: float | None = None) -> None:
        self._values[key] = (bytes(value), None if ttl is None else time.monotonic() + ttl)

    async def get_value(self, key: str) -> bytes | None:
        held = self._values.get(key)
        if held is None:
            return None
        if held[1] is not None and held[1] <= time.monotonic():
            del self._values[key]
            return None
        return held[0]

    async def take_value(self, key: str) -> bytes | None:
        value = await self.get_value(key)
        self._values.pop(key, None)
        return value

    async def delete_value(self, key: str) -> bool:
        return await self.take_value(key) is not None

    async def value_keys(self, prefix: str) -> list[str]:
        return [key for key in list(self._values) if key.startswith(prefix) and await self.get_value(key) is not None]

    async def keyring(self, name: str) -> list[SharedKey]:
        ring = self._keyrings.get(name)
        if ring is None:
            ring = self._keyrings[name] = [SharedKey(secrets.token_bytes(32), time.time())]
        return list(ring)

    async def rotate_keyring(self, name: str, activate_in: float, keep: float) -> list[SharedKey]:
        now = time.time()
        ring = await self.keyring(name)
        fresh = SharedKey(secrets.token_bytes(32), now + activate_in)
        self._keyrings[name] = [fresh, *retained(ring, now, keep)]
        return list(self._keyrings[name])


def retained(ring: list[SharedKey], now: float, keep: float) -> list[SharedKey]:
    """The keys of ``ring`` (newest first) still worth verifying with after a rotation: a key is
    dropped once the key after it has been signing for more than ``keep`` seconds."""
    kept: list[SharedKey] = []
    newer: SharedKey | None = None
    for key in ring:
        if newer is not None and newer.active_from + keep < now:
            break
        kept.append(key)
        newer = key
    return kept


@hookimpl(trylast=True)
def mcphost_backend(host: Any) -> MemoryBackend:
    return MemoryBackend(max_events=host.config.server.stream_max_events)
