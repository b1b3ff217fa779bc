"""A bounded pool of processes of one stdio upstream, each leased by one call at a time.

With ``questions = "auto"`` (the default) a call whose client can answer questions leases one while
another such call is in flight on the shared process and the upstream has not been seen to echo the
trace id (Upstream.request). With ``questions = "own_process"`` every such call runs on a process of
its own for as long as it is in flight. Either way a question that process asks has exactly one call
it can belong to, whatever the upstream puts on the wire. At most ``max_instances`` processes run; a
call that finds them all leased waits in line (at most ``max_queued`` calls, each at most ``timeout``
seconds, and the calls one principal has waiting at most ``max_queued_bytes_per_principal`` bytes of
arguments over every pool of the proxy), then gets a clear error. Processes are reused by later calls
and stopped after ``idle_timeout`` seconds unused. Each process has its own state: a stateful upstream
wants ``questions = "shared"``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator

import mcp_types as types

import mcphost
from mcphost_proxy.settings import ServerSettings
from mcphost_proxy.upstream import FAILED, Upstream, UpstreamUnavailable

log = logging.getLogger("mcphost.proxy")

class QueuedBytes:
    """Bytes (of arguments, as JSON) of the calls each principal has waiting for a process (a pool's,
    or an upstream still starting, such as a per_session instance), by quota key, shared by every
    pool and upstream of the proxy: a principal past ``limit`` is refused at once rather
    than queued (-32000 naming the setting), so one caller's queued calls hold at most ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held: collections.Counter[str] = collections.Counter()

    @contextlib.contextmanager
    def hold(self, key: str, size: int) -> Iterator[None]:
        held = self.held[key]
        if self.limit and held + size > self.limit:
            raise mcphost.McpError(-32000, (
                f"This caller's calls waiting for an upstream process would hold {held + size} bytes, over "
                f"[plugins.proxy] max_queued_bytes_per_principal ({self.limit}); retry later"),
                {"budget": "queued bytes", "perPrincipal": True, "retryAfter": 1})
        self.held[key] += size
        try:
            yield
        finally:
            self.held[key] -= size
            if self.held[key] <= 0:
                del self.held[key]


class Pool:
    """The leased processes of one server (``Upstream.pool`` of its shared connection)."""

    def __init__(self, settings: ServerSettings, make: Callable[[str], Upstream],
                 queued: QueuedBytes) -> None:
        self.settings = settings
        self.queued = queued
        self._make = make
        #: Every process of the pool, leased or not.
        self.instances: list[Upstream] = []
        self._idle: list[Upstream] = []
        self._waiting: collections.deque[asyncio.Future[Upstream]] = collections.deque()
        self._serial = itertools.count(1)
        self._reaper: asyncio.Task[None] | None = None
        self._closed = False
        #: A process of the pool carried a call's trace id back on a question (Upstream.echoes).
        self.echoes = False

    @contextlib.asynccontextmanager
    async def lease(self, key: str = "", size: int = 0) -> AsyncIterator[Upstream]:
        """A process of its own for the caller (quota ``key``, ``size`` bytes of arguments), until the block ends."""
        instance = await self._take(key, size)
        try:
            yield instance
        except BaseException as exc:
            # A call cut short (cancelled, timed out, its process lost) may still be running upstream
            # and ask late: its process is not handed to another call.
            self._give(instance, reuse=isinstance(exc, mcphost.McpError) and exc.code != types.REQUEST_TIMEOUT)
            raise
        else:
            self._give(instance)

    async def _take(self, key: str = "", size: int = 0) -> Upstream:
        settings = self.settings
        if self._closed:
            raise UpstreamUnavailable(f"Upstream server {settings.name!r} is stopping")
        while self._idle:
            instance = self._idle.pop()  # the most recently used: the others go idle and are reaped
            if instance.state != FAILED:
                return instance
            self._drop(instance)
        if len(self.instances) < settings.max_instances:
            return self._new()
        if len(self._waiting) >= settings.max_queued:
            raise UpstreamUnavailable(
                f"Upstream server {settings.name!r}: all its max_instances ({settings.max_instances}) processes "
                f"are in use and max_queued ({settings.max_queued}) calls already wait; retry later")
        with self.queued.hold(key, size):
            return await self._wait()

    async def _wait(self) -> Upstream:
        settings = self.settings
        turn: asyncio.Future[Upstream] = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        try:
            async with asyncio.timeout(settings.timeout):
                return await turn
        except BaseException as exc:
            with contextlib.suppress(ValueError):
                self._waiting.remove(turn)
            if turn.done() and not turn.cancelled():
                self._give(turn.result())  # handed over just as this wait ended: pass it on
            if isinstance(exc, TimeoutError):
                raise UpstreamUnavailable(
                    f"Upstream server {settings.name!r}: all its max_instances ({settings.max_instances}) "
                    f"processes stayed in use for {settings.timeout:g} s; retry later") from None
            raise

    def _new(self) -> Upstream:
        instance = self._make(f"{self.settings.name}#{next(self._serial)}")
        self.instances.append(instance)
        instance.start()
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap(), name=f"proxy:{self.settings.name}:pool")
        return instance

    def _give(self, instance: Upstream, reuse: bool = True) -> None:
        instance.last_used = time.monotonic()
        self.echoes = self.echoes or instance.echoes
        if self._closed or instance.state == FAILED or not reuse:
            self._drop(instance)
            if self._closed or not self._waiting:
                return
            instance = self._new()  # a waiting call gets a fresh process instead
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(instance)
                return
        self._idle.append(instance)

    def _drop(self, instance: Upstream) -> None:
        with contextlib.suppress(ValueError):
            self.instances.remove(instance)
        with contextlib.suppress(ValueError):
            self._idle.remove(instance)
        asyncio.get_running_loop().create_task(instance.stop())

    async def _reap(self) -> None:
        """Stop processes unused for longer than idle_timeout."""
        idle_timeout = self.settings.idle_timeout
        while self.instances and not self._closed:
            await asyncio.sleep(min(max(idle_timeout / 4, 0.05), 30.0))
            now = time.monotonic()
            for instance in list(self._idle):
                if instance.in_flight == 0 and now - instance.last_used > idle_timeout:
                    log.info("upstream %s: idle for %.0f s; stopped", instance.label, now - instance.last_used)
                    self._drop(instance)

    async def close(self) -> None:
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
        for turn in self._waiting:
            if not turn.done():
                turn.cancel()
        instances, self.instances, self._idle = self.instances, [], []
        await asyncio.gather(*(instance.stop() for instance in instances), return_exceptions=True)
