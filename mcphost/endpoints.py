"""Endpoints: the ``[endpoints.NAME]`` sections, each a curated view of the one catalog.

An endpoint is served at ``/mcp/NAME`` (or its ``path``) over the same transport as ``/mcp``.
What it shows is a *selection* (``include`` / ``exclude``: plugins and upstreams by name, tool,
prompt and resource names by glob) intersected with everything else that narrows a caller's view
(scopes, connect-hook allow-lists): it narrows, never widens. ``scopes`` are what a principal must
hold to use the endpoint at all; ``discovery = "search"`` lists only ``search_tools`` and
``call_tool`` instead of the whole selection; ``discovery = "code"`` lists ``search_tools`` and the
catalog's ``execute`` tool (the mcphost-codemode plugin provides it), which runs a program calling
the selection's tools, limited by the ``[endpoints.NAME.code]`` sub-table.

This module is a leaf (the configuration imports it): the settings, their JSON Schema (one
section of the configuration's schema) and the pure matching rule. The kernel computes and caches
each endpoint's view of a catalog (:mod:`mcphost.kernel.views`).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from mcphost.errors import ConfigError

#: An endpoint's name: it becomes a path segment and a label in counters and logs.
ENDPOINT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SCOPE = r"^[\x21\x23-\x5B\x5D-\x7E]+$"  # RFC 6749 scope-token: printable ASCII but space, " and \
_NAMES = {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True}
_SELECTION = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "plugins": {**_NAMES, "description": "plugins (their registered names) whose records are selected"},
        "upstreams": {**_NAMES, "description": "upstream servers mounted by mcphost-proxy, by name"},
        "tools": {**_NAMES, "description": "tool name globs (fnmatch: * ? [seq])"},
        "prompts": {**_NAMES, "description": "prompt name globs"},
        "resources": {**_NAMES, "description": "resource URI and URI template globs"},
    },
}

#: The tool a ``discovery = "code"`` endpoint lists next to ``search_tools`` (a plugin provides it,
#: marked with ``CODE_META: True`` in its ``meta``; a plain tool of that name is an ordinary tool).
CODE_TOOL = "execute"
CODE_META = "io.mcphost/code-mode"
#: The JSON Schema of ``[endpoints.NAME.code]`` (and of the defaults in ``[plugins.codemode]``).
CODE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "time_limit": {"type": "number", "exclusiveMinimum": 0, "description": "seconds a program may compute"},
        "memory_limit_mb": {"type": "integer", "minimum": 1, "description": "heap a program may use, in MB"},
        "max_calls": {"type": "integer", "minimum": 0, "description": "tool calls one program may make"},
        "max_output_bytes": {"type": "integer", "minimum": 1,
                             "description": "bytes of printed output kept (more is cut, with a note; "
                                            "16 times as much, at least 1 MiB, stops the program)"},
    },
}

#: The JSON Schema of one ``[endpoints.NAME]`` table (the configuration schema embeds it).
ENDPOINT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "path": {"type": "string", "pattern": r"^/[^\s?#]*$",
                 "description": "URL path it is served at (default /mcp/NAME under server.path's parent)"},
        "name": {"type": "string", "minLength": 1, "description": "serverInfo.name (default: the endpoint's name)"},
        "title": {"type": "string", "description": "serverInfo.title (2025-06-18 and later)"},
        "version": {"type": "string", "description": "serverInfo.version (default: the host's)"},
        "instructions": {"type": "string", "description": "instructions for the client's model"},
        "scopes": {"type": "array", "items": {"type": "string", "pattern": _SCOPE}, "uniqueItems": True,
                   "description": "scopes a principal must hold to use the endpoint at all"},
        "discovery": {"enum": ["list", "search", "code"],
                      "description": "list: tools/list shows the selection; search: only search_tools and "
                                     "call_tool; code: search_tools and execute (a program calling the tools)"},
        "search_limit": {"type": "integer", "minimum": 1, "maximum": 100,
                         "description": "tools search_tools returns when the caller names no limit"},
        "code": {**CODE_SCHEMA, "description": "limits of execute's programs on a discovery = \"code\" endpoint "
                                                "(absent keys: [plugins.codemode]'s)"},
        "search_max_query": {"type": "integer", "minimum": 16, "maximum": 65536,
                             "description": "longest search_tools query, in bytes of UTF-8 (longer: a tool error)"},
        "include": {**_SELECTION, "description": "what is selected (absent: everything)"},
        "exclude": {**_SELECTION, "description": "what is left out of the selection"},
    },
}

#: The JSON Schema of the whole ``[endpoints]`` table.
ENDPOINTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "propertyNames": {"pattern": ENDPOINT_NAME.pattern},
    "additionalProperties": ENDPOINT_SCHEMA,
}

_KINDS = ("tools", "prompts", "resources")


def is_code_tool(record: Any) -> bool:
    """Whether ``record`` is the code-mode ``execute`` tool, which only code endpoints select."""
    if getattr(record, "name", None) != CODE_TOOL:
        return False
    meta = getattr(record, "meta", None)
    return isinstance(meta, Mapping) and meta.get(CODE_META) is True


@dataclass(frozen=True)
class Selection:
    """Plugins, upstreams and name globs; a record is selected when any of them matches it."""

    plugins: frozenset[str] = frozenset()
    upstreams: frozenset[str] = frozenset()
    tools: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.plugins or self.upstreams or self.tools or self.prompts or self.resources)

    def matches(self, kind: str, key: str, plugin: str | None, origin: str | None) -> bool:
        """Whether the record of ``kind`` (``tools``, ``prompts``, ``resources``) named ``key``,
        provided by ``plugin`` (``origin``: the upstream a proxy mounts it from), is selected."""
        if plugin is not None and plugin in self.plugins:
            return True
        if origin is not None and origin in self.upstreams:
            return True
        pattern = _patterns(getattr(self, kind))
        return pattern is not None and pattern.match(key) is not None


@functools.lru_cache(maxsize=256)
def _patterns(globs: tuple[str, ...]) -> re.Pattern[str] | None:
    """One compiled pattern for all of ``globs`` (None for none): a name is matched once."""
    return re.compile("|".join(f"(?:{fnmatch.translate(glob)})" for glob in globs)) if globs else None


@dataclass(frozen=True)
class EndpointSettings:
    """One ``[endpoints.NAME]`` section, checked."""

    name: str
    path: str
    server_name: str
    title: str | None = None
    version: str | None = None
    instructions: str | None = None
    scopes: frozenset[str] = frozenset()
    discovery: str = "list"
    search_limit: int = 10
    #: Longest ``search_tools`` query in bytes (UTF-8); a longer one is a tool error at once.
    search_max_query: int = 1024
    include: Selection | None = None
    exclude: Selection = field(default_factory=Selection)
    #: The section as written (to build the settings again, say with another ``server.path``).
    table: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def selects(self, kind: str, key: str, plugin: str | None, origin: str | None) -> bool:
        """Whether a record is in this endpoint's selection (before scopes and allow-lists)."""
        if self.include is not None and not self.include.matches(kind, key, plugin, origin):
            return False
        return not self.exclude.matches(kind, key, plugin, origin)


