"""Per-principal budgets across processes (issue 24): the ledger of each process leases allowances
from Redis (mcphost.budgets, mcphost_redis.RedisBudgetShare), so one principal holds its limit
over the whole cluster, not once per process.

First the ledgers of two "processes" in one test process against a real redis-server (exact
counts, the expiry of a stopped process, an unreachable Redis); then real ``mcphost serve``
processes sharing one redis-server, over loopback: GET streams, parked calls and retained bytes
of one anonymous address spread over two nodes, and a killed node's allowance coming back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcphost_redis import RedisBackend
from mcphost_redis.testing import RedisServer, redis_settings

import mcphost
from mcphost.budgets import Budget, Ledger
from mcphost.sessions.backend import BackendUnavailable
from mcphost.testing import free_port, make_host
from tests.support.http_plugins.harness import call
from tests.support.http_support import HttpServer, modern, quota_env, reply

REPO_ROOT = Path(__file__).resolve().parents[3]


def ledger_of(backend: RedisBackend, node: str, limit: int = 16) -> Ledger:
    ledger = Ledger([Budget("requests", "max_requests_per_principal", 1000, limit, "max_requests")])
    ledger.use_share(backend.budget_share(node))
    return ledger


@pytest.fixture
async def shared(redis_server: RedisServer) -> Any:
    backend = RedisBackend(redis_settings(redis_server.url, prefix=f"lg{os.getpid()}-{time.monotonic_ns()}:",
                                          lease=1.0))
    yield backend
    await backend.close()


async def test_two_processes_hold_one_principals_limit_together(shared: RedisBackend) -> None:
    a, b = ledger_of(shared, "a"), ledger_of(shared, "b")
    outcomes = [await (a, b)[n % 2].take("p:alice", "requests") for n in range(40)]
    assert sum(outcome is None for outcome in outcomes) == 16
    assert a.held("p:alice", "requests") + b.held("p:alice", "requests") == 16
    refused = next(outcome for outcome in outcomes if outcome is not None)
    assert refused.per_principal and "max_requests_per_principal = 16" in refused.message
    assert refused.data["budget"] == "requests"
    recorded = await shared.budget_share("a").allowances("requests", "p:alice")
    assert sum(recorded.values()) <= 16 and set(recorded) <= {"a", "b"}
    # Another principal is not affected.
    assert await b.take("p:bob", "requests") is None
    # What one process gives back, the other may take once a sync (the heartbeat) returned it.
    for _ in range(a.held("p:alice", "requests")):
        a.release("p:alice", "requests")
    assert await b.take("p:alice", "requests") is not None
    await asyncio.sleep(1.1)  # the spare's idle time
    await a.sync()
    assert await b.take("p:alice", "requests") is None


async def test_spare_units_leave_room_for_many_processes(shared: RedisBackend) -> None:
    """Eight processes behind a round-robin balancer, one principal with 40 of its 64 in flight:
    no process's spare takes the room another needs (spare is at most half of what stays free)."""
    ledgers = [ledger_of(shared, f"n{n}", limit=64) for n in range(8)]
    outcomes = [await ledgers[n % 8].take("p:alice", "requests") for n in range(40)]
    assert outcomes == [None] * 40
    recorded = await shared.budget_share("n0").allowances("requests", "p:alice")
    assert len(recorded) == 8 and sum(recorded.values()) <= 64


async def test_few_round_trips_while_a_principal_stays_within_its_allowance(shared: RedisBackend) -> None:
    a = ledger_of(shared, "a")
    trips = 0
    share = a.share
    assert share is not None
    real_lease = share.lease

    async def counting(*args: Any) -> int:
        nonlocal trips
        trips += 1
        return await real_lease(*args)

    share.lease = counting  # type: ignore[method-assign]
    for _ in range(100):  # one call at a time: the first leases, the others use the spare
        assert await a.take("p:alice", "requests") is None
        a.release("p:alice", "requests")
    assert trips == 1
    # Far from its limit, a principal calling every few seconds keeps its allowance over heartbeats.
    await asyncio.sleep(1.1)
    await a.sync()
    assert await a.take("p:alice", "requests") is None
    assert trips == 1 and a.granted("p:alice", "requests") == 3


