"""Two real ``mcphost serve`` processes on two ports sharing one Redis, driven with httpx.

Any request on any process: a session initialized on A is used on B; an elicitation a tool on A
started is answered by a POST to B; a resource update or a list change caused on A reaches the
streams held on B; a session deleted on B is gone on A; restarted processes keep serving the
sessions Redis holds.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcphost_redis.testing import RedisServer

from tests.support.fixtures.distributions import make_distribution
from tests.support.http_plugins.harness import SseReader
from tests.support.http_support import (
    ACCEPT_BOTH,
    HttpServer,
    ServerGroup,
    open_session,
    session_call,
    session_headers,
    sse_messages,
)

REPO_ROOT = Path(__file__).resolve().parents[3]
MODERN = "2026-07-28"
ELICITATION = {"elicitation": {"form": {}}}  # what these clients declare

PLUGIN = '''
import os

import mcphost
from mcphost import Context


@mcphost.tool
async def announce(uri: str = "", kind: str = "", *, ctx: Context) -> str:
    """Send notifications/resources/updated for uri and/or list_changed for kind."""
    if uri:
        await ctx.notify_resource_updated(uri)
    if kind:
        await ctx.host.notify_list_changed(kind)
    return "announced"


@mcphost.tool
def whoami() -> str:
    """The pid of the process that ran this call."""
    return str(os.getpid())


@mcphost.hookimpl
def mcphost_tools(host):
    return [announce, whoami]
'''


class Cluster(ServerGroup):
    """Processes sharing one Redis (own key prefix per test); stopped by pid at the end."""

    def __init__(self, tmp_path: Path, redis: RedisServer, prefix: str, *, lease: float = 2) -> None:
        site = tmp_path / "site"
        if not site.exists():
            make_distribution(site, "mcphost-cluster-test", "0.0.1", {"clustertest": "clustertest_plugin"},
                              {"clustertest_plugin": PLUGIN})
        super().__init__(tmp_path, plugins="demo,clustertest,redis", env={"PYTHONPATH": f"{site}:{REPO_ROOT}"},
                         config=(f'[server]\nsse_keepalive = 1\ntask_lease = 1\n\n[plugins.redis]\n'
                                 f'url = "{redis.url}"\nprefix = "{prefix}"\nlease = {lease}\n'))


@pytest.fixture
def cluster(tmp_path: Path, redis_server: RedisServer, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    made = Cluster(tmp_path, redis_server, f"c{abs(hash(request.node.name)) % 10**8}:")
    yield made
    made.stop()


def text_of(reply: dict[str, Any]) -> str:
    return reply["result"]["content"][0]["text"]


async def test_a_session_initialized_on_a_is_served_by_b(cluster):
    a, b = cluster.start(), cluster.start()
    async with httpx.AsyncClient(timeout=10) as client:
        session_id = await open_session(client, a, ELICITATION)
        on_b = await session_call(client, b, session_id, "tools/call", {"name": "whoami", "arguments": {}})
        on_a = await session_call(client, a, session_id, "tools/call", {"name": "whoami", "arguments": {}}, 3)
        assert text_of(on_b) == str(b.process.pid) and text_of(on_a) == str(a.process.pid)
        echo = await session_call(client, b, session_id, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}, 4)
        assert "hi" in text_of(echo)
        # The log level set on B holds on A.
        await session_call(client, b, session_id, "logging/setLevel", {"level": "error"}, 5)
        listed = await session_call(client, a, session_id, "tools/list", {}, 6)
        assert {"echo", "whoami"} <= {t["name"] for t in listed["result"]["tools"]}
        # A foreign or unknown id is still 404 everywhere.
        unknown = await client.post(b.url, headers=session_headers("no-such-session"), json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert unknown.status_code == 404


async def test_a_session_deleted_on_b_is_gone_on_a(cluster):
    a, b = cluster.start(), cluster.start()
    async with httpx.AsyncClient(timeout=10) as client:
        session_id = await open_session(client, a, ELICITATION)
        await session_call(client, b, session_id, "tools/list")
        deleted = await client.delete(b.url, headers=session_headers(session_id))
        assert deleted.status_code == 204
        for server in (a, b):
            gone = await client.post(server.url, headers=session_headers(session_id), json={
                "jsonrpc": "2.0", "id": 9, "method": "tools/list"})
            assert gone.status_code == 404, (server.port, gone.text)


async def test_an_elicitation_started_on_a_is_answered_through_b(cluster):
    a, b = cluster.start(), cluster.start()
    async with httpx.AsyncClient(timeout=15) as client:
        session_id = await open_session(client, a, ELICITATION)
        async with client.stream("POST", a.url, headers=session_headers(session_id), json={
                "jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "greet_user", "arguments": {}}}) as response:
            assert response.status_code == 200
            reader = SseReader(response)
            await reader.until(lambda r: any(_method(e) == "elicitation/create" for e in r.events))
            question = next(_message(e) for e in reader.events if _method(e) == "elicitation/create")
            answer = await client.post(b.url, headers=session_headers(session_id), json={
                "jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"name": "Ada"}}})
            assert answer.status_code == 202
            await reader.until(lambda r: any(_message(e).get("id") == 7 for e in r.events))
            [reply] = [_message(e) for e in reader.events if _message(e).get("id") == 7]
            assert text_of(reply) == "Hello, Ada!"


async def test_a_cancellation_sent_to_b_stops_the_request_running_on_a(cluster):
    a, b = cluster.start(), cluster.start()
    async with httpx.AsyncClient(timeout=15) as client:
        session_id = await open_session(client, a, ELICITATION)
        async with client.stream("POST", a.url, headers=session_headers(session_id), json={
                "jsonrpc": "2.0", "id": 8, "method": "tools/call",
                "params": {"name": "progress", "arguments": {"steps": 200, "delay_ms": 50},
                           "_meta": {"progressToken": "p"}}}) as response:
            reader = SseReader(response)
            await reader.until(lambda r: sum(_method(e) == "notifications/progress" for e in r.events) >= 2)
            cancelled = await client.post(b.url, headers=session_headers(session_id), json={
                "jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 8}})
            assert cancelled.status_code == 202
            await reader.until(lambda r: r.ended, timeout=5)  # the stream ends without a reply
            assert not any(_message(e).get("id") == 8 for e in reader.events)
            assert sum(_method(e) == "notifications/progress" for e in reader.events) < 100


async def test_a_resource_update_on_a_reaches_the_get_stream_held_on_b_once(cluster):
    a, b = cluster.start(), cluster.start()
    async with httpx.AsyncClient(timeout=15) as client:
        session_id = await open_session(client, a, ELICITATION)
        await session_call(client, b, session_id, "resources/subscribe", {"uri": "demo://readme"})
        await session_call(client, a, session_id, "tools/list", {}, 3)  # A holds the session too
        async with client.stream("GET", b.url, headers={"accept": "text/event-stream",
                                                        "mcp-session-id": session_id}) as stream:
            assert stream.status_code == 200
            reader = SseReader(stream)
            await reader.until(lambda r: bool(r.events))  # primed
            await session_call(client, a, session_id, "tools/call",
                       {"name": "announce", "arguments": {"uri": "demo://readme"}}, 4)
            await reader.until(lambda r: any(_method(e) == "notifications/resources/updated" for e in r.events))
            await asyncio.sleep(0.5)
            await reader.until(lambda r: True)
            updates = [_message(e) for e in reader.events if _method(e) == "notifications/resources/updated"]
            assert updates == [{"jsonrpc": "2.0", "method": "notifications/resources/updated",
                                "params": {"uri": "demo://readme"}}]


async def test_a_listen_stream_on_b_hears_a_tool_list_change_caused_on_a(cluster):
    a, b = cluster.start(), cluster.start()
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    modern = {"content-type": "application/json", "accept": ACCEPT_BOTH, "mcp-protocol-version": MODERN}
    async with httpx.AsyncClient(timeout=15) as client:
        listen = {"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
                  "params": {"notifications": {"toolsListChanged": True}, "_meta": meta}}
        async with client.stream("POST", b.url, headers={**modern, "mcp-method": "subscriptions/listen"},
                                 content=json.dumps(listen)) as stream:
            assert stream.status_code == 200
            reader = SseReader(stream)
            await reader.until(lambda r: any(_method(e) == "notifications/subscriptions/acknowledged"
                                             for e in r.events))
            trigger = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "announce", "arguments": {"kind": "tools"}, "_meta": meta}}
            response = await client.post(a.url, headers={**modern, "mcp-method": "tools/call", "mcp-name": "announce"},
                                         content=json.dumps(trigger))
            assert response.status_code == 200, response.text
            await reader.until(lambda r: any(_method(e) == "notifications/tools/list_changed" for e in r.events))
            [changed] = [_message(e) for e in reader.events if _method(e) == "notifications/tools/list_changed"]
            assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1"


TASKS = "io.modelcontextprotocol/tasks"


async def modern_call(client: httpx.AsyncClient, server: HttpServer, method: str, params: dict[str, Any]
                      ) -> dict[str, Any]:
    """One 2026-07-28 request from a client that declared the tasks extension; its result."""
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {TASKS: {}}}}
    sent = {"content-type": "application/json", "accept": ACCEPT_BOTH, "mcp-protocol-version": MODERN,
            "mcp-method": method}
    name = params.get("taskId", params.get("name"))
    if name is not None:
        sent["mcp-name"] = name
    response = await client.post(server.url, headers=sent, json={
        "jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}})
    assert response.status_code == 200, response.text
    return response.json()["result"]


async def wait_task(client: httpx.AsyncClient, server: HttpServer, task_id: str, statuses: set[str]
                    ) -> dict[str, Any]:
    for _ in range(200):
        task = await modern_call(client, server, "tasks/get", {"taskId": task_id})
        if task["status"] in statuses:
            return task
        await asyncio.sleep(0.05)
    raise AssertionError(f"task {task_id} stuck in {task['status']}")


async def test_a_task_running_on_a_is_polled_answered_and_cancelled_through_b(cluster):
    """Tasks live in Redis; tasks/update and tasks/cancel reach the process running the task."""
    a = cluster.start(plugins="demo,conformance,redis")
    b = cluster.start(plugins="demo,conformance,redis")
    async with httpx.AsyncClient(timeout=15) as client:
        created = await modern_call(client, a, "tools/call", {"name": "confirm_delete",
                                                              "arguments": {"filename": "shared.txt"}})
        assert created["resultType"] == "task"
        asked = await wait_task(client, b, created["taskId"], {"input_required"})
        (key,) = asked["inputRequests"]
        await modern_call(client, b, "tasks/update", {"taskId": created["taskId"], "inputResponses": {
            key: {"action": "accept", "content": {"confirm": True}}}})
        done = await wait_task(client, a, created["taskId"], {"completed"})
        assert done["result"]["content"][0]["text"] == "Deleted shared.txt"
        slow = await modern_call(client, a, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}})
        await modern_call(client, b, "tasks/cancel", {"taskId": slow["taskId"]})
        assert (await wait_task(client, b, slow["taskId"], {"cancelled", "completed", "failed"}))["status"] == \
            "cancelled"


async def test_a_task_whose_process_dies_is_reported_failed_within_a_lease(cluster):
    a = cluster.start(plugins="demo,conformance,redis")
    b = cluster.start(plugins="demo,conformance,redis")
    async with httpx.AsyncClient(timeout=15) as client:
        created = await modern_call(client, a, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}})
        await asyncio.sleep(1.5)  # a few heartbeats: still working while A lives
        assert (await modern_call(client, b, "tasks/get", {"taskId": created["taskId"]}))["status"] == "working"
        a.stop(signal.SIGKILL)
        killed = asyncio.get_running_loop().time()
        failed = await wait_task(client, b, created["taskId"], {"failed", "completed", "cancelled"})
        assert failed["status"] == "failed"
        assert failed["error"]["message"] == "The process running this task stopped"
        assert asyncio.get_running_loop().time() - killed < 3  # lease 1 s, polled every 50 ms


async def test_restarted_processes_keep_serving_the_sessions_redis_holds(cluster):
    a = cluster.start()
    async with httpx.AsyncClient(timeout=10) as client:
        session_id = await open_session(client, a, ELICITATION)
        await session_call(client, a, session_id, "logging/setLevel", {"level": "error"})
        port = a.port
        assert a.stop() == 0  # SIGTERM: a graceful stop leaves the session in Redis
        again = cluster.start(port=port)
        reply = await session_call(client, again, session_id, "tools/call", {"name": "whoami", "arguments": {}}, 3)
        assert text_of(reply) == str(again.process.pid)
        killed_port = again.port
        again.stop(signal.SIGKILL)
        third = cluster.start(port=killed_port)
        reply = await session_call(client, third, session_id, "tools/call",
                                   {"name": "echo", "arguments": {"text": "x"}}, 4)
        assert "x" in text_of(reply)


def _message(event: dict[str, str]) -> dict[str, Any]:
    data = event.get("data", "")
    return json.loads(data) if data.strip() else {}


def _method(event: dict[str, str]) -> str | None:
    return _message(event).get("method")


# -- F10: a process dies mid-request ---------------------------------------------------------------

def _persisted(redis_url: str, prefix: str, session_id: str, stream: str) -> list[tuple[int, dict | None]]:
    """The events Redis holds for a stream: (seq, message) in order."""
    import redis
    client = redis.Redis.from_url(redis_url)
    try:
        entries = client.xrange(f"{prefix}e:{{{session_id}}}:{stream}")
    finally:
        client.close()
    found = []
    for entry_id, fields in entries:
        seq, sub = entry_id.decode().split("-")
        if sub == "0":
            found.append((int(seq), json.loads(fields[b"m"]) if b"m" in fields else None))
    return found


async def test_f10_a_killed_process_loses_no_persisted_event_and_its_request_ends_with_an_error(
        tmp_path, redis_server):
    import random
    import time
    prefix = "f10:"
    cluster = Cluster(tmp_path, redis_server, prefix, lease=1)
    rng = random.Random(10)
    report = []
    try:
        b = cluster.start()
        async with httpx.AsyncClient(timeout=20) as client:
            for trial in range(20):
                a = cluster.start()
                session_id = await open_session(client, a, ELICITATION)
                received: list[tuple[str, dict | None]] = []
                async with client.stream("POST", a.url, headers=session_headers(session_id), json={
                        "jsonrpc": "2.0", "id": 11, "method": "tools/call",
                        "params": {"name": "progress", "arguments": {"steps": 400, "delay_ms": 50},
                                   "_meta": {"progressToken": "t"}}}) as response:
                    assert response.status_code == 200
                    reader = SseReader(response)
                    kill_after = rng.uniform(0.05, 1.2)
                    deadline = time.monotonic() + kill_after
                    while time.monotonic() < deadline:  # read what A sends until the random moment
                        try:
                            await reader._more(max(0.01, deadline - time.monotonic()))
                        except TimeoutError:
                            pass
                    a.stop(signal.SIGKILL)
                    killed_at = time.monotonic()
                    for event in reader.events:
                        if "id" in event:
                            received.append((event["id"], _message(event) or None))
                stream = received[0][0].split(".")[0]
                last = received[-1][0]
                async with client.stream("GET", b.url, headers={"accept": "text/event-stream",
                                                                "mcp-session-id": session_id,
                                                                "last-event-id": last}) as resumed:
                    assert resumed.status_code == 200, await resumed.aread()
                    reader = SseReader(resumed)
                    await reader.until(lambda r: any(_message(e).get("id") == 11 for e in r.events), timeout=10)
                    ended_after = time.monotonic() - killed_at
                    await reader.until(lambda r: r.ended, timeout=5)
                    for event in reader.events:
                        if "id" in event and event.get("data", "").strip():
                            received.append((event["id"], _message(event)))
                persisted = _persisted(redis_server.url, prefix, session_id, stream)
                seqs = [int(event_id.split(".")[1]) for event_id, _ in received]
                assert seqs == [seq for seq, _ in persisted], f"trial {trial}: {seqs} != persisted"
                assert [m for _, m in received] == [m for _, m in persisted]
                final = received[-1][1]
                assert final["id"] == 11 and final["error"]["code"] == -32800, final
                progress = [m["params"]["progress"] for _, m in received if m and m.get("method")]
                assert progress == sorted(set(progress))  # none reordered, none twice
                assert ended_after < 10
                report.append((len(progress), round(ended_after, 2)))
                # The session lives on: B serves it.
                listed = await session_call(client, b, session_id, "tools/list", {}, 12)
                assert "tools" in listed["result"]
                cluster.servers.remove(a)
    finally:
        cluster.stop()
    print("F10 trials (progress events before the error, seconds from kill to error):", report)


# -- mcphost serve --workers N ------------------------------------------------------------------------

async def test_several_workers_serve_any_request_and_a_dead_worker_is_replaced(cluster):
    server = cluster.start()  # a single process first, to hold a session created before the workers
    async with httpx.AsyncClient(timeout=10) as client:
        session_id = await open_session(client, server, ELICITATION)
    port = server.port
    server.stop()
    workers = HttpServer(cluster.tmp_path, plugins="demo,clustertest,redis", env=cluster.env, config=cluster.config,
                         port=port, args=["--workers", "3"])
    cluster.servers.append(workers)
    pids: set[str] = set()
    # A new connection per request: the kernel hands each to whichever worker accepts first.
    async with httpx.AsyncClient(timeout=10, limits=httpx.Limits(max_keepalive_connections=0)) as client:
        for n in range(60):
            reply = await session_call(client, workers, session_id, "tools/call", {"name": "whoami", "arguments": {}},
                                       n + 10)
            pids.add(text_of(reply))
            if len(pids) == 3:
                break
        assert len(pids) >= 2, pids
        assert str(workers.process.pid) not in pids  # the parent only supervises
        victim = int(next(iter(pids)))
        os.kill(victim, signal.SIGKILL)
        for n in range(20):  # the others go on serving meanwhile, and a replacement starts
            reply = await session_call(client, workers, session_id, "tools/call", {"name": "whoami", "arguments": {}},
                                       n + 100)
            assert text_of(reply) != str(victim)
        await asyncio.sleep(1.5)
        seen: set[str] = set()
        for n in range(60):
            reply = await session_call(client, workers, session_id, "tools/call", {"name": "whoami", "arguments": {}},
                                       n + 200)
            seen.add(text_of(reply))
        assert str(victim) not in seen and len(seen) >= 2
    assert "starting a new one" in workers.log()
    assert workers.stop() == 0  # SIGTERM to the parent: every worker stops gracefully


def test_several_workers_are_refused_on_the_in_memory_backend(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPHOST_")}
    env.update({"MCPHOST_CONFIG": str(tmp_path / "none.toml"), "MCPHOST_PLUGINS": "demo"})
    (tmp_path / "none.toml").write_text("")
    result = subprocess.run([str(Path(sys.executable).parent / "mcphost"), "serve", "--workers", "2", "--port", "0"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "2 workers need a shared state backend" in result.stderr
    assert "mcphost-redis" in result.stderr and "[plugins.redis] url" in result.stderr


# -- F11/F12: Redis faults under load ---------------------------------------------------------------

async def _post_call(client: httpx.AsyncClient, server: HttpServer, session_id: str, request_id: Any
                     ) -> tuple[int, float, httpx.Response]:
    import time
    started = time.monotonic()
    response = await client.post(server.url, headers=session_headers(session_id), json={
        "jsonrpc": "2.0", "id": request_id, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": f"r{request_id}"}}})
    return response.status_code, time.monotonic() - started, response


async def test_f11_redis_killed_and_restarted_ten_times_under_load(tmp_path):
    import itertools
    import time
    redis = RedisServer(tmp_path / "redis", persistence="always", extra=["--enable-debug-command", "local"])
    cluster = Cluster(tmp_path, redis, "f11:", lease=2)
    ids = itertools.count(100)
    outcomes: list[tuple[int, float, bool]] = []
    interrupted: list[tuple[HttpServer, str, Any]] = []
    stop = asyncio.Event()
    try:
        a, b = cluster.start(), cluster.start()
        async with httpx.AsyncClient(timeout=40) as client:
            session_id = await open_session(client, a, ELICITATION)

            async def load() -> None:
                while not stop.is_set():
                    for server in (a, b):
                        request_id = next(ids)
                        status, took, response = await _post_call(client, server, session_id, request_id)
                        answered = status == 200 and any(m.get("id") == request_id for m in sse_messages(response.text))
                        outcomes.append((status, took, answered))
                        if status == 200 and not answered:  # the stream broke in the outage: resume later
                            last = [line[4:] for line in response.text.splitlines() if line.startswith("id: ")][-1]
                            interrupted.append((server, last, request_id))
                    await asyncio.sleep(0.01)

            loader = asyncio.ensure_future(load())
            outage_answers, recoveries = [], []
            for _round in range(10):
                await asyncio.sleep(0.3)
                redis.kill()
                for server in (a, b):  # fail fast during the outage: 503 + Retry-After within 2 s
                    status, took, response = await _post_call(client, server, session_id, next(ids))
                    assert status == 503 and response.headers.get("retry-after") == "1", response.text
                    assert took < 2.0
                    outage_answers.append(took)
                await asyncio.sleep(0.3)
                redis.start()
                restarted = time.monotonic()
                for server in (a, b):  # back within 5 s
                    while True:
                        status, _, response = await _post_call(client, server, session_id, next(ids))
                        if status == 200:
                            break
                        assert time.monotonic() - restarted < 5, response.text
                        await asyncio.sleep(0.05)
                recoveries.append(time.monotonic() - restarted)
            # F12: a stalled Redis gets the same fast 503 and recovers without a restart.
            with __import__("socket").create_connection(("127.0.0.1", redis.port)) as stall:
                stall.sendall(b"*3\r\n$5\r\nDEBUG\r\n$5\r\nSLEEP\r\n$1\r\n3\r\n")
                await asyncio.sleep(0.1)
                status, took, _ = await _post_call(client, a, session_id, next(ids))
                assert status == 503 and took < 2.0
            stop.set()
            await asyncio.wait_for(loader, 60)
            for _server, last, request_id in interrupted:  # nothing was lost: a resume delivers the reply
                async with client.stream("GET", b.url, headers={"accept": "text/event-stream",
                                                                "mcp-session-id": session_id,
                                                                "last-event-id": last}) as resumed:
                    reader = SseReader(resumed)
                    await reader.until(lambda r, i=request_id: any(_message(e).get("id") == i for e in r.events))
            assert a.process.poll() is None and b.process.poll() is None  # no host crashed
            assert {status for status, _, _ in outcomes} <= {200, 503}
            assert sum(answered for _, _, answered in outcomes) > 20
            assert "Traceback" not in a.log() + b.log()
    finally:
        stop.set()
        cluster.stop()
        redis.stop()
    print(f"F11: {len(outcomes)} calls under load, {len(interrupted)} resumed; 503 in at most "
          f"{max(outage_answers):.2f}s; back after at most {max(recoveries):.2f}s")


# -- F15: subscription churn and deleted sessions -------------------------------------------------------

async def test_f15_subscription_churn_and_deleted_sessions_leave_no_channels_or_keys(cluster, redis_server):
    import redis as redis_client
    a, b = cluster.start(), cluster.start()
    prefix = cluster.config.split('prefix = "')[1].split('"')[0]
    inspect = redis_client.Redis.from_url(redis_server.url)
    try:
        baseline = set(inspect.pubsub_channels(f"{prefix}*"))
        # The broadcast channel, and each process's own channel for acknowledgements.
        assert {c for c in baseline if not c.startswith(f"{prefix}b:w:".encode())} == {f"{prefix}b:all".encode()}
        assert len(baseline) == 3
        async with httpx.AsyncClient(timeout=20) as client:
            # 2025-03-26 sessions take batches: 10 000 subscribe/unsubscribe cycles in 200 POSTs.
            old = {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "f15", "version": "0"}}
            sessions = []
            for server in (a, b, a, b):
                response = await client.post(server.url, headers=session_headers(), json={
                    "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": old})
                sessions.append(response.headers["mcp-session-id"])
                await client.post(server.url,
                                  headers=session_headers(sessions[-1], **{"mcp-protocol-version": "2025-03-26"}),
                                  json={"jsonrpc": "2.0", "method": "notifications/initialized"})

            async def churn(session_id: str, server: HttpServer, cycles: int) -> None:
                for start in range(0, cycles, 25):
                    batch = [{"jsonrpc": "2.0", "id": f"{n}-{method}", "method": method,
                              "params": {"uri": f"demo://x/{n % 7}"}}
                             for n in range(start, start + 25)
                             for method in ("resources/subscribe", "resources/unsubscribe")]
                    response = await client.post(server.url, json=batch, headers=session_headers(
                        session_id, **{"mcp-protocol-version": "2025-03-26"}))
                    assert response.status_code == 200, response.text
                    replies = sse_messages(response.text)
                    assert len(replies) == 50 and all(r.get("result") == {} for r in replies), response.text

            await asyncio.gather(*(churn(s, (a, b)[i % 2], 2500) for i, s in enumerate(sessions)))
            for session_id in sessions:
                old_headers = session_headers(session_id, **{"mcp-protocol-version": "2025-03-26"})
                response = await client.post(a.url, headers=old_headers, json={
                    "jsonrpc": "2.0", "id": 5, "method": "resources/subscribe", "params": {"uri": "demo://readme"}})
                assert response.status_code == 200
                assert (await client.delete(b.url, headers=session_headers(session_id))).status_code == 204
            await asyncio.sleep(0.5)
            assert set(inspect.pubsub_channels(f"{prefix}*")) == baseline  # every session channel is gone
            await session_call(client, a, await open_session(client, a, ELICITATION), "tools/call",
                       {"name": "announce", "arguments": {"uri": "demo://readme"}}, 6)
            await asyncio.sleep(2.5)  # the streams of a dropped session linger 2 s to wake their readers
            for session_id in sessions:  # nothing written for a dead session, nothing of it left
                assert inspect.keys(f"{prefix}*{session_id}*") == []
    finally:
        inspect.close()
