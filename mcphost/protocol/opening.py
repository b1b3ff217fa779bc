"""Validation of the session era's opening request, ``initialize``.

The counterpart of :func:`mcphost.protocol.modern.validate_modern` for the session era: a pure
check of the message alone, so a transport can run it before it mints a session (an invalid
initialize then leaves none behind) and the kernel's handler runs the same check again.
"""

from __future__ import annotations

from typing import Any

from mcphost.protocol.errors import invalid_params


def check_initialize(params: Any) -> None:
    """Raise -32602 for ``initialize`` params that do not fit the schema (``protocolVersion`` a
    string, ``capabilities`` and ``clientInfo`` objects, the client's name and version strings)."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise invalid_params("Invalid params: initialize takes an object")
    if not isinstance(params.get("protocolVersion"), str):
        raise invalid_params('Invalid params: "protocolVersion" must be a string')
    capabilities = params.get("capabilities", {})
    client_info = params.get("clientInfo", {})
    if not isinstance(capabilities, dict) or not isinstance(client_info, dict):
        raise invalid_params('Invalid params: "capabilities" and "clientInfo" must be objects')
    for key in ("name", "version"):
        if key in client_info and not isinstance(client_info[key], str):
            raise invalid_params(f'Invalid params: "clientInfo.{key}" must be a string')
