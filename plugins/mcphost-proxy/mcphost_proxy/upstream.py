"""One upstream MCP server: its connection through the official ``mcp`` client, and its lifecycle.

A supervisor task owns the connection (the ``mcp`` client's context managers are entered and
left in that one task, as anyio requires): it connects, lists what the server offers, and waits
until the connection dies; then it reconnects after a delay that doubles up to a limit. Meanwhile
calls answer a clear error. A call is forwarded by :meth:`Upstream.request`: a tool call on the lean
path (lean.py: kept connections, replies by id), anything else through the client. The server's
questions to its client go to the downstream caller whose call caused them (questions.py); a
2026-07-28 upstream's rounds and per-call sessions are in rounds.py; private parts of the ``mcp``
SDK are reached only through sdk.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import httpx2
import mcp_types as types
import pydantic
from mcp import ClientSession, MCPError
from mcp.client.subscriptions import ResourceUpdated, listen

import mcphost
from mcphost.protocol import jsonrpc
from mcphost_proxy import sdk, tasks
from mcphost_proxy.apps import ui_uri, upstream_uri
from mcphost_proxy.framing import BoundedTransport, Switch, stdio_transport
from mcphost_proxy.lean import LeanCall
from mcphost_proxy.logs import LogRelay
from mcphost_proxy.parking import Parking
from mcphost_proxy.questions import _CALL, Questions, _may_be_asked
from mcphost_proxy.rounds import _DOWNSTREAM_CAPABILITIES, CLIENT_INFO, forward_capabilities, per_call
from mcphost_proxy.settings import ServerSettings
from mcphost_proxy.wire import HttpClient
from mcphost_proxy.work import offload

log = logging.getLogger("mcphost.proxy")

#: The shortest wait before listing again when an upstream's lists' ttlMs lapses (milliseconds).
MIN_RELIST_MS = 1000

#: Upstream states, as ``mcphost plugins`` shows them.
STOPPED, STARTING, RUNNING, RESTARTING, FAILED = "stopped", "starting", "running", "restarting", "failed"
#: How an oauth / token-exchange upstream without a listing credential shows until someone signs in.
AWAITING = "awaiting a sign-in"


class Lessor(Protocol):
    """Processes of one server that calls lease one at a time (:class:`mcphost_proxy.pool.Pool`)."""

    instances: list[Upstream]
    echoes: bool

    def lease(self, key: str = "", size: int = 0) -> contextlib.AbstractAsyncContextManager[Upstream]: ...

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
    #: The shortest ``ttlMs`` a 2026-07-28 upstream gave its lists (None: none given); not compared.
    ttl_ms: int | None = field(default=None, compare=False)


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
        #: The protocol version the upstream last agreed to (2025-11-25, 2026-07-28, ...; None before it did).
        self.protocol_version: str | None = None
        self._session: ClientSession | None = None
        self._ready = asyncio.Event()
        self._dead = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        #: The calls in flight here, to which the upstream's questions and log messages go.
        self.questions = Questions(self)
        self._refresh: asyncio.Task[None] | None = None
        self._relist_again = False
        #: The re-listing due when the lists' ttlMs lapses (see _expire).
        self._expiry: asyncio.TimerHandle | None = None
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
        #: The lean per-call path (lean.py): kept connections to an HTTP upstream, the SDK transport whose
        #: session id they carry, or the stdio process's reply switch.
        self.wire: HttpClient | None = None
        self.http_transport: Any = None
        self.switch: Switch | None = None
        #: The turns of the stdio upstreams starting at once (max_starting; None: start at once).
        self.starting: asyncio.Semaphore | None = None
        #: questions = "own_process" or "auto": the processes a call that may ask leases (set by the plugin).
        self.pool: Lessor | None = None
        #: The per-principal budget in bytes of the calls waiting (pool.QueuedBytes; set by the plugin):
        #: a call that must wait for this upstream to (re)start holds its arguments meanwhile.
        self.queued: Any = None
        #: A question carried the trace id of its call back (questions.py): concurrent questions route by
        #: it, so questions = "auto" keeps every call on this process. Calls in flight whose client may be asked.
        self.echoes = False
        self.asking = 0
        #: An oauth / token-exchange server with no listing credential of the gateway's own: not started
        #: until a principal's token lists it (credentials.py ``adopt``); "awaiting a sign-in" till then.
        self.awaiting = False
        #: Where the bearer token of its listing comes from (set by ``adopt``): a signed-in principal's
        #: current token (refreshed as needed), asked for at each HTTP request of this connection.
        self.token_source: Callable[[], Awaitable[str | None]] | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the supervisor (idempotent); :meth:`wait_ready` waits for the first connection."""
        if self._task is None or self._task.done():
            self._stopping = False
            if self.state == STOPPED:  # from now on (readiness, the CLI's --start wait for it)
                self.state = STARTING
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

    def unready(self) -> mcphost.Unready | None:
        """This upstream for ``/readyz`` when it is not serving (None when it is). One started only by
        the first request (``start = "lazy"``) and not asked yet counts as serving: a balancer waiting
        for it would never send that request."""
        if self._ready.is_set() or (self.state == STOPPED and self._task is None and not self._stopping):
            return None  # listed and mounted (running is set a moment before the mount), or lazy
        return mcphost.Unready(self.label, STARTING if self.state == RUNNING else self.state, self.settings.required)

    def status(self) -> str:
        """One line for ``mcphost plugins``: name, transport, state, protocol version, what is mounted
        and declared, last error."""
        text = f"{self.label} ({self.settings.transport}: {AWAITING if self.awaiting else self.state}"
        if self.state == RUNNING:
            text += f", {self.protocol_version}, {len(self.listing.tools)} tools"
            extensions = declared_extensions(self.listing.capabilities)
            if extensions:
                text += f", extensions: {' '.join(extensions)}"
        if self.settings.required:
            text += ", required"
        if self.restarts:
            text += f", {self.restarts} restarts"
        if self.error and self.state != RUNNING:
            text += f", last error: {self.error}"
        return text + ")"

    def describe(self) -> dict[str, Any]:
        """The upstream's state as data (``mcphost_status``, the console, ``mcphost plugins``): name,
        transport, state, target (command line or URL), tools mounted, restarts, last error, seconds
        until the next attempt while restarting, whether it is ``required`` (``/readyz``), the
        protocol version it agreed to (``era``) and the ``extensions`` it declared."""
        settings = self.settings
        target = mcphost.redact_text(settings.url or "") if settings.command is None else " ".join(
            mcphost.redact([settings.command, *settings.args]))
        retry = None
        if self.retry_at is not None and self.state == RESTARTING:
            retry = max(0.0, self.retry_at - time.monotonic())
        return {"name": self.label, "transport": settings.transport,
                "state": AWAITING if self.awaiting else self.state, "target": target,
                "tools": len(self.listing.tools) if self.state == RUNNING else 0, "restarts": self.restarts,
                "error": self.error, "retry_in": retry, "required": settings.required,
                "era": self.protocol_version, "extensions": declared_extensions(self.listing.capabilities)}

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
                self.error = mcphost.redact_text(str(exc))
                self.state = FAILED
                log.error("upstream %s cannot start: %s", self.label, exc)
                return
            except BaseException as exc:
                self.error = _describe(exc)
                log.warning("upstream %s: %s", self.label, self.error)
            finally:
                self._session = None
                self._http = None
                if self.wire is not None:
                    self.wire.close()
                self.wire = self.http_transport = None
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
            read, write = await self._open(stack)
            inbox_send, inbox = sdk.create_context_streams[Any](64)
            loop = asyncio.get_running_loop()

            async def pump() -> None:  # follows the transport so that its end is noticed
                try:
                    async with inbox_send:
                        async for item in read:
                            # The HTTP transport reads a request's SSE stream in the context of the
                            # task that sent the request; passing that context on lets a question
                            # find the call that caused it (_CALL).
                            origin = sdk.last_context(read)
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
                sampling_callback=self.questions.on_sampling,
                elicitation_callback=self.questions.on_elicitation, list_roots_callback=self.questions.on_roots,
                logging_callback=self.questions.on_log,
                message_handler=self._on_message, client_info=CLIENT_INFO, log_level="debug"))
            if settings.era == "auto":
                try:
                    await session.discover()
                except Exception:
                    await session.initialize()
            else:
                await session.initialize()
            self.protocol_version = session.protocol_version
            if session.discover_result is not None:
                forward_capabilities(session)
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
            self._expire()
            self.state = RUNNING
            self.error = None
            await self._changed()
            self._ready.set()
            log.info("upstream %s is running: %d tools, %d prompts, %d resources, %d templates", self.label,
                     len(self.listing.tools), len(self.listing.prompts), len(self.listing.resources),
                     len(self.listing.templates))
            await self._dead.wait()
            self._session = None
            if self._expiry is not None:
                self._expiry.cancel()
            group.cancel_scope.cancel()
            if not self._stopping:
                raise ConnectionError("the connection closed" if settings.command is None
                                      else "the process exited")

    async def _open(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        """Open the transport (its end joins ``stack``): the client's read and write streams."""
        settings = self.settings
        if settings.command:
            self.switch = self.switch or Switch()
            return await stack.enter_async_context(stdio_transport(
                settings.command, list(settings.args), env=settings.resolved_env() or None, cwd=settings.cwd,
                max_message_bytes=settings.max_message_bytes, label=self.label, admit=self.logs.admit,
                starting=self.starting, switch=self.switch))
        # Only the configured headers (and, for a per-user server listed with a signed-in principal's
        # token, that token): nothing from the downstream request (its bearer token in particular)
        # ever reaches the upstream.
        hooks: dict[str, list[Any]] = {"response": [self._watch_response]}
        if self.token_source is not None:
            hooks["request"] = [functools.partial(_bearer, self)]
        client = httpx2.AsyncClient(headers=settings.resolved_headers(),
                                    timeout=httpx2.Timeout(settings.timeout, read=None),
                                    transport=BoundedTransport(settings.max_message_bytes), event_hooks=hooks)
        await stack.enter_async_context(client)
        self._http = client
        streams = await stack.enter_async_context(
            sdk.http_transport(settings.url or "", http_client=client, max_sse_event_size=settings.max_message_bytes,
                               on_transport=self._held))
        self.wire = HttpClient(settings.url or "", settings.resolved_headers(), pool_size=settings.pool_size,
                               limit=settings.max_message_bytes)
        return streams

    def _held(self, transport: Any) -> None:
        self.http_transport = transport

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
        # Paging stops at max_tools items (ten times that with include patterns, which may pick later
        # ones): a listing never grows without bound.
        most = self.settings.max_tools * (10 if self.settings.include else 1)
        every: list[dict[str, Any]] = []
        if caps is None or caps.tools is not None:
            pages = await _raw_pages(session, "tools/list", "tools", most, self.label)
            every += pages
            listing.tools = await offload(_absorb_tools, session, pages, self.label)
        if caps is None or caps.prompts is not None:
            every += (pages := await _raw_pages(session, "prompts/list", "prompts", most, self.label))
            listing.prompts = _items(pages, "prompts")
        if caps is None or caps.resources is not None:
            every += (pages := await _raw_pages(session, "resources/list", "resources", most, self.label))
            listing.resources = _items(pages, "resources")
            every += (pages := await _raw_pages(session, "resources/templates/list", "resourceTemplates", most,
                                                self.label))
            listing.templates = _items(pages, "resourceTemplates")
        ttls = [page["ttlMs"] for page in every if type(page.get("ttlMs")) is int and page["ttlMs"] >= 0]
        listing.ttl_ms = min(ttls) if ttls else None
        return listing

    def _expire(self) -> None:
        """List again when the lists' ``ttlMs`` lapses (SEP-2549: a 2026-07-28 upstream may change its
        lists without telling; the hint says how long they hold). 0 says "stale at once": those lists
        are read again on list_changed only, as is a ttlMs under MIN_RELIST_MS's floor (no polling)."""
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        ttl = self.listing.ttl_ms
        if ttl and not self._stopping:
            delay = max(ttl, MIN_RELIST_MS) / 1000
            self._expiry = asyncio.get_running_loop().call_later(delay, self._schedule_relist)

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

    async def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        """A notification the lean path received (as :meth:`_on_message` handles the client's)."""
        if method.endswith("/list_changed") and method != "notifications/roots/list_changed":
            self._schedule_relist()
        elif method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
            await self._updated(params["uri"])

    async def _updated(self, uri: str) -> None:
        """Relay a resource update: to the one session a per_session instance serves (if it follows
        ``uri``), to whom :attr:`relay` picks, else to every host subscriber of ``uri`` (sessions and
        listen streams). ``uri`` is the upstream's (a ``ui://`` one is relayed as the host serves it)."""
        uri = ui_uri(self.settings.name, uri)
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
            self._expire()
            await self._changed()
            if not self._relist_again:
                return

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
            wire = upstream_uri(self.settings.name, uri)  # a ui:// URI as the upstream knows it (apps.py)
            await self.request(None, lambda s: s.subscribe_resource(wire) if on else s.unsubscribe_resource(wire))
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
        wire = upstream_uri(self.settings.name, uri)
        while True:
            try:
                async with listen(session, resource_subscriptions=[wire]) as updates:
                    if wire not in (updates.honored.resource_subscriptions or ()):
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
        With a pool (``questions = "own_process"``, or ``"auto"`` while another asking call is in flight
        here on an upstream not seen to echo: :meth:`_leases`) a call whose client can answer questions
        runs on a process of its own (it may wait for one), so any question that process asks is the call's.
        """
        askable = self.pool is not None and ctx is not None and _may_be_asked(ctx)
        if askable and self._leases():
            assert self.pool is not None and ctx is not None
            async with self.pool.lease(_quota(ctx), size) as instance:
                return await instance.request(ctx, call, wait=self.settings.timeout, size=size)
        self.in_flight += 1
        self.asking += askable
        try:
            if self._session is None and wait and self.queued is not None and ctx is not None:
                # Waiting for this upstream to start (a per_session instance just made for the caller,
                # or a restart): counted against the caller's queued bytes, as a pool's line is.
                with self.queued.hold(_quota(ctx), size):
                    session = await self.session(wait)
            else:
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
            self.asking -= askable
            self.last_used = time.monotonic()

    def _leases(self) -> bool:
        """Whether a call whose client may be asked leases a pooled process: always with ``own_process``;
        with ``auto`` while another such call is in flight here and the upstream has not been seen to
        echo the trace id (two questions could not be told apart)."""
        if self.settings.questions == "own_process":
            return True
        echoed = self.echoes or (self.pool is not None and self.pool.echoes)
        return self.asking > 0 and not echoed

    async def _request(self, session: ClientSession, ctx: mcphost.Context | None,
                       call: Callable[[ClientSession], Awaitable[Any]], size: int = 0) -> Any:
        lean = ctx is not None and self._lean(ctx)
        token, record, traced = self.questions.begin(ctx, size, attach=not lean)
        if ctx is not None:
            _DOWNSTREAM_CAPABILITIES.set(dict(ctx.session.client_capabilities or {}))
        separate = not lean and self._http is not None and session.discover_result is not None and ctx is not None
        try:
            if lean:
                result = await call(LeanCall(self, session, record))  # type: ignore[arg-type]
            elif separate:
                try:
                    async with per_call(self, session, record) as own:
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
                if not separate:  # the shared connection died: reconnect (a call's own stream may just end)
                    log.warning("upstream %s: the connection closed during a call; reconnecting", self.label)
                    self._dead.set()
                raise UpstreamUnavailable(f"Upstream server {self.label!r} went away during the call") from None
            raise mcphost.McpError(exc.error.code, exc.error.message, exc.error.data) from None
        except (httpx2.HTTPError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            if not separate or isinstance(exc, httpx2.ConnectError | ConnectionError):
                log.warning("upstream %s: %s; reconnecting", self.label, _describe(exc))
                self._dead.set()  # the upstream itself is gone, not only this call's stream
            raise UpstreamUnavailable(f"Upstream server {self.label!r} failed: {_describe(exc)}") from None
        except pydantic.ValidationError as exc:  # a result the mcp client refuses to parse
            log.warning("upstream %s sent an invalid result: %s", self.label, exc)
            raise mcphost.ToolError(f"Upstream server {self.label!r} sent a result that is not valid MCP") from None
        finally:
            self.questions.end(token, record, traced)
        if record.failure is not None:
            raise record.failure
        return result

    def _lean(self, ctx: mcphost.Context) -> bool:
        """Whether a call of ``ctx`` takes the lean path (lean.py): its client cannot be asked questions
        nor take a task, the tool does not run only as a task upstream, and the connection has one."""
        if (self.wire is None and self.switch is None) or tasks.TASK_ONLY.get():
            return False
        declared = ctx.session.client_capabilities or {}
        extensions = declared.get("extensions")
        return not (isinstance(extensions, dict) and tasks.EXTENSION in extensions)

class _ListRequest(types.Request):  # type: ignore[type-arg]
    """A */list request sent as it is (its result is read as plain JSON)."""

    method: str
    params: dict[str, Any] | None = None


class _Plain(pydantic.BaseModel):
    """Any result, kept as the JSON it arrived as (validated by nobody on the event loop)."""

    model_config = pydantic.ConfigDict(extra="allow")


async def _raw_pages(session: ClientSession, method: str, key: str = "", most: int | None = None,
                     label: str = "") -> list[dict[str, Any]]:
    """Every page of a */list result, as plain dicts (at most 1 000 pages, and none after the one that
    brings the items under ``key`` past ``most``: the caps refuse the rest, so they are not read)."""
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    count = 0
    # The client's own send_request validates every result against its method's model on the event
    # loop (20 000 tools: a second); its stamp and dispatcher send the request without that, and
    # the tools are validated one by one in a worker thread (_absorb_tools). Private parts (sdk.py):
    # without them the public send_request is used.
    for _ in range(1000):
        params = {"cursor": cursor} if cursor else None
        raw = await sdk.raw_request(session, method, params)
        if raw is not None:
            page = raw
        else:
            result = await session.send_request(_ListRequest(method=method, params=params), _Plain)
            page = dict(result.__pydantic_extra__ or {})
        pages.append(page)
        cursor = page.get("nextCursor") if isinstance(page.get("nextCursor"), str) else None
        count += len(page[key]) if isinstance(page.get(key), list) else 0
        if cursor and most is not None and count >= most:
            log.warning("upstream %s: %s lists more than max_tools (%d): paging stopped after %d pages (%d items)",
                        label, method, most, len(pages), count)
            break
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
    if sdk.absorb_tool_listing(session, result):
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
        return f"{mcphost.redact_text(exc.error.message)} ({exc.error.code})"
    text = mcphost.redact_text(str(exc)) or type(exc).__name__  # an error may quote the URL or command
    return f"{type(exc).__name__}: {text}"[:300] if text != type(exc).__name__ else text


def declared_extensions(capabilities: Mapping[str, Any]) -> list[str]:
    """What an upstream declared beyond the base protocol, as it last listed: ``tasks`` (the
    2025-11-25 tasks capability) and each key of its ``capabilities.extensions`` (2026-07-28:
    ``io.modelcontextprotocol/tasks``, MCP Apps' ``io.modelcontextprotocol/ui``, ...)."""
    declared = ["tasks"] if capabilities.get("tasks") is not None else []
    extensions = capabilities.get("extensions")
    return declared + sorted(extensions) if isinstance(extensions, dict) else declared


def upstream_problem(upstream: Upstream) -> dict[str, str] | None:
    """What the console's problems strip says of ``upstream`` (``mcphost_problems``): nothing while
    it runs, starts for the first time or was stopped; an error while it is restarting (a
    crash loop when it restarted more than once) or failed for good."""
    state = upstream.state
    if state not in (RESTARTING, FAILED):
        return None
    name = upstream.label
    if state == FAILED:
        title = f"Upstream {name} failed"
    elif upstream.restarts > 1:
        title = f"Upstream {name} is crash-looping"
    else:
        title = f"Upstream {name} is restarting"
    detail = f"{upstream.restarts} restart{'s' if upstream.restarts != 1 else ''}"  # its row counts down to the next
    if upstream.error:
        detail += f"; last error: {upstream.error}"
    return {"kind": "upstream", "severity": "error", "title": title, "detail": detail,
            "link": f"#upstream-{name}"}


def _quota(ctx: mcphost.Context) -> str:
    """The key a caller's budgets are kept under: its principal's quota key, else its session."""
    return str(getattr(ctx.session, "quota", "") or ctx.session.id)


async def _bearer(upstream: Upstream, request: Any) -> None:
    """An httpx request hook of a listing connection with a signed-in principal's token: the source's
    current token (refreshed) on every request."""
    source = upstream.token_source
    token = await source() if source is not None else None
    if token:
        request.headers["authorization"] = f"Bearer {token}"
