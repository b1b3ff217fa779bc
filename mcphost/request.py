"""One request as middleware and the exception hook see it (:class:`RequestInfo`).

A leaf module: hook specs name this type, so it imports nothing above the session types.
``round`` holds the kernel's input-required state of a 2026-07-28 request
(:class:`mcphost.kernel.modern.Round`); it is typed loosely here to keep this module a leaf.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcphost.protocol.jsonrpc import RequestId
    from mcphost.records import Provenance
    from mcphost.sessions.session import Connection, Principal, Session


class RequestInfo:
    """One request as middleware sees it: the ``request`` of ``async def fn(request, call_next)``.

    ``name`` is the tool/prompt name or resource URI; ``era`` is ``"legacy"`` (session era)
    or ``"modern"`` (2026-07-28); ``round`` holds the input-required state of a modern request;
    ``connection`` is the transport's :class:`~mcphost.sessions.session.Connection` of the
    exchange that carried the request (HTTP headers, remote address; None for in-memory use).
    ``principal`` is who sent this very request (a session-era client may present a refreshed
    token mid-session; the session keeps the first). ``protocol_version`` and the owning plugin
    (``plugin``, ``plugin_version``, ``owner``) are read on demand, so a request nobody asks
    about pays nothing for them.
    """

    __slots__ = ("_catalog", "_owner", "connection", "era", "id", "method", "name", "params", "principal", "round",
                 "scope", "session")

    def __init__(self, session: Session, request_id: RequestId, method: str, params: dict[str, Any],
                 round: Any = None, principal: Principal | None = None, *,
                 connection: Connection | None = None, catalog: Any = None, scope: Any = None) -> None:
        self.session = session
        self.id = request_id
        self.method = method
        self.params = params
        self.era = session.era
        self.round = round
        self.principal = session.principal if principal is None else principal
        self.connection = connection
        #: For a call a tool makes as its caller (``ctx.call_tool``): the calling tool's request
        #: scope, through which the called tool reports and asks (None for a request that arrived).
        self.scope = scope
        self._catalog = catalog
        self._owner: Any = _UNKNOWN
        name = params.get("name", params.get("uri"))
        self.name = name if isinstance(name, str) else None

    @property
    def protocol_version(self) -> str | None:
        """The session's negotiated revision (None before ``initialize`` has answered)."""
        return self.session.protocol_version

    @property
    def owner(self) -> Provenance | None:
        """Provenance of the catalog record this request addresses (tools/call, prompts/get,
        resources/read), or None: the plugin, its distribution and version."""
        if self._owner is _UNKNOWN:
            self._owner = _owner_of(self._catalog, self.method, self.name)
        return self._owner  # type: ignore[no-any-return]  # _owner is Any only to hold the _UNKNOWN marker

    @property
    def plugin(self) -> str | None:
        """Name of the plugin that provides the addressed tool, prompt or resource."""
        owner = self.owner
        return None if owner is None else owner.plugin

    @property
    def plugin_version(self) -> str | None:
        """Version of that plugin's distribution (None for plugins registered in code)."""
        owner = self.owner
        return None if owner is None else owner.version

    def __repr__(self) -> str:
        return f"<RequestInfo {self.method} id={self.id!r} name={self.name!r}>"


_UNKNOWN = object()


def _owner_of(catalog: Any, method: str, name: str | None) -> Provenance | None:
    if catalog is None or name is None:
        return None
    if method == "tools/call":
        entry = catalog.tools.get(name)
        return None if entry is None else entry.record.provenance
    if method == "prompts/get":
        prompt = catalog.prompts.get(name)
        return None if prompt is None else prompt.provenance
    if method == "resources/read":
        found = catalog.find_resource(name)
        return None if found is None else found[0].provenance
    return None
