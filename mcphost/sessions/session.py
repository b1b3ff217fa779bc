"""The Session: everything the host knows about one client between initialize and termination.

Durable fields (identity, negotiated version, capabilities, assigns, allow-lists,
subscriptions, log level, principal) round-trip through :meth:`Session.to_state` as plain
JSON so a shared store can hold them. Live fields (in-flight tasks, pending
server-to-client requests, the outlet to the transport) belong to the process serving the
session and are never serialized. ``__slots__`` keeps an idle session small.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcphost.protocol.jsonrpc import Message, RequestId

#: ``async def outlet(message, related_request_id)``: the transport's way to deliver a server message.
Outlet = Callable[[Message, RequestId | None], Awaitable[None]]

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
LOG_RANK = {level: rank for rank, level in enumerate(LOG_LEVELS)}


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling, as an auth hook established it. ``None`` on a session means anonymous.

    ``token`` is empty unless the auth plugin deliberately hands the raw credential to tools
    (for a token exchange, say). It is never stored, logged, compared or forwarded by the host.
    """

    subject: str
    issuer: str | None = None
    client_id: str | None = None
    scopes: frozenset[str] = frozenset()
    claims: Mapping[str, Any] = field(default_factory=dict)
    token: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        # An OAuth ``scope`` claim is one space-separated string: accept it as such.
        if isinstance(self.scopes, str):
            object.__setattr__(self, "scopes", frozenset(self.scopes.split()))
        elif not isinstance(self.scopes, frozenset):
            object.__setattr__(self, "scopes", frozenset(self.scopes))

    @property
    def key(self) -> tuple[str | None, str, str | None]:
        """The identity a session is bound to: (issuer, subject, client id)."""
        return (self.issuer, self.subject, self.client_id)

    def to_state(self) -> dict[str, Any]:
        return {"subject": self.subject, "issuer": self.issuer, "client_id": self.client_id,
                "scopes": sorted(self.scopes), "claims": dict(self.claims)}

    @classmethod
    def from_state(cls, data: Mapping[str, Any]) -> Principal:
        return cls(subject=data["subject"], issuer=data.get("issuer"), client_id=data.get("client_id"),
                   scopes=frozenset(data.get("scopes", ())), claims=dict(data.get("claims", {})))


@dataclass(frozen=True, slots=True)
class Connection:
    """One connect of a client, as the lifecycle hooks see it.

    stdio connects once per process; HTTP connects once per request, so ``method`` and
    ``path`` describe that request. ``headers`` keys are lower-case. Only
    ``mcphost_authenticate`` sees the ``Authorization`` header: every later hook gets the
    headers without it (the credential is for this server, never for anyone downstream).
    """

    transport: str
    headers: Mapping[str, str] = field(default_factory=dict)
    remote: str | None = None
    method: str | None = None
    path: str | None = None
    principal: Principal | None = None
    #: ``http`` or ``https`` as the request reached this process (HTTP only).
    scheme: str | None = None


class Session:
    """One client's session. See the module docstring for which fields persist."""

    __slots__ = (
        "_outbound_ids",
        "allowed_prompts",
        "allowed_templates",
        "allowed_tools",
        "assigns",
        "client_capabilities",
        "client_info",
        "closed",
        "created_at",
        "era",
        "id",
        "inflight",
        "initialized",
        "last_active",
        "log_level",
        "outlet",
        "pending",
        "principal",
        "protocol_version",
        "subscriptions",
        "trusted",
    )

    def __init__(self, session_id: str, *, principal: Principal | None = None,
                 protocol_version: str | None = None) -> None:
        self.id = session_id
        self.principal = principal
        self.protocol_version = protocol_version
        self.client_info: dict[str, Any] = {}
        self.client_capabilities: dict[str, Any] = {}
        self.log_level: str | None = None
        self.assigns: dict[str, Any] = {}
        # None means "everything the catalog holds"; a set narrows what this client sees and calls.
        self.allowed_tools: set[str] | None = None
        self.allowed_prompts: set[str] | None = None
        self.allowed_templates: set[str] | None = None
        self.subscriptions: set[str] = set()
        self.initialized = False
        self.closed = False
        # The transport vouches for an anonymous client (stdio: whoever started the process), so
        # records that need scopes are not withheld from it. Never set for network clients.
        self.trusted = False
        # "modern" sessions live for one 2026-07-28 request; they are never stored.
        self.era = "legacy"
        self.created_at = self.last_active = time.time()
        self.inflight: dict[RequestId, asyncio.Task[Any]] = {}
        self.pending: dict[RequestId, asyncio.Future[Any]] = {}
        self.outlet: Outlet | None = None
        self._outbound_ids = itertools.count(1)

    # -- visibility -------------------------------------------------------------------------

    def can_see_tool(self, name: str) -> bool:
        return self.allowed_tools is None or name in self.allowed_tools

    def can_see_prompt(self, name: str) -> bool:
        return self.allowed_prompts is None or name in self.allowed_prompts

    def can_see_template(self, uri_template: str) -> bool:
        return self.allowed_templates is None or uri_template in self.allowed_templates

    def wants_log(self, level: str) -> bool:
        if self.log_level is None:
            return self.era == "legacy"  # a 2026-07-28 request gets logs only when it asks for them
        return LOG_RANK[level] >= LOG_RANK[self.log_level]

    def next_outbound_id(self) -> int:
        return next(self._outbound_ids)

    def number_outbound_from(self, start: int) -> None:
        """Number this session's server-to-client requests from ``start`` (a process sharing the
        session with others takes a range of its own, so answers reach the right process)."""
        self._outbound_ids = itertools.count(start)

    # -- persistence ------------------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        """The durable part of the session as JSON-serializable data."""

        def listed(value: set[str] | None) -> list[str] | None:
            return None if value is None else sorted(value)

        return {
            "id": self.id,
            "protocol_version": self.protocol_version,
            "client_info": self.client_info,
            "client_capabilities": self.client_capabilities,
            "log_level": self.log_level,
            "assigns": self.assigns,
            "allowed_tools": listed(self.allowed_tools),
            "allowed_prompts": listed(self.allowed_prompts),
            "allowed_templates": listed(self.allowed_templates),
            "subscriptions": sorted(self.subscriptions),
            "principal": None if self.principal is None else self.principal.to_state(),
            "initialized": self.initialized,
            "created_at": self.created_at,
            "last_active": self.last_active,
        }

    @classmethod
    def from_state(cls, data: Mapping[str, Any]) -> Session:
        principal = data.get("principal")
        session = cls(data["id"], principal=None if principal is None else Principal.from_state(principal),
                      protocol_version=data.get("protocol_version"))
        session.client_info = dict(data.get("client_info") or {})
        session.client_capabilities = dict(data.get("client_capabilities") or {})
        session.log_level = data.get("log_level")
        session.assigns = dict(data.get("assigns") or {})
        for name in ("allowed_tools", "allowed_prompts", "allowed_templates"):
            value = data.get(name)
            setattr(session, name, None if value is None else set(value))
        session.subscriptions = set(data.get("subscriptions") or ())
        session.initialized = bool(data.get("initialized"))
        session.created_at = float(data.get("created_at", session.created_at))
        session.last_active = float(data.get("last_active", session.last_active))
        return session

    def __repr__(self) -> str:
        return f"<Session {self.id[:8]}… {self.protocol_version} inflight={len(self.inflight)}>"
