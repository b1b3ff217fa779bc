"""No answer or cancellation is lost to a broker disconnect (a real redis-server restarted mid-exchange).

A tool on A waits for an elicitation answer; the answer reaches B while A's broker connection is
gone (Redis restarted, or A's pub/sub connection dropped). A message published then would be
lost with plain pub/sub; it is re-sent until A acknowledges it, so the tool completes. A
cancellation takes the same path. A re-sent message never acts twice.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcphost_redis.testing import RedisServer, redis_server_path

from tests.support.http_plugins.harness import SseReader
from tests.support.http_support import HttpServer, open_session, session_headers

REPO_ROOT = Path(__file__).resolve().parents[3]
LEGACY = "2025-11-25"
ELICITATION = {"elicitation": {"form": {}}}  # what these clients declare


@pytest.fixture
def durable_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server with appendfsync always: sessions survive its restart."""
    if redis_server_path() is None:
        pytest.skip("redis-server is not installed")
    server = RedisServer(tmp_path / "redis", persistence="always")
    yield server
    server.stop()


@pytest.fixture
def pair(tmp_path: Path, durable_redis: RedisServer) -> Iterator[tuple[HttpServer, HttpServer]]:
    config = f'[plugins.redis]\nurl = "{durable_redis.url}"\n'
    env = {"PYTHONPATH": str(REPO_ROOT)}
    servers = (HttpServer(tmp_path, plugins="demo,redis", env=env, config=config),
               HttpServer(tmp_path, plugins="demo,redis", env=env, config=config))
    yield servers
    for server in servers:
        server.stop()


def messages(reader: SseReader) -> list[dict[str, Any]]:
    return [json.loads(e["data"]) for e in reader.events if e.get("data", "").strip()]


async def post_patiently(client: httpx.AsyncClient, server: HttpServer, session_id: str, body: dict) -> int:
    """POST until it is accepted: while Redis restarts, the node answers 503 with Retry-After."""
    for _ in range(50):
        response = await client.post(server.url, headers=session_headers(session_id), json=body)
        if response.status_code != 503:
            return response.status_code
        await asyncio.sleep(0.1)
    return 503


async def follow(client: httpx.AsyncClient, server: HttpServer, session_id: str, reader: SseReader,
                 until: Any, timeout: float = 20) -> list[dict[str, Any]]:
    """Messages of a request stream until ``until(messages)``; a stream that lost Redis ends with a
    retry hint, and is resumed with Last-Event-ID as a client would."""
    seen = list(reader.events)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    def finished(r: SseReader) -> bool:
        return r.ended or (until is not None and until(messages(r)))

    while True:
        done = [json.loads(e["data"]) for e in seen if e.get("data", "").strip()]
        if until is not None and until(done):
            return done
        if loop.time() >= deadline:
            assert until is None, seen
            return done
        if not reader.ended:
            try:
                await reader.until(finished, timeout=deadline - loop.time())
            except AssertionError:
                pass
            seen = list(reader.events)
            continue
        last = [e["id"] for e in seen if "id" in e][-1]
        async with client.stream("GET", server.url, headers={
                "accept": "text/event-stream", "mcp-session-id": session_id, "mcp-protocol-version": LEGACY,
                "last-event-id": last}) as resumed:
            if resumed.status_code != 200:
                await asyncio.sleep(0.1)
                continue
            reader = SseReader(resumed)
            try:
                await reader.until(finished, timeout=max(0.1, deadline - loop.time()))
            except AssertionError:
                pass
            seen = seen + reader.events
            reader.ended = True


@pytest.mark.parametrize("outage", ["redis restart", "pub/sub connection dropped"])
async def test_an_elicitation_answer_survives_a_broker_disconnect(pair, durable_redis: RedisServer, outage: str):
    a, b = pair
    async with httpx.AsyncClient(timeout=30) as client:
        session_id = await open_session(client, a, ELICITATION)
        assert (await client.post(b.url, headers=session_headers(session_id), json={
            "jsonrpc": "2.0", "id": 2, "method": "ping"})).status_code == 200  # B holds it too
        async with client.stream("POST", a.url, headers=session_headers(session_id), json={
                "jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "greet_user", "arguments": {}}}) as call:
            reader = SseReader(call)
            await reader.until(lambda r: any(m.get("method") == "elicitation/create" for m in messages(r)),
                               timeout=10)
            asked = next(m for m in messages(reader) if m.get("method") == "elicitation/create")
            if outage == "redis restart":
                durable_redis.restart()
            else:
                durable_redis.command("CLIENT", "KILL", "TYPE", "pubsub")
            # At once: A's broker connection is not back yet when B hands the answer over.
            status = await post_patiently(client, b, session_id, {
                "jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"name": "Ada"}}})
            assert status == 202
            done = await follow(client, a, session_id, reader, lambda ms: any(m.get("id") == 3 for m in ms))
        [reply] = [m for m in done if m.get("id") == 3]
        assert reply["result"]["content"][0]["text"] == "Hello, Ada!", reply


@pytest.mark.parametrize("outage", ["redis restart", "pub/sub connection dropped"])
async def test_a_cancellation_survives_a_broker_disconnect(pair, durable_redis: RedisServer, outage: str):
    a, b = pair
    async with httpx.AsyncClient(timeout=30) as client:
        session_id = await open_session(client, a, ELICITATION)
        assert (await client.post(b.url, headers=session_headers(session_id), json={
            "jsonrpc": "2.0", "id": 2, "method": "ping"})).status_code == 200
        async with client.stream("POST", a.url, headers=session_headers(session_id), json={
                "jsonrpc": "2.0", "id": 4, "method": "tools/call",
                "params": {"name": "progress", "arguments": {"steps": 6000, "delay_ms": 50},
                           "_meta": {"progressToken": "p"}}}) as call:
            # 5 minutes of work: the call cannot finish on its own while a loaded machine restarts
            # Redis (CI, load 18). Under load it still fails now and then: the call ends with an
            # isError "Tool 'progress' failed with an internal error" result (most likely a progress
            # notification that could not be stored while Redis was down): a host bug, still open.
            reader = SseReader(call)
            await reader.until(lambda r: len(messages(r)) >= 3, timeout=10)
            if outage == "redis restart":
                durable_redis.restart()
            else:
                durable_redis.command("CLIENT", "KILL", "TYPE", "pubsub")
            status = await post_patiently(client, b, session_id, {
                "jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}})
            assert status == 202
            started = asyncio.get_running_loop().time()
            done = await follow(client, a, session_id, reader, None, timeout=6)
            # Cancelled: the call stopped. Its stream, read again 4 s later, has no more progress.
            again = await follow(client, a, session_id, reader, None, timeout=4)
        steps = [m["params"]["progress"] for m in done if m.get("method") == "notifications/progress"]
        later = [m["params"]["progress"] for m in again if m.get("method") == "notifications/progress"]
        assert not any(m.get("id") == 4 and "result" in m for m in done + again), [
            m for m in done + again if m.get("id") == 4]
        assert steps and max(later) == max(steps) < 6000, (steps[-5:], later[-5:],
                                                           asyncio.get_running_loop().time() - started)
