"""Per-principal limits (RELIABILITY H4-H7), against a real ``mcphost serve`` on loopback.

One greedy principal exhausts its own quotas (sessions, requests in flight, tasks, per-session
stores); every other principal goes on unaffected. The ``httpquota`` test plugin authenticates
``X-Test-User`` (with ``X-Test-Scopes``) and provides a tool that holds a request in flight,
a task-capable tool and scoped resources.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcphost.testing import app_client, make_host
from tests.support.http_support import INIT_PARAMS, HttpServer, quota_env, sse_messages

REPO_ROOT = Path(__file__).resolve().parents[2]
MODERN = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
LIMITS = """
[server]
allow_anonymous = true
max_sessions_per_principal = 3
max_requests_per_principal = 2
max_tasks_per_principal = 1
task_after = 0.1
max_subscriptions = 3
max_uri_bytes = 100
max_client_info_bytes = 2000
max_streams_per_session = 2
max_retained_bytes = 200000
"""


def start(root: Path, config: str = LIMITS) -> HttpServer:
    return HttpServer(root, plugins="httpquota", env=quota_env(root), config=config)


def who(user: str | None, scopes: str = "") -> dict[str, str]:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if user is not None:
        headers["x-test-user"] = user
        headers["x-test-scopes"] = scopes
    return headers


def rpc(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if request_id is not None:
        message["id"] = request_id
    return message


def initialize(client: httpx.Client, server: HttpServer, user: str | None, scopes: str = "",
               params: dict[str, Any] | None = None) -> httpx.Response:
    return client.post(server.url, headers=who(user, scopes), json=rpc(1, "initialize", params or INIT_PARAMS))


def open_session(client: httpx.Client, server: HttpServer, user: str | None, scopes: str = "") -> str:
    response = initialize(client, server, user, scopes)
    assert response.status_code == 200, response.text
    session_id = response.headers["mcp-session-id"]
    client.post(server.url, headers={**who(user, scopes), "mcp-session-id": session_id},
                json=rpc(None, "notifications/initialized"))
    return session_id


def call(client: httpx.Client, server: HttpServer, session_id: str, user: str | None, method: str,
         params: dict[str, Any], *, scopes: str = "", request_id: Any = 2) -> tuple[httpx.Response, dict[str, Any]]:
    response = client.post(server.url, headers={**who(user, scopes), "mcp-session-id": session_id},
                           json=rpc(request_id, method, params))
    found = sse_messages(response.text) if response.headers.get("content-type", "").startswith(
        "text/event-stream") else [response.json()]
    return response, [m for m in found if m.get("id") == request_id][-1]


def echo_works(client: httpx.Client, server: HttpServer, user: str | None) -> None:
    session_id = open_session(client, server, user)
    response, reply = call(client, server, session_id, user, "tools/call",
                           {"name": "echo", "arguments": {"text": "still here"}})
    assert response.status_code == 200 and reply["result"]["content"][0]["text"] == "still here", reply


def modern(method: str, params: dict[str, Any], user: str | None, *, request_id: Any = 1
           ) -> tuple[dict[str, Any], dict[str, str]]:
    params = {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                                  "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}}
    headers = {**who(user), "mcp-protocol-version": MODERN, "mcp-method": method}
    if isinstance(params.get("name"), str):
        headers["mcp-name"] = params["name"]
    return rpc(request_id, method, params), headers


def modern_reply(client: httpx.Client, server: HttpServer, method: str, params: dict[str, Any],
                 user: str | None) -> dict[str, Any]:
    message, headers = modern(method, params, user)
    response = client.post(server.url, headers=headers, content=json.dumps(message))
    assert response.status_code == 200, response.text
    found = sse_messages(response.text) if response.headers["content-type"].startswith("text/event-stream") \
        else [response.json()]
    return found[-1]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    server = start(tmp_path_factory.mktemp("principal-limits"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=15) as client:
        yield client


# -- H4: sessions, requests and tasks per principal -------------------------------------------------

def test_h4_a_principal_beyond_its_session_cap_gets_429_and_others_are_unaffected(server, client):
    held = [open_session(client, server, "greedy-sessions") for _ in range(3)]
    refused = initialize(client, server, "greedy-sessions")
    assert refused.status_code == 429, refused.text
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.json()["error"]["code"] == -32000
    assert "mcp-session-id" not in refused.headers
    echo_works(client, server, "modest")  # another principal still gets a session and an answer
    # Ending one of its sessions gives the greedy principal room again.
    assert client.delete(server.url, headers={**who("greedy-sessions"), "mcp-session-id": held[0]}).status_code == 204
    assert initialize(client, server, "greedy-sessions").status_code == 200


async def test_h4_anonymous_callers_share_one_session_quota_per_address():
    """In process (plain requests from one address): the httpquota plugin served by the app."""
    from tests.support.http_plugins import quota

    config = {"server": {"allow_anonymous": True, "max_sessions_per_principal": 3, "log_level": "warning"}}
    async with app_client(make_host(("httpquota", quota), config=config)) as client:

        async def initialize_as(user: str | None) -> httpx.Response:
            return await client.post("/mcp", headers=who(user), json=rpc(1, "initialize", INIT_PARAMS))

        async def open_as(user: str | None) -> dict[str, str]:
            opened = await initialize_as(user)
            assert opened.status_code == 200, opened.text
            session = {**who(user), "mcp-session-id": opened.headers["mcp-session-id"]}
            await client.post("/mcp", headers=session, json=rpc(None, "notifications/initialized"))
            return session

        for _ in range(3):
            await open_as(None)
        assert (await initialize_as(None)).status_code == 429
        session = await open_as("named")  # an authenticated principal has its own quota
        response = await client.post("/mcp", headers=session, json=rpc(2, "tools/call", {
            "name": "echo", "arguments": {"text": "still here"}}))
        found = sse_messages(response.text) if response.headers.get("content-type", "").startswith(
            "text/event-stream") else [response.json()]
        reply = [m for m in found if m.get("id") == 2][-1]
        assert response.status_code == 200 and reply["result"]["content"][0]["text"] == "still here", reply


def test_h4_requests_in_flight_per_principal_are_capped_with_429(server):
    with httpx.Client(timeout=15) as client:
        session_id = open_session(client, server, "greedy-requests")
        other = open_session(client, server, "greedy-requests")  # its second session shares the quota
        headers = {**who("greedy-requests"), "mcp-session-id": session_id}
        holders = []
        try:
            for request_id in (10, 11):  # two held requests: its whole quota
                held = rpc(request_id, "tools/call", {"name": "hold", "arguments": {"seconds": 3}})
                stream = client.stream("POST", server.url, headers=headers, json=held)
                response = stream.__enter__()
                holders.append(stream)
                assert response.status_code == 200
            refused = client.post(server.url, headers={**headers, "mcp-session-id": other},
                                  json=rpc(12, "tools/call", {"name": "echo", "arguments": {"text": "x"}}))
            assert refused.status_code == 429, refused.text
            assert refused.headers["retry-after"] == "1"
            assert refused.json()["error"]["code"] == -32000 and refused.json()["id"] == 12
            # Notifications are never refused (they may be what finishes the requests in flight).
            assert client.post(server.url, headers=headers, json=rpc(None, "notifications/initialized")
                               ).status_code == 202
            echo_works(client, server, "modest")
        finally:
            for stream in holders:
                stream.__exit__(None, None, None)


def test_h4_tasks_per_principal_are_capped_and_others_still_get_tasks(server, client):
    job = {"name": "long_job", "arguments": {"seconds": 5}}
    first = modern_reply(client, server, "tools/call", job, "greedy-tasks")
    assert first["result"]["resultType"] == "task", first
    second = modern_reply(client, server, "tools/call", job, "greedy-tasks")
    assert second["error"]["code"] == -32000 and "principal" in second["error"]["message"], second
    other = modern_reply(client, server, "tools/call", job, "modest")
    assert other["result"]["resultType"] == "task", other


# -- H6: scopes on every path to a record --------------------------------------------------------------

class Listen:
    """A 2026-07-28 ``subscriptions/listen`` stream read in a thread; ``messages`` as they arrive."""

    def __init__(self, server: HttpServer, user: str | None, notifications: dict[str, Any], *,
                 scopes: str = "", headers: dict[str, str] | None = None, request_id: Any = 7) -> None:
        message, sent = modern("subscriptions/listen", {"notifications": notifications}, user, request_id=request_id)
        sent["x-test-scopes"] = scopes
        sent.update(headers or {})
        self.messages: list[dict[str, Any]] = []
        self.status: int | None = None
        self.acknowledged = threading.Event()
        self.ended = threading.Event()
        self.thread = threading.Thread(target=self._read, args=(server, message, sent), daemon=True)
        self.thread.start()

    def _read(self, server: HttpServer, message: dict[str, Any], headers: dict[str, str]) -> None:
        try:
            with httpx.Client(timeout=30) as client, client.stream("POST", server.url, headers=headers,
                                                                   content=json.dumps(message)) as response:
                self.status = response.status_code
                for line in response.iter_lines():
                    if line.startswith("data:") and line[5:].strip():
                        self.messages.append(json.loads(line[5:]))
                        if self.messages[-1].get("method") == "notifications/subscriptions/acknowledged":
                            self.acknowledged.set()
        except httpx.HTTPError:
            pass  # the server stopped with the stream open (the end of the test module)
        finally:
            self.acknowledged.set()
            self.ended.set()

    def updates(self) -> list[str]:
        return [m["params"]["uri"] for m in self.messages if m.get("method") == "notifications/resources/updated"]


def test_h6_subscribe_read_and_complete_are_refused_alike_without_the_scopes(server, client):
    session_id = open_session(client, server, "carol")
    refusals = [
        ("resources/read", {"uri": "quota://secret"}),
        ("resources/read", {"uri": "quota://vault/alpha"}),
        ("resources/subscribe", {"uri": "quota://secret"}),
        ("resources/subscribe", {"uri": "quota://vault/alpha"}),
        ("completion/complete", {"ref": {"type": "ref/resource", "uri": "quota://vault/{name}"},
                                 "argument": {"name": "name", "value": "a"}}),
    ]
    for method, params in refusals:
        response = client.post(server.url, headers={**who("carol"), "mcp-session-id": session_id},
                               json=rpc(3, method, params))
        assert response.status_code == 403, (method, response.status_code, response.text)
        assert "insufficient_scope" in response.headers.get("www-authenticate", "") or \
            "scope" in response.json()["error"]["message"].lower(), (method, response.headers, response.text)
    # List pages leave out what the caller may not read.
    _, resources = call(client, server, session_id, "carol", "resources/list", {})
    assert [r["uri"] for r in resources["result"]["resources"]] == ["quota://public"], resources
    _, templates = call(client, server, session_id, "carol", "resources/templates/list", {})
    assert templates["result"]["resourceTemplates"] == [], templates
    # The scope holder may do all of it.
    allowed = open_session(client, server, "dave", "secret:read")
    for method, params in refusals:
        response, reply = call(client, server, allowed, "dave", method, params, scopes="secret:read")
        assert "result" in reply, (method, reply)


def test_h6_no_update_reaches_a_listener_without_the_scopes(server, client):
    reader = Listen(server, "erin", {"resourceSubscriptions": ["quota://secret", "quota://public"]})
    holder = Listen(server, "frank", {"resourceSubscriptions": ["quota://secret"]}, scopes="secret:read",
                    request_id=8)
    assert reader.acknowledged.wait(10) and holder.acknowledged.wait(10)
    ack = reader.messages[0]["params"]["notifications"]
    assert ack["resourceSubscriptions"] == ["quota://public"], ack  # the filter it may not read is dropped
    session_id = open_session(client, server, "toucher")
    for uri in ("quota://secret", "quota://public"):
        call(client, server, session_id, "toucher", "tools/call", {"name": "touch", "arguments": {"uri": uri}})
    deadline = time.monotonic() + 10
    while (not reader.updates() or not holder.updates()) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # anything else on its way arrives meanwhile
    assert reader.updates() == ["quota://public"], reader.messages
    assert holder.updates() == ["quota://secret"], holder.messages


# -- H7: streams end when the credentials expire, or after max_stream_seconds ---------------------------

def standalone_stream_lasts(server: HttpServer, user: str | None, *, expires_in: float | None = None,
                            patience: float = 8.0) -> float:
    """Open a session's standalone GET stream; the seconds until the server ended it (``patience``
    when it was still open then)."""
    headers = who(user)
    if expires_in is not None:
        headers["x-test-expires-in"] = str(expires_in)
    with httpx.Client(timeout=30) as client:
        session_id = open_session(client, server, user)
        started = time.monotonic()
        try:
            with client.stream("GET", server.url, headers={**headers, "accept": "text/event-stream",
                                                            "mcp-session-id": session_id},
                               timeout=httpx.Timeout(30, read=patience)) as response:
                assert response.status_code == 200
                for _ in response.iter_raw():
                    pass
        except httpx.ReadTimeout:
            return patience
        return time.monotonic() - started


def test_h7_a_get_stream_ends_when_the_principal_expires(server):
    assert standalone_stream_lasts(server, "fleeting", expires_in=1.5) < 6
    assert standalone_stream_lasts(server, "lasting", patience=3) == 3  # no expiry: still open


def test_h7_a_listen_stream_ends_with_its_result_when_the_principal_expires(server):
    started = time.monotonic()
    fleeting = Listen(server, "fleeting-listener", {"resourceSubscriptions": ["quota://public"]},
                      headers={"x-test-expires-in": "1.5"}, request_id=21)
    lasting = Listen(server, "lasting-listener", {"resourceSubscriptions": ["quota://public"]}, request_id=22)
    assert fleeting.ended.wait(10), fleeting.messages
    assert time.monotonic() - started < 8
    final = fleeting.messages[-1]
    assert final["id"] == 21 and "result" in final, fleeting.messages
    assert final["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 21
    assert not lasting.ended.is_set()  # another principal's stream stays open


def test_h7_max_stream_seconds_bounds_streams_without_expiry(tmp_path: Path):
    server = start(tmp_path, LIMITS + "max_stream_seconds = 1.5\n")
    try:
        assert standalone_stream_lasts(server, None) < 6
        listener = Listen(server, "no-expiry", {"resourceSubscriptions": ["quota://public"]}, request_id=31)
        assert listener.ended.wait(10)
        assert listener.messages[-1]["id"] == 31 and "result" in listener.messages[-1], listener.messages
    finally:
        server.stop()


# -- H5: budgets for what one session stores --------------------------------------------------------------

def test_h5_subscriptions_are_bounded_in_count_and_uri_length(server, client):
    session_id = open_session(client, server, "subscriber")
    for n in range(3):
        _, reply = call(client, server, session_id, "subscriber", "resources/subscribe", {"uri": f"quota://n/{n}"})
        assert reply["result"] == {}, reply
    _, again = call(client, server, session_id, "subscriber", "resources/subscribe", {"uri": "quota://n/0"})
    assert again["result"] == {}, again  # a subscription it holds costs nothing more
    _, refused = call(client, server, session_id, "subscriber", "resources/subscribe", {"uri": "quota://n/3"})
    assert refused["error"]["code"] == -32602 and "max_subscriptions" in refused["error"]["message"], refused
    call(client, server, session_id, "subscriber", "resources/unsubscribe", {"uri": "quota://n/0"})
    _, long_uri = call(client, server, session_id, "subscriber", "resources/subscribe",
                       {"uri": "quota://n/" + "x" * 200})
    assert long_uri["error"]["code"] == -32602 and "max_uri_bytes" in long_uri["error"]["message"], long_uri
    _, room = call(client, server, session_id, "subscriber", "resources/subscribe", {"uri": "quota://n/3"})
    assert room["result"] == {}, room
    for notifications in ({"resourceSubscriptions": [f"quota://n/{n}" for n in range(4)]},
                          {"resourceSubscriptions": ["quota://n/" + "x" * 200]}):
        reply = modern_reply(client, server, "subscriptions/listen", {"notifications": notifications}, "subscriber")
        assert reply["error"]["code"] == -32602, reply


def test_h5_initialize_params_kept_for_the_session_are_bounded(server, client):
    params = {**INIT_PARAMS, "clientInfo": {"name": "padded", "version": "0", "padding": "p" * 3000}}
    response = initialize(client, server, "padded", params=params)
    [reply] = [m for m in sse_messages(response.text) if m.get("id") == 1]
    assert reply["error"]["code"] == -32602 and "max_client_info_bytes" in reply["error"]["message"], reply


def test_h5_get_streams_of_a_session_resumptions_included_are_bounded(tmp_path):
    # GET streams count as requests in flight too: room for the held call and three streams.
    server = start(tmp_path, LIMITS.replace("max_requests_per_principal = 2", "max_requests_per_principal = 8"))
    try:
        with httpx.Client(timeout=15) as client:
            session_id = open_session(client, server, "streamer")
            headers = {**who("streamer"), "mcp-session-id": session_id}
            with client.stream("POST", server.url, headers=headers,
                               json=rpc(5, "tools/call", {"name": "hold", "arguments": {"seconds": 4}})) as response:
                assert response.status_code == 200  # the client leaves this request's stream at once
            get = {**headers, "accept": "text/event-stream"}
            opened = []
            try:
                for extra in ({}, {"last-event-id": "2.0"}):  # the standalone stream, a resumption of stream 2
                    stream = client.stream("GET", server.url, headers={**get, **extra})
                    opened.append(stream)
                    assert stream.__enter__().status_code == 200
                refused = client.get(server.url, headers={**get, "last-event-id": "2.0"})
                assert refused.status_code == 409 and "max_streams_per_session" in refused.text, refused.text
            finally:
                for stream in opened:
                    stream.__exit__(None, None, None)
    finally:
        server.stop()


def test_h5_abandoned_replies_kept_for_resumption_are_bounded_in_bytes(server):
    with httpx.Client(timeout=15) as client:
        session_id = open_session(client, server, "abandoner")
        headers = {**who("abandoner"), "mcp-session-id": session_id}
        big = {"name": "big", "arguments": {"size": 60000, "delay": 0.3}}
        for request_id in range(10, 15):  # streams 2..6, each abandoned before its 60 kB reply
            sent = rpc(request_id, "tools/call", big)
            with client.stream("POST", server.url, headers=headers, json=sent) as response:
                assert response.status_code == 200
            time.sleep(0.6)
        get = {**headers, "accept": "text/event-stream"}
        oldest = client.get(server.url, headers={**get, "last-event-id": "2.1"})
        assert oldest.status_code == 400, oldest.text  # dropped: over max_retained_bytes
        newest = client.get(server.url, headers={**get, "last-event-id": "6.1"})
        assert newest.status_code == 200
        [reply] = [m for m in sse_messages(newest.text) if m.get("id") == 14]
        assert len(reply["result"]["content"][0]["text"]) == 60000


@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")  # resources/subscribe: a session-era call
async def test_h7_the_official_sdk_client_goes_on_across_ended_get_streams(server):
    """The SDK client's standalone GET stream is ended at each (short) expiry; it reconnects with
    fresh credentials and still gets its resource updates, and its calls still work."""
    import anyio
    import httpx2
    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    updates: list[str] = []
    updated = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))
            updated.set()

    gets: list[float] = []

    async def count_gets(request: Any) -> None:
        if request.method == "GET":
            gets.append(time.monotonic())

    http = httpx2.AsyncClient(headers={"x-test-user": "sdk-user", "x-test-expires-in": "1"},
                              timeout=httpx2.Timeout(30, read=300), event_hooks={"request": [count_gets]})
    transport = streamable_http_client(server.url, http_client=http)
    async with http, Client(transport, mode="legacy", message_handler=on_message, read_timeout_seconds=30) as client:
        await client.subscribe_resource("quota://public")
        await anyio.sleep(3.5)  # the GET stream was ended (and reopened) a few times meanwhile
        result = await client.call_tool("touch", {"uri": "quota://public"})
        assert result.content[0].text == "touched"
        with anyio.fail_after(10):
            await updated.wait()
        assert updates == ["quota://public"]
    assert len(gets) >= 2, gets  # its GET stream ended at expiry and the client opened another
