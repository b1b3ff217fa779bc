"""Open ``subscriptions/listen`` streams (2026-07-28): what each asked for, and how to reach it."""

from __future__ import annotations

import logging
from typing import Any

from mcphost.protocol import jsonrpc
from mcphost.protocol.jsonrpc import RequestId
from mcphost.sessions.session import Session

log = logging.getLogger("mcphost.kernel")

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


class Listener:
    """One open subscriptions/listen stream: what it asked for, and how to reach it."""

    __slots__ = ("kinds", "request_id", "session", "task_ids", "uris")

    def __init__(self, session: Session, request_id: RequestId, kinds: set[str], uris: set[str],
                 task_ids: set[str] | None = None) -> None:
        self.session = session
        self.request_id = request_id
        self.kinds = kinds
        self.uris = uris
        self.task_ids = task_ids or set()

    async def send(self, method: str, params: dict[str, Any]) -> None:
        """Deliver a notification tagged with this subscription's id; a dead stream is dropped quietly."""
        params = {**params, "_meta": {SUBSCRIPTION_ID: self.request_id}}
        try:
            await self.session.outlet(jsonrpc.notification(method, params), self.request_id)  # type: ignore[misc]  # no outlet: the stream is gone (below)
        except Exception:
            log.debug("listen stream %r is gone", self.request_id, exc_info=True)
