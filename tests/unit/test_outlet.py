"""The HTTP session outlet while the event log is unavailable (a shared backend restarting): a
notification is dropped and its sender goes on; a request the client must answer raises to its asker."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mcphost.sessions.backend import BackendUnavailable
from mcphost.sessions.session import Session
from mcphost.transports.sse import HttpSessionState, Outlet


class _AwayLog:
    """An event log whose backend is away: every append fails as a restarting Redis's does."""

    def __init__(self) -> None:
        self.tried: list[dict[str, Any]] = []

    async def append(self, session_id: str, stream_id: str, message: dict[str, Any] | None, **_: Any) -> int:
        assert message is not None
        self.tried.append(message)
        raise BackendUnavailable("Redis is unavailable (ConnectionError)")


async def test_a_notification_the_log_cannot_take_is_dropped_and_the_sender_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    events = _AwayLog()
    outlet = Outlet(events, Session("s1"), HttpSessionState())  # type: ignore[arg-type]
    progress = {"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": "p", "progress": 1}}
    with caplog.at_level(logging.WARNING, logger="mcphost.http"):
        await outlet(progress, related=4)  # no exception: the tool that reported progress goes on
    assert events.tried == [progress]
    assert "dropped a notifications/progress notification" in caplog.text


async def test_a_request_the_log_cannot_take_raises_to_its_asker() -> None:
    outlet = Outlet(_AwayLog(), Session("s1"), HttpSessionState())  # type: ignore[arg-type]
    with pytest.raises(BackendUnavailable):
        await outlet({"jsonrpc": "2.0", "id": "q1", "method": "elicitation/create", "params": {}}, related=4)
