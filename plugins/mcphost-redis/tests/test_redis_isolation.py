"""Isolation on the Redis backend (RELIABILITY H9, H12): client identifiers never reach Redis keys
or fields they were not minted for, and readiness notices a Redis that cannot write.

Each test runs real ``mcphost serve`` processes against a private redis-server.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcphost_redis.testing import RedisServer

from tests.support.http_support import HttpServer, sse_events, sse_messages

INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "isolation", "version": "0"}}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> Iterator[HttpServer]:
    root = tmp_path_factory.mktemp("redis-isolation")
    config = f'[plugins.redis]\nurl = "{redis_server.url}"\nprefix = "iso:"\n'
    server = HttpServer(root, plugins="demo,redis", config=config)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def session(served: HttpServer) -> tuple[str, str]:
    """A session with one finished request stream: (session id, that stream's id)."""
    with httpx.Client(timeout=10) as client:
        session_id = served.initialize(client)
        response = client.post(served.url, headers=served.headers(session_id), json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}})
        [stream] = {event["id"].rpartition(".")[0] for event in sse_events(response.text) if "id" in event}
    return session_id, stream


def resume(server: HttpServer, session_id: str, last_event_id: str) -> tuple[int, str]:
    """GET with ``Last-Event-ID``: the status, and the stream id the server accepted on a 200."""
    headers = {**server.headers(session_id), "accept": "text/event-stream", "last-event-id": last_event_id}
    with httpx.Client(timeout=5) as client, client.stream("GET", server.url, headers=headers) as response:
        return response.status_code, last_event_id.strip().partition(".")[0]


def crafted(stream: str) -> list[str]:
    """Ids naming the internal fields and keys of the stream hash ``e:{S}`` (see mcphost_redis.scripts)."""
    ids = []
    for base in (stream, "0", "1"):
        for suffix in (":r", ":d", ":lease", ":lease:" + base, "}", "{x}", ":0", " ", "\t"):
            ids += [f"{base}{suffix}.0", f"{base}{suffix}.1", f"{base}{suffix}.99"]
    return [*ids, "lease:0.1", ":r.0", "e:{x}.0", "*.0", "0.-1", ".0", "0.", "1-.1", "-1.1"]


MINTED = re.compile(r"[0-9]{1,18}(?:-[0-9a-f]{1,32})?")


def test_crafted_last_event_ids_naming_internal_fields_get_400_never_500(
        served: HttpServer, session: tuple[str, str]) -> None:
    session_id, stream = session
    for last_event_id in crafted(stream):
        status, _ = resume(served, session_id, last_event_id)
        assert status in (400, 404), (last_event_id, status, served.log()[-3000:])
    assert "Traceback" not in served.log()


def test_a_crafted_task_id_never_reaches_redis(served: HttpServer) -> None:
    from tests.support.http_support import modern
    with httpx.Client(timeout=10) as client:
        for task_id in ("x:y", "{iso}", "a b", "t:" + "x" * 10, "../x"):
            message, headers = modern("tasks/get", {"taskId": task_id})
            response = client.post(served.url, headers=headers, json=message)
            assert response.status_code < 500, response.text


_ALPHABET = "0123456789abcdef-.:{}rdl e*\t"


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzzed_last_event_ids_are_never_a_server_error_nor_an_endless_foreign_stream(
        served: HttpServer, session: tuple[str, str], data: st.DataObject) -> None:
    session_id, stream = session
    last_event_id = data.draw(st.one_of(
        st.text(alphabet=_ALPHABET, max_size=40),
        st.builds(lambda suffix, seq: f"{stream}{suffix}.{seq}", st.text(alphabet=_ALPHABET, max_size=12),
                  st.integers(min_value=-2, max_value=10**6)),
        st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=40)))
    try:
        status, accepted = resume(served, session_id, last_event_id)
    except (httpx.LocalProtocolError, UnicodeEncodeError):
        return  # a header value httpx itself refuses to send
    assert status != 500 and status < 500, (last_event_id, status)
    if status == 200:  # only the ids this transport mints open a stream
        assert MINTED.fullmatch(accepted), last_event_id


# -- H12: Redis that cannot write; lease renewals that fail -----------------------------------------

def test_readyz_reports_a_redis_that_refuses_writes(served: HttpServer, redis_server: RedisServer) -> None:
    ready = served.url.replace("/mcp", "/readyz")
    with httpx.Client(timeout=10) as client:
        assert client.get(ready).status_code == 200
        redis_server.command("CONFIG", "SET", "maxmemory-policy", "noeviction")
        redis_server.command("CONFIG", "SET", "maxmemory", "1")  # every write is refused (OOM), PING still answers
        try:
            assert redis_server.command("PING").strip().endswith(b"PONG")
            refused = client.get(ready)
            assert refused.status_code == 503 and refused.json()["reason"] == "backend unhealthy", refused.text
        finally:
            redis_server.command("CONFIG", "SET", "maxmemory", "0")
        assert client.get(ready).status_code == 200


