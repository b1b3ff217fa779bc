"""Test kit for plugin authors (a pytest plugin, registered through the ``pytest11`` entry point).

``MemoryClient`` speaks the same JSON-RPC messages a real MCP client sends, straight into the
kernel without a transport, and answers elicitation, sampling and roots requests with the
callbacks you give it. Fixtures:

- ``mcphost_host(*plugins, config=None)`` builds a :class:`~mcphost.host.Host` from plugin
  objects (modules or instances with ``@mcphost.hookimpl`` functions), without entry points.
- ``mcphost_client(host, **options)`` returns a MemoryClient for it; use ``async with``.

``free_port()`` is a loopback port nothing listens on, for a server a test starts; under
pytest-xdist each worker takes its ports from a block of its own, below the ephemeral range.

``app_client(config)`` is an httpx client of the real ASGI app in this process: no socket, no
server, no subprocess. The app's lifespan runs around the block (startup hooks on entry, the
shutdown on exit), as under ``mcphost serve``. ``running_app(config)`` is the started app alone,
for tests that call it with hand-made ASGI messages.

``serve_http(host)`` runs the real HTTP app (Hypercorn, the same wiring as ``mcphost serve``)
in the test's own event loop on a free loopback port, for tests that need real HTTP requests
over a socket (streams read as they arrive, connection behaviour) and in-process access to what
the plugins recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from mcphost.config import Config, config_from_dict
from mcphost.host import Host
from mcphost.kernel.driver import SessionDriver
from mcphost.protocol.errors import McpError
from mcphost.protocol.versions import LATEST_LEGACY
from mcphost.sessions.session import Connection, Session

if TYPE_CHECKING:
    import httpx

    from mcphost.app import McpApp

Callback = Callable[[dict[str, Any]], Any]


class MemoryClient:
    """An in-process MCP client for one session of ``host``.

    ``sent`` records every message the host sent, paired with the method of the request it
    answers (``None`` for notifications and server requests), for schema checks.
    """

    def __init__(self, host: Host, *, protocol_version: str = LATEST_LEGACY,
                 capabilities: dict[str, Any] | None = None, client_info: dict[str, Any] | None = None,
                 elicitation: Callback | None = None, sampling: Callback | None = None,
                 roots: list[dict[str, Any]] | Callback | None = None, initialize: bool = True,
                 connection: Connection | None = None) -> None:
        self.host = host
        self.connection = connection or Connection(transport="memory")
        self.protocol_version = protocol_version
        self.client_info = client_info or {"name": "mcphost-memory-client", "version": "0"}
        caps = dict(capabilities or {})
        if elicitation is not None:
            # URL mode exists from 2025-11-25; before that the capability is an empty object.
            caps.setdefault("elicitation", {"form": {}, "url": {}} if protocol_version >= "2025-11-25" else {})
        if sampling is not None:
            caps.setdefault("sampling", {})
        if roots is not None:
            caps.setdefault("roots", {"listChanged": True})
        self.capabilities = caps
        self.handlers: dict[str, Any] = {"elicitation/create": elicitation, "sampling/createMessage": sampling,
                                         "roots/list": roots}
        self.auto_initialize = initialize
        self.session: Session | None = None
        self.driver: SessionDriver | None = None
        self.notifications: list[dict[str, Any]] = []
        self.sent: list[tuple[dict[str, Any], str | None]] = []
        self.server_requests: list[dict[str, Any]] = []
        self.initialize_result: dict[str, Any] | None = None
        self._ids = itertools.count(1)
        self._methods: dict[Any, str] = {}
        self._started_host = False
        self._background: set[asyncio.Task[Any]] = set()

    async def __aenter__(self) -> MemoryClient:
        if not self.host._started:
            await self.host.start()
            self._started_host = True
        assert self.host.kernel is not None
        # The kernel's session driver opens, runs and closes the session, as for stdio. Like stdio,
        # an in-memory client is local; one posing as HTTP is treated as a network client.
        self.driver = SessionDriver(self.host.kernel, self.connection, self._receive,
                                    trusted=self.connection.transport != "http")
        self.session = self.driver.session
        try:
            # The one refusal rule: disconnect and terminate ("refused") fire at once, the session ends.
            await self.driver.open()
        except BaseException:
            await self.driver.close("eof", end="eof")  # nothing fires after a refusal
            if self._started_host:
                await self.host.stop()
            raise
        if self.auto_initialize:
            await self.initialize()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in list(self._background):
            task.cancel()
        if self.driver is not None:
            await self.driver.close("eof", end="eof")
        if self._started_host:
            await self.host.stop()

    # -- the wire, in memory ------------------------------------------------------------------

    async def _receive(self, message: dict[str, Any], related: Any) -> None:
        self.sent.append((message, None))
        if "method" in message and "id" in message:
            self.server_requests.append(message)
            task = asyncio.get_running_loop().create_task(self._answer(message))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        else:
            self.notifications.append(message)

    async def _answer(self, request: dict[str, Any]) -> None:
        handler = self.handlers.get(request["method"])
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        try:
            if handler is None:
                raise McpError(-32601, f"Method not found: {request['method']}")
            if isinstance(handler, list):
                result: Any = {"roots": handler}
            else:
                result = handler(request.get("params") or {})
                if inspect.isawaitable(result):
                    result = await result
            reply["result"] = result
        except McpError as exc:
            reply["error"] = exc.to_error()
        self.send(reply)

    def send(self, message: Any) -> asyncio.Future[Any] | None:
        """Hand a raw message to the kernel; returns the reply future for requests."""
        assert self.driver is not None
        return self.driver.receive(message)

    async def raw_request(self, method: str, params: dict[str, Any] | None = None, *,
                          request_id: Any = None) -> dict[str, Any] | None:
        """Send a request and return the whole reply message (result or error); None if it was cancelled."""
        request_id = next(self._ids) if request_id is None else request_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        future = self.send(message)
        assert future is not None
        reply: dict[str, Any] | None = await future
        if reply is not None:
            self.sent.append((reply, method))
        return reply

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request; return its result or raise McpError with the server's error."""
        reply = await self.raw_request(method, params)
        if reply is None:
            raise asyncio.CancelledError(f"{method} was cancelled")
        if "error" in reply:
            error = reply["error"]
            raise McpError(error["code"], error["message"], error.get("data"))
        return cast("dict[str, Any]", reply["result"])

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    # -- MCP operations -------------------------------------------------------------------------

    async def initialize(self) -> dict[str, Any]:
        self.initialize_result = await self.request("initialize", {
            "protocolVersion": self.protocol_version, "capabilities": self.capabilities,
            "clientInfo": self.client_info})
        self.protocol_version = self.initialize_result["protocolVersion"]
        self.notify("notifications/initialized")
        return self.initialize_result

    async def list_tools(self) -> list[dict[str, Any]]:
        return await self._all_pages("tools/list", "tools")

    async def _all_pages(self, method: str, key: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor = None
        while True:
            result = await self.request(method, {"cursor": cursor} if cursor else {})
            items.extend(result[key])
            cursor = result.get("nextCursor")
            if not cursor:
                return items

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, *,
                        progress_token: Any = None) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        if progress_token is not None:
            params["_meta"] = {"progressToken": progress_token}
        return await self.request("tools/call", params)

    async def list_resources(self) -> list[dict[str, Any]]:
        return await self._all_pages("resources/list", "resources")

    async def list_resource_templates(self) -> list[dict[str, Any]]:
        return await self._all_pages("resources/templates/list", "resourceTemplates")

    async def read_resource(self, uri: str) -> dict[str, Any]:
        return await self.request("resources/read", {"uri": uri})

    async def list_prompts(self) -> list[dict[str, Any]]:
        return await self._all_pages("prompts/list", "prompts")

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> dict[str, Any]:
        return await self.request("prompts/get", {"name": name, "arguments": arguments or {}})

    async def complete(self, ref: dict[str, Any], name: str, value: str,
                       context: dict[str, str] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"ref": ref, "argument": {"name": name, "value": value}}
        if context is not None:
            params["context"] = {"arguments": context}
        return cast("dict[str, Any]", (await self.request("completion/complete", params))["completion"])


