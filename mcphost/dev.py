"""``mcphost dev FILE_OR_PACKAGE``: serve one module as it is, without packaging it, for development.

The module is imported from its file (or as a package or module name); the host's logging is put
back as it was afterwards (building a FastMCP server installs a Rich handler on the root logger).
A module that implements mcphost hooks is served as a plugin; one that builds a FastMCP-style
server (FastMCP, or the official SDK's ``MCPServer``) is served through :mod:`mcphost.fastmcp`, its
tools, resources and prompts as the module registered them. Only that module is served (plus the
built-ins): installed plugins are left out, so what you see is what the file does.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from mcphost.fastmcp import find_server, has_hooks, logging_kept, plugin_for

#: The Inspector's npm package (the MCP project's web UI for trying a server).
INSPECTOR = "@modelcontextprotocol/inspector"


class DevError(Exception):
    """The target cannot be served (not found, fails to import, or has nothing to serve)."""


@dataclass(frozen=True)
class Target:
    """What ``mcphost dev`` serves: a plugin name and object, and the paths to watch for reload."""

    name: str
    plugin: Any
    style: str  # "mcphost" or "FastMCP"
    watch: tuple[Path, ...]


def load_module(target: str) -> tuple[ModuleType, tuple[Path, ...]]:
    """Import ``target`` (a .py file, a package folder, or a module name); return it and its source paths."""
    path = Path(target)
    if path.suffix == ".py" or path.is_dir():
        if not path.exists():
            raise DevError(f"{target}: no such file or folder")
        path = path.resolve()
        if path.is_dir():
            if not (path / "__init__.py").is_file():
                raise DevError(f"{target}: a folder must be a package (with __init__.py)")
            parent, name = path.parent, path.name
        else:
            parent, name = path.parent, path.stem
        if str(parent) not in sys.path:
            sys.path.insert(0, str(parent))  # its own imports of sibling modules work as under `python FILE`
    else:
        name = target
    # No cached bytecode for the module under development: an edit within the same second that
    # keeps the file's size would otherwise be served from the stale .pyc after a reload.
    sys.dont_write_bytecode = True
    try:
        with logging_kept():
            module = importlib.import_module(name)
    except SyntaxError as exc:
        raise DevError(f"{target}: {exc.filename}:{exc.lineno}: {exc.msg}") from None
    except ImportError as exc:
        raise DevError(f"{target}: cannot import it: {exc}") from None
    file = getattr(module, "__file__", None)
    if not file:
        return module, ()
    source = Path(file).resolve()
    return module, ((source.parent,) if source.name == "__init__.py" else (source,))


def resolve(target: str) -> Target:
    """The plugin that serves ``target`` (see the module docstring)."""
    module, watch = load_module(target)
    name = module.__name__.rsplit(".", 1)[-1].replace("-", "_")
    if has_hooks(module):
        return Target(name, module, "mcphost", watch)
    server = find_server(module)
    if server is not None:
        return Target(name, plugin_for(server), "FastMCP", watch)
    raise DevError(f"{target}: nothing to serve: no mcphost hook (def mcphost_tools...) and no FastMCP or "
                   "MCPServer object at module level")


def inspector_hint(url: str) -> str:
    """How to attach the MCP Inspector to ``url``."""
    return (f"Inspector: npx {INSPECTOR}  (then connect to {url}, transport Streamable HTTP), or run "
            "mcphost dev with --inspector")


def inspector_command(npx: str) -> list[str]:
    return [npx, "-y", INSPECTOR]
