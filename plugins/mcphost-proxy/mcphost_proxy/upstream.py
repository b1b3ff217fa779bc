"""One upstream MCP server: its connection through the official ``mcp`` client, and its lifecycle.

A supervisor task owns the connection (the ``mcp`` client's context managers are entered and
left in that one task, as anyio requires): it connects, lists what the server offers, and waits
until the connection dies; then it reconnects after a delay that doubles up to a limit. Meanwhile
calls answer a clear error. The server's questions to its client (elicitation, sampling, roots)
are forwarded to the downstream caller whose call caused them: over Streamable HTTP the question
arrives on that request's stream, whose context carries the call (``_CALL``); over stdio each call
is sent with a trace id of its own in ``_meta.traceparent``, which servers built on the official
Python SDK carry back on the questions they ask while handling it (:func:`_trace_scope`); failing
that, a question belongs to the one call in flight on the connection, and is refused when there
are several (``questions = "own_process"`` gives each such call a process of its own: pool.py).
A question still out when its call ends is answered at once (:meth:`Upstream._forward`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import itertools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import httpx2
import mcp_types as types
import pydantic
from mcp import ClientSession, MCPError
from mcp.client.subscriptions import ResourceUpdated, listen
from mcp.shared._context_streams import create_context_streams
from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace

import mcphost
from mcphost.protocol import jsonrpc
from mcphost_proxy import tasks
from mcphost_proxy.framing import BoundedTransport, http_transport, stdio_transport
from mcphost_proxy.logs import LogRelay
from mcphost_proxy.parking import Parking
from mcphost_proxy.settings import ServerSettings
from mcphost_proxy.work import offload

log = logging.getLogger("mcphost.proxy")

#: Upstream states, as ``mcphost plugins`` shows them.
STOPPED, STARTING, RUNNING, RESTARTING, FAILED = "stopped", "starting", "running", "restarting", "failed"
CLIENT_INFO = types.Implementation(name="mcphost-proxy", version="0.1.0")
#: Input-required rounds one forwarded request may take with a 2026-07-28 upstream.
MAX_ROUNDS = 16
MISSING_CLIENT_CAPABILITY = -32021
#: Trace ids of ended calls remembered per connection (see Upstream._caller).
ENDED_TRACES = 1024


class Lessor(Protocol):
    """Processes of one server that calls lease one at a time (:class:`mcphost_proxy.pool.Pool`)."""

    instances: list[Upstream]

    def lease(self) -> contextlib.AbstractAsyncContextManager[Upstream]: ...

    async def close(self) -> None: ...


class UpstreamUnavailable(mcphost.ToolError):
    """The upstream cannot be reached right now (not started, restarting, or it died mid-call)."""


@dataclass
class Listing:
    """What an upstream offers, as wire dicts (as its server sent them)."""

    tools: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    capabilities: dict[str, Any] = field(default_factory=dict)


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)  # type: ignore[no-any-return]


class Upstream:
    """A connection to one upstream server, kept alive by a supervisor task."""

    def __init__(self, settings: ServerSettings, *, backoff: float = 0.5, backoff_max: float = 30.0,
                 on_change: Callable[[Upstream], Awaitable[None]] | None = None, label: str | None = None) -> None:
        self.settings = settings
        self.label = label or settings.name
        self.backoff = backoff
        self.backoff_max = backoff_max
        self.on_change = on_change
        #: The host whose clients get the upstream's resource updates (set by the plugin).
        self.host: Any = None
        self.state = STOPPED
        self.error: str | None = None
        self.restarts = 0
        #: While restarting: when (``time.monotonic()``) the next attempt starts.
        self.retry_at: float | None = None
        self.listing = Listing()
        self._session: ClientSession | None = None
        self._ready = asyncio.Event()
        self._dead = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._callers: dict[int, _Call] = {}
        #: The calls in flight by the trace id each was sent with (see _trace_scope), and the trace ids
        #: of the last calls that ended (a late question of theirs is refused, never associated).
        self._traces: dict[int, _Call] = {}
        self._ended_traces: collections.OrderedDict[int, None] = collections.OrderedDict()
        self._ids = itertools.count(1)
        self._refresh: asyncio.Task[None] | None = None
        self._relist_again = False
        #: The per-principal caps on parked calls (shared by every upstream; set by the plugin).
        self.parking = Parking()
        #: Resource URIs the host's subscribers follow through this connection (kept across restarts),
        #: those the upstream holds now, and the lock that brings the second in line with the first.
        self.subscribed: set[str] = set()
        self._sent: set[str] = set()
        self._subscribing = asyncio.Lock()
        #: A 2026-07-28 upstream has no resources/subscribe: a listen stream per URI followed, by URI.
        self._follows: dict[str, asyncio.Task[None]] = {}
        #: A per_session instance's session: the only one its resource updates reach (None: every subscriber).
        self.audience: Any = None
        #: Who else gets its resource updates, when not every host subscriber of the URI (set by the plugin
        #: on the shared connection of a per_session server: only the listen streams that follow it there).
        self.relay: Callable[[Upstream, str], Awaitable[None]] | None = None
        #: Log messages outside a call: rate-limited, relayed to sessions, summarized in the host log.
        self.logs = LogRelay(self.label)
        #: Requests under way, and when the last one began or ended (per_session instances are reaped idle).
        self.in_flight = 0
        self.last_used = time.monotonic()
        #: The HTTP upstream answered 404 (or a 400 naming the session) to our session id.
        self._session_lost = False
        self._http: httpx2.AsyncClient | None = None
        #: The turns of the stdio upstreams starting at once (max_starting; None: start at once).
        self.starting: asyncio.Semaphore | None = None
        #: questions = "own_process": the processes a call that may ask leases (set by the plugin).
        self.pool: Lessor | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the supervisor (idempotent); :meth:`wait_ready` waits for the first connection."""
        if self._task is None or self._task.done():
            self._stopping = False
            self._task = asyncio.get_running_loop().create_task(self._supervise(), name=f"proxy:{self.label}")

    async def wait_ready(self, timeout: float) -> bool:
        self.start()
        try:
            async with asyncio.timeout(timeout):
                while not self._ready.is_set():
                    if self.state == FAILED:
                        return False
                    waiter = asyncio.ensure_future(self._ready.wait())
                    try:
                        await asyncio.wait([waiter], timeout=0.1)
                    finally:
                        waiter.cancel()
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        if self.pool is not None:
            await self.pool.close()
        self._stopping = True
        self._dead.set()
        for follow in self._follows.values():
            follow.cancel()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(task), 10)
        self.state = STOPPED

    def status(self) -> str:
        """One line for ``mcphost plugins``: name, transport, state, what is mounted, last error."""
        text = f"{self.label} ({self.settings.transport}: {self.state}"
        if self.state == RUNNING:
            text += f", {len(self.listing.tools)} tools"
        if self.restarts:
            text += f", {self.restarts} restarts"
        if self.error and self.state != RUNNING:
            text += f", last error: {self.error}"
        return text + ")"

    def describe(self) -> dict[str, Any]:
        """The upstream's state as data (``mcphost_status``, the console): name, transport, state,
        target (command line or URL), tools mounted, restarts, last error, seconds until the next
        attempt while restarting."""
        settings = self.settings
        target = settings.url if settings.command is None else " ".join([settings.command, *settings.args])
        retry = None
        if self.retry_at is not None and self.state == RESTARTING:
            retry = max(0.0, self.retry_at - time.monotonic())
        return {"name": self.label, "transport": settings.transport, "state": self.state, "target": target,
                "tools": len(self.listing.tools) if self.state == RUNNING else 0, "restarts": self.restarts,
                "error": self.error, "retry_in": retry}

    async def _supervise(self) -> None:
        delay = self.backoff
        while not self._stopping:
            self.state = STARTING if self.restarts == 0 and not self._ready.is_set() else RESTARTING
            started = time.monotonic()
            try:
                await self._connect_and_serve()
            except asyncio.CancelledError:
                raise
            except mcphost.ConfigError as exc:  # a setting only a restart of the host can change
                self.error = str(exc)
                self.state = FAILED
                log.error("upstream %s cannot start: %s", self.label, exc)
                return
            except BaseException as exc:
                self.error = _describe(exc)
                log.warning("upstream %s: %s", self.label, self.error)
            finally:
                self._session = None
                self._http = None
                self._ready.clear()
            if self._stopping:
                break
            if time.monotonic() - started > 10 * delay:
                delay = self.backoff  # it ran a good while: start over with a short delay
            self.restarts += 1
            self.state = RESTARTING
            if self._session_lost:  # the server forgot our session (it restarted): initialize at once
                self._session_lost = False
                continue
            log.info("upstream %s: restarting in %.1fs", self.label, delay)
            self.retry_at = time.monotonic() + delay
            await asyncio.sleep(delay)
            self.retry_at = None
            delay = min(delay * 2, self.backoff_max)
        self.state = STOPPED

    async def _connect_and_serve(self) -> None:
        self._dead.clear()
        settings = self.settings
        async with contextlib.AsyncExitStack() as stack:
            if settings.command:
                read, write = await stack.enter_async_context(stdio_transport(
                    settings.command, list(settings.args), env=settings.resolved_env() or None, cwd=settings.cwd,
                    max_message_bytes=settings.max_message_bytes, label=self.label, admit=self.logs.admit,
                    starting=self.starting))
            else:
                # Only the configured headers: nothing from the downstream request (its bearer
                # token in particular) ever reaches the upstream.
                client = httpx2.AsyncClient(headers=settings.resolved_headers(),
                                            timeout=httpx2.Timeout(settings.timeout, read=None),
                                            transport=BoundedTransport(settings.max_message_bytes),
                                            event_hooks={"response": [self._watch_response]})
                await stack.enter_async_context(client)
                self._http = client
                read, write = await stack.enter_async_context(
                    http_transport(settings.url or "", http_client=client,
                                           max_sse_event_size=settings.max_message_bytes))
            inbox_send, inbox = create_context_streams[Any](64)
            loop = asyncio.get_running_loop()

            async def pump() -> None:  # follows the transport so that its end is noticed
                try:
                    async with inbox_send:
                        async for item in read:
                            # The HTTP transport reads a request's SSE stream in the context of the
                            # task that sent the request; passing that context on lets a question
                            # find the call that caused it (_CALL).
                            origin = getattr(read, "last_context", None)
                            if origin is None or origin.get(_CALL, None) is None:
                                await inbox_send.send(item)
                            else:
                                await loop.create_task(inbox_send.send(item), context=origin)
                finally:
                    if not self._dead.is_set() and not self._stopping:
                        log.warning("upstream %s: the transport closed", self.label)
                    self._dead.set()

            group = await stack.enter_async_context(anyio.create_task_group())
            group.start_soon(pump)
            session = await stack.enter_async_context(ClientSession(
                inbox, write, read_timeout_seconds=settings.timeout,
                sampling_callback=self._on_sampling, elicitation_callback=self._on_elicitation,
                list_roots_callback=self._on_roots, logging_callback=self._on_log,
                message_handler=self._on_message, client_info=CLIENT_INFO, log_level="debug"))
            if settings.era == "auto":
                try:
                    await session.discover()
                except Exception:
                    await session.initialize()
            else:
                await session.initialize()
            if session.discover_result is not None:
                _forward_capabilities(session)
            elif session.server_capabilities is not None and session.server_capabilities.logging is not None:
                # Everything: the host filters by each downstream client's own level.
                # Sent as a plain request: ClientSession.set_logging_level warns (MCPDeprecationWarning)
                # at every start, as logging is deprecated in 2026-07-28, but this upstream speaks the
                # session era, where logging/setLevel is how it learns the levels to send.
                with contextlib.suppress(MCPError):
                    await session.send_request(types.SetLevelRequest(params=types.SetLevelRequestParams(level="debug")),
                                               types.EmptyResult)
            self._session = session
            if session.discover_result is not None:
                group.start_soon(self._follow_changes, session)
            async with self._subscribing:  # a restarted upstream keeps the host's subscriptions
                self._sent = set()
                for task in self._follows.values():
                    task.cancel()
                self._follows.clear()
                for uri in sorted(self.subscribed):
                    with contextlib.suppress(Exception):
                        await self._subscribe(session, uri, True)
            self.listing = await self._list(session)
            self.state = RUNNING
            self.error = None
            await self._changed()
            self._ready.set()
            log.info("upstream %s is running: %d tools, %d prompts, %d resources, %d templates", self.label,
                     len(self.listing.tools), len(self.listing.prompts), len(self.listing.resources),
                     len(self.listing.templates))
            await self._dead.wait()
            self._session = None
            group.cancel_scope.cancel()
            if not self._stopping:
                raise ConnectionError("the connection closed" if settings.command is None
                                      else "the process exited")

    async def _changed(self) -> None:
        if self.on_change is not None:
            try:
                await self.on_change(self)
            except Exception:
                log.exception("upstream %s: refreshing the catalog failed", self.label)

    async def _list(self, session: ClientSession) -> Listing:
        """What the upstream offers, read as plain JSON (no model per item on the event loop); the
        client's own tool cache (output schemas, x-mcp-header maps) learns the tools in a worker thread."""
        caps = session.server_capabilities
        listing = Listing(capabilities=_dump(caps) if caps is not None else {})
        if caps is None or caps.tools is not None:
            pages = await _raw_pages(session, "tools/list")
            listing.tools = await offload(_absorb_tools, session, pages, self.label)
        if caps is None or caps.prompts is not None:
            listing.prompts = _items(await _raw_pages(session, "prompts/list"), "prompts")
        if caps is None or caps.resources is not None:
            listing.resources = _items(await _raw_pages(session, "resources/list"), "resources")
            listing.templates = _items(await _raw_pages(session, "resources/templates/list"), "resourceTemplates")
        return listing

    # -- notifications and questions from the upstream ------------------------------------------

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            log.warning("upstream %s: transport error: %s", self.label, _describe(message))
            return
        root = getattr(message, "root", message)
        method = getattr(root, "method", "")
        if method.endswith("/list_changed") and method != "notifications/roots/list_changed":
            self._schedule_relist()
        elif method == "notifications/resources/updated":
            uri = getattr(getattr(root, "params", None), "uri", None)
            if uri is not None:
                await self._updated(str(uri))

    async def _updated(self, uri: str) -> None:
        """Relay a resource update: to the one session a per_session instance serves (if it follows
        ``uri``), to whom :attr:`relay` picks, else to every host subscriber of ``uri`` (sessions and
        listen streams)."""
        session = self.audience
        if session is None:
            if self.relay is not None:
                await self.relay(self, uri)
            elif self.host is not None:
                await self.host.notify_resource_updated(uri)
            return
        if uri not in session.subscriptions or session.outlet is None or session.closed:
            return
        try:
            await session.outlet(jsonrpc.notification("notifications/resources/updated", {"uri": uri}), None)
        except Exception:
            log.debug("upstream %s: could not relay an update of %s", self.label, uri, exc_info=True)

    async def _follow_changes(self, session: ClientSession) -> None:
        """A 2026-07-28 upstream tells of list changes on a subscriptions/listen stream, kept open here."""
        try:
            async with listen(session, tools_list_changed=True, prompts_list_changed=True,
                              resources_list_changed=True) as changes:
                async for _event in changes:
                    self._schedule_relist()
        except Exception as exc:  # an upstream without listen: its lists are read at (re)connect only
            log.info("upstream %s: no list_changed stream (%s)", self.label, _describe(exc))

    def _schedule_relist(self) -> None:
        """List again soon; a change announced while a listing is under way makes one more after it."""
        if self._refresh is None or self._refresh.done():
            self._refresh = asyncio.ensure_future(self._relist())
        else:
            self._relist_again = True

    async def _relist(self) -> None:
        while True:
            self._relist_again = False
            await asyncio.sleep(0.05)  # a burst of list_changed notifications makes one refresh
            session = self._session
            if session is None:
                return
            try:
                self.listing = await self._list(session)
            except Exception as exc:
                log.warning("upstream %s: listing after list_changed failed: %s", self.label, _describe(exc))
                return
            await self._changed()
            if not self._relist_again:
                return

    def _caller(self, meta: Any = None) -> _Call | None:
        """The downstream call to which the upstream's question (or log message) belongs: the one
        whose request's stream it came on (HTTP); else the one whose trace id the question's
        ``_meta.traceparent`` carries (the upstream echoes the context of the request it handles);
        else the one call in flight on this connection."""
        call = _CALL.get()
        if call is not None and call.upstream is self:
            return call
        trace = _trace_id(meta)
        if trace is not None and trace in self._traces:
            return self._traces[trace]
        if trace is not None and trace in self._ended_traces:
            return None  # the call that asked is over: never hand its question to another
        if len(self._callers) == 1:
            return next(iter(self._callers.values()))
        return None

    def _no_caller(self, what: str, meta: Any = None) -> types.ErrorData:
        if _trace_id(meta) in self._ended_traces:
            why = "the call that asked is over"
        else:
            why = "no call is in flight" if not self._callers else "several calls are in flight"
        return types.ErrorData(code=types.INVALID_REQUEST,
                               message=f"mcphost-proxy cannot forward {what}: {why} on this upstream connection")

    async def _forward(self, what: str, ask: Callable[[mcphost.Context], Awaitable[Any]],
                       call: _Call | None = None, meta: Any = None) -> Any:
        """Ask the downstream client on behalf of the upstream (a session-era server-to-client request).

        A failure the downstream caller must see (a capability its client lacks, a 2026-07-28 round
        that ends the handler) is kept on the call and raised there once the upstream answers. When
        the call ends while its question is out (its client cancelled it or went away, its session
        ended, a 2026-07-28 client did not come back in time, the upstream timed out), the upstream
        is answered at once (elicitation: ``cancel``; sampling, roots: an error), so its pending
        request holds nothing until a timeout.
        """
        call = call or self._caller(meta)
        if call is None or call.ctx is None:
            return self._no_caller(what, meta)
        if call.ended.is_set():
            return _abandoned(what)
        asking = asyncio.ensure_future(self._ask(what, call, ask))
        ended = asyncio.ensure_future(call.ended.wait())
        try:
            await asyncio.wait((asking, ended), return_when=asyncio.FIRST_COMPLETED)
        finally:  # also when the upstream withdrew its question (this handler is cancelled)
            ended.cancel()
            if not asking.done():
                asking.cancel()
                with contextlib.suppress(BaseException):
                    await asking
        if asking.cancelled():
            log.info("upstream %s: the call whose client was asked (%s) ended; the question is withdrawn",
                     self.label, what)
            return _abandoned(what)
        return asking.result()

    async def _ask(self, what: str, call: _Call, ask: Callable[[mcphost.Context], Awaitable[Any]]) -> Any:
        assert call.ctx is not None
        try:
            async with self.parking.hold(call.ctx, call.size + 512):
                return await ask(call.ctx)
        except asyncio.CancelledError:
            raise
        except mcphost.ClientRequestError as exc:
            if exc.code == MISSING_CLIENT_CAPABILITY:
                call.failure = exc
            return types.ErrorData(code=exc.code, message=exc.message, data=exc.data)
        except BaseException as exc:
            call.failure = exc
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"The client could not be asked ({what})")

    async def _on_elicitation(self, context: Any, params: types.ElicitRequestParams) -> Any:
        return await self._forward("elicitation", lambda ctx: _elicit(ctx, _dump(params)),
                                   meta=_meta_of(context, params))

    async def _on_sampling(self, context: Any, params: types.CreateMessageRequestParams) -> Any:
        return await self._forward("sampling", lambda ctx: _sample(ctx, _dump(params)), meta=_meta_of(context, params))

    async def _on_roots(self, context: Any) -> Any:
        meta = _meta_of(context, None)
        if not self._callers and _trace_id(meta) not in self._ended_traces:
            # Asked outside any call (many servers ask once they are initialized, at the host's
            # start): no client to ask, so no roots. An error here was logged by such servers as a
            # failure at every clean start.
            log.debug("upstream %s asked for roots outside any call: answered with none", self.label)
            return types.ListRootsResult(roots=[])
        return await self._forward("roots/list", lambda ctx: _roots(ctx), meta=meta)

    async def answer_inputs(self, ctx: mcphost.Context | None, requests: dict[str, Any]) -> dict[str, Any]:
        """Answers to a 2026-07-28 upstream's InputRequiredResult, asked of the downstream client under
        the upstream's own keys (all at once, so they travel in one round)."""
        if ctx is None:
            raise mcphost.ToolError("The upstream asked a question, but nobody can answer it here")

        async def one(key: str, request: Any) -> tuple[str, Any]:
            params = _dump(request.params) if getattr(request, "params", None) is not None else {}
            if isinstance(request, types.ElicitRequest):
                return key, await _elicit(ctx, params, key)
            if isinstance(request, types.CreateMessageRequest):
                return key, await _sample(ctx, params, key)
            return key, await _roots(ctx, key)

        size = _CALL.get().size if _CALL.get() is not None else 0  # type: ignore[union-attr]
        async with self.parking.hold(ctx, size + 512 * len(requests)):
            return dict(await asyncio.gather(*(one(key, request) for key, request in requests.items())))

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        await self._log_to(self._caller(), params)

    async def _log_to(self, call: _Call | None, params: types.LoggingMessageNotificationParams) -> None:
        if call is None or call.ctx is None:
            await self.logs.outside_call(self.host, params.level, params.data, params.logger)
            return
        await call.ctx.log(params.level, params.data, logger=params.logger)

    # -- requests ---------------------------------------------------------------------------

    async def session(self, timeout: float | None = None) -> ClientSession:
        """The live client session; UpstreamUnavailable when there is none (within ``timeout``)."""
        if self._session is None and timeout:
            self.start()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._ready.wait()
        if self._session is None:
            detail = f": {self.error}" if self.error else ""
            raise UpstreamUnavailable(f"Upstream server {self.label!r} is not available ({self.state}{detail}); "
                                      "retry shortly")
        return self._session

    async def subscription(self, uri: str, on: bool) -> None:
        """Subscribe to ``uri`` at the upstream (or unsubscribe); its updates reach the host's subscribers.

        Changes are sent one at a time, each bringing the upstream in line with what is wanted when
        it is sent, so a subscribe and an unsubscribe that cross never leave the upstream behind.
        """
        if on:
            self.subscribed.add(uri)
        else:
            self.subscribed.discard(uri)
        if on and self.audience is not None and self._session is None:
            await self.wait_ready(self.settings.timeout)  # a per_session instance just started for it
        async with self._subscribing:
            want = uri in self.subscribed
            if self._session is None or want == (uri in self._sent):
                return  # sent when it (re)connects
            if not (self.listing.capabilities.get("resources") or {}).get("subscribe"):
                return  # it cannot subscribe at all
            try:
                await self._subscribe(self._session, uri, want)
            except Exception as exc:
                log.warning("upstream %s: %s %s failed: %s", self.label, "subscribing to" if want else
                            "unsubscribing from", uri, _describe(exc))

    async def _subscribe(self, session: ClientSession, uri: str, on: bool) -> None:
        """Subscribe ``session`` to ``uri`` (or unsubscribe), with the caller holding ``_subscribing``.

        A session-era upstream gets resources/subscribe and resources/unsubscribe. A 2026-07-28
        upstream has neither: a ``subscriptions/listen`` stream of its own follows ``uri``, opened
        here (this returns once the upstream acknowledged it) and closed to unsubscribe.
        """
        if session.discover_result is None:
            await self.request(None, lambda s: s.subscribe_resource(uri) if on else s.unsubscribe_resource(uri))
        elif on:
            acked: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            task = self._follows[uri] = asyncio.get_running_loop().create_task(
                self._follow(session, uri, acked), name=f"proxy:{self.label}:listen")
            try:
                await acked
            except BaseException:
                task.cancel()
                self._follows.pop(uri, None)
                raise
        else:
            follow = self._follows.pop(uri, None)
            if follow is not None:
                follow.cancel()
                with contextlib.suppress(BaseException):
                    await follow
        if on:
            self._sent.add(uri)
        else:
            self._sent.discard(uri)

    async def _follow(self, session: ClientSession, uri: str, acked: asyncio.Future[None]) -> None:
        """Follow ``uri`` on a listen stream of the 2026-07-28 upstream, relaying its updates; a stream
        the upstream ends (it timed out, say) is opened again while ``uri`` is wanted on this session."""
        while True:
            try:
                async with listen(session, resource_subscriptions=[uri]) as updates:
                    if uri not in (updates.honored.resource_subscriptions or ()):
                        raise MCPError(types.INVALID_PARAMS, f"the upstream does not follow {uri}")
                    if not acked.done():
                        acked.set_result(None)
                    async for event in updates:
                        if isinstance(event, ResourceUpdated):
                            await self._updated(event.uri)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not acked.done():
                    acked.set_exception(exc)
                    return
                log.info("upstream %s: the listen stream following %s ended: %s", self.label, uri, _describe(exc))
            if self._session is not session or uri not in self.subscribed:
                return
            await asyncio.sleep(self.backoff)

    async def _watch_response(self, response: Any) -> None:
        """Notice an HTTP upstream that no longer knows our session (it restarted, or expired it):
        the spec says a client MUST then initialize a new session."""
        if response.request.headers.get("mcp-session-id") is None or response.request.method == "DELETE":
            return
        lost = response.status_code == 404
        if response.status_code == 400:
            body = await response.aread()
            lost = b"session" in body[:2000].lower()
        if lost:
            self._session_lost = True

    async def _fresh_session(self, old: ClientSession, timeout: float) -> ClientSession | None:
        """Reconnect and wait for a session other than ``old`` (None: none within ``timeout``)."""
        if self._session is old:
            log.warning("upstream %s no longer knows this proxy's session; initializing a new one", self.label)
            self._dead.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while self._session is None or self._session is old:
                    await asyncio.sleep(0.02)
        return self._session if self._session is not old else None

    async def request(self, ctx: mcphost.Context | None, call: Callable[[ClientSession], Awaitable[Any]],
                      wait: float | None = None, size: int = 0) -> Any:
        """Run ``call`` on the live session with ``ctx`` as the caller questions are forwarded to.

        An HTTP upstream that answers 404 to our session id (it restarted while we were idle) never
        received the request: the session is initialized again and the request sent once more.
        With a pool (``questions = "own_process"``) a call whose client can answer questions runs on
        a process of its own (it may wait for one), so any question that process asks is the call's.
        """
        if self.pool is not None and ctx is not None and _may_be_asked(ctx):
            async with self.pool.lease() as instance:
                return await instance.request(ctx, call, wait=self.settings.timeout, size=size)
        self.in_flight += 1
        try:
            session = await self.session(wait)
            try:
                return await self._request(session, ctx, call, size)
            except mcphost.McpError:
                if not self._session_lost or self._http is None:
                    raise
            fresh = await self._fresh_session(session, self.settings.timeout)
            if fresh is None:
                raise UpstreamUnavailable(f"Upstream server {self.label!r} lost its session and could not be "
                                          "reconnected; retry shortly")
            return await self._request(fresh, ctx, call, size)
        finally:
            self.in_flight -= 1
            self.last_used = time.monotonic()

    async def _request(self, session: ClientSession, ctx: mcphost.Context | None,
                       call: Callable[[ClientSession], Awaitable[Any]], size: int = 0) -> Any:
        token = next(self._ids)
        record = _Call(ctx, self)
        record.size = size
        _CALL.set(record)  # this task's requests (and what their streams carry) belong to this call
        traced: contextvars.Token[Any] | None = None
        if ctx is not None:
            self._callers[token] = record
            record.trace, traced = _trace_scope(self._traces)
            self._traces[record.trace] = record
            _DOWNSTREAM_CAPABILITIES.set(dict(ctx.session.client_capabilities or {}))
        per_call = self._http is not None and session.discover_result is not None and ctx is not None
        try:
            if per_call:
                try:
                    async with self._per_call(session, record) as own:
                        result = await call(own)
                except BaseExceptionGroup as group:  # the per-call session's task group wraps what the call raised
                    raise _first(group) from None
            else:
                result = await call(session)
        except MCPError as exc:
            if record.failure is not None:  # the upstream failed because its question could not be put
                raise record.failure from None
            if exc.error.code == types.CONNECTION_CLOSED and "byte limit" in exc.error.message:
                # One SSE event over max_message_bytes: that call's stream was dropped, not the connection.
                raise mcphost.McpError(types.INTERNAL_ERROR, f"The upstream's reply is over this server's "
                                       f"max_message_bytes ({self.settings.max_message_bytes}); it was dropped"
                                       ) from None
            if exc.error.code == types.CONNECTION_CLOSED:
                if not per_call:  # the shared connection died: reconnect (a call's own stream may just end)
                    log.warning("upstream %s: the connection closed during a call; reconnecting", self.label)
                    self._dead.set()
                raise UpstreamUnavailable(f"Upstream server {self.label!r} went away during the call") from None
            raise mcphost.McpError(exc.error.code, exc.error.message, exc.error.data) from None
        except (httpx2.HTTPError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            if not per_call or isinstance(exc, httpx2.ConnectError | ConnectionError):
                log.warning("upstream %s: %s; reconnecting", self.label, _describe(exc))
                self._dead.set()  # the upstream itself is gone, not only this call's stream
            raise UpstreamUnavailable(f"Upstream server {self.label!r} failed: {_describe(exc)}") from None
        except pydantic.ValidationError as exc:  # a result the mcp client refuses to parse
            log.warning("upstream %s sent an invalid result: %s", self.label, exc)
            raise mcphost.ToolError(f"Upstream server {self.label!r} sent a result that is not valid MCP") from None
        finally:
            self._callers.pop(token, None)
            if record.trace is not None:
                self._traces.pop(record.trace, None)
                self._ended_traces[record.trace] = None
                if len(self._ended_traces) > ENDED_TRACES:
                    self._ended_traces.popitem(last=False)
            record.ended.set()  # a question of this call still out is answered now (_forward)
            if traced is not None:
                otel_context.detach(traced)
        if record.failure is not None:
            raise record.failure
        return result

    @contextlib.asynccontextmanager
    async def _per_call(self, shared: ClientSession, record: _Call) -> AsyncIterator[ClientSession]:
        """A client session of its own for one call to a 2026-07-28 HTTP upstream.

        Each 2026-07-28 request is independent (no handshake: the shared session's discover result is
        adopted), so a session per call costs little, and the notifications and questions arriving on
        the call's stream then belong to that call for certain, however many calls are in flight.
        """
        settings = self.settings
        assert self._http is not None and shared.discover_result is not None
        async with contextlib.AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(
                http_transport(settings.url or "", http_client=self._http, terminate_on_close=False,
                                       max_sse_event_size=settings.max_message_bytes))

            async def elicit(context: Any, params: Any) -> Any:
                return await self._forward("elicitation", lambda ctx: _elicit(ctx, _dump(params)), record)

            async def sample(context: Any, params: Any) -> Any:
                return await self._forward("sampling", lambda ctx: _sample(ctx, _dump(params)), record)

            async def roots(context: Any) -> Any:
                return await self._forward("roots/list", lambda ctx: _roots(ctx), record)

            async def logged(params: types.LoggingMessageNotificationParams) -> None:
                await self._log_to(record, params)

            own = await stack.enter_async_context(ClientSession(
                read, write, read_timeout_seconds=settings.timeout, sampling_callback=sample,
                elicitation_callback=elicit, list_roots_callback=roots, logging_callback=logged,
                message_handler=self._on_message, client_info=CLIENT_INFO, log_level="debug",
                extensions={tasks.EXTENSION: {}}, result_claims=tasks.CLAIMS))
            own.adopt(shared.discover_result)
            _forward_capabilities(own)
            maps = getattr(shared, "_x_mcp_header_maps", None)  # Mcp-Param-* headers the listing declared
            if maps is not None and hasattr(own, "_x_mcp_header_maps"):
                own._x_mcp_header_maps = maps
            yield own

    async def rounds(self, ctx: mcphost.Context | None, send: Callable[..., Awaitable[Any]],
                     session: ClientSession | None = None) -> Any:
        """Call ``send(input_responses=, request_state=)`` until the upstream stops asking (2026-07-28
        upstreams answer questions with an InputRequiredResult; session-era ones never do)."""
        responses: dict[str, Any] | None = None
        state: str | None = None
        for _ in range(MAX_ROUNDS):
            result = await send(input_responses=responses, request_state=state)
            if isinstance(result, tasks.TaskCreated) and session is not None:  # tools/call only
                return await tasks.follow(session, ctx, result, self.answer_inputs)
            if not isinstance(result, types.InputRequiredResult):
                return result
            responses = await self.answer_inputs(ctx, dict(result.input_requests or {}))
            state = result.request_state
        raise mcphost.ToolError(f"Upstream server {self.label!r} kept asking questions; gave up after "
                                f"{MAX_ROUNDS} rounds")


#: The downstream client's capabilities, for the 2026-07-28 upstream request being sent in this task.
_DOWNSTREAM_CAPABILITIES: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "mcphost_proxy_downstream_capabilities", default=None)
_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
_QUESTION_CAPABILITIES = ("elicitation", "sampling", "roots")


