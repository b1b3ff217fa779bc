"""The 2026-07-28 side of a forwarded request: its rounds, its own client session, its capabilities.

A 2026-07-28 upstream answers a question with an InputRequiredResult: :func:`rounds` asks the
downstream client and sends the request again with the answers (a task it started is followed in
tasks.py). A call that the lean path (lean.py) does not take gets a client session of its own
(:func:`per_call`), and each request declares what the downstream client can answer
(:func:`forward_capabilities`).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp import ClientSession

import mcphost
from mcphost_proxy import sdk, tasks
from mcphost_proxy.questions import _QUESTION_CAPABILITIES, _Call, _dump, _elicit, _roots, _sample

if TYPE_CHECKING:
    from mcphost_proxy.upstream import Upstream

CLIENT_INFO = types.Implementation(name="mcphost-proxy", version="0.1.0")
#: Input-required rounds one forwarded request may take with a 2026-07-28 upstream.
MAX_ROUNDS = 16


async def rounds(upstream: Upstream, ctx: mcphost.Context | None, send: Callable[..., Awaitable[Any]],
                 session: ClientSession | None = None) -> Any:
    """Call ``send(input_responses=, request_state=)`` until the upstream stops asking (2026-07-28
    upstreams answer questions with an InputRequiredResult; session-era ones never do)."""
    responses: dict[str, Any] | None = None
    state: str | None = None
    for _ in range(MAX_ROUNDS):
        result = await send(input_responses=responses, request_state=state)
        if isinstance(result, tasks.TaskCreated) and session is not None:  # tools/call only
            return await tasks.follow(session, ctx, result, upstream.questions.answer_inputs)
        if not isinstance(result, types.InputRequiredResult):
            return result
        responses = await upstream.questions.answer_inputs(ctx, dict(result.input_requests or {}))
        state = result.request_state
    raise mcphost.ToolError(f"Upstream server {upstream.label!r} kept asking questions; gave up after "
                            f"{MAX_ROUNDS} rounds")


@contextlib.asynccontextmanager
async def per_call(upstream: Upstream, shared: ClientSession, record: _Call) -> AsyncIterator[ClientSession]:
    """A client session of its own for one call to a 2026-07-28 HTTP upstream.

    Each 2026-07-28 request is independent (no handshake: the shared session's discover result is
    adopted), so a session per call costs little, and the notifications and questions arriving on
    the call's stream then belong to that call for certain, however many calls are in flight.
    """
    settings = upstream.settings
    assert upstream._http is not None and shared.discover_result is not None
    async with contextlib.AsyncExitStack() as stack:
        read, write = await stack.enter_async_context(
            sdk.http_transport(settings.url or "", http_client=upstream._http, terminate_on_close=False,
                                   max_sse_event_size=settings.max_message_bytes))

        async def elicit(context: Any, params: Any) -> Any:
            return await upstream.questions.forward("elicitation", lambda ctx: _elicit(ctx, _dump(params)), record)

        async def sample(context: Any, params: Any) -> Any:
            return await upstream.questions.forward("sampling", lambda ctx: _sample(ctx, _dump(params)), record)

        async def roots(context: Any) -> Any:
            return await upstream.questions.forward("roots/list", lambda ctx: _roots(ctx), record)

        async def logged(params: types.LoggingMessageNotificationParams) -> None:
            await upstream.questions.log_to(record, params)

        own = await stack.enter_async_context(ClientSession(
            read, write, read_timeout_seconds=settings.timeout, sampling_callback=sample,
            elicitation_callback=elicit, list_roots_callback=roots, logging_callback=logged,
            message_handler=upstream._on_message, client_info=CLIENT_INFO, log_level="debug",
            extensions={tasks.EXTENSION: {}}, result_claims=tasks.CLAIMS))
        own.adopt(shared.discover_result)
        forward_capabilities(own)
        sdk.copy_header_maps(shared, own)  # Mcp-Param-* headers the listing declared
        yield own


#: The downstream client's capabilities, for the 2026-07-28 upstream request being sent in this task.
_DOWNSTREAM_CAPABILITIES: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "mcphost_proxy_downstream_capabilities", default=None)
_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"


def forward_capabilities(session: ClientSession) -> None:
    """Make each 2026-07-28 request declare what the downstream client can answer, not what the proxy can.

    A stateless upstream decides per request which questions it may ask from the capabilities in
    ``_meta``; the proxy can forward elicitation, sampling and roots only when the client it serves
    declared them. The ``mcp`` client stamps its own capabilities on every request and has no
    per-request override, so its stamp is wrapped (sdk.py).
    """
    sdk.wrap_stamp(session, _capabilities_stamp)


def _capabilities_stamp(original: Callable[..., None]) -> Callable[..., None]:
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
            elif tasks.TASK_ONLY.get():  # the proxy follows the task for a client without tasks
                extensions[tasks.EXTENSION] = {}
            else:
                extensions.pop(tasks.EXTENSION, None)
            if extensions:
                declared["extensions"] = extensions
            else:
                declared.pop("extensions", None)
            meta[_CAPABILITIES_META] = declared

    return stamp
