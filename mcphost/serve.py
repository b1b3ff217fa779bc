"""Run the HTTP app on Hypercorn: binding, workers, graceful shutdown, the checks before start.

With ``workers`` above 1 (a shared backend is required), the parent process opens the listening
socket, forks that many workers that all accept on it, and supervises them: SIGTERM/SIGINT are
passed on for a graceful stop, and a worker that dies otherwise is replaced. Any worker serves
any request, because the sessions, streams and routing live in the shared backend.

Why not Hypercorn's own supervisor (``hypercorn.run.run``, 0.18): its SIGHUP stops every worker
before starting new ones (a gap with no one serving), and a worker that dies ends the whole server
instead of being replaced; we need a rolling reload and replacement, so we keep this loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from hypercorn.asyncio import serve as hypercorn_serve
from hypercorn.config import Config as HypercornConfig

from mcphost.app import create_app
from mcphost.deadline import exit_if_abandoned
from mcphost.errors import ConfigError
from mcphost.host import Host
from mcphost.transports.http import is_loopback

log = logging.getLogger("mcphost.serve")

#: Seconds of ``shutdown_drain`` when the backend is shared: above two health checks of a load
#: balancer probing /readyz every second (deploy/haproxy.cfg).
DEFAULT_DRAIN = 3.0


def check_exposure(host: Host, *, allow_remote: bool = False) -> None:
    """Refuse to listen beyond loopback where nothing authenticates or limits the Host header."""
    settings = host.config.server
    if not is_loopback(settings.host) and not (host.has_auth or settings.allowed_hosts or allow_remote):
        raise ConfigError(
            f"refusing to listen on {settings.host} without authentication or allowed_hosts: anyone who can "
            "reach this address could use every tool. Install an auth plugin, set [server] allowed_hosts, "
            "or pass --allow-remote if something in front of mcphost already authenticates.")


def check_workers(host: Host) -> None:
    """Refuse several workers on a backend that would give each its own sessions."""
    settings = host.config.server
    if settings.workers > 1 and not host.backend.shared:
        raise ConfigError(
            f"{settings.workers} workers need a shared state backend; the in-memory backend "
            f"({type(host.backend).__name__}) would give each worker its own sessions, so a client would get "
            "'Session not found' whenever another worker answered. Install mcphost-redis and set "
            "[plugins.redis] url (or MCPHOST_REDIS_URL), or run one worker.")


class _Config(HypercornConfig):
    """Hypercorn's config, with a kernel limit on how long a connection may sit on unsent data."""

    #: Milliseconds for TCP_USER_TIMEOUT on every listening socket (its connections inherit it).
    user_timeout_ms = 0
    #: Per protocol: the second the headers below were made for, and those headers.
    _made: dict[str, tuple[int, list[tuple[bytes, bytes]]]]
    #: The sockets Hypercorn accepts on (set when it creates them).
    listening: list[socket.socket] = []

    def response_headers(self, protocol: str) -> list[tuple[bytes, bytes]]:
        """The headers Hypercorn adds to every response (``Date``), made once a second rather
        than for every response (formatting the date is most of their cost)."""
        second = int(time.time())
        made = self.__dict__.setdefault("_made", {}).get(protocol)
        if made is None or made[0] != second:
            made = (second, super().response_headers(protocol))
            self._made[protocol] = made
        return list(made[1])

    def create_sockets(self) -> Any:
        sockets = super().create_sockets()
        self.listening = list(sockets.insecure_sockets)  # a retired worker stops accepting on them
        if self.user_timeout_ms and hasattr(socket, "TCP_USER_TIMEOUT"):  # Linux
            for sock in sockets.insecure_sockets:
                if sock.family in (socket.AF_INET, socket.AF_INET6):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, self.user_timeout_ms)
        return sockets


def hypercorn_config(host: Host, sock: socket.socket | None = None) -> _Config:
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


