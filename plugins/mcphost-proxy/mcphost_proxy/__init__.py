"""mcphost-proxy: existing MCP servers (stdio commands, remote Streamable HTTP URLs) mounted as plugins.

Each upstream declared in ``[plugins.proxy.servers.NAME]`` (or in an ``mcpServers`` JSON file)
is reached through the official ``mcp`` client. Its tools, prompts, resources and templates join
the host's catalog under the server's prefix, so the host's auth, allow-lists, scopes,
middleware, telemetry and scaling apply to them as to any plugin's. See docs/proxy.md.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import importlib
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcphost
from mcphost.records import Provenance
from mcphost_proxy.guard import Guard
from mcphost_proxy.parking import Parking
from mcphost_proxy.settings import ProxyConfig, ProxySettings, ServerSettings, load_settings
from mcphost_proxy.work import busy, offload

if TYPE_CHECKING:
    from mcphost_proxy.credentials import Credentials
    from mcphost_proxy.upstream import Upstream, UpstreamUnavailable

log = logging.getLogger("mcphost.proxy")

__all__ = ["ProxyConfig", "ProxyPlugin", "ServerSettings", "Upstream", "UpstreamUnavailable"]


def __getattr__(name: str) -> Any:
    """``Upstream`` and ``UpstreamUnavailable`` on first use: they load the ``mcp`` client (half a
    second), which every CLI command that loads plugins paid when the plugin was imported."""
    if name in ("Upstream", "UpstreamUnavailable"):
        return getattr(importlib.import_module("mcphost_proxy.upstream"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The plugin's record kinds (mount.records) as the catalog names them, and back.
_CATALOG_KINDS = {"tools": "tools", "prompts": "prompts", "resources": "resources", "templates": "resourceTemplates"}
_HOOK_KINDS = {catalog: hook for hook, catalog in _CATALOG_KINDS.items()}


def _same(before: Any, after: Any) -> bool:
    """Whether two listings are equal, compared item by item (a worker thread then lets the event
    loop in between items: one ``==`` over 20 000 tools would hold the interpreter throughout)."""
    if before.capabilities != after.capabilities:
        return False
    for kind in ("tools", "prompts", "resources", "templates"):
        old, new = getattr(before, kind), getattr(after, kind)
        if len(old) != len(new) or any(a != b for a, b in zip(old, new, strict=True)):
            return False
    return True


def _key(record: Any) -> str:
    return str(getattr(record, "uri_template", None) or getattr(record, "uri", None) or record.name)


#: Principals' own upstream connections shown in the status report (the console): the most recently used.
PERSONAL_SHOWN = 50

class ProxyPlugin:
    """The ``proxy`` entry point: one instance per host, holding that host's upstream connections."""

    def __init__(self) -> None:
        self.settings: ProxySettings | None = None
        #: The shared connection of each server (the one that lists its catalog), by server name.
        self.upstreams: dict[str, Upstream] = {}
        #: per_session servers: (server name, session id) -> that session's own connection, and whose it is.
        self.bound: dict[tuple[str, str], Upstream] = {}
        self._owners: dict[tuple[str, str], Any] = {}
        #: Instances stopping because they gave way to another caller (see _give_way).
        self._yielding: set[asyncio.Task[None]] = set()
        #: (upstream connection, resource URI) -> the host subscribers following it through that connection
        #: (session-era sessions and 2026-07-28 listen streams, by session id): it is subscribed once.
        self._subscribers: dict[tuple[Upstream, str], set[str]] = {}
        #: The open listen streams that follow a mounted resource: session id -> (session, listen request id).
        self._streams: dict[str, tuple[Any, Any]] = {}
        #: Upstream unsubscribes sent after a listen stream ended (its task may be cancelled meanwhile).
        self._releases: set[asyncio.Task[None]] = set()
        self._reaper: asyncio.Task[None] | None = None
        self.host: mcphost.Host | None = None
        self._lazy_started = False
        #: The listing each upstream's records were last derived from, and those records (by hook kind).
        self._listed: dict[str, Any] = {}
        self._mounted: dict[str, dict[str, list[Any]]] = {}
        #: Their names (URIs for resources), by hook kind, for ``mcphost plugins``.
        self._names: dict[str, dict[str, list[str]]] = {}
        #: Every record each upstream's listing made (held ones too), and what cleaning found (guard.admit).
        self._derived: dict[str, tuple[dict[str, list[Any]], Any]] = {}
        #: Pins and held definitions (docs/pinning.md); the console's host API is ``guard.state()``.
        self.guard = Guard()
        #: One derivation at a time per upstream (a burst of list_changed makes them in order).
        self._mounting: dict[str, asyncio.Lock] = {}
        self._watchdog: asyncio.Task[None] | None = None
        self._freezes: bool | None = None
        self.parking = Parking()
        #: Bytes of the calls each principal has waiting for an upstream: for an own_process server's
        #: process (all pools), or for an upstream (a per_session instance, a shared one) to (re)start.
        self._queued: Any = None
        self._paused = 0
        #: Turns of the shared stdio upstreams starting at once (max_starting).
        self._starting = asyncio.Semaphore(os.cpu_count() or 2)
        #: Per-user credentials of the auth mode "oauth" servers (credentials.py; None: there are none).
        self.credentials: Credentials | None = None

    # -- configuration --------------------------------------------------------------------------

    @mcphost.hookimpl
    def mcphost_settings(self) -> type[ProxyConfig]:
        return ProxyConfig

    def _configure(self, host: mcphost.Host) -> None:
        if self.settings is not None:
            return
        config_path = host.config.path
        base = None if config_path is None else Path(config_path).parent
        self.settings = load_settings(host.settings(ProxyConfig), base=base)
        self.host = host
        self.parking = Parking(self.settings.config.max_parked_calls, self.settings.config.max_parked_bytes)
        self._starting = asyncio.Semaphore(self.settings.config.max_starting or os.cpu_count() or 2)
        if self.settings.servers:
            from mcphost_proxy.pool import QueuedBytes

            self._queued = QueuedBytes(self.settings.config.max_queued_bytes_per_principal)
        for server in self.settings.servers:
            upstream = self.upstreams[server.name] = self._upstream(server, on_change=self._changed)
            if server.questions == "own_process" or (server.questions == "auto" and server.command is not None
                                                       and not server.per_session):
                from mcphost_proxy.pool import Pool

                upstream.pool = Pool(server, functools.partial(self._upstream, server), self._queued)
            if server.per_session:  # its sessions follow resources on their own instances
                upstream.relay = self._to_streams
        if any(server.auth.mode != "static" for server in self.settings.servers):
            from mcphost_proxy.credentials import Credentials

            self.credentials = Credentials(host, self.settings, self._upstream)
            for server in self.settings.servers:  # no listing credential: listed once someone signs in
                if server.auth.mode != "static" and not Credentials.lists_itself(server):
                    self.upstreams[server.name].awaiting = True
                    self.credentials.listers[server.name] = self.upstreams[server.name]
        self._report()

    def _upstream(self, server: ServerSettings, label: str | None = None,
                  on_change: Any = None) -> Upstream:
        assert self.settings is not None
        from mcphost_proxy.upstream import Upstream  # the mcp client: only once a server is configured

        upstream = Upstream(server, backoff=self.settings.config.restart_backoff,
                            backoff_max=self.settings.config.restart_backoff_max, on_change=on_change, label=label)
        upstream.host = self.host
        upstream.parking = self.parking
        upstream.queued = self._queued  # calls waiting for it to (re)start are budgeted in bytes too
        if label is None:  # a shared connection (per_session ones start at once: a client waits for each)
            upstream.starting = self._starting
        return upstream

    def _report(self) -> None:
        """Show each upstream's state in ``mcphost plugins`` (PROVIDES: upstreams)."""
        host = self.host
        info = host.plugin_infos.get("proxy") if host is not None else None
        if host is None or info is None or not self.upstreams:
            return
        info.provides["upstreams"] = [u.status() for u in self.upstreams.values()]
        held = [f"{h.name} ({h.upstream}: {h.reason})" for by in self.guard.held.values() for h in by.values()]
        if held:
            info.provides["held"] = held
        else:
            info.provides.pop("held", None)
        clashes = [c for c in host.catalog.clashes if c.loser.plugin == "proxy"]
        if clashes:
            info.provides["clashes"] = [clash.describe() for clash in clashes]
        else:
            info.provides.pop("clashes", None)
        lost = {(_HOOK_KINDS.get(c.kind, c.kind), c.key) for c in clashes}
        for kind, catalog_kind in (("tools", "tools"), ("prompts", "prompts"), ("resources", "resources"),
                                   ("templates", "resourceTemplates")):
            names = [name for keys in self._names.values() for name in keys[kind]]  # built off the loop
            if lost:
                names = [name for name in names if (kind, name) not in lost]
            if names:
                info.provides[catalog_kind] = names
            else:
                info.provides.pop(catalog_kind, None)

    @mcphost.hookimpl
    def mcphost_status(self, host: mcphost.Host) -> dict[str, Any] | None:
        """Each upstream's live state (see :meth:`Upstream.describe`), per-session ones included, and
        the principals' own connections to oauth and token-exchange upstreams (who is connected to
        what, with ``principal``; the PERSONAL_SHOWN most recently used, never a token), and the stored
        per-user credentials under ``signed_in`` (a name the status redaction leaves alone): principal,
        upstream, expiry, the PERSONAL_SHOWN that expire first, with ``signed_in_total``; never a token."""
        if not self.upstreams and not self.bound:
            return None
        pooled = [i for u in self.upstreams.values() if u.pool is not None for i in u.pool.instances]
        rows = [u.describe() for u in [*self.upstreams.values(), *pooled, *self.bound.values()]]
        personal = self.credentials.connected() if self.credentials is not None else []
        report: dict[str, Any] = {"upstreams": rows + personal[:PERSONAL_SHOWN], "personal_total": len(personal)}
        if self.credentials is not None and self.credentials.clients:
            stored = self.credentials.stored()
            report.update(signed_in=stored[:PERSONAL_SHOWN], signed_in_total=len(stored))
        return report

    @mcphost.hookimpl
    def mcphost_problems(self, host: mcphost.Host) -> list[dict[str, str]]:
        """Each shared upstream that is restarting or failed (see ``upstream.upstream_problem``), then
        each definition held until an operator approves it (``Guard.problems``)."""
        if not self.upstreams:
            return []
        from mcphost_proxy.upstream import upstream_problem  # the mcp client: only once a server is configured

        down = [problem for u in self.upstreams.values() if (problem := upstream_problem(u)) is not None]
        return down + self.guard.problems()

    @mcphost.hookimpl
    def mcphost_readiness(self, host: mcphost.Host) -> list[mcphost.Unready]:
        """The upstreams that are not running (``required`` ones make ``/readyz`` answer 503); the
        shared connections only: a per_session instance is its session's, not the process's."""
        return [item for upstream in self.upstreams.values() if (item := upstream.unready()) is not None]

    # -- catalog ------------------------------------------------------------------------------------

    def _resolver(self, server: ServerSettings) -> Any:
        if server.auth.mode != "static" and self.credentials is not None:
            return self.credentials.resolver(server)

        def resolve(ctx: mcphost.Context | None) -> Upstream:
            shared = self.upstreams[server.name]
            if not server.per_session or ctx is None or ctx.session.era == "modern":
                return shared
            key = (server.name, ctx.session.id)
            upstream = self.bound.get(key)
            if upstream is None:
                upstream = self._new_instance(server, key, ctx.session)
            upstream.last_used = time.monotonic()
            return upstream
        return resolve

    def _new_instance(self, server: ServerSettings, key: tuple[str, str], session: Any) -> Upstream:
        """A per_session instance for ``session``, within max_instances and the principal's share."""
        assert self.settings is not None
        from mcphost_proxy.upstream import UpstreamUnavailable

        owner = getattr(session, "quota", None) or session.id
        mine = [k for k in self.bound if k[0] == server.name]
        share = server.max_instances_per_principal
        if share is not None and sum(1 for k in mine if self._owners.get(k) == owner) >= share:
            raise UpstreamUnavailable(
                f"Upstream server {server.name!r}: this principal already holds its share of instances "
                f"(max_instances_per_principal = {share}); end a session or retry later")
        if len(mine) >= server.max_instances and _give_way(self, server, mine, owner):
            mine = [k for k in self.bound if k[0] == server.name]
        if len(mine) >= server.max_instances:
            raise UpstreamUnavailable(
                f"Upstream server {server.name!r} already runs its max_instances ({server.max_instances}) "
                f"instances, one per client session, and none may give way to this caller (one holding "
                f"half of them takes no more while the others are busy); retry when one is released "
                f"(idle ones stop after {server.idle_timeout:g} s)")
        upstream = self._upstream(server, label=f"{server.name}@{key[1][:8]}")
        upstream.audience = session  # its resource updates are this session's alone
        self.bound[key] = upstream
        self._owners[key] = owner
        upstream.start()
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap(), name="proxy:reaper")
        return upstream

    async def _reap(self) -> None:
        """Stop per_session instances idle longer than their server's idle_timeout."""
        while self.bound:
            shortest = min(u.settings.idle_timeout for u in self.bound.values())
            await asyncio.sleep(min(max(shortest / 4, 0.05), 30.0))
            now = time.monotonic()
            for key, upstream in list(self.bound.items()):
                # One that follows a resource for its session is not idle: it stops with the session.
                if (upstream.in_flight == 0 and not upstream.subscribed
                        and now - upstream.last_used > upstream.settings.idle_timeout):
                    self.bound.pop(key, None)
                    self._owners.pop(key, None)
                    log.info("upstream %s: idle for %.0f s; stopped", upstream.label, now - upstream.last_used)
                    await upstream.stop()

    def _records(self, host: mcphost.Host, kind: str) -> list[Any]:
        """Every mounted record of ``kind`` (a full catalog collection; clashes are the catalog's to settle)."""
        self._configure(host)
        return [record for mounted in self._mounted.values() for record in mounted[kind]]

    @mcphost.hookimpl
    def mcphost_tools(self, host: mcphost.Host) -> list[Any]:
        records = self._records(host, "tools")
        if self.credentials is not None and self.credentials.servers:  # sign out of an oauth upstream
            records.append(self.credentials.sign_out_tool())
        return records

    @mcphost.hookimpl
    def mcphost_register_commands(self, cli: Any) -> None:
        """``mcphost credentials list | revoke`` (per-user upstream credentials; credentials.py)."""
        from mcphost_proxy.credentials import register_commands

        register_commands(cli)

    @mcphost.hookimpl
    def mcphost_routes(self, app: Any) -> None:
        """The sign-in start and callback routes, when an upstream is called per user (auth mode oauth)."""
        if self.credentials is not None:
            self.credentials.routes(app)

    @mcphost.hookimpl
    def mcphost_prompts(self, host: mcphost.Host) -> list[Any]:
        return self._records(host, "prompts")

    @mcphost.hookimpl
    def mcphost_resources(self, host: mcphost.Host) -> list[Any]:
        return self._records(host, "resources")

    @mcphost.hookimpl
    def mcphost_resource_templates(self, host: mcphost.Host) -> list[Any]:
        return self._records(host, "templates")

    async def _changed(self, upstream: Upstream) -> None:
        """An upstream (re)connected or its lists changed: derive its records again, off the event loop,
        and have the host swap in a catalog where only this upstream's records are replaced."""
        self._report()
        host = self.host
        name = upstream.settings.name
        if host is None or getattr(host, "kernel", None) is None or self.upstreams.get(name) is not upstream:
            return
        async with self._mounting.setdefault(name, asyncio.Lock()):
            listing = upstream.listing
            previous = self._listed.get(name)
            if previous is listing:
                return
            resolve = self._resolver(upstream.settings)
            from mcphost_proxy.mount import Report, records

            def derive() -> tuple[dict[str, list[Any]], Report] | None:
                """The records, held ones included, and what cleaning them found."""
                if previous is not None and _same(previous, listing):
                    return None  # reconnected with the same lists: nothing to re-derive
                report = Report()
                return records(upstream, resolve, listing, report), report

            started = time.monotonic()
            # The new records would be scanned by every full collection from now on: with 10 000
            # upstream tools remounted a few at a time, each full collection held the loop for 70-110
            # ms, and one of 20 000 tools held it over a second. When the host froze its start-up
            # objects out of the collector's view (mcphost serve), automatic collection pauses while
            # the records are built and swapped in, and they join the frozen objects (freezing costs
            # nothing per object). They live until the upstream's next change: the records hold no
            # reference cycles, so the old ones are freed by their reference counts when replaced.
            pause = self._frozen()
            if pause:
                self._paused += 1
                gc.disable()
            try:
                result = await offload(derive)
                self._listed[name] = listing
                if result is None:
                    return
                self._derived[name] = result
                change = await _publish(self, name)
                if pause:
                    gc.freeze()
            finally:
                if pause:
                    self._paused -= 1
                    if not self._paused:
                        gc.enable()
            log.info("upstream %s mounted: %d tools, %d prompts, %d resources, %d templates (%.0f ms)", name,
                     len(change.added["tools"]), len(change.added["prompts"]), len(change.added["resources"]),
                     len(change.added["resourceTemplates"]), (time.monotonic() - started) * 1000)
        self._report()

    def _frozen(self) -> bool:
        """Whether the host froze its start-up objects out of the collector's view (mcphost serve)."""
        if not self._freezes:
            self._freezes = gc.get_freeze_count() > 0  # it walks the frozen objects: asked until it says yes
        return self._freezes

    async def wait_mounted(self, timeout: float) -> bool:
        """Wait until every upstream started with the host has listed and is mounted (False on timeout)."""
        eager = [u for u in self.upstreams.values() if u.settings.start == "startup" and not u.awaiting]
        ready = await asyncio.gather(*(u.wait_ready(timeout) for u in eager))
        return all(ready)

    # -- lifecycle ------------------------------------------------------------------------------------

    @mcphost.hookimpl
    async def mcphost_startup(self, host: mcphost.Host) -> None:
        """Start the upstreams and return: the host listens at once, and each upstream is mounted
        when it has listed (``startup_wait`` > 0 waits that long first, for one-shot commands)."""
        self._configure(host)
        assert self.settings is not None
        if not self.upstreams:
            return
        # Declared at initialize before any upstream has listed: a client that lists once, at once
        # (most desktop clients), gets an empty list rather than "Method not found", then list_changed.
        host.expect_provider(("tools", "resources", "prompts"))
        if any(u.settings.pinning != "off" for u in self.upstreams.values()):
            self.guard.store = host.pin_store()
            self.guard.start(self.settings.config.pins_poll, functools.partial(_republish, self))
        eager = [u for u in self.upstreams.values() if u.settings.start == "startup" and not u.awaiting]
        for upstream in eager:
            log.info("upstream %s: starting (%s: %s)", upstream.label, upstream.settings.transport,
                     upstream.settings.describe())  # describe() redacts the command line and the URL
            upstream.start()
        self._watchdog = asyncio.get_running_loop().create_task(self._watch(eager), name="proxy:startup")
        if self.credentials is not None:
            await self.credentials.adopt_stored()
        if self.settings.config.startup_wait:
            await self.wait_mounted(self.settings.config.startup_wait)
        self._report()

    async def _watch(self, eager: list[Upstream]) -> None:
        assert self.settings is not None
        timeout = self.settings.config.startup_timeout
        # The host froze what it allocated at start-up out of the collector's view (mcphost serve; it
        # did so before this task first ran). The upstreams' first mounts are as long-lived: automatic
        # collection pauses until they are in (at most startup_timeout), then they join the frozen
        # objects. Otherwise each mount made a full collection scan every record mounted so far (with
        # 10 000 tools, a quarter of a second of the loop each time).
        pause = self._frozen() and gc.isenabled()
        if pause:
            self._paused += 1
            gc.disable()
        try:
            ready = await asyncio.gather(*(u.wait_ready(timeout) for u in eager))
            if self._frozen():
                gc.freeze()
        finally:
            if pause:
                self._paused -= 1
                if not self._paused:
                    gc.enable()
        for upstream, ok in zip(eager, ready, strict=True):
            if not ok:
                log.error("upstream %s has not listed within startup_timeout (%ss: %s); it is mounted when "
                          "it does, and its tools are not served until then", upstream.label, timeout,
                          upstream.error or upstream.state)

    @mcphost.hookimpl
    def mcphost_middleware(self, host: mcphost.Host) -> list[Any]:
        self._configure(host)
        if not self.upstreams:
            return []

        @mcphost.middleware(name="proxy-subscriptions")
        async def subscriptions(request: Any, call_next: Any) -> Any:
            """Subscriptions to a mounted resource reach its upstream, counted: the first host
            subscriber's subscribe and the last one's unsubscribe are sent. Subscribers are session-era
            sessions (resources/subscribe, resources/unsubscribe) and 2026-07-28 listen streams."""
            if request.method == "subscriptions/listen":
                return await self._listening(request, call_next)
            result = await call_next(request)
            if request.method in ("resources/subscribe", "resources/unsubscribe"):
                uri = (request.params or {}).get("uri")
                server = _server_of(self, uri) if isinstance(uri, str) else None
                if server is not None and isinstance(uri, str):
                    await _subscription(self, server, uri, request.session, request.method == "resources/subscribe")
            return result

        guarded = [_held_middleware(self.guard)] if any(
            u.settings.pinning != "off" or u.settings.hidden_text == "hold" for u in self.upstreams.values()) else []
        if self.credentials is not None and self.credentials.listers:
            guarded.append(_consent_middleware(self.credentials, host))
        if not any(u.settings.start == "lazy" for u in self.upstreams.values()):
            return [*guarded, subscriptions]

        @mcphost.middleware(name="proxy-lazy-start")
        async def lazy_start(request: Any, call_next: Any) -> Any:
            if not self._lazy_started:
                self._lazy_started = True
                assert self.settings is not None
                lazy = [u for u in self.upstreams.values() if u.settings.start == "lazy" and not u.awaiting]
                await asyncio.gather(*(u.wait_ready(self.settings.config.startup_timeout) for u in lazy))
            return await call_next(request)

        return [*guarded, lazy_start, subscriptions]

    async def _listening(self, request: Any, call_next: Any) -> Any:
        """A 2026-07-28 ``subscriptions/listen`` stream follows, while it is open, the resources its
        acknowledgement honours (the kernel leaves out what the caller may not see). The upstream
        subscribe is sent before that acknowledgement reaches the client; when the stream ends (closed,
        timed out, or its client gone) the upstream is unsubscribed unless another subscriber remains."""
        session = request.session
        outlet = session.outlet
        followed: list[tuple[str, str]] = []
        wanted = (request.params or {}).get("notifications")
        if outlet is None or not isinstance(wanted, dict) or not wanted.get("resourceSubscriptions"):
            return await call_next(request)

        async def watching(message: Any, related: Any) -> None:
            if related == request.id and message.get("method") == "notifications/subscriptions/acknowledged":
                session.outlet = outlet  # the acknowledgement is all this stream's watcher needs to see
                honoured = ((message.get("params") or {}).get("notifications") or {}).get("resourceSubscriptions")
                for uri in honoured if isinstance(honoured, list) else ():
                    server = _server_of(self, uri) if isinstance(uri, str) else None
                    if server is not None:
                        followed.append((server, uri))
                if followed:
                    self._streams[session.id] = (session, request.id)
                await asyncio.gather(*(_subscription(self, server, uri, session, True) for server, uri in followed))
            await outlet(message, related)

        session.outlet = watching
        try:
            return await call_next(request)
        finally:
            if session.outlet is watching:
                session.outlet = outlet
            self._streams.pop(session.id, None)
            if followed:  # counted at once; the unsubscribes go on even if this task is cancelled again
                changes = [change for server, uri in followed
                           if (change := self._count(server, uri, session, False)) is not None]
                if changes:
                    task = asyncio.get_running_loop().create_task(_send(changes), name="proxy:unsubscribe")
                    self._releases.add(task)
                    task.add_done_callback(self._releases.discard)

    async def _to_streams(self, upstream: Upstream, uri: str) -> None:
        """An update from the shared connection of a per_session server reaches the listen streams that
        follow ``uri`` through it, not the sessions that follow it on their own instances."""
        note = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}
        for session_id in list(self._subscribers.get((upstream, uri), ())):
            stream = self._streams.get(session_id)
            if stream is None or stream[0].outlet is None:
                continue
            session, request_id = stream
            from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY  # loaded once an upstream runs

            params = {"uri": uri, "_meta": {SUBSCRIPTION_ID_META_KEY: request_id}}
            try:
                await session.outlet({**note, "params": params}, request_id)
            except Exception:
                log.debug("could not relay an update of %s to listen stream %r", uri, request_id, exc_info=True)

    def _target(self, server: str, session: Any, on: bool) -> Upstream | None:
        """The connection a subscription of ``session`` goes through: the session's own instance of a
        per_session server (started for it when it subscribes), else the server's shared one; none for a
        per-user server listed with a signed-in principal's token."""
        settings = self.upstreams[server].settings
        if self.credentials is not None and server in self.credentials.listers:
            return None  # its shared connection carries one principal's token: its updates are not everyone's
        if not settings.per_session or session.era == "modern":
            return self.upstreams[server]
        key = (server, session.id)
        upstream = self.bound.get(key)
        if upstream is None and on:
            upstream = self._new_instance(settings, key, session)
        return upstream

    def _count(self, server: str, uri: str, session: Any, on: bool) -> tuple[Upstream, str, bool] | None:
        """Count ``session`` in (or out of) the subscribers of ``uri``; the upstream change to send, if any."""
        try:
            upstream = self._target(server, session, on)
        except UpstreamUnavailable as exc:
            log.warning("a subscription to %s does not reach upstream %s: %s", uri, server, exc)
            return None
        if upstream is None:
            return None
        sessions = self._subscribers.setdefault((upstream, uri), set())
        before = bool(sessions)
        if on:
            sessions.add(session.id)
        else:
            sessions.discard(session.id)
        if not sessions:
            del self._subscribers[(upstream, uri)]
        return (upstream, uri, bool(sessions)) if bool(sessions) != before else None

    @mcphost.hookimpl
    async def mcphost_terminate(self, session: Any, reason: str) -> None:
        for upstream, uri in [key for key, ids in self._subscribers.items() if session.id in ids]:
            sessions = self._subscribers[(upstream, uri)]
            sessions.discard(session.id)
            if not sessions:
                del self._subscribers[(upstream, uri)]
                await upstream.subscription(uri, False)
        for key in [k for k in self.bound if k[1] == session.id]:
            upstream = self.bound.pop(key)
            self._owners.pop(key, None)
            await upstream.stop()

    @mcphost.hookimpl
    async def mcphost_shutdown(self, host: mcphost.Host) -> None:
        self.guard.stop()
        for task in (self._watchdog, self._reaper, *self._releases):
            if task is not None:
                task.cancel()
        everything = [*self.bound.values(), *self.upstreams.values()]
        self.bound.clear()
        if self.credentials is not None:
            await self.credentials.close()
        await asyncio.gather(*(u.stop() for u in everything), *self._yielding, return_exceptions=True)
        self._report()