def _forward_capabilities(session: ClientSession) -> None:
    """Make each 2026-07-28 request declare what the downstream client can answer, not what the proxy can.

    A stateless upstream decides per request which questions it may ask from the capabilities in
    ``_meta``; the proxy can forward elicitation, sampling and roots only when the client it serves
    declared them. The ``mcp`` client stamps its own capabilities on every request and has no
    per-request override, so its stamp is wrapped (a private attribute: checked when mcp is upgraded).
    """
    original = getattr(session, "_stamp", None)
    if original is None:
        return

    def stamp(data: dict[str, Any], opts: Any) -> None:
        original(data, opts)
        downstream = _DOWNSTREAM_CAPABILITIES.get()
        meta = (data.get("params") or {}).get("_meta")
        if downstream is not None and isinstance(meta, dict):
            declared = dict(meta.get(_CAPABILITIES_META) or {})
            for name in _QUESTION_CAPABILITIES:
                if name in downstream:
                    declared[name] = downstream[name]
                else:
                    declared.pop(name, None)
            extensions = dict(declared.get("extensions") or {})
            theirs = downstream.get("extensions")
            if isinstance(theirs, dict) and tasks.EXTENSION in theirs:
                extensions[tasks.EXTENSION] = theirs[tasks.EXTENSION]
            else:
                extensions.pop(tasks.EXTENSION, None)
            if extensions:
                declared["extensions"] = extensions
            else:
                declared.pop("extensions", None)
            meta[_CAPABILITIES_META] = declared

    session._stamp = stamp


