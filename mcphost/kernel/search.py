"""``search_tools`` and ``call_tool``: the two tools a ``discovery = "search"`` endpoint lists.

``search_tools`` ranks the tools of the endpoint's view (:mod:`mcphost.search`) and returns the
best ones the caller may see (its scopes, its allow-lists) with their full definitions. Its cost
is bounded: a query longer than the endpoint's ``search_max_query`` bytes is refused at once; the
view's tools are selected before scoring (a mask per view, built once per version of the index),
so hidden tools cost nothing; and over a large index the scoring runs in the kernel's fair thread
pool, where one principal's concurrent searches hold at most its share of the threads.
``call_tool`` runs one of them through the very path a direct ``tools/call`` takes (validation,
scopes, progress, elicitation, cancellation, tasks): it only renames the request. Tools the
endpoint does not list stay callable directly by name.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from mcphost.kernel import results
from mcphost.kernel.views import SEARCH_TOOLS
from mcphost.protocol.errors import invalid_params
from mcphost.protocol.versions import at_least
from mcphost.request import RequestInfo

if TYPE_CHECKING:
    from mcphost.kernel.view import KernelView as Kernel
    from mcphost.kernel.visibility import Visibility

#: Most tools one search returns.
MAX_LIMIT = 50
#: Tools in the index above which a search is scored in the thread pool (below, it costs less
#: than the hop to a thread).
THREAD_ABOVE = 2000

_SEARCH_INPUT = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1,
                  "description": "What the tool should do, in words (e.g. 'list the files changed in git')"},
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                  "description": "How many tools to return at most"},
    },
    "required": ["query"],
    "additionalProperties": False,
}
_SEARCH_OUTPUT = {
    "type": "object",
    "properties": {"tools": {"type": "array", "items": {"type": "object"},
                             "description": "Matching tools, best first, as tools/list describes them"}},
    "required": ["tools"],
}
_CALL_INPUT = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "description": "The tool's name, as search_tools returned it"},
        "arguments": {"type": "object", "description": "Its arguments, matching its inputSchema"},
    },
    "required": ["name"],
    "additionalProperties": False,
}


@functools.lru_cache(maxsize=16)
def listing(version: str) -> list[dict[str, Any]]:
    """The two tools, described for protocol revision ``version`` (built once; do not mutate)."""
    search: dict[str, Any] = {
        "name": "search_tools",
        "description": "Find the tools of this server that fit a task. Describe the task in words; the "
                       "matching tools come back with their full definitions (name, description, "
                       "inputSchema). Then run one with call_tool.",
        "inputSchema": _SEARCH_INPUT,
        "annotations": {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
    }
    call: dict[str, Any] = {
        "name": "call_tool",
        "description": "Run a tool found with search_tools: give its name and its arguments.",
        "inputSchema": _CALL_INPUT,
    }
    if at_least(version, "2025-06-18"):
        search["title"] = "Search tools"
        search["outputSchema"] = _SEARCH_OUTPUT
        call["title"] = "Call a tool"
    return [search, call]


async def search_tools(kernel: Kernel, request: RequestInfo, visibility: Visibility,
                       describe: Callable[[Any, str], dict[str, Any]]) -> dict[str, Any]:
    """Run ``search_tools``: the best matches the caller may see, with their definitions."""
    arguments = request.params.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise invalid_params('Invalid params: "arguments" must be an object')
    query, limit = arguments.get("query"), arguments.get("limit", None)
    unknown = set(arguments) - {"query", "limit"}
    if not isinstance(query, str) or not query.strip() or unknown:
        return results.error_result("Invalid arguments for tool 'search_tools': query must be a non-empty "
                                    "string" + (f"; unknown argument(s) {sorted(unknown)}" if unknown else ""))
    view = visibility.view
    assert view is not None
    most = view.settings.search_max_query
    if len(query) > most or len(query.encode()) > most:
        return results.error_result(f"Invalid arguments for tool 'search_tools': the query is longer than "
                                    f"{most} bytes; describe the task in fewer words")
    if limit is None:
        limit = view.settings.search_limit
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        return results.error_result(f"Invalid arguments for tool 'search_tools': limit must be an integer "
                                    f"from 1 to {MAX_LIMIT}")
    views = kernel.views
    await views.ready()
    catalog = kernel.catalog
    tools = catalog.tools

    hidden = catalog.app_only_tools  # for their MCP App alone: never found by the model

    def accept(name: str) -> bool:
        entry = tools.get(name)
        return entry is not None and name not in hidden and visibility.sees(entry.record)

    keys = view.keys(catalog, "tools")
    index = views.index

    def run() -> list[tuple[str, float]]:
        version, mask = views.mask_for(view, keys)
        return index.search(query, limit, accept, mask, version)

    if len(index) > THREAD_ABOVE or index.rankers:
        ranked = await asyncio.get_running_loop().run_in_executor(kernel.sync_pool, run)
    else:
        ranked = run()
    version = request.session.protocol_version or ""
    found = [describe(tools[name].record, version) for name, _ in ranked if name in tools]
    structured = {"tools": found}
    return {"content": [{"type": "text", "text": orjson.dumps(structured).decode()}],
            "structuredContent": structured}


def inner_call(request: RequestInfo) -> RequestInfo:
    """``call_tool``'s request as the direct ``tools/call`` of the tool it names."""
    arguments = request.params.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise invalid_params('Invalid params: "arguments" must be an object')
    name = arguments.get("name")
    inner = arguments.get("arguments", {})
    if not isinstance(name, str) or not name:
        raise invalid_params('Invalid params: call_tool needs "name", the name of a tool search_tools returned')
    if not isinstance(inner, dict):
        raise invalid_params('Invalid params: call_tool\'s "arguments" must be an object')
    if name in SEARCH_TOOLS:  # they are this endpoint's own, not tools it finds
        raise invalid_params(f"Unknown tool: {name}")
    params = {**request.params, "name": name, "arguments": inner}
    return RequestInfo(request.session, request.id, request.method, params, request.round, request.principal,
                       connection=request.connection, catalog=getattr(request, "_catalog", None))
