"""Turn what an upstream lists into mcphost records whose handlers forward to it.

Names of tools and prompts get the server's prefix; resource URIs stay as they are (they are
the upstream's identifiers, and clients follow them from resource links), except MCP Apps' ``ui://``
URIs: two upstreams commonly serve the same ``ui://`` path, so each is served as ``ui://SERVER/PATH``
(apps.py), in resources/list, the templates, resources/read (the contents' ``uri``) and the tools'
``_meta.ui``; all else in ``_meta`` (the CSP) passes as it is. Every record carries
provenance naming the upstream (``Provenance.origin``). A listed item that mcphost would refuse
(a tool name outside the spec's characters, a name with control characters, an invalid schema, a
description or schema over the server's caps) is skipped with a warning, so one odd upstream tool
never takes the other mounts down.

:func:`records` is plain computation over one listing: the plugin runs it in a worker thread,
once per listing change, so an upstream with thousands of tools never holds the event loop.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import mcp_types as types
import orjson

import mcphost
from mcphost import signature as sig
from mcphost.catalog import compile_validator
from mcphost.protocol.uritemplate import UriTemplate, UriTemplateError
from mcphost.records import TOOL_NAME, Provenance
from mcphost_proxy import tasks
from mcphost_proxy.apps import tool_meta, ui_uri
from mcphost_proxy.cleaning import Caps, Removal, clean
from mcphost_proxy.rounds import rounds
from mcphost_proxy.upstream import Listing, Upstream

log = logging.getLogger("mcphost.proxy")

#: The keyword under which the host passes the Context to a forwarding handler (never an upstream argument).
CTX = "__mcphost_proxy_ctx"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

#: Picks the upstream connection serving a call (per_session servers have one per client session; an
#: oauth server one per principal, found asynchronously: the caller may first be asked to sign in).
Resolver = Callable[[mcphost.Context | None], Upstream | Awaitable[Upstream]]


async def resolved(resolve: Resolver, ctx: mcphost.Context | None) -> Upstream:
    target = resolve(ctx)
    return await target if inspect.isawaitable(target) else target


#: Control characters (C0, DEL, C1): never in a name, URI or title an upstream hands over.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: Longest prompt name and resource URI (template) the proxy mounts.
MAX_NAME_CHARS = 128
MAX_URI_CHARS = 2048
#: Longest display name / title (resources carry one besides their URI).
MAX_TITLE_CHARS = 256


def origin_of(upstream: Upstream) -> Provenance:
    return Provenance(plugin="proxy", origin=upstream.settings.name)


def _first_wait(settings: Any) -> float | None:
    """How long a call waits for an upstream that has not connected yet: connections started on
    demand (lazy, per session) are waited for; a restarting one answers an error at once."""
    return settings.timeout if settings.start == "lazy" or settings.per_session or settings.auth.mode != "static" \
        else None


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)  # type: ignore[no-any-return]


def _icons(item: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    icons = item.get("icons")
    return tuple(icon for icon in icons if isinstance(icon, dict)) if isinstance(icons, list) else ()


def _shown(value: Any) -> str:
    """A name as the log shows it: repr'd (control characters escaped) and cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _problem(settings: Any, item: Mapping[str, Any], schemas: tuple[str, ...] = ()) -> str | None:
    """Why ``item`` exceeds the server's caps or carries control characters (None when it does not)."""
    description = item.get("description")
    if description is not None and not isinstance(description, str):
        return "its description is not a string"
    if isinstance(description, str) and len(description) > settings.max_description_chars:
        return (f"its description has {len(description)} characters, over max_description_chars "
                f"({settings.max_description_chars})")
    for key in ("title", "name") if "uri" in item or "uriTemplate" in item else ("title",):
        value = item.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or _CONTROL.search(value) or len(value) > MAX_TITLE_CHARS:
            return f"its {key} is not a string of at most {MAX_TITLE_CHARS} printable characters"
    for key in schemas:
        schema = item.get(key)
        if schema is None:
            continue
        try:
            size = len(orjson.dumps(schema))
        except TypeError:
            return f"its {key} is not JSON"
        if size > settings.max_schema_bytes:
            return f"its {key} has {size} bytes, over max_schema_bytes ({settings.max_schema_bytes})"
    return None