class _Call:
    """One downstream request being forwarded: whom to ask, and a failure to raise in its handler."""

    __slots__ = ("ctx", "ended", "failure", "size", "trace", "upstream")

    def __init__(self, ctx: mcphost.Context | None, upstream: Upstream | None = None) -> None:
        self.ctx = ctx
        self.upstream = upstream
        #: The trace id its upstream requests carry (``_meta.traceparent``); set while in flight.
        self.trace: int | None = None
        #: Set when the call is over (answered, failed or cancelled): its questions are withdrawn.
        self.ended = asyncio.Event()
        #: What the call carries (its arguments' size), counted while it is parked (parking.py).
        self.size = 0
        self.failure: BaseException | None = None


def _trace_scope(taken: dict[int, Any]) -> tuple[int, contextvars.Token[Any] | None]:
    """The trace id the current call's upstream requests carry, unique among the calls in flight on
    one connection, and the token to detach when the context was set here (None when not).

    The ``mcp`` client puts the current OpenTelemetry context in each request's ``_meta.traceparent``
    (SEP-414), and an official Python SDK server runs its handler in the context it received, so the
    questions it sends carry the same trace id back: over stdio, where nothing else on the wire says
    which call a question belongs to, that trace id does. The caller's own trace is kept when there is
    one (the host's telemetry) and no other call in flight here has it; otherwise a fresh, unsampled
    trace id is set (nothing is recorded for it)."""
    current = otel_trace.get_current_span().get_span_context()
    if current.is_valid and current.trace_id not in taken:
        return current.trace_id, None
    trace_id = secrets.randbits(128) or 1
    while trace_id in taken:
        trace_id = secrets.randbits(128) or 1
    parent = otel_trace.NonRecordingSpan(otel_trace.SpanContext(
        trace_id, secrets.randbits(64) or 1, is_remote=True, trace_flags=otel_trace.TraceFlags(0)))
    return trace_id, otel_context.attach(otel_trace.set_span_in_context(parent))


