"""Who may see the console and who may act from it.

The host has already applied the MCP endpoint's Host and Origin checks to every request here
(DNS rebinding, foreign origins). On top of them:

- **Loopback only** unless ``allow_remote``: the page shows principals, client names and the
  config, so by default it is not served to the network at all. The client is told apart by the
  host's own rule (:mod:`mcphost.forwarded`): a request a proxy relayed (any of its
  ``FORWARDING_HEADERS``) is local only when that proxy is one ``server.forwarded_allow_ips``
  trusts and the client it reports is on a loopback address; from any other peer it is not
  local, even from a loopback address (a proxy on this machine would make every client look local).
- **A scope behind an auth plugin**: the request's credentials go through the host's own
  authentication (``mcphost_authenticate``); no principal is 401, a principal without the
  configured scope is 403.
- **Actions are CSRF-safe**: POST only (the route takes nothing else), with the console's own
  header (a cross-site form cannot set one, and a cross-site script cannot without a CORS
  preflight, which the console never grants) and an ``Origin`` naming this very server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcphost
from mcphost import Connection, Principal, Refused
from mcphost.forwarded import FORWARDING_HEADERS, TrustedProxies, forwarded_hops, is_loopback, relayed
from mcphost_console.settings import ConsoleSettings

#: The header the page sends with every action.
ACTION_HEADER = "x-mcphost-console"
__all__ = ["ACTION_HEADER", "FORWARDING_HEADERS", "Denied", "check_action", "check_read"]


class Denied(Exception):
    """The request may not proceed: answer ``status`` with ``message`` and ``headers``."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


async def check_read(host: mcphost.Host, request: Any, settings: ConsoleSettings) -> Principal | None:
    """Refuse (raise :class:`Denied`) a request that may not see the console; its principal otherwise."""
    if not settings.allow_remote and not _local(request, host.config.server.forwarded_allow_ips):
        raise Denied(403, "The console is served to loopback clients only ([plugins.console] allow_remote)")
    if not host.has_auth:
        return None
    scope = settings.scope
    headers = {name.lower(): value for name, value in request.headers.items()}
    connection = Connection(transport="http", headers=headers, remote=request.remote_addr, method=request.method,
                            path=request.path, scheme=request.scheme)
    challenge = f'Bearer scope="{scope}"'
    try:
        principal: Principal | None = await host.authenticate(connection)
    except Refused as exc:
        if exc.status == 401:
            raise Denied(401, exc.message, {"www-authenticate": f'{challenge}, error="invalid_token"'}) from None
        raise Denied(exc.status, exc.message, exc.headers) from None
    if principal is None:
        raise Denied(401, "Authentication required", {"www-authenticate": challenge})
    if scope not in principal.scopes:
        raise Denied(403, f"The console needs the scope {scope!r}",
                     {"www-authenticate": f'{challenge}, error="insufficient_scope"'})
    return principal


async def check_action(host: mcphost.Host, request: Any, settings: ConsoleSettings) -> Principal | None:
    """Like :func:`check_read`, and refuse a request that a cross-site page could have sent."""
    if request.headers.get(ACTION_HEADER) != "1":
        raise Denied(403, f"An action needs the {ACTION_HEADER} header (sent by the console page)")
    origin = request.headers.get("origin")
    own = f"{request.scheme}://{request.headers.get('host', '')}".lower()
    if origin is None or origin.lower().rstrip("/") != own:
        raise Denied(403, "An action needs an Origin header naming this server")
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        raise Denied(403, "Cross-site actions are refused")
    return await check_read(host, request, settings)


def _local(request: Any, forwarded_allow_ips: Any) -> bool:
    """Whether the request comes from this machine itself: a loopback peer that no proxy relayed,
    or a trusted proxy relaying a loopback client (the host's rule, :mod:`mcphost.forwarded`)."""
    headers = {name.lower(): value for name, value in request.headers.items()}
    peer = request.remote_addr or ""
    if not relayed(headers):
        return is_loopback(peer)
    proxies = TrustedProxies(forwarded_allow_ips)
    if not proxies.trusts(peer) or not forwarded_hops(headers):
        return False  # relayed by a proxy not trusted, or one that does not say for whom
    return is_loopback(proxies.client(peer, 0, headers))
