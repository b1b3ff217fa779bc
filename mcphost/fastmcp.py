"""Serve a module written for FastMCP or the official SDK's ``MCPServer`` as it is.

Such a module builds its own server object and registers functions on it with ``@mcp.tool()``,
``@mcp.resource(uri)`` and ``@mcp.prompt()``; the decorators return the functions unchanged, so
only the server object knows the names, URIs and descriptions. :func:`find_server` finds that
object in a module and :func:`plugin_for` turns what it registered into an mcphost plugin: every
tool, resource, resource template and prompt becomes the record mcphost builds from the same
function (its signature and docstring, a ``Context`` parameter included), with the name, URI,
title, description and MIME type the module gave it. The URI is written once, in the module.

It reads the server's registries: ``_tool_manager``, ``_resource_manager`` and ``_prompt_manager``,
which FastMCP 2.x and the SDK's ``MCPServer`` keep, or the components of the ``_local_provider`` the
``fastmcp`` package keeps from 3.x on (4.x included); nothing is written to them, and the server
object is never run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import mcphost
from mcphost.hookspecs import hookimpl
from mcphost.records import Prompt, Resource, ResourceTemplate, Tool


def is_server(obj: Any) -> bool:
    """Whether ``obj`` looks like a FastMCP / ``MCPServer`` server (its three registries, or the
    ``fastmcp`` package's local provider of components)."""
    if isinstance(obj, type):
        return False
    if all(hasattr(obj, name) for name in ("_tool_manager", "_resource_manager", "_prompt_manager")):
        return True
    return isinstance(getattr(getattr(obj, "_local_provider", None), "_components", None), dict)


def _components(server: Any, kind: str) -> list[Any]:
    """The ``fastmcp`` 3.x-4.x components of ``kind`` (``tool``, ``resource``, ``template``, ``prompt``):
    its local provider keys them ``kind:name@version``."""
    found = getattr(getattr(server, "_local_provider", None), "_components", None)
    if not isinstance(found, dict):
        return []
    return [item for key, item in found.items() if isinstance(key, str) and key.split(":", 1)[0] == kind]


def find_server(module: ModuleType) -> Any | None:
    """The first FastMCP-style server object among ``module``'s globals, or None."""
    for value in vars(module).values():
        if is_server(value):
            return value
    return None


@contextmanager
def logging_kept() -> Iterator[None]:
    """Restore the root logger's handlers and level after the block.

    Building an ``MCPServer`` (at import, in most modules) installs a Rich handler on the root
    logger; the host's own log format must not change because a module was imported.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)


def _registry(manager: Any, *names: str) -> list[Any]:
    for name in names:
        found = getattr(manager, name, None)
        if isinstance(found, dict):
            return list(found.values())
    return []


def _common(item: Any) -> dict[str, Any]:
    """The fields every record takes, as the module gave them (unset ones left to mcphost)."""
    out: dict[str, Any] = {}
    for field in ("name", "title", "description"):
        value = getattr(item, field, None)
        if isinstance(value, str) and value:
            out[field] = value
    return out


def _annotations(item: Any) -> dict[str, Any] | None:
    annotations = getattr(item, "annotations", None)
    if annotations is None:
        return None
    if hasattr(annotations, "model_dump"):
        return {k: v for k, v in annotations.model_dump(by_alias=True, exclude_none=True).items()}
    return dict(annotations) if isinstance(annotations, dict) else None


def tools(server: Any) -> list[Tool]:
    records = []
    for item in _registry(getattr(server, "_tool_manager", None), "_tools") + _components(server, "tool"):
        fn = getattr(item, "fn", None)
        if callable(fn):
            records.append(mcphost.tool(**_common(item), annotations=_annotations(item))(fn))
    return records


def resources(server: Any) -> list[Resource]:
    records = []
    for item in _registry(getattr(server, "_resource_manager", None), "_resources") + _components(server, "resource"):
        fn = getattr(item, "fn", None)
        if callable(fn):
            records.append(mcphost.resource(str(item.uri), **_common(item),
                                            mime_type=getattr(item, "mime_type", None))(fn))
    return records


def resource_templates(server: Any) -> list[ResourceTemplate]:
    records = []
    for item in _registry(getattr(server, "_resource_manager", None), "_templates") + _components(server, "template"):
        fn = getattr(item, "fn", None)
        if callable(fn):
            records.append(mcphost.resource_template(str(item.uri_template), **_common(item),
                                                     mime_type=getattr(item, "mime_type", None))(fn))
    return records


def prompts(server: Any) -> list[Prompt]:
    records = []
    for item in _registry(getattr(server, "_prompt_manager", None), "_prompts") + _components(server, "prompt"):
        fn = getattr(item, "fn", None)
        if callable(fn):
            records.append(mcphost.prompt(**_common(item))(fn))
    return records


class ServerPlugin:
    """An mcphost plugin serving what a FastMCP-style server registered (collected at each reload)."""

    def __init__(self, server: Any) -> None:
        self.server = server

    @hookimpl
    def mcphost_tools(self) -> list[Tool]:
        return tools(self.server)

    @hookimpl
    def mcphost_resources(self) -> list[Resource]:
        return resources(self.server)

    @hookimpl
    def mcphost_resource_templates(self) -> list[ResourceTemplate]:
        return resource_templates(self.server)

    @hookimpl
    def mcphost_prompts(self) -> list[Prompt]:
        return prompts(self.server)


def plugin_for(server: Any) -> ServerPlugin:
    """The plugin serving ``server``'s tools, resources, templates and prompts."""
    return ServerPlugin(server)


def has_hooks(module: ModuleType) -> bool:
    """Whether ``module`` implements mcphost hooks itself (an mcphost-style plugin module)."""
    return any(name.startswith("mcphost_") and callable(value) and hasattr(value, "mcphost_impl")
               for name, value in vars(module).items())


__all__ = ["ServerPlugin", "find_server", "has_hooks", "is_server", "logging_kept", "plugin_for"]