def _may_be_asked(ctx: mcphost.Context) -> bool:
    """Whether the downstream client declared it can answer a question (elicitation, sampling, roots):
    a call from any other client cannot have its upstream's questions forwarded anyway."""
    declared = ctx.session.client_capabilities or {}
    return any(name in declared for name in _QUESTION_CAPABILITIES)


def _meta_of(context: Any, params: Any) -> Any:
    """The ``_meta`` of an upstream's request, from its params or the callback's request context."""
    meta = getattr(params, "meta", None) if params is not None else None
    return meta if meta is not None else getattr(context, "meta", None)


def _trace_id(meta: Any) -> int | None:
    """The trace id of a W3C ``traceparent`` in ``meta`` (``00-<32 hex>-<16 hex>-<2 hex>``), or None."""
    value = meta.get("traceparent") if isinstance(meta, Mapping) else getattr(meta, "traceparent", None)
    if not isinstance(value, str) or len(value) < 55 or value[2] != "-":
        return None
    try:
        return int(value[3:35], 16) or None
    except ValueError:
        return None


def _abandoned(what: str) -> Any:
    """The answer an upstream gets to a question whose call is over: the user did not answer."""
    if what == "elicitation":
        return types.ElicitResult(action="cancel")
    return types.ErrorData(code=types.INVALID_REQUEST,
                           message=f"mcphost-proxy: the call that asked ({what}) is over; nobody will answer")


