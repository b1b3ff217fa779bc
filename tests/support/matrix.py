"""The interaction matrix: one client API over every transport and protocol era.

A :class:`Cell` is a transport (``memory``, ``stdio``, ``http``) and an era (``2025-11-25``, a
session opened with ``initialize``; ``2026-07-28``, stateless requests carrying ``_meta``).
:func:`open_client` connects a :class:`Client` for a cell to a host serving the demo and
conformance plugins:

- ``memory``: a host in the test's own process. Session era through :class:`mcphost.testing.MemoryClient`
  (the test kit plugin authors use); 2026-07-28 through ``Kernel.serve``, the one entry every
  transport calls, with an exchange that is trusted and has no headers, as stdio's;
- ``stdio``: a real ``mcphost serve --stdio`` (shared per era and capabilities, see :class:`StdioPool`),
  spoken to with JSON lines (:class:`tests.support.stdio_support.RawServer`);
- ``http``: a real ``mcphost serve`` (one per test session, see ``tests/interaction/conftest.py``),
  spoken to with httpx; session era with ``Mcp-Session-Id``, 2026-07-28 with the SEP-2243 headers.

Every client speaks in whole JSON-RPC replies (``request``), so a test asserts the same thing in
every cell; where transports legitimately differ (HTTP statuses, who is trusted), the test says so
per cell with :attr:`Client.cell`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from mcphost.protocol.errors import McpError
from tests.support.http_support import ACCEPT_BOTH, HttpServer
from tests.support.stdio_support import RawServer, server_env

TRANSPORTS = ("memory", "stdio", "http")
SESSION_ERA = "2025-11-25"
MODERN = "2026-07-28"
ERAS = (SESSION_ERA, MODERN)
TASKS = "io.modelcontextprotocol/tasks"
PLUGINS = "demo,conformance"
CLIENT_INFO = {"name": "matrix-test", "version": "0"}
_STDIO_IDS = itertools.count(1)  # unique across the clients of a shared stdio process

#: Answers a server request (elicitation, sampling, roots) in the session era: request -> result.
Answer = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Cell:
    transport: str
    era: str

    @property
    def id(self) -> str:
        return f"{self.transport}-{self.era}"

    @property
    def modern(self) -> bool:
        return self.era == MODERN


CELLS = tuple(Cell(transport, era) for transport in TRANSPORTS for era in ERAS)


def modern_headers(method: str, params: dict[str, Any]) -> dict[str, str]:
    """The standard headers of a 2026-07-28 POST (SEP-2243): version, method, and the name if any."""
    headers = {"content-type": "application/json", "accept": ACCEPT_BOTH, "MCP-Protocol-Version": MODERN,
               "Mcp-Method": method}
    target = params.get("taskId") if method.startswith("tasks/") else params.get("name", params.get("uri"))
    if isinstance(target, str):
        headers["Mcp-Name"] = target
    return headers


class Client:
    """One client of a cell. ``request`` returns the whole reply (result or error).

    ``notifications`` holds what the server sent that is no reply; ``server_requests`` the
    requests it asked this client (session era). ``status`` is the HTTP status of the last
    reply (None on the other transports).
    """

    def __init__(self, cell: Cell, *, capabilities: dict[str, Any] | None, tasks: bool, answer: Answer | None
                 ) -> None:
        self.cell = cell
        self.answer = answer
        self.notifications: list[dict[str, Any]] = []
        self.server_requests: list[dict[str, Any]] = []
        self.status: int | None = None
        self._ids = 0
        if cell.modern:
            caps = dict(capabilities if capabilities is not None else {"elicitation": {}, "sampling": {}})
            if tasks:
                caps["extensions"] = {**caps.get("extensions", {}), TASKS: {}}
            self.capabilities = caps
        else:
            self.capabilities = dict(capabilities if capabilities is not None else
                                     ({"elicitation": {}, "sampling": {}} if answer else {}))

    def next_id(self) -> int:
        self._ids += 1
        self.last_id: Any = self._ids
        return self._ids

    def params(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        """``params`` as this era sends them: 2026-07-28 adds the version and capabilities in ``_meta``."""
        if not self.cell.modern:
            return params
        out = dict(params or {})
        out["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                        "io.modelcontextprotocol/clientCapabilities": self.capabilities, **out.get("_meta", {})}
        return out

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        raise NotImplementedError

    async def result(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = await self.request(method, params)
        assert "result" in reply, f"{method} failed in {self.cell.id}: {reply}"
        return reply["result"]  # type: ignore[no-any-return]

    async def error(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = await self.request(method, params)
        assert "error" in reply, f"{method} did not fail in {self.cell.id}: {reply}"
        return reply["error"]  # type: ignore[no-any-return]

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        """``tools/call``; its result (``extra``: more params, such as ``requestState``)."""
        return await self.result("tools/call", {"name": name, "arguments": arguments or {}, **extra})

    async def send(self, message: Any) -> None:
        """Send one message that gets no reply (a notification, a response); assert none came back."""
        raise NotImplementedError

    async def close(self) -> None:
        return None


# -- memory ---------------------------------------------------------------------------------------

def memory_host(config: dict[str, Any] | None = None) -> Any:
    """A host in this process with the demo and conformance plugins, as the servers have them."""
    import mcphost_demo
    from mcphost_conformance import ConformancePlugin

    from mcphost.testing import make_host

    config = dict(config or {})  # the conformance plugin is dormant unless configured
    config["plugins"] = {**config.get("plugins", {}), "conformance": {
        "enabled": True, **config.get("plugins", {}).get("conformance", {})}}
    host = make_host(("demo", mcphost_demo), ("conformance", ConformancePlugin()), config=config)
    host.prepare()
    return host


class _Exchange:
    """One 2026-07-28 request handed to ``Kernel.serve``: trusted and without headers, as on stdio."""

    headers = None
    session_id = None
    era = None
    trusted = True

    def __init__(self, client: MemoryModernClient) -> None:
        self.client = client
        self.connection = client.connection
        self.answer: Any = None

    async def send(self, message: dict[str, Any], related: Any) -> None:
        self.client.notifications.append(message)

    async def reply(self, reply: Any) -> str:
        if reply is not None:
            self.answer = await reply
        return "complete"

    def legacy(self, message: Any) -> None:  # pragma: no cover - every message here carries the 2026 _meta
        raise AssertionError(f"a session-era message in a 2026-07-28 cell: {message}")


class MemoryModernClient(Client):
    async def start(self) -> None:
        from mcphost.sessions.session import Connection

        self.host = memory_host()
        self.connection = Connection(transport="memory")
        await self.host.start()

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        request_id = self.next_id()
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": self.params(params)}
        exchange = _Exchange(self)
        try:
            await self.host.kernel.serve(message, exchange)
        except McpError as exc:  # invalid, worded as stdio words it
            return {"jsonrpc": "2.0", "id": request_id, "error": exc.to_error()}
        return exchange.answer  # type: ignore[no-any-return]

    async def close(self) -> None:
        await self.host.stop()


class MemorySessionClient(Client):
    async def start(self) -> None:
        from mcphost.testing import MemoryClient

        def handler(method: str) -> Any:
            if self.answer is None:
                return None

            def handle(params: dict[str, Any]) -> dict[str, Any]:
                request = {"method": method, "params": params}
                self.server_requests.append(request)
                return self.answer(request)  # type: ignore[misc]

            return handle

        self.memory = MemoryClient(memory_host(), protocol_version=SESSION_ERA, capabilities=self.capabilities,
                                   client_info=CLIENT_INFO, elicitation=handler("elicitation/create"),
                                   sampling=handler("sampling/createMessage"), roots=handler("roots/list"))
        self.memory.notifications = self.notifications
        await self.memory.__aenter__()

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.memory.raw_request(method, params, request_id=self.next_id())

    async def send(self, message: Any) -> None:
        assert self.memory.send(message) is None, message

    async def close(self) -> None:
        await self.memory.__aexit__(None, None, None)


# -- stdio ----------------------------------------------------------------------------------------

class StdioClient(Client):
    """A client of a shared ``mcphost serve --stdio`` (see :class:`StdioPool`)."""

    async def start(self, pool: StdioPool) -> None:
        self.server = await asyncio.to_thread(pool.get, self.cell, self.capabilities)
        self.server.notifications = self.notifications
        self.server.server_requests = self.server_requests

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.answer is not None
        return self.answer(request)

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.last_id = f"m{next(_STDIO_IDS)}"
        # A generous wait for the reply (RawServer's default is 10 s): a shared stdio process on a loaded CI
        # machine (4 xdist workers on 2 busy cores) answered later than that.
        return await asyncio.to_thread(self.server.request, method, self.params(params), request_id=self.last_id,
                                       answer=self._answer if self.answer else None, timeout=60.0)

    async def send(self, message: Any) -> None:
        """On stdio "no reply" shows as the next line being the reply to a ping sent after it."""
        before = len(self.server.received)
        self.server.send(message)
        reply = await asyncio.to_thread(self.server.request, "ping", None, request_id=f"m{next(_STDIO_IDS)}")
        assert self.server.received[before:] == [reply], self.server.received[before:]
        await asyncio.to_thread(self.server.expect_silence, 0.2)

    async def close(self) -> None:
        assert self.server.proc.poll() is None, f"the server exited; stderr:\n{self.server.stderr[-3000:]}"


class StdioPool:
    """``mcphost serve --stdio`` processes shared by the stdio cells of a test run, one per era and
    client capabilities (a process is one session: its ``initialize`` fixes them). Starting one
    costs a second or two; sharing keeps the matrix as fast as the per-transport files were.
    ``close`` ends each with EOF and checks it exits 0."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.servers: dict[tuple[str, str], RawServer] = {}

    def get(self, cell: Cell, capabilities: dict[str, Any]) -> RawServer:
        key = (cell.era, json.dumps(capabilities, sort_keys=True))
        if key not in self.servers:
            server = RawServer(server_env(self.root, extra={"MCPHOST_PLUGINS": PLUGINS}))
            if not cell.modern:
                # The first reply waits for the process to start: slow on a loaded CI machine.
                server.initialize(SESSION_ERA, capabilities, timeout=60.0)
            self.servers[key] = server
        return self.servers[key]

    def close(self) -> None:
        codes = {}
        for key, server in self.servers.items():
            try:
                codes[key] = server.close()
            finally:
                server.kill()
        assert set(codes.values()) <= {0}, codes


