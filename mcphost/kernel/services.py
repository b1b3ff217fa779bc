"""What the kernel is handed: the host's services once, and an exchange per connection or request.

The kernel never names the host. The host builds one :class:`Services` at startup (the catalog
getter, the backend, the session manager, server info, the exception reporter) and every
transport hands each message over with an :class:`Exchange` describing where it came from.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

    from mcphost.catalog import Catalog
    from mcphost.config import ServerSettings
    from mcphost.context import Deferred, HostView
    from mcphost.endpoints import EndpointSettings
    from mcphost.protocol.era import Era
    from mcphost.protocol.jsonrpc import RequestId
    from mcphost.protocol.sealed import StateSealer
    from mcphost.request import RequestInfo
    from mcphost.sessions.backend import Backend
    from mcphost.sessions.cluster import Cluster
    from mcphost.sessions.manager import SessionManager
    from mcphost.sessions.session import Connection, Session


@dataclass(frozen=True, slots=True)
class Services:
    """The host's side of the kernel, built once by the host."""

    #: ``[server]`` settings.
    settings: ServerSettings
    #: The current catalog (a reload replaces it whole).
    catalog: Callable[[], Catalog]
    #: The state backend (session store, event log, broker, task store, claims).
    backend: Backend
    #: The one owner of sessions.
    sessions: SessionManager
    #: ``server_info(version)``: the serverInfo object for a protocol revision.
    server_info: Callable[[str], dict[str, Any]]
    #: ``await report_exception(request, exception)``: runs the ``mcphost_exception`` hooks.
    report_exception: Callable[[RequestInfo, BaseException], Awaitable[None]]
    #: Protocol extensions served (2026-07-28 ``capabilities.extensions``).
    extensions: Callable[[], dict[str, Any]]
    #: What :attr:`mcphost.Context.host` shows tools (a narrow façade); the kernel never calls it.
    host: HostView
    #: ``[endpoints.NAME]`` settings by name (:mod:`mcphost.endpoints`).
    endpoints: Mapping[str, EndpointSettings] = dataclasses.field(default_factory=dict)


class Exchange(Protocol):
    """Where a message came from, and how the kernel answers it: one per transport exchange.

    stdio has one for the whole process; HTTP one per request.
    """

    # Read-only: the kernel never sets them, and a transport may give each as a plain attribute or a property.

    #: The connection facts the lifecycle hooks and middleware see.
    @property
    def connection(self) -> Connection: ...
    #: HTTP request headers, lower-case names (None on stdio).
    @property
    def headers(self) -> Mapping[str, str] | None: ...
    #: ``Mcp-Session-Id`` of the exchange (None when absent, and always on stdio).
    @property
    def session_id(self) -> str | None: ...
    #: The era the connection already settled (stdio once its session is initialized), else None.
    @property
    def era(self) -> Era | None: ...
    #: The transport vouches for an anonymous client (stdio: whoever started the process).
    @property
    def trusted(self) -> bool: ...

    async def send(self, message: dict[str, Any], related: Any) -> None:
        """Deliver a server message of a 2026-07-28 request (its outlet)."""

    async def reply(self, reply: asyncio.Future[Any] | None) -> str:
        """Deliver the reply of a 2026-07-28 request (None for a notification): return the
        disconnect reason (``complete`` or ``dropped``)."""


class ScopeKernel(Protocol):
    """The kernel as a request's scope (and the tasks and parked runs that make scopes) use it.

    They cannot import :class:`mcphost.kernel.dispatcher.Kernel` (the dispatcher imports them),
    so they name this instead; the Kernel satisfies it. The handlers' wider view is
    :class:`mcphost.kernel.view.KernelView`.
    """

    settings: ServerSettings
    services: Services
    sessions: SessionManager
    catalog: Catalog
    host: HostView
    sealer: StateSealer
    cluster: Cluster | None

    def defer(self, session: Session, request_id: RequestId) -> Deferred: ...

    def validator_for(self, schema: Mapping[str, Any]) -> Validator: ...

    async def notify_resource_updated(self, uri: str) -> None: ...

    async def notify_task(self, record: dict[str, Any]) -> None: ...

    async def redispatch(self, request: RequestInfo) -> dict[str, Any]: ...
