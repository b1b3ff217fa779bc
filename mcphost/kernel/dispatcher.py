"""The dispatcher: classify each message, run requests as tasks, route answers and cancellations.

A request runs in its own task, registered in ``session.inflight`` under its id, so
``notifications/cancelled`` can cancel it and a second request with the same id is refused
instead of crossing replies. The reply is the task's result: a message, or ``None`` when
the request was cancelled (the spec says not to answer those). Middleware collected at
startup wraps method dispatch; with none installed the chain is the handler itself.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from mcphost.budgets import FairPool, Short, current_quota, sync_share
from mcphost.catalog import count_refused
from mcphost.context import Deferred
from mcphost.errors import InsufficientScope, PluginFailures, Refused
from mcphost.kernel import handlers
from mcphost.kernel.continuation import Continuations
from mcphost.kernel.fanout import FanOut
from mcphost.kernel.listen import SUBSCRIPTION_ID, Listener  # noqa: F401 - SUBSCRIPTION_ID: re-exported
from mcphost.kernel.modern import Rounds
from mcphost.kernel.services import Exchange, Services
from mcphost.kernel.tasks import TaskManager
from mcphost.kernel.views import Views
from mcphost.kernel.visibility import Visibility
from mcphost.plugins import run_plugin
from mcphost.protocol import jsonrpc
from mcphost.protocol.auth import grant_of, permits
from mcphost.protocol.era import Era, era_of, request_meta
from mcphost.protocol.errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    SERVER_BUSY,
    McpError,
    method_not_found,
)
from mcphost.protocol.jsonrpc import Kind, Message, RequestId
from mcphost.protocol.modern import ModernError, validate_modern
from mcphost.protocol.sealed import StateSealer
from mcphost.records import Middleware
from mcphost.request import RequestInfo
from mcphost.sessions.session import Connection, Principal, Session
from mcphost.stats import BUDGET, SCOPE

if TYPE_CHECKING:

    from mcphost.catalog import Catalog
    from mcphost.sessions.cluster import Cluster

log = logging.getLogger("mcphost.kernel")

Reply = asyncio.Future[Message | None]
#: A connection's ordered writer for replies: takes the reply synchronously (see Kernel.receive).
Deliver = Callable[[Message], object]
CallNext = Callable[["RequestInfo"], Awaitable[dict[str, Any]]]


_UNKNOWN = object()


class Kernel:
    """Answers MCP messages for sessions; one per host, shared by every transport."""

    def __init__(self, services: Services, middleware: list[Middleware] | None = None) -> None:
        self.services = services
        self.settings = services.settings
        #: The one owner of sessions (registry, caps, lookup, lifecycle hooks, ending).
        self.sessions = services.sessions
        #: What ``ctx.host`` shows plugins.
        self.host = services.host
        #: The catalog being served, read once from the services' getter (again after a reload).
        self.catalog: Catalog = services.catalog()
        #: Each ``[endpoints.NAME]``'s view of the catalog, and the tool search index.
        self.views = Views(services.endpoints, services.catalog)
        self.views.remember()
        self._deferred: dict[tuple[str, RequestId], Deferred] = {}
        #: Notifications for every session and listen stream, and what other processes forward here.
        self.fanout = FanOut(self, self._deferred)
        #: The 2026-07-28 rounds: input-required results and sealed request states.
        self.rounds = Rounds(self)
        #: Open subscriptions/listen streams (2026-07-28) in this process.
        self.listeners: set[Listener] = set()
        #: Set when the host shuts down: listen streams end with their final result.
        self.closing = asyncio.Event()
        self.sealer = StateSealer(_state_keys(self.settings.state_keys), ttl=self.settings.state_ttl)
        self.tasks = TaskManager(self)
        #: Parked runs of resumable handlers (2026-07-28 questions that must not re-run the handler).
        self.continuations = Continuations(self)
        #: Middleware that raised (fail open), logged in full once per plugin.
        self.failures = PluginFailures(log)
        #: Set by the host on a shared backend, else None.
        self.cluster: Cluster | None = None
        self._sync_pool: FairPool | None = None
        call: CallNext = self._dispatch
        for record in reversed(middleware or []):
            if record.fail_closed:
                call = functools.partial(_through_middleware, record, call)
            else:
                call = functools.partial(_guarded_middleware, self.failures, record, call)
        self._call = call

    def catalog_changed(self) -> None:
        """Serve the catalog the services' getter returns now (the host calls this after a reload)."""
        self.catalog = self.services.catalog()
        self.views.schedule_index()

    # -- the entry for every message --------------------------------------------------------

    def serve(self, message: Any, exchange: Exchange) -> Awaitable[None] | None:
        """The one entry for every message a transport receives, of either era.

        Asks ``protocol/`` once which era the message belongs to. A 2026-07-28 message returns
        the coroutine of its whole lifecycle (validate, authorize, ephemeral session, connect,
        run, disconnect, terminate): HTTP awaits it within its request, stdio runs it as the task
        that writes the reply. Refusals (:class:`Refused`) and invalid requests
        (:class:`ModernError`) propagate from that coroutine for the transport to word. A
        session-era message returns None: the transport runs it through its session (found
        through the SessionManager) with :meth:`receive`; the kernel never calls the transport.
        """
        if self.rule_era(message, exchange) == "modern":
            return self._serve_modern(message, exchange)
        return None

    def rule_era(self, message: Any, exchange: Exchange) -> Era:
        """The era :meth:`serve` rules ``message`` belongs to (``protocol/`` decides; a transport
        asks before handing a message over only to apply its own admission to 2026 requests)."""
        if exchange.era is not None or not isinstance(message, dict):  # settled, or a batch: session era
            return exchange.era or "legacy"
        headers = exchange.headers
        return era_of(method=message.get("method"), meta=request_meta(message.get("params")),
                      header_version=headers.get("mcp-protocol-version") if headers is not None else None,
                      session_id=exchange.session_id)

    async def _serve_modern(self, message: dict[str, Any], exchange: Exchange) -> None:
        """The 2026-07-28 lifecycle of one request, in one place for every transport."""
        if "method" not in message:
            raise ModernError(INVALID_REQUEST, "Invalid request: clients may not post responses in this revision")
        request = validate_modern(message, exchange.headers, tool_header_params=self.catalog.tool_header_params,
                                  lower_case=True)
        connection = exchange.connection
        # InsufficientScope before anything runs
        self.authorize(message, connection.principal, exchange.trusted, connection.endpoint)
        sessions = self.sessions
        session = sessions.ephemeral(request, connection.principal, exchange.send, connection.remote)
        session.trusted = exchange.trusted
        session.endpoint = connection.endpoint
        if not sessions.hooks.active:  # no plugin to tell: run it, then let go of the session
            try:
                await exchange.reply(self.receive_modern(session, message, connection))
            finally:
                sessions.release(session)
            return
        # A refusal fires disconnect and terminate ("refused") at once, then propagates to the transport.
        await sessions.open(session, connection, opening=True)
        reason = "complete"
        try:
            reason = await exchange.reply(self.receive_modern(session, message, connection))
        finally:
            await sessions.close(session, reason, end="complete")

    def server_info(self, session: Session) -> dict[str, Any]:
        """The serverInfo ``session`` is shown: its endpoint's, else the host's."""
        version = session.protocol_version or ""
        info = self.services.server_info(version)
        view = self.views.get(session.endpoint) if session.endpoint is not None else None
        return info if view is None else view.server_info(version, info)

    async def redispatch(self, request: RequestInfo) -> dict[str, Any]:
        """Run ``request`` (made by a handler from the one it serves, as ``call_tool`` does) through
        the middleware and dispatch, like a request that arrived."""
        return await self._call(request)

    def visibility(self, session: Session, principal: Principal | None = None) -> Visibility:
        """What the sender of a request of ``session`` may see (its endpoint's view included)."""
        view = self.views.get(session.endpoint) if session.endpoint is not None else None
        return Visibility(session, session.principal if principal is None else principal, view, self.catalog)

    @property
    def sync_pool(self) -> FairPool:
        """The bounded thread pool synchronous handlers run in (``server.sync_workers`` threads, at
        most ``sync_workers_per_principal`` of them for one principal at once).

        Made on first use: a worker forked by the supervisor starts its own threads.
        """
        if self._sync_pool is None:
            self._sync_pool = FairPool(self.settings.sync_workers, sync_share(self.settings))
        return self._sync_pool

    def sync_running(self) -> dict[str, int]:
        """Synchronous calls running now per principal (none before the pool is first used)."""
        return {} if self._sync_pool is None else self._sync_pool.by_principal()

    def close(self) -> None:
        """Let the thread pool go: queued calls are dropped, running ones finish in their threads."""
        if self._sync_pool is not None:
            self._sync_pool.shutdown(wait=False, cancel_futures=True)
            self._sync_pool = None

    # -- entry points for transports ------------------------------------------------------

    def receive(self, session: Session, message: Any, connection: Connection | None = None,
                principal: Principal | None = None, deliver: Deliver | None = None) -> Reply | None:
        """Take one decoded message from ``session``'s client.

        Returns a future resolving to the reply for requests (and an already-resolved one for
        invalid messages), ``None`` for notifications and responses, which get no reply.
        ``connection`` is the transport exchange that carried it (middleware sees it);
        ``principal`` is who sent it, when the transport authenticated this message itself
        (default: the session's principal). ``deliver``: the connection's ordered writer; a
        request's task hands it the reply synchronously as it ends, so the reply takes its place
        among the notifications before anything else runs (the future still resolves).
        """
        session.last_active = time.time()
        try:
            kind = jsonrpc.classify(message)
        except McpError as exc:
            return _done(jsonrpc.error(jsonrpc.readable_id(message), exc), deliver)
        if kind is Kind.REQUEST:
            return self._start(session, message, connection, principal, deliver)
        if kind is Kind.NOTIFICATION:
            self._on_notification(session, message)
        else:
            self._on_response(session, message)
        return None

    def receive_all(self, session: Session, messages: list[Any], connection: Connection | None = None,
                    principal: Principal | None = None) -> list[Reply]:
        """:meth:`receive` for each of ``messages`` (one POST's, or a 2025-03-26 batch): the reply
        futures of its requests, in order, to be answered together."""
        replies = [self.receive(session, message, connection, principal) for message in messages]
        return [reply for reply in replies if reply is not None]

    def _start(self, session: Session, message: Message, connection: Connection | None,
               principal: Principal | None = None, deliver: Deliver | None = None) -> Reply:
        request_id = message["id"]
        if request_id in session.inflight:
            return _done(jsonrpc.error(request_id, McpError(
                INVALID_REQUEST, f"Request id {request_id!r} is already in flight on this session")), deliver)
        if len(session.inflight) >= self.settings.max_inflight:
            return _done(jsonrpc.error(request_id, McpError(
                SERVER_BUSY, "Too many requests in flight on this session; retry later")), deliver)
        refused = self.sessions.admission.admit(session)
        if refused is not None and not isinstance(refused, Short):
            count_refused(self.catalog, message, BUDGET)
            return _done(jsonrpc.error(request_id, _crowded(self.sessions, session)), deliver)
        return self._launch(session, message, refused is None, connection, principal, deliver)

    def _launch(self, session: Session, message: Message, admitted: bool, connection: Connection | None,
                principal: Principal | None = None, deliver: Deliver | None = None) -> asyncio.Task[Message | None]:
        """Run a request in a task of its own; not yet ``admitted`` (this process's allowance of the
        cluster's requests budget was short), the task asks the cluster first."""
        hold = _Slot(admitted)
        run = self._run(session, message, connection, principal, deliver)
        task = asyncio.get_running_loop().create_task(
            run if admitted else self._admit_then(hold, session, message, run, deliver))
        session.inflight[message["id"]] = task
        task.add_done_callback(functools.partial(_finished, self.sessions, session, message["id"], hold))
        return task

    async def _admit_then(self, hold: _Slot, session: Session, message: Message,
                          run: Coroutine[Any, Any, Message | None], deliver: Deliver | None) -> Message | None:
        """Take the request's slot from the cluster's budget (one round trip), then ``run`` it; the
        refusal as its reply when the principal holds its limit over all processes."""
        try:
            refused = await self.sessions.admission.take_request(session)
        except BaseException:
            run.close()
            raise
        if refused is None:
            hold.held = True
            return await run
        run.close()
        count_refused(self.catalog, message, BUDGET)
        request_id: RequestId = message["id"]
        reply = jsonrpc.error(request_id, McpError(SERVER_BUSY, refused.message, refused.data))
        if session.inflight.get(request_id) is asyncio.current_task():
            del session.inflight[request_id]
        if deliver is not None:
            deliver(reply)
        return reply

    def authorize(self, message: Any, principal: Principal | None, trusted: bool = False,
                  endpoint: str | None = None) -> None:
        """Raise :class:`InsufficientScope` when ``message`` targets a record its sender may not use.

        Transports call this before they start answering (over HTTP the refusal is a 403 with a
        challenge, which cannot follow a started response); handlers check again for everyone
        else. Costs nothing while no record declares scopes. A record outside the view of the
        ``endpoint`` the message came to is not refused here: the handler answers it as unknown.
        """
        catalog = self.catalog
        if not catalog.scoped_kinds or not isinstance(message, dict) or not isinstance(message.get("method"), str):
            return
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        needed = catalog.required_scopes(message["method"], params)
        if needed and not permits(grant_of(principal, trusted), needed):
            view = self.views.get(endpoint)
            if view is not None and view.hides(catalog, message["method"], params):
                return
            count_refused(catalog, message, SCOPE)
            raise InsufficientScope(needed)

    def receive_modern(self, session: Session, message: Message, connection: Connection | None = None
                       ) -> Reply | None:
        """Take one validated 2026-07-28 message; like :meth:`receive`, requests get a reply future."""
        try:
            kind = jsonrpc.classify(message)
        except McpError as exc:
            return _done(jsonrpc.error(jsonrpc.readable_id(message), exc))
        if kind is Kind.NOTIFICATION:
            self._on_notification(session, message)
            return None
        if kind is not Kind.REQUEST:
            return _done(jsonrpc.error(None, McpError(INVALID_REQUEST, "A client may not send responses here")))
        if message["method"] not in handlers.MODERN_METHODS:
            return _done(jsonrpc.error(message["id"], method_not_found(message["method"])))
        refused = self.sessions.admission.admit(session)
        if refused is not None and not isinstance(refused, Short):
            count_refused(self.catalog, message, BUDGET)
            return _done(jsonrpc.error(message["id"], _crowded(self.sessions, session)))
        return self._launch(session, message, refused is None, connection)

    async def _run(self, session: Session, message: Message, connection: Connection | None,
                   principal: Principal | None = None, deliver: Deliver | None = None) -> Message | None:
        """Run one request of either era in its task; the reply, or None when it was cancelled."""
        request_id, method = message["id"], message["method"]
        params = message.get("params") or {}
        current_quota.set(session.quota)  # this task's own context: the sync pool shares threads by it
        try:
            if session.era == "modern":
                result = await self.rounds.answer(session, request_id, method, params, connection)
            else:
                result = await self._call(RequestInfo(session, request_id, method, params, None, principal,
                                                      connection=connection, catalog=self.catalog))
            reply = jsonrpc.result(request_id, result)
        except McpError as exc:
            reply = jsonrpc.error(request_id, exc)
        except Refused as exc:  # the response has started: the refusal travels as a JSON-RPC error
            reply = jsonrpc.error(request_id, refusal_error(exc))
        except asyncio.CancelledError:
            if session.inflight.get(request_id) is asyncio.current_task():
                return None  # cancelled on purpose: the client gets no reply
            raise
        except BaseException as exc:  # anything but cancellation: SystemExit from plugin code included
            log.error("request %s (%r) failed", method, request_id, exc_info=exc)
            reply = jsonrpc.error(request_id, McpError(INTERNAL_ERROR, "Internal error"))
            await self.services.report_exception(
                RequestInfo(session, request_id, method, params, connection=connection, catalog=self.catalog), exc)
        task = asyncio.current_task()
        if task is not None and session.inflight.get(request_id) is task:
            if task.cancelling():
                return None  # cancelled, but the handler swallowed the cancellation: still no reply
            # The id is free once the reply exists (the done callback would free it one turn of the
            # loop later, after a transport that writes the reply at once may have answered).
            del session.inflight[request_id]
        if deliver is not None:
            deliver(reply)
        return reply

    async def _dispatch(self, request: RequestInfo) -> dict[str, Any]:
        handler = handlers.METHODS.get(request.method)
        if handler is None or (request.era == "legacy" and request.method in handlers.MODERN_ONLY):
            raise method_not_found(request.method)
        session = request.session
        if not session.initialized and request.method not in handlers.BEFORE_INITIALIZE:
            raise McpError(INVALID_REQUEST, "Session not initialized: send initialize first")
        return await handler(self, request)

    def _on_notification(self, session: Session, message: Message) -> None:
        method = message["method"]
        params = message.get("params") or {}
        if method == "notifications/cancelled":
            request_id = params.get("requestId")
            # Unknown ids are ignored; so are malformed ones (unhashable, or true/1.0 posing as 1).
            task = session.inflight.get(request_id) if jsonrpc.valid_id(request_id) else None
            if task is not None:
                task.cancel()
            elif self.cluster is not None and jsonrpc.valid_id(request_id):
                self.cluster.tell(session.id, {"t": "cancel", "id": request_id})  # running elsewhere?
        elif method == "notifications/initialized" and session.protocol_version is not None:
            session.initialized = True  # before initialize it means nothing
        # Other notifications (roots/list_changed, progress for our requests) need no action.

    def _on_response(self, session: Session, message: Message) -> None:
        if not self._resolve(session, message) and self.cluster is not None:
            self.cluster.tell(session.id, {"t": "response", "m": message})  # another process may wait for it

    def _resolve(self, session: Session, message: Message) -> bool:
        future = session.pending.get(message.get("id"))  # type: ignore[arg-type]  # any other id finds nothing
        if future is not None and not future.done():
            future.set_result(message)
            return True
        return False  # a response for an unknown id is ignored: it may have timed out already

    # -- other processes (shared backend) and notifications (:mod:`mcphost.kernel.fanout`) ----------

    def join(self, cluster: Cluster) -> None:
        """Work with other processes through ``cluster``: act on what they forward here."""
        self.cluster = cluster
        cluster.session_handlers["response"] = lambda session, m: self._resolve(session, m.get("m") or {})
        self.fanout.join(cluster)

    async def notify_resource_updated(self, uri: str) -> None:
        await self.fanout.notify_resource_updated(uri)

    async def notify_list_changed(self, kind: str) -> None:
        """Tell every initialized session and listen stream that a list changed (tools, prompts, resources).

        A session of an ``[endpoints.NAME]`` endpoint is told only when that endpoint's view changed.
        """
        await self.fanout.notify_list_changed(kind)

    async def notify_task(self, record: dict[str, Any]) -> None:
        """Tell listen streams that asked for this task (``notifications.taskIds``) its new state."""
        await self.fanout.notify_task(record)

    # -- services for handlers and scopes ---------------------------------------------------

    def validator_for(self, schema: Mapping[str, Any]) -> Any:
        """A compiled validator for an ad-hoc schema (elicitation forms), cached by content."""
        return _validator_for_text(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS))

    def defer(self, session: Session, request_id: RequestId) -> Deferred:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        deferred = Deferred(session.id, request_id, future)
        key = (session.id, request_id)
        self._deferred[key] = deferred
        future.add_done_callback(lambda _f: self._deferred.pop(key, None))
        return deferred

    def respond(self, session_id: str, request_id: RequestId, value: Any = None,
                error: BaseException | None = None) -> bool:
        """Complete a deferred request from any task; False when none is waiting."""
        deferred = self._deferred.get((session_id, request_id))
        if deferred is None:
            if self.cluster is not None:
                # The request may wait on another process: hand the reply over (JSON-able values only).
                self.cluster.tell(session_id, _deferred_reply(request_id, value, error))
                return True
            return False
        return deferred.reject(error) if error is not None else deferred.resolve(value)



