"""The questions an upstream puts mid-call, forwarded to the downstream caller whose call caused them.

Over Streamable HTTP a question arrives on the stream of the request that caused it, whose context
carries the call (``_CALL``); over stdio each call is sent with a trace id of its own in
``_meta.traceparent``, which servers built on the official Python SDK carry back on the questions
they ask while handling it (:func:`_trace_scope`); failing that, a question belongs to the one call in
flight on the connection, and is refused when there are several. So that there never are several on
an upstream that does not echo, the default ``questions = "auto"`` sends a call that may be asked to
a process of its own (pool.py) while another such call is in flight on the shared one, until the
upstream has been seen to echo (:attr:`Upstream.echoes`); ``"own_process"`` always does. A question
the client cannot answer (it did not declare the capability) gets its error upstream and the call goes
on. A question still out when its call ends is answered at once (:meth:`Questions.forward`). Log
messages reach the call the same way.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import itertools
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types
from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace

import mcphost
from mcphost.protocol.versions import QUESTION_CAPABILITIES, may_be_asked

if TYPE_CHECKING:
    from mcphost_proxy.upstream import Upstream

log = logging.getLogger("mcphost.proxy")

MISSING_CLIENT_CAPABILITY = -32021
#: Trace ids of ended calls remembered per connection (see Questions.caller).
ENDED_TRACES = 1024
_QUESTION_CAPABILITIES = QUESTION_CAPABILITIES


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)  # type: ignore[no-any-return]


class Questions:
    """The calls in flight on one upstream connection, to which its questions and log messages go."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.callers: dict[int, _Call] = {}
        #: The calls in flight by the trace id each was sent with (see _trace_scope), and the trace ids
        #: of the last calls that ended (a late question of theirs is refused, never associated).
        self.traces: dict[int, _Call] = {}
        self.ended_traces: collections.OrderedDict[int, None] = collections.OrderedDict()
        self._ids = itertools.count(1)

    def begin(self, ctx: mcphost.Context | None, size: int, attach: bool = True
              ) -> tuple[int, _Call, contextvars.Token[Any] | None]:
        """Register a call about to be forwarded in this task: (its token, its record, the trace context
        to detach at its end; none when not ``attach``: see :func:`_trace_scope`)."""
        token = next(self._ids)
        record = _Call(ctx, self.upstream)
        record.size = size
        _CALL.set(record)  # this task's requests (and what their streams carry) belong to this call
        traced: contextvars.Token[Any] | None = None
        if ctx is not None:
            self.callers[token] = record
            record.trace, traced = _trace_scope(self.traces, attach)
            self.traces[record.trace] = record
        return token, record, traced

    def end(self, token: int, record: _Call, traced: contextvars.Token[Any] | None) -> None:
        """The call is over: a question of it still out is answered now (:meth:`forward`)."""
        self.callers.pop(token, None)
        if record.trace is not None:
            self.traces.pop(record.trace, None)
            self.ended_traces[record.trace] = None
            if len(self.ended_traces) > ENDED_TRACES:
                self.ended_traces.popitem(last=False)
        record.ended.set()
        if traced is not None:
            otel_context.detach(traced)

    def caller(self, meta: Any = None) -> _Call | None:
        """The downstream call to which the upstream's question (or log message) belongs: the one
        whose request's stream it came on (HTTP); else the one whose trace id the question's
        ``_meta.traceparent`` carries (the upstream echoes the context of the request it handles);
        else the one call in flight on this connection."""
        call = _CALL.get()
        if call is not None and call.upstream is self.upstream:
            return call
        trace = _trace_id(meta)
        if trace is not None and trace in self.traces:
            self.upstream.echoes = True  # it carries each call's trace id back: questions route by it
            return self.traces[trace]
        if trace is not None and trace in self.ended_traces:
            return None  # the call that asked is over: never hand its question to another
        if len(self.callers) == 1:
            return next(iter(self.callers.values()))
        return None

    def no_caller(self, what: str, meta: Any = None) -> types.ErrorData:
        if _trace_id(meta) in self.ended_traces:
            why = "the call that asked is over"
        else:
            why = "no call is in flight" if not self.callers else "several calls are in flight"
        return types.ErrorData(code=types.INVALID_REQUEST,
                               message=f"mcphost-proxy cannot forward {what}: {why} on this upstream connection")

    async def forward(self, what: str, ask: Callable[[mcphost.Context], Awaitable[Any]],
                       call: _Call | None = None, meta: Any = None) -> Any:
        """Ask the downstream client on behalf of the upstream (a session-era server-to-client request).

        A failure the downstream caller must see (a 2026-07-28 round that ends the handler) is kept
        on the call and raised there once the upstream answers; a capability the client lacks is the
        upstream's error to handle, not the call's. When
        the call ends while its question is out (its client cancelled it or went away, its session
        ended, a 2026-07-28 client did not come back in time, the upstream timed out), the upstream
        is answered at once (elicitation: ``cancel``; sampling, roots: an error), so its pending
        request holds nothing until a timeout.
        """
        call = call or self.caller(meta)
        if call is None or call.ctx is None:
            return self.no_caller(what, meta)
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
                     self.upstream.label, what)
            return _abandoned(what)
        return asking.result()

    async def _ask(self, what: str, call: _Call, ask: Callable[[mcphost.Context], Awaitable[Any]]) -> Any:
        assert call.ctx is not None
        try:
            async with self.upstream.parking.hold(call.ctx, call.size + 512):
                return await ask(call.ctx)
        except asyncio.CancelledError:
            raise
        except mcphost.ClientRequestError as exc:
            # A capability the client did not declare (say roots/list of a client without roots): the
            # upstream gets the error, per the spec, and decides; the client's call goes on.
            if exc.code == MISSING_CLIENT_CAPABILITY:
                log.info("upstream %s asked %s of a client that cannot answer it: answered %s upstream",
                         self.upstream.label, what, exc.code)
            return types.ErrorData(code=exc.code, message=exc.message, data=exc.data)
        except BaseException as exc:
            call.failure = exc
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"The client could not be asked ({what})")

    async def on_elicitation(self, context: Any, params: types.ElicitRequestParams) -> Any:
        return await self.forward("elicitation", lambda ctx: _elicit(ctx, _dump(params)),
                                   meta=_meta_of(context, params))

    async def on_sampling(self, context: Any, params: types.CreateMessageRequestParams) -> Any:
        return await self.forward("sampling", lambda ctx: _sample(ctx, _dump(params)), meta=_meta_of(context, params))

    async def on_roots(self, context: Any) -> Any:
        meta = _meta_of(context, None)
        call = self.caller(meta)
        outside = call.ctx is None if call is not None else not self.callers
        if outside and _trace_id(meta) not in self.ended_traces:
            # Asked outside any call a client made (many servers ask once they are initialized: at the
            # host's start, or when a pooled process starts for a call; or during a request of the
            # host's own, such as a completion): no client to ask, so no roots. An error here was
            # logged by such servers as a failure at every clean start.
            log.debug("upstream %s asked for roots outside any call: answered with none", self.upstream.label)
            return types.ListRootsResult(roots=[])
        return await self.forward("roots/list", lambda ctx: _roots(ctx), call=call, meta=meta)

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
        async with self.upstream.parking.hold(ctx, size + 512 * len(requests)):
            return dict(await asyncio.gather(*(one(key, request) for key, request in requests.items())))

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        await self.log_to(self.caller(), params)

    async def log_to(self, call: _Call | None, params: types.LoggingMessageNotificationParams) -> None:
        if call is None or call.ctx is None:
            await self.upstream.logs.outside_call(self.upstream.host, params.level, params.data, params.logger)
            return
        await call.ctx.log(params.level, params.data, logger=params.logger)


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


