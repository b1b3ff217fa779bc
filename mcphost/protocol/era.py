"""Telling which protocol era one incoming message belongs to on a dual-era endpoint.

The host serves the session era (2025-03-26 / 2025-06-18 / 2025-11-25: ``initialize``
handshake, ``Mcp-Session-Id``) and the stateless era (2026-07-28: every request carries
its own ``_meta``) on one endpoint. :func:`era_of` decides per message, in this order:

1. ``params._meta`` carries a modern reserved key (``io.modelcontextprotocol/protocolVersion``
   or ``io.modelcontextprotocol/clientCapabilities``) → **modern**. Legacy clients never put
   these keys in ``_meta`` (the prefix is reserved), so this signal is unambiguous; it is checked
   before the session id so that a stray ``Mcp-Session-Id`` on a modern request is ignored, as a
   modern server must, and so that ``initialize`` *with* modern ``_meta`` is a modern request
   (conformance then expects 404 + -32601 for it).
2. ``Mcp-Session-Id`` present (non-empty) → **legacy** (the legacy path answers 404 for an
   unknown or expired session).
3. ``method == "initialize"`` (without modern ``_meta``) → **legacy**: it opens a new session.
   It wins over a modern-looking ``MCP-Protocol-Version`` header so that a client falling back
   from a failed modern attempt, still sending its old header, can complete the handshake.
4. ``MCP-Protocol-Version`` header present with a value that is not a legacy revision
   (including an unknown one such as ``1991-01-01``) → **modern**. A request with header
   ``2026-07-28`` but no ``_meta`` is therefore modern, and modern validation rejects it with
   -32602 / HTTP 400 rather than letting it fall through to the session rules.
5. Otherwise (no modern ``_meta``, no session, header absent or naming a legacy revision)
   → **legacy** (where a missing header means 2025-03-26).

On stdio there are no headers: pass ``header_version=None`` and ``session_id=None``; a stdio
message is modern exactly when its ``_meta`` says so.

The function only classifies; it never validates. Modern messages go on to
:func:`mcphost.protocol.modern.validate_modern`.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from mcphost.protocol.versions import LEGACY_VERSIONS

Era = Literal["legacy", "modern"]

#: Reserved request ``_meta`` keys of the 2026-07-28 revision.
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
#: Result ``_meta`` key naming the server.
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"

#: Header values that select the session era. 2024-11-05 is not served, but a client naming
#: it is certainly not speaking the stateless revision.
_LEGACY_HEADER_VALUES: Final = frozenset((*LEGACY_VERSIONS, "2024-11-05"))
_MODERN_META_KEYS: Final = (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES)


def request_meta(params: object) -> dict[str, Any] | None:
    """``params._meta`` when ``params`` is an object whose ``_meta`` is an object, else ``None``."""
    if isinstance(params, dict):
        meta = params.get("_meta")
        if isinstance(meta, dict):
            return meta
    return None


def has_modern_meta(meta: object) -> bool:
    """Whether a request ``_meta`` carries one of the 2026-07-28 reserved request keys."""
    return isinstance(meta, dict) and any(key in meta for key in _MODERN_META_KEYS)


def era_of(
    *,
    method: str | None,
    meta: object,
    header_version: str | None,
    session_id: str | None,
) -> Era:
    """The era of one incoming message; see the module docstring for the rules.

    ``meta`` is the message's ``params._meta`` (anything; only an object counts),
    ``header_version`` the raw ``MCP-Protocol-Version`` header and ``session_id`` the raw
    ``Mcp-Session-Id`` header, each ``None`` when absent (always on stdio).
    """
    if has_modern_meta(meta):
        return "modern"
    if session_id is not None and session_id.strip(" \t"):
        return "legacy"
    if method == "initialize":
        return "legacy"
    if header_version is not None:
        value = header_version.strip(" \t")
        if value and value not in _LEGACY_HEADER_VALUES:
            return "modern"
    return "legacy"
