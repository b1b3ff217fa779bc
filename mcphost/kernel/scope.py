"""The per-request scope behind ``ctx``: progress, logging and server-to-client requests.

This is the session-era implementation: questions to the client (elicitation, sampling,
roots) are JSON-RPC requests sent through the session's outlet, related to the request
being served so a transport puts them on that request's stream, and answered by a later
client message that the kernel routes to the waiting future.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import jsonschema
import orjson

from mcphost.context import Deferred, ElicitResult
from mcphost.errors import ClientRequestError
from mcphost.protocol import jsonrpc
from mcphost.protocol.errors import INVALID_PARAMS, METHOD_NOT_FOUND, REQUEST_TIMEOUT, SERVER_BUSY, McpError
from mcphost.protocol.versions import at_least
from mcphost.request import RequestInfo
from mcphost.sessions.session import LOG_RANK, Principal, Session

if TYPE_CHECKING:
    from mcphost.kernel.services import ScopeKernel as Kernel

log = logging.getLogger("mcphost.kernel")

_ELICIT_ACTIONS = frozenset({"accept", "decline", "cancel"})


@contextlib.asynccontextmanager
async def question_bytes(kernel: Kernel, quota: str, method: str, params: dict[str, Any]) -> AsyncIterator[None]:
    """Hold the bytes of a question (``params`` as JSON) in ``quota``'s "question bytes" budget while
    it is out to the client; past the budget, the question's call fails with -32000 saying "bytes"
    and naming the setting (``max_question_bytes_per_principal`` or ``max_question_bytes``)."""
    budgets = kernel.sessions.budgets
    size = len(orjson.dumps(params, default=str))
    refused = await budgets.take(quota, "question bytes", size)  # across the cluster on a shared backend
    if refused is not None:
        kernel.sessions.admission.refused(quota)
        raise McpError(SERVER_BUSY, f"{method} of {size} bytes: {refused.message}", refused.data)
    try:
        yield
    finally:
        budgets.release(quota, "question bytes", size)


def answered(method: str, answer: dict[str, Any]) -> dict[str, Any]:
    """The result of the client's JSON-RPC response to a question; its error as ClientRequestError."""
    if "error" in answer:
        error = answer["error"] if isinstance(answer["error"], dict) else {}
        raise ClientRequestError(int(error.get("code", 0)) if isinstance(error.get("code"), int) else 0,
                                 str(error.get("message", "client error")), error.get("data"))
    result = answer.get("result")
    if not isinstance(result, dict):
        raise ClientRequestError(INVALID_PARAMS, f"The client answered {method} with a non-object result")
    return result