def make_host(*plugins: Any, config: Config | dict[str, Any] | None = None) -> Host:
    """A Host serving exactly ``plugins`` (plus built-ins), ignoring installed entry points.

    A plugin is an object or a ``(name, object)`` pair; the name is what ``[plugins.<name>]``
    config sections and block lists refer to (default: the module name or class name).
    """
    if isinstance(config, dict):
        config = config_from_dict(config)
    named = [p if isinstance(p, tuple) else (getattr(p, "__name__", None) or f"{type(p).__name__}-{i}", p)
             for i, p in enumerate(plugins)]
    return Host(config, plugins=named, entry_points=False)


#: Under pytest-xdist, worker ``gwN`` takes its ports from ``[BASE + N * BLOCK, BASE + (N + 1) * BLOCK)``:
#: below Linux's ephemeral range (32768 and up), so neither another worker's server nor an outgoing
#: connection's local port can take a port between the check here and the server's own bind.
PORT_BLOCK_BASE = 20000
PORT_BLOCK = 1000
_port_offsets = itertools.count(random.randrange(PORT_BLOCK))  # two runs at once start apart


def free_port() -> int:
    """A loopback TCP port nothing listens on now, for a server about to start.

    Outside pytest-xdist (or past 12 workers) the kernel picks one (``bind`` to port 0).
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    number = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else -1
    if 0 <= number < 12:
        base = PORT_BLOCK_BASE + number * PORT_BLOCK
        for _ in range(PORT_BLOCK):
            port = base + next(_port_offsets) % PORT_BLOCK
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue  # in use, or lingering after an earlier test: the next one
                return port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds the socket listening on loopback TCP ``port``.

    A port that accepts connections may be another program's: one that took the port between
    :func:`free_port`'s probe and this process's bind (other test runs on the machine probe the
    same blocks), while this one failed to bind. Read from ``/proc`` (Linux); True where there is
    none (the port accepting is then all there is to go by).
    """
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local address "ADDR:PORT" (hex), state 0A is LISTEN, inode is the tenth field
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rpartition(":")[2], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    if not Path("/proc/net/tcp").exists():
        return True
    for process in _family(pid):  # the process or a child of it (a supervisor's worker)
        try:
            entries = list(Path(f"/proc/{process}/fd").iterdir())
        except OSError:
            continue
        for entry in entries:
            with contextlib.suppress(OSError):
                if os.readlink(entry) in inodes:
                    return True
    return False


