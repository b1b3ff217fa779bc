"""The Host: owns configuration, the plugin manager, the catalog, the kernel and the sessions.

Build one, ``await host.start()``, hand it to a transport, ``await host.stop()``. Hooks are
called here, at startup, to collect records and callables; the lifecycle hooks that fire
per connection are collected once and then called directly, without pluggy in the way.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import logging
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

from mcphost.auth import ResourceServer
from mcphost.catalog import Catalog, ProviderChange, record_of
from mcphost.config import Config, ConfigErrors, bind_plugin_sections
from mcphost.deadline import HookCancelled, HookOverran, RunningHooks, bounded
from mcphost.errors import PluginAborted, PluginError, PluginFailures, Refused
from mcphost.pins import FilePinStore, PinStore, default_path
from mcphost.plugins import (
    PluginInfo,
    PluginSelection,
    call_impl,
    collect_catalog,
    collect_middleware,
    collect_search_rankers,
    declared_settings,
    impls,
    load_plugins,
    make_plugin_manager,
    run_plugin,
    set_aside_unconfigured,
)
from mcphost.protocol.versions import at_least
from mcphost.records import Provenance, Unready
from mcphost.sessions.backend import Backend
from mcphost.sessions.cluster import Cluster
from mcphost.sessions.manager import SessionManager
from mcphost.sessions.session import Connection, Principal, Session
from mcphost.settings import bind_settings, settings_schema

if TYPE_CHECKING:  # built by prepare(): commands that only list (mcphost plugins, tools) never import it
    from mcphost.context import Context  # imported at run time where it is built
    from mcphost.kernel import Kernel
    from mcphost.request import RequestInfo

log = logging.getLogger("mcphost.host")

S = TypeVar("S")

#: Seconds a per-request hook may hold the event loop before it is named in a warning (once).
SLOW_HOOK_SECONDS = 0.1
#: Seconds a readiness probe waits for the backend's ``health()`` before calling it unhealthy.
HEALTH_TIMEOUT = 2.0


class Host:
    """One MCP host: plugins, catalog, kernel and live sessions of this process."""

    def __init__(self, config: Config | None = None, *, plugins: Sequence[tuple[str, Any]] = (),
                 selection: PluginSelection | None = None, entry_points: bool = True,
                 loaded: tuple[pluggy.PluginManager, dict[str, PluginInfo]] | None = None) -> None:
        """``loaded``: a plugin manager already loaded for ``selection`` (with its report), used
        instead of loading the plugins again (the command line loads them once, before parsing)."""
        self.config = config or Config()
        if selection is None:
            selection = PluginSelection.from_env(block=self.config.block, config_allow=self.config.allow,
                                                 strict=self.config.strict)
        if not entry_points:
            selection = PluginSelection(block=selection.block, allow=selection.allow, strict=selection.strict,
                                        entry_points=False)
        self.selection = selection
        if loaded is not None and not plugins:
            self.pm: pluggy.PluginManager = loaded[0]
            self.plugin_infos: dict[str, PluginInfo] = loaded[1]
        else:
            self.pm = make_plugin_manager()
            self.plugin_infos = load_plugins(self.pm, selection, plugins)
        self.catalog = Catalog()
        #: One catalog change at a time (a reload, or one provider's records replaced).
        self._replacing = asyncio.Lock()
        self.kernel: Kernel | None = None
        #: The state backend (a plugin's, else the built-in memory one); set by prepare().
        self.backend: Backend = Backend()
        #: The one owner of sessions (registry, caps, lookup, reaping, ending); its backend is set by prepare().
        #: The lifecycle hooks as one object, handed to the manager (their only caller).
        self.lifecycle = PluginLifecycle(self)
        self.manager = SessionManager(self.config.server, self.backend, self.lifecycle)
        self._extensions: tuple[Any, dict[str, Any]] | None = None
        #: Cooperation with other processes on a shared backend (None on the in-memory one).
        self.cluster: Cluster | None = None
        self._authenticate: list[pluggy.HookImpl] = []
        self._exception: list[pluggy.HookImpl] = []
        self._readiness: list[pluggy.HookImpl] = []
        #: Observer hooks (disconnect, terminate, exception) that raised, logged in full once per plugin.
        self.failures = PluginFailures(log)
        self._slow_hooks: set[tuple[str, str]] = set()
        self._prepared = False
        self._collected = False
        #: What collect() gathered for the kernel prepare() builds.
        self._middleware: list[Any] = []
        self._rankers: list[Any] = []
        self._started = False
        self._backend_was_healthy = True
        #: Auth plugin bugs already logged (each is logged once, with the plugin's name).
        self._auth_bugs_logged: set[str] = set()
        self._server_info: dict[str, dict[str, Any]] = {}
        #: Canonical URL, protected resource metadata and challenge composition (docs/auth.md).
        self.resource_server = ResourceServer(self, self.pm, lambda: self.has_auth)
        #: Each plugin's checked settings instance, by its model class (bound by prepare(), else on first use).
        self._settings: dict[type, Any] = {}
        self._pins: PinStore | None = None

    @property
    def sessions(self) -> dict[str, Session]:
        """Sessions held in this process, by id (the SessionManager's registry)."""
        return self.manager.sessions

    # -- configuration and plugins ----------------------------------------------------------

    def plugin_config(self, name: str) -> Mapping[str, Any]:
        """The ``[plugins.<name>]`` section of the configuration (empty when absent)."""
        return self.config.plugin(name)

    def config_schemas(self) -> dict[str, dict[str, Any]]:
        """The JSON Schema of each plugin's section, by plugin name (derived from its settings model)."""
        declared, problems = declared_settings(self.pm)
        if problems:
            raise ConfigErrors(problems)
        return {name: settings_schema(value) if isinstance(value, type) else dict(value)
                for name, value in declared.items()}

    def settings(self, model: type[S]) -> S:
        """The checked instance of ``model``, the settings model a plugin declares (``mcphost_settings``),
        for that plugin's ``[plugins.<name>]`` section: defaults filled in, ``${VAR}`` replaced.

        Bound once when the host prepares (every section at once); asked earlier, the section is
        checked then. ConfigErrors when it is wrong; PluginError when no plugin declares ``model``.
        """
        found = self._settings.get(model)
        if found is None:
            declared, _ = declared_settings(self.pm)
            names = [name for name, value in declared.items() if value is model]
            if not names:
                raise PluginError(f"no plugin declares the settings model {model.__name__} "
                                  "(return it from the mcphost_settings hook)")
            source = str(self.config.path) if self.config.path else "configuration"
            found, problems = bind_settings(model, self.config.plugin(names[0]), names[0], source)  # type: ignore[arg-type]  # model is a pydantic model class: declared_settings checked it
            if problems:
                raise ConfigErrors(problems)
            self._settings[model] = found
        assert isinstance(found, model)
        return found

    def prepare(self) -> None:
        """Validate plugin config, collect the catalog and middleware, build the kernel (idempotent).

        A plugin that fails here is unregistered, so none of its other hooks run either.
        """
        if self._prepared:
            return
        self.collect()
        from mcphost.kernel import Kernel
        from mcphost.kernel.services import Services

        self.kernel = Kernel(Services(settings=self.config.server, catalog=lambda: self.catalog, backend=self.backend,
                                      sessions=self.manager, server_info=self.server_info,
                                      report_exception=self.report_exception, extensions=self.extensions,
                                      host=ToolHost(self), endpoints=self.config.endpoints), self._middleware)
        self.kernel.views.rankers.extend(self._rankers)
        self._prepared = True

    def collect(self) -> None:
        """What :meth:`prepare` does but build the kernel (idempotent): plugin config validated, the
        catalog, middleware, rankers and hooks collected, the backend chosen. Enough for commands
        that only list (``mcphost plugins``, ``mcphost tools``): the kernel is not even imported."""
        if self._collected:
            return
        # With discovery on, a [plugins.<name>] no installed plugin owns is a mistake (a typo, mostly).
        declared, problems = declared_settings(self.pm)
        bound, found = bind_plugin_sections(self.config, declared,
                                            [n for n, i in self.plugin_infos.items() if not i.builtin]
                                            if self.selection.entry_points else None)
        if problems or found:
            raise ConfigErrors(problems + found)
        self._settings = {type(instance): instance for instance in bound.values()}
        strict = self.selection.strict
        set_aside_unconfigured(self.pm, self, self.plugin_infos, strict=strict)
        self.catalog = collect_catalog(self.pm, self, self.plugin_infos, strict=strict)
        self._middleware = collect_middleware(self.pm, self, self.plugin_infos, strict=strict)
        self._rankers = collect_search_rankers(self.pm, self, self.plugin_infos, strict=strict)
        for name, info in self.plugin_infos.items():
            if info.status == "failed" and self.pm.get_plugin(name) is not None:
                self.pm.unregister(name=name)
        self._authenticate = impls(self.pm, "mcphost_authenticate")
        self.lifecycle.collect(self.pm)
        self._exception = impls(self.pm, "mcphost_exception")
        self._readiness = impls(self.pm, "mcphost_readiness")
        backend = self.pm.hook.mcphost_backend(host=self)
        if not isinstance(backend, Backend):
            raise PluginError(f"mcphost_backend returned {type(backend).__name__}, not a subclass of "
                              "mcphost.sessions.backend.Backend")
        self.backend = backend
        self.manager.use(self.backend)
        self._collected = True

    async def start(self, *, freeze_gc: bool = False) -> None:
        """Prepare and run the startup hooks.

        ``freeze_gc`` (set by ``mcphost serve``) moves everything allocated at startup out of the
        garbage collector's view: it lives as long as the process, and rescanning it makes pauses.
        """
        if self._started:
            return
        self.prepare()
        await run_plugin(self.backend.start)
        if self.backend.shared:
            self.cluster = Cluster(self.backend, self.manager.get)
            await self.cluster.start()
            assert self.kernel is not None
            self.kernel.join(self.cluster)
            self.manager.join(self.cluster)
            if not self.config.server.state_keys:
                # One requestState key for every process, agreed through the backend: a retry that
                # lands on another process must open what this one sealed (docs/scaling.md).
                try:
                    await self.cluster.share_state_keys(self.kernel.sealer)
                except BaseException:
                    await self.cluster.stop()
                    await run_plugin(self.backend.close)
                    raise
            # A process serving a catalog the cluster has not served before (a plugin installed or
            # upgraded, then a rolling restart) tells connected clients which lists changed.
            await self.cluster.announce_catalog(catalog_digests(self.catalog), self.kernel.notify_list_changed)
        await self.resource_server.collect()
        assert self.kernel is not None
        await self.kernel.views.update_index()  # off the event loop; a search endpoint finds tools at once
        for impl in impls(self.pm, "mcphost_startup"):
            await run_plugin(call_impl, impl, host=self)
        self._started = True
        if freeze_gc:
            gc.collect()
            gc.freeze()

    async def stop(self) -> None:
        """Terminate every session (reason ``shutdown``) and run the shutdown hooks."""
        if not self._started:
            return
        if self.kernel is not None:
            self.kernel.closing.set()  # open listen streams end with their final result
            await self.kernel.tasks.stop()  # tasks nobody will finish are marked failed
        await self.manager.stop()  # each session held here ends once (a shared store keeps them)
        seconds = self.config.server.hook_timeout
        for impl in impls(self.pm, "mcphost_shutdown"):
            try:  # a hook that hangs must not keep the process from ending
                await bounded(run_plugin(call_impl, impl, host=self), seconds, impl.plugin_name, "mcphost_shutdown")
            except (HookOverran, HookCancelled) as exc:
                log.warning("%s; abandoned (server.hook_timeout = %g s)", exc, seconds)
            except Exception:
                log.exception("plugin %s: mcphost_shutdown raised", impl.plugin_name)
        if self.cluster is not None:
            await self.cluster.stop()
        await run_plugin(self.backend.close)
        if self.kernel is not None:
            self.kernel.close()
        self._started = False

    async def reload(self) -> None:
        """Collect the catalog again and tell sessions which lists changed.

        Middleware, lifecycle hooks and the backend stay as they were collected at startup.
        """
        async with self._replacing:
            old = self.catalog
            self.catalog = collect_catalog(self.pm, self, self.plugin_infos, strict=self.selection.strict)
            self.catalog.expect(old.expected)
            for name, entry in self.catalog.tools.items():  # a tool that stays keeps its counters
                if name in old.tools:
                    entry.stats.carry(old.tools[name].stats)
            assert self.kernel is not None
            self.kernel.catalog_changed()
            for kind, before, after in (("tools", old.tools, self.catalog.tools),
                                        ("prompts", old.prompts, self.catalog.prompts),
                                        ("resources", {**old.resources, **old.templates},
                                         {**self.catalog.resources, **self.catalog.templates})):
                if set(before) != set(after) or any(record_of(before[k]) != record_of(after[k])
                                                    for k in after if k in before):
                    await self.kernel.notify_list_changed(kind)

    def pin_store(self) -> PinStore:
        """Where pinned definitions live (:mod:`mcphost.pins`): the backend's (shared by a cluster), else
        a file under the platform's state directory, one per configuration file."""
        if self._pins is None:
            self._pins = self.backend.pins() or FilePinStore(default_path(self.config.path))
        return self._pins

    def expect_provider(self, kinds: Iterable[str]) -> None:
        """Declare that a mounting provider (the proxy, before its upstreams list) serves ``kinds``
        (``tools``, ``resources``, ``prompts``): those capabilities are declared at initialize and
        their lists answer (empty at first) from the start; :meth:`replace_provider` fills them."""
        self.catalog.expect(kinds)

    async def replace_provider(self, provenance: Provenance, records: list[tuple[str, Any]]) -> ProviderChange:
        """Replace the records of one mounted provider (``provenance.origin``: an upstream a proxy
        mounts) and tell sessions which lists changed; the rest of the catalog is not collected again.

        The new catalog is derived in a worker thread (its cost is that provider's records) and
        swapped in at once; replacements are applied one at a time, in the order asked.
        """
        async with self._replacing:
            info = self.plugin_infos.get(provenance.plugin)
            if info is not None:
                provenance = Provenance(plugin=provenance.plugin, distribution=info.distribution,
                                        version=info.version, origin=provenance.origin)
            old = self.catalog
            catalog, change = await asyncio.to_thread(old.with_provider, provenance, records)
            self.catalog = catalog
            assert self.kernel is not None
            self.kernel.catalog_changed()
            for kind in sorted(change.lists):
                await self.kernel.notify_list_changed(kind)
            return change

    def extensions(self) -> dict[str, Any]:
        """Protocol extensions this host serves (2026-07-28 ``capabilities.extensions``)."""
        tools = self.catalog.tools
        if self._extensions is None or self._extensions[0] is not tools:  # computed once per catalog
            from mcphost.kernel.tasks import EXTENSION as TASKS_EXTENSION

            tasks = any(entry.record.task != "forbidden" for entry in tools.values())
            self._extensions = (tools, {TASKS_EXTENSION: {}} if tasks else {})
        return self._extensions[1]

    @property
    def started(self) -> bool:
        """Whether :meth:`start` has run and :meth:`stop` has not."""
        return self._started

    async def backend_healthy(self) -> bool:
        """Ask the backend's ``health()`` (the base class answers healthy).

        An exception, a false answer or no answer within :data:`HEALTH_TIMEOUT` is unhealthy.
        Changes are logged (not every probe: load balancers ask every few seconds).
        """
        why = "health() answered False"
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT):
                healthy = bool(await self.backend.health())
        except TimeoutError:
            healthy, why = False, f"no answer within {HEALTH_TIMEOUT}s"
        except Exception as exc:
            healthy, why = False, repr(exc)
        if healthy != self._backend_was_healthy:
            self._backend_was_healthy = healthy
            name = self.backend.name
            if healthy:
                log.warning("backend %s is healthy again", name)
            else:
                log.warning("backend %s is unhealthy: %s", name, why)
        return healthy

    def unready(self) -> list[tuple[str, Unready]]:
        """What plugins serve through that cannot serve now (``mcphost_readiness``), with each one's
        plugin name: asked by ``/readyz``. A hook that raises or answers something else counts as
        its plugin degraded (logged in full once)."""
        found: list[tuple[str, Unready]] = []
        for impl in self._readiness:
            name = impl.plugin_name
            try:
                items = list(call_impl(impl, host=self) or ())
                if not all(isinstance(item, Unready) for item in items):
                    raise PluginError("mcphost_readiness must return mcphost.Unready items")
            except Exception as exc:
                self.failures.report(name, "mcphost_readiness", exc)
                found.append((name, Unready(name, f"mcphost_readiness raised {type(exc).__name__}")))
                continue
            found += [(name, item) for item in items]
        return found

    # -- identity -------------------------------------------------------------------------

    def server_info(self, version: str) -> dict[str, Any]:
        """The serverInfo for ``version`` (built once per revision; callers must not mutate it)."""
        info = self._server_info.get(version)
        if info is None:
            server = self.config.server
            info = {"name": server.name, "version": server.version or _own_version()}
            if server.title and at_least(version, "2025-06-18"):
                info["title"] = server.title
            self._server_info[version] = info
        return info

    # -- authentication ---------------------------------------------------------------------

    @property
    def has_auth(self) -> bool:
        """Whether any plugin authenticates requests."""
        return bool(self._authenticate)

    @property
    def auth_required(self) -> bool:
        """Whether an HTTP request no plugin authenticates is refused (401) rather than served anonymously."""
        return bool(self._authenticate) and not self.config.server.allow_anonymous

    async def authenticate(self, connection: Connection) -> Principal | None:
        """Run ``mcphost_authenticate``: the first principal wins; Refused propagates.

        A hook that breaks (an identity provider that cannot be reached, say), or that runs past
        ``server.connect_timeout``, refuses with 503 and no challenge, so clients do not start
        re-authenticating in a storm.
        """
        seconds = self.config.server.connect_timeout
        for impl in self._authenticate:
            try:
                principal = await bounded(self._call_hook(impl, request=connection), seconds, impl.plugin_name,
                                          "mcphost_authenticate")
            except Refused:
                raise
            except (HookOverran, HookCancelled) as exc:  # an identity provider that hangs: refused in time
                log.warning("%s; the request is refused (server.connect_timeout = %g s)", exc, seconds)
                raise Refused(f"Authentication is unavailable: it could not finish in time "
                              f"(server.connect_timeout = {seconds:g} s); retry later", status=503,
                              headers={"retry-after": str(max(1, math.ceil(seconds)))}) from None
            except PluginAborted as exc:  # SystemExit and the like: the plugin's bug, not an outage
                self._auth_bug(impl.plugin_name, f"raised {exc}", exc.cause)
                raise Refused("Internal error", status=500) from None
            except Exception:
                log.exception("plugin %s: mcphost_authenticate raised", impl.plugin_name)
                raise Refused("Authentication is unavailable; retry later", status=503,
                              headers={"retry-after": "5"}) from None
            if principal is not None:
                if not isinstance(principal, Principal):
                    self._auth_bug(impl.plugin_name, f"returned {type(principal).__name__}, not a Principal or None "
                                                     "(a bug in the plugin); answering 500")
                    raise Refused("Internal error", status=500)
                return principal
        return None

    def _auth_bug(self, plugin: str, what: str, cause: BaseException | None = None) -> None:
        """An auth plugin's bug: logged as an error once per plugin and kind (each request gets 500)."""
        key = f"{plugin}: {what}"
        if key in self._auth_bugs_logged:
            log.debug("plugin %s: mcphost_authenticate %s (again)", plugin, what)
            return
        self._auth_bugs_logged.add(key)
        log.error("plugin %s: mcphost_authenticate %s", plugin, what, exc_info=cause)

    async def _call_hook(self, impl: pluggy.HookImpl, **kwargs: Any) -> Any:
        """Call a per-request hook on the event loop; one that holds the loop for long is named once.

        Hooks run on the loop whether ``def`` or ``async def`` (docs/plugins.md): a synchronous one
        that does I/O stalls every client meanwhile, so the time its synchronous part took is
        measured and, past :data:`SLOW_HOOK_SECONDS`, logged as a warning once per plugin and hook.
        """
        held = [0.0]

        def timed() -> Any:
            try:
                return call_impl(impl, **kwargs)
            finally:
                held[0] = time.perf_counter() - started

        started = time.perf_counter()
        try:
            return await run_plugin(timed)
        finally:
            if held[0] > SLOW_HOOK_SECONDS and (impl.plugin_name, impl.function.__name__) not in self._slow_hooks:
                self._slow_hooks.add((impl.plugin_name, impl.function.__name__))
                log.warning("plugin %s: %s held the event loop for %.0f ms, stalling every client meanwhile; "
                            "make it async def and await its I/O (shown once)", impl.plugin_name,
                            impl.function.__name__, held[0] * 1000)

    async def report_exception(self, request: Any, exception: BaseException) -> None:
        """Run ``mcphost_exception`` for an unexpected exception met while serving ``request``.

        Called from the request's own task (its context variables, such as the current trace
        span, are in effect); observers that raise are logged once and ignored.
        """
        seconds = self.config.server.hook_timeout
        for impl in self._exception:
            try:
                await bounded(self._call_hook(impl, request=request, exception=exception), seconds,
                              impl.plugin_name, "mcphost_exception", self.lifecycle.running)
            except HookOverran:
                log.warning("plugin %s: mcphost_exception did not finish within server.hook_timeout = %g s; "
                            "abandoned", impl.plugin_name, seconds)
            except HookCancelled:
                log.error("plugin %s: mcphost_exception raised CancelledError; ignored", impl.plugin_name)
            except Exception as exc:
                self.failures.report(impl.plugin_name, "mcphost_exception", exc)

    async def notify_resource_updated(self, uri: str) -> None:
        """Send ``notifications/resources/updated`` to every session subscribed to ``uri``."""
        assert self.kernel is not None
        await self.kernel.notify_resource_updated(uri)

    async def notify_list_changed(self, kind: str) -> None:
        """Send ``notifications/<kind>/list_changed`` (tools, prompts or resources) to every session."""
        assert self.kernel is not None
        await self.kernel.notify_list_changed(kind)

    def endpoint_stats(self) -> dict[str, dict[str, Any]]:
        """Per ``[endpoints.NAME]``: its path, discovery mode, tools in its view, counters (calls,
        errors, searches) and the sessions held here, read-only, for the console and monitoring."""
        if self.kernel is None:
            return {}
        stats = self.kernel.views.stats()
        for session in self.manager.sessions.values():
            if session.endpoint in stats:
                stats[session.endpoint]["sessions"] += 1
        return stats

    def respond(self, session_id: str, request_id: Any, value: Any = None,
                error: BaseException | None = None) -> bool:
        """Complete a request whose handler returned a Deferred; False when none waits."""
        assert self.kernel is not None
        return self.kernel.respond(session_id, request_id, value, error)

    def context_for(self, request: RequestInfo) -> Context:
        """A :class:`~mcphost.Context` for a request a middleware handles, as a tool of that request
        would get: questions asked through it go to the request's client (its declared capabilities
        apply), logs and progress to its stream."""
        from mcphost.context import Context
        from mcphost.kernel.scope import RequestScope

        assert self.kernel is not None
        return Context(RequestScope(self.kernel, request.session, request.id, request.method, None,
                                    request.principal))


