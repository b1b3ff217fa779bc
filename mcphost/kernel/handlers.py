"""One async handler per MCP method of the session era, registered in :data:`METHODS`."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from time import perf_counter
from typing import TYPE_CHECKING, Any

import orjson

from mcphost.content import Completion
from mcphost.context import Context
from mcphost.deadline import deadline, detachable
from mcphost.endpoints import CODE_TOOL, is_code_tool
from mcphost.errors import ClientRequestError, InsufficientScope, ToolError
from mcphost.kernel import results, search
from mcphost.kernel.continuation import CONTINUATION_KEY
from mcphost.kernel.listen import SUBSCRIPTION_ID, Listener
from mcphost.kernel.modern import ModernScope
from mcphost.kernel.paging import page
from mcphost.kernel.scope import RequestScope
from mcphost.kernel.tasks import LegacyTaskScope, TaskRun, TaskScope, declares_tasks, missing_extension
from mcphost.kernel.views import EndpointView
from mcphost.kernel.visibility import Visibility
from mcphost.plugins import run_plugin
from mcphost.protocol.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MISSING_CLIENT_CAPABILITY,
    REQUEST_TIMEOUT,
    RESOURCE_NOT_FOUND,
    McpError,
    invalid_params,
    method_not_found,
)
from mcphost.protocol.opening import check_initialize
from mcphost.protocol.versions import SUPPORTED_VERSIONS, at_least, may_be_asked, negotiate
from mcphost.records import Prompt, Resource, ResourceTemplate, Tool
from mcphost.sessions.session import LOG_RANK, stream_seconds
from mcphost.stats import INVALID_ARGUMENTS, SCOPE

if TYPE_CHECKING:
    from mcphost.kernel.view import KernelView as Kernel
    from mcphost.request import RequestInfo

log = logging.getLogger("mcphost.kernel")

Handler = Callable[["Kernel", "RequestInfo"], Awaitable[dict[str, Any]]]
METHODS: dict[str, Handler] = {}
BEFORE_INITIALIZE = frozenset({"initialize", "ping"})
#: What a 2026-07-28 request may call; the rest (initialize, ping, setLevel, subscribe...) is gone there.
MODERN_METHODS = frozenset({"server/discover", "tools/list", "tools/call", "resources/list",
                            "resources/templates/list", "resources/read", "prompts/list", "prompts/get",
                            "completion/complete", "subscriptions/listen", "tasks/get", "tasks/update",
                            "tasks/cancel"})
#: Methods that exist only in 2026-07-28; a session-era client gets -32601 for them.
MODERN_ONLY = frozenset({"server/discover", "subscriptions/listen", "tasks/update"})
#: The tasks capability of a 2025-11-25 server with a tool that may run as a task (no tasks/list).
LEGACY_TASKS: dict[str, Any] = {"cancel": {}, "requests": {"tools": {"call": {}}}}
MAX_COMPLETION_VALUES = 100
#: Characters of a URI repeated in a "Resource not found" error's data, at most.
MAX_ECHOED_URI = 2048


def method(name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        METHODS[name] = fn
        return fn
    return register


async def call_handler(fn: Callable[..., Any], kwargs: dict[str, Any], *, pool: Executor | None = None,
                       thread: bool = False) -> Any:
    """Run a plugin's handler through the one plugin-call helper and wait for a Deferred it returns.

    A synchronous (``def``) handler runs in ``pool`` (the kernel's bounded thread pool), so one
    that blocks never freezes the event loop; ``async def`` handlers run on the loop, unless
    ``thread`` asks for a thread anyway. Whatever the handler raises but cancellation comes out as
    an ``Exception`` (:class:`~mcphost.errors.PluginAborted` for SystemExit and the like).
    """
    return await run_plugin(fn, _pool=pool, _thread=thread, **kwargs)


def _progress_token(request: RequestInfo) -> Any:
    meta = request.params.get("_meta")
    return meta.get("progressToken") if isinstance(meta, dict) else None


def _scope(kernel: Kernel, request: RequestInfo) -> RequestScope:
    if request.scope is not None:  # a tool's call as its caller: it asks through the calling tool
        return request.scope  # type: ignore[no-any-return]  # RequestInfo is a leaf: it types it loosely
    token = _progress_token(request)
    if request.round is not None:
        return ModernScope(kernel, request.session, request.id, request.method, token, request.principal,
                           round=request.round)
    return RequestScope(kernel, request.session, request.id, request.method, token, request.principal)


def _visibility(kernel: Kernel, request: RequestInfo) -> Visibility:
    """What the request's sender may see and use (scopes, the session's allow-lists, its endpoint's view)."""
    return Visibility(request.session, request.principal, _endpoint(kernel, request.session), kernel.catalog)


def _missing_capability(request: RequestInfo, exc: ClientRequestError) -> McpError | None:
    """In 2026-07-28 a question the client's capabilities forbid fails the request with -32021."""
    if request.era == "modern" and exc.code == MISSING_CLIENT_CAPABILITY:
        return McpError(MISSING_CLIENT_CAPABILITY, exc.message, exc.data)
    return None


def _require_capability(kernel: Kernel, request: RequestInfo, capability: str) -> None:
    if capability not in _capabilities(kernel, request.session):
        raise method_not_found(request.method)


def _string(params: dict[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str):
        raise invalid_params(f'Invalid params: "{key}" must be a string')
    return value


def _listing(kernel: Kernel, request: RequestInfo, capability: str, kind: str,
             build: Callable[[Any, str], dict[str, Any]]) -> dict[str, Any]:
    """One page of the catalog's ``kind`` descriptors this caller sees (scopes and allow-lists)."""
    _require_capability(kernel, request, capability)
    items = _visibility(kernel, request).listing(kernel.catalog, kind, request.session.protocol_version, build)  # type: ignore[arg-type]  # initialized: it has a version
    chunk, next_cursor = page(items, request.params.get("cursor"), kernel.settings.page_size)
    result: dict[str, Any] = {kind: chunk}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


# -- descriptors: what a record looks like on the wire, per revision ----------------------------

def _common(record: Any, version: str, out: dict[str, Any]) -> dict[str, Any]:
    if record.description:
        out["description"] = record.description
    if record.title and at_least(version, "2025-06-18"):
        out["title"] = record.title
    if record.icons and at_least(version, "2025-11-25"):
        out["icons"] = [dict(icon) for icon in record.icons]
    if record.meta and at_least(version, "2025-06-18"):
        out["_meta"] = dict(record.meta)
    return out


def tool_descriptor(tool: Tool, version: str) -> dict[str, Any]:
    out = _common(tool, version, {"name": tool.name, "inputSchema": dict(tool.input_schema)})
    if tool.output_schema is not None and at_least(version, "2025-06-18"):
        out["outputSchema"] = dict(tool.output_schema)
    if tool.annotations:
        out["annotations"] = dict(tool.annotations)
    if tool.task != "forbidden" and version == "2025-11-25":  # the extension of 2026-07-28 has no such field
        out["execution"] = {"taskSupport": tool.task}
    return out


def resource_descriptor(resource: Resource, version: str) -> dict[str, Any]:
    out = _common(resource, version, {"uri": resource.uri, "name": resource.name})
    if resource.mime_type:
        out["mimeType"] = resource.mime_type
    if resource.size is not None:
        out["size"] = resource.size
    if resource.annotations:
        out["annotations"] = dict(resource.annotations)
    return out


def template_descriptor(template: ResourceTemplate, version: str) -> dict[str, Any]:
    out = _common(template, version, {"uriTemplate": template.uri_template, "name": template.name})
    if template.mime_type:
        out["mimeType"] = template.mime_type
    if template.annotations:
        out["annotations"] = dict(template.annotations)
    return out


def prompt_descriptor(prompt: Prompt, version: str) -> dict[str, Any]:
    out = _common(prompt, version, {"name": prompt.name})
    if prompt.arguments:
        out["arguments"] = [dict(argument) for argument in prompt.arguments]
    return out


# -- lifecycle ------------------------------------------------------------------------------------

@method("initialize")
async def initialize(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    session = request.session
    params = request.params
    if session.initialized or session.protocol_version is not None:
        raise McpError(INVALID_REQUEST, "Session already initialized")
    check_initialize(params)
    capabilities = params.get("capabilities", {})
    client_info = params.get("clientInfo", {})
    budget = kernel.settings.max_client_info_bytes
    if len(orjson.dumps([capabilities, client_info])) > budget:  # kept for the session's whole life
        raise invalid_params(f'Invalid params: "capabilities" and "clientInfo" exceed {budget} bytes '
                             "(server.max_client_info_bytes)")
    version = negotiate(params.get("protocolVersion"))
    session.protocol_version = version
    session.client_capabilities = capabilities
    session.client_info = client_info
    # Answer requests as soon as initialize is answered; clients race notifications/initialized.
    session.initialized = True
    offered = _capabilities(kernel, session)
    if version == "2025-11-25" and kernel.catalog.has_task_tools:
        offered = {**offered, "tasks": LEGACY_TASKS}
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": offered,
        "serverInfo": kernel.server_info(session),
    }
    instructions = _instructions(kernel, session)
    if instructions:
        result["instructions"] = instructions
    return result


def _endpoint(kernel: Kernel, session: Any) -> EndpointView | None:
    return kernel.views.get(session.endpoint) if session.endpoint is not None else None


def _capabilities(kernel: Kernel, session: Any) -> dict[str, Any]:
    """The catalog's capabilities; a search endpoint always has its two tools."""
    capabilities = kernel.catalog.capabilities()
    view = _endpoint(kernel, session)
    if view is not None and view.search and "tools" not in capabilities:
        capabilities = {**capabilities, "tools": {"listChanged": True}}
    return capabilities


def _instructions(kernel: Kernel, session: Any) -> str | None:
    view = _endpoint(kernel, session)
    if view is not None:
        return kernel.views.instructions(view)
    return kernel.settings.instructions


@method("ping")
async def ping(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    return {}


@method("logging/setLevel")
async def set_level(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    level = request.params.get("level")
    if not isinstance(level, str) or level not in LOG_RANK:
        raise invalid_params(f"Invalid log level {str(level)[:40]!r}; expected one of {', '.join(LOG_RANK)}")
    request.session.log_level = level
    return {}


# -- tools ----------------------------------------------------------------------------------------

@method("tools/list")
async def list_tools(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    view = _endpoint(kernel, request.session)
    if view is not None and view.code:
        return {"tools": _code_listing(kernel, request)}
    if view is not None and view.search:
        return {"tools": search.listing(request.session.protocol_version or "")}
    return _listing(kernel, request, "tools", "tools", tool_descriptor)


@method("tools/call")
async def call_tool(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    _require_capability(kernel, request, "tools")
    name = _string(request.params, "name")
    view = _endpoint(kernel, request.session)
    if view is None:
        return await _call_tool(kernel, request, name)
    if view.search and name == "search_tools":
        view.counters.searches += 1
        visibility = (_Finding(request.session, request.principal, view, kernel.catalog) if view.code
                      else _visibility(kernel, request))
        return await search.search_tools(kernel, request, visibility, tool_descriptor)
    if view.code and name == CODE_TOOL and request.scope is None:
        view.counters.executions += 1
    if view.search and name == "call_tool":
        # The named tool's call goes through the middleware again, as a direct call would: a
        # policy or a rate limit keyed on the tool's name sees it. It is counted there.
        return await kernel.redispatch(search.inner_call(request))
    counters = view.counters
    counters.calls += 1
    try:
        result = await _call_tool(kernel, request, name)
    except Exception:  # a refusal or an unknown tool (cancellation is no error)
        counters.errors += 1
        raise
    if result.get("isError"):
        counters.errors += 1
    return result


def _code_listing(kernel: Kernel, request: RequestInfo) -> list[dict[str, Any]]:
    """A code endpoint's tools: ``search_tools`` and the catalog's ``execute`` (when a plugin provides it)."""
    version = request.session.protocol_version or ""
    listed = search.listing(version)[:1]
    entry = kernel.catalog.tools.get(CODE_TOOL)
    if entry is not None and is_code_tool(entry.record) and _visibility(kernel, request).allows(entry.record):
        listed = [*listed, tool_descriptor(entry.record, version)]
    return listed


class _Finding(Visibility):
    """A code endpoint's visibility for ``search_tools``: it finds the tools ``execute`` calls, not ``execute``."""

    __slots__ = ()

    def sees(self, record: Any) -> bool:
        return not is_code_tool(record) and super().sees(record)


async def _call_tool(kernel: Kernel, request: RequestInfo, name: str) -> dict[str, Any]:
    session = request.session
    entry = kernel.catalog.tools.get(name)
    visibility = _visibility(kernel, request)
    if entry is None or not visibility.allows(entry.record):
        raise invalid_params(f"Unknown tool: {name[:100]}")
    try:
        visibility.require(entry.record.scopes)
    except InsufficientScope:
        entry.stats.refuse(SCOPE)
        raise
    arguments = request.params.get("arguments")
    if arguments is None:
        arguments = {}
    elif not isinstance(arguments, dict):
        entry.stats.refuse(INVALID_ARGUMENTS)
        raise invalid_params('Invalid params: "arguments" must be an object')
    record = entry.record
    signature = record.signature
    # A schema derived from the signature is checked by the signature's own (pydantic) validator while
    # binding; an explicit input_schema is checked by the catalog's jsonschema validator first.
    derived = signature is not None and signature.input_schema is record.input_schema
    if not derived and (entry.quick is None or not entry.quick(arguments)):
        try:
            errors = sorted(entry.validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
            details = "; ".join(_describe(error) for error in errors[:5])
        except RecursionError:
            errors, details = [True], "the arguments are nested too deeply"
        if errors:
            entry.stats.refuse(INVALID_ARGUMENTS)
            return results.error_result(f"Invalid arguments for tool {name!r}: {details}")
    try:
        if signature is None:
            kwargs = dict(arguments)
        else:
            kwargs = signature.bind(arguments) if derived else signature.convert(arguments)
    except ValueError as exc:  # names the argument and the rule it breaks
        entry.stats.refuse(INVALID_ARGUMENTS)
        return results.error_result(f"Invalid arguments for tool {name!r}: {exc}")
    run = kernel.tasks.begin(session, name, record.task, request.params)
    if record.resumable and request.round is not None and run is None and request.scope is None and (
            may_be_asked(session.client_capabilities) or CONTINUATION_KEY in request.round.answers):
        # a 2026-07-28 call that must not re-run (a call made by a tool waits inside that tool's run);
        # one whose client declared none of the questions' capabilities cannot park: it runs as any other
        return await kernel.continuations.call(request, _progress_token(request),
                                               functools.partial(_resume_tool, kernel, request, entry, kwargs))
    if record.signature is not None and record.signature.context_param:
        kwargs[record.signature.context_param] = Context(_call_scope(kernel, request, run))
    if run is not None:  # a task may run until its record expires
        return await run.execute(functools.partial(_invoke_tool, kernel, request, entry, kwargs,
                                                   kernel.settings.task_ttl))
    return await _invoke_tool(kernel, request, entry, kwargs, kernel.settings.max_tool_seconds)


def _call_scope(kernel: Kernel, request: RequestInfo, run: TaskRun | None) -> Any:
    """The scope behind a tool's ``ctx``: the request's own, or a task's (either era's)."""
    if run is None:
        return _scope(kernel, request)
    token = _progress_token(request)
    if run.legacy:  # its questions travel on the client's tasks/result
        return LegacyTaskScope(kernel, request.session, request.id, request.method, token, request.principal,
                               run=run)
    return TaskScope(kernel, request.session, request.id, request.method, token, round=request.round, run=run)


async def _resume_tool(kernel: Kernel, request: RequestInfo, entry: Any, kwargs: dict[str, Any],
                       scope: Any) -> dict[str, Any]:
    signature = entry.record.signature
    if signature is not None and signature.context_param:
        kwargs[signature.context_param] = Context(scope)
    return await _invoke_tool(kernel, request, entry, kwargs, kernel.settings.max_tool_seconds)


async def _bounded(kernel: Kernel, fn: Callable[..., Any], kwargs: dict[str, Any], what: str) -> Any:
    """Run a resource, prompt or completion handler for at most ``server.max_handler_seconds``;
    past them it is cancelled and the request gets -32001 naming the setting."""
    limit = kernel.settings.max_handler_seconds
    block = deadline(limit or None)
    try:
        with block:  # one that swallows its cancellation is left behind (a grace after the limit)
            return await detachable(call_handler(fn, kwargs, pool=kernel.sync_pool), what, limit or None)
    except TimeoutError:
        if not block.expired():
            raise  # the handler's own timeout: its failure
        log.warning("%s ran past its %gs limit (server.max_handler_seconds) and was cancelled", what, limit)
        raise McpError(REQUEST_TIMEOUT, f"{what} timed out after {limit:g}s (server.max_handler_seconds)") from None


async def _invoke_tool(kernel: Kernel, request: RequestInfo, entry: Any, kwargs: dict[str, Any],
                       limit: float) -> dict[str, Any]:
    """Run the tool for at most ``limit`` seconds (0: no limit); its failures become isError results,
    protocol errors propagate. Counted in the tool's :class:`~mcphost.stats.ToolStats`: an
    ``isError`` result and an exception both count as errors (a cancelled call is not counted)."""
    record = entry.record
    limited = deadline(limit or None)
    started = perf_counter()
    try:
        with limited:  # one that swallows its cancellation is left behind (a grace after the limit)
            value = await detachable(call_handler(record.fn, kwargs, pool=kernel.sync_pool, thread=record.thread),
                                     "tool", limit or None, record)
    except Exception as exc:
        entry.stats.add(started, perf_counter(), True)
        if limited.expired():
            _end_scope(record, kwargs)
        return await _tool_raised(kernel, request, record, exc, limited.expired(), limit)
    except asyncio.CancelledError:
        _end_scope(record, kwargs)
        raise
    result = results.tool_result(entry, value, request.session.protocol_version)  # type: ignore[arg-type]  # initialized: it has a version
    entry.stats.add(started, perf_counter(), result.get("isError") is True)
    return result


def _end_scope(record: Tool, kwargs: dict[str, Any]) -> None:
    """The call is answered without its tool: a tool that runs on (it swallowed its cancellation
    and was left behind) sends no progress or log for it any more."""
    signature = record.signature
    if signature is not None and signature.context_param:
        scope = getattr(kwargs.get(signature.context_param), "_scope", None)
        if isinstance(scope, RequestScope):
            scope.ended = True


async def _tool_raised(kernel: Kernel, request: RequestInfo, record: Tool, exc: Exception, expired: bool,
                       limit: float) -> dict[str, Any]:
    """The answer to a tool that raised ``exc`` (``expired``: the host's time limit ran out)."""
    if isinstance(exc, TimeoutError):
        if not expired:  # the tool's own timeout (an HTTP client's, say): a tool failure
            return await _tool_failed(kernel, request, record, exc)
        log.warning("tool %s ran past its %gs limit and was cancelled", record.name, limit)
        if request.era == "legacy":
            raise McpError(REQUEST_TIMEOUT, f"Tool {record.name!r} timed out after {limit:g}s") from None
        return results.error_result(f"Tool {record.name!r} timed out after {limit:g}s")
    if isinstance(exc, McpError):
        raise exc
    if isinstance(exc, ToolError):
        return results.error_result(str(exc))
    if isinstance(exc, ClientRequestError):
        error = _missing_capability(request, exc)
        if error is not None:
            raise error from None
        return results.error_result(exc.message)
    return await _tool_failed(kernel, request, record, exc)


#: Seconds during which a tool failing again at the same place, with the same exception type, logs
#: one line instead of its traceback once more: formatting a traceback costs about a millisecond,
#: which a tool failing on every call would otherwise add to every call.
TRACEBACK_EVERY = 60.0
_tracebacks: dict[tuple[str, type[BaseException], str, int], float] = {}


def _traceback_due(name: str, exc: BaseException) -> bool:
    """Whether this failure's traceback is logged (the first at its place in TRACEBACK_EVERY s)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    place = (name, type(exc), tb.tb_frame.f_code.co_filename if tb else "", tb.tb_lineno if tb else 0)
    now = asyncio.get_running_loop().time()
    if now - _tracebacks.get(place, -TRACEBACK_EVERY) < TRACEBACK_EVERY:
        return False
    if len(_tracebacks) >= 1024:
        _tracebacks.clear()
    _tracebacks[place] = now
    return True


async def _tool_failed(kernel: Kernel, request: RequestInfo, record: Tool, exc: Exception) -> dict[str, Any]:
    plugin = record.provenance.plugin if record.provenance else "?"
    if _traceback_due(record.name, exc):
        log.error("tool %s (plugin %s) raised", record.name, plugin, exc_info=exc)
    else:
        log.error("tool %s (plugin %s) raised %s again at the same place (its traceback is logged at most "
                  "once every %g s)", record.name, plugin, type(exc).__name__, TRACEBACK_EVERY)
    await kernel.services.report_exception(request, exc)
    return results.error_result(f"Tool {record.name!r} failed with an internal error")


def _describe(error: Any) -> str:
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


# -- resources ------------------------------------------------------------------------------------

@method("resources/list")
async def list_resources(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    return _listing(kernel, request, "resources", "resources", resource_descriptor)


@method("resources/templates/list")
async def list_templates(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    return _listing(kernel, request, "resources", "resourceTemplates", template_descriptor)


def _not_found(request: RequestInfo, uri: str) -> McpError:
    # -32002 is the session era's code; 2026-07-28 answers -32602. A huge URI is not echoed back
    # whole: the client has it, and encoding and sending megabytes again costs every other client.
    data = {"uri": uri} if len(uri) <= MAX_ECHOED_URI else {"uri": uri[:MAX_ECHOED_URI], "truncated": True}
    return McpError(RESOURCE_NOT_FOUND if request.era == "legacy" else INVALID_PARAMS, "Resource not found", data)


@method("resources/read")
async def read_resource(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    _require_capability(kernel, request, "resources")
    uri = _string(request.params, "uri")
    _check_uri(uri, kernel.settings.max_read_uri_bytes, "max_read_uri_bytes")
    visibility = _visibility(kernel, request)
    found = visibility.resource(kernel.catalog, uri)
    if found is None:
        raise _not_found(request, uri)
    record, variables = found
    visibility.require(record.scopes)
    kwargs: dict[str, Any] = dict(variables)
    if record.context_param:
        kwargs[record.context_param] = Context(_scope(kernel, request))
    try:
        value = await _bounded(kernel, record.fn, kwargs, f"Resource {uri[:200]!r}")
    except McpError:
        raise
    except ClientRequestError as exc:
        raise _missing_capability(request, exc) or McpError(INTERNAL_ERROR, exc.message) from None
    except (FileNotFoundError, LookupError):
        raise _not_found(request, uri) from None
    except Exception as exc:
        log.exception("resource %s (plugin %s) raised", uri, record.provenance.plugin if record.provenance else "?")
        await kernel.services.report_exception(request, exc)
        raise McpError(INTERNAL_ERROR, "Internal error") from None
    if value is None:
        raise _not_found(request, uri)
    result: dict[str, Any] = {"contents": results.resource_contents(uri, record.mime_type, value)}
    if request.era == "modern":  # the record's own cache hints; the kernel's stamp fills in the rest
        if record.cache_ttl_ms is not None:
            result["ttlMs"] = record.cache_ttl_ms
        if record.cache_scope is not None:
            result["cacheScope"] = record.cache_scope
    return result


@method("resources/subscribe")
async def subscribe(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    _require_capability(kernel, request, "resources")
    uri = _string(request.params, "uri")
    subscriptions = request.session.subscriptions
    _check_uri(uri, kernel.settings.max_uri_bytes, "max_uri_bytes")
    if uri not in subscriptions and len(subscriptions) >= kernel.settings.max_subscriptions:
        raise _too_many_subscriptions(kernel)
    visibility = _visibility(kernel, request)
    found = kernel.catalog.find_resource(uri)
    if found is not None and not visibility.allows(found[0]):
        raise _not_found(request, uri)  # hidden from this session: as if it did not exist
    if found is not None:
        visibility.require(found[0].scopes)  # what the caller may not read, it may not follow
    if not await kernel.sessions.subscribe(request.session, uri):  # the store's count may be higher
        refused = kernel.sessions.budgets.refusal(request.session.quota, "subscriptions")
        if refused is not None:  # the principal's budget over all its sessions (or the host's)
            raise invalid_params(f"{refused.message}; unsubscribe first")
        raise _too_many_subscriptions(kernel)
    return {}


def _too_many_subscriptions(kernel: Kernel) -> McpError:
    return invalid_params(f"Too many subscriptions on this session (server.max_subscriptions is "
                          f"{kernel.settings.max_subscriptions}); unsubscribe first")


def _check_uri(uri: str, budget: int, setting: str) -> None:
    """Refuse a URI longer than ``budget`` bytes, the value of ``server.<setting>``: one to keep (a
    subscription or a listen filter, ``max_uri_bytes``) or to read (``max_read_uri_bytes``).

    Checked before the URI is matched, encoded or echoed anywhere, so an oversized one costs
    nothing; the length in characters decides alone when it already exceeds the budget.
    """
    if len(uri) > budget or len(uri.encode("utf-8", "surrogatepass")) > budget:
        raise invalid_params(f"URI longer than {budget} bytes (server.{setting})")


def _subscribable(kernel: Kernel, visibility: Visibility, uri: str) -> bool:
    """Whether the caller may follow ``uri``: any URI but one the allow-lists hide or whose
    scopes the caller lacks (a listen filter naming it is left out of the honoured list)."""
    found = kernel.catalog.find_resource(uri)
    return found is None or visibility.sees(found[0])


@method("resources/unsubscribe")
async def unsubscribe(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    _require_capability(kernel, request, "resources")
    await kernel.sessions.unsubscribe(request.session, _string(request.params, "uri"))
    return {}


# -- prompts --------------------------------------------------------------------------------------

@method("prompts/list")
async def list_prompts(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    return _listing(kernel, request, "prompts", "prompts", prompt_descriptor)


def _prompt(kernel: Kernel, request: RequestInfo, name: str) -> Prompt:
    prompt = kernel.catalog.prompts.get(name)
    visibility = _visibility(kernel, request)
    if prompt is None or not visibility.allows(prompt):
        raise invalid_params(f"Unknown prompt: {name[:100]}")
    visibility.require(prompt.scopes)
    return prompt


@method("prompts/get")
async def get_prompt(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    _require_capability(kernel, request, "prompts")
    prompt = _prompt(kernel, request, _string(request.params, "name"))
    arguments = request.params.get("arguments") or {}
    if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
        raise invalid_params('Invalid params: "arguments" must map names to strings')
    declared = {argument["name"]: argument for argument in prompt.arguments}
    missing = [name for name, argument in declared.items() if argument.get("required") and name not in arguments]
    if missing:
        raise invalid_params(f"Missing required argument(s) for prompt {prompt.name!r}: {', '.join(missing)}")
    kwargs: dict[str, Any] = {name: value for name, value in arguments.items() if name in declared}
    if prompt.context_param:
        kwargs[prompt.context_param] = Context(_scope(kernel, request))
    try:
        value = await _bounded(kernel, prompt.fn, kwargs, f"Prompt {prompt.name!r}")
        return results.prompt_result(prompt.description, value)
    except McpError:
        raise
    except ClientRequestError as exc:
        raise _missing_capability(request, exc) or McpError(INTERNAL_ERROR, exc.message) from None
    except Exception as exc:
        log.exception("prompt %s (plugin %s) raised", prompt.name,
                      prompt.provenance.plugin if prompt.provenance else "?")
        await kernel.services.report_exception(request, exc)
        raise McpError(INTERNAL_ERROR, "Internal error") from None


# -- completion -----------------------------------------------------------------------------------

@method("completion/complete")
async def complete(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    _require_capability(kernel, request, "completions")
    ref = request.params.get("ref")
    argument = request.params.get("argument")
    if not isinstance(ref, dict) or not isinstance(argument, dict):
        raise invalid_params('Invalid params: "ref" and "argument" must be objects')
    name, value = argument.get("name"), argument.get("value", "")
    if not isinstance(name, str) or not isinstance(value, str):
        raise invalid_params('Invalid params: argument "name" and "value" must be strings')
    context = request.params.get("context") or {}
    context_args = context.get("arguments") or {} if isinstance(context, dict) else {}
    if not isinstance(context_args, dict):
        raise invalid_params('Invalid params: "context.arguments" must be an object')
    if ref.get("type") == "ref/prompt":
        completer = _prompt(kernel, request, _string(ref, "name")).completions.get(name)
    elif ref.get("type") == "ref/resource":
        uri = _string(ref, "uri")
        entry = kernel.catalog.templates.get(uri)
        visibility = _visibility(kernel, request)
        if entry is None or not visibility.allows(entry.record):
            resource = kernel.catalog.resources.get(uri)
            if resource is not None and visibility.allows(resource):
                return {"completion": {"values": []}}
            raise invalid_params(f"Unknown resource template: {uri[:200]}")
        visibility.require(entry.record.scopes)
        completer = entry.record.completions.get(name)
    else:
        raise invalid_params('Invalid params: ref.type must be "ref/prompt" or "ref/resource"')
    if completer is None:
        return {"completion": {"values": []}}
    try:
        found = await _bounded(kernel, functools.partial(completer, value, dict(context_args)), {},
                               f"Completion for {name!r}")
    except McpError:
        raise
    except Exception as exc:
        log.exception("completion for %s raised", name)
        await kernel.services.report_exception(request, exc)
        raise McpError(INTERNAL_ERROR, "Internal error") from None
    return {"completion": _completion(found)}


def _completion(found: Any) -> dict[str, Any]:
    if isinstance(found, Completion):
        values, total, has_more = list(found.values), found.total, found.has_more
    else:
        items = [found] if isinstance(found, str) else (found or [])
        values, total, has_more = [str(v) for v in items], None, None
    if len(values) > MAX_COMPLETION_VALUES:
        total = total if total is not None else len(values)
        values, has_more = values[:MAX_COMPLETION_VALUES], True
    completion: dict[str, Any] = {"values": values}
    if total is not None:
        completion["total"] = total
    if has_more is not None:
        completion["hasMore"] = has_more
    return completion


# -- 2026-07-28 only ------------------------------------------------------------------------------

@method("server/discover")
async def discover(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    capabilities = {**_capabilities(kernel, request.session), "extensions": kernel.services.extensions()}
    result: dict[str, Any] = {"supportedVersions": list(SUPPORTED_VERSIONS), "capabilities": capabilities}
    instructions = _instructions(kernel, request.session)
    if instructions:
        result["instructions"] = instructions
    return result


@method("tasks/get")
async def get_task(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    return await kernel.tasks.get(request.session, request.params)


@method("tasks/result")
async def task_result(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    return await kernel.tasks.result(request.session, request.params, _scope(kernel, request))


@method("tasks/update")
async def update_task(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    return await kernel.tasks.update(request.session, request.params)


@method("tasks/cancel")
async def cancel_task(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    return await kernel.tasks.cancel(request.session, request.params)


_LIST_KINDS = {"toolsListChanged": ("tools", "tools"), "promptsListChanged": ("prompts", "prompts"),
               "resourcesListChanged": ("resources", "resources")}


@method("subscriptions/listen")
async def listen(kernel: Kernel, request: RequestInfo) -> dict[str, Any]:
    """Acknowledge what will be honoured, then deliver matching notifications until the stream ends."""
    wanted = request.params.get("notifications")
    if not isinstance(wanted, dict):
        raise invalid_params('Invalid params: "notifications" must be an object')
    budget = kernel.settings.max_subscriptions
    for field in ("resourceSubscriptions", "taskIds"):  # what the stream keeps while it is open
        named = wanted.get(field)
        if isinstance(named, list) and len(named) > budget:
            raise invalid_params(f'Invalid params: "notifications.{field}" names more than {budget} entries '
                                 "(server.max_subscriptions)")
        for item in named if isinstance(named, list) and field == "resourceSubscriptions" else ():
            if isinstance(item, str):
                _check_uri(item, kernel.settings.max_uri_bytes, "max_uri_bytes")
    capabilities = kernel.catalog.capabilities()
    honoured: dict[str, Any] = {}
    kinds: set[str] = set()
    for flag, (kind, capability) in _LIST_KINDS.items():
        if wanted.get(flag) is True and capabilities.get(capability, {}).get("listChanged"):
            honoured[flag] = True
            kinds.add(kind)
    uris: set[str] = set()
    subscriptions = wanted.get("resourceSubscriptions")
    if isinstance(subscriptions, list) and capabilities.get("resources", {}).get("subscribe"):
        visibility = _visibility(kernel, request)  # resources hidden from the caller are not honoured
        uris = {uri for uri in subscriptions if isinstance(uri, str) and _subscribable(kernel, visibility, uri)}
        honoured["resourceSubscriptions"] = sorted(uris)
    task_ids: set[str] = set()
    asked_tasks = wanted.get("taskIds")
    if asked_tasks is not None:
        if not declares_tasks(request.session):
            raise missing_extension("Task notifications")
        if not isinstance(asked_tasks, list):
            raise invalid_params('Invalid params: "notifications.taskIds" must be a list of task ids')
        for task_id in asked_tasks:  # only the caller's own, existing tasks
            try:
                await kernel.tasks.load(request.session, {"taskId": task_id})
            except McpError:
                continue
            task_ids.add(task_id)
        honoured["taskIds"] = sorted(task_ids)
    meta = {SUBSCRIPTION_ID: request.id}
    listener = Listener(request.session, request.id, kinds, uris, task_ids)
    kernel.listeners.add(listener)
    try:
        await request.session.outlet(  # type: ignore[misc]  # a 2026-07-28 session always has its exchange's outlet
            {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
             "params": {"_meta": meta, "notifications": honoured}}, request.id)
        # The stream ends with this result on shutdown, when the caller's credentials expire, or
        # after max_stream_seconds; the client closing the stream cancels this instead.
        try:
            async with asyncio.timeout(stream_seconds(request.principal, kernel.settings.max_stream_seconds)):
                await kernel.closing.wait()
        except TimeoutError:
            pass
    finally:
        kernel.listeners.discard(listener)
    return {"_meta": meta}
