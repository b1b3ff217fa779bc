"""Resource subscriptions through the proxy: forwarded upstream, counted across every kind of host
subscriber (session-era ``resources/subscribe`` and 2026-07-28 ``subscriptions/listen`` streams), and
the upstream's updates relayed to whoever follows the resource.

Real components: the upstreams are ``upstreams/raw_server.py`` (a session-era stdio server that records
each subscribe it gets and sends an update 0.2 s after it) and the official Python SDK server spoken to
in 2026-07-28 over stdio and Streamable HTTP; the clients are the official SDK client in both eras; the
host is served over loopback HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

import pytest
from mcp.client.subscriptions import ResourceUpdated
from proxy_support import Side, front, raw_upstream, sdk_http_upstream, sdk_upstream

URI = "raw://status"


def _subscribing(tmp_path, **extra) -> tuple[dict, object]:
    log_file = tmp_path / "subscribes"
    server = raw_upstream(tmp_path, **extra)
    server["env"]["RAW_SUBSCRIBES"] = str(log_file)
    return server, log_file


def _sent(log_file) -> list[str]:
    return log_file.read_text().splitlines() if log_file.exists() else []


def _updates(side: Side) -> int:
    return sum(1 for m in side.notifications
               if getattr(getattr(m, "root", m), "method", None) == "notifications/resources/updated")


async def _until(predicate, seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


async def _first_update(subscription) -> ResourceUpdated:
    async for event in subscription:
        if isinstance(event, ResourceUpdated):
            return event
    raise AssertionError("the listen stream ended without an update")


async def test_a_listen_stream_subscribes_the_upstream_and_gets_its_updates(tmp_path):
    """A 2026-07-28 client listening to a proxied resource: the upstream is subscribed (once, counted
    with a session-era subscriber) and its update reaches the stream; unsubscribed when the last goes."""
    server, log_file = _subscribing(tmp_path)
    old, new = Side(), Side()
    async with front({"raw": server}) as live, old.client(live.url, "legacy") as legacy, \
            new.client(live.url, "auto") as modern:
        async with modern.listen(resource_subscriptions=[URI]) as subscription:
            assert list(subscription.honored.resource_subscriptions or []) == [URI]
            assert _sent(log_file) == [f"resources/subscribe {URI}"]  # before the acknowledgement
            event = await asyncio.wait_for(_first_update(subscription), 10)
            assert event.uri == URI
            await legacy.subscribe_resource(URI)  # a second host subscriber: no second upstream subscribe
            assert _sent(log_file) == [f"resources/subscribe {URI}"]
        await asyncio.sleep(0.3)  # the stream is closed: the session-era subscriber still follows it
        assert _sent(log_file) == [f"resources/subscribe {URI}"]
        await legacy.unsubscribe_resource(URI)
        assert _sent(log_file) == [f"resources/subscribe {URI}", f"resources/unsubscribe {URI}"]


async def test_a_listen_stream_that_disconnects_releases_its_upstream_subscription(tmp_path):
    """Two listen streams share one upstream subscribe; a stream whose client just goes away counts
    as gone, and the last one's departure unsubscribes the upstream."""
    server, log_file = _subscribing(tmp_path)
    first, second = Side(), Side()
    async with front({"raw": server}) as live:
        async with second.client(live.url, "auto") as staying, staying.listen(resource_subscriptions=[URI]) as kept:
            async with first.client(live.url, "auto") as leaving:
                async with leaving.listen(resource_subscriptions=[URI]):
                    assert _sent(log_file) == [f"resources/subscribe {URI}"]
                    # The client leaves without closing its stream itself: the connection drops.
                    await leaving.__aexit__(None, None, None)
                    # Its stream's end is noticed and it is counted out: one subscriber is left.
                    await _until(lambda: [len(ids) for ids in live.plugin._subscribers.values()] == [1])
            await asyncio.sleep(0.3)
            assert _sent(log_file) == [f"resources/subscribe {URI}"]  # the other stream still follows it
            assert (await asyncio.wait_for(_first_update(kept), 10)).uri == URI
        await _until(lambda: len(_sent(log_file)) == 2)
        assert _sent(log_file) == [f"resources/subscribe {URI}", f"resources/unsubscribe {URI}"]
        assert live.plugin._subscribers == {}


