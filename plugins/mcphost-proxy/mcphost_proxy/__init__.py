"""mcphost-proxy: existing MCP servers (stdio commands, remote Streamable HTTP URLs) mounted as plugins.

Each upstream declared in ``[plugins.proxy.servers.NAME]`` (or in an ``mcpServers`` JSON file)
is reached through the official ``mcp`` client. Its tools, prompts, resources and templates join
the host's catalog under the server's prefix, so the host's auth, allow-lists, scopes,
middleware, telemetry and scaling apply to them as to any plugin's. See docs/proxy.md.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import mcphost
from mcphost_proxy.mount import records
from mcphost_proxy.settings import CONFIG_SCHEMA, ProxySettings, ServerSettings, load_settings
from mcphost_proxy.upstream import Upstream, UpstreamUnavailable

log = logging.getLogger("mcphost.proxy")

__all__ = ["CONFIG_SCHEMA", "ProxyPlugin", "ServerSettings", "Upstream", "UpstreamUnavailable"]


class ProxyPlugin:
    """The ``proxy`` entry point: one instance per host, holding that host's upstream connections."""

    def __init__(self) -> None:
        self.settings: ProxySettings | None = None
        #: The shared connection of each server (the one that lists its catalog), by server name.
        self.upstreams: dict[str, Upstream] = {}
        #: per_session servers: (server name, session id) -> that session's own connection.
        self.bound: dict[tuple[str, str], Upstream] = {}
        self.host: Any = None
        self._reload = asyncio.Lock()
        self._lazy_started = False
        #: The listing each upstream's records were last collected from.
        self._listed: dict[str, Any] = {}

    # -- configuration --------------------------------------------------------------------------

    @mcphost.hookimpl
    def mcphost_config_schema(self) -> dict[str, Any]:
        return CONFIG_SCHEMA

    def _configure(self, host: Any) -> None:
        if self.settings is not None:
            return
        config_path = getattr(host.config, "path", None)
        base = None if config_path is None else Path(config_path).parent
        self.settings = load_settings(host.plugin_config("proxy"), base=base)
        self.host = host
        for server in self.settings.servers:
            upstream = Upstream(server, backoff=self.settings.restart_backoff,
                                backoff_max=self.settings.restart_backoff_max, on_change=self._changed)
            upstream.host = host
            self.upstreams[server.name] = upstream
        self._report()

    def _report(self) -> None:
        """Show each upstream's state in ``mcphost plugins`` (PROVIDES: upstreams)."""
        info = self.host.plugin_infos.get("proxy") if self.host is not None else None
        if info is not None and self.upstreams:
            info.provides["upstreams"] = [u.status() for u in self.upstreams.values()]

    @mcphost.hookimpl
    def mcphost_status(self, host: Any) -> dict[str, Any] | None:
        """Each upstream's live state (see :meth:`Upstream.describe`), per-session ones included."""
        if not self.upstreams and not self.bound:
            return None
        return {"upstreams": [u.describe() for u in [*self.upstreams.values(), *self.bound.values()]]}

    # -- catalog ------------------------------------------------------------------------------------

    def _resolver(self, server: ServerSettings) -> Any:
        def resolve(ctx: mcphost.Context | None) -> Upstream:
            shared = self.upstreams[server.name]
            if not server.per_session or ctx is None or ctx.session.era == "modern":
                return shared
            key = (server.name, ctx.session.id)
            upstream = self.bound.get(key)
            if upstream is None:
                assert self.settings is not None
                upstream = Upstream(server, backoff=self.settings.restart_backoff,
                                    backoff_max=self.settings.restart_backoff_max,
                                    label=f"{server.name}@{ctx.session.id[:8]}")
                upstream.host = self.host
                self.bound[key] = upstream
                upstream.start()
            return upstream
        return resolve

    def _records(self, host: Any, kind: str) -> list[Any]:
        self._configure(host)
        out: list[Any] = []
        seen: set[str] = set()
        for upstream in self.upstreams.values():
            for record in records(upstream, self._resolver(upstream.settings))[kind]:
                key = getattr(record, "uri_template", None) or getattr(record, "uri", None) \
                    if kind in ("resources", "templates") else record.name
                if key in seen:
                    log.warning("upstream %s: %s %r is already mounted from another upstream; skipped",
                                upstream.settings.name, kind[:-1], key)
                    continue
                seen.add(key)
                out.append(record)
        return out

    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[Any]:
        return self._records(host, "tools")

    @mcphost.hookimpl
    def mcphost_prompts(self, host: Any) -> list[Any]:
        return self._records(host, "prompts")

    @mcphost.hookimpl
    def mcphost_resources(self, host: Any) -> list[Any]:
        return self._records(host, "resources")

    @mcphost.hookimpl
    def mcphost_resource_templates(self, host: Any) -> list[Any]:
        return self._records(host, "templates")

    async def _changed(self, upstream: Upstream) -> None:
        """An upstream (re)connected or its lists changed: collect the catalog again, tell clients."""
        self._report()
        host = self.host
        snapshot = upstream.listing
        if host is None or not host.started or self._listed.get(upstream.label) == snapshot:
            return  # at startup the host collects once, after every upstream is up
        self._listed[upstream.label] = snapshot
        async with self._reload:
            await host.reload()
        self._report()

    # -- lifecycle ------------------------------------------------------------------------------------

    @mcphost.hookimpl
    async def mcphost_startup(self, host: Any) -> None:
        self._configure(host)
        assert self.settings is not None
        if not self.upstreams:
            return
        eager = [u for u in self.upstreams.values() if u.settings.start == "startup"]
        ready = await asyncio.gather(*(u.wait_ready(self.settings.startup_timeout) for u in eager))
        for upstream, ok in zip(eager, ready, strict=True):
            if not ok:
                log.error("upstream %s did not start (%s); its tools answer an error until it does",
                          upstream.label, upstream.error or upstream.state)
        self._listed = {u.label: u.listing for u in self.upstreams.values()}
        async with self._reload:
            await host.reload()
        self._report()

    @mcphost.hookimpl
    def mcphost_middleware(self, host: Any) -> list[Any]:
        self._configure(host)
        if not any(u.settings.start == "lazy" for u in self.upstreams.values()):
            return []

        @mcphost.middleware(name="proxy-lazy-start")
        async def lazy_start(request: Any, call_next: Any) -> Any:
            if not self._lazy_started:
                self._lazy_started = True
                assert self.settings is not None
                lazy = [u for u in self.upstreams.values() if u.settings.start == "lazy"]
                await asyncio.gather(*(u.wait_ready(self.settings.startup_timeout) for u in lazy))
            return await call_next(request)

        return [lazy_start]

    @mcphost.hookimpl
    async def mcphost_terminate(self, session: Any, reason: str) -> None:
        for key in [k for k in self.bound if k[1] == session.id]:
            upstream = self.bound.pop(key)
            await upstream.stop()

    @mcphost.hookimpl
    async def mcphost_shutdown(self, host: Any) -> None:
        everything = [*self.bound.values(), *self.upstreams.values()]
        self.bound.clear()
        await asyncio.gather(*(u.stop() for u in everything), return_exceptions=True)
        self._report()

