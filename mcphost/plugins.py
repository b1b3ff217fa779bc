"""Build the plugin manager: entry points from installed packages, then the built-in plugins.

Entry points in the ``mcphost`` group are loaded one at a time. One that fails to import is
recorded as failed, with the entry point, distribution and version in the log, and the host
serves the rest; strict mode re-raises instead. Block and allow lists work on entry-point
names or distribution names. Built-in plugins register last and implement their fallbacks
``trylast``, so an installed plugin overrides them; the essential ones cannot be blocked.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata as md
import inspect
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pluggy

from mcphost import hookspecs
from mcphost.errors import HostSignal, PluginAborted

log = logging.getLogger("mcphost.plugins")

ENTRY_POINT_GROUP = "mcphost"
#: (name, module) of the built-in plugins, registered after installed ones.
BUILTIN_PLUGINS: tuple[tuple[str, str], ...] = (("builtin.memory", "mcphost.builtin.memory"),)
ESSENTIAL = frozenset(name for name, _ in BUILTIN_PLUGINS)

ENV_BLOCK = "MCPHOST_DISABLE_PLUGINS"
ENV_ALLOW = "MCPHOST_PLUGINS"
ENV_STRICT = "MCPHOST_STRICT_PLUGINS"

Status = Literal["active", "disabled", "failed"]


@dataclass
class PluginInfo:
    """What ``mcphost plugins`` reports about one plugin."""

    name: str
    distribution: str | None = None
    version: str | None = None
    status: Status = "active"
    error: str | None = None
    builtin: bool = False
    hooks: list[str] = field(default_factory=list)
    provides: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "distribution": self.distribution, "version": self.version,
                "status": self.status, "error": self.error, "builtin": self.builtin,
                "hooks": self.hooks, "provides": self.provides}


@dataclass(frozen=True)
class PluginSelection:
    """Which plugins to load: block list, allow list (None = all) and strictness."""

    block: frozenset[str] = frozenset()
    allow: frozenset[str] | None = None
    strict: bool = False
    entry_points: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, block: Iterable[str] = (),
                 allow: Iterable[str] | None = None, config_allow: Iterable[str] | None = None,
                 strict: bool = False) -> PluginSelection:
        """Block lists add up; the allow list comes from ``allow`` (a flag), else the environment,
        else ``config_allow`` (the config file)."""
        env = os.environ if env is None else env
        blocked = set(_names(env.get(ENV_BLOCK, ""))) | set(block)
        if allow is not None:
            allowed: set[str] | None = set(allow)
        elif env.get(ENV_ALLOW):
            allowed = set(_names(env[ENV_ALLOW]))
        else:
            allowed = None if config_allow is None else set(config_allow)
        strict = strict or env.get(ENV_STRICT, "").lower() in ("1", "true", "yes")
        return cls(block=frozenset(blocked), allow=None if allowed is None else frozenset(allowed),
                   strict=strict)

    def admits(self, *names: str | None) -> bool:
        named = {n for n in names if n}
        if named & self.block:
            return False
        return self.allow is None or bool(named & self.allow)


def _names(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def make_plugin_manager() -> pluggy.PluginManager:
    """A fresh manager with the hook specs and nothing registered."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    return pm


def _instantiate(obj: Any) -> Any:
    # An entry point may name a module, a plugin object, or a class to instantiate.
    return obj() if inspect.isclass(obj) else obj