#: The call the current task forwards (set in Upstream._request; seen by the question callbacks
#: through the context the HTTP transport carries from a request to its stream).
_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("mcphost_proxy_call", default=None)


async def _elicit(ctx: mcphost.Context, wire: dict[str, Any], key: str | None = None) -> types.ElicitResult:
    wire.pop("_meta", None)
    if wire.get("mode") == "url":
        answer = await ctx.elicit_url(str(wire.get("message", "")), str(wire.get("url", "")),
                                      elicitation_id=wire.get("elicitationId"), key=key)
    else:
        schema = wire.get("requestedSchema") or {"type": "object", "properties": {}}
        answer = await ctx.elicit(str(wire.get("message", "")), schema, key=key)
    return types.ElicitResult(action=answer.action, content=answer.content)


async def _sample(ctx: mcphost.Context, wire: dict[str, Any], key: str | None = None) -> Any:
    wire.pop("_meta", None)
    messages = wire.pop("messages", [])
    max_tokens = wire.pop("maxTokens", 1000)
    answer = await ctx.sample(messages, max_tokens=max_tokens, key=key, **wire)
    if "toolUse" in str(answer.get("content")) or isinstance(answer.get("content"), list):
        return types.CreateMessageResultWithTools.model_validate(answer)
    return types.CreateMessageResult.model_validate(answer)


