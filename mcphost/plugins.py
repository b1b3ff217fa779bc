"""Build the plugin manager (entry points from installed packages, then the built-in plugins) and
collect what the plugins hand over: catalog records and middleware.

Entry points in the ``mcphost`` group are loaded one at a time. One that fails to import is
recorded as failed, with the entry point, distribution and version in the log, and the host
serves the rest; strict mode re-raises instead. Block and allow lists work on entry-point
names or distribution names. Built-in plugins register last and implement their fallbacks
``trylast``, so an installed plugin overrides them; the essential ones cannot be blocked.
"""

from __future__ import annotations

import asyncio
import contextvars
import difflib
import functools
import importlib
import importlib.metadata as md
import inspect
import logging
import os
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Literal

import pluggy
import pydantic

from mcphost import hookspecs
from mcphost.catalog import CATALOG_HOOKS, CATALOG_KINDS, Catalog, decorator_name, record_key
from mcphost.errors import HostSignal, PluginAborted, PluginError, PluginFailures  # noqa: F401 - PluginFailures: re-exported
from mcphost.fastmcp import is_server, logging_kept, plugin_for
from mcphost.records import Middleware, Provenance, stamped
from mcphost.settings import SettingsModel

log = logging.getLogger("mcphost.plugins")

ENTRY_POINT_GROUP = "mcphost"
#: (name, module) of the built-in plugins, registered after installed ones.
BUILTIN_PLUGINS: tuple[tuple[str, str], ...] = (("builtin.memory", "mcphost.builtin.memory"),)
ESSENTIAL = frozenset(name for name, _ in BUILTIN_PLUGINS)

ENV_BLOCK = "MCPHOST_DISABLE_PLUGINS"
ENV_ALLOW = "MCPHOST_PLUGINS"
ENV_STRICT = "MCPHOST_STRICT_PLUGINS"

Status = Literal["active", "disabled", "failed", "not configured"]


@dataclass
class PluginInfo:
    """What ``mcphost plugins`` reports about one plugin."""

    name: str
    distribution: str | None = None
    version: str | None = None
    status: Status = "active"
    error: str | None = None
    #: For a failed plugin: the stage that failed and the source line that raised, if known.
    where: str | None = None
    builtin: bool = False
    hooks: list[str] = field(default_factory=list)
    provides: dict[str, list[str]] = field(default_factory=dict)
    #: With status "not configured": the one setting that wakes the plugin (``mcphost_unconfigured``).
    wake: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "distribution": self.distribution, "version": self.version,
                "status": self.status, "error": self.error, "where": self.where, "builtin": self.builtin,
                "hooks": self.hooks, "provides": self.provides, "wake": self.wake}


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
    # An entry point may name a module, a plugin object, a class to instantiate, or the server
    # object of a FastMCP / MCPServer module (served as it registered its tools, resources, prompts).
    if is_server(obj):
        return plugin_for(obj)
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
                with logging_kept():  # a plugin's import must not reconfigure the host's logging
                    plugin = _instantiate(ep.load())
                pm.register(plugin, name=ep.name)
            except Exception as exc:
                if selection.strict:
                    raise
                info.status, info.error = "failed", f"{type(exc).__name__}: {exc}"
                info.where = _where(f"loading entry point {ep.value}", exc)
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
    check_pending(pm, infos, strict=selection.strict)
    return infos


def check_pending(pm: pluggy.PluginManager, infos: Mapping[str, PluginInfo], *, strict: bool = False) -> None:
    """Check the plugin contract at load time, as pytest does with pluggy's ``check_pending``.

    A plugin implementing a hook no spec declares (a misspelt ``mcphost_tool``) would otherwise
    be silently ignored: it is marked failed, naming the hook it probably meant, and unregistered
    so none of its hooks run (strict mode raises instead).
    """
    callers = [(name, caller) for name, caller in vars(pm.hook).items() if isinstance(caller, pluggy.HookCaller)]
    known = sorted(name for name, caller in callers if caller.has_spec())
    for caller_name, caller in callers:
        if caller.has_spec():
            continue
        for impl in caller.get_hookimpls():
            if impl.optionalhook:
                continue
            guess = difflib.get_close_matches(caller_name, known, n=1)
            hint = f"; did you mean {guess[0]!r}?" if guess else " (the hooks are listed in docs/hooks.md)"
            error = PluginError(f"plugin {impl.plugin_name!r}: hook {caller_name!r} is not a known hook{hint}")
            mark_failed(infos, impl.plugin_name, error, strict, what="loading")
            if pm.get_plugin(impl.plugin_name) is not None:
                pm.unregister(name=impl.plugin_name)