@functools.lru_cache(maxsize=256)
def _validator_for_text(schema_text: bytes) -> Any:
    """The compiled validator of a schema (its canonical JSON text), made once per process."""
    from mcphost.catalog import compile_validator
    return compile_validator(orjson.loads(schema_text))


def refusal_error(exc: Refused) -> McpError:
    """The JSON-RPC error for a refusal met after the response started (or on stdio)."""
    data = {"requiredScopes": list(exc.scopes)} if isinstance(exc, InsufficientScope) else None
    return McpError(INVALID_REQUEST, exc.message, data)


def _state_keys(configured: tuple[str, ...]) -> list[bytes]:
    if configured:
        return [key.encode() for key in configured]
    # One process, no configured key: a random one (sealed states do not survive a restart).
    return [secrets.token_bytes(32)]


async def _through_middleware(record: Middleware, call_next: CallNext, request: RequestInfo) -> dict[str, Any]:
    return await run_plugin(record.fn, request, call_next)  # type: ignore[no-any-return]


async def _guarded_middleware(failures: PluginFailures, record: Middleware, call_next: CallNext,
                              request: RequestInfo) -> dict[str, Any]:
    """Run a fail-open middleware: its own failure never changes the request's outcome.

    Raised before ``call_next``: the rest of the chain runs without it. Raised after the rest
    returned: that result stands. Raised while the rest failed: the rest's error propagates,
    as it would have without this middleware. :class:`McpError` is a deliberate answer (a
    policy refusal, a rate limit) and propagates; so do BaseExceptions (cancellation).
    """
    outcome: list[Any] = [_UNKNOWN, None]  # [result of the rest, error of the rest]

    async def rest(forwarded: RequestInfo) -> dict[str, Any]:
        try:
            result = await call_next(forwarded)
        except BaseException as exc:
            outcome[1] = exc
            raise
        outcome[0] = result
        return result

    try:
        return await run_plugin(record.fn, request, rest)  # type: ignore[no-any-return]
    except McpError:
        raise
    except Exception as exc:
        if exc is outcome[1]:
            raise  # the rest's own error, passed through
        failures.report(record.provenance.plugin if record.provenance else "?", f"middleware {record.name}", exc)
        if outcome[1] is not None:
            raise outcome[1] from None
        if outcome[0] is not _UNKNOWN:
            return outcome[0]  # type: ignore[no-any-return]  # the rest's result, once it is not _UNKNOWN
        return await call_next(request)


