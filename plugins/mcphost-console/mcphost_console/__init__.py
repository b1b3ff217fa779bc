"""mcphost-console: the operator's live web page.

One page at ``/console`` (``[plugins.console] path``) and its data as JSON under it, read from the
host's own records and counters through :mod:`mcphost.introspect` (nothing else needs to be
installed). The page polls ``<path>/api/state`` every second: problems first, then upstreams and
the rest. The catalog and the budgets table are paged here, on the server: no answer grows with
the catalog or the number of callers. See docs/console.md.

Access (see :mod:`mcphost_console.access`): loopback clients only unless ``allow_remote``; with an
auth plugin installed, a principal holding ``scope`` (default ``mcphost:admin``); the one action,
ending a session or approving a held definition, is a POST that must carry the console's own header
and a same-origin ``Origin``.
"""

from __future__ import annotations

import hashlib
import logging
from importlib import resources
from typing import TYPE_CHECKING, Any

import orjson

import mcphost
from mcphost import introspect, pins
from mcphost_console.access import Denied, check_action, check_read
from mcphost_console.settings import ConsoleSettings

if TYPE_CHECKING:  # Quart is imported when a page is served, not when a CLI command loads the plugin
    from quart import Response

log = logging.getLogger("mcphost.console")

__version__ = "0.1.0"

#: Names per kind shown with each plugin on every poll (the catalog section has them all).
PROVIDES_SHOWN = 20
#: Rows of the budgets table per page, and records of the catalog per page (at most PAGE_MAX).
BUDGETS_PAGE = 50
CATALOG_PAGE = 100
#: Definitions awaiting approval listed on each poll (with their word diffs); the count says the rest.
PINS_SHOWN = 50
#: Files the page loads, with their content types (nothing else is served from the package).
STATIC = {"console.css": "text/css; charset=utf-8", "console.js": "text/javascript; charset=utf-8"}
#: Headers on every answer: no caching, no framing (clickjacking), no sniffing, no referrer, and a
#: policy that lets the page load only its own files.
SECURITY_HEADERS = {
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
}


