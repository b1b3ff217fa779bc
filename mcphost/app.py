"""The ASGI application: Quart for every route, a lean handler for the MCP endpoint.

Quart owns lifespan (host startup and shutdown), plugin routes (``mcphost_routes``), the
protected resource metadata (RFC 9728, when an auth plugin contributes it) and anything else;
requests to the MCP path skip Quart's per-request machinery and go straight to
:class:`~mcphost.transports.http.HttpTransport`. Request bodies above the configured limit
are refused with 413 on every route before they are read.

``/healthz`` (liveness) and ``/readyz`` (readiness) are answered here too, without Quart and
without auth: probes are frequent, and they reveal nothing but whether this process can serve.
"""

from __future__ import annotations

from typing import Any

import orjson
from quart import Quart, Response, request

from mcphost.host import Host
from mcphost.transports.http import HttpTransport, Receive, Scope, Send, respond_unread


class McpApp:
    """ASGI entry point: dispatch the MCP path to the transport, the rest to Quart."""

    def __init__(self, host: Host, *, freeze_gc: bool = False) -> None:
        self.host = host
        host.prepare()
        self.path = host.config.server.path
        self.max_body = host.config.server.max_body_bytes
        self.max_header = host.config.server.max_header_bytes
        self.transport = HttpTransport(host)
        self.quart = Quart("mcphost")
        self.quart.config["MAX_CONTENT_LENGTH"] = self.max_body
        self.quart.config["BODY_TIMEOUT"] = host.config.server.body_timeout
        self.quart.config["PROVIDE_AUTOMATIC_OPTIONS"] = True

        @self.quart.before_serving
        async def startup() -> None:
            await host.start(freeze_gc=freeze_gc)
            host.resource_server.warn_unset_url()
            await self.transport.start()

        @self.quart.after_serving
        async def shutdown() -> None:
            await self.transport.stop()
            await host.stop()

        for index, path in enumerate(host.resource_server.metadata_paths()):
            self.quart.add_url_rule(path, f"mcphost_protected_resource_{index}", self._metadata,
                                    methods=["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"],
                                    provide_automatic_options=False)
        host.pm.hook.mcphost_routes(app=self.quart)

    async def _metadata(self) -> Response:
        """The protected resource metadata document: public, read-only, readable cross-origin."""
        # Whatever body came (bounded by MAX_CONTENT_LENGTH and Quart's body timeout) is read, so
        # the connection stays usable for the client's next request.
        await request.get_data()
        document = self.host.resource_server.metadata(request.scheme, request.headers.get("host", ""))
        if document is None:
            return _json({"error": "Not found"}, 404)
        cors = {"access-control-allow-origin": "*"}
        if request.method == "OPTIONS":  # a browser's preflight (clients send MCP-Protocol-Version)
            return Response(b"", 204, {**cors, "access-control-allow-methods": "GET, HEAD, OPTIONS",
                                       "access-control-allow-headers": "*", "access-control-max-age": "86400"})
        if request.method not in ("GET", "HEAD"):
            return _json({"error": f"Method {request.method} not allowed"}, 405, {"allow": "GET, HEAD, OPTIONS"})
        return _json(document, 200, cors)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            # The declared size is checked first, on every route and method (the MCP endpoint's
            # own checks - Accept, Content-Type - would otherwise answer first for some requests).
            if _header_bytes(scope) > self.max_header:
                await _headers_too_large(receive, send, self.max_header)
                return
            length = _content_length(scope)
            if length is not None and length > self.max_body:
                await _too_large(receive, send, self.max_body)
                return
            if scope["path"] == self.path or scope["path"] == self.path + "/":
                await self.transport(scope, receive, send)
                return
            probe = HEALTH_PATHS.get(scope["path"])
            if probe is not None:
                await self._health(probe, scope, receive, send)
                return
        await self.quart(scope, receive, send)  # type: ignore[arg-type]  # Quart types ASGI messages as Hypercorn's TypedDicts; ours are dicts

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Whether this process should get traffic now, and the body that says why."""
        if self.transport.closing.is_set():
            return False, {"status": "unavailable", "reason": "stopping"}
        if not self.host.started:
            return False, {"status": "unavailable", "reason": "starting"}
        backend = getattr(self.host.backend, "name", type(self.host.backend).__name__)
        if not await self.host.backend_healthy():
            return False, {"status": "unavailable", "reason": "backend unhealthy", "backend": backend}
        return True, {"status": "ready", "backend": backend}

    async def _health(self, probe: str, scope: Scope, receive: Receive, send: Send) -> None:
        unread = _content_length(scope) not in (None, 0)
        if scope["method"] not in ("GET", "HEAD"):
            await respond_unread(receive, send, 405, orjson.dumps({"error": "Method not allowed"}),
                                 {"allow": "GET, HEAD", "cache-control": "no-store"}, unread)
            return
        if probe == "live":
            ok, body = True, {"status": "ok"}
        else:
            ok, body = await self.readiness()
        payload = b"" if scope["method"] == "HEAD" else orjson.dumps(body)
        await respond_unread(receive, send, 200 if ok else 503, payload, {"cache-control": "no-store"}, unread)


#: Probe paths answered by the app itself (they shadow plugin routes of the same path).
HEALTH_PATHS = {"/healthz": "live", "/readyz": "ready"}


def create_app(host: Host, *, freeze_gc: bool = False) -> McpApp:
    """The ASGI app serving ``host``."""
    return McpApp(host, freeze_gc=freeze_gc)


def _json(body: object, status: int, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status, headers, content_type="application/json")


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _header_bytes(scope: Scope) -> int:
    """The size of the request head as sent: request line and ``name: value\r\n`` lines."""
    line = len(scope["method"]) + len(scope.get("raw_path") or b"") + 12
    return line + sum(len(name) + len(value) + 4 for name, value in scope["headers"]) + 2


async def _headers_too_large(receive: Receive, send: Send, limit: int) -> None:
    body = orjson.dumps({"error": f"Request header fields larger than {limit} bytes"})
    await respond_unread(receive, send, 431, body, {"connection": "close"}, True)


async def _too_large(receive: Receive, send: Send, limit: int) -> None:
    body = orjson.dumps({"error": f"Request body larger than {limit} bytes"})
    # The body is never read, so the connection cannot carry another request: say so.
    await respond_unread(receive, send, 413, body, {"connection": "close"}, True)


__all__ = ["HEALTH_PATHS", "McpApp", "create_app"]
