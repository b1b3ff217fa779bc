"""Every hook a plugin can implement, in one place, grouped by when it fires.

Hooks are synchronous pluggy calls made at startup (and on reload) to collect records and
callables; nothing here is called through pluggy on the per-request path. Where a hook
fires per connection (the lifecycle hooks), the host collects the implementations once at
startup and calls them directly. An implementation may be ``async def``: the host awaits
its result. Implement a hook with ``@mcphost.hookimpl``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pluggy

if TYPE_CHECKING:
    import click

    from mcphost.catalog import Catalog, ProviderChange
    from mcphost.config import Config
    from mcphost.context import Context
    from mcphost.pins import PinStore
    from mcphost.records import Middleware, Prompt, Provenance, Resource, ResourceTemplate, Tool, Unready
    from mcphost.request import RequestInfo
    from mcphost.search import Ranker
    from mcphost.sessions.backend import Backend
    from mcphost.sessions.session import Connection, Principal, Session
    from mcphost.settings import PluginSettings

PROJECT = "mcphost"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

S = TypeVar("S")  # a plugin's settings model


class PluginReport(Protocol):
    """What the host knows of one plugin, as ``mcphost plugins`` shows it (``host.plugin_infos[name]``).

    A plugin may add to its own ``provides`` (mcphost-proxy lists its upstreams there)."""

    @property
    def name(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def version(self) -> str | None: ...

    @property
    def provides(self) -> dict[str, list[str]]: ...


class Host(Protocol):
    """The host as hooks receive it: the whole API a plugin uses, first-party plugins included.

    :class:`mcphost.host.Host` implements it (this module sits below the host and names it by what
    plugins use). ``settings(Model)`` is the plugin's checked section; ``config`` the whole file
    (``config.server``: the ``[server]`` settings); ``catalog`` what the host serves now;
    ``backend`` the state backend in use; the rest notifies clients, answers deferred requests,
    authenticates, and replaces one mounted provider's records.
    """

    @property
    def config(self) -> Config: ...

    @property
    def catalog(self) -> Catalog: ...

    @property
    def backend(self) -> Backend: ...

    @property
    def plugin_infos(self) -> Mapping[str, PluginReport]: ...

    def settings(self, model: type[S]) -> S:
        """This plugin's checked settings: the instance of the model it declares (``mcphost_settings``)."""
        ...

    def plugin_config(self, name: str) -> Mapping[str, object]:
        """The ``[plugins.<name>]`` section as written (for plugins that declare a JSON Schema instead
        of a settings model)."""
        ...

    @property
    def has_auth(self) -> bool:
        """Whether any plugin authenticates requests."""
        ...

    async def authenticate(self, connection: Connection) -> Principal | None:
        """Run ``mcphost_authenticate`` for ``connection``: the first principal wins; Refused propagates."""
        ...

    def pin_store(self) -> PinStore:
        """Where pinned definitions live (:mod:`mcphost.pins`): the backend's, else a file in the state directory."""
        ...

    def expect_provider(self, kinds: Iterable[str]) -> None:
        """Declare, before a mounting provider has listed, the kinds it serves (``tools``,
        ``resources``, ``prompts``): their capabilities are declared at initialize and their lists
        answer (empty at first) until :meth:`replace_provider` fills them."""
        ...

    async def replace_provider(self, provenance: Provenance, records: list[tuple[str, object]]) -> ProviderChange:
        """Replace the records of one mounted provider (``provenance.origin``) and tell sessions which
        lists changed; ``records`` are ``(hook kind, record)`` pairs."""
        ...

    async def notify_resource_updated(self, uri: str) -> None: ...

    async def notify_list_changed(self, kind: str) -> None: ...

    def respond(self, session_id: str, request_id: str | int, value: object = None,
                error: BaseException | None = None) -> bool: ...

    def context_for(self, request: RequestInfo) -> Context:
        """A :class:`~mcphost.Context` for a request a middleware handles: questions asked through it
        go to that request's client, as a tool's would."""
        ...


# -- catalog: collected at startup and on reload ------------------------------------------------

@hookspec
def mcphost_tools(host: Host) -> list[Tool] | None:
    """Tools this plugin provides.

    Fires at startup and on reload. ``host`` gives access to the host's settings and this
    plugin's settings (``host.settings(MySettings)``, see ``mcphost_settings``). Return
    :class:`mcphost.Tool` records (as built by ``@mcphost.tool``). The host validates each,
    refuses a name another plugin already provides (naming both plugins) and stamps provenance.
    """