def test_a_lease_renewal_that_fails_never_tells_the_client_to_resend_a_running_request(
        tmp_path: Path, redis_server: RedisServer) -> None:
    config = f'[plugins.redis]\nurl = "{redis_server.url}"\nprefix = "lease:"\nlease = 1\n'
    server = HttpServer(tmp_path, plugins="demo,redis", config=config)
    stop = threading.Event()
    try:
        with httpx.Client(timeout=30) as client:
            session_id = server.initialize(client)

            def lose_leases() -> None:  # as if every renewal failed: the lease keys keep vanishing
                while not stop.is_set():
                    reply = redis_server.command("KEYS", f"lease:e:{{{session_id}}}:lease:*")
                    for key in reply.split(b"\r\n"):
                        if key.startswith(b"lease:"):
                            redis_server.command("DEL", key.decode())
                    time.sleep(0.05)

            thief = threading.Thread(target=lose_leases)
            thief.start()
            response = client.post(server.url, headers=server.headers(session_id), json={
                "jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "progress", "arguments": {"steps": 4, "delay_ms": 800}}})
            stop.set()
            thief.join()
        [answer] = [m for m in sse_messages(response.text) if m.get("id") == 7]
        assert "result" in answer, answer  # not "send it again" while it was still running
    finally:
        stop.set()
        server.stop()


def test_a_lease_lapsed_while_redis_refused_writes_is_taken_back_not_settled_by_another_process(
        tmp_path: Path, own_redis: RedisServer) -> None:
    """A slow call runs on node A; its client follows the stream on node B (Last-Event-ID). Redis
    refuses every write for longer than a lease (A's renewals fail, its lease lapses), then takes
    B's writes a moment before A's. B must not settle the stream ("send it again") while A still
    runs the call: the client gets the real result."""
    own_redis.command("ACL", "SETUSER", "nodea", "on", ">pw", "~*", "&*", "+@all")
    common = '[server]\nsse_keepalive = 1\n\n[plugins.redis]\nprefix = "h12:"\nlease = 2\n'
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = HttpServer(tmp_path / "a", plugins="demo,redis",
                   config=common + f'url = "redis://nodea:pw@127.0.0.1:{own_redis.port}/0"\n')
    b = HttpServer(tmp_path / "b", plugins="demo,redis", config=common + f'url = "{own_redis.url}"\n')
    faults = threading.Event()

    def fail_writes() -> None:
        faults.wait(30)
        time.sleep(0.3)
        own_redis.command("ACL", "SETUSER", "nodea", "-@write")  # A's writes fail ...
        own_redis.command("CONFIG", "SET", "min-replicas-to-write", "1")  # ... and everyone's (NOREPLICAS)
        time.sleep(3.0)  # past A's lease (2 s): it lapses
        own_redis.command("CONFIG", "SET", "min-replicas-to-write", "0")  # B writes again
        time.sleep(1.5)  # B sees the lapse (it checks every half lease)
        own_redis.command("ACL", "SETUSER", "nodea", "+@all")  # and A

    breaker = threading.Thread(target=fail_writes)
    breaker.start()
    try:
        with httpx.Client(timeout=30) as client:
            session_id = a.initialize(client)
            call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                    "params": {"name": "progress", "arguments": {"steps": 8, "delay_ms": 1000}}}
            with client.stream("POST", a.url, headers=a.headers(session_id), json=call) as response:
                assert response.status_code == 200
                last = next(line for line in response.iter_lines() if line.startswith("id: "))[4:]
            faults.set()  # the client left A's stream; it follows the call on B from now on
            answer: dict[str, Any] | None = None
            deadline = time.monotonic() + 25
            while answer is None and time.monotonic() < deadline:
                get = {**b.headers(session_id), "accept": "text/event-stream", "last-event-id": last}
                with client.stream("GET", b.url, headers=get) as stream:
                    if stream.status_code != 200:  # Redis refused B's session touch: 503, retry
                        time.sleep(0.2)
                        continue
                    for event in sse_events("".join(f"{line}\n" for line in stream.iter_lines())):
                        last = event.get("id", last)
                        message = json.loads(event["data"]) if event.get("data", "").strip() else {}
                        if message.get("id") == 7:
                            answer = message
        assert answer is not None, b.log()[-3000:]
        assert "result" in answer, answer  # not "send it again" while it was still running on A
        assert answer["result"]["content"][0]["text"] == "completed 8 steps", answer
    finally:
        faults.set()
        breaker.join()
        own_redis.command("CONFIG", "SET", "min-replicas-to-write", "0")
        a.stop()
        b.stop()


# -- H1 with workers: no worker dies, so the supervisor never gives up ------------------------------

def test_plugin_exits_kill_no_worker_and_the_supervisor_keeps_serving(tmp_path: Path,
                                                                      redis_server: RedisServer) -> None:
    from tests.support.http_plugins.harness import probe_env
    config = (f'[server]\nallow_anonymous = true\n\n[plugins.redis]\nurl = "{redis_server.url}"\n'
              f'prefix = "workers:"\n')
    server = HttpServer(tmp_path, plugins="demo,redis,httpunruly", env=probe_env(tmp_path), config=config,
                        args=["--workers", "2"])
    try:
        with httpx.Client(timeout=20) as client:
            session_id = server.initialize(client)
            for number in range(24):  # more than the supervisor's 5 restarts per worker and minute
                tool = ("exit_cli", "exit_async", "interrupt")[number % 3]
                response = client.post(server.url, headers=server.headers(session_id), json={
                    "jsonrpc": "2.0", "id": number, "method": "tools/call", "params": {"name": tool, "arguments": {}}})
                [answer] = [m for m in sse_messages(response.text) if m.get("id") == number]
                assert answer["result"]["isError"] is True, answer
            echoed = client.post(server.url, headers=server.headers(session_id), json={
                "jsonrpc": "2.0", "id": "last", "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "alive"}}})
            assert "alive" in echoed.text
        assert server.process.poll() is None
        log = server.log()
        assert "starting a new one" not in log and "keep dying" not in log, log[-3000:]
    finally:
        server.stop()
