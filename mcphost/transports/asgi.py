"""ASGI plumbing shared by the HTTP transports: plain answers, bounded body discarding, the
Host/Origin guard and the credential checks made before any plugin sees a request."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from mcphost.errors import Refused
from mcphost.forwarded import TrustedProxies
from mcphost.protocol import jsonrpc
from mcphost.protocol.auth import bearer_challenge, bearer_token
from mcphost.protocol.errors import INVALID_REQUEST, McpError

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
#: MCP request headers that carry one value: sent twice with different values, a request is refused.
_SINGLE_VALUED = ((b"mcp-protocol-version", "MCP-Protocol-Version"), (b"mcp-session-id", "Mcp-Session-Id"),
                  (b"mcp-method", "Mcp-Method"), (b"mcp-name", "Mcp-Name"))
_JSON = (b"content-type", b"application/json")


class HttpError(Exception):
    """An outcome decided before the kernel is involved: status, JSON-RPC error, extra headers."""

    def __init__(self, status: int, message: str, *, code: int = INVALID_REQUEST, request_id: Any = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = jsonrpc.error(request_id, McpError(code, message))
        self.headers = headers or {}


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RequestGuard:
    """The Host and Origin checks (DNS rebinding, cross-site requests), made before anything else."""

    def __init__(self, settings: Any) -> None:
        self.loopback = is_loopback(settings.host)
        self.allowed_hosts = {h.lower() for h in settings.allowed_hosts}
        self.allowed_origins = {o.lower().rstrip("/") for o in settings.allowed_origins}
        #: Host values accepted before (a server sees few): checked again only when new.
        self._good_hosts: set[str] = set()

    def check(self, headers: dict[str, str], raw: list[tuple[bytes, bytes]] | None = None) -> None:
        """403 for an Origin this server does not accept, 421 for a Host it is not.

        ``raw``: the request's header lines, checked for a repeated Origin or Host (``headers``
        kept only the last of each name, which a browser's real Origin could hide behind).
        """
        if raw is not None and len(raw) != len(headers):  # some name repeats: rare, only then count
            names = [name.lower() for name, _ in raw]
            if names.count(b"origin") > 1:
                raise HttpError(403, "Forbidden: more than one Origin header")
            if names.count(b"host") > 1:
                raise HttpError(421, "Misdirected request: more than one Host header")
            # Two different protocol versions or sessions in one request: no answer could be right
            # (``headers`` kept only the last of each, which the client may not have meant).
            for name, shown in _SINGLE_VALUED:
                if len({value for key, value in raw if key.lower() == name}) > 1:
                    raise HttpError(400, f"Bad request: conflicting {shown} headers")
        origin = headers.get("origin")
        if origin is not None and not self.origin_allowed(origin, headers.get("host", "")):
            raise HttpError(403, "Forbidden: invalid Origin header")
        sent = headers.get("host", "")
        if sent in self._good_hosts:
            return
        self._check_host(sent.lower())
        if len(self._good_hosts) < 64:
            self._good_hosts.add(sent)

    def _check_host(self, host: str) -> None:
        if (self.allowed_hosts or self.loopback) and not _well_formed_host(host):
            raise HttpError(421, "Misdirected request: invalid Host header")
        if self.allowed_hosts:
            if host not in self.allowed_hosts and hostname(host) not in self.allowed_hosts:
                raise HttpError(421, "Misdirected request: invalid Host header")
        elif self.loopback and hostname(host) not in LOOPBACK_NAMES:
            raise HttpError(421, "Misdirected request: invalid Host header")

    def origin_allowed(self, origin: str, host: str) -> bool:
        origin = origin.strip().lower().rstrip("/")
        try:
            parts = urlsplit(origin)
            hostname = parts.hostname
            port = parts.port  # ValueError when out of range
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not hostname or parts.path or parts.query or parts.fragment:
            return False
        # A browser's Origin is exactly scheme://host[:port]: anything around the host (user info,
        # text after an IPv6 literal, an odd port spelling) is no Origin a browser sends; deny it.
        shown = f"[{hostname}]" if ":" in hostname else hostname
        if parts.netloc != (shown if port is None else f"{shown}:{port}"):
            return False
        if self.allowed_origins:
            return origin in self.allowed_origins
        if self.loopback:
            return hostname in LOOPBACK_NAMES or hostname == "::1"
        return parts.netloc == host.lower()  # same origin


def _well_formed_host(host: str) -> bool:
    """Whether ``host`` is ``name``, ``name:port``, ``[v6]`` or ``[v6]:port`` with a numeric port."""
    if host.startswith("["):
        end = host.find("]")
        rest = host[end + 1:] if end > 0 else None
    elif host.count(":") > 1:  # a bare IPv6 address, as some clients send it
        return is_loopback(host) or _is_address(host)
    else:
        rest = host[host.find(":"):] if ":" in host else ""
    if rest is None:
        return False
    if not rest:
        return True
    port = rest[1:]
    return rest[0] == ":" and 0 < len(port) <= 5 and port.isascii() and port.isdigit()


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class ClientAddress(TrustedProxies):
    """Where a request comes from, as ``host:port``: the socket's peer, or behind a proxy that
    ``server.forwarded_allow_ips`` trusts, the client that proxy reports (``Forwarded`` first,
    then ``X-Forwarded-For``; see :mod:`mcphost.forwarded`).

    Anonymous callers' quotas are per address, so behind a reverse proxy without this every
    anonymous client would share the proxy's.
    """

    def __call__(self, scope: Scope, headers: dict[str, str]) -> str | None:
        client = scope.get("client")
        if not client:
            return None
        if not self.trusting:  # no trusted proxy (the default): the socket's peer, without the header rules
            return f"{client[0]}:{client[1]}"
        return self.client(str(client[0]), client[1], headers)


def request_headers(scope: Scope) -> dict[str, str]:
    """The request's headers by name (a repeated name keeps its last value).

    Names come lower-cased from the server: ASGI servers (Hypercorn, uvicorn) send them so, as
    HTTP/2 requires and Starlette relies on; they are not lower-cased again here.
    """
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}


async def respond_unread(receive: Receive, send: Send, status: int, body: bytes, headers: dict[str, str],
                         unread: bool) -> None:
    """Answer a request whose body may still be arriving, discarding it meanwhile.

    Hypercorn hands body chunks to the app through a small queue, and finishing a response
    waits for room in it: with nobody reading, a client sending many small chunks would leave
    the response (and the server's shutdown) hanging for good.
    """
    if not unread:
        await respond(send, status, body, headers)
        return
    drain = asyncio.ensure_future(_discard_body(receive))
    try:
        await respond(send, status, body, headers)
    finally:
        drain.cancel()


async def _discard_body(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body"):
            return


async def respond(send: Send, status: int, body: bytes, headers: dict[str, str]) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    if body:
        raw.append(_JSON)
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def wait_disconnect(receive: Receive) -> None:
    """Return when the client closes the connection."""
    while (await receive())["type"] != "http.disconnect":
        pass


def closing(headers: dict[str, str], close: bool) -> dict[str, str]:
    return {**headers, "connection": "close"} if close else headers


def hostname(host: str) -> str:
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host





#: Request headers that carry credentials: for ``mcphost_authenticate`` only, never handed on.
CREDENTIAL_HEADERS = ("authorization", "proxy-authorization")


def without_credentials(headers: dict[str, str]) -> dict[str, str]:
    if "authorization" not in headers and "proxy-authorization" not in headers:
        return headers
    return {name: value for name, value in headers.items() if name not in CREDENTIAL_HEADERS}


def check_credentials(scope: Scope, headers: dict[str, str], credentials: str) -> None:
    """400 ``invalid_request`` for credentials no plugin should have to guess at.

    Two Authorization header lines, or a Bearer value that is not exactly one token (proxies
    join duplicate headers with commas), are refused rather than read one way or another.
    Other schemes are left to the plugins.
    """
    raw = scope["headers"]
    # Repeated header names are rare: only then count (``headers`` kept the last of each name).
    if len(raw) != len(headers) and sum(1 for name, _ in raw if name.lower() == b"authorization") > 1:
        problem = "more than one Authorization header"
    elif credentials.strip().partition(" ")[0].lower() == "bearer" and bearer_token(credentials) is None:
        problem = "malformed Bearer credentials (exactly one token expected)"
    else:
        return
    raise Refused(f"Bad request: {problem}", status=400,
                  headers={"WWW-Authenticate": bearer_challenge(error="invalid_request", description=problem)})