@hookspec
def mcphost_resources(host: Host) -> list[Resource] | None:
    """Resources at fixed URIs this plugin provides (``@mcphost.resource``). Same rules as tools."""


@hookspec
def mcphost_resource_templates(host: Host) -> list[ResourceTemplate] | None:
    """Resource templates (RFC 6570) this plugin provides (``@mcphost.resource_template``)."""


@hookspec
def mcphost_prompts(host: Host) -> list[Prompt] | None:
    """Prompts this plugin provides (``@mcphost.prompt``). Same rules as tools."""


# -- session lifecycle ---------------------------------------------------------------------------

@hookspec
def mcphost_connect(session: Session, request: Connection) -> None:
    """A client connected: once per stdio process, once per HTTP request.

    ``session`` is the client's session; ``request`` describes the connection (transport,
    headers, remote address, principal). The headers never include ``Authorization``: only
    ``mcphost_authenticate`` sees credentials. Raise :class:`mcphost.Unauthorized` (401 with a
    challenge) or :class:`mcphost.Forbidden` (403) to refuse the client. May set
    ``session.assigns`` and narrow what the client sees: assign ``session.allowed_tools`` /
    ``allowed_prompts`` / ``allowed_templates`` / ``allowed_resources`` (static resources, by
    URI), or call ``session.narrow(tools=..., resources=...)``. Narrowing only ever narrows:
    an assignment is intersected with what an earlier hook (or an earlier request of the
    session) allowed, and ``None`` changes nothing, so a later plugin cannot widen what an
    earlier one hid. The narrowing applies to listings, calls, reads, subscriptions and
    completion alike. The return value is ignored. Every implementation runs, in plugin
    order, until one refuses. A refusal fires ``mcphost_disconnect(session, "refused")`` at
    once, on every transport and in both eras; when the refused connection is the one that
    opened the session (an initialize, the start of a stdio or in-memory session, every
    2026-07-28 request), ``mcphost_terminate(session, "refused")`` follows at once too. A
    refused request to a session already running leaves that session as it was. Each
    implementation has ``server.connect_timeout`` seconds (10 by default): one that takes
    longer, or raises ``CancelledError``, is a refusal too (503, or 500 for the cancellation).
    ``request.endpoint`` names the ``[endpoints.NAME]`` the client came to (None: the whole
    catalog at ``server.path``); its view narrows further.
    """


@hookspec
def mcphost_disconnect(session: Session, reason: str) -> None:
    """A connection closed: the HTTP response finished, a stream dropped, stdin reached EOF.

    Not the end of the session (see ``mcphost_terminate``). ``reason`` is one of
    ``"complete"``, ``"dropped"``, ``"eof"``, ``"refused"``, ``"shutdown"`` (stdio: SIGTERM or
    SIGINT). Every 2026-07-28 request fires it once, over stdio as over HTTP, between its connect
    and its terminate. Exceptions are logged and ignored.
    """


@hookspec
def mcphost_terminate(session: Session, reason: str) -> None:
    """The session is over and its state is being discarded. Fires once per session.

    ``reason`` is one of ``"deleted"`` (client DELETE), ``"expired"`` (idle timeout),
    ``"lifetime"`` (maximum age), ``"shutdown"``, ``"eof"`` (stdio client went away),
    ``"refused"`` (a connect hook refused the connection that opened it), or
    ``"complete"``: in the 2026-07-28 revision every request is its own short-lived session,
    so connect, disconnect and terminate all fire once for each request, in that order, on
    every transport (``session.era`` is ``"modern"`` then). The SessionManager ends sessions,
    so each fires terminate once however it ends. Exceptions are logged and ignored.
    """


@hookspec
def mcphost_exception(request: RequestInfo, exception: BaseException) -> None:
    """A request met an unexpected exception: a tool, resource, prompt or completion handler
    raised, or the host failed while serving it.

    ``request`` is the :class:`mcphost.kernel.RequestInfo`
    (defined in :mod:`mcphost.request`) being served; ``exception`` is what
    was raised. The client's answer does not change (an ``isError`` result or -32603, never the
    exception's text). Fires in the request's own task, inside the middleware chain when a
    handler raised, so context variables such as the current trace span are the request's.
    May be async. Exceptions raised here are logged once per plugin and ignored.
    """