class ConsolePlugin:
    """The ``console`` entry point: one instance per host."""

    def __init__(self) -> None:
        self.settings = ConsoleSettings()
        #: The host, as mcphost.introspect reads it (sessions and plugin reports: the operator's view
        #: of the host's inner state, beyond the plugin API of mcphost.Host).
        self.host: Any = None
        self._digest: tuple[Any, str] | None = None  # (the catalog, its digest)
        self._generation = 0  # catalogs seen: the digest changes with each

    @mcphost.hookimpl
    def mcphost_settings(self) -> type[ConsoleSettings]:
        return ConsoleSettings

    @mcphost.hookimpl
    def mcphost_middleware(self, host: mcphost.Host) -> list[mcphost.Middleware]:
        # Collected once while the host prepares, before the routes are registered: the place to
        # read the settings (as mcphost-otel does). The console adds nothing to the request path.
        self.host = host
        self.settings = host.settings(ConsoleSettings)
        return []

    @mcphost.hookimpl
    def mcphost_startup(self, host: mcphost.Host) -> None:
        path = self.settings.path
        if self.settings.allow_remote and not host.has_auth:
            log.warning("mcphost-console serves %s to any client that reaches this server (allow_remote = true) "
                        "and no auth plugin is installed: anyone who can reach it sees the sessions and the "
                        "config and can end sessions", path)
        else:
            log.info("mcphost-console serves %s%s", path,
                     "" if self.settings.allow_remote else " to loopback clients")

    @mcphost.hookimpl
    def mcphost_routes(self, app: Any) -> None:
        path = self.settings.path.rstrip("/")
        app.add_url_rule(path, "mcphost_console_page", self.page, methods=["GET"])
        app.add_url_rule(f"{path}/static/<name>", "mcphost_console_static", self.static, methods=["GET"])
        app.add_url_rule(f"{path}/api/state", "mcphost_console_state", self.state, methods=["GET"])
        app.add_url_rule(f"{path}/api/catalog", "mcphost_console_catalog", self.catalog, methods=["GET"])
        app.add_url_rule(f"{path}/api/budgets", "mcphost_console_budgets", self.budgets, methods=["GET"])
        app.add_url_rule(f"{path}/api/sessions/<session_id>/end", "mcphost_console_end", self.end_session,
                         methods=["POST"])
        app.add_url_rule(f"{path}/api/pins", "mcphost_console_pins", self.pins, methods=["GET"])
        app.add_url_rule(f"{path}/api/pins/decide", "mcphost_console_decide", self.decide_pin, methods=["POST"])

    # -- views ----------------------------------------------------------------------------------------

    async def page(self) -> Response:
        denied = await self._read_denied()
        if denied is not None:
            return denied
        html = _asset("console.html").replace("{{path}}", self.settings.path.rstrip("/"))
        html = html.replace("{{poll}}", str(int(self.settings.poll_seconds * 1000)))
        return _answer(html.encode(), 200, "text/html; charset=utf-8")

    async def static(self, name: str) -> Response:
        denied = await self._read_denied()
        if denied is not None:
            return denied
        if name not in STATIC:
            return _json({"error": "Not found"}, 404)
        return _answer(_asset(name).encode(), 200, STATIC[name])

    async def state(self) -> Response:
        """Everything the page polls, each part bounded: problems first, the upstreams, plugins (20
        names of each kind they provide), sessions (500), the busiest tools' traffic, one page of
        the budgets table (``budgets_offset``), health, the settings that differ from defaults."""
        from quart import request
        denied = await self._read_denied()
        if denied is not None:
            return denied
        host = self.host
        plugins = introspect.plugins(host)
        for plugin in plugins:  # a gateway's plugin may provide thousands: the catalog lists them all
            provides = plugin["provides"]
            plugin["provides_total"] = {kind: len(names) for kind, names in provides.items()}
            plugin["provides"] = {kind: names[:PROVIDES_SHOWN] for kind, names in provides.items()}
        upstreams = [u for p in plugins if isinstance(p["report"], dict)
                     for u in p["report"].get("upstreams", ()) if isinstance(u, dict)]
        reports = [p["report"] for p in plugins if isinstance(p["report"], dict)]
        stored = [c for r in reports for c in r.get("signed_in", ()) if isinstance(c, dict)]
        listing = await introspect.sessions(host)
        health = await introspect.health(host)
        return _json({
            "server": {"name": host.config.server.name, "version": mcphost.__version__},
            "problems": await introspect.problems(host, health["backend"]["healthy"]),
            "plugins": plugins,
            "upstreams": upstreams,
            "credentials": [{k: c.get(k) for k in ("principal", "upstream", "expires_at", "refreshable")}
                            for c in stored],
            "credentials_total": sum(int(r.get("signed_in_total") or 0) for r in reports),
            "sessions": listing.pop("sessions"),
            "sessions_listing": listing,
            "traffic": introspect.traffic(host, introspect.TRAFFIC_SHOWN),
            "traffic_tools": len(introspect.used_tools(host)),
            "budgets": introspect.budgets(host, _number(request.args.get("budgets_offset"), 0), BUDGETS_PAGE),
            "health": health,
            "config_changes": introspect.config_changes(host),
            "catalog_digest": self._catalog_digest(),
            "pins_version": await _pins_version(self.host),
        }, 200)

    async def catalog(self) -> Response:
        """One page of the catalog: ``offset``, ``limit`` (at most 500), ``q`` (a search), ``kind``."""
        from quart import request
        denied = await self._read_denied()
        if denied is not None:
            return denied
        args = request.args
        kind = args.get("kind") or None
        if kind is not None and kind not in {name for name, _ in introspect.PAGED_KINDS}:
            return _json({"error": f"Unknown kind: {kind[:40]}"}, 400)
        page = await introspect.catalog_page(self.host, _number(args.get("offset"), 0),
                                             _number(args.get("limit"), CATALOG_PAGE), args.get("q", ""), kind)
        return _json({**page, "digest": self._catalog_digest()}, 200)

    async def budgets(self) -> Response:
        """One page of the budgets table: ``offset``, ``limit`` (at most 500)."""
        from quart import request
        denied = await self._read_denied()
        if denied is not None:
            return denied
        limit = max(1, min(introspect.PAGE_MAX, _number(request.args.get("limit"), BUDGETS_PAGE)))
        return _json(introspect.budgets(self.host, _number(request.args.get("offset"), 0), limit), 200)

    async def end_session(self, session_id: str) -> Response:
        from quart import request
        try:
            await check_action(self.host, request, self.settings)
        except Denied as exc:
            return _denied(exc)
        await request.get_data()  # whatever came with it is read and ignored
        if not await introspect.end_session(self.host, session_id):
            return _json({"error": "No such session"}, 404)
        return _json({"ended": session_id}, 200)

    async def pins(self) -> Response:
        """The definitions awaiting approval (docs/pinning.md), each with its word diff: at most
        PINS_SHOWN of them, and how many pins there are in all."""
        denied = await self._read_denied()
        if denied is not None:
            return denied
        listed = await pins.everything(self.host.pin_store())
        awaiting = [{"upstream": pins.provider_of(scope), "kind": entry.kind, "name": entry.name,
                     "new": entry.hash is None,
                     "diff": entry.diff()} for scope, entry in listed if entry.awaiting]
        return _json({"pins": len(listed), "awaiting": len(awaiting), "shown": awaiting[:PINS_SHOWN]}, 200)

    async def decide_pin(self) -> Response:
        """Approve or reject one definition awaiting approval: ``{"name", "upstream", "approve"}``, as
        ``mcphost pins approve|reject NAME --upstream U`` does. The upstream serves it again within
        ``pins_poll`` (a second)."""
        from quart import request
        try:
            principal = await check_action(self.host, request, self.settings)
        except Denied as exc:
            return _denied(exc)
        try:
            body = orjson.loads(await request.get_data())
            name, upstream, approve = body["name"], body["upstream"], body["approve"]
            if not (isinstance(name, str) and isinstance(upstream, str) and isinstance(approve, bool)):
                raise TypeError
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return _json({"error": 'Send {"name": str, "upstream": str, "approve": bool}'}, 400)
        changed = await pins.decide(self.host.pin_store(), name, approve=approve, provider=upstream)
        if not changed:
            return _json({"error": f"Nothing of upstream {upstream[:80]!r} named {name[:200]!r} awaits approval"},
                         404)
        who = principal.subject if principal is not None else "a loopback operator"
        log.warning("console: %s %s %s of upstream %s", who, "approved" if approve else "rejected", name, upstream)
        return _json({"decided": [entry.to_json() for _, entry in changed]}, 200)

    def _catalog_digest(self) -> str:
        """Changes when the catalog is rebuilt (startup, reload); worked out once per catalog."""
        current = self.host.catalog
        if self._digest is None or self._digest[0] is not current:  # no walk of a catalog that may be huge
            self._generation += 1
            seed = repr((id(self), id(current), self._generation, len(current.tools), len(current.prompts)))
            self._digest = (current, hashlib.sha256(seed.encode()).hexdigest()[:16])
        return self._digest[1]

    async def _read_denied(self) -> Response | None:
        from quart import request
        try:
            await check_read(self.host, request, self.settings)
        except Denied as exc:
            return _denied(exc)
        return None


async def _pins_version(host: mcphost.Host) -> str | None:
    """The pin store's version (the page reloads its pins when it changes); None while unreadable."""
    try:
        return await host.pin_store().version()
    except Exception as exc:  # a store that cannot be read must not cost the rest of the page
        log.debug("the pin store cannot be read: %s", exc)
        return None


def _number(value: str | None, default: int) -> int:
    """A query's non-negative integer (``default`` when absent or not one)."""
    try:
        return max(0, int(value)) if value is not None else default
    except ValueError:
        return default


def _asset(name: str) -> str:
    return resources.files("mcphost_console").joinpath("static", name).read_text(encoding="utf-8")


def _answer(body: bytes, status: int, content_type: str, headers: dict[str, str] | None = None) -> Response:
    from quart import Response
    return Response(body, status, {**SECURITY_HEADERS, **(headers or {})}, content_type=content_type)


def _json(body: Any, status: int, headers: dict[str, str] | None = None) -> Response:
    return _answer(orjson.dumps(body), status, "application/json", headers)


def _denied(exc: Denied) -> Response:
    return _json({"error": exc.message}, exc.status, exc.headers)
