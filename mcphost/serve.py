"""Run the HTTP app on Hypercorn: binding, workers, graceful shutdown, the checks before start.

With ``workers`` above 1 (a shared backend is required), the parent process opens the listening
socket, forks that many workers that all accept on it, and supervises them: SIGTERM/SIGINT are
passed on for a graceful stop, and a worker that dies otherwise is replaced. Any worker serves
any request, because the sessions, streams and routing live in the shared backend.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import time
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
            f"{settings.workers} workers need a shared state backend; the in-memory backend "
            f"({type(host.backend).__name__}) would give each worker its own sessions, so a client would get "
            "'Session not found' whenever another worker answered. Install mcphost-redis and set "
            "[plugins.redis] url (or MCPHOST_REDIS_URL), or run one worker.")


class _Config(HypercornConfig):
    """Hypercorn's config, with a kernel limit on how long a connection may sit on unsent data."""

    #: Milliseconds for TCP_USER_TIMEOUT on every listening socket (its connections inherit it).
    user_timeout_ms = 0

    def create_sockets(self) -> Any:
        sockets = super().create_sockets()
        if self.user_timeout_ms and hasattr(socket, "TCP_USER_TIMEOUT"):  # Linux
            for sock in sockets.insecure_sockets:
                if sock.family in (socket.AF_INET, socket.AF_INET6):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, self.user_timeout_ms)
        return sockets


def hypercorn_config(host: Host, sock: socket.socket | None = None) -> HypercornConfig:
    settings = host.config.server
    config = _Config()
    address = f"[{settings.host}]" if ":" in settings.host else settings.host
    config.bind = [f"fd://{sock.fileno()}"] if sock is not None else [f"{address}:{settings.port}"]
    config.include_server_header = False
    config.graceful_timeout = settings.graceful_timeout
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.keep_alive_timeout = settings.keep_alive_timeout
    # h11 refuses (431) a request whose head is still incomplete past this size; a complete head
    # that arrived in one read is measured by the app (McpApp), so both ways get the same limit.
    config.h11_max_incomplete_size = settings.max_header_bytes
    # A client that reads nothing (a zero receive window) or acknowledges nothing for
    # sse_write_timeout + 1 seconds is disconnected by the kernel. The app's own write timeout
    # stops following the stream (and says so in the log, a second earlier), but Hypercorn's close
    # waits for its send buffer to drain, which a client that never reads never lets happen:
    # without this the connection, its descriptor and megabytes of socket buffers stayed until the
    # client went away. It also covers what the app never sees: the kernel's send buffer grows to
    # megabytes, so a slow trickle of events fills it only after minutes.
    config.user_timeout_ms = round((settings.sse_write_timeout + 1) * 1000)
    return config


async def serve_http(host: Host, *, ready: Any = None, sock: socket.socket | None = None) -> None:
    """Serve ``host`` over HTTP until SIGINT/SIGTERM, then shut down gracefully.

    ``sock``: an already listening socket (a worker forked by :func:`run_workers`).
    """
    app = create_app(host, freeze_gc=True)
    config = hypercorn_config(host, sock)
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

    await hypercorn_serve(app, config, shutdown_trigger=shutdown_trigger)  # type: ignore[arg-type]  # Hypercorn types ASGI messages as its TypedDicts; ours are dicts


def listening_socket(host_name: str, port: int) -> socket.socket:
    """The socket every worker accepts on (inheritable across fork)."""
    family = socket.AF_INET6 if ":" in host_name else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host_name.strip("[]"), port))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


def run_workers(host: Host, workers: int) -> int:
    """Fork ``workers`` processes serving ``host`` on one socket and supervise them; the exit code."""
    settings = host.config.server
    sock = listening_socket(settings.host, settings.port)
    children: dict[int, int] = {}  # pid -> worker number
    stopping = False

    def spawn(number: int) -> None:
        pid = os.fork()
        if pid == 0:  # the worker
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            code = 0
            try:
                asyncio.run(serve_http(host, sock=sock))
            except KeyboardInterrupt:
                pass
            except BaseException:
                log.exception("worker %d failed", number)
                code = 1
            finally:
                logging.shutdown()
                os._exit(code)
        children[pid] = number

    def stop(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("serving MCP on http://%s:%s%s with %d workers", settings.host, settings.port, settings.path, workers)
    number: int | None
    for number in range(workers):
        spawn(number)
    restarts: list[float] = []
    code = 0
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        number = children.pop(pid, None)
        if number is None:
            continue
        exit_code = os.waitstatus_to_exitcode(status)
        if stopping:
            code = code or (exit_code if exit_code > 0 else 0)
            continue
        now = time.monotonic()
        restarts = [t for t in restarts if now - t < 60] + [now]
        if len(restarts) > 5 * workers:  # crashing in a loop: give up rather than spin
            log.error("workers keep dying (last exit %s); stopping", exit_code)
            stop(signal.SIGTERM, None)
            code = 1
            continue
        log.error("worker %d (pid %d) exited with %s; starting a new one", number, pid, exit_code)
        spawn(number)
    sock.close()
    return code
