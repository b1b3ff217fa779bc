"""The event log's round trips on Redis: a request stream in two, scripts by SHA, local readers.

A request stream costs one round trip to begin and one per reply; the SSE writer of a stream its
own process writes reads what that process appended, not Redis; a discard of a stream written to
its end goes with the session's next ``begin``; a NOSCRIPT (Redis restarted, SCRIPT FLUSH) is
answered by loading the script, once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from mcphost_redis import RedisBackend
from mcphost_redis.testing import RedisServer, redis_settings
from redis.asyncio import connection

from mcphost.sessions.backend import Event, UnknownEvent


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every batch of commands written to Redis (one per round trip), by every backend here."""
    sent: list[bytes] = []
    original = connection.AbstractConnection.send_packed_command

    async def counted(self, command, check_health=True):  # type: ignore[no-untyped-def]
        sent.append(command if isinstance(command, bytes) else b"".join(command))
        return await original(self, command, check_health)

    monkeypatch.setattr(connection.AbstractConnection, "send_packed_command", counted)
    return sent


@pytest.fixture
async def pair(redis_server: RedisServer) -> AsyncIterator[tuple[RedisBackend, RedisBackend]]:
    """Two backends on one Redis and one prefix: two processes of one deployment."""
    settings = redis_settings(redis_server.url)
    backends = (RedisBackend(settings), RedisBackend(settings))
    for backend in backends:
        await backend.start()
    yield backends
    for backend in backends:
        await backend.close()


async def test_a_request_stream_costs_one_round_trip_to_begin_and_one_per_reply(pair, trips):
    here, _ = pair
    log = here.events
    await log.begin("s", "1", [7], 6.0)  # once: loads the scripts where Redis lacks them
    await log.append("s", "1", {"id": 7, "result": {}}, final=True)
    trips.clear()
    await log.begin("s", "2", [8], 6.0)
    await log.append("s", "2", {"id": 8, "result": {}}, final=True, data=b'{"id":8,"result":{}}')
    result = await log.read("s", "2", 1, 5)
    assert result.done and result.events == [Event(2, {"id": 8, "result": {}})]
    assert result.events[0].data == b'{"id":8,"result":{}}'  # the bytes stored, not encoded again
    assert len(trips) == 2, trips
    assert not any(b"SCRIPT" in batch for batch in trips)


async def test_the_local_reader_waits_for_the_reply_without_asking_redis(pair, trips):
    here, _ = pair
    log = here.events
    await log.begin("s", "0", [0], 6.0)  # the scripts loaded (another test may have flushed them)
    await log.append("s", "0", {"n": 0}, final=True)
    await log.begin("s", "1", [1], 6.0)
    reader = asyncio.ensure_future(log.read("s", "1", 1, 10))
    await asyncio.sleep(0.1)
    trips.clear()
    await log.append("s", "1", {"n": 1})
    first = await asyncio.wait_for(reader, 3)
    assert first.events == [Event(2, {"n": 1})] and not first.done
    await log.append("s", "1", {"n": 2}, final=True)
    second = await log.read("s", "1", 2, 10)
    assert second.events == [Event(3, {"n": 2})] and second.done
    assert len(trips) == 2  # the two appends: the reads were answered here


async def test_what_another_process_appended_is_read_from_redis(pair):
    here, there = pair
    await here.events.begin("s", "1", [1], 6.0)
    await there.events.append("s", "1", {"from": "there"})  # say, a stream settled elsewhere
    await here.events.append("s", "1", {"from": "here"}, final=True)
    result = await here.events.read("s", "1", 1, 5)
    assert [e.message for e in result.events] == [{"from": "there"}, {"from": "here"}] and result.done


async def test_a_stream_written_to_its_end_is_discarded_with_the_next_begin(pair, trips):
    here, there = pair
    await here.events.begin("s", "1", [1], 6.0)
    await here.events.append("s", "1", {"n": 1}, final=True)
    assert (await here.events.read("s", "1", 1, 5)).done
    trips.clear()
    await here.events.discard("s", "1")
    assert trips == []  # put off
    assert not await here.events.exists("s", "1")  # but gone here at once
    with pytest.raises(UnknownEvent):
        await here.events.read("s", "1", 0, 0)
    assert await there.events.exists("s", "1")  # not yet elsewhere
    trips.clear()
    await here.events.begin("s", "2", [2], 6.0)  # goes with it, in the same round trip
    assert len(trips) == 1
    assert not await there.events.exists("s", "1")
    assert await there.events.exists("s", "2")


async def test_a_put_off_discard_goes_alone_when_no_request_follows(pair):
    here, there = pair
    await here.events.begin("s", "1", [1], 6.0)
    await here.events.append("s", "1", {"n": 1}, final=True)
    await here.events.discard("s", "1")
    for _ in range(40):
        if not await there.events.exists("s", "1"):
            break
        await asyncio.sleep(0.1)
    assert not await there.events.exists("s", "1")


async def test_a_stream_still_written_is_discarded_at_once(pair):
    here, there = pair
    await here.events.begin("s", "1", [1], 6.0)
    blocked = asyncio.ensure_future(there.events.read("s", "1", 1, 10))  # elsewhere, waiting in XREAD
    await asyncio.sleep(0.2)
    await here.events.discard("s", "1")
    try:
        assert (await asyncio.wait_for(blocked, 3)).done
    except UnknownEvent:
        pass
    assert not await there.events.exists("s", "1")


async def test_scripts_flushed_from_redis_are_loaded_again(pair, redis_server):
    here, _ = pair
    await here.events.begin("s", "1", [1], 6.0)
    redis_server.command("SCRIPT", "FLUSH")
    await here.events.begin("s", "2", [2], 6.0)  # NOSCRIPT: loaded, run once
    assert await here.events.append("s", "2", {"n": 1}, final=True) == 2
    await here.events.lease([("s", "2", [2])], 6.0)  # the pipelined path too
    redis_server.command("SCRIPT", "FLUSH")
    await here.events.lease([("s", "2", [2])], 6.0)
    assert (await here.events.read("s", "2", 0, 0)).events[-1] == Event(2, {"n": 1})