class RequestScope:
    __slots__ = ("_kernel", "_last_progress", "ended", "method", "principal", "progress_token", "request_id",
                 "session")

    def __init__(self, kernel: Kernel, session: Session, request_id: Any, method: str,
                 progress_token: Any, principal: Principal | None = None) -> None:
        self._kernel = kernel
        self.session = session
        self.principal = session.principal if principal is None else principal
        self.request_id = request_id
        self.method = method
        self.progress_token = progress_token
        self._last_progress: float | None = None
        #: The request was answered without its handler (cancelled, or past its time limit): a
        #: handler running on (one that swallowed its cancellation) sends nothing more for it.
        self.ended = False

    @property
    def host(self) -> Any:
        return self._kernel.host

    async def _send(self, message: dict[str, Any]) -> None:
        outlet = self.session.outlet
        if outlet is not None and not self.session.closed and not self.ended:
            await outlet(message, self.request_id)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self.progress_token is None:
            return
        if not math.isfinite(progress) or (self._last_progress is not None and progress <= self._last_progress):
            # The spec requires progress to increase; a repeat (or NaN) would confuse clients, so drop it.
            log.warning("progress %s for request %r does not increase; not sent", progress, self.request_id)
            return
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self._send(jsonrpc.notification("notifications/progress", params))

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        if level not in LOG_RANK:
            raise ValueError(f"unknown log level {level!r}")
        if not self.session.wants_log(level):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self._send(jsonrpc.notification("notifications/message", params))

    def _require(self, method: str, capability: str, minimum: str | None = None) -> None:
        version = self.session.protocol_version or ""
        if minimum is not None and not at_least(version, minimum):
            raise ClientRequestError(METHOD_NOT_FOUND,
                                     f"{method} is not available in protocol revision {version}")
        if capability not in self.session.client_capabilities:
            raise ClientRequestError(METHOD_NOT_FOUND,
                                     f"The client did not declare the {capability!r} capability "
                                     f"needed for {method}")

    def _may_ask(self, method: str) -> None:
        """Refuse a question the client did not declare it can answer (elicitation: see _elicit_wire)."""
        capability = {"sampling/createMessage": "sampling", "roots/list": "roots"}.get(method)
        if capability is not None:
            self._require(method, capability)

    async def client_request(self, method: str, params: dict[str, Any], timeout: float | None,
                             key: str | None = None) -> dict[str, Any]:
        self._may_ask(method)
        session = self.session
        if session.closed or session.outlet is None:
            raise ClientRequestError(REQUEST_TIMEOUT, f"Cannot send {method}: the client is no longer connected")
        loop = asyncio.get_running_loop()
        outbound_id = session.next_outbound_id()
        future: asyncio.Future[Any] = loop.create_future()
        limit = self._kernel.settings.client_request_timeout if timeout is None else timeout
        async with question_bytes(self._kernel, session.quota, method, params):
            session.pending[outbound_id] = future
            try:
                await self._send(jsonrpc.request(outbound_id, method, params))
                try:
                    answer = await asyncio.wait_for(future, limit)
                except TimeoutError:
                    await self._send(jsonrpc.notification(
                        "notifications/cancelled", {"requestId": outbound_id, "reason": "timed out"}))
                    raise ClientRequestError(REQUEST_TIMEOUT, f"Request '{method}' timed out") from None
            finally:
                session.pending.pop(outbound_id, None)
        return answered(method, answer)

    async def elicit(self, params: dict[str, Any], timeout: float | None, key: str | None = None) -> ElicitResult:
        wire = self._elicit_wire(params)
        answer = await self.client_request("elicitation/create", wire, timeout, key)
        return self._elicit_result(params, answer)

    def _elicit_wire(self, params: dict[str, Any]) -> dict[str, Any]:
        """Check that the client may be asked this, and shape the request for its revision."""
        self._require("elicitation/create", "elicitation", "2025-06-18")
        mode = params.get("mode", "form")
        declared = self.session.client_capabilities.get("elicitation") or {}
        if not isinstance(declared, dict):
            declared = {}
        # An empty elicitation capability means form mode only.
        modes = {m for m in ("form", "url") if m in declared} or {"form"}
        with_modes = at_least(self.session.protocol_version or "", "2025-11-25")
        if not with_modes:
            modes = {"form"}  # mode (and URL elicitation) arrived in 2025-11-25
        if mode not in modes:
            raise ClientRequestError(METHOD_NOT_FOUND,
                                     f"The client does not support {mode!r} elicitation")
        wire = dict(params)
        if not with_modes:
            wire.pop("mode", None)
        elif mode == "url" and not wire.get("elicitationId"):
            wire["elicitationId"] = uuid.uuid4().hex  # required in URL mode
        return wire

    def _elicit_result(self, params: dict[str, Any], answer: dict[str, Any]) -> ElicitResult:
        """The client's answer, checked: a known action, and form content matching the schema."""
        action = answer.get("action")
        if not isinstance(action, str) or action not in _ELICIT_ACTIONS:
            raise ClientRequestError(INVALID_PARAMS, f"Invalid elicitation action {action!r}")
        content = answer.get("content")
        if action != "accept" or params.get("mode", "form") != "form":
            return ElicitResult(action, None)  # type: ignore[arg-type]  # one of _ELICIT_ACTIONS (checked above)
        if not isinstance(content, dict):
            raise ClientRequestError(INVALID_PARAMS, "The accepted elicitation carried no content object")
        validator = self._kernel.validator_for(params["requestedSchema"])
        error = jsonschema.exceptions.best_match(validator.iter_errors(content))
        if error is not None:
            raise ClientRequestError(INVALID_PARAMS,
                                     f"The elicitation answer does not match the requested schema: {error.message}")
        return ElicitResult("accept", content)

    async def notify_resource_updated(self, uri: str) -> None:
        await self._kernel.notify_resource_updated(uri)

    def defer(self) -> Deferred:
        return self._kernel.defer(self.session, self.request_id)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A call of ``name`` as this request's caller, through the middleware and dispatch (see
        :meth:`mcphost.context.Context.call_tool`)."""
        request = RequestInfo(self.session, self.request_id, "tools/call", {"name": name, "arguments": arguments},
                              None, self.principal, catalog=self._kernel.services.catalog(),
                              scope=CalledScope(self))
        return await self._kernel.redispatch(request)

    async def start_task(self) -> bool:
        return False  # only a 2026-07-28 call of a task-capable tool can become a task

    async def close_stream(self, retry_ms: int | None) -> bool:
        close = getattr(self.session.outlet, "close_stream", None)
        if close is None or self.session.closed:
            return False
        return bool(await close(self.request_id, retry_ms))


class CalledScope:
    """The scope of a tool another tool called (``ctx.call_tool``): it asks, logs and is cancelled
    through the calling request's scope; its progress is not sent, the caller reports its own (a
    second series on one progress token would not increase)."""

    __slots__ = ("_outer",)

    def __init__(self, outer: RequestScope) -> None:
        self._outer = outer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._outer, name)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        return None

    async def start_task(self) -> bool:
        return False  # a called tool runs inside its caller's call
