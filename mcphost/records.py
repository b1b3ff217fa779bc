"""Typed records that plugins hand to the host, and the decorators that build them.

A record is frozen: the host validates it, stamps its provenance (which plugin and
distribution provided it) with ``dataclasses.replace`` and never mutates it afterwards.
Decorators inspect the handler once, here, so schema mistakes surface at import time.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, overload

from mcphost import signature as sig
from mcphost.content import ToolResult
from mcphost.context import Context

Handler = Callable[..., Any]
#: ``(value, context_arguments) -> list[str] | Completion`` (sync or async).
Completer = Callable[[str, Mapping[str, str]], Any]

#: What a tool may declare about running as a task.
TASK_SUPPORT = ("forbidden", "optional", "required")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.\-/]{1,128}$")


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a record came from: the plugin's registered name and its distribution.

    ``origin`` says where inside the plugin it comes from when that matters (the upstream server
    a proxy mounts, say); a plugin may set it on its records and the host keeps it when stamping.
    """

    plugin: str
    distribution: str | None = None
    version: str | None = None
    origin: str | None = None


@dataclass(frozen=True, slots=True)
class Unready:
    """Something a plugin serves through that cannot serve now (``mcphost_readiness``): an upstream
    server that is starting, restarting or failed, say.

    ``required``: this process should get no traffic while it is down (``/readyz`` answers 503);
    otherwise the process is ready but degraded (``/readyz`` answers 200 and names it).
    """

    name: str
    state: str
    required: bool = False


