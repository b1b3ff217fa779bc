"""The session driver: one session carried by one connection, opened, run and closed in the kernel.

stdio, the in-memory transport (``mcphost call``) and the test kit each carry one session for as
long as their connection lasts. The transport lends the driver its connection (the facts the
hooks see, whether it is trusted) and its ordered writer (``outlet`` for what the server says,
``deliver`` for replies); the driver does the rest, the same way for all three:

- ``open``: a session from the SessionManager, then its connect hooks with the one refusal rule
  (a refusal fires disconnect and terminate "refused" at once; see ``SessionManager.open``);
- ``serve`` / ``receive``: every message to the kernel (``Kernel.serve`` decides the era first;
  a session-era message runs on the driver's session);
- ``close``: disconnect with the connection's reason, then terminate once.

Transports never call a lifecycle hook themselves. HTTP, where each request is its own connection
to a session that outlives it, goes through the manager per request and hands each POST's
session-era messages to ``Kernel.receive_all`` (there is no connection-long driver to hold).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from mcphost.errors import Refused
from mcphost.protocol.era import Era
from mcphost.sessions.session import Connection, Outlet, Session

if TYPE_CHECKING:
    from mcphost.kernel.dispatcher import Deliver, Kernel, Reply
    from mcphost.kernel.services import Exchange


class SessionDriver:
    """Drives one session over one connection; see the module docstring."""

    __slots__ = ("_deliver", "_kernel", "connection", "refusal", "session")

    headers = None  # no HTTP headers on these connections
    session_id = None

    def __init__(self, kernel: Kernel, connection: Connection, outlet: Outlet, *, trusted: bool,
                 deliver: Deliver | None = None) -> None:
        self._kernel = kernel
        self._deliver = deliver
        self.connection = connection
        #: Why the connect hooks turned the client away (None: admitted, or not opened yet).
        self.refusal: Refused | None = None
        self.session: Session = kernel.sessions.new(connection.principal)
        self.session.endpoint = connection.endpoint  # Connection(endpoint=NAME): that endpoint's view
        self.session.trusted = trusted
        self.session.outlet = outlet

    @property
    def trusted(self) -> bool:
        return self.session.trusted

    @property
    def era(self) -> Era | None:
        """An initialized session settles the era of this connection: the session era."""
        return "legacy" if self.session.protocol_version is not None else None

    async def open(self) -> None:
        """Run the connect hooks; :class:`Refused` (after the refusal rule ran) when they refuse."""
        try:
            await self._kernel.sessions.open(self.session, self.connection, opening=True)
        except Refused as refusal:
            self.refusal = refusal
            raise

    def rule_era(self, message: Any, exchange: Exchange | None = None) -> Era:
        """The era the kernel will rule ``message`` belongs to (see :meth:`Kernel.rule_era`)."""
        return self._kernel.rule_era(message, self if exchange is None else exchange)

    def serve(self, message: Any, exchange: Exchange | None = None) -> Awaitable[None] | None:
        """Hand ``message`` to the kernel's one entry. ``exchange``: the transport's own for this
        message (stdio: one per line, to write a 2026-07-28 reply), else the driver itself.

        None for a session-era message: the transport runs it with :meth:`receive`."""
        return self._kernel.serve(message, self if exchange is None else exchange)

    def receive(self, message: Any) -> Reply | None:
        """Run a session-era message on this session: the reply future for a request (also handed
        to ``deliver`` as the request's task ends), None for a notification or a response."""
        return self._kernel.receive(self.session, message, self.connection, deliver=self._deliver)

    def batch(self, messages: list[Any]) -> list[Reply]:
        """Run a 2025-03-26 batch: the reply futures of its requests, to be answered as one array
        (not handed to ``deliver`` one by one)."""
        return self._kernel.receive_all(self.session, messages, self.connection)

    async def send(self, message: dict[str, Any], related: Any) -> None:
        outlet = self.session.outlet
        assert outlet is not None
        await outlet(message, related)

    async def reply(self, reply: Reply | None) -> str:
        if reply is not None:
            message = await reply
            if message is not None and self._deliver is not None:
                self._deliver(message)
        return "complete"

    async def close(self, reason: str, end: str) -> None:
        """The connection is over: ``mcphost_disconnect(reason)``, then ``mcphost_terminate(end)``
        (nothing when the client was refused: the refusal rule already closed it)."""
        if self.refusal is None and not self.session.closed:
            await self._kernel.sessions.close(self.session, reason, end=end)
