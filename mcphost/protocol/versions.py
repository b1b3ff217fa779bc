"""Protocol revisions the host speaks, and version negotiation for the session era."""

from __future__ import annotations

from typing import Final

#: Session-era (initialize handshake) revisions, newest first.
LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26")
LATEST_LEGACY: Final = LEGACY_VERSIONS[0]
#: The version a request is assumed to speak when nothing says otherwise (HTTP without the header).
DEFAULT_NEGOTIATED: Final = "2025-03-26"


def negotiate(requested: object) -> str:
    """The version to answer an ``initialize`` with: the requested one when supported, else the latest."""
    if isinstance(requested, str) and requested in LEGACY_VERSIONS:
        return requested
    return LATEST_LEGACY


def at_least(version: str, minimum: str) -> bool:
    """Whether ``version`` is ``minimum`` or newer (revision names sort as dates)."""
    return version >= minimum


def allows_batches(version: str) -> bool:
    """Only 2025-03-26 lets a client send JSON-RPC batches."""
    return version == "2025-03-26"