def load_plugins(pm: pluggy.PluginManager, selection: PluginSelection = PluginSelection(),
                 extra: Sequence[tuple[str, Any]] = ()) -> dict[str, PluginInfo]:
    """Register entry-point plugins, then ``extra`` (name, object) pairs, then built-ins.

    Returns a report per plugin, in registration order.
    """
    infos: dict[str, PluginInfo] = {}
    if selection.entry_points:
        for ep in sorted(md.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist = ep.dist.name if ep.dist is not None else None
            info = PluginInfo(name=ep.name, distribution=dist,
                              version=ep.dist.version if ep.dist is not None else None)
            if ep.name in infos or ep.name in ESSENTIAL:
                info.status, info.error = "failed", f"plugin name {ep.name!r} is already taken"
                log.error("plugin %s from %s: %s", ep.name, dist, info.error)
                infos.setdefault(f"{ep.name} ({dist})", info)
                continue
            infos[ep.name] = info
            if not selection.admits(ep.name, dist):
                info.status = "disabled"
                continue
            try:
                plugin = _instantiate(ep.load())
                pm.register(plugin, name=ep.name)
            except Exception as exc:
                if selection.strict:
                    raise
                info.status, info.error = "failed", f"{type(exc).__name__}: {exc}"
                log.error("plugin %s (entry point %s, %s %s) failed to load: %s",
                          ep.name, ep.value, dist, info.version, info.error)
    for name, obj in extra:
        info = PluginInfo(name=name, distribution=None, version=None)
        if name in infos and infos[name].status == "active":
            raise ValueError(f"plugin name {name!r} is already taken")
        infos[name] = info
        if not selection.admits(name):
            info.status = "disabled"
            continue
        pm.register(_instantiate(obj), name=name)
    for name, module in BUILTIN_PLUGINS:
        infos[name] = PluginInfo(name=name, distribution="mcphost", version=_own_version(), builtin=True)
        pm.register(importlib.import_module(module), name=name)
    for name, info in infos.items():
        plugin = pm.get_plugin(name)
        if plugin is not None:
            info.hooks = sorted(caller.name for caller in pm.get_hookcallers(plugin) or ())
    return infos


def mark_failed(infos: Mapping[str, PluginInfo], name: str, exc: Exception, strict: bool, *, what: str) -> None:
    """Record that plugin ``name`` failed at ``what``; in strict mode raise instead."""
    from mcphost.errors import PluginError

    if strict:
        raise exc if isinstance(exc, PluginError) else PluginError(f"plugin {name!r}: {exc}") from exc
    message = str(exc) if isinstance(exc, PluginError) else f"{type(exc).__name__}: {exc}"
    log.error("plugin %s failed at %s and contributes nothing: %s", name, what, message)
    info = infos.get(name)
    if info is not None:
        info.status, info.error = "failed", message


def _own_version() -> str | None:
    try:
        return md.version("mcphost")
    except md.PackageNotFoundError:
        return None


def impls(pm: pluggy.PluginManager, hook_name: str) -> list[pluggy.HookImpl]:
    """A hook's implementations in plugin registration order, ``tryfirst`` ones first, ``trylast`` last.

    Installed plugins register in entry-point name order, then built-ins; so for a duplicate
    tool name the plugin registered first keeps it, and the first plugin's middleware is the
    outermost. (pluggy's own call order is the reverse: last registered first.)
    """
    found = getattr(pm.hook, hook_name).get_hookimpls()
    return sorted(found, key=lambda impl: 0 if impl.tryfirst else 2 if impl.trylast else 1)


def call_impl(impl: pluggy.HookImpl, **kwargs: Any) -> Any:
    """Call one implementation with just the arguments it declares, as pluggy would."""
    return impl.function(*(kwargs[name] for name in impl.argnames))


async def run_plugin(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
    """Call plugin code (awaiting its result when it is awaitable) on the event loop.

    A ``SystemExit``, ``KeyboardInterrupt`` or other BaseException it raises, cancellation aside,
    comes out as :class:`~mcphost.errors.PluginAborted`, an ordinary ``Exception``: it must never
    leave a request's task, where it would stop the event loop and the process.
    """
    try:
        value = fn(*args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
        return value
    except (Exception, asyncio.CancelledError, HostSignal):
        raise
    except BaseException as exc:
        raise PluginAborted(exc) from exc


async def contained(awaitable: Any) -> Any:
    """Await plugin code, turning a BaseException it raises (cancellation aside) into PluginAborted."""
    try:
        return await awaitable
    except (Exception, asyncio.CancelledError, HostSignal):
        raise
    except BaseException as exc:
        raise PluginAborted(exc) from exc


class PluginFailures:
    """Failures of plugin code on the request path, logged in full once per plugin and place.

    A broken telemetry or lifecycle plugin fails the same way on every request; one traceback
    tells the operator, a traceback per request would drown the log. Later failures are counted
    (``counts``) and logged at debug level.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self.log = logger
        self.counts: dict[tuple[str, str], int] = {}

    def report(self, plugin: str, where: str, exc: BaseException) -> None:
        key = (plugin, where)
        count = self.counts.get(key, 0) + 1
        self.counts[key] = count
        if count == 1:
            self.log.error("plugin %s: %s raised and was skipped (shown once; repeats are logged at debug "
                           "level)", plugin, where, exc_info=exc)
        else:
            self.log.debug("plugin %s: %s raised again (%d times): %s: %s", plugin, where, count,
                           type(exc).__name__, exc)