async def _roots(ctx: mcphost.Context, key: str | None = None) -> types.ListRootsResult:
    return types.ListRootsResult.model_validate({"roots": await ctx.list_roots(key=key)})


class _ListRequest(types.Request):  # type: ignore[type-arg]
    """A */list request sent as it is (its result is read as plain JSON)."""

    method: str
    params: dict[str, Any] | None = None


class _Plain(pydantic.BaseModel):
    """Any result, kept as the JSON it arrived as (validated by nobody on the event loop)."""

    model_config = pydantic.ConfigDict(extra="allow")


async def _raw_pages(session: ClientSession, method: str) -> list[dict[str, Any]]:
    """Every page of a */list result, as plain dicts (at most 1 000 pages)."""
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    # The client's own send_request validates every result against its method's model on the event
    # loop (20 000 tools: a second); its stamp and dispatcher send the request without that, and
    # the tools are validated one by one in a worker thread (_absorb_tools). Private in mcp 2.3:
    # without them the public send_request is used.
    stamp = getattr(session, "_stamp", None)
    dispatcher = getattr(session, "_dispatcher", None)
    timeout = getattr(session, "_session_read_timeout_seconds", None)
    for _ in range(1000):
        params = {"cursor": cursor} if cursor else None
        if stamp is not None and hasattr(dispatcher, "send_raw_request"):
            data: dict[str, Any] = {"method": method, **({"params": params} if params else {})}
            opts: dict[str, Any] = {"timeout": timeout} if timeout is not None else {}
            stamp(data, opts)
            raw = await dispatcher.send_raw_request(method, data.get("params"), opts)  # type: ignore[union-attr]
            page = dict(raw) if isinstance(raw, dict) else {}
        else:
            result = await session.send_request(_ListRequest(method=method, params=params), _Plain)
            page = dict(result.__pydantic_extra__ or {})
        pages.append(page)
        cursor = page.get("nextCursor") if isinstance(page.get("nextCursor"), str) else None
        if not cursor:
            break
    return pages