async def test_per_session_subscriptions_reach_the_sessions_own_instance_and_only_its_updates(tmp_path):
    """per_session = true: each session's subscribe reaches its own upstream process, and the update
    that process sends reaches that session alone (each session gets exactly its own one)."""
    server, log_file = _subscribing(tmp_path, per_session=True)
    ada, bob = Side(), Side()
    async with front({"raw": server}) as live, ada.client(live.url, "legacy") as one, \
            bob.client(live.url, "legacy") as two:
        await one.subscribe_resource(URI)
        await two.subscribe_resource(URI)
        assert len(live.plugin.bound) == 2
        assert _sent(log_file) == [f"resources/subscribe {URI}"] * 2  # one per instance
        await _until(lambda: _updates(ada) >= 1 and _updates(bob) >= 1)
        await asyncio.sleep(0.5)  # a misrouted update would have arrived by now
        assert (_updates(ada), _updates(bob)) == (1, 1)
        await one.unsubscribe_resource(URI)
        assert _sent(log_file) == [f"resources/subscribe {URI}"] * 2 + [f"resources/unsubscribe {URI}"]
        shared = live.plugin.upstreams["raw"]
        assert not shared.subscribed  # the shared connection was never subscribed for them


@contextlib.asynccontextmanager
async def _sdk_front(transport: str):
    """A host mounting the official SDK server in 2026-07-28 (``era = "auto"``) over ``transport``."""
    if transport == "stdio":
        async with front({"sdk": sdk_upstream(era="auto")}) as live:
            yield live
    else:
        async with sdk_http_upstream() as url, front({"sdk": {"url": url, "era": "auto"}}) as live:
            yield live


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_2026_upstream_is_followed_on_a_listen_stream_of_its_own(side, transport):
    """The official SDK server spoken to in 2026-07-28 (it has no resources/subscribe): host subscribers
    of both eras make the proxy open one listen stream upstream, and the update it publishes reaches
    them; the stream closes when the last subscriber goes."""
    new = Side()
    async with _sdk_front(transport) as live, side.client(live.url, "legacy") as legacy, \
            new.client(live.url, "auto") as modern:
        upstream = live.plugin.upstreams["sdk"]
        assert upstream._session.discover_result is not None  # a 2026-07-28 connection
        await legacy.subscribe_resource("sdk://motd")
        assert list(upstream._follows) == ["sdk://motd"]
        async with modern.listen(resource_subscriptions=["sdk://motd"]) as subscription:
            follow = upstream._follows["sdk://motd"]
            assert (await modern.call_tool("sdk_touch", {})).content[0].text == "touched"
            assert (await asyncio.wait_for(_first_update(subscription), 10)).uri == "sdk://motd"
            await _until(lambda: _updates(side) >= 1)
            assert upstream._follows["sdk://motd"] is follow  # one upstream stream for both subscribers
        await legacy.unsubscribe_resource("sdk://motd")
        await _until(lambda: not upstream._follows)
        assert follow.done()


async def test_a_restarted_2026_upstream_is_followed_again(side):
    """The SDK upstream process dies while a session-era client follows its resource: the restarted
    process is followed again, and its next update reaches the client."""
    async with _sdk_front("stdio") as live, side.client(live.url, "legacy") as legacy:
        upstream = live.plugin.upstreams["sdk"]
        await legacy.subscribe_resource("sdk://motd")
        os.kill(int((await legacy.call_tool("sdk_pid", {})).content[0].text), signal.SIGKILL)
        await _until(lambda: upstream.restarts >= 1 and upstream.state == "running")
        await _until(lambda: "sdk://motd" in upstream._sent)
        assert (await legacy.call_tool("sdk_touch", {})).content[0].text == "touched"
        await _until(lambda: _updates(side) >= 1)


async def test_per_session_listen_streams_follow_the_shared_connection_and_get_only_its_updates(tmp_path):
    """per_session = true, a session-era session and a 2026-07-28 listen stream follow the same URI:
    the session on its own instance, the stream on the shared connection (as its calls are). Each
    gets the one update of the process it follows, never the other's."""
    server, log_file = _subscribing(tmp_path, per_session=True)
    ada, bob = Side(), Side()
    async with front({"raw": server}) as live, ada.client(live.url, "legacy") as legacy, \
            bob.client(live.url, "auto") as modern:
        await legacy.subscribe_resource(URI)
        async with modern.listen(resource_subscriptions=[URI]) as subscription:
            assert _sent(log_file) == [f"resources/subscribe {URI}"] * 2  # its instance, the shared one
            assert (await asyncio.wait_for(_first_update(subscription), 10)).uri == URI
            await _until(lambda: _updates(ada) >= 1)
            await asyncio.sleep(0.5)  # a misrouted update would have arrived by now
            assert _updates(ada) == 1
            assert live.plugin.upstreams["raw"].subscribed == {URI}
        await _until(lambda: not live.plugin.upstreams["raw"].subscribed)