def set_aside_unconfigured(pm: pluggy.PluginManager, host: Any, infos: Mapping[str, PluginInfo],
                           *, strict: bool = False) -> None:
    """Unregister every plugin whose ``mcphost_unconfigured`` names a setting it still needs.

    Such a plugin is listed as "not configured" with that setting and none of its other hooks run.
    """
    for impl in impls(pm, "mcphost_unconfigured"):
        name = impl.plugin_name
        try:
            wake = call_impl(impl, host=host)
        except Exception as exc:
            mark_failed(infos, name, exc, strict, what="mcphost_unconfigured")
            pm.unregister(name=name)
            continue
        if wake:
            info = infos.get(name)
            if info is not None:
                info.status, info.wake = "not configured", str(wake)
            log.debug("plugin %s is installed but not configured (set %s)", name, wake)
            pm.unregister(name=name)


def mark_failed(infos: Mapping[str, PluginInfo], name: str, exc: Exception, strict: bool, *, what: str) -> None:
    """Record that plugin ``name`` failed at ``what``; in strict mode raise instead."""
    if strict:
        raise exc if isinstance(exc, PluginError) else PluginError(f"plugin {name!r}: {exc}") from exc
    message = str(exc) if isinstance(exc, PluginError) else f"{type(exc).__name__}: {exc}"
    log.error("plugin %s failed at %s and contributes nothing: %s", name, what, message)
    info = infos.get(name)
    if info is not None:
        info.status, info.error, info.where = "failed", message, _where(what, exc)


