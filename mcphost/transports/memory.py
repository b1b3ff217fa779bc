"""The in-memory transport: one local session of a host in this process, messages as Python objects.

What ``mcphost call`` runs a tool through. Like stdio, the client is whoever runs the process
(trusted: records that need scopes are not withheld), and every message goes to the kernel's
one entry (``Kernel.serve``). Requests the server sends the client (elicitation, sampling,
roots) are answered with an error: there is nobody to ask.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from mcphost.host import Host
from mcphost.protocol import jsonrpc
from mcphost.protocol.era import Era
from mcphost.protocol.errors import METHOD_NOT_FOUND, McpError
from mcphost.protocol.versions import LATEST_LEGACY
from mcphost.sessions.session import Connection, Session


class MemoryTransport:
    """A session of ``host`` driven from this process; use ``async with``."""

    headers = None
    trusted = True
    era: Era = "legacy"  # initialize first: a session-era client

    def __init__(self, host: Host, *, client_info: dict[str, Any] | None = None) -> None:
        self.host = host
        self.connection = Connection(transport="memory")
        self.client_info = client_info or {"name": "mcphost", "version": "0"}
        self.session: Session | None = None
        #: Notifications the server sent (progress, logs, list changes), in order.
        self.notifications: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._started = False
        self._replies: asyncio.Queue[Any] = asyncio.Queue()

    session_id = None

    async def __aenter__(self) -> MemoryTransport:
        if not self.host.started:
            await self.host.start()
            self._started = True
        manager = self.host.manager
        try:
            session = self.session = manager.new()
            session.trusted = True
            session.outlet = self._outlet
            # A refusal fires disconnect and terminate ("refused") at once, and ends the session.
            await manager.open(session, self.connection, opening=True)
            result = await self.request("initialize", {"protocolVersion": LATEST_LEGACY, "capabilities": {},
                                                       "clientInfo": self.client_info})
            if "error" in result:
                raise McpError(result["error"]["code"], result["error"]["message"])
            self.notify("notifications/initialized")
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        session = self.session
        if session is not None and not session.closed:
            await self.host.manager.close(session, "eof", end="eof")
        if self._started:
            await self.host.stop()

    # -- the client's side --------------------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request; return the whole reply message (result or error)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params is not None:
            message["params"] = params
        reply = self._serve(message)
        assert reply is not None
        answer = await reply
        return answer if answer is not None else {"jsonrpc": "2.0", "id": message["id"], "result": {}}

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._serve(message)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """``tools/call``: the result, or :class:`McpError` for a protocol error."""
        reply = await self.request("tools/call", {"name": name, "arguments": arguments or {}})
        if "error" in reply:
            raise McpError(reply["error"]["code"], reply["error"]["message"], reply["error"].get("data"))
        return reply["result"]  # type: ignore[no-any-return]  # a result is an object (the kernel built it)

    # -- the kernel's exchange (see mcphost.kernel.services.Exchange) ------------------------------

    def _serve(self, message: dict[str, Any]) -> asyncio.Future[Any] | None:
        kernel = self.host.kernel
        assert kernel is not None and self.session is not None
        self._last: asyncio.Future[Any] | None = None
        kernel.serve(message, self)  # session era: legacy() below runs now and keeps the reply
        return self._last

    def legacy(self, message: Any) -> None:
        assert self.host.kernel is not None and self.session is not None
        self._last = self.host.kernel.receive(self.session, message, self.connection)

    async def send(self, message: dict[str, Any], related: Any) -> None:  # pragma: no cover - session era only
        await self._outlet(message, related)

    async def reply(self, reply: Any) -> str:  # pragma: no cover - session era only
        return "complete"

    async def _outlet(self, message: dict[str, Any], related: Any) -> None:
        if "method" in message and "id" in message:  # a question for a client that is not there
            self._serve(jsonrpc.error(message["id"], McpError(
                METHOD_NOT_FOUND, f"{message['method']} is not available to this in-memory client")))
        elif "method" in message:
            self.notifications.append(message)