async def test_a_stopped_process_gives_its_allowance_back_after_the_ttl(shared: RedisBackend) -> None:
    a, b = ledger_of(shared, "a"), ledger_of(shared, "b")
    for _ in range(12):
        assert await a.take("p:alice", "requests") is None
    # "a" stops (no more syncs): "b" gets what is left, then the rest once a's allowance expired.
    taken = 0
    while await b.take("p:alice", "requests") is None:
        taken += 1
    assert taken <= 4
    started = time.monotonic()
    while await b.take("p:alice", "requests") is not None:
        assert time.monotonic() - started < 3.0, "a stopped process's allowance did not come back"
        await b.sync()  # b's own allowance stays renewed meanwhile
        await asyncio.sleep(0.1)
    taken += 1
    while await b.take("p:alice", "requests") is None:
        taken += 1
    assert taken == 16
    assert time.monotonic() - started <= shared.settings.lease + 0.5


async def test_a_process_that_stops_gives_its_allowance_back_at_once(shared: RedisBackend) -> None:
    a, b = ledger_of(shared, "a"), ledger_of(shared, "b")
    for _ in range(16):
        assert await a.take("p:alice", "requests") is None
    assert await b.take("p:alice", "requests") is not None
    await a.give_back()  # SessionManager.stop: a graceful stop (SIGTERM, a rolling restart)
    assert await b.take("p:alice", "requests") is None
    assert await shared.budget_share("a").allowances("requests", "p:alice") == {"b": 3}


async def test_an_unreachable_redis_falls_back_to_per_process_limits_without_waiting(
        caplog: pytest.LogCaptureFixture) -> None:
    backend = RedisBackend(redis_settings(f"redis://127.0.0.1:{free_port()}/0", op_timeout=0.3,
                                          connect_timeout=0.3))
    try:
        ledger = ledger_of(backend, "a", limit=3)
        with caplog.at_level(logging.WARNING, logger="mcphost.budgets"):
            assert await ledger.take("p:alice", "requests") is None  # admitted within this process's limit
            started = time.monotonic()
            assert await ledger.take("p:alice", "requests") is None
            assert await ledger.take("p:alice", "requests") is None
            assert time.monotonic() - started < 0.1  # no wait for Redis once it is known down
            refused = await ledger.take("p:alice", "requests")
            assert refused is not None and refused.per_principal  # the per-process limit holds
            with pytest.raises(BackendUnavailable):
                await ledger.sync()
        assert ledger.degraded
        warnings = [r for r in caplog.records if "per-process limits" in r.getMessage()]
        assert len(warnings) == 1
    finally:
        await backend.close()


# -- real mcphost serve processes on one Redis --------------------------------------------------------

def cluster(tmp_path: Path, redis_server: RedisServer, extra: str, *, lease: int = 6,
            nodes: int = 2, prefix: str | None = None, args: list[str] | None = None) -> list[HttpServer]:
    config = (f"[server]\nallow_anonymous = true\n{extra}\n[plugins.redis]\nurl = \"{redis_server.url}\"\n"
              f"prefix = \"{prefix or f'bc{free_port()}:'}\"\nlease = {lease}\n")
    servers: list[HttpServer] = []
    try:
        for _ in range(nodes):
            servers.append(HttpServer(tmp_path, plugins="httpquota,redis", env=quota_env(tmp_path), config=config,
                                      args=args))
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


def open_stream(stack: contextlib.ExitStack, client: httpx.Client, server: HttpServer, session_id: str
                ) -> httpx.Response:
    response = stack.enter_context(client.stream(
        "GET", server.url, headers={**server.headers(session_id), "accept": "text/event-stream"}))
    if response.status_code != 200:
        response.read()
    return response


