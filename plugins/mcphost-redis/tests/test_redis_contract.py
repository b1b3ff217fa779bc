"""The backend contract: the same assertions for the in-memory backend and the Redis backend.

Anything the kernel or a transport relies on is pinned here, so a backend that passes can be
swapped in without the core noticing.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from mcphost.sessions.backend import Event, UnknownEvent
from mcphost.sessions.session import Principal, Session

# -- sessions ---------------------------------------------------------------------------------------


async def test_a_saved_session_state_loads_back_equal(backend):
    session = Session("s-1", principal=Principal("alice", issuer="https://idp", scopes=frozenset({"a", "b"})),
                      protocol_version="2025-11-25")
    session.client_capabilities = {"elicitation": {"form": {}}, "roots": {"listChanged": True}}
    session.client_info = {"name": "ü-client", "version": "1"}
    session.subscriptions = {"demo://readme", "x://ä"}
    session.log_level = "warning"
    session.allowed_tools = {"echo"}
    session.initialized = True
    await backend.sessions.save(session.to_state())
    loaded = await backend.sessions.load("s-1")
    assert loaded == session.to_state()
    again = Session.from_state(loaded)
    assert again.principal == session.principal and again.subscriptions == session.subscriptions
    assert again.allowed_tools == {"echo"} and again.allowed_prompts is None and again.initialized


async def test_unknown_sessions_load_as_none_and_deleted_ones_are_gone(backend):
    assert await backend.sessions.load("nope") is None
    await backend.sessions.delete("nope")  # deleting what is not there is no error
    before = await backend.sessions.count()
    await backend.sessions.save({"id": "a", "n": 1})
    await backend.sessions.save({"id": "b", "n": 1})
    await backend.sessions.save({"id": "a", "n": 2})  # a save overwrites
    assert await backend.sessions.count() == before + 2
    assert (await backend.sessions.load("a"))["n"] == 2
    await backend.sessions.delete("a")
    assert await backend.sessions.load("a") is None
    assert await backend.sessions.count() == before + 1


# -- event log --------------------------------------------------------------------------------------

async def test_events_are_numbered_from_one_and_read_back_in_order(backend):
    log = backend.events
    await log.open("s", "1")
    assert await log.exists("s", "1") and not await log.exists("s", "2") and not await log.exists("t", "1")
    assert await log.append("s", "1", None) == 1  # the priming event has no message
    assert await log.append("s", "1", {"jsonrpc": "2.0", "method": "m", "params": {"x": "ü"}}) == 2
    assert await log.append("s", "1", {"jsonrpc": "2.0", "id": 1, "result": {}}) == 3
    read = await log.read("s", "1", 0, 0)
    assert read.events == [Event(1, None), Event(2, {"jsonrpc": "2.0", "method": "m", "params": {"x": "ü"}}),
                           Event(3, {"jsonrpc": "2.0", "id": 1, "result": {}})]
    assert not read.done
    assert (await log.read("s", "1", 2, 0)).events == [Event(3, {"jsonrpc": "2.0", "id": 1, "result": {}})]
    caught_up = await log.read("s", "1", 3, 0)
    assert caught_up.events == [] and not caught_up.done


async def test_streams_are_separate_per_session_and_per_stream(backend):
    log = backend.events
    for session, stream in (("a", "1"), ("a", "2"), ("b", "1")):
        await log.open(session, stream)
        await log.append(session, stream, {"where": f"{session}/{stream}"})
    for session, stream in (("a", "1"), ("a", "2"), ("b", "1")):
        assert [e.message for e in (await log.read(session, stream, 0, 0)).events] == [{"where": f"{session}/{stream}"}]


async def test_opening_an_open_stream_keeps_its_events(backend):
    log = backend.events
    await log.open("s", "1")
    await log.append("s", "1", {"n": 1})
    await log.open("s", "1")
    assert await log.append("s", "1", {"n": 2}) == 2
    assert len((await log.read("s", "1", 0, 0)).events) == 2


async def test_finish_and_final_append_mark_the_stream_done(backend):
    log = backend.events
    await log.open("s", "1")
    await log.append("s", "1", {"n": 1})
    await log.finish("s", "1")
    read = await log.read("s", "1", 0, 5)  # done: no waiting even with a timeout
    assert read.events == [Event(1, {"n": 1})] and read.done
    assert (await log.read("s", "1", 1, 5)).done
    await log.open("s", "2")
    await log.append("s", "2", {"n": 1}, final=True)
    assert (await log.read("s", "2", 0, 0)).done
    await log.finish("s", "2")  # finishing twice is harmless
    assert (await log.read("s", "2", 1, 0)).done


async def test_unknown_streams_and_positions_raise_unknown_event(backend):
    log = backend.events
    with pytest.raises(UnknownEvent):
        await log.read("s", "9", 0, 0)
    with pytest.raises(UnknownEvent):
        await log.append("s", "9", {"n": 1})
    with pytest.raises(UnknownEvent):
        await log.finish("s", "9")
    await log.open("s", "1")
    await log.append("s", "1", {"n": 1})
    with pytest.raises(UnknownEvent):
        await log.read("s", "1", 2, 0)  # beyond the last event


async def test_a_blocked_read_wakes_on_append_and_on_finish(backend):
    log = backend.events
    await log.open("s", "1")
    started = time.monotonic()
    reader = asyncio.ensure_future(log.read("s", "1", 0, 10))
    await asyncio.sleep(0.1)
    assert not reader.done()
    await log.append("s", "1", {"n": 1})
    read = await asyncio.wait_for(reader, 2)
    assert read.events == [Event(1, {"n": 1})] and time.monotonic() - started < 2
    reader = asyncio.ensure_future(log.read("s", "1", 1, 10))
    await asyncio.sleep(0.1)
    await log.finish("s", "1")
    read = await asyncio.wait_for(reader, 2)
    assert read.events == [] and read.done


async def test_a_blocked_read_times_out_empty(backend):
    await backend.events.open("s", "1")
    started = time.monotonic()
    read = await backend.events.read("s", "1", 0, 0.3)
    assert read.events == [] and not read.done
    assert 0.25 <= time.monotonic() - started < 1.5


async def test_many_readers_follow_one_stream(backend):
    log = backend.events
    await log.open("s", "1")
    readers = [asyncio.ensure_future(log.read("s", "1", 0, 10)) for _ in range(20)]
    await asyncio.sleep(0.1)
    await log.append("s", "1", {"n": 1})
    results = await asyncio.wait_for(asyncio.gather(*readers), 3)
    assert all(r.events == [Event(1, {"n": 1})] for r in results)


async def test_discard_and_drop_remove_streams(backend):
    log = backend.events
    for stream in ("0", "1", "2"):
        await log.open("s", stream)
        await log.append("s", stream, {"n": 1})
    await log.open("other", "1")
    await log.append("other", "1", {"n": 1})
    reader = asyncio.ensure_future(log.read("s", "1", 1, 10))
    await asyncio.sleep(0.1)
    await log.discard("s", "1")
    try:  # a reader blocked on a discarded stream lets go promptly: done, or the stream is unknown
        assert (await asyncio.wait_for(reader, 3)).done
    except UnknownEvent:
        pass
    assert not await log.exists("s", "1")
    with pytest.raises(UnknownEvent):
        await log.read("s", "1", 0, 0)
    await log.discard("s", "1")  # twice is harmless
    await log.drop("s")
    assert not await log.exists("s", "0") and not await log.exists("s", "2")
    assert (await log.read("other", "1", 0, 0)).events == [Event(1, {"n": 1})]
    await log.open("s", "1")  # a stream opened again starts afresh
    assert await log.append("s", "1", {"n": "new"}) == 1
    assert (await log.read("s", "1", 0, 0)).events == [Event(1, {"n": "new"})]


async def test_retention_trims_the_oldest_events(make_backend):
    # The memory log keeps exactly N; Redis trims approximately (MAXLEN ~), keeping at least N.
    log = (await make_backend(stream_max_events=10)).events
    await log.open("s", "1")
    for n in range(1, 1001):
        assert await log.append("s", "1", {"n": n}) == n
    with pytest.raises(UnknownEvent):
        await log.read("s", "1", 0, 0)
    tail = await log.read("s", "1", 990, 0)
    assert [e.seq for e in tail.events] == list(range(991, 1001))
    assert [e.message["n"] for e in tail.events] == list(range(991, 1001))


# -- broker -----------------------------------------------------------------------------------------

async def _received(box: list, count: int, timeout: float = 2.0) -> list:
    deadline = time.monotonic() + timeout
    while len(box) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # and nothing more arrives
    return box


async def test_published_messages_reach_every_subscriber_of_the_channel(backend):
    first, second, other = [], [], []

    async def coroutine_callback(message):
        second.append(message)

    subs = [backend.broker.subscribe("c1", first.append), backend.broker.subscribe("c1", coroutine_callback),
            backend.broker.subscribe("c2", other.append)]
    for sub in subs:
        await sub.ready()
    await backend.broker.publish("c1", {"id": 7, "result": {"ü": [1, 2]}})
    assert await _received(first, 1) == [{"id": 7, "result": {"ü": [1, 2]}}]
    assert await _received(second, 1) == [{"id": 7, "result": {"ü": [1, 2]}}]
    assert other == []
    await backend.broker.publish("nobody-listens", {"x": 1})  # no subscriber: no error


async def test_unsubscribed_callbacks_get_nothing_more(backend):
    kept, dropped = [], []
    keep = backend.broker.subscribe("c", kept.append)
    drop = backend.broker.subscribe("c", dropped.append)
    await keep.ready()
    drop()
    drop()  # idempotent
    await backend.broker.publish("c", {"n": 1})
    assert await _received(kept, 1) == [{"n": 1}]
    assert dropped == []
    keep()
    await backend.broker.publish("c", {"n": 2})
    await asyncio.sleep(0.1)
    assert kept == [{"n": 1}]
    again = backend.broker.subscribe("c", kept.append)  # subscribing again works
    await again.ready()
    await backend.broker.publish("c", {"n": 3})
    assert await _received(kept, 2) == [{"n": 1}, {"n": 3}]


async def test_messages_arrive_in_publish_order(backend):
    box: list = []
    sub = backend.broker.subscribe("order", box.append)
    await sub.ready()
    for n in range(100):
        await backend.broker.publish("order", {"n": n})
    assert [m["n"] for m in await _received(box, 100)] == list(range(100))


# -- tasks and claims -------------------------------------------------------------------------------

async def test_task_records_round_trip_and_expire(backend):
    tasks = backend.tasks
    await tasks.create("t1", {"status": "working", "n": [1, "ü"]}, ttl=None)
    assert await tasks.load("t1") == {"status": "working", "n": [1, "ü"]}
    await tasks.save("t1", {"status": "completed"}, ttl=None)
    assert await tasks.load("t1") == {"status": "completed"}
    await tasks.create("t2", {"status": "working"}, ttl=0.2)
    assert await tasks.load("t2") == {"status": "working"}
    await asyncio.sleep(0.35)
    assert await tasks.load("t2") is None
    await tasks.delete("t1")
    await tasks.delete("t1")
    assert await tasks.load("t1") is None and await tasks.load("never") is None


async def test_a_claim_is_granted_once_until_it_expires(backend):
    assert await backend.claim("state-digest", 0.3)
    assert not await backend.claim("state-digest", 0.3)
    assert await backend.claim("another", 0.3)
    await asyncio.sleep(0.45)
    assert await backend.claim("state-digest", 0.3)


async def test_small_values_are_stored_listed_taken_once_and_expire(backend):
    await backend.put_value("proxy-cred:up:a", b"\x00sealed")
    await backend.put_value("proxy-cred:up:b", b"other", ttl=0.3)
    await backend.put_value("proxy-signin:s", b"state", ttl=60)
    assert await backend.get_value("proxy-cred:up:a") == b"\x00sealed"
    assert sorted(await backend.value_keys("proxy-cred:")) == ["proxy-cred:up:a", "proxy-cred:up:b"]
    assert await backend.take_value("proxy-signin:s") == b"state"
    assert await backend.take_value("proxy-signin:s") is None  # single use
    assert await backend.delete_value("proxy-cred:up:a") and not await backend.delete_value("proxy-cred:up:a")
    assert await backend.get_value("proxy-cred:up:a") is None
    deadline = time.monotonic() + 30
    while await backend.get_value("proxy-cred:up:b") is not None and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert await backend.get_value("proxy-cred:up:b") is None and await backend.value_keys("proxy-cred:") == []


async def test_a_backend_reports_itself_healthy(backend):
    assert await backend.health() is True


# -- cluster agreement: begin, holds, key rings --------------------------------------------------------

async def test_begin_opens_and_primes_a_request_stream_in_one_step(backend):
    await backend.events.begin("sb", "1-x", [7], 2.0)
    assert await backend.events.exists("sb", "1-x")
    first = await backend.events.read("sb", "1-x", 0, 0)
    assert first.events == [Event(1, None)] and not first.done
    assert await backend.events.append("sb", "1-x", {"id": 7, "result": {}}, final=True) == 2
    last = await backend.events.read("sb", "1-x", 1, 0)
    assert last.events == [Event(2, {"id": 7, "result": {}})] and last.done


async def test_a_hold_has_one_owner_until_it_lets_go_or_lapses(backend):
    assert await backend.hold("get:s", "a", 0.3)
    assert await backend.hold("get:s", "a", 0.3)  # renewed by its owner
    assert not await backend.hold("get:s", "b", 0.3)
    await backend.unhold("get:s", "b")  # not b's: nothing happens
    assert not await backend.hold("get:s", "b", 0.3)
    await backend.unhold("get:s", "a")
    assert await backend.hold("get:s", "b", 0.2)
    await asyncio.sleep(0.3)
    assert await backend.hold("get:s", "a", 0.2)  # b's lapsed


async def test_a_key_ring_is_created_once_and_rotates(backend):
    ring = await backend.keyring("contract")
    assert ring == await backend.keyring("contract") and len(ring) == 1 and len(ring[0].secret) == 32
    rotated = await backend.rotate_keyring("contract", 60, 3600)
    assert rotated[1:] == ring and rotated[0].active_from > time.time() + 59
    assert await backend.keyring("contract") == rotated
