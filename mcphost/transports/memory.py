"""The in-memory transport: one local session of a host in this process, messages as Python objects.

What ``mcphost call`` runs a tool through. Like stdio, the client is whoever runs the process
(trusted: records that need scopes are not withheld), and the kernel's session driver opens,
runs and closes its one session-era session (see ``mcphost.kernel.driver``). Requests the
server sends the client (elicitation, sampling, roots) go to the ``handlers`` given for their
method (``mcphost call`` asks on the terminal, see :mod:`mcphost.questions`); without one they
are answered with an error: there is nobody to ask.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcphost.host import Host
from mcphost.kernel.driver import SessionDriver
from mcphost.protocol import jsonrpc
from mcphost.protocol.errors import METHOD_NOT_FOUND, McpError
from mcphost.protocol.versions import LATEST_LEGACY
from mcphost.sessions.session import Connection, Session


class MemoryTransport:
    """A session of ``host`` driven from this process; use ``async with``."""

    def __init__(self, host: Host, *, client_info: dict[str, Any] | None = None,
                 capabilities: dict[str, Any] | None = None,
                 handlers: Mapping[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] | None = None) -> None:
        """``handlers``: by method, what answers a request the server sends (its params in, the
        result out, McpError for an error reply); ``capabilities``: what initialize declares."""
        self.host = host
        self.capabilities = capabilities or {}
        self.handlers = dict(handlers or {})
        self._answering: set[asyncio.Task[None]] = set()
        self.connection = Connection(transport="memory")
        self.client_info = client_info or {"name": "mcphost", "version": "0"}
        self.driver: SessionDriver | None = None
        #: Notifications the server sent (progress, logs, list changes), in order.
        self.notifications: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._started = False

    @property
    def session(self) -> Session | None:
        return self.driver.session if self.driver is not None else None

    async def __aenter__(self) -> MemoryTransport:
        if not self.host.started:
            await self.host.start()
            self._started = True
        assert self.host.kernel is not None
        try:
            self.driver = SessionDriver(self.host.kernel, self.connection, self._outlet, trusted=True)
            # A refusal fires disconnect and terminate ("refused") at once, and ends the session.
            await self.driver.open()
            result = await self.request("initialize", {"protocolVersion": LATEST_LEGACY,
                                                       "capabilities": self.capabilities,
                                                       "clientInfo": self.client_info})
            if "error" in result:
                raise McpError(result["error"]["code"], result["error"]["message"])
            self.notify("notifications/initialized")
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.driver is not None:
            await self.driver.close("eof", end="eof")
        if self._started:
            await self.host.stop()

    # -- the client's side --------------------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request; return the whole reply message (result or error)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params is not None:
            message["params"] = params
        assert self.driver is not None
        reply = self.driver.receive(message)
        assert reply is not None
        answer = await reply
        return answer if answer is not None else {"jsonrpc": "2.0", "id": message["id"], "result": {}}

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        assert self.driver is not None
        self.driver.receive(message)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """``tools/call``: the result, or :class:`McpError` for a protocol error."""
        reply = await self.request("tools/call", {"name": name, "arguments": arguments or {}})
        if "error" in reply:
            raise McpError(reply["error"]["code"], reply["error"]["message"], reply["error"].get("data"))
        return reply["result"]  # type: ignore[no-any-return]  # a result is an object (the kernel built it)

    # -- the server's side ------------------------------------------------------------------------

    async def _answer(self, handler: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
                      message: dict[str, Any]) -> None:
        try:
            reply = jsonrpc.result(message["id"], await handler(message.get("params") or {}))
        except McpError as exc:
            reply = jsonrpc.error(message["id"], exc)
        if self.driver is not None and not self.driver.session.closed:
            self.driver.receive(reply)

    async def _outlet(self, message: dict[str, Any], related: Any) -> None:
        handler = self.handlers.get(message.get("method", "")) if "id" in message else None
        if handler is not None:  # answered in its own task: the kernel does not wait on a person
            task = asyncio.create_task(self._answer(handler, message))
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)
        elif "method" in message and "id" in message:  # a question for a client that is not there
            assert self.driver is not None
            self.driver.receive(jsonrpc.error(message["id"], McpError(
                METHOD_NOT_FOUND, f"{message['method']} is not available to this in-memory client")))
        elif "method" in message:
            self.notifications.append(message)
