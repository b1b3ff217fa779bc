"""A session-era reply that is ready at once, on Redis: one body, two round trips, still resumable.

Two apps on one Redis (two processes of one deployment); requests go straight into the ASGI app,
as Hypercorn would hand them over.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcphost_redis.testing import RedisServer
from redis.asyncio import connection

from mcphost.transports.sse import SessionStreams
from tests.support.asgi_support import echo, open_session, request, serving, session_headers, sse_events


@pytest.fixture
async def apps(redis_server: RedisServer) -> AsyncIterator[tuple[Any, Any]]:
    plugins = {"allow": ["demo", "redis"], "redis": {"url": redis_server.url}}
    async with serving({}, plugins) as here, serving({}, plugins) as elsewhere:
        yield here, elsewhere


async def test_a_ready_reply_goes_out_in_one_body_after_two_round_trips_and_resumes_elsewhere(
        apps: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    here, elsewhere = apps
    session_id = await open_session(here)
    await request(here, "POST", echo(1, "warm"), session_headers(session_id))  # loads every script once

    pumped: list[str] = []
    original_pump = SessionStreams.pump

    async def pump(self: SessionStreams, session: Any, stream: str, *args: Any, **kwargs: Any) -> None:
        pumped.append(stream)
        await original_pump(self, session, stream, *args, **kwargs)

    trips: list[bytes] = []
    original_send = connection.AbstractConnection.send_packed_command

    async def counted(self: Any, command: Any, check_health: bool = True) -> None:
        trips.append(command if isinstance(command, bytes) else b"".join(command))
        await original_send(self, command, check_health)

    monkeypatch.setattr(SessionStreams, "pump", pump)
    monkeypatch.setattr(connection.AbstractConnection, "send_packed_command", counted)
    status, headers, body = await request(here, "POST", echo(7, "one"), session_headers(session_id))
    monkeypatch.undo()

    assert status == 200 and headers["content-type"] == "text/event-stream"
    assert headers["content-length"] == str(len(body))  # one body, not a chunked stream
    assert pumped == []  # no watcher tasks: written at once
    assert len(trips) == 2, trips  # begin (with its lease and priming event), then the reply
    priming, reply = sse_events(body)
    assert priming["data"] == "" and "retry" in priming
    assert json.loads(reply["data"]) == {"jsonrpc": "2.0", "id": 7, "result": {
        "content": [{"type": "text", "text": "one"}]}}

    # Stored before it was written: another process replays it from the priming event.
    resume = {"accept": "text/event-stream", "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25",
              "last-event-id": priming["id"]}
    status, _, body = await request(elsewhere, "GET", b"", resume)
    assert status == 200
    replayed = [event for event in sse_events(body) if event.get("data")]
    assert [json.loads(event["data"])["id"] for event in replayed] == [7]
    assert replayed[-1]["id"] == reply["id"]


async def test_a_reply_that_takes_its_time_is_streamed_as_it_comes(apps: tuple[Any, Any]) -> None:
    here, _ = apps
    session_id = await open_session(here)
    call = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                       "params": {"name": "progress", "arguments": {"steps": 2, "delay_ms": 100}}}).encode()
    status, headers, body = await request(here, "POST", call, session_headers(session_id))
    assert status == 200 and "content-length" not in headers  # streamed: the priming event went out first
    priming, reply = sse_events(body)
    assert priming["data"] == ""
    assert json.loads(reply["data"])["id"] == 9 and "result" in json.loads(reply["data"])