@dataclass(frozen=True)
class Tool:
    """A tool: a handler plus the schema and metadata clients see in ``tools/list``."""

    #: Which list the record belongs to (the catalog's name for it), so nothing tells records apart by their fields.
    kind: ClassVar[str] = "tools"
    name: str
    fn: Handler
    input_schema: Mapping[str, Any]
    description: str | None = None
    title: str | None = None
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] | None = None
    icons: tuple[Mapping[str, Any], ...] = ()
    meta: Mapping[str, Any] | None = None
    thread: bool = False
    #: Whether a call may run as a task (2026-07-28 tasks extension): forbidden, optional or required.
    task: str = "forbidden"
    #: The handler must not run twice for one call: a 2026-07-28 question keeps it waiting across the
    #: input-required round trip and the retry resumes it (mcphost.kernel.continuation).
    resumable: bool = False
    signature: sig.Signature | None = field(default=None, repr=False, compare=False)
    provenance: Provenance | None = None
    #: Scopes a caller's token must grant (hierarchically, see ``mcphost.scope_satisfied``).
    scopes: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.task not in TASK_SUPPORT:
            raise ValueError(f"tool {self.name!r}: task must be one of {', '.join(TASK_SUPPORT)}, not {self.task!r}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


@dataclass(frozen=True)
class Resource:
    """A resource at a fixed URI; ``fn`` returns its contents when read."""

    #: Which list the record belongs to (the catalog's name for it), so nothing tells records apart by their fields.
    kind: ClassVar[str] = "resources"
    uri: str
    name: str
    fn: Handler
    description: str | None = None
    title: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: Mapping[str, Any] | None = None
    icons: tuple[Mapping[str, Any], ...] = ()
    meta: Mapping[str, Any] | None = None
    context_param: str | None = None
    #: 2026-07-28 cache hints for resources/read (None: the ``[server] cache_ttl_ms`` default, public).
    cache_ttl_ms: int | None = None
    cache_scope: str | None = None
    provenance: Provenance | None = None
    #: Scopes a caller's token must grant (hierarchically, see ``mcphost.scope_satisfied``).
    scopes: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        _check_cache_hints(self.uri, self.cache_ttl_ms, self.cache_scope)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


@dataclass(frozen=True)
class ResourceTemplate:
    """A family of resources named by an RFC 6570 URI template; ``fn`` gets the template variables."""

    #: Which list the record belongs to (the catalog's name for it), so nothing tells records apart by their fields.
    kind: ClassVar[str] = "resourceTemplates"
    uri_template: str
    name: str
    fn: Handler
    description: str | None = None
    title: str | None = None
    mime_type: str | None = None
    annotations: Mapping[str, Any] | None = None
    icons: tuple[Mapping[str, Any], ...] = ()
    meta: Mapping[str, Any] | None = None
    completions: Mapping[str, Completer] = field(default_factory=dict)
    context_param: str | None = None
    cache_ttl_ms: int | None = None
    cache_scope: str | None = None
    provenance: Provenance | None = None
    #: Scopes a caller's token must grant (hierarchically, see ``mcphost.scope_satisfied``).
    scopes: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        _check_cache_hints(self.uri_template, self.cache_ttl_ms, self.cache_scope)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


#: The MCP Apps extension (SEP-1865): tools whose ``_meta.ui.resourceUri`` names a ``ui://`` resource.
UI_EXTENSION = "io.modelcontextprotocol/ui"


def app_only(tool: Tool) -> bool:
    """Whether ``tool`` is for its MCP App alone (``_meta.ui.visibility`` lists no ``"model"``): kept
    out of ``tools/list`` for clients without the extension and out of search, still callable."""
    ui = tool.meta.get("ui") if isinstance(tool.meta, Mapping) else None
    visibility = ui.get("visibility") if isinstance(ui, Mapping) else None
    return isinstance(visibility, list | tuple) and "model" not in visibility


def _check_cache_hints(what: str, ttl_ms: int | None, scope: str | None) -> None:
    if ttl_ms is not None and (not isinstance(ttl_ms, int) or isinstance(ttl_ms, bool) or ttl_ms < 0):
        raise ValueError(f"resource {what!r}: cache_ttl_ms must be a non-negative integer")
    if scope not in (None, "public", "private"):
        raise ValueError(f"resource {what!r}: cache_scope must be 'public' or 'private', not {scope!r}")


@dataclass(frozen=True)
class Prompt:
    """A prompt template; ``fn`` takes string arguments and returns messages."""

    #: Which list the record belongs to (the catalog's name for it), so nothing tells records apart by their fields.
    kind: ClassVar[str] = "prompts"
    name: str
    fn: Handler
    arguments: tuple[Mapping[str, Any], ...] = ()
    description: str | None = None
    title: str | None = None
    icons: tuple[Mapping[str, Any], ...] = ()
    meta: Mapping[str, Any] | None = None
    completions: Mapping[str, Completer] = field(default_factory=dict)
    context_param: str | None = None
    provenance: Provenance | None = None
    #: Scopes a caller's token must grant (hierarchically, see ``mcphost.scope_satisfied``).
    scopes: frozenset[str] = frozenset()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


#: ``async def middleware(request, call_next)``; see ``mcphost_middleware``.
MiddlewareFn = Callable[[Any, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]


@dataclass(frozen=True)
class Middleware:
    """A callable wrapped around every request; ``name`` appears in logs and listings.

    A middleware that raises anything but :class:`McpError` is skipped for that request
    (fail open: telemetry must never break a request). ``fail_closed=True`` is for policy
    middleware whose failure must stop the request instead: it then fails with -32603.
    """

    name: str
    fn: MiddlewareFn
    provenance: Provenance | None = None
    fail_closed: bool = False


Record = Tool | Resource | ResourceTemplate | Prompt
F = TypeVar("F", bound=Handler)

sig.register_content_type(ToolResult)


def _description(fn: Handler, given: str | None) -> str | None:
    return given if given is not None else sig.docstring_summary(fn)


def _scopes(given: Iterable[str] | None) -> frozenset[str]:
    if given is None:
        return frozenset()
    if isinstance(given, str):
        raise TypeError(f"scopes must be a list of scope strings, not the string {given!r}")
    return frozenset(given)


@overload
def tool(fn: Handler, /) -> Tool: ...
@overload
def tool(*, name: str | None = ..., title: str | None = ..., description: str | None = ...,
         input_schema: Mapping[str, Any] | None = ..., output_schema: Mapping[str, Any] | None = ...,
         annotations: Mapping[str, Any] | None = ..., icons: list[Mapping[str, Any]] | None = ...,
         meta: Mapping[str, Any] | None = ..., thread: bool = ..., task: str = ...,
         scopes: Iterable[str] | None = ..., resumable: bool = ...) -> Callable[[Handler], Tool]: ...


def tool(fn: Handler | None = None, /, *, name: str | None = None, title: str | None = None,
         description: str | None = None, input_schema: Mapping[str, Any] | None = None,
         output_schema: Mapping[str, Any] | None = None, annotations: Mapping[str, Any] | None = None,
         icons: list[Mapping[str, Any]] | None = None, meta: Mapping[str, Any] | None = None,
         thread: bool = False, task: str = "forbidden", scopes: Iterable[str] | None = None,
         resumable: bool = False) -> Any:
    """Turn a function into a :class:`Tool`.

    The input schema comes from the signature, the description from the docstring and the
    output schema from the return annotation when it is structured; explicit arguments win.
    ``thread=True`` runs a blocking synchronous handler in a worker thread. ``task`` says
    whether a 2026-07-28 call may outlive its request as a task: ``"forbidden"`` (the
    default), ``"optional"`` or ``"required"`` (see ``Context.start_task``). ``scopes`` are the
    OAuth scopes a caller needs to see and call the tool (docs/auth.md). ``resumable=True``: the
    handler must not run twice for one call, so a 2026-07-28 question keeps it waiting across the
    input-required round trip instead of ending it (docs/plugins.md).
    """
    required = _scopes(scopes)

    def build(handler: Handler) -> Tool:
        inspected = sig.inspect_signature(handler, context_type=Context)
        return Tool(
            name=name or handler.__name__,
            fn=handler,
            input_schema=input_schema if input_schema is not None else inspected.input_schema,
            description=_description(handler, description),
            title=title,
            output_schema=output_schema if output_schema is not None else inspected.output_schema,
            annotations=annotations,
            icons=tuple(icons or ()),
            meta=meta,
            thread=thread,
            task=task,
            resumable=resumable,
            signature=inspected,
            scopes=required,
        )

    return build(fn) if fn is not None else build


def resource(uri: str, *, name: str | None = None, title: str | None = None, description: str | None = None,
             mime_type: str | None = None, size: int | None = None,
             annotations: Mapping[str, Any] | None = None, icons: list[Mapping[str, Any]] | None = None,
             meta: Mapping[str, Any] | None = None, cache_ttl_ms: int | None = None,
             cache_scope: str | None = None, scopes: Iterable[str] | None = None) -> Callable[[Handler], Resource]:
    """Turn a function returning text, bytes or contents into a :class:`Resource` at ``uri``.

    ``cache_ttl_ms`` / ``cache_scope`` set the 2026-07-28 cache hints of its ``resources/read``
    results (``"private"`` when the contents depend on the caller); ``scopes`` the OAuth scopes a
    caller needs (docs/auth.md).
    """
    required = _scopes(scopes)

    def build(handler: Handler) -> Resource:
        inspected = sig.inspect_signature(handler, context_type=Context)
        if inspected.input_schema.get("properties"):
            raise sig.SignatureError(f"resource {uri!r}: handler {handler.__name__} may take only a Context")
        return Resource(uri=uri, name=name or handler.__name__, fn=handler,
                        description=_description(handler, description), title=title, mime_type=mime_type,
                        size=size, annotations=annotations, icons=tuple(icons or ()), meta=meta,
                        context_param=inspected.context_param, cache_ttl_ms=cache_ttl_ms,
                        cache_scope=cache_scope, scopes=required)

    return build


def resource_template(uri_template: str, *, name: str | None = None, title: str | None = None,
                      description: str | None = None, mime_type: str | None = None,
                      annotations: Mapping[str, Any] | None = None,
                      icons: list[Mapping[str, Any]] | None = None, meta: Mapping[str, Any] | None = None,
                      completions: Mapping[str, Completer] | None = None, cache_ttl_ms: int | None = None,
                      cache_scope: str | None = None, scopes: Iterable[str] | None = None
                      ) -> Callable[[Handler], ResourceTemplate]:
    """Turn a function of the template's variables into a :class:`ResourceTemplate` (hints, scopes: see resource)."""
    required = _scopes(scopes)

    def build(handler: Handler) -> ResourceTemplate:
        inspected = sig.inspect_signature(handler, context_type=Context)
        return ResourceTemplate(uri_template=uri_template, name=name or handler.__name__, fn=handler,
                                description=_description(handler, description), title=title,
                                mime_type=mime_type, annotations=annotations, icons=tuple(icons or ()),
                                meta=meta, completions=dict(completions or {}),
                                context_param=inspected.context_param, cache_ttl_ms=cache_ttl_ms,
                                cache_scope=cache_scope, scopes=required)

    return build


@overload
def prompt(fn: Handler, /) -> Prompt: ...
@overload
def prompt(*, name: str | None = ..., title: str | None = ..., description: str | None = ...,
           icons: list[Mapping[str, Any]] | None = ..., meta: Mapping[str, Any] | None = ...,
           completions: Mapping[str, Completer] | None = ...,
           scopes: Iterable[str] | None = ...) -> Callable[[Handler], Prompt]: ...


def prompt(fn: Handler | None = None, /, *, name: str | None = None, title: str | None = None,
           description: str | None = None, icons: list[Mapping[str, Any]] | None = None,
           meta: Mapping[str, Any] | None = None, completions: Mapping[str, Completer] | None = None,
           scopes: Iterable[str] | None = None) -> Any:
    """Turn a function of string arguments into a :class:`Prompt`."""
    required = _scopes(scopes)

    def build(handler: Handler) -> Prompt:
        inspected = sig.inspect_signature(handler, context_type=Context)
        return Prompt(name=name or handler.__name__, fn=handler,
                      arguments=tuple(sig.prompt_arguments(handler, context_type=Context)),
                      description=_description(handler, description), title=title, icons=tuple(icons or ()),
                      meta=meta, completions=dict(completions or {}), context_param=inspected.context_param,
                      scopes=required)

    return build(fn) if fn is not None else build


@overload
def middleware(fn: Callable[..., Any], /) -> Middleware: ...
@overload
def middleware(*, name: str | None = ..., fail_closed: bool = ...) -> Callable[[Callable[..., Any]], Middleware]: ...


def middleware(fn: Callable[..., Any] | None = None, /, *, name: str | None = None,
               fail_closed: bool = False) -> Any:
    """Turn ``async def mw(request, call_next)`` into a :class:`Middleware` record.

    ``fail_closed=True``: an unexpected exception in this middleware fails the request
    (-32603) instead of being skipped; use it for policy whose absence would be unsafe.
    """

    def build(handler: Callable[..., Any]) -> Middleware:
        return Middleware(name=name or handler.__name__, fn=handler, fail_closed=fail_closed)

    return build(fn) if fn is not None else build


def stamped(record: Any, provenance: Provenance) -> Any:
    """A copy of ``record`` carrying ``provenance`` (and the ``origin`` the record named itself)."""
    own = record.provenance
    if own is not None and own.origin is not None:
        provenance = dataclasses.replace(provenance, origin=own.origin)
    return dataclasses.replace(record, provenance=provenance)