def _family(pid: int) -> list[int]:
    """``pid`` and its descendants, from ``/proc/<pid>/task/*/children``."""
    family, index = [pid], 0
    while index < len(family):
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{family[index]}/task").iterdir():
                with contextlib.suppress(OSError):
                    family.extend(int(child) for child in (task / "children").read_text().split())
        index += 1
    return family


class ServeProcess:
    """``mcphost serve`` as its own process on a free loopback port, for tests that need the real
    command (its config file, plugin loading, signals): ``url`` is the MCP endpoint, ``base`` the
    origin, ``log()`` what it printed. ``plugins`` is the allow list (``MCPHOST_PLUGINS``);
    ``{url}`` in ``config`` is replaced by the endpoint's URL; ``extra_path`` goes first on
    ``PYTHONPATH`` (a plugin distribution made for the test). Call ``stop()`` when done.
    """

    def __init__(self, tmp_path: Path, config: str = "", *, plugins: str, path: str = "/mcp",
                 extra_path: Path | None = None, startup_timeout: float = 60.0) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = self.base + path
        config_file = tmp_path / f"mcphost-{self.port}.toml"
        config_file.write_text(config.replace("{url}", self.url), encoding="utf-8")
        self.log_path = tmp_path / f"mcphost-{self.port}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCPHOST_")}
        env.update({"MCPHOST_CONFIG": str(config_file), "MCPHOST_PLUGINS": plugins})
        if extra_path is not None:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(extra_path), env.get("PYTHONPATH")]))
        command = [str(Path(sys.executable).parent / "mcphost"), "serve", "--port", str(self.port), "--path", path]
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(command, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + startup_timeout  # generous: parallel test workers start it slowly
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"mcphost serve exited with {self.process.returncode}:\n{self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    pass
                if listens_on(self.process.pid, self.port):  # not another program on the port
                    break
                raise OSError("the port is not this server's (yet)")
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"mcphost serve did not start:\n{self.log()}") from None
                time.sleep(0.05)

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        """SIGTERM, as an operator stops it; killed if it has not exited within 15 s."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._log.close()


AppTarget = Host | Config | Mapping[str, Any] | None


def _host_of(target: AppTarget) -> Host:
    """``target`` as a Host: a Host as is; a Config or a config mapping (``{"server": ...,
    "plugins": ...}``, read without the environment) served by the installed plugins."""
    if isinstance(target, Host):
        return target
    if target is None or isinstance(target, Mapping):
        target = config_from_dict(dict(target or {}), env={})
    return Host(target)


@contextlib.asynccontextmanager
async def running_app(target: AppTarget = None, *, timeout: float = 30.0) -> AsyncIterator[McpApp]:
    """The ASGI app serving ``target`` (see :func:`app_client`), its lifespan started.

    Startup runs through the ASGI lifespan protocol, as Hypercorn drives it (the host's start,
    startup hooks, the transport's start); a failed startup raises ``RuntimeError`` with its
    message. On exit open streams are told to end (as on SIGTERM), then the lifespan shuts down.
    """
    from mcphost.app import create_app

    app = create_app(_host_of(target))
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}

    async def receive() -> dict[str, Any]:
        return await inbox.get()

    async def send(message: dict[str, Any]) -> None:
        await outbox.put(message)

    lifespan = asyncio.get_running_loop().create_task(app(scope, receive, send))

    async def answer(event: str) -> None:
        await inbox.put({"type": f"lifespan.{event}"})
        reply = asyncio.ensure_future(outbox.get())
        done, _ = await asyncio.wait({reply, lifespan}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if reply not in done:
            reply.cancel()
            if lifespan in done:
                lifespan.result()  # the app raised: raise it here
            raise RuntimeError(f"the app's lifespan {event} did not finish within {timeout}s")
        message = reply.result()
        if message["type"] != f"lifespan.{event}.complete":
            raise RuntimeError(f"lifespan {event} failed: {message.get('message', message)}")

    try:
        await answer("startup")
    except BaseException:
        lifespan.cancel()
        with contextlib.suppress(BaseException):
            await lifespan
        raise
    try:
        yield app
    finally:
        app.begin_shutdown()
        try:
            await answer("shutdown")
        finally:
            if not lifespan.done():
                lifespan.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await lifespan


@contextlib.asynccontextmanager
async def app_client(target: AppTarget = None, *, base_url: str = "http://127.0.0.1:8000",
                     client: tuple[str, int] = ("127.0.0.1", 50000),
                     **options: Any) -> AsyncIterator[httpx.AsyncClient]:
    """An ``httpx.AsyncClient`` of the real ASGI app of ``target``, in this process.

    ``target`` is a Host, a :class:`~mcphost.config.Config` or a config mapping
    (``{"server": {...}, "plugins": {"allow": ["demo"]}}``, read without the environment; a Config
    or mapping is served by the installed plugins). Requests go through httpx's ASGI transport:
    no socket, no port, no process. The app's lifespan runs around the block (see
    :func:`running_app`); the client's ``app`` attribute is the app, ``app.host`` the Host.

    ``base_url`` must be a loopback address unless ``[server] allowed_hosts`` says otherwise (the
    host header check); ``client`` is the peer address the app sees. httpx's ASGI transport
    returns a response once the app has finished it: read SSE streams that end (a POST's answer),
    not ones held open (a session's GET stream; use :func:`serve_http` for those).
    """
    import httpx

    async with running_app(target) as app:
        transport = httpx.ASGITransport(app=app, client=client)  # type: ignore[arg-type]  # httpx types ASGI apps with its own callables
        async with httpx.AsyncClient(transport=transport, base_url=base_url, **options) as http:
            http.app = app  # type: ignore[attr-defined]
            yield http


class LiveServer:
    """A running in-process HTTP server: ``url`` is the MCP endpoint, ``base`` the origin."""

    def __init__(self, app: Any, port: int, path: str) -> None:
        self.app = app
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.url = self.base + path


@contextlib.asynccontextmanager
async def serve_http(host: Host, *, graceful_timeout: float = 2.0) -> AsyncIterator[LiveServer]:
    """Serve ``host`` over real HTTP in this event loop until the block ends.

    Startup and shutdown run the host's lifespan (startup hooks, then on exit the transport's
    and host's stop). Use an async HTTP client: a blocking one would stall the loop serving it.
    """
    from hypercorn.asyncio import serve

    from mcphost.app import create_app
    from mcphost.serve import hypercorn_config

    app = create_app(host)
    config = hypercorn_config(host)
    port = free_port()
    config.bind = [f"127.0.0.1:{port}"]
    config.graceful_timeout = graceful_timeout
    stop = asyncio.Event()

    async def shutdown_trigger() -> None:
        await stop.wait()
        app.begin_shutdown()

    task = asyncio.get_running_loop().create_task(serve(app, config, shutdown_trigger=shutdown_trigger))  # type: ignore[arg-type]  # Hypercorn types ASGI messages as its TypedDicts; ours are dicts
    try:
        for _ in range(400):
            if task.done():
                task.result()  # startup failed: raise its error here
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.025)
                continue
            writer.close()
            await writer.wait_closed()
            break
        else:
            raise RuntimeError(f"the in-process server did not listen on port {port}")
        yield LiveServer(app, port, host.config.server.path)
    finally:
        stop.set()
        await asyncio.wait_for(task, graceful_timeout + 10)


@pytest.fixture
def mcphost_host() -> Iterator[Callable[..., Host]]:
    """Factory fixture: ``mcphost_host(plugin, ..., config={...})`` builds a prepared Host."""

    def factory(*plugins: Any, config: Config | dict[str, Any] | None = None) -> Host:
        host = make_host(*plugins, config=config)
        host.prepare()
        return host

    yield factory


@pytest.fixture
def mcphost_client() -> Callable[..., MemoryClient]:
    """Factory fixture: ``async with mcphost_client(host, elicitation=...) as client: ...``."""
    return MemoryClient


__all__ = ["LiveServer", "MemoryClient", "ServeProcess", "app_client", "free_port", "make_host", "mcphost_client",
           "mcphost_host", "running_app", "serve_http"]
