"""The ``ctx`` object a handler receives: what it may do while answering one request.

``Context`` is a thin facade. The kernel gives it a *scope* that knows the session, the
request and how to reach the client in the request's protocol era; the same calls therefore
work for session-era clients (server-to-client requests over the open stream) and, later,
stateless ones. Keeping the facade here, below the kernel, lets records and plugins name the
type without importing the kernel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from mcphost.protocol.jsonrpc import check_encodable

if TYPE_CHECKING:
    from mcphost.sessions.session import Principal, Session

#: FastMCP's one-field shorthands for ``ctx.elicit(response_type=...)``, as JSON Schema types.
_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _single(field: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"value": field}, "required": ["value"]}


LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


@dataclass(frozen=True, slots=True)
class ElicitResult:
    """The client's answer to an elicitation: ``accept`` (with ``content`` for forms), ``decline`` or ``cancel``."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None
    #: The accepted answer as the question's schema type: an instance of the pydantic model class
    #: given to :meth:`Context.elicit` (``answer.data.name``, as in the official SDK and FastMCP),
    #: else the content itself; None unless accepted.
    data: Any = None

    @property
    def accepted(self) -> bool:
        return self.action == "accept"


_S = TypeVar("_S")  # a plugin's settings model


class HostView(Protocol):
    """What a tool sees of the host (``ctx.host``): its configuration, notifications for every
    client, a way to answer a deferred request later, and a reload. Nothing else: the kernel,
    the plugin manager and the backend are not reachable from a tool."""

    def settings(self, model: type[_S]) -> _S:
        """A plugin's checked settings: the instance of the model it declares (``mcphost_settings``)."""
        ...

    def plugin_config(self, name: str) -> Mapping[str, Any]:
        """The ``[plugins.<name>]`` section of the configuration (empty when absent)."""
        ...

    async def notify_resource_updated(self, uri: str) -> None:
        """Send ``notifications/resources/updated`` to every session subscribed to ``uri``."""
        ...

    async def notify_list_changed(self, kind: str) -> None:
        """Send ``notifications/<kind>/list_changed`` (tools, prompts or resources) to every session."""
        ...

    def respond(self, session_id: str, request_id: Any, value: Any = None,
                error: BaseException | None = None) -> bool:
        """Complete a request whose handler returned a Deferred; False when none waits."""
        ...

    async def reload(self) -> None:
        """Collect the catalog again and tell sessions which lists changed."""
        ...


class Scope(Protocol):
    """What the kernel provides behind a Context (one per request)."""

    session: Session
    principal: Principal | None
    request_id: Any
    method: str

    @property
    def host(self) -> HostView: ...  # read-only: a property or a plain attribute satisfies it

    async def progress(self, progress: float, total: float | None, message: str | None) -> None: ...
    async def log(self, level: LogLevel, data: Any, logger: str | None) -> None: ...
    async def client_request(self, method: str, params: dict[str, Any], timeout: float | None,
                             key: str | None = None) -> dict[str, Any]: ...
    async def elicit(self, params: dict[str, Any], timeout: float | None, key: str | None = None) -> ElicitResult: ...
    async def notify_resource_updated(self, uri: str) -> None: ...
    def defer(self) -> Deferred: ...
    async def close_stream(self, retry_ms: int | None) -> bool: ...
    async def start_task(self) -> bool: ...
    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]: ...