async def _publish(plugin: ProxyPlugin, name: str) -> Any:
    """Serve upstream ``name``'s derived records less the held ones (see mcphost_proxy.guard)."""
    assert plugin.host is not None
    derived, report = plugin._derived[name]
    kept = await plugin.guard.admit(plugin.upstreams[name].settings, derived, report)
    plugin._mounted[name] = kept
    plugin._names[name] = {kind: [_key(record) for record in items] for kind, items in kept.items()}
    pairs = [(_CATALOG_KINDS[kind], record) for kind, items in kept.items() for record in items]
    with busy():  # the host builds the new catalog in a thread
        return await plugin.host.replace_provider(Provenance(plugin="proxy", origin=name), pairs)


async def _republish(plugin: ProxyPlugin, name: str) -> None:
    """Pins changed (an approval): serve upstream ``name`` again from the records last derived."""
    if name not in plugin._derived:
        return
    async with plugin._mounting.setdefault(name, asyncio.Lock()):
        await _publish(plugin, name)
    plugin._report()


def _consent_middleware(credentials: Credentials, host: mcphost.Host) -> mcphost.Middleware:
    """A ``tools/list`` while a server without a listing credential waits for its first principal's token
    asks the caller to sign in, or exchanges its token (credentials.py ``on_list``); once every such
    server is listed it costs a look at an empty list."""

    @mcphost.middleware(name="proxy-list-consent")
    async def consent(request: Any, call_next: Any) -> Any:
        if request.method == "tools/list" and credentials.awaiting():
            await credentials.on_list(request, host)
        return await call_next(request)

    return consent