def _crowded(sessions: Any, session: Session) -> McpError:
    """The in-band answer to a caller over its requests budget (HTTP answers 429 first), naming it."""
    refused = sessions.admission.crowded(session.quota)
    if refused is None:  # freed meanwhile: still refused this time, for the same reason
        return McpError(SERVER_BUSY, "Over the requests budget; retry later", {"budget": "requests", "retryAfter": 1})
    return McpError(SERVER_BUSY, refused.message, refused.data)


class _Slot:
    """Whether a request holds its slot of its principal's requests budget (given back when it ends)."""

    __slots__ = ("held",)

    def __init__(self, held: bool) -> None:
        self.held = held


def _finished(sessions: Any, session: Session, request_id: RequestId, hold: _Slot, task: asyncio.Task[Any]) -> None:
    """A request's task is done: its id is free again, and its principal's slot too."""
    if session.inflight.get(request_id) is task:
        del session.inflight[request_id]
    if hold.held:
        hold.held = False
        sessions.admission.done(session)


def _deferred_reply(request_id: RequestId, value: Any, error: BaseException | None) -> dict[str, Any]:
    message: dict[str, Any] = {"t": "respond", "id": request_id}
    if error is None:
        message["value"] = value
    elif isinstance(error, McpError):
        message["error"] = error.to_error()
    else:
        message["error"] = {"code": INTERNAL_ERROR, "message": "Internal error"}
    return message


def _done(message: Message, deliver: Deliver | None = None) -> Reply:
    """An answer known at once (an invalid message, a busy session): handed to ``deliver`` now too."""
    if deliver is not None:
        deliver(message)
    future: Reply = asyncio.get_running_loop().create_future()
    future.set_result(message)
    return future