def _tool_record(upstream: Upstream, resolve: Resolver, item: Mapping[str, Any], listing: Listing
                 ) -> mcphost.Tool | None:
    settings = upstream.settings
    upstream_name = str(item.get("name", ""))
    name = settings.prefix + upstream_name
    if not TOOL_NAME.match(name):
        log.warning("upstream %s: tool %s is not mounted: tool names are 1-128 characters of "
                    "A-Z a-z 0-9 _ - . / (prefix included)", settings.name, _shown(upstream_name))
        return None
    problem = _problem(settings, item, ("inputSchema", "outputSchema"))
    if problem is not None:
        log.warning("upstream %s: tool %r is not mounted: %s", settings.name, upstream_name, problem)
        return None
    input_schema = item.get("inputSchema") if isinstance(item.get("inputSchema"), dict) else None
    output_schema = item.get("outputSchema") if isinstance(item.get("outputSchema"), dict) else None
    try:
        if input_schema is None or input_schema.get("type") != "object":
            raise ValueError("its inputSchema is not an object schema")
        compile_validator(input_schema)
        if output_schema is not None:
            if output_schema.get("type") != "object":
                raise ValueError("its outputSchema is not an object schema")
            compile_validator(output_schema)
    except (ValueError, jsonschema.SchemaError) as exc:
        log.warning("upstream %s: tool %r is not mounted: %s", settings.name, upstream_name,
                    getattr(exc, "message", exc))
        return None
    execution = item.get("execution")
    support = execution.get("taskSupport") if isinstance(execution, dict) else None
    # A task-only tool called without a task is answered (the proxy follows the upstream task), so
    # the host declares it "optional" (bridge_tasks, the default): what it accepts, from any client.
    # Without the bridge it is declared as the upstream declares it, and a 2026-07-28 client without
    # the extension gets -32021 (a session-era client, which has none to declare, is still answered).
    task_only = support == "required"
    task = support if support in ("optional", "required") else "forbidden"
    if task == "required" and settings.bridge_tasks:
        task = "optional"
    if task == "forbidden" and TASKS_EXTENSION in (listing.capabilities.get("extensions") or {}):
        task = "optional"  # the upstream runs long calls as tasks; so may the host, in front of it

    async def forward(**arguments: Any) -> mcphost.ToolResult:
        ctx: mcphost.Context = arguments.pop(CTX)
        target = await resolved(resolve, ctx)

        async def progress(value: float, total: float | None, message: str | None) -> None:
            await ctx.progress(value, total, message)

        async def call(session: Any) -> Any:
            modern = session.discover_result is not None
            if task_only and not modern:  # a 2025-11-25 upstream: a task call with the task parameter
                return await tasks.call_as_task(session, ctx, upstream_name, arguments)
            return await rounds(target, ctx, lambda **more: session.call_tool(
                upstream_name, arguments, progress_callback=progress, allow_input_required=modern,
                allow_claimed=modern, **more), session)

        result = await _send_call(target, ctx, call, _first_wait(settings), len(orjson.dumps(arguments)), task_only,
                                  settings.bridge_tasks)
        wire = result if isinstance(result, dict) else _dump(result)  # the lean path's result: as it arrived
        return mcphost.ToolResult(content=list(wire.get("content") or []), structured=wire.get("structuredContent"),
                                  is_error=bool(wire.get("isError")), meta=wire.get("_meta"))

    return mcphost.Tool(
        name=name, fn=forward, input_schema=dict(input_schema), description=item.get("description"),
        title=item.get("title"), output_schema=dict(output_schema) if output_schema is not None else None,
        annotations=item.get("annotations") if isinstance(item.get("annotations"), dict) else None,
        icons=_icons(item), meta=tool_meta(settings.name, item.get("_meta")), task=task, resumable=True,
        signature=sig.Signature(input_schema=dict(input_schema), output_schema=None, wrap_output=False,
                                context_param=CTX),
        provenance=origin_of(upstream))


async def _send_call(target: Upstream, ctx: mcphost.Context, call: Callable[[Any], Any], wait: float | None,
                     size: int, task_only: bool, bridge: bool) -> Any:
    """Forward a tool call; one that runs only as a task upstream is followed here (tasks.py)."""
    marked = tasks.TASK_ONLY.set(task_only)
    try:
        try:
            return await target.request(ctx, call, wait=wait, size=size)
        except mcphost.McpError as exc:
            if task_only or (ctx.session.era == "modern" and not bridge) or not tasks.needs_task(exc):
                raise  # without the bridge, a 2026-07-28 client hears it as the upstream said it
            # A 2026-07-28 upstream lists no taskSupport: it says so only now. Follow its task for
            # this client, which did not declare the extension (or, in the session era, has none).
            tasks.TASK_ONLY.set(True)
            return await target.request(ctx, call, wait=wait, size=size)
    finally:
        tasks.TASK_ONLY.reset(marked)