def _held_middleware(guard: Guard) -> mcphost.Middleware:
    """A call to a held definition (a tool, a prompt) is refused with an error naming its upstream and
    saying it awaits approval, instead of "Unknown tool" (it is not listed either)."""

    @mcphost.middleware(name="proxy-held", fail_closed=True)
    async def held(request: Any, call_next: Any) -> Any:
        kind = {"tools/call": "tools", "prompts/get": "prompts"}.get(request.method)
        name = (request.params or {}).get("name") if kind is not None else None
        if isinstance(name, str):
            refusal = guard.refusal(str(kind), name)
            if refusal is not None:
                raise mcphost.McpError(-32602, refusal, {"held": True, "name": name})
        return await call_next(request)

    return held


def _server_of(plugin: ProxyPlugin, uri: str) -> str | None:
    """The upstream serving resource ``uri`` (a static resource or a template), if one does."""
    found = plugin.host.catalog.find_resource(uri) if plugin.host is not None else None
    provenance = getattr(found[0], "provenance", None) if found is not None else None
    if provenance is None or provenance.plugin != "proxy" or provenance.origin not in plugin.upstreams:
        return None
    return str(provenance.origin)


async def _subscription(plugin: ProxyPlugin, server: str, uri: str, session: Any, on: bool) -> None:
    """Count ``session``'s subscription to ``uri`` of ``server``; (un)subscribe upstream when the count says so."""
    change = plugin._count(server, uri, session, on)
    if change is not None:
        await _send([change])


