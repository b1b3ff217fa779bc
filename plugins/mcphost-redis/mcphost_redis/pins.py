"""Pinned definitions in Redis (see :mod:`mcphost.pins`): every process of a cluster, and the
``mcphost pins`` command line, read and approve the same pins.

One hash per scope (``PREFIX pins:SCOPE``, one field per entry, its JSON), a set of the scopes
(``PREFIX pins``) and a counter (``PREFIX pins:version``) that every write increments, so a
process notices another's approval with one GET.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import orjson

from mcphost.pins import Entry

if TYPE_CHECKING:
    from .backend import RedisBackend


class RedisPinStore:
    def __init__(self, backend: RedisBackend) -> None:
        self._backend = backend
        self.where = f"redis ({backend.key('pins')}*)"

    def _key(self, *parts: str) -> str:
        return self._backend.key("pins", *parts)

    async def load(self, scope: str) -> dict[str, Entry]:
        raw = await self._backend.op(self._backend.redis.hgetall(self._key(":", scope)))
        return {(k.decode() if isinstance(k, bytes) else str(k)): Entry.from_json(orjson.loads(v))
                for k, v in raw.items()}

    async def save(self, scope: str, entries: Mapping[str, Entry]) -> None:
        if not entries:
            return
        pipe = self._backend.redis.pipeline(transaction=True)
        pipe.hset(self._key(":", scope), mapping={k: orjson.dumps(e.to_json()) for k, e in entries.items()})
        pipe.sadd(self._key(), scope)
        pipe.incr(self._key(":version"))
        await self._backend.op(pipe.execute())

    async def scopes(self) -> list[str]:
        raw = await self._backend.op(self._backend.redis.smembers(self._key()))
        return sorted(s.decode() if isinstance(s, bytes) else str(s) for s in raw)

    async def version(self) -> str:
        raw = await self._backend.op(self._backend.redis.get(self._key(":version")))
        return "" if raw is None else raw.decode() if isinstance(raw, bytes) else str(raw)