def _completions(upstream: Upstream, resolve: Resolver, ref: dict[str, Any], names: list[str], listing: Listing
                 ) -> dict[str, Any]:
    if "completions" not in listing.capabilities:
        return {}

    def completer(argument: str) -> Any:
        async def complete(value: str, context: Mapping[str, str]) -> mcphost.Completion:
            async def call(session: Any) -> Any:
                reference = (types.PromptReference(type="ref/prompt", name=ref["name"]) if ref["type"] == "ref/prompt"
                             else types.ResourceTemplateReference(type="ref/resource", uri=ref["uri"]))
                return await session.complete(reference, {"name": argument, "value": value},
                                              context_arguments=dict(context) or None)

            target = await resolved(resolve, None)
            result = _dump(await target.request(None, call, wait=_first_wait(upstream.settings)))
            completion = result.get("completion") or {}
            return mcphost.Completion(values=list(completion.get("values") or []), total=completion.get("total"),
                                      has_more=completion.get("hasMore"))
        return complete

    return {argument: completer(argument) for argument in names}


def _prompt_record(upstream: Upstream, resolve: Resolver, item: Mapping[str, Any], listing: Listing
                   ) -> mcphost.Prompt | None:
    settings = upstream.settings
    upstream_name = str(item.get("name", ""))
    name = settings.prefix + upstream_name
    if not upstream_name or _CONTROL.search(name) or len(name) > MAX_NAME_CHARS:
        log.warning("upstream %s: prompt %s is not mounted: prompt names are 1-%d printable characters "
                    "(prefix included)", settings.name, _shown(upstream_name), MAX_NAME_CHARS)
        return None
    problem = _problem(settings, item, ("arguments",))
    if problem is not None:
        log.warning("upstream %s: prompt %r is not mounted: %s", settings.name, upstream_name, problem)
        return None
    arguments = tuple(a for a in item.get("arguments") or () if isinstance(a, dict) and isinstance(a.get("name"), str))

    async def forward(**kwargs: Any) -> dict[str, Any]:
        ctx: mcphost.Context = kwargs.pop(CTX)

        target = await resolved(resolve, ctx)

        async def call(session: Any) -> Any:
            modern = session.discover_result is not None
            return await rounds(target, ctx, lambda **more: session.get_prompt(
                upstream_name, {k: str(v) for k, v in kwargs.items()}, allow_input_required=modern, **more))

        wire = _dump(await target.request(ctx, call, wait=_first_wait(upstream.settings)))
        wire.pop("_meta", None)
        return wire

    return mcphost.Prompt(
        name=settings.prefix + upstream_name, fn=forward, arguments=arguments, description=item.get("description"),
        title=item.get("title"), icons=_icons(item),
        meta=item.get("_meta") if isinstance(item.get("_meta"), dict) else None,
        completions=_completions(upstream, resolve, {"type": "ref/prompt", "name": upstream_name},
                                 [a["name"] for a in arguments], listing),
        context_param=CTX, provenance=origin_of(upstream))


async def _read(upstream: Upstream, resolve: Resolver, ctx: mcphost.Context, uri: str) -> list[dict[str, Any]]:
    """The contents of the upstream's resource ``uri``, their ``ui://`` URIs as the host serves them."""
    target = await resolved(resolve, ctx)
    name = upstream.settings.name

    async def call(session: Any) -> Any:
        modern = session.discover_result is not None
        return await rounds(target, ctx, lambda **more: session.read_resource(
            uri, allow_input_required=modern, **more))

    wire = _dump(await target.request(ctx, call, wait=_first_wait(upstream.settings)))
    contents = [dict(item) for item in wire.get("contents") or []]
    for item in contents:
        if isinstance(item.get("uri"), str):
            item["uri"] = ui_uri(name, item["uri"])
    return contents


def _resource_record(upstream: Upstream, resolve: Resolver, item: Mapping[str, Any], listing: Listing
                     ) -> mcphost.Resource | None:
    uri = item.get("uri")
    if not isinstance(uri, str) or not uri or _CONTROL.search(uri) or len(uri) > MAX_URI_CHARS:
        log.warning("upstream %s: resource %s is not mounted: URIs are 1-%d printable characters",
                    upstream.settings.name, _shown(uri), MAX_URI_CHARS)
        return None
    problem = _problem(upstream.settings, item)
    if problem is not None:
        log.warning("upstream %s: resource %r is not mounted: %s", upstream.settings.name, uri, problem)
        return None

    async def forward(**kwargs: Any) -> list[dict[str, Any]]:
        return await _read(upstream, resolve, kwargs[CTX], uri)

    return mcphost.Resource(
        uri=ui_uri(upstream.settings.name, uri), name=str(item.get("name") or uri), fn=forward,
        description=item.get("description"),
        title=item.get("title"), mime_type=item.get("mimeType"),
        size=item.get("size") if isinstance(item.get("size"), int) else None,
        annotations=item.get("annotations") if isinstance(item.get("annotations"), dict) else None,
        icons=_icons(item), meta=item.get("_meta") if isinstance(item.get("_meta"), dict) else None,
        context_param=CTX, cache_scope="private", provenance=origin_of(upstream))


