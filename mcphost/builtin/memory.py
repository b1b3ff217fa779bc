"""The built-in state backend: session state kept in this process's memory.

Registered ``trylast``, so an installed backend plugin (for instance mcphost-redis) wins.
"""

from __future__ import annotations

from typing import Any

from mcphost.hookspecs import hookimpl


class MemoryBackend:
    """Session state as JSON-able dicts in a local mapping (one process, nothing survives a restart)."""

    name = "memory"
    shared = False

    def __init__(self) -> None:
        self._sessions: dict[str, dict[str, Any]] = {}

    async def load_session(self, session_id: str) -> dict[str, Any] | None:
        return self._sessions.get(session_id)

    async def save_session(self, state: dict[str, Any]) -> None:
        self._sessions[state["id"]] = state

    async def delete_session(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)


@hookimpl(trylast=True)
def mcphost_backend(host: Any) -> MemoryBackend:
    return MemoryBackend()