async def serve_http(host: Host, *, ready: Any = None, sock: socket.socket | None = None,
                     ready_fd: int | None = None) -> None:
    """Serve ``host`` over HTTP until SIGINT/SIGTERM, then shut down gracefully.

    ``sock``: an already listening socket (a worker of :func:`run_workers`). ``ready_fd``: a
    pipe to write one byte to once the host has started (how the supervisor knows that a
    replacement worker serves before it stops the worker it replaces).
    """
    app = create_app(host, freeze_gc=True)
    if ready_fd is not None:
        asyncio.get_running_loop().create_task(_announce_ready(host, ready_fd))
    config = hypercorn_config(host, sock)
    stop = asyncio.Event()
    second = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if stop.is_set():
            second.set()
        stop.set()

    def on_retire() -> None:
        """SIGUSR1, from the supervisor replacing this worker (SIGHUP): the other workers accept on
        the shared socket, so this one stops accepting at once, then drains and stops as on SIGTERM.
        A connection it accepted late in its drain would be closed before its request was read."""
        for listening in config.listening:
            loop.remove_reader(listening.fileno())
        log.info("retiring: no longer accepting connections; draining what is open")
        on_signal()

    retire = getattr(signal, "SIGUSR1", None)  # none on Windows
    for sig, handler in ((signal.SIGINT, on_signal), (signal.SIGTERM, on_signal), (retire, on_retire)):
        try:
            if sig is not None:
                loop.add_signal_handler(sig, handler)
        except (NotImplementedError, RuntimeError):
            pass
    log.info("serving MCP on http://%s:%s%s", host.config.server.host, host.config.server.port,
             host.config.server.path)

    drain = host.config.server.shutdown_drain
    if drain is None:
        drain = DEFAULT_DRAIN if host.backend.shared else 0.0

    async def shutdown_trigger() -> None:
        await stop.wait()
        if drain and host.started:
            # Still serving, but /readyz says 503: the balancer stops sending before the socket closes.
            app.draining = True
            log.info("draining for %ss before shutting down", drain)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(drain):
                    await second.wait()  # a second signal stops at once
        # Hypercorn waits for open connections before the lifespan shutdown runs, so every stream
        # is told now: SSE streams end with a retry hint (clients resume here once back, or
        # elsewhere), listen streams with their result.
        app.begin_shutdown()  # streams end now, not after graceful_timeout

    await hypercorn_serve(app, config, shutdown_trigger=shutdown_trigger)  # type: ignore[arg-type]  # Hypercorn types ASGI messages as its TypedDicts; ours are dicts
    await exit_if_abandoned()  # a hook that ignores its cancellation must not keep the process


async def _announce_ready(host: Host, fd: int) -> None:
    while not host.started:
        await asyncio.sleep(0.05)
    with contextlib.suppress(OSError):
        os.write(fd, b"1")
        os.close(fd)


def listening_socket(host_name: str, port: int) -> socket.socket:
    """The socket every worker accepts on (inheritable across fork)."""
    family = socket.AF_INET6 if ":" in host_name else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host_name.strip("[]"), port))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


class _Reload(Exception):
    """SIGHUP reached the supervisor: replace the workers one at a time."""


#: Seconds a replacement worker may take to start before the reload gives up on it.
WORKER_START_TIMEOUT = 60.0


def worker_command(fd: int, ready_fd: int) -> list[str]:
    """The command line of a fresh worker process: this same ``mcphost`` invocation (config,
    plugin selection, serve options) told to serve on the inherited socket ``fd``."""
    return [sys.executable, sys.argv[0], *sys.argv[1:], "--worker-fd", str(fd), "--ready-fd", str(ready_fd)]


def run_workers(host: Host, workers: int) -> int:
    """Fork ``workers`` processes serving ``host`` on one socket and supervise them; the exit code.

    SIGHUP replaces the workers one at a time with fresh processes (a new interpreter that loads
    the plugin packages installed now): each replacement serves before the worker it replaces
    is stopped gracefully (drain, then finish what runs), so clients notice nothing; a
    replacement that does not start keeps the old worker. A new worker whose catalog differs
    from the one served before tells connected clients (list_changed).
    """
    settings = host.config.server
    supervisor = _Supervisor(host, listening_socket(settings.host, settings.port), workers)
    signal.signal(signal.SIGTERM, supervisor.stop)
    signal.signal(signal.SIGINT, supervisor.stop)
    signal.signal(signal.SIGHUP, supervisor.on_hup)
    log.info("serving MCP on http://%s:%s%s with %d workers", settings.host, settings.port, settings.path, workers)
    for number in range(workers):
        supervisor.spawn(number)
    try:
        return supervisor.supervise()
    finally:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        supervisor.sock.close()


