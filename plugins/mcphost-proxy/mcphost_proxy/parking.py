"""Per-principal caps on the proxied calls parked while a 2026-07-28 client answers a question.

Every proxied tool is resumable: when the upstream asks a 2026-07-28 client a question, the
upstream call stays open (parked) until the client retries with the answer, or the host gives up
on it. A principal that asks and never answers would otherwise hold calls (and what they carry)
without bound; past its share, the question is refused and its call ends with a clear error.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import mcphost
from mcphost_proxy.settings import ProxyConfig

#: [plugins.proxy] as written when nothing is: where a Parking made before the settings are read
#: takes its caps (max_parked_calls and max_parked_bytes are declared once, in the model).
_UNSET = ProxyConfig()


class Parking:
    """What each principal has parked: (calls, bytes), by its quota key."""

    def __init__(self, max_calls: int = _UNSET.max_parked_calls, max_bytes: int = _UNSET.max_parked_bytes) -> None:
        self.max_calls = max_calls
        self.max_bytes = max_bytes
        self.held: dict[Any, tuple[int, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, ctx: mcphost.Context, size: int) -> AsyncIterator[None]:
        """Count a call parked for ``ctx``'s principal while the question is out (2026-07-28 clients)."""
        session = ctx.session
        if session.era != "modern":
            yield
            return
        key = getattr(session, "quota", None) or session.id
        calls, held = self.held.get(key, (0, 0))
        if calls + 1 > self.max_calls:
            raise mcphost.ToolError(f"This client already has {calls} calls waiting for its answers (the proxy's "
                                    f"max_parked_calls is {self.max_calls}); answer or abandon one, then retry")
        if held + size > self.max_bytes:
            raise mcphost.ToolError(f"This client's calls waiting for its answers hold {held + size} bytes, over the "
                                    f"proxy's max_parked_bytes ({self.max_bytes}); answer or abandon one, then retry")
        self.held[key] = (calls + 1, held + size)
        try:
            yield
        finally:
            calls, held = self.held.get(key, (1, size))
            if calls <= 1:
                self.held.pop(key, None)
            else:
                self.held[key] = (calls - 1, held - size)