def _items(pages: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return [item for page in pages if isinstance(page.get(key), list) for item in page[key] if isinstance(item, dict)]


def _absorb_tools(session: ClientSession, pages: list[dict[str, Any]], label: str) -> list[dict[str, Any]]:
    """The listed tools the ``mcp`` client accepts, taught to its tool cache (it validates structured
    results against the output schemas listed, and a 2026-07-28 client drops tools whose
    x-mcp-header is invalid). Runs in a worker thread: one item that is not a valid Tool is skipped."""
    kept: list[dict[str, Any]] = []
    models: list[types.Tool] = []
    for item in _items(pages, "tools"):
        try:
            models.append(types.Tool.model_validate(item))
        except pydantic.ValidationError as exc:
            log.warning("upstream %s: tool %r is not mounted: not a valid Tool (%s)", label,
                        str(item.get("name"))[:80], str(exc).splitlines()[0])
            continue
        kept.append(item)
    result = types.ListToolsResult(tools=models)
    absorb = getattr(session, "_absorb_tool_listing", None)  # private in mcp 2.3: checked when mcp is upgraded
    if absorb is not None:
        absorb(result, complete=True)
        names = {tool.name for tool in result.tools}
        kept = [item for item in kept if item.get("name") in names]
    return kept


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The exception a task group wrapped (the first that is not a cancellation)."""
    for inner in group.exceptions:
        if isinstance(inner, BaseExceptionGroup):
            return _first(inner)
        if not isinstance(inner, asyncio.CancelledError):
            return inner
    return group.exceptions[0]


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        if inner:
            return _describe(inner[0])
    if isinstance(exc, MCPError):
        return f"{exc.error.message} ({exc.error.code})"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300] if text != type(exc).__name__ else text