def _template_record(upstream: Upstream, resolve: Resolver, item: Mapping[str, Any], listing: Listing
                     ) -> mcphost.ResourceTemplate | None:
    settings = upstream.settings
    template = item.get("uriTemplate")
    if not isinstance(template, str) or _CONTROL.search(template) or len(template) > MAX_URI_CHARS:
        log.warning("upstream %s: resource template %s is not mounted: URI templates are 1-%d printable "
                    "characters", settings.name, _shown(template), MAX_URI_CHARS)
        return None
    problem = _problem(settings, item)
    if problem is not None:
        log.warning("upstream %s: resource template %r is not mounted: %s", settings.name, template, problem)
        return None
    try:
        parsed = UriTemplate(str(template))
    except (UriTemplateError, TypeError) as exc:
        log.warning("upstream %s: resource template %r is not mounted: %s", settings.name, template, exc)
        return None

    async def forward(**kwargs: Any) -> list[dict[str, Any]]:
        ctx = kwargs.pop(CTX)
        return await _read(upstream, resolve, ctx, parsed.expand(kwargs))

    return mcphost.ResourceTemplate(
        uri_template=ui_uri(settings.name, parsed.template), name=str(item.get("name") or parsed.template),
        fn=forward,
        description=item.get("description"), title=item.get("title"), mime_type=item.get("mimeType"),
        annotations=item.get("annotations") if isinstance(item.get("annotations"), dict) else None,
        icons=_icons(item), meta=item.get("_meta") if isinstance(item.get("_meta"), dict) else None,
        completions=_completions(upstream, resolve, {"type": "ref/resource", "uri": parsed.template},
                                 list(parsed.variables), listing),
        context_param=CTX, cache_scope="private", provenance=origin_of(upstream))


@dataclass
class Report:
    """What :func:`records` did besides building records: hidden text removed (by catalog kind and name
    as served) and definitions held for it (``hidden_text = "hold"``)."""

    hidden: dict[tuple[str, str], list[Removal]] = field(default_factory=dict)
    held: dict[tuple[str, str], str] = field(default_factory=dict)


def _served(settings: Any, kind: str, item: Mapping[str, Any]) -> str:
    if kind in ("tools", "prompts"):
        return str(settings.prefix) + str(item.get("name", ""))
    return str(item.get("uri" if kind == "resources" else "uriTemplate", ""))


def records(upstream: Upstream, resolve: Resolver, listing: Listing | None = None,
            report: Report | None = None) -> dict[str, list[Any]]:
    """The records ``listing`` (by default the upstream's current one) mounts, by kind, include/exclude,
    the caps and hidden-text cleaning applied. Plain computation (schemas compiled through the host's
    cache): safe in a worker thread."""
    settings = upstream.settings
    listing = upstream.listing if listing is None else listing
    report = Report() if report is None else report
    caps = Caps(settings.max_tools, settings.max_definition_bytes, settings.max_catalog_bytes)
    out: dict[str, list[Any]] = {"tools": [], "prompts": [], "resources": [], "templates": []}
    for kind, items, build, key in (("tools", listing.tools, _tool_record, "name"),
                                    ("prompts", listing.prompts, _prompt_record, "name"),
                                    ("resources", listing.resources, _resource_record, "uri"),
                                    ("templates", listing.templates, _template_record, "uriTemplate")):
        wanted = [item for item in items if settings.mounts(str(item.get(key, "")))]
        catalog_kind = "resourceTemplates" if kind == "templates" else kind
        for item in caps.capped(wanted):
            cleaned, removed = clean(item)
            if removed:
                served = (catalog_kind, _served(settings, kind, item))
                report.hidden[served] = removed
                if settings.hidden_text == "hold":
                    report.held[served] = "it carries hidden text (" + ", ".join(
                        sorted({r.kind for r in removed})) + ")"
                    log.warning("upstream %s: %s %r is held: hidden text in %s (hidden_text = 'hold')",
                                settings.name, kind[:-1], served[1], ", ".join(sorted({r.where for r in removed})))
                    continue
                log.info("upstream %s: %s %r: hidden text removed from %s", settings.name, kind[:-1], served[1],
                         ", ".join(sorted({r.where for r in removed})))
            record = build(upstream, resolve, cleaned, listing)
            if record is not None and caps.fits(cleaned):
                out[kind].append(record)
        caps.report(settings.name, kind)
    return out
