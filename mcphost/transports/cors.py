"""CORS for the MCP endpoints (``server.path`` and every ``[endpoints.NAME]`` path).

A browser page may call ``/mcp`` from an origin that ``[server] allowed_origins`` names: the one
list the Origin check (:class:`~mcphost.transports.asgi.RequestGuard`) accepts. Its preflight
(``OPTIONS`` with ``Access-Control-Request-Method``) is answered 204 before authentication
(a preflight carries no credentials), and every answer to it carries
``Access-Control-Allow-Origin`` with ``Mcp-Session-Id`` and ``MCP-Protocol-Version`` exposed, so
the page can read the session id it must send back. Any other origin gets no CORS header at all:
the Origin check refuses a foreign one with 403, and one it accepts without naming it (a loopback
page on a loopback-bound server with no list) is not opened to scripts. No credentials mode: a
client sends ``Authorization`` itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from mcphost.transports.asgi import Receive, Send, respond_unread

#: Methods of the MCP endpoint a page may use.
METHODS = "GET, POST, DELETE"
#: Response headers a page may read: the session id and version it sends back, and challenges.
EXPOSED = "mcp-session-id, mcp-protocol-version, www-authenticate, retry-after"
#: Request headers granted when the preflight names none that can be echoed.
HEADERS = ("content-type, accept, authorization, mcp-session-id, mcp-protocol-version, last-event-id, "
           "mcp-method, mcp-name")
#: Seconds a browser may cache a preflight's answer.
MAX_AGE = "600"
_HEADER_LIST = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+(\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*")


class Cors:
    """The CORS answers of the MCP endpoints for the origins ``allowed`` (lower case, no slash)."""

    __slots__ = ("origins",)

    def __init__(self, allowed: Iterable[str]) -> None:
        self.origins = frozenset(allowed)

    def opens(self, origin: str) -> bool:
        """Whether a page on ``origin`` may read the endpoint's answers."""
        return origin.strip().lower().rstrip("/") in self.origins

    async def preflight(self, origin: str, headers: dict[str, str], receive: Receive, send: Send,
                        unread: bool) -> None:
        """Answer a preflight from an allowed ``origin``: 204 granting the methods and the headers asked."""
        asked = headers.get("access-control-request-headers", "").strip()
        granted = asked if asked and len(asked) <= 2048 and _HEADER_LIST.fullmatch(asked) else HEADERS
        await respond_unread(receive, send, 204, b"", {
            "access-control-allow-origin": origin, "access-control-allow-methods": METHODS,
            "access-control-allow-headers": granted, "access-control-max-age": MAX_AGE, "vary": "origin",
            "allow": f"{METHODS}, OPTIONS"}, unread)

    def wrap(self, send: Send, origin: str) -> Send:
        """``send`` with the CORS headers of an allowed ``origin`` added to the response's start."""
        extra = [(b"access-control-allow-origin", origin.encode("latin-1")),
                 (b"access-control-expose-headers", EXPOSED.encode()), (b"vary", b"origin")]

        async def send_with_cors(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        return send_with_cors