def test_get_streams_of_one_principal_over_two_nodes_total_its_limit(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """``max_requests_per_principal = 16``: 40 sessions spread over two nodes, a GET stream each:
    16 streams in all, the others 429 naming the budget; closed, the slots come back on both."""
    servers = cluster(tmp_path, redis_server, "max_requests_per_principal = 16\n")
    try:
        with httpx.Client(timeout=30, limits=httpx.Limits(max_connections=100)) as client:
            sessions = [(servers[n % 2], servers[n % 2].initialize(client)) for n in range(40)]
            with contextlib.ExitStack() as streams:
                responses = [open_stream(streams, client, server, session_id) for server, session_id in sessions]
                statuses = [response.status_code for response in responses]
                assert statuses.count(200) == 16, statuses
                assert statuses.count(429) == 24, statuses
                assert 200 in statuses[0::2] and 200 in statuses[1::2]  # streams on both nodes
                refused = next(response for response in responses if response.status_code == 429)
                assert int(refused.headers["retry-after"]) >= 1
                error = refused.json()["error"]
                assert error["data"]["budget"] == "requests" and "max_requests_per_principal = 16" in error["message"]
                # A call on either node is refused alike while the 16 streams are open.
                for server, session_id in sessions[:2]:
                    crowded = client.post(server.url, headers=server.headers(session_id),
                                          json=call(7, "echo", {"text": "x"}))
                    assert crowded.status_code == 429, crowded.text
            # Closed: both nodes admit again (the allowance one node no longer needs goes back
            # at its next heartbeat).
            for server, session_id in sessions[:2]:
                deadline = time.monotonic() + 10
                while True:
                    again = client.post(server.url, headers=server.headers(session_id),
                                        json=call(9, "echo", {"text": "z"}))
                    if again.status_code == 200 or time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                assert again.status_code == 200, again.text
    finally:
        for server in servers:
            server.stop()


def test_get_streams_of_one_principal_over_two_workers_total_its_limit(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """The same with one node of two worker processes (``--workers 2``): whichever worker accepts
    each stream, the principal never holds more than 16 of its 40; spare units one worker leased
    and no longer needs come back at its next heartbeat, so refused streams retried after their
    ``Retry-After`` fill the 16 and no more."""
    prefix = f"bw{free_port()}:"
    [server] = cluster(tmp_path, redis_server, "max_requests_per_principal = 16\n", nodes=1, prefix=prefix,
                       args=["--workers", "2"])
    try:
        with httpx.Client(timeout=30, limits=httpx.Limits(max_connections=100)) as client:
            sessions = [server.initialize(client) for _ in range(40)]
            with contextlib.ExitStack() as streams:
                statuses = [open_stream(streams, client, server, session_id).status_code for session_id in sessions]
                assert statuses.count(200) <= 16 and statuses.count(200) + statuses.count(429) == 40, statuses
                first = statuses.count(200)
                refused = [session_id for session_id, status in zip(sessions, statuses, strict=True) if status != 200]
                deadline = time.monotonic() + 8
                while statuses.count(200) < 16 and time.monotonic() < deadline:
                    time.sleep(1.0)  # Retry-After
                    for session_id in list(refused):
                        if open_stream(streams, client, server, session_id).status_code == 200:
                            refused.remove(session_id)
                            statuses.append(200)
                assert statuses.count(200) == 16, statuses
                for session_id in refused[:4]:
                    assert open_stream(streams, client, server, session_id).status_code == 429
                holders = redis_server.command("HKEYS", f"{prefix}l:requests:a:127.0.0.1").count(b"\n") // 2
                print(f"\n{first} of 16 streams at the first try, 16 after retries; workers holding an allowance: "
                      f"{holders}")
    finally:
        server.stop()


def test_a_killed_nodes_allowance_comes_back_within_the_lease(tmp_path: Path, redis_server: RedisServer) -> None:
    """Node A holds 12 of the principal's 16 streams and is killed (SIGKILL): within ``lease``
    seconds (2 here) node B holds all 16."""
    a, b = cluster(tmp_path, redis_server, "max_requests_per_principal = 16\n", lease=2)
    try:
        with httpx.Client(timeout=30, limits=httpx.Limits(max_connections=100)) as client, \
                contextlib.ExitStack() as streams:
            on_a = [open_stream(streams, client, a, a.initialize(client)) for _ in range(12)]
            assert [response.status_code for response in on_a] == [200] * 12
            b_sessions = [b.initialize(client) for _ in range(16)]
            held = [open_stream(streams, client, b, session_id) for session_id in b_sessions[:4]]
            assert [response.status_code for response in held] == [200] * 4
            assert open_stream(streams, client, b, b_sessions[4]).status_code == 429
            a.process.send_signal(signal.SIGKILL)
            a.process.wait(10)
            killed = time.monotonic()
            for session_id in b_sessions[4:]:
                while (status := open_stream(streams, client, b, session_id).status_code) != 200:
                    assert status == 429
                    assert time.monotonic() - killed < 2 + 2.0, "the killed node's allowance did not come back"
                    time.sleep(0.1)
            came_back = time.monotonic() - killed
            crowded = client.post(b.url, headers=b.headers(b_sessions[0]), json=call(7, "echo", {"text": "x"}))
            assert crowded.status_code == 429, crowded.text  # B holds all 16 now
            print(f"\nthe killed node's 12 units came back within {came_back:.2f} s (lease 2 s)")
    finally:
        a.stop()
        b.stop()


def ask(server: HttpServer, client: httpx.Client, request_id: int) -> dict[str, Any]:
    payload, headers = modern("tools/call", {"name": "ask", "arguments": {}}, request_id=request_id)
    response = client.post(server.url, headers=headers, json=payload)
    assert response.status_code in (200, 429), response.text
    return reply(response)


def test_parked_calls_of_one_principal_over_two_nodes_total_its_limit(
        tmp_path: Path, redis_server: RedisServer) -> None:
    servers = cluster(tmp_path, redis_server, "max_parked_per_principal = 4\n")
    try:
        with httpx.Client(timeout=30) as client:
            replies = [ask(servers[n % 2], client, n + 1) for n in range(10)]
        parked = [r for r in replies if r.get("result", {}).get("resultType") == "input_required"]
        refused = [r["error"] for r in replies if "error" in r]
        assert len(parked) == 4 and len(refused) == 6, replies
        assert all(e["code"] == -32000 and e["data"]["budget"] == "parked calls" for e in refused), refused
        assert "max_parked_per_principal = 4" in refused[0]["message"]
    finally:
        for server in servers:
            server.stop()


def test_retained_bytes_of_one_principal_over_two_nodes_stay_within_its_budget(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """12 sessions over two nodes each abandon a 60 kB reply: within a 200 kB per-principal budget
    at most three stay resumable in all (each node alone would keep three)."""
    servers = cluster(tmp_path, redis_server,
                      "max_retained_bytes = 1000000\nmax_retained_bytes_per_principal = 200000\n")
    try:
        with httpx.Client(timeout=30) as client:
            def abandon(server: HttpServer) -> tuple[HttpServer, str, str]:
                session_id = server.initialize(client)
                with client.stream("POST", server.url, headers=server.headers(session_id),
                                   json=call(10, "big", {"size": 60000, "delay": 0.3})) as response:
                    assert response.status_code == 200
                    priming = next(line for line in response.iter_lines() if line.startswith("id:"))
                return server, session_id, priming[3:].strip()  # left before the reply is written

            mine = [abandon(servers[n % 2]) for n in range(12)]
            time.sleep(1.0)  # every reply is stored (and retained, or dropped over the budget)

            def resumable(server: HttpServer, session_id: str, event_id: str) -> bool:
                response = client.get(server.url, headers={**server.headers(session_id),
                                                           "accept": "text/event-stream", "last-event-id": event_id})
                return response.status_code == 200 and '"id":10' in response.text.replace(" ", "")

            kept = [resumable(*abandoned) for abandoned in mine]
        assert 2 <= sum(kept) <= 3, kept
        assert any("over its principal's retention budget" in server.log() for server in servers)
    finally:
        for server in servers:
            server.stop()


def test_with_redis_down_stateless_calls_go_on_under_per_node_limits(tmp_path: Path, own_redis: RedisServer) -> None:
    """Redis killed: a principal new to the node (its allowance must be leased) still gets its
    stateless calls answered at once, and the node logs the fallback; then its end once Redis is back."""
    [node] = cluster(tmp_path, own_redis, "max_requests_per_principal = 2\n", nodes=1)
    try:
        with httpx.Client(timeout=30) as client:
            def echo(user: str, request_id: int) -> httpx.Response:
                payload, headers = modern("tools/call", {"name": "echo", "arguments": {"text": user}},
                                          request_id=request_id)
                return client.post(node.url, headers={**headers, "x-test-user": user}, json=payload)

            assert reply(echo("before", 1))["result"]["content"][0]["text"] == "before"
            own_redis.kill(signal.SIGKILL)
            for n, user in enumerate(["carol", "dave", "erin"]):
                started = time.monotonic()
                answer = echo(user, n + 2)
                assert answer.status_code == 200, answer.text
                assert reply(answer)["result"]["content"][0]["text"] == user
                assert time.monotonic() - started < 2.0  # at most one Redis timeout, never a hang
            assert "per-process limits until it is back" in node.log()
            assert node.process.poll() is None
            # Redis back: the next heartbeat (every lease/3 s) ends the fallback, and says so.
            own_redis.restart()
            deadline = time.monotonic() + 10
            while "the cluster's share is back" not in node.log() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert "the cluster's share is back" in node.log()
    finally:
        node.stop()


class Holding:
    """A tool that keeps a request in flight until it is let go."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        plugin = self

        @mcphost.tool
        async def wait() -> str:
            """Wait until the test lets go."""
            await plugin.release.wait()
            return "done"

        return [wait]


async def test_a_request_admitted_without_a_transport_asks_the_cluster_in_its_own_task(
        redis_server: RedisServer) -> None:
    """Without HTTP's check before admission (stdio, in-process), a process whose allowance is
    short asks Redis inside the request's task: the call runs when the cluster has room and gets
    -32000 naming the budget when the principal holds its limit on another process."""
    import mcphost_redis

    from tests.support.modern_support import modern_call

    plugin = Holding()
    config = {"server": {"state_keys": ["k" * 32], "max_requests_per_principal": 2},
              "plugins": {"redis": {"url": redis_server.url, "prefix": f"ad{free_port()}:"}}}
    first, second = (make_host(("holding", plugin), ("redis", mcphost_redis), config=config) for _ in range(2))
    await first.start()
    await second.start()
    try:
        held = [asyncio.ensure_future(modern_call(first, "tools/call", {"name": "wait", "arguments": {}},
                                                  remote="10.0.0.1:1")) for _ in range(2)]
        await asyncio.sleep(0.3)
        assert first.manager.budgets.held("a:10.0.0.1", "requests") == 2
        refused = await modern_call(second, "tools/call", {"name": "wait", "arguments": {}}, remote="10.0.0.1:2")
        error = refused["error"]
        assert error["code"] == -32000 and error["data"]["budget"] == "requests", error
        assert "max_requests_per_principal = 2" in error["message"]
        assert second.manager.budgets.held("a:10.0.0.1", "requests") == 0  # nothing taken, nothing to give back
        plugin.release.set()
        assert [(await call)["result"]["content"][0]["text"] for call in held] == ["done", "done"]
        await first.manager.budgets.give_back()  # what a stopping process does; else the heartbeat's trim
        answer = await modern_call(second, "tools/call", {"name": "wait", "arguments": {}}, remote="10.0.0.1:3")
        assert answer["result"]["content"][0]["text"] == "done"
    finally:
        await second.stop()
        await first.stop()
