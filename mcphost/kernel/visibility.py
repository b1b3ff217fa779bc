"""What one caller may see and call: the one answer to that question, for every method.

A :class:`Visibility` combines the caller's grant (the scopes its token grants; everything for
a trusted local client) with the session's allow-lists (tools, prompts, resource templates and
static resources, narrowed by connect hooks through ``Session.narrow`` or by assigning
``session.allowed_*``, which intersects: a hook can narrow but never widen). Listing, calls,
reads, subscribe, listen, completion and the cache-scope decision all ask it.

A session of an ``[endpoints.NAME]`` endpoint sees that endpoint's view of the catalog
(:mod:`mcphost.kernel.views`): one more narrowing, intersected with the allow-lists and the
scopes; a record outside the view is unknown to the caller, like one the allow-lists hide.

Two answers differ on purpose: a record the allow-lists hide is unknown to the caller (it is not
listed and using it is answered like a name that does not exist), while a record whose scopes
the caller lacks is refused with ``insufficient_scope`` when used (:meth:`require`), so the
client can ask for a better token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcphost.errors import InsufficientScope
from mcphost.protocol.auth import Grant, grant_of, permits
from mcphost.records import UI_EXTENSION, Prompt, Resource, ResourceTemplate, Tool

if TYPE_CHECKING:
    from mcphost.catalog import Catalog
    from mcphost.kernel.views import EndpointView
    from mcphost.sessions.session import Principal, Session


_UNSET = object()


class Visibility:
    """What the sender of one request may see and use (see the module docstring)."""

    __slots__ = ("_catalog", "_grant", "principal", "session", "view")

    def __init__(self, session: Session, principal: Principal | None, view: EndpointView | None = None,
                 catalog: Catalog | None = None) -> None:
        self.session = session
        self.principal = principal
        #: The session's endpoint view (None: the whole catalog); ``catalog`` is the one it narrows.
        self.view = view
        self._catalog = catalog
        self._grant: Any = _UNSET

    @property
    def grant(self) -> Grant:
        """None: everything (a trusted local client); else the scopes the caller holds."""
        grant = self._grant
        if grant is _UNSET:
            grant = self._grant = grant_of(self.principal, self.session.trusted)
        return grant  # type: ignore[no-any-return]  # _grant is Any only to hold the _UNSET marker

    # -- the allow-lists (hidden is unknown) ------------------------------------------------------

    def allows(self, record: Any) -> bool:
        """Whether the session's allow-lists (and its endpoint's view) let the caller see ``record`` at all."""
        if self.view is not None and not self._in_view(record):
            return False
        session = self.session
        if isinstance(record, Tool):
            return session.can_see_tool(record.name)
        if isinstance(record, Prompt):
            return session.can_see_prompt(record.name)
        if isinstance(record, ResourceTemplate):
            return session.can_see_template(record.uri_template)
        if isinstance(record, Resource):
            return session.can_see_resource(record.uri)
        return True

    def _in_view(self, record: Any) -> bool:
        view, catalog = self.view, self._catalog
        assert view is not None and catalog is not None
        if isinstance(record, Tool):
            return view.allows(catalog, "tools", record.name)
        if isinstance(record, Prompt):
            return view.allows(catalog, "prompts", record.name)
        if isinstance(record, ResourceTemplate):
            return view.allows(catalog, "resourceTemplates", record.uri_template)
        if isinstance(record, Resource):
            return view.allows(catalog, "resources", record.uri)
        return True

    # -- scopes (lacking is refused) --------------------------------------------------------------

    def permits(self, scopes: frozenset[str]) -> bool:
        """Whether the caller's grant covers ``scopes``."""
        return permits(self.grant, scopes)

    def require(self, scopes: frozenset[str]) -> None:
        """Refuse (``insufficient_scope``) a record the caller's token does not cover."""
        if scopes and not permits(self.grant, scopes):
            raise InsufficientScope(scopes)

    def sees(self, record: Any) -> bool:
        """Listed for this caller: allowed by the allow-lists and covered by its scopes."""
        return self.allows(record) and (not record.scopes or permits(self.grant, record.scopes))

    # -- answers built on the two -----------------------------------------------------------------

    def listing(self, catalog: Catalog, kind: str, version: str, build: Any) -> list[dict[str, Any]]:
        """The descriptors of ``kind`` this caller sees (cached per grant by the catalog)."""
        items = catalog.visible_descriptors(kind, version, build, self.grant)
        if kind == "tools" and catalog.app_only_tools and not self.shows_apps(self.session):
            hidden = catalog.app_only_tools  # for the app, not the model: a client without apps never uses them
            items = [item for item in items if item["name"] not in hidden]
        allowed, field = self._allow_list(kind)
        if self.view is not None:
            items = self.view.listing(catalog, kind, version, self.grant, items, field)
        if allowed is None:
            return items
        return [item for item in items if item[field] in allowed]

    def _allow_list(self, kind: str) -> tuple[set[str] | None, str]:
        session = self.session
        if kind == "tools":
            return session.allowed_tools, "name"
        if kind == "prompts":
            return session.allowed_prompts, "name"
        if kind == "resourceTemplates":
            return session.allowed_templates, "uriTemplate"
        return session.allowed_resources, "uri"

    def resource(self, catalog: Catalog, uri: str) -> tuple[Any, dict[str, Any]] | None:
        """The resource or template ``uri`` resolves to, with its variables, if the caller may see it."""
        found = catalog.find_resource(uri)
        if found is None or not self.allows(found[0]):
            return None
        return found

    @staticmethod
    def shows_apps(session: Session) -> bool:
        """Whether the client declared the MCP Apps extension (it lists app-only tools, for its apps)."""
        extensions = (session.client_capabilities or {}).get("extensions")
        return isinstance(extensions, dict) and UI_EXTENSION in extensions

    @staticmethod
    def differs_per_caller(session: Session, catalog: Catalog) -> bool:
        """Whether answers may differ per caller (then caches must keep them private): the
        cache-scope decision. Asked of the session, so the request path builds nothing for it.
        An endpoint's view, and app-only tools listed to clients with apps only, are filtered too."""
        return (session.principal is not None or session.narrowed or bool(catalog.scoped_kinds)
                or session.endpoint is not None or bool(catalog.app_only_tools))