# -- HTTP -----------------------------------------------------------------------------------------

class HttpClient(Client):
    async def start(self, server: HttpServer) -> None:
        self.server = server
        self.http = httpx.AsyncClient(timeout=30)
        self.session_id: str | None = None
        if not self.cell.modern:
            reply = await self.request("initialize", {"protocolVersion": SESSION_ERA,
                                                      "capabilities": self.capabilities, "clientInfo": CLIENT_INFO})
            assert "result" in reply, reply
            await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"}, {})

    def _headers(self, message: dict[str, Any]) -> dict[str, str]:
        if self.cell.modern:
            return modern_headers(message.get("method", ""), message.get("params") or {})
        headers = {"content-type": "application/json", "accept": ACCEPT_BOTH}
        if self.session_id is not None:
            headers.update({"mcp-session-id": self.session_id, "mcp-protocol-version": SESSION_ERA})
        return headers

    async def _post(self, message: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
        return await self.http.post(self.server.url, headers=headers or self._headers(message),
                                    content=json.dumps(message))

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        request_id = self.next_id()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if (sent := self.params(params)) is not None:
            message["params"] = sent
        async with self.http.stream("POST", self.server.url, headers=self._headers(message),
                                    content=json.dumps(message)) as response:
            self.status = response.status_code
            if method == "initialize" and "mcp-session-id" in response.headers:
                self.session_id = response.headers["mcp-session-id"]
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                body = await response.aread()
                assert body, (response.status_code, response.headers)
                return json.loads(body)  # type: ignore[no-any-return]
            data: list[str] = []
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].lstrip())
                elif not line and data:
                    text, data = "\n".join(data), []
                    if not text.strip():
                        continue  # the priming event: an id and no message
                    found = json.loads(text)
                    if "method" in found and "id" in found:
                        await self._answer(found)
                    elif "method" in found:
                        self.notifications.append(found)
                    elif found.get("id") == request_id:
                        return found  # type: ignore[no-any-return]
        raise AssertionError(f"the stream of {method} ended without its reply ({self.cell.id})")

    async def send(self, message: Any) -> None:
        response = await self._post(message)
        self.status = response.status_code
        assert response.status_code == 202 and not response.content, (response.status_code, response.text)

    async def _answer(self, request: dict[str, Any]) -> None:
        self.server_requests.append(request)
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        if self.answer is None:
            reply["error"] = {"code": -32601, "message": "Method not found"}
        else:
            reply["result"] = self.answer(request)
        response = await self._post(reply)
        assert response.status_code == 202, (response.status_code, response.text)

    async def close(self) -> None:
        if self.session_id is not None:
            response = await self.http.delete(self.server.url, headers=self._headers({}))
            assert response.status_code == 204, (response.status_code, response.text)
        await self.http.aclose()


@contextlib.asynccontextmanager
async def open_client(cell: Cell, *, stdio: Callable[[], StdioPool], http_server: Callable[[], HttpServer],
                      capabilities: dict[str, Any] | None = None, tasks: bool = True,
                      answer: Answer | None = None) -> AsyncIterator[Client]:
    """A connected client of ``cell`` (session era: initialized); closed cleanly at the end.

    ``capabilities``: the client's (default: elicitation and sampling when it can answer them, and
    always in 2026-07-28, where questions come back as input-required results); ``tasks``: whether a
    2026-07-28 client declares the tasks extension; ``answer``: answers session-era server requests.
    """
    options = {"capabilities": capabilities, "tasks": tasks, "answer": answer}
    client: Any
    if cell.transport == "memory":
        client = (MemoryModernClient if cell.modern else MemorySessionClient)(cell, **options)
        started = client.start()
    elif cell.transport == "stdio":
        client = StdioClient(cell, **options)
        started = client.start(stdio())
    else:
        client = HttpClient(cell, **options)
        started = client.start(http_server())
    if inspect.isawaitable(started):
        await started
    try:
        yield client
    finally:
        await client.close()