class _Supervisor:
    """The worker processes of :func:`run_workers`: started, replaced on SIGHUP, restarted when
    they die (unless they keep dying), stopped on SIGTERM or SIGINT."""

    def __init__(self, host: Host, sock: socket.socket, workers: int) -> None:
        self.host = host
        self.sock = sock
        self.workers = workers
        self.children: dict[int, int] = {}  # pid -> worker number
        self.retired: set[int] = set()  # replaced workers still finishing
        self.stopping = False
        self.fresh = False  # after a reload, replacements for dead workers are fresh processes too
        self.restarts: list[float] = []
        self.code = 0

    def spawn(self, number: int) -> None:
        """Fork worker ``number`` from this process (its plugins as loaded here)."""
        pid = os.fork()
        if pid == 0:  # the worker
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)  # for the supervisor only
            code = 0
            try:
                asyncio.run(serve_http(self.host, sock=self.sock))
            except KeyboardInterrupt:
                pass
            except BaseException:
                log.exception("worker %d failed", number)
                code = 1
            finally:
                logging.shutdown()
                os._exit(code)
        self.children[pid] = number

    def spawn_fresh(self, number: int) -> int | None:
        """Start a fresh worker process; its pid once it serves, None if it did not start."""
        sock = self.sock
        read_end, write_end = os.pipe()
        os.set_inheritable(write_end, True)
        try:
            process = subprocess.Popen(worker_command(sock.fileno(), write_end), pass_fds=(sock.fileno(), write_end))
        except OSError:
            log.exception("could not start a new worker")
            os.close(read_end)
            os.close(write_end)
            return None
        os.close(write_end)
        try:
            started, _, _ = select.select([read_end], [], [], WORKER_START_TIMEOUT)
            ok = bool(started) and os.read(read_end, 1) == b"1"
        finally:
            os.close(read_end)
        if not ok:
            log.error("the new worker (pid %d) did not start within %ss; keeping the old one",
                      process.pid, WORKER_START_TIMEOUT)
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            self.retired.add(process.pid)
            return None
        self.children[process.pid] = number
        return process.pid

    def reload(self) -> None:
        """Replace the workers one at a time with fresh processes (SIGHUP)."""
        self.fresh = True
        log.info("SIGHUP: replacing %d workers one at a time", len(self.children))
        for pid, number in list(self.children.items()):
            if self.stopping:
                return
            if self.spawn_fresh(number) is None:
                return  # the rest keep running as they are
            self.children.pop(pid, None)
            self.retired.add(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR1)  # stops accepting, drains, finishes what runs, exits
            log.info("worker %d replaced (pid %d stopping)", number, pid)

    def stop(self, signum: int, _frame: Any) -> None:
        self.stopping = True
        for pid in [*self.children, *self.retired]:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def on_hup(self, signum: int, _frame: Any) -> None:
        if not self.stopping:
            raise _Reload

    def supervise(self) -> int:
        """Wait for workers to exit until none is left; the exit code."""
        while self.children or self.retired:
            try:
                pid, status = os.wait()
            except _Reload:
                try:
                    self.reload()
                except _Reload:
                    log.warning("SIGHUP during a reload: ignored")
                continue
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            self.exited(pid, os.waitstatus_to_exitcode(status))
        return self.code

    def exited(self, pid: int, exit_code: int) -> None:
        """Worker ``pid`` exited: restart it, unless stopping or the workers keep dying."""
        self.retired.discard(pid)
        number = self.children.pop(pid, None)
        if number is None:
            return
        if self.stopping:
            self.code = self.code or (exit_code if exit_code > 0 else 0)
            return
        now = time.monotonic()
        self.restarts = [t for t in self.restarts if now - t < 60] + [now]
        if len(self.restarts) > 5 * self.workers:  # crashing in a loop: give up rather than spin
            log.error("workers keep dying (last exit %s); stopping", exit_code)
            self.stop(signal.SIGTERM, None)
            self.code = 1
            return
        log.error("worker %d (pid %d) exited with %s; starting a new one", number, pid, exit_code)
        if not self.fresh:
            self.spawn(number)
        elif self.spawn_fresh(number) is None:
            self.restarts.append(now)
