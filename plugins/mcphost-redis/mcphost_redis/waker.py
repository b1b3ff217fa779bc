"""Shared waits and an idle-shrinking pool: a process's Redis connections do not grow with its streams.

:class:`StreamWaker`: every reader of the event log that waits for a stream's next entry (an SSE
GET stream, a request stream followed live) waits on one connection per process. A single task
blocks in one ``XREAD BLOCK ... STREAMS k1 k2 ...`` over all the streams waited on and wakes the
readers of a stream when an entry after their position arrives (fanned out in process). A new
waiter makes the task issue the ``XREAD`` again with it included: ``CLIENT UNBLOCK`` on that
connection's id, sent from the ordinary pool. Without it, each waiting reader held a blocked
connection of its own, so 320 streams took 320 connections (and open files).

No entry is missed between a reader's last read and the ``XREAD`` that includes it: ``XREAD``
with an explicit id answers at once with what is already past it.

:func:`shrink_idle`: redis-py's pool keeps every connection it ever opened; after a burst the
extra ones stay open for good. The backend closes the idle ones periodically.

Written here rather than with redis-py's ``PubSub``: a blocking ``XREAD`` over many keys that
can be re-issued on demand is not something the driver offers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

log = logging.getLogger("mcphost.redis")

#: Milliseconds one shared ``XREAD`` blocks before it is issued again (re-issued earlier on demand).
BLOCK_MS = 30_000


class StreamWaker:
    """One connection, one task: wakes readers of many Redis streams; see the module docstring."""

    def __init__(self, pool: Any, commands: Any, deadline: float) -> None:
        #: The pool the waiting connection comes from (no socket timeout: it blocks).
        self._pool = pool
        #: An ordinary client, for ``CLIENT UNBLOCK``.
        self._commands = commands
        self._deadline = deadline
        #: key -> {future: position after which an entry wakes it}
        self._waiting: dict[str, dict[asyncio.Future[None], int]] = {}
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._generation = 0  # bumped by every new waiter
        self._issued = 0  # the generation the XREAD in flight includes
        self._blocked = False
        self._client_id: int | None = None
        self._poking = False
        self._closed = False
        #: Times the waiting connection was (re)opened: tests and figures.
        self.connections = 0

    async def wait(self, key: str, after: int, timeout: float) -> None:
        """Return when stream ``key`` has an entry after ``after``, after ``timeout`` seconds, or
        early (a reconnection): the caller reads again either way."""
        if self._closed:
            await asyncio.sleep(min(timeout, 0.1))
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, {})[future] = after
        self._generation += 1
        self._changed.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="mcphost-redis-waker")
        elif self._blocked and not self._poking:
            self._poking = True
            asyncio.get_running_loop().create_task(self._poke())
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(future, timeout)
        finally:
            waiters = self._waiting.get(key)
            if waiters is not None:
                waiters.pop(future, None)
                if not waiters:
                    del self._waiting[key]

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        self._wake_all()

    # -- the task ---------------------------------------------------------------------------------

    async def _poke(self) -> None:
        """Make the XREAD in flight return, so the next one includes the new waiters."""
        try:
            for _ in range(50):
                if not self._blocked or self._issued >= self._generation or self._client_id is None:
                    return
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(self._deadline):
                        if await self._commands.execute_command("CLIENT", "UNBLOCK", self._client_id):
                            return
                await asyncio.sleep(0.002)  # the XREAD had not reached Redis yet: again
        finally:
            self._poking = False

    async def _run(self) -> None:
        backoff = 0.05
        while not self._closed:
            connection = None
            try:
                connection = self._pool.make_connection()
                async with asyncio.timeout(self._deadline):
                    await connection.connect()
                    await connection.send_command("CLIENT", "ID")
                    self._client_id = int(await connection.read_response())
                self.connections += 1
                backoff = 0.05
                await self._serve(connection)
                return  # nobody waits any more: the connection is let go
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis down, connection broken: readers re-read, then wait again
                log.debug("redis stream waker connection lost: %s", exc)
                self._wake_all()
            finally:
                self._blocked = False
                self._client_id = None
                if connection is not None:
                    with contextlib.suppress(Exception):
                        await connection.disconnect()
            await asyncio.sleep(backoff)
            backoff = min(1.0, backoff * 2)

    async def _serve(self, connection: Any) -> None:
        while True:
            if not self._waiting:
                self._changed.clear()
                try:
                    async with asyncio.timeout(BLOCK_MS / 1000):
                        await self._changed.wait()
                except TimeoutError:
                    if not self._waiting:
                        return
                continue
            positions = {key: min(waiters.values()) for key, waiters in self._waiting.items()}
            self._issued = self._generation
            keys = list(positions)
            self._blocked = True
            await connection.send_command("XREAD", "COUNT", 1, "BLOCK", BLOCK_MS, "STREAMS", *keys,
                                          *(f"{positions[key]}-0" for key in keys))
            reply = await connection.read_response()
            self._blocked = False
            for raw_key, entries in reply or ():
                key = raw_key.decode() if isinstance(raw_key, bytes) else str(raw_key)
                if not entries:
                    continue
                newest = _entry_id(entries[-1][0])
                for future, after in list(self._waiting.get(key, {}).items()):
                    if (after, 0) < newest and not future.done():
                        future.set_result(None)

    def _wake_all(self) -> None:
        for waiters in self._waiting.values():
            for future in waiters:
                if not future.done():
                    future.set_result(None)


def _entry_id(entry_id: Any) -> tuple[int, int]:
    """A stream entry id ``<seq>-<n>`` as a pair (markers of finish and discard are ``<seq>-1``...)."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
    seq, _, n = text.partition("-")
    try:
        return int(seq), int(n or 0)
    except ValueError:
        return 1 << 62, 0  # not one of ours: wake everyone waiting on the stream


async def shrink_idle(pool: Any) -> None:
    """Close the sockets of every idle connection in redis-py's asyncio ``pool``.

    Through the pool's public ``disconnect(inuse_connections=False)``: the connections stay in the
    pool as objects without a socket and connect again when next used. redis-py (8.1 checked) has
    no public way to close only some idle connections (``get_connection_count`` counts the idle
    connection objects, connected or not, and nothing removes one from the pool), so the few that
    stay warm between trims are closed too: each costs one reconnect at its next use, at most once
    a trim period, against a burst's connections staying open for good. Connections in use are
    left alone; one taken from the pool while the trim closes it is reconnected by the pool's
    retry on ``ConnectionError``.
    """
    await pool.disconnect(inuse_connections=False)