def _trace_scope(taken: dict[int, Any], attach: bool = True) -> tuple[int, contextvars.Token[Any] | None]:
    """The trace id the current call's upstream requests carry, unique among the calls in flight on
    one connection, and the token to detach when the context was set here (None when not).

    The ``mcp`` client puts the current OpenTelemetry context in each request's ``_meta.traceparent``
    (SEP-414), and an official Python SDK server runs its handler in the context it received, so the
    questions it sends carry the same trace id back: over stdio, where nothing else on the wire says
    which call a question belongs to, that trace id does. The caller's own trace is kept when there is
    one (the host's telemetry) and no other call in flight here has it; otherwise a fresh, unsampled
    trace id is set (nothing is recorded for it). ``attach=False``: the id only (the lean path writes
    the ``traceparent`` itself)."""
    current = otel_trace.get_current_span().get_span_context()
    if current.is_valid and current.trace_id not in taken:
        return current.trace_id, None
    trace_id = secrets.randbits(128) or 1
    while trace_id in taken:
        trace_id = secrets.randbits(128) or 1
    if not attach:
        return trace_id, None
    parent = otel_trace.NonRecordingSpan(otel_trace.SpanContext(
        trace_id, secrets.randbits(64) or 1, is_remote=True, trace_flags=otel_trace.TraceFlags(0)))
    return trace_id, otel_context.attach(otel_trace.set_span_in_context(parent))


def _may_be_asked(ctx: mcphost.Context) -> bool:
    """Whether the downstream client declared it can answer a question (elicitation, sampling, roots):
    a call from any other client cannot have its upstream's questions forwarded anyway."""
    return may_be_asked(ctx.session.client_capabilities)


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
