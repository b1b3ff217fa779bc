"""One 2026-07-28 request straight through a started host's kernel, without a transport.

Validated as the HTTP transport validates it, answered on the short-lived session the
transport would build (its notifications are dropped). For tests of kernel behaviour that
need no sockets: cache hints, single-use states, tool time limits, tasks at shutdown.
"""

from __future__ import annotations

from typing import Any

from mcphost.protocol.modern import validate_modern
from tests.support.http_support import modern


async def modern_call(host: Any, method: str, params: dict[str, Any], *, principal: Any = None,
                      meta_extra: dict[str, Any] | None = None, remote: str | None = None) -> dict[str, Any]:
    """The JSON-RPC reply (result or error) to one modern request (``remote``: the client's
    ``host:port``, which tells anonymous callers apart)."""
    payload, headers = modern(method, params, meta_extra=meta_extra)
    request = validate_modern(payload, {k.lower(): v for k, v in headers.items()},
                              tool_header_params=host.catalog.tool_header_params)

    async def outlet(message: dict[str, Any], related: Any) -> None:
        return None

    session = host.kernel.sessions.ephemeral(request, principal, outlet, remote)
    return await host.kernel.receive_modern(session, payload)
