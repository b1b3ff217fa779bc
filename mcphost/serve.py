"""Run the HTTP app on Hypercorn: binding, workers, graceful shutdown, the checks before start."""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any

from hypercorn.asyncio import serve as hypercorn_serve
from hypercorn.config import Config as HypercornConfig

from mcphost.app import create_app
from mcphost.errors import ConfigError
from mcphost.host import Host
from mcphost.transports.http import is_loopback

log = logging.getLogger("mcphost.serve")


def check_bind(host: Host, *, allow_remote: bool = False) -> None:
    """Refuse setups that would expose sessions or run them inconsistently."""
    settings = host.config.server
    if not is_loopback(settings.host) and not (host.has_auth or settings.allowed_hosts or allow_remote):
        raise ConfigError(
            f"refusing to listen on {settings.host} without authentication or allowed_hosts: anyone who can "
            "reach this address could use every tool. Install an auth plugin, set [server] allowed_hosts, "
            "or pass --allow-remote if something in front of mcphost already authenticates.")
    if settings.workers > 1 and not getattr(host.backend, "shared", False):
        raise ConfigError(
            f"{settings.workers} workers need a shared state backend (for example mcphost-redis); with "
            f"the in-memory backend ({type(host.backend).__name__}) each worker would have its own sessions")


def hypercorn_config(host: Host) -> HypercornConfig:
    settings = host.config.server
    config = HypercornConfig()
    address = f"[{settings.host}]" if ":" in settings.host else settings.host
    config.bind = [f"{address}:{settings.port}"]
    config.include_server_header = False
    config.graceful_timeout = settings.graceful_timeout
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.keep_alive_timeout = 5
    return config


async def serve_http(host: Host, *, ready: Any = None) -> None:
    """Serve ``host`` over HTTP until SIGINT/SIGTERM, then shut down gracefully."""
    app = create_app(host, freeze_gc=True)
    config = hypercorn_config(host)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    log.info("serving MCP on http://%s:%s%s", host.config.server.host, host.config.server.port,
             host.config.server.path)

    async def shutdown_trigger() -> None:
        await stop.wait()
        # Hypercorn waits for open connections before the lifespan shutdown runs, so tell the SSE
        # streams now: they end with a retry hint and clients resume (here once back, or elsewhere).
        app.transport.closing.set()

    await hypercorn_serve(app, config, shutdown_trigger=shutdown_trigger)  # type: ignore[arg-type]
