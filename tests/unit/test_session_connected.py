"""SessionManager.connected: one block from the connect hooks to the disconnect hooks.

The HTTP transport holds every session-era request in it; these check the rule it relies on:
disconnect("complete") exactly once however the block is left, none when the block handed the
connection over (the SSE writer then reports its own end), and a refusal propagating after the
refusal rule ran (disconnect "refused", and terminate for the connection that opened the session).
"""

from __future__ import annotations

import pytest

from mcphost.builtin.memory import MemoryBackend
from mcphost.config import ServerSettings
from mcphost.errors import Forbidden
from mcphost.sessions.manager import SessionManager
from mcphost.sessions.session import Connection, Session


class RecordingHooks:
    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.calls: list[tuple[str, str]] = []

    @property
    def active(self) -> bool:
        return True

    async def connect(self, session: Session, connection: Connection) -> None:
        self.calls.append(("connect", ""))
        if self.refuse:
            raise Forbidden("not you")

    async def disconnect(self, session: Session, reason: str) -> None:
        self.calls.append(("disconnect", reason))

    async def terminate(self, session: Session, reason: str) -> None:
        self.calls.append(("terminate", reason))


def manager_with(hooks: RecordingHooks) -> SessionManager:
    return SessionManager(ServerSettings(), MemoryBackend(), hooks)


CONNECTION = Connection(transport="http")


async def test_leaving_the_block_runs_disconnect_complete_once() -> None:
    hooks = RecordingHooks()
    manager = manager_with(hooks)
    session = manager.new()
    async with manager.connected(session, CONNECTION) as link:
        assert link.session is session
        assert hooks.calls == [("connect", "")]
    assert hooks.calls == [("connect", ""), ("disconnect", "complete")]
    assert not session.closed  # a connection ended, not the session


async def test_an_error_inside_the_block_still_runs_disconnect_complete_once() -> None:
    hooks = RecordingHooks()
    manager = manager_with(hooks)
    session = manager.new()
    with pytest.raises(LookupError):
        async with manager.connected(session, CONNECTION):
            raise LookupError("the request failed")
    assert hooks.calls == [("connect", ""), ("disconnect", "complete")]


async def test_a_handed_off_connection_is_left_to_its_writer() -> None:
    hooks = RecordingHooks()
    manager = manager_with(hooks)
    session = manager.new()
    with pytest.raises(LookupError):
        async with manager.connected(session, CONNECTION) as link:
            link.hand_off()
            raise LookupError("the writer failed after taking over")
    assert hooks.calls == [("connect", "")]  # the writer reports complete or dropped itself


async def test_a_refusal_of_the_opening_connection_terminates_the_session_and_propagates() -> None:
    hooks = RecordingHooks(refuse=True)
    manager = manager_with(hooks)
    session = manager.new()
    with pytest.raises(Forbidden):
        async with manager.connected(session, CONNECTION, opening=True):
            raise AssertionError("the block does not run for a refused connection")
    assert hooks.calls == [("connect", ""), ("disconnect", "refused"), ("terminate", "refused")]
    assert session.closed and manager.get(session.id) is None


async def test_a_refusal_of_a_later_connection_leaves_the_session_running() -> None:
    hooks = RecordingHooks(refuse=True)
    manager = manager_with(hooks)
    session = manager.new()
    with pytest.raises(Forbidden):
        async with manager.connected(session, CONNECTION):
            raise AssertionError("the block does not run for a refused connection")
    assert hooks.calls == [("connect", ""), ("disconnect", "refused")]
    assert not session.closed and manager.get(session.id) is session