# -- auth ------------------------------------------------------------------------------------------

@hookspec
def mcphost_authenticate(request: Connection) -> Principal | None:
    """Turn the request's credentials into a :class:`mcphost.Principal`.

    Fires on every HTTP request (any method, both protocol eras) before the session is looked
    up; never over stdio. ``request.headers`` includes ``authorization`` (read it with
    :func:`mcphost.bearer_token`). Return ``None`` when this plugin has no opinion; the first
    principal returned wins. When none does and an auth plugin is installed, the host answers
    401 with a challenge (unless ``[server] allow_anonymous``). Raise
    :class:`mcphost.Unauthorized` (``error="invalid_token"``) to refuse; the host completes the
    challenge with ``resource_metadata`` and ``scope`` and escapes it. Any other exception is a
    503 without a challenge. Set ``Principal.expires_at`` (a JWT's ``exp``) when the
    credentials expire: GET and listen streams opened with them end then. May be async.
    See docs/auth.md.
    """


@hookspec
def mcphost_protected_resource_metadata(host: Host) -> dict[str, Any] | None:
    """Fields for the RFC 9728 protected resource metadata document, collected once at startup.

    ``authorization_servers`` and ``scopes_supported`` are merged as ordered unions across
    plugins, other fields in plugin order (later wins); the host sets ``resource`` (the
    canonical URL) and ``bearer_methods_supported`` itself. With at least one contribution
    naming an authorization server, the document is served at
    ``/.well-known/oauth-protected-resource<mcp path>`` and the root form. May be async.
    """


# -- per-request middleware ------------------------------------------------------------------------

@hookspec
def mcphost_middleware(host: Host) -> list[Middleware] | None:
    """Middleware wrapped around every request, collected once at startup.

    Each record's ``fn`` is ``async def fn(request, call_next)`` where ``request`` is a
    :class:`mcphost.kernel.RequestInfo` and ``await call_next(request)`` runs the rest of the
    chain and returns the result dict. Plugin order is outermost first. Raise
    :class:`mcphost.McpError` to answer with an error. Any other exception skips this
    middleware for that request (logged once per plugin), unless the record is ``fail_closed``.
    """


# -- tool search ------------------------------------------------------------------------------------

@hookspec
def mcphost_search_rankers(host: Host) -> list[Ranker] | None:
    """Rankings of the tools fused with the built-in lexical search (``search_tools``).

    Collected once at startup. Each :class:`mcphost.search.Ranker` is told of every change of the
    search index (``update(changes)``, one provider's documents at a time, on the thread that
    indexes) and asked for its best tools per search (``rank(query, limit, accept)``, on the
    search's thread; ``accept`` is the caller's view, whose refusals it must drop); its ranking
    is fused with the lexical one by reciprocal rank fusion. Nothing is called through pluggy per
    search. An exception from the hook fails the plugin.
    """


# -- state backend ---------------------------------------------------------------------------------

@hookspec(firstresult=True)
def mcphost_backend(host: Host) -> Backend | None:
    """The state backend (session store, event log, broker). First non-None result wins.

    The built-in in-memory backend is registered ``trylast`` so any installed backend wins. The
    result must be an instance of a :class:`mcphost.sessions.backend.Backend` subclass (anything
    else stops startup with a PluginError); the base class's defaults say what is optional.
    """


# -- extension points for the world outside the protocol ------------------------------------------

@hookspec
def mcphost_routes(app: Any) -> None:
    """Register extra HTTP routes or blueprints on the Quart ``app`` (health, metrics, metadata).

Requests to them pass the MCP endpoint's Host and Origin checks first (and its authentication
with ``[server] routes_require_auth``); a ``SystemExit`` raised in a view answers 500."""