class Context:
    """Passed to a handler that declares a parameter annotated ``Context``."""

    __slots__ = ("_scope",)

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    @property
    def session(self) -> Session:
        """The client's session: id, principal, client info and capabilities, assigns."""
        return self._scope.session

    @property
    def principal(self) -> Principal | None:
        """Who sent this request, as an auth plugin established it (None: anonymous or local).

        Prefer it to ``session.principal``: a session-era client may refresh its token (new
        scopes, same identity) mid-session, and this is the one that came with this request.
        The raw bearer token is not here unless the auth plugin put it on ``principal.token``.
        """
        return self._scope.principal

    @property
    def host(self) -> HostView:
        """What a tool sees of the host: ``plugin_config(name)``, ``notify_list_changed(kind)``,
        ``notify_resource_updated(uri)``, ``respond(session_id, request_id, value)`` (a deferred
        reply) and ``reload()``; see :class:`HostView`."""
        return self._scope.host

    @property
    def request_id(self) -> Any:
        return self._scope.request_id

    @property
    def method(self) -> str:
        return self._scope.method

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress; sent only when the client asked for it with a progress token."""
        await self._scope.progress(progress, total, message)

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """The same as :meth:`progress`, under the name FastMCP and the official SDK's MCPServer use."""
        await self._scope.progress(progress, total, message)

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Call another tool as this request's caller and return its ``tools/call`` result (``content``,
        ``structuredContent``, ``isError``).

        It is a real call of the caller on its endpoint: the same middleware, visibility, scopes,
        argument validation and counters as a call that arrived. The called tool asks its questions
        (elicitation, sampling) and logs through this request; its own progress is not sent (this
        request reports its own). Cancelling this request cancels the call. A tool the caller may
        not see or call raises :class:`~mcphost.errors.McpError` ("Unknown tool", insufficient scope).
        """
        return await self._scope.call_tool(name, dict(arguments or {}))

    # ``logger_name=`` is the spelling FastMCP and the official SDK's MCPServer use; both are accepted.

    async def log(self, level: LogLevel, data: Any, *, logger: str | None = None,
                  logger_name: str | None = None) -> None:
        """Send a log message to the client, subject to the level the client chose.

        ``data`` must be JSON (a string, mostly); anything else fails this call with ``-32603``."""
        await self._log(level, data, logger or logger_name)

    async def debug(self, data: Any, *, logger: str | None = None, logger_name: str | None = None,
                   extra: Mapping[str, Any] | None = None) -> None:
        await self._log("debug", data, logger or logger_name, extra)

    async def info(self, data: Any, *, logger: str | None = None, logger_name: str | None = None,
                   extra: Mapping[str, Any] | None = None) -> None:
        await self._log("info", data, logger or logger_name, extra)

    async def warning(self, data: Any, *, logger: str | None = None, logger_name: str | None = None,
                   extra: Mapping[str, Any] | None = None) -> None:
        await self._log("warning", data, logger or logger_name, extra)

    async def error(self, data: Any, *, logger: str | None = None, logger_name: str | None = None,
                   extra: Mapping[str, Any] | None = None) -> None:
        await self._log("error", data, logger or logger_name, extra)

    async def _log(self, level: LogLevel, data: Any, logger: str | None,
                   extra: Mapping[str, Any] | None = None) -> None:
        if extra is not None:  # FastMCP's extra= travels beside the message
            data = {"msg": data, "extra": dict(extra)}
        if not isinstance(data, str):  # sent later by the stream's writer: a fault must fail this call
            check_encodable(data, "the log message's data")
        await self._scope.log(level, data, logger)

    async def elicit(self, message: str, schema: dict[str, Any] | type[Any] | list[str] | None = None, *,
                     response_type: dict[str, Any] | type[Any] | list[str] | None = None,
                     timeout: float | None = None, key: str | None = None) -> ElicitResult:
        """Ask the user to fill a form (a flat object schema of primitive fields).

        ``schema`` is a JSON Schema, or a pydantic model class as in the official SDK and FastMCP
        (``await ctx.elicit(message="Sure?", schema=Confirm)``): its JSON Schema is asked for, and an
        accepted answer's ``data`` is the model instance. FastMCP's spelling ``response_type=`` is
        accepted too, with its shorthands: ``str``, ``int``, ``float`` or ``bool`` (one field, ``data``
        its value), a list of strings (one choice), ``None`` (no field: only accept or decline).
        ``key`` names the question for stateless (2026-07-28) clients, which answer it in a retry of
        the request (the handler runs again; each question gets its answer by key). Without one,
        questions are numbered in the order the handler asks them.
        """
        wanted = schema if schema is not None else response_type
        model: Any = None
        single = False
        if wanted is None:
            form: dict[str, Any] = {"type": "object", "properties": {}}
        elif isinstance(wanted, dict):
            form = wanted
        elif isinstance(wanted, list):
            form, single = _single({"type": "string", "enum": [str(choice) for choice in wanted]}), True
        elif isinstance(wanted, type) and wanted in _SCALARS:
            form, single = _single({"type": _SCALARS[wanted]}), True
        elif isinstance(wanted, type):
            json_schema = getattr(wanted, "model_json_schema", None)
            if not callable(json_schema):
                raise TypeError(f"elicit: schema must be a JSON Schema dict or a pydantic model class, "
                                f"not {wanted.__name__}")
            model, form = wanted, json_schema()
        else:
            raise TypeError(f"elicit: schema must be a JSON Schema dict or a pydantic model class, not {wanted!r}")
        check_encodable(form, "the elicitation's schema")
        answer = await self._scope.elicit({"mode": "form", "message": message, "requestedSchema": form}, timeout,
                                          key)
        if answer.action != "accept" or answer.content is None:
            return answer
        if single:
            data = answer.content.get("value")
        elif model is not None:
            data = model.model_validate(answer.content)
        else:
            data = answer.content
        return replace(answer, data=data)

    async def elicit_url(self, message: str, url: str, *, elicitation_id: str | None = None,
                         timeout: float | None = None, key: str | None = None) -> ElicitResult:
        """Ask the user to complete a step in the browser; ``accept`` means consent, not completion."""
        params: dict[str, Any] = {"mode": "url", "message": message, "url": url}
        if elicitation_id is not None:
            params["elicitationId"] = elicitation_id
        return await self._scope.elicit(params, timeout, key)

    async def sample(self, messages: str | list[dict[str, Any]], *, max_tokens: int = 1000,
                     system_prompt: str | None = None, temperature: float | None = None,
                     model_preferences: dict[str, Any] | None = None,
                     stop_sequences: list[str] | None = None, timeout: float | None = None,
                     key: str | None = None, **extra: Any) -> dict[str, Any]:
        """Ask the client's model for a completion; returns the CreateMessageResult as a dict."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        params: dict[str, Any] = {"messages": messages, "maxTokens": max_tokens}
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
        if temperature is not None:
            params["temperature"] = temperature
        if model_preferences is not None:
            params["modelPreferences"] = model_preferences
        if stop_sequences is not None:
            params["stopSequences"] = stop_sequences
        params.update(extra)
        check_encodable(params, "the sampling request")
        return await self._scope.client_request("sampling/createMessage", params, timeout, key)

    async def list_roots(self, *, timeout: float | None = None, key: str | None = None) -> list[dict[str, Any]]:
        """The client's roots (``file://`` URIs with optional names)."""
        answer = await self._scope.client_request("roots/list", {}, timeout, key)
        roots = answer.get("roots")
        return roots if isinstance(roots, list) else []

    async def notify_resource_updated(self, uri: str) -> None:
        """Tell subscribed clients that the resource at ``uri`` changed."""
        await self._scope.notify_resource_updated(uri)

    def defer(self) -> Deferred:
        """Answer later: return the Deferred from the handler and resolve it from any task."""
        return self._scope.defer()

    async def close_stream(self, *, retry_ms: int | None = None) -> bool:
        """Close the connection carrying this request's stream without ending the request.

        On Streamable HTTP (2025-11-25 polling) the client reconnects with ``Last-Event-ID``
        after ``retry_ms`` and receives what the handler sends meanwhile, including the result.
        Returns False where the transport cannot do this (stdio, JSON responses).
        """
        return await self._scope.close_stream(retry_ms)

    async def start_task(self) -> bool:
        """Go on as a task: the client gets a CreateTaskResult now and polls for the outcome.

        Only for tools declared with ``task="optional"`` or ``"required"``, called by a
        2026-07-28 client that declared the tasks extension; elsewhere this returns False and
        the call simply continues. Questions asked before this are input-required rounds the
        client answers by retrying the call; questions asked after it park the task in
        ``input_required`` until the client sends ``tasks/update``. The host also starts the
        task by itself when the handler runs longer than ``[server] task_after`` seconds.
        """
        return await self._scope.start_task()


class Deferred:
    """A reply that another task supplies later with :meth:`resolve` or :meth:`reject`.

    The request stays in flight, and cancellable, until then. ``session_id`` and
    ``request_id`` identify it for :meth:`mcphost.host.Host.respond` from elsewhere.
    """

    __slots__ = ("_future", "request_id", "session_id")

    def __init__(self, session_id: str, request_id: Any, future: Any) -> None:
        self.session_id = session_id
        self.request_id = request_id
        self._future = future

    def resolve(self, value: Any) -> bool:
        """Complete the request with ``value`` (converted like a handler's return value)."""
        if self._future.done():
            return False
        self._future.set_result(value)
        return True

    def reject(self, error: BaseException) -> bool:
        """Fail the request as if the handler had raised ``error``."""
        if self._future.done():
            return False
        self._future.set_exception(error)
        return True

    @property
    def done(self) -> bool:
        return bool(self._future.done())

    def __await__(self) -> Any:
        return self._future.__await__()
