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
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from mcphost.context import Deferred
from mcphost.kernel import handlers
from mcphost.protocol import jsonrpc
from mcphost.protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, SERVER_BUSY, McpError, method_not_found
from mcphost.protocol.jsonrpc import Kind, Message, RequestId
from mcphost.records import Middleware
from mcphost.sessions.session import Session

if TYPE_CHECKING:
    from mcphost.host import Host

log = logging.getLogger("mcphost.kernel")

Reply = asyncio.Future[Message | None]
CallNext = Callable[["RequestInfo"], Awaitable[dict[str, Any]]]


class RequestInfo:
    """One request as middleware sees it. ``name`` is the tool/prompt name or resource URI."""

    __slots__ = ("era", "id", "method", "name", "params", "session")

    def __init__(self, session: Session, request_id: RequestId, method: str, params: dict[str, Any]) -> None:
        self.session = session
        self.id = request_id
        self.method = method
        self.params = params
        self.era = "legacy"
        name = params.get("name", params.get("uri"))
        self.name = name if isinstance(name, str) else None

    def __repr__(self) -> str:
        return f"<RequestInfo {self.method} id={self.id!r} name={self.name!r}>"


class Kernel:
    """Answers MCP messages for sessions; one per host, shared by every transport."""

    def __init__(self, host: Host, middleware: list[Middleware] | None = None) -> None:
        self.host = host
        self.settings = host.config.server
        self._deferred: dict[tuple[str, RequestId], Deferred] = {}
        call: CallNext = self._dispatch
        for record in reversed(middleware or []):
            call = functools.partial(_guarded_middleware, record, call)
        self._call = call

    # -- entry points for transports ------------------------------------------------------

    def receive(self, session: Session, message: Any) -> Reply | None:
        """Take one decoded message from ``session``'s client.

        Returns a future resolving to the reply for requests (and an already-resolved one for
        invalid messages), ``None`` for notifications and responses, which get no reply.
        """
        session.last_active = time.time()
        try:
            kind = jsonrpc.classify(message)
        except McpError as exc:
            return _done(jsonrpc.error(jsonrpc.readable_id(message), exc))
        if kind is Kind.REQUEST:
            return self._start(session, message)
        if kind is Kind.NOTIFICATION:
            self._on_notification(session, message)
        else:
            self._on_response(session, message)
        return None

    def _start(self, session: Session, message: Message) -> Reply:
        request_id = message["id"]
        if request_id in session.inflight:
            return _done(jsonrpc.error(request_id, McpError(
                INVALID_REQUEST, f"Request id {request_id!r} is already in flight on this session")))
        if len(session.inflight) >= self.settings.max_inflight:
            return _done(jsonrpc.error(request_id, McpError(
                SERVER_BUSY, "Too many requests in flight on this session; retry later")))
        task = asyncio.get_running_loop().create_task(self._run(session, message))
        session.inflight[request_id] = task
        task.add_done_callback(functools.partial(_forget, session, request_id))
        return task

    async def _run(self, session: Session, message: Message) -> Message | None:
        request_id = message["id"]
        params = message.get("params") or {}
        try:
            result = await self._call(RequestInfo(session, request_id, message["method"], params))
            reply = jsonrpc.result(request_id, result)
        except McpError as exc:
            reply = jsonrpc.error(request_id, exc)
        except asyncio.CancelledError:
            if session.inflight.get(request_id) is asyncio.current_task():
                return None  # cancelled on purpose: the client gets no reply
            raise
        except Exception:
            log.exception("request %s (%r) failed", message.get("method"), request_id)
            reply = jsonrpc.error(request_id, McpError(INTERNAL_ERROR, "Internal error"))
        task = asyncio.current_task()
        if task is not None and task.cancelling() and session.inflight.get(request_id) is task:
            return None  # cancelled, but the handler swallowed the cancellation: still no reply
        return reply

    async def _dispatch(self, request: RequestInfo) -> dict[str, Any]:
        handler = handlers.METHODS.get(request.method)
        if handler is None:
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
        elif method == "notifications/initialized" and session.protocol_version is not None:
            session.initialized = True  # before initialize it means nothing
        # Other notifications (roots/list_changed, progress for our requests) need no action.

    def _on_response(self, session: Session, message: Message) -> None:
        future = session.pending.get(message.get("id"))  # type: ignore[arg-type]
        if future is not None and not future.done():
            future.set_result(message)
        # A response for an unknown id is ignored: it may have timed out already.

    # -- services for handlers and scopes ---------------------------------------------------

    @functools.lru_cache(maxsize=256)  # noqa: B019 - the kernel lives as long as the host
    def _validator_for_text(self, schema_text: bytes) -> Any:
        from mcphost.catalog import compile_validator
        return compile_validator(orjson.loads(schema_text))

    def validator_for(self, schema: Mapping[str, Any]) -> Any:
        """A compiled validator for an ad-hoc schema (elicitation forms), cached by content."""
        return self._validator_for_text(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS))

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
            return False
        return deferred.reject(error) if error is not None else deferred.resolve(value)

    async def notify_resource_updated(self, uri: str) -> None:
        message = jsonrpc.notification("notifications/resources/updated", {"uri": uri})
        for session in list(self.host.sessions.values()):
            if uri in session.subscriptions and session.outlet is not None and not session.closed:
                await _deliver(session, message)

    async def notify_list_changed(self, kind: str) -> None:
        """Tell every initialized session that a list changed (kind: tools, prompts, resources)."""
        message = jsonrpc.notification(f"notifications/{kind}/list_changed")
        for session in list(self.host.sessions.values()):
            if session.initialized and session.outlet is not None and not session.closed:
                await _deliver(session, message)


async def _deliver(session: Session, message: Message) -> None:
    try:
        await session.outlet(message, None)  # type: ignore[misc]
    except Exception:
        log.warning("could not deliver %s to session %s", message.get("method"), session.id[:8], exc_info=True)


async def _guarded_middleware(record: Middleware, call_next: CallNext, request: RequestInfo) -> dict[str, Any]:
    return await record.fn(request, call_next)


def _forget(session: Session, request_id: RequestId, task: asyncio.Task[Any]) -> None:
    if session.inflight.get(request_id) is task:
        del session.inflight[request_id]


def _done(message: Message) -> Reply:
    future: Reply = asyncio.get_running_loop().create_future()
    future.set_result(message)
    return future