async def _send(changes: list[tuple[Upstream, str, bool]]) -> None:
    """Subscribe (or unsubscribe) upstream connections to resources, as counted."""
    await asyncio.gather(*(upstream.subscription(uri, on) for upstream, uri, on in changes))


#: Seconds without a call after which a per_session instance counts as abandoned: when its pool is
#: full, another caller may take its place whoever holds it.
ABANDONED_AFTER = 30.0


def instance_to_yield(max_instances: int, counts: dict[Any, int],
                      idle: dict[Any, list[tuple[float, tuple[str, str]]]], newcomer: Any,
                      now: float) -> tuple[str, str] | None:
    """Which idle per_session instance gives way to ``newcomer`` when the pool is full, if any.

    ``counts``: instances held per caller; ``idle``: per caller, (last used, key) of its idle ones.
    No caller holds more than half of ``max_instances`` while another waits: a newcomer holding
    less than half takes the least recently used idle instance of the caller holding the most,
    when that caller holds more than half; otherwise any instance idle for ABANDONED_AFTER seconds
    (the least recently used). A newcomer already at half takes nothing.
    """
    half = max(1, max_instances // 2)
    if counts.get(newcomer, 0) >= half:
        return None
    greedy = [(counts[owner], owner) for owner in idle if owner != newcomer and counts.get(owner, 0) > half]
    if greedy:
        _, owner = max(greedy, key=lambda item: item[0])
        return min(idle[owner])[1]
    abandoned = [entry for owner, entries in idle.items() if owner != newcomer for entry in entries
                 if now - entry[0] > ABANDONED_AFTER]
    return min(abandoned)[1] if abandoned else None


def _give_way(plugin: ProxyPlugin, server: ServerSettings, keys: list[tuple[str, str]], newcomer: Any) -> bool:
    """The pool of ``server`` is full and ``newcomer`` (a quota key) wants an instance: stop one
    idle instance for it, if fair; True when one was stopped.

    Fair (see :func:`instance_to_yield`): the newcomer holds less than half of ``max_instances``,
    and the instance is one of a caller holding more than that (its largest holder's least
    recently used), or one nobody used for :data:`ABANDONED_AFTER` seconds.
    """
    held: dict[Any, list[tuple[float, tuple[str, str]]]] = {}
    for key in keys:
        upstream = plugin.bound[key]
        if upstream.in_flight == 0 and not upstream.subscribed:
            held.setdefault(plugin._owners.get(key), []).append((upstream.last_used, key))
    counts: dict[Any, int] = {}
    for key in keys:
        counts[plugin._owners.get(key)] = counts.get(plugin._owners.get(key), 0) + 1
    chosen = instance_to_yield(server.max_instances, counts, held, newcomer, time.monotonic())
    if chosen is None:
        return False
    upstream = plugin.bound.pop(chosen)
    owner = plugin._owners.pop(chosen, None)
    log.info("upstream %s: stopped (idle %.0f s; its caller held %d of max_instances %d) for another caller",
             upstream.label, time.monotonic() - upstream.last_used, counts.get(owner, 0), server.max_instances)
    task = asyncio.get_running_loop().create_task(upstream.stop(), name=f"proxy:yield:{upstream.label}")
    plugin._yielding.add(task)
    task.add_done_callback(plugin._yielding.discard)
    return True
