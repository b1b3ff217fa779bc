"""Protocol revisions the host speaks, and version negotiation for the session era."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

#: Session-era (initialize handshake) revisions, newest first.
LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26")
LATEST_LEGACY: Final = LEGACY_VERSIONS[0]
#: The version a request is assumed to speak when nothing says otherwise (HTTP without the header).
DEFAULT_NEGOTIATED: Final = "2025-03-26"
#: Stateless revisions (per-request ``_meta``, no handshake), newest first.
MODERN_VERSIONS: Final = ("2026-07-28",)
#: Every revision the host serves, newest first. The one list used both for
#: ``server/discover`` ``supportedVersions`` and for -32022 ``data.supported``
#: (conformance requires the second to be a subset of the first; keep them identical).
SUPPORTED_VERSIONS: Final = MODERN_VERSIONS + LEGACY_VERSIONS


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


def is_modern(version: object) -> bool:
    """Whether ``version`` is a stateless (2026-07-28 style) revision the host speaks."""
    return isinstance(version, str) and version in MODERN_VERSIONS


#: The client capabilities a server's question needs one of (elicitation, sampling, roots/list).
QUESTION_CAPABILITIES = ("elicitation", "sampling", "roots")


def may_be_asked(declared: Mapping[str, object] | None) -> bool:
    """Whether a client that declared ``declared`` can be asked a question at all: one that declared
    none of :data:`QUESTION_CAPABILITIES` can never be (its calls never wait for an answer)."""
    if not declared:
        return False
    return "elicitation" in declared or "sampling" in declared or "roots" in declared