def _selection(data: Mapping[str, Any]) -> Selection:
    return Selection(plugins=frozenset(data.get("plugins", ())), upstreams=frozenset(data.get("upstreams", ())),
                     **{kind: tuple(data.get(kind, ())) for kind in _KINDS})


def endpoints_from_dict(data: Any, mcp_path: str, source: str) -> dict[str, EndpointSettings]:
    """The ``[endpoints]`` table as settings; :class:`ConfigError` naming the first problem.

    ``mcp_path`` is ``server.path``: an endpoint's default path is ``<server.path>/NAME``, and
    no endpoint may take that path (``/mcp`` stays the whole catalog).
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: [endpoints] must be a table of [endpoints.NAME] tables")
    for name in data:
        if not isinstance(name, str) or not ENDPOINT_NAME.match(name):
            raise ConfigError(f"{source}: [endpoints.{name}]: endpoint names are 1-64 characters of "
                              "A-Z a-z 0-9 _ . -, starting with a letter or digit")
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(ENDPOINTS_SCHEMA).iter_errors(data))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path)
        raise ConfigError(f"{source}: [endpoints{'.' + where if where else ''}] {error.message}")
    found: dict[str, EndpointSettings] = {}
    paths = {mcp_path.rstrip("/") or "/": "server.path"}
    for name, section in data.items():
        path = section.get("path") or f"{mcp_path.rstrip('/')}/{name}"
        path = path.rstrip("/") or "/"
        if path in paths:
            raise ConfigError(f"{source}: [endpoints.{name}] path {path!r} is already taken by {paths[path]}")
        paths[path] = f"[endpoints.{name}]"
        include = section.get("include")
        found[name] = EndpointSettings(
            name=name, path=path, server_name=section.get("name", name), title=section.get("title"),
            version=section.get("version"), instructions=section.get("instructions"),
            scopes=frozenset(section.get("scopes", ())), discovery=section.get("discovery", "list"),
            search_limit=int(section.get("search_limit", 10)),
            search_max_query=int(section.get("search_max_query", 1024)),
            include=None if include is None else _selection(include),
            exclude=_selection(section.get("exclude", {})), table=dict(section))
    return found