def _where(stage: str, exc: BaseException) -> str:
    """``stage``, and the innermost source line of ``exc``'s traceback when it has one."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []
    return f"{stage} ({frames[-1].filename}:{frames[-1].lineno})" if frames else stage


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


async def run_plugin(fn: Callable[..., Any], /, *args: Any, _pool: Executor | None = None, _thread: bool = False,
                     **kwargs: Any) -> Any:
    """The one way the host calls plugin code: hooks, handlers, middleware, startup and shutdown.

    Awaits what it returns while that is awaitable (a coroutine, a Deferred). ``_pool``: run a
    synchronous ``fn`` in that bounded thread pool (handlers, so one that blocks never freezes
    the event loop), with the caller's context variables; ``_thread``: run even an ``async def``
    one in a thread. Otherwise ``fn`` runs on the event loop.

    The one error rule: a ``SystemExit``, ``KeyboardInterrupt`` or other BaseException it
    raises, cancellation and the host's own signals aside, comes out as
    :class:`~mcphost.errors.PluginAborted`, an ordinary ``Exception``: it must never leave a
    request's task (or the startup), where it would stop the event loop and the process.
    """
    try:
        if _pool is not None and (_thread or not _is_async(fn)):
            call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
            value = await asyncio.get_running_loop().run_in_executor(_pool, call)
        elif _thread:
            value = await asyncio.to_thread(fn, *args, **kwargs)
        else:
            value = fn(*args, **kwargs)
        while inspect.isawaitable(value):
            value = await value
        return value
    except (Exception, asyncio.CancelledError, HostSignal):
        raise
    except BaseException as exc:
        raise PluginAborted(exc) from exc


@functools.lru_cache(maxsize=4096)
def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn)


# -- collecting what plugins hand over (at startup and on reload) ---------------------------------

def collect_catalog(pm: pluggy.PluginManager, host: Any, infos: Mapping[str, PluginInfo],
                    *, strict: bool = False) -> Catalog:
    """Call the catalog hooks and build a :class:`~mcphost.catalog.Catalog` from their records.

    Collection is per plugin: a plugin whose hook raises, or which hands over an invalid record
    or a name another plugin already provides, is marked failed and contributes nothing, while
    the others serve (strict mode raises instead).
    """
    catalog = Catalog()
    by_plugin: dict[str, list[tuple[str, Any]]] = {}
    order: list[str] = []
    failed: set[str] = set()
    for hook_name, record_type, kind in CATALOG_HOOKS:
        for impl in impls(pm, hook_name):
            name = impl.plugin_name
            if name not in by_plugin:
                by_plugin[name] = []
                order.append(name)
            try:
                records = call_impl(impl, host=host) or []
                for record in records:
                    if not isinstance(record, record_type):
                        raise PluginError(f"{hook_name} returned {type(record).__name__}, expected "
                                          f"{record_type.__name__} (use @mcphost.{decorator_name(record_type)})")
                    by_plugin[name].append((kind, record))
            except Exception as exc:
                mark_failed(infos, name, exc, strict, what="catalog collection")
                failed.add(name)
    for name in order:
        if name in failed:
            continue
        info = infos.get(name)
        provenance = Provenance(plugin=name, distribution=info.distribution if info else None,
                                version=info.version if info else None)
        try:
            catalog.admit(by_plugin[name], provenance)
        except Exception as exc:
            mark_failed(infos, name, exc, strict, what="catalog collection")
            continue
        if info is not None:
            kept = {kind: names for kind, names in info.provides.items() if kind not in CATALOG_KINDS}
            info.provides = {**kept, **{kind: [record_key(record) for k, record in by_plugin[name] if k == kind]
                                        for kind in sorted({k for k, _ in by_plugin[name]})}}
    return catalog


def collect_search_rankers(pm: pluggy.PluginManager, host: Any, infos: Mapping[str, PluginInfo],
                           *, strict: bool = False) -> list[Any]:
    """The search rankers of every plugin (``mcphost_search_rankers``), in plugin order."""
    collected: list[Any] = []
    for impl in impls(pm, "mcphost_search_rankers"):
        name = impl.plugin_name
        info = infos.get(name)
        if info is not None and info.status == "failed":
            continue
        try:
            rankers = list(call_impl(impl, host=host) or [])
            for ranker in rankers:
                if not (callable(getattr(ranker, "update", None)) and callable(getattr(ranker, "rank", None))):
                    raise PluginError(f"mcphost_search_rankers returned {type(ranker).__name__}, expected "
                                      "a mcphost.search.Ranker (update and rank methods)")
        except Exception as exc:
            mark_failed(infos, name, exc, strict, what="mcphost_search_rankers")
            continue
        collected.extend(rankers)
        if info is not None and rankers:
            info.provides["search_rankers"] = [type(ranker).__name__ for ranker in rankers]
    return collected


def collect_middleware(pm: pluggy.PluginManager, host: Any, infos: Mapping[str, PluginInfo],
                       *, strict: bool = False) -> list[Middleware]:
    """The middleware records of every plugin, stamped with provenance, outermost first."""
    collected: list[Middleware] = []
    for impl in impls(pm, "mcphost_middleware"):
        name = impl.plugin_name
        info = infos.get(name)
        if info is not None and info.status == "failed":
            continue
        try:
            records = list(call_impl(impl, host=host) or [])
            for record in records:
                if not isinstance(record, Middleware):
                    raise PluginError(f"mcphost_middleware returned {type(record).__name__}, expected "
                                      "Middleware (use @mcphost.middleware)")
        except Exception as exc:
            # Fail closed: a plugin whose middleware (policy, rate limits) is broken is not served at all.
            mark_failed(infos, name, exc, strict, what="mcphost_middleware")
            continue
        provenance = Provenance(name, info.distribution if info else None, info.version if info else None)
        collected.extend(stamped(record, provenance) for record in records)
        if info is not None and records:
            info.provides["middleware"] = [record.name for record in records]
    return collected


def declared_settings(pm: pluggy.PluginManager) -> tuple[dict[str, Mapping[str, Any] | SettingsModel], list[str]]:
    """What each plugin declares for its ``[plugins.<name>]`` section, by plugin name: its settings
    model (``mcphost_settings``) or else its JSON Schema (``mcphost_config_schema``); and a problem
    for each declaration hook that raised or returned something else."""
    declared: dict[str, Mapping[str, Any] | SettingsModel] = {}
    problems: list[str] = []
    for hook in ("mcphost_config_schema", "mcphost_settings"):  # a model wins over a schema
        for impl in impls(pm, hook):
            try:
                value = call_impl(impl)
            except Exception as exc:
                problems.append(f"plugin {impl.plugin_name!r}: {hook} raised {exc!r}")
                continue
            if hook == "mcphost_settings" and value is not None and not (
                    isinstance(value, type) and issubclass(value, pydantic.BaseModel)):
                problems.append(f"plugin {impl.plugin_name!r}: mcphost_settings returned {value!r}, "
                                "not a pydantic model class (mcphost.PluginSettings)")
                continue
            if value:
                declared[impl.plugin_name] = value
    return declared, problems
