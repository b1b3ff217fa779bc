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
import os
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcphost.protocol.jsonrpc import Message, RequestId

#: ``async def outlet(message, related_request_id)``: the transport's way to deliver a server message.
Outlet = Callable[[Message, RequestId | None], Awaitable[None]]

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
LOG_RANK = {level: rank for rank, level in enumerate(LOG_LEVELS)}

_node: tuple[int, str] | None = None  # (pid, name): worked out again in a forked worker


def this_node() -> str:
    """This process as an operator tells it from the other processes of a cluster: ``host:pid``."""
    global _node
    pid = os.getpid()
    if _node is None or _node[0] != pid:
        _node = (pid, f"{socket.gethostname()}:{pid}")
    return _node[1]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling, as an auth hook established it. ``None`` on a session means anonymous.

    ``token`` is empty unless the auth plugin deliberately hands the raw credential to tools
    (for a token exchange, say). It is never stored, logged, compared or forwarded by the host.

    ``expires_at`` (seconds since the epoch, a JWT's ``exp``) is when the credentials stop being
    valid: a GET or listen stream opened with them ends then. None: no known expiry (such
    streams are bounded by ``[server] max_stream_seconds``).
    """

    subject: str
    issuer: str | None = None
    client_id: str | None = None
    scopes: frozenset[str] = frozenset()
    claims: Mapping[str, Any] = field(default_factory=dict)
    token: str | None = field(default=None, repr=False, compare=False)
    expires_at: float | None = None

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
                "scopes": sorted(self.scopes), "claims": dict(self.claims), "expires_at": self.expires_at}

    @classmethod
    def from_state(cls, data: Mapping[str, Any]) -> Principal:
        return cls(subject=data["subject"], issuer=data.get("issuer"), client_id=data.get("client_id"),
                   scopes=frozenset(data.get("scopes", ())), claims=dict(data.get("claims", {})),
                   expires_at=data.get("expires_at"))


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
    #: The ``[endpoints.NAME]`` the request came to (None: the whole catalog at ``server.path``).
    endpoint: str | None = None


class Session:
    """One client's session. See the module docstring for which fields persist."""

    __slots__ = (
        "_allowed_prompts",
        "_allowed_resources",
        "_allowed_templates",
        "_allowed_tools",
        "_outbound_ids",
        "assigns",
        "client_capabilities",
        "client_info",
        "closed",
        "created_at",
        "embryonic",
        "endpoint",
        "era",
        "id",
        "inflight",
        "initialized",
        "last_active",
        "log_level",
        "node",
        "outlet",
        "pending",
        "principal",
        "protocol_version",
        "quota",
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
        self._allowed_tools: set[str] | None = None
        self._allowed_prompts: set[str] | None = None
        self._allowed_templates: set[str] | None = None
        self._allowed_resources: set[str] | None = None
        self.subscriptions: set[str] = set()
        #: The ``[endpoints.NAME]`` this session belongs to (None: the whole catalog); set once, at creation.
        self.endpoint: str | None = None
        self.initialized = False
        #: A network client's session that has seen no request after the one that opened it: it
        #: expires after ``server.embryonic_timeout`` rather than the idle timeout (set by the manager).
        self.embryonic = False
        self.closed = False
        # The transport vouches for an anonymous client (stdio: whoever started the process), so
        # records that need scopes are not withheld from it. Never set for network clients.
        self.trusted = False
        # "modern" sessions live for one 2026-07-28 request; they are never stored.
        self.era = "legacy"
        #: The process that opened the session (:func:`this_node`; set by the SessionManager, kept
        #: in the stored state, so every node of a cluster can say where a session began).
        self.node: str | None = None
        self.created_at = self.last_active = time.time()
        self.inflight: dict[RequestId, asyncio.Task[Any]] = {}
        self.pending: dict[RequestId, asyncio.Future[Any]] = {}
        self.outlet: Outlet | None = None
        self._outbound_ids = itertools.count(1)
        #: Whose quotas (sessions, requests, tasks per principal) this session counts against:
        #: its principal, or for an anonymous client its address (set by the SessionManager).
        self.quota = quota_key(principal, None)

    # -- allow-lists: narrow only ------------------------------------------------------------
    #
    # Assigning an allow-list intersects it with the one already set, so a connect hook can
    # narrow what an earlier one allowed but never widen it (None, "everything", narrows nothing).
    # The kernel asks them through one Visibility value (mcphost.kernel.visibility).

    def narrow(self, *, tools: Iterable[str] | None = None, prompts: Iterable[str] | None = None,
               templates: Iterable[str] | None = None, resources: Iterable[str] | None = None) -> None:
        """Narrow the allow-lists: each given one is intersected with what is already allowed."""
        self._allowed_tools = _narrowed(self._allowed_tools, tools)
        self._allowed_prompts = _narrowed(self._allowed_prompts, prompts)
        self._allowed_templates = _narrowed(self._allowed_templates, templates)
        self._allowed_resources = _narrowed(self._allowed_resources, resources)

    @property
    def allowed_tools(self) -> set[str] | None:
        """Tool names this client may see and call (None: all). Assigning narrows."""
        return self._allowed_tools

    @allowed_tools.setter
    def allowed_tools(self, names: Iterable[str] | None) -> None:
        self._allowed_tools = _narrowed(self._allowed_tools, names)

    @property
    def allowed_prompts(self) -> set[str] | None:
        """Prompt names this client may see and get (None: all). Assigning narrows."""
        return self._allowed_prompts

    @allowed_prompts.setter
    def allowed_prompts(self, names: Iterable[str] | None) -> None:
        self._allowed_prompts = _narrowed(self._allowed_prompts, names)

    @property
    def allowed_templates(self) -> set[str] | None:
        """Resource templates (by URI template) this client may see, read and complete (None: all)."""
        return self._allowed_templates

    @allowed_templates.setter
    def allowed_templates(self, uri_templates: Iterable[str] | None) -> None:
        self._allowed_templates = _narrowed(self._allowed_templates, uri_templates)

    @property
    def allowed_resources(self) -> set[str] | None:
        """Static resources (by URI) this client may see, read and subscribe to (None: all)."""
        return self._allowed_resources

    @allowed_resources.setter
    def allowed_resources(self, uris: Iterable[str] | None) -> None:
        self._allowed_resources = _narrowed(self._allowed_resources, uris)

    @property
    def narrowed(self) -> bool:
        """Whether any allow-list is set (answers may then differ per client)."""
        return not (self._allowed_tools is None and self._allowed_prompts is None
                    and self._allowed_templates is None and self._allowed_resources is None)

    def can_see_tool(self, name: str) -> bool:
        return self._allowed_tools is None or name in self._allowed_tools

    def can_see_prompt(self, name: str) -> bool:
        return self._allowed_prompts is None or name in self._allowed_prompts

    def can_see_template(self, uri_template: str) -> bool:
        return self._allowed_templates is None or uri_template in self._allowed_templates

    def can_see_resource(self, uri: str) -> bool:
        return self._allowed_resources is None or uri in self._allowed_resources

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
            "allowed_resources": listed(self.allowed_resources),
            "subscriptions": sorted(self.subscriptions),
            "principal": None if self.principal is None else self.principal.to_state(),
            "quota": self.quota,
            "endpoint": self.endpoint,
            "initialized": self.initialized,
            "created_at": self.created_at,
            "last_active": self.last_active,
            "node": self.node,
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
        for name in ("allowed_tools", "allowed_prompts", "allowed_templates", "allowed_resources"):
            value = data.get(name)
            setattr(session, name, None if value is None else set(value))
        session.subscriptions = set(data.get("subscriptions") or ())
        session.quota = str(data.get("quota") or session.quota)
        session.endpoint = data.get("endpoint")
        session.initialized = bool(data.get("initialized"))
        session.created_at = float(data.get("created_at", session.created_at))
        session.last_active = float(data.get("last_active", session.last_active))
        session.node = data.get("node")
        session.embryonic = bool(data.get("embryonic"))  # saved by a shared store until its second request
        return session

    def __repr__(self) -> str:
        return f"<Session {self.id[:8]}… {self.protocol_version} inflight={len(self.inflight)}>"


def stream_seconds(principal: Principal | None, max_seconds: float) -> float | None:
    """How long a stream opened now by ``principal`` may stay open: until its credentials expire,
    and at most ``max_seconds`` (0: no bound); None when nothing bounds it."""
    bounds = [max_seconds] if max_seconds > 0 else []
    if principal is not None and principal.expires_at is not None:
        bounds.append(max(0.0, principal.expires_at - time.time()))
    return min(bounds) if bounds else None


def quota_key(principal: Principal | None, remote: str | None) -> str:
    """Whom per-principal caps count: the principal's identity, else the client's address
    (``remote`` is ``host:port``; anonymous clients from one address share their quotas)."""
    if principal is not None:
        return "p:" + repr(principal.key)
    return "a:" + (remote.rpartition(":")[0] if remote else "")


def _narrowed(current: set[str] | None, given: Iterable[str] | None) -> set[str] | None:
    """``current`` intersected with ``given``; None (everything) narrows nothing."""
    if given is None:
        return current
    wanted = set(given)
    return wanted if current is None else current & wanted
