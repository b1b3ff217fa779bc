"""Redis connections do not grow with streams (issue 24): every GET stream of a process waits for
its next event on one shared connection, fanned out in process, and the pool shrinks when idle.

Against a real ``mcphost serve`` on a private redis-server, counting Redis's own client list.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

import httpx
import redis as redis_sync
from mcphost_redis import RedisBackend
from mcphost_redis.testing import RedisServer, redis_settings
from mcphost_redis.waker import shrink_idle

from tests.support.http_support import HttpServer


def clients(url: str) -> int:
    connection = redis_sync.Redis.from_url(url)
    try:
        return int(connection.info("clients")["connected_clients"]) - 1  # not this one
    finally:
        connection.close()


def test_redis_clients_do_not_grow_with_the_number_of_get_streams(tmp_path: Path) -> None:
    # A Redis of its own: on the shared one, other tests' clients come and go while this one counts.
    redis_server = RedisServer(tmp_path / "redis")
    try:
        config = (f'[server]\nmax_requests_per_principal = 200\n'
                  f'[plugins.redis]\nurl = "{redis_server.url}"\nprefix = "w{os.getpid()}:"\n')
        server = HttpServer(tmp_path, plugins="demo,redis", config=config)
        try:
            with httpx.Client(timeout=30, limits=httpx.Limits(max_connections=200)) as client:
                sessions = [server.initialize(client) for _ in range(60)]
                time.sleep(0.5)
                before = clients(redis_server.url)
                with contextlib.ExitStack() as streams:
                    for session_id in sessions:
                        response = streams.enter_context(client.stream(
                            "GET", server.url, headers={**server.headers(session_id), "accept": "text/event-stream"}))
                        assert response.status_code == 200
                    time.sleep(1.0)  # every stream is waiting for its next event now
                    during = clients(redis_server.url)
                    # The waker's one connection, plus the pooled command connections that the commands
                    # in flight at once needed while the streams opened: a handful on a busy machine (5
                    # seen with four test workers sharing two cores), never one per stream (60 here).
                    # What the pool already held depends on what ran before on this process.
                    assert during - before <= len(sessions) // 10, (before, during)
                    # Calls on sessions whose GET streams are open still answer.
                    answer = client.post(server.url, headers=server.headers(sessions[0]), json={
                        "jsonrpc": "2.0", "id": 5, "method": "tools/call",
                        "params": {"name": "echo", "arguments": {"text": "still streaming"}}})
                    assert "still streaming" in answer.text
                print(f"\nRedis clients: {before} before, {during} with {len(sessions)} GET streams open")
        finally:
            server.stop()
    finally:
        redis_server.stop()


async def test_one_waker_connection_wakes_many_readers(redis_server: RedisServer) -> None:
    backend = RedisBackend(redis_settings(redis_server.url, prefix=f"wk{os.getpid()}:"))
    try:
        log = backend.events
        for n in range(50):
            await log.open("s", str(n + 1))
        readers = [asyncio.ensure_future(log.read("s", str(n + 1), 0, 10)) for n in range(50)]
        await asyncio.sleep(0.3)
        assert not any(reader.done() for reader in readers)
        started = time.monotonic()
        for n in range(50):
            await log.append("s", str(n + 1), {"n": n})
        reads = await asyncio.wait_for(asyncio.gather(*readers), 5)
        assert [read.events[0].message for read in reads] == [{"n": n} for n in range(50)]
        assert time.monotonic() - started < 2
        assert backend.waker.connections == 1
    finally:
        await backend.close()


async def test_idle_pooled_connections_are_closed(tmp_path: Path) -> None:
    # A Redis of its own: on the shared one, other tests' clients come and go while this one counts.
    redis_server = RedisServer(tmp_path / "redis")
    prefix = f"tr{os.getpid()}:"
    backend = RedisBackend(redis_settings(redis_server.url, prefix=prefix))
    try:
        before = clients(redis_server.url)
        await asyncio.gather(*(backend.redis.blpop([prefix + "nothing"], timeout=0.2) for _ in range(30)))
        assert clients(redis_server.url) - before >= 20  # a burst left them open
        await shrink_idle(backend.redis.connection_pool)
        deadline = time.monotonic() + 2
        while clients(redis_server.url) - before > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # Redis notices the closed sockets
        assert clients(redis_server.url) - before <= 0  # Redis sees them gone
        assert await backend.redis.ping()  # the pool still works (a connection reconnects)
        assert clients(redis_server.url) - before <= 1
    finally:
        await backend.close()
        redis_server.stop()


def test_closing_200_get_streams_at_once_reuses_pooled_connections(tmp_path: Path) -> None:
    """Each GET stream that ends lets go of its cluster-wide hold in Redis; 200 ending at once must
    not open a Redis connection each (issue 35): the lets-go share a few pooled connections."""
    import threading

    redis_server = RedisServer(tmp_path / "redis")
    streams_n = 200
    try:
        config = (f'[server]\nmax_requests_per_principal = 400\n'
                  f'[plugins.redis]\nurl = "{redis_server.url}"\nprefix = "c{os.getpid()}:"\n')
        server = HttpServer(tmp_path, plugins="demo,redis", config=config)
        try:
            with httpx.Client(timeout=60, limits=httpx.Limits(max_connections=streams_n + 10)) as client:
                sessions = [server.initialize(client) for _ in range(streams_n)]
                with contextlib.ExitStack() as streams:
                    for session_id in sessions:
                        response = streams.enter_context(client.stream(
                            "GET", server.url, headers={**server.headers(session_id), "accept": "text/event-stream"}))
                        assert response.status_code == 200
                    time.sleep(1.0)
                    before = clients(redis_server.url)
                    peak = [before]
                    sampling = threading.Event()

                    def sample() -> None:
                        while not sampling.is_set():
                            peak[0] = max(peak[0], clients(redis_server.url))
                            time.sleep(0.005)

                    sampler = threading.Thread(target=sample, daemon=True)
                    sampler.start()
                # Every stream closed at once (the client's connections, one after another, at once).
                time.sleep(2.0)
                sampling.set()
                sampler.join(5)
                print(f"\nRedis clients: {before} with {streams_n} GET streams open, at most {peak[0]} "
                      "while they closed")
                assert peak[0] - before <= 32, (before, peak[0])
                # The holds were let go: a new GET on the first session is accepted.
                with client.stream("GET", server.url, headers={**server.headers(sessions[0]),
                                                               "accept": "text/event-stream"}) as again:
                    assert again.status_code == 200
        finally:
            server.stop()
    finally:
        redis_server.stop()