@hookspec
def mcphost_register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``mcphost`` command line.

    Called when the command line meets a command name it does not know (the built-in commands,
    ``--help`` and ``--version`` import no plugin); the name is then looked up again.
    """


@hookspec
def mcphost_settings() -> type[PluginSettings] | None:
    """This plugin's settings model: the class of its ``[plugins.<name>]`` section.

    A subclass of :class:`mcphost.PluginSettings` (a pydantic model; a plain ``pydantic.BaseModel``
    works too), declared once: its fields' types, defaults, constraints and descriptions. The host
    derives the section's JSON Schema from it (``mcphost config schema``, the configuration
    reference), checks every plugin's section before the host starts (all problems at once, each
    naming the plugin and the key, an unknown key with a did-you-mean), replaces ``${VAR}`` in
    :data:`mcphost.EnvStr` fields, and hands the checked, frozen instance to the plugin:
    ``host.settings(MySettings)`` in any hook that receives ``host`` (defaults filled in; an absent
    section is all defaults). Called at startup; takes no arguments.
    """


@hookspec
def mcphost_config_schema() -> dict[str, Any] | None:
    """A JSON Schema for this plugin's ``[plugins.<name>]`` config section (the older way; prefer
    ``mcphost_settings``, which also hands the plugin a typed instance).

    The section is validated before the host starts; a violation stops startup with a
    message naming the plugin, the key and the problem. A plugin that declares a settings model
    needs no schema: the model's is used.
    """


@hookspec
def mcphost_unconfigured(host: Host) -> str | None:
    """Whether this plugin is waiting for configuration: the one setting that wakes it, or None.

    Called once when the host prepares, after the config sections are validated and before any
    other hook is collected. A plugin that can do nothing useful until it is configured (an auth
    plugin without an issuer, an exporter without a destination) returns the setting that wakes
    it, e.g. ``"[plugins.jwt] issuer"``; the host then lists it as "not configured" and calls none
    of its other hooks, so it costs nothing. None (or no implementation): the plugin is active.
    """


@hookspec
def mcphost_status(host: Host) -> Mapping[str, Any] | None:
    """This plugin's live state for operators, as JSON-able data (or None: nothing to report).

    Called on demand by operator tools (the mcphost-console page polls it), never per request,
    so it must be cheap and must not block (``mcphost plugins`` shows it too). mcphost-proxy, for
    one, answers ``{"upstreams": [{"name", "transport", "state", "target", "tools", "restarts",
    "error", "retry_in", "required", "era", "extensions"}, ...]}``. An exception is shown as this
    plugin's report error. (A plugin waiting for configuration says so with ``mcphost_unconfigured``
    instead: its other hooks, this one included, are not called then.)
    """


@hookspec
def mcphost_readiness(host: Host) -> Iterable[Unready] | None:
    """What this plugin serves through that cannot serve now: each an ``mcphost.Unready`` (name,
    state, required), or nothing when all is well.

    Asked by every ``/readyz`` probe once the host has started (load balancers probe every few
    seconds), so it must answer from state the plugin already holds: no I/O, nothing that blocks.
    A ``required`` one makes ``/readyz`` answer 503 (the balancer stops sending traffic); any
    other makes it answer 200 with ``"status": "degraded"`` naming it. mcphost-proxy reports its
    upstreams that are not running (``required`` per ``[plugins.proxy.servers.NAME]``). An
    implementation that raises counts as degraded, named by its plugin, and is logged once.
    """


@hookspec
def mcphost_problems(host: Host) -> Iterable[Mapping[str, Any]] | None:
    """What in this plugin needs the operator now, as a list of problems (or None: nothing).

    Each problem is a mapping with ``kind`` (a short word operators' tools may group by, such as
    ``upstream``, ``held``, ``budget``), ``severity`` (``"error"``: something is down or refusing;
    ``"warning"``: something needs a look), ``title`` (one line naming what), ``detail`` (one
    line saying why: the error, since when) and ``link`` (where the console shows it: a fragment
    such as ``#upstream-NAME``, ``#plugin-NAME``, ``#tool-NAME``, or a section such as
    ``#catalog``). Gathered with the host's own (failed plugins, budgets refusing, error rates above
    normal) by :func:`mcphost.introspect.problems`, which the console's top strip shows. Called on
    demand, never per request: it must be cheap and must not block. Text is redacted before it is
    shown. An exception becomes a problem of its own naming this plugin.
    """


@hookspec
def mcphost_startup(host: Host) -> None:
    """The host is starting; the catalog is built. May be async (awaited before serving)."""


@hookspec
def mcphost_shutdown(host: Host) -> None:
    """The host is stopping, after sessions were terminated. May be async."""
