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

import asyncio
import contextlib
import functools
import logging
from typing import Any

import orjson
from quart import Quart, Response, request

from mcphost.host import Host
from mcphost.plugins import run_plugin
from mcphost.transports.http import HttpTransport, Receive, Scope, Send, respond_unread

log = logging.getLogger("mcphost.app")


class McpApp:
    """ASGI entry point: dispatch the MCP path to the transport, the rest to Quart."""

    def __init__(self, host: Host, *, freeze_gc: bool = False) -> None:
        self.host = host
        host.prepare()
        self.path = host.config.server.path
        self.max_body = host.config.server.max_body_bytes
        self.max_header = host.config.server.max_header_bytes
        self.transport = HttpTransport(host)
        #: The MCP endpoint's path and each ``[endpoints.NAME]`` path, with and without a trailing slash.
        self.mcp_paths = frozenset(path + tail for path in (self.path, *self.transport.endpoint_paths)
                                   for tail in ("", "/"))
        #: Set by ``mcphost serve`` on SIGTERM before it stops: /readyz answers 503 while requests are
        #: still served, so a load balancer moves traffic away first (see ``shutdown_drain``).
        self.draining = False
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

        self.routes_auth = host.config.server.routes_require_auth
        self.metadata_paths = frozenset(host.resource_server.metadata_paths())
        for index, path in enumerate(host.resource_server.metadata_paths()):
            self.quart.add_url_rule(path, f"mcphost_protected_resource_{index}", self._metadata,
                                    methods=["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"],
                                    provide_automatic_options=False)
        own = set(self.quart.view_functions)
        host.pm.hook.mcphost_routes(app=self.quart)
        for endpoint, view in list(self.quart.view_functions.items()):
            if endpoint not in own:  # a plugin's: its SystemExit becomes a 500, as an Exception would
                self.quart.view_functions[endpoint] = _contained_view(self.quart, view)

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
        try:
            await self._serve(scope, receive, send)
        except (Exception, asyncio.CancelledError):
            raise
        except BaseException as exc:
            # SystemExit or KeyboardInterrupt from plugin code the host did not wrap (a plugin's
            # own route, say): leaving this task it would stop the event loop and the process.
            log.error("plugin code raised %s while serving %s %s; answered 500", type(exc).__name__,
                      scope.get("method", scope["type"]), scope.get("path", ""), exc_info=exc)
            if scope["type"] == "http":
                with contextlib.suppress(Exception):
                    await respond_unread(receive, send, 500, orjson.dumps({"error": "Internal error"}),
                                         {"connection": "close"}, False)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
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
            if scope["path"] in self.mcp_paths:
                if self.draining:  # about to stop: no keep-alive connection outlives the answer
                    send = _closing_connection(send)
                await self.transport(scope, receive, send)
                return
            probe = HEALTH_PATHS.get(scope["path"])
            if probe is not None:
                await self._health(probe, scope, receive, send)
                return
            # Plugin routes (/metrics...) get the MCP endpoint's Host and Origin checks; the
            # protected resource metadata stays readable from any origin (it is public by design).
            if scope["path"] not in self.metadata_paths and not await self.transport.check_route(
                    scope, receive, send, authenticate=self.routes_auth):
                return
        await self.quart(scope, receive, send)  # type: ignore[arg-type]  # Quart types ASGI messages as Hypercorn's TypedDicts; ours are dicts

    def begin_shutdown(self) -> None:
        """Shutdown has begun: end every open stream now, each with its final message.

        Hypercorn waits for open connections (up to ``graceful_timeout``) before the lifespan
        shutdown runs :meth:`Host.stop`, so streams are told here, when the signal arrives: SSE
        streams of the session era end with a ``retry`` hint (clients resume here once back, or
        elsewhere), 2026-07-28 ``subscriptions/listen`` streams with their result.
        """
        self.transport.closing.set()
        if self.host.kernel is not None:
            self.host.kernel.closing.set()

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Whether this process should get traffic now, and the body that says why."""
        if self.transport.closing.is_set() or self.draining:
            return False, {"status": "unavailable", "reason": "stopping"}
        if not self.host.started:
            return False, {"status": "unavailable", "reason": "starting"}
        backend = self.host.backend.name
        if not await self.host.backend_healthy():
            return False, {"status": "unavailable", "reason": "backend unhealthy", "backend": backend}
        key_problem = self.host.cluster.key_problem if self.host.cluster is not None else None
        if key_problem:  # the shared requestState key ring is missing or damaged: an operator must act
            return False, {"status": "unavailable", "reason": "state key ring", "detail": key_problem,
                           "backend": backend}
        # What plugins serve through (mcphost-proxy's upstreams): named and with their state only,
        # never an error text or a target (the probe needs no auth).
        down = [{"plugin": plugin, "name": item.name, "state": item.state, "required": item.required}
                for plugin, item in self.host.unready()]
        body: dict[str, Any] = {"status": "ready", "backend": backend}
        if any(item["required"] for item in down):
            body = {"status": "unavailable", "reason": "required dependency down", "backend": backend}
        elif down:
            body["status"] = "degraded"
        if down:
            body["down"] = down
        return body["status"] != "unavailable", body

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


def _contained_view(quart: Quart, view: Any) -> Any:
    """``view`` (a plugin's route) with BaseExceptions other than cancellation made Exceptions.

    Quart runs each request in a task of its own and catches ``Exception`` only: a ``SystemExit``
    leaving that task would stop the event loop.
    """
    call = quart.ensure_async(view)

    @functools.wraps(view)
    async def contained_view(*args: Any, **kwargs: Any) -> Any:
        return await run_plugin(call, *args, **kwargs)

    return contained_view


def _closing_connection(send: Send) -> Send:
    """``send`` with ``Connection: close`` on the response: the client opens its next request on a
    new connection (which reaches a process that keeps serving) instead of reusing one this
    process is about to close, which would fail a request sent at that moment."""
    async def closing(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
            message = {**message, "headers": [*headers, (b"connection", b"close")]}
        await send(message)
    return closing


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
    headers = scope["headers"]
    return line + sum([len(name) + len(value) for name, value in headers]) + 4 * len(headers) + 2


async def _headers_too_large(receive: Receive, send: Send, limit: int) -> None:
    body = orjson.dumps({"error": f"Request header fields larger than {limit} bytes"})
    await respond_unread(receive, send, 431, body, {"connection": "close"}, True)


async def _too_large(receive: Receive, send: Send, limit: int) -> None:
    body = orjson.dumps({"error": f"Request body larger than {limit} bytes"})
    # The body is never read, so the connection cannot carry another request: say so.
    await respond_unread(receive, send, 413, body, {"connection": "close"}, True)


__all__ = ["HEALTH_PATHS", "McpApp", "create_app"]