class ToolHost:
    """``ctx.host``: the narrow, typed façade of the host a tool sees (see
    :class:`mcphost.context.HostView`). It holds the few operations, not the host."""

    __slots__ = ("_config", "_notify_list", "_notify_resource", "_reload", "_respond", "_settings")

    def __init__(self, host: Host) -> None:
        self._settings = host.settings
        self._config = host.plugin_config
        self._notify_resource = host.notify_resource_updated
        self._notify_list = host.notify_list_changed
        self._respond = host.respond
        self._reload = host.reload

    def settings(self, model: type[S]) -> S:
        return self._settings(model)

    def plugin_config(self, name: str) -> Mapping[str, Any]:
        return self._config(name)

    async def notify_resource_updated(self, uri: str) -> None:
        await self._notify_resource(uri)

    async def notify_list_changed(self, kind: str) -> None:
        await self._notify_list(kind)

    def respond(self, session_id: str, request_id: Any, value: Any = None,
                error: BaseException | None = None) -> bool:
        return self._respond(session_id, request_id, value, error)

    async def reload(self) -> None:
        await self._reload()


class PluginLifecycle:
    """The plugins' ``mcphost_connect`` / ``mcphost_disconnect`` / ``mcphost_terminate``, collected once
    at startup and called directly (no pluggy per request); the SessionManager is their only caller.

    Each call has a deadline (:func:`mcphost.deadline.bounded`): ``server.connect_timeout`` for a connect
    hook, whose overrun (or a CancelledError it raises) refuses the client; ``server.hook_timeout``
    for the others, whose overrun is logged with the plugin's name and otherwise ignored.
    """

    __slots__ = ("_connect", "_disconnect", "_host", "_terminate", "running")

    def __init__(self, host: Host) -> None:
        self._host = host
        self._connect: list[pluggy.HookImpl] = []
        self._disconnect: list[pluggy.HookImpl] = []
        self._terminate: list[pluggy.HookImpl] = []
        #: The hook calls running now (what a stopping stdio process names when it abandons them).
        self.running = RunningHooks()

    def collect(self, pm: pluggy.PluginManager) -> None:
        self._connect = impls(pm, "mcphost_connect")
        self._disconnect = impls(pm, "mcphost_disconnect")
        self._terminate = impls(pm, "mcphost_terminate")

    @property
    def active(self) -> bool:
        return bool(self._connect or self._disconnect or self._terminate)

    async def connect(self, session: Session, connection: Connection) -> None:
        seconds = self._host.config.server.connect_timeout
        for impl in self._connect:
            try:
                await bounded(self._host._call_hook(impl, session=session, request=connection), seconds,
                              impl.plugin_name, "mcphost_connect", self.running)
            except Refused:
                raise
            except HookOverran:
                log.warning("plugin %s: mcphost_connect did not finish within server.connect_timeout = %g s; "
                            "the client is refused", impl.plugin_name, seconds)
                raise Refused(f"Service unavailable: the connection could not be checked in time "
                              f"(server.connect_timeout = {seconds:g} s); retry later", status=503,
                              headers={"retry-after": str(max(1, math.ceil(seconds)))}) from None
            except HookCancelled:
                log.error("plugin %s: mcphost_connect raised CancelledError; the client is refused",
                          impl.plugin_name)
                raise Refused("Internal error: a connect hook was cancelled", status=500) from None
            except Exception:
                # Fail closed: a connect hook that breaks must not let the client in unchecked.
                log.exception("plugin %s: mcphost_connect raised", impl.plugin_name)
                raise Refused("Internal error", status=500) from None

    async def disconnect(self, session: Session, reason: str) -> None:
        await self._notify(self._disconnect, "mcphost_disconnect", session, reason)

    async def terminate(self, session: Session, reason: str) -> None:
        await self._notify(self._terminate, "mcphost_terminate", session, reason)

    async def _notify(self, hook: list[pluggy.HookImpl], name: str, session: Session, reason: str) -> None:
        seconds = self._host.config.server.hook_timeout
        for impl in hook:
            try:
                await bounded(self._host._call_hook(impl, session=session, reason=reason), seconds,
                              impl.plugin_name, name, self.running)
            except HookOverran:
                log.warning("plugin %s: %s did not finish within server.hook_timeout = %g s; abandoned",
                            impl.plugin_name, name, seconds)
            except HookCancelled:
                log.error("plugin %s: %s raised CancelledError; ignored", impl.plugin_name, name)
            except Exception as exc:
                self._host.failures.report(impl.plugin_name, name, exc)


def catalog_digests(catalog: Catalog) -> dict[str, str]:
    """A short digest of each list a client sees (tools, prompts, resources): the names and the
    plugin distribution and version that provide them."""
    def digest(entries: Mapping[str, Any]) -> str:
        items = sorted((str(name), repr(getattr(record_of(entry), "provenance", None)))
                       for name, entry in entries.items())
        return hashlib.sha256(repr(items).encode()).hexdigest()[:16]

    return {"tools": digest(catalog.tools), "prompts": digest(catalog.prompts),
            "resources": digest({**catalog.resources, **catalog.templates})}


def _own_version() -> str:
    from mcphost import __version__
    return __version__
