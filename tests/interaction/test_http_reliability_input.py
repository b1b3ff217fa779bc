"""RELIABILITY.md rows A (input validation), B1-B3 (body limits), C (sessions) and E (transport
security) over Streamable HTTP, against a real ``mcphost serve`` on loopback.

A12 and A17, which hold the same on every transport, are in ``test_reliability.py`` (the
interaction matrix). Most tests share one server (demo, conformance and the test plugins ``httpprobe`` and
``httpauth``); the ones that need other settings start their own. After every malformed input
the server must still answer the next valid request.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcphost.testing import app_client
from tests.support.http_plugins.harness import (
    PROBE_PLUGINS,
    SECRET,
    SSE_ACCEPT,
    Trace,
    call,
    check_wire,
    chunked,
    json_body,
    probe_env,
    raw_exchange,
    request_head,
    rpc,
    rss_kib,
)
from tests.support.http_support import MCPHOST, HttpServer, free_port, sse_messages

PLUGINS = PROBE_PLUGINS + ",httpauth"
MAX_BODY = 4 * 1024 * 1024
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("http-input")


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[HttpServer]:
    # httpauth leaves requests without X-Test-User anonymous: let those through.
    server = HttpServer(root, plugins=PLUGINS, env=probe_env(root, {"MCPHOST_ALLOW_ANONYMOUS": "true"}))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def trace(root: Path) -> Trace:
    return Trace(root / "trace.txt")


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as client:
        yield client


@pytest.fixture
def session(server: HttpServer, client: httpx.Client) -> str:
    return server.initialize(client)


def post(client: httpx.Client, server: HttpServer, session_id: str | None, message: Any, **headers: str
         ) -> httpx.Response:
    return client.post(server.url, headers=server.headers(session_id, **headers), content=json.dumps(message))


def answer(response: httpx.Response, request_id: Any, method: str | None = None) -> dict[str, Any]:
    """The one reply to ``request_id`` on an SSE response, every message schema-checked."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/event-stream"
    messages = sse_messages(response.text)
    check_wire(messages, method)
    replies = [m for m in messages if m.get("id") == request_id and ("result" in m or "error" in m)]
    assert len(replies) == 1, messages
    return replies[0]


def assert_serving(server: HttpServer, client: httpx.Client, session_id: str) -> None:
    """The process is up and the session answers a ping."""
    assert server.process.poll() is None, server.log()
    assert answer(post(client, server, session_id, rpc("alive", "ping")), "alive", "ping")["result"] == {}


def rpc_error(response: httpx.Response, status: int, code: int, request_id: Any = None) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/json"
    body = json_body(response)
    assert body["jsonrpc"] == "2.0" and body["id"] == request_id
    assert body["error"]["code"] == code
    return body


# -- A1-A6: the envelope -------------------------------------------------------------------------

def test_a1_body_that_is_not_json_is_a_400_parse_error(server: HttpServer, client: httpx.Client,
                                                       session: str) -> None:
    for session_id in (session, None):
        response = client.post(server.url, headers=server.headers(session_id), content=b"this is not json")
        rpc_error(response, 400, -32700)
    assert_serving(server, client, session)


def test_a2_batches_are_refused_after_2025_03_26(server: HttpServer, client: httpx.Client, session: str) -> None:
    batch = [rpc(1, "ping"), rpc(2, "tools/list")]
    rpc_error(post(client, server, session, batch), 400, -32600)
    rpc_error(post(client, server, session, []), 400, -32600)
    # initialize in a batch, with or without a session: refused, and no session is minted.
    response = post(client, server, None, [rpc(1, "initialize", INIT)])
    rpc_error(response, 400, -32600)
    assert "mcp-session-id" not in response.headers
    assert_serving(server, client, session)


@pytest.mark.parametrize(("body", "request_id"), [
    ({"id": 1, "method": "ping"}, 1),  # no "jsonrpc"
    ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, 1),
    ({"jsonrpc": "2.0", "id": 1, "method": 5}, 1),  # method not a string
    ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}, None),  # id an object
    ({"jsonrpc": "2.0", "id": [1], "method": "ping"}, None),  # id an array
    ({"jsonrpc": "2.0", "id": True, "method": "ping"}, None),  # id a boolean
    ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, None),  # id a float
    ({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": 5}, 1),  # params a scalar
    ({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}, 1),
    ({"jsonrpc": "2.0", "id": 1}, 1),  # neither request nor response
    ("a string", None),
    (42, None),
    (None, None),
])
def test_a3_json_that_is_not_json_rpc_is_a_400_invalid_request(server: HttpServer, client: httpx.Client,
                                                                session: str, body: Any, request_id: Any) -> None:
    rpc_error(post(client, server, session, body), 400, -32600, request_id)
    assert_serving(server, client, session)


def test_a3_malformed_initialize_mints_no_session(server: HttpServer, client: httpx.Client,
                                                  trace: Trace) -> None:
    before = len(trace.lines(kind="connect"))
    for body in ({"id": 1, "method": "initialize", "params": INIT},  # not JSON-RPC
                 {"jsonrpc": "2.0", "id": {}, "method": "initialize", "params": INIT},
                 {"jsonrpc": "2.0", "method": "initialize", "params": INIT}):  # a notification
        response = post(client, server, None, body)
        assert response.status_code == 400, response.text
        assert "mcp-session-id" not in response.headers
    assert len(trace.lines(kind="connect")) == before  # no session was ever connected


def test_a4_content_type_other_than_json_is_415(server: HttpServer, client: httpx.Client, session: str) -> None:
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "", "application/jsonx"):
        headers = {**server.headers(session), "content-type": content_type}
        response = client.post(server.url, headers=headers, content=json.dumps(rpc(1, "ping")))
        rpc_error(response, 415, -32600)
    # Parameters and case are fine.
    headers = {**server.headers(session), "content-type": "Application/JSON; charset=utf-8"}
    assert answer(client.post(server.url, headers=headers, content=json.dumps(rpc(2, "ping"))), 2)


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream", "text/html", ""])
def test_a5_post_without_both_media_types_in_accept_is_406(server: HttpServer, client: httpx.Client,
                                                           session: str, accept: str) -> None:
    response = client.post(server.url, headers={**server.headers(session), "accept": accept}, json=rpc(1, "ping"))
    rpc_error(response, 406, -32600)


def test_a5_get_without_event_stream_in_accept_is_406(server: HttpServer, client: httpx.Client,
                                                      session: str) -> None:
    for accept in ("application/json", "text/html", ""):
        response = client.get(server.url, headers={"mcp-session-id": session, "accept": accept})
        rpc_error(response, 406, -32600)


def test_a6_unsupported_protocol_version_header_is_400_with_the_literal(server: HttpServer, client: httpx.Client,
                                                                        session: str) -> None:
    headers = {"mcp-protocol-version": "1991-01-01"}
    responses = [(post(client, server, session, rpc(1, "ping"), **headers), 1),  # the id is echoed when read
                 (client.get(server.url, headers={**server.headers(session), **SSE_ACCEPT, **headers}), None)]
    for response, request_id in responses:
        body = rpc_error(response, 400, -32600, request_id)
        assert "Unsupported protocol version" in body["error"]["message"]
    # Every session-era revision is accepted.
    for version in ("2025-03-26", "2025-06-18", "2025-11-25"):
        assert answer(post(client, server, session, rpc(version, "ping"), mcp_protocol_version=version), version)


# -- A10: notifications and responses (A17 for every transport: test_reliability.py) ---------------

@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
    {"jsonrpc": "2.0", "method": "notifications/whatever-this-is", "params": {"x": 1}},
    {"jsonrpc": "2.0", "id": 12345, "result": {}},  # a response nobody waits for
    {"jsonrpc": "2.0", "id": "nobody", "error": {"code": -1, "message": "no"}},
])
def test_a10_posted_notifications_and_responses_get_202_and_an_empty_body(
        server: HttpServer, client: httpx.Client, session: str, message: dict[str, Any]) -> None:
    response = post(client, server, session, message)
    assert response.status_code == 202
    assert response.content == b""
    assert "content-type" not in response.headers
    assert_serving(server, client, session)


# -- A11: parser edge cases -------------------------------------------------------------------------

DEEP_OPEN = b"[" * 1000
DEEP_CLOSED = b"[" * 1000 + b"]" * 1000
A11_BODIES = {
    "depth-1000-open": DEEP_OPEN,
    "depth-1000-closed": DEEP_CLOSED,
    "depth-100000": b"[" * 100_000,
    "deep-params": b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":'
                   + b'"x","deep":' + b"[" * 2000 + b"]" * 2000 + b"}}}",
    "invalid-utf8": b"\xff\xfe",
    "invalid-utf8-in-string": b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}',
    "overlong-utf8": b'{"jsonrpc":"2.0","id":1,"method":"\xc0\xaf"}',
    "lone-surrogate-echoed": b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
                             b'"params":{"name":"echo","arguments":{"text":"\\ud800"}}}',
    "lone-low-surrogate": b'{"jsonrpc":"2.0","id":"\\udc00","method":"ping"}',
    "int-5000-digits": b'{"jsonrpc":"2.0","id":' + b"7" * 5000 + b',"method":"ping"}',
    "int-5000-digits-in-params": b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":' + b"7" * 5000 + b"}}",
    "float-overflow": b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":1e999}}',
    "nan": b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}',
    "infinity": b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":Infinity}}',
    "minus-infinity": b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":-Infinity}}',
    "raw-nul": b'{"jsonrpc":"2.0","id":1,"method":"pi\x00ng"}',
    "nul-after-json": b'{"jsonrpc":"2.0","id":1,"method":"ping"}\x00',
    "two-documents": b'{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0","id":2,"method":"ping"}',
    "trailing-comma": b'{"jsonrpc":"2.0","id":1,"method":"ping",}',
    "empty": b"",
    "whitespace": b" \r\n\t ",
    "bom": b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"ping"}',
    "single-quotes": b"{'jsonrpc':'2.0','id':1,'method':'ping'}",
}


@pytest.mark.parametrize("name", list(A11_BODIES))
def test_a11_parser_edge_cases_are_4xx_and_the_server_keeps_serving(server: HttpServer, client: httpx.Client,
                                                                    session: str, name: str) -> None:
    response = client.post(server.url, headers=server.headers(session), content=A11_BODIES[name])
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    body = json_body(response)
    assert body["error"]["code"] in (-32700, -32600)
    assert_serving(server, client, session)


def test_a11_escaped_nul_duplicate_keys_and_deep_but_parsable_json_are_answered_in_band(
        server: HttpServer, client: httpx.Client, session: str) -> None:
    # Nesting the parser accepts (orjson stops at 1024 levels) reaches the tool's schema check.
    deep = (b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x",'
            b'"deep":' + b"[" * 1000 + b"]" * 1000 + b"}}}")
    reply = answer(client.post(server.url, headers=server.headers(session), content=deep), 3, "tools/call")
    assert reply["result"]["isError"] is True
    # An escaped NUL is valid JSON; it round-trips through echo unharmed.
    escaped = (b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
               b'"params":{"name":"echo","arguments":{"text":"a\\u0000b"}}}')
    reply = answer(client.post(server.url, headers=server.headers(session), content=escaped), 1, "tools/call")
    assert reply["result"]["content"][0]["text"] == "a\x00b"
    # Duplicate keys: the session era mirrors nothing into headers (no A7 differential), so the
    # parsed value (the last one, as orjson and json.loads both keep) is what runs: pinned here.
    duplicate = b'{"jsonrpc":"2.0","id":2,"method":"ping","method":"no/such"}'
    reply = answer(client.post(server.url, headers=server.headers(session), content=duplicate), 2)
    assert reply["error"]["code"] == -32601
    assert_serving(server, client, session)


def test_a11_a_1mb_string_in_params_name_is_refused_in_band_without_echoing_it(
        server: HttpServer, client: httpx.Client, session: str) -> None:
    name = "n" * 1_000_000
    response = post(client, server, session, call(1, name))
    assert len(response.content) < 10_000
    reply = answer(response, 1, "tools/call")
    assert reply["error"]["code"] == -32602
    response = post(client, server, session, rpc(2, "prompts/get", {"name": name}))
    assert answer(response, 2)["error"]["code"] == -32602
    assert_serving(server, client, session)


# -- A13-A14: leaking handlers, resource URIs (A12 for every transport: test_reliability.py) ----


def test_a13_handler_exceptions_never_put_their_message_on_the_wire(server: HttpServer, client: httpx.Client,
                                                                    session: str) -> None:
    tool = post(client, server, session, call(1, "leak"))
    resource = post(client, server, session, rpc(2, "resources/read", {"uri": "probe://leak"}))
    prompt = post(client, server, session, rpc(3, "prompts/get", {"name": "leaky_prompt"}))
    for response in (tool, resource, prompt):
        assert SECRET not in response.text
        assert "Traceback" not in response.text and "RuntimeError" not in response.text
    # A tool failure is an isError result with a generic text; resources and prompts get -32603.
    failed = answer(tool, 1, "tools/call")["result"]
    assert failed["isError"] is True
    assert failed["content"] == [{"type": "text", "text": "Tool 'leak' failed with an internal error"}]
    for response, request_id in ((resource, 2), (prompt, 3)):
        assert answer(response, request_id)["error"] == {"code": -32603, "message": "Internal error"}
    # The full detail is in the server's log.
    deadline = time.monotonic() + 5
    while SECRET not in server.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert f"password={SECRET}" in server.log() and f"token={SECRET}" in server.log()
    assert_serving(server, client, session)


TRAVERSALS = [
    "demo://files/../../etc/passwd",
    "demo://files/../../../../../../etc/passwd",
    "demo://files//etc/passwd",
    "demo://files/%2e%2e/%2e%2e/etc/passwd",
    "demo://files/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
    "demo://files/..%2f..%2f..%2fetc%2fpasswd",
    "demo://files/notes/../../../etc/passwd",
    "demo://files/..\\..\\etc\\passwd",
    "demo://files/%252e%252e/etc/passwd",
    "demo://files/hello.txt%00.png",
    "demo://files/hello.txt\u0000",
    "demo://files/%00",
    "demo://files/\u0000/etc/passwd",
    "demo://files/",
    "demo://files/.",
    "demo://files/..",
    "demo://files/notes",
    "/etc/passwd",
    "file:///etc/passwd",
    "demo://files/file:///etc/passwd",
]


@pytest.mark.parametrize("uri", TRAVERSALS)
def test_a14_path_traversal_never_resolves(server: HttpServer, client: httpx.Client, session: str,
                                           uri: str) -> None:
    response = post(client, server, session, rpc(1, "resources/read", {"uri": uri}))
    assert "root:" not in response.text
    reply = answer(response, 1, "resources/read")
    assert "result" not in reply
    assert reply["error"]["code"] in (-32002, -32602)


def test_a14_a_file_under_the_root_still_reads(server: HttpServer, client: httpx.Client, session: str) -> None:
    reply = answer(post(client, server, session, rpc(1, "resources/read", {"uri": "demo://files/notes/todo.txt"})),
                   1, "resources/read")
    assert reply["result"]["contents"][0]["uri"] == "demo://files/notes/todo.txt"


@pytest.mark.parametrize("uri", [
    "demo://files/" + "a/" * 50_000,
    "demo://files/" + "../" * 34_000,
    "demo://files/" + "%2e" * 34_000,
    "test://template/" + "x" * 100_000 + "/dat",
    "test://template/" + "x/" * 50_000 + "data",
    "test://template/" + "{" * 100_000,
    "demo://" + "/" * 100_000,
])
def test_a14_a_100kb_uri_against_a_template_is_matched_in_linear_time(server: HttpServer, client: httpx.Client,
                                                                      session: str, uri: str) -> None:
    post(client, server, session, rpc(0, "resources/read", {"uri": "demo://files/x"}))  # warm up
    started = time.monotonic()
    response = post(client, server, session, rpc(1, "resources/read", {"uri": uri}))
    elapsed = time.monotonic() - started
    # Linear matching takes milliseconds; a quadratic matcher needs minutes on 100 KB. The wide
    # bound keeps the test meaningful on a loaded 2-core CI machine.
    assert elapsed < 3.0, elapsed
    reply = answer(response, 1, "resources/read")
    assert reply["error"]["code"] in (-32002, -32602)
    assert len(response.content) < 300_000  # the URI is echoed at most once


# -- B1-B3: body limits ------------------------------------------------------------------------------

MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def test_b1_a_1gib_content_length_is_413_before_any_body_is_read(server: HttpServer, client: httpx.Client,
                                                                 trace: Trace) -> None:
    connects = len(trace.lines(kind="connect"))
    for headers in (MCP_HEADERS, {**MCP_HEADERS, "X-Test-User": "alice"}, {"Content-Type": "text/plain"},
                    {**MCP_HEADERS, "Mcp-Session-Id": "no-such-session"}):
        head = request_head("POST", server.port, headers={**headers, "Content-Length": "1073741824"})
        started = time.monotonic()
        response = raw_exchange(server.port, head)
        assert response.status == 413, response
        assert time.monotonic() - started < 0.5
        assert "mcp-session-id" not in response.headers
    # Huge declared lengths on other methods too (they have no business carrying bodies).
    for method in ("GET", "DELETE"):
        head = request_head(method, server.port, headers={**MCP_HEADERS, "Accept": "text/event-stream",
                                                          "Mcp-Session-Id": "x", "Content-Length": "1073741824"})
        assert raw_exchange(server.port, head).status == 413
    assert len(trace.lines(kind="connect")) == connects  # no hook ran, no session was minted
    session_id = server.initialize(client)
    assert_serving(server, client, session_id)


def test_b2_chunked_bodies_over_the_limit_are_413_with_bounded_memory(server: HttpServer, client: httpx.Client,
                                                                      trace: Trace) -> None:
    connects = len(trace.lines(kind="connect"))
    head = request_head("POST", server.port, headers={**MCP_HEADERS, "Transfer-Encoding": "chunked"})
    body = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"' + b"a" * (5 * 1024 * 1024) + b'"}}'
    before = rss_kib(server.process.pid)
    for _ in range(3):
        response = raw_exchange(server.port, head, chunked(body, 65536))
        assert response.status == 413, response
        assert "mcp-session-id" not in response.headers
    assert rss_kib(server.process.pid) - before < 20 * 1024
    assert len(trace.lines(kind="connect")) == connects
    assert_serving(server, client, server.initialize(client))


def test_b2_one_byte_chunks_over_the_limit_are_413(tmp_path: Path) -> None:
    limit = 64 * 1024
    server = HttpServer(tmp_path, plugins="demo", env={"MCPHOST_MAX_BODY_BYTES": str(limit)})
    try:
        head = request_head("POST", server.port, headers={**MCP_HEADERS, "Transfer-Encoding": "chunked"})
        before = rss_kib(server.process.pid)
        response = raw_exchange(server.port, head, chunked(b"[" + b" " * (limit + 1000) + b"]", 1), timeout=60)
        assert response.status == 413, response
        assert rss_kib(server.process.pid) - before < 20 * 1024
        # Just under the limit, in 1-byte chunks, is read and parsed.
        message = json.dumps(rpc(1, "initialize", INIT)).encode()
        response = raw_exchange(server.port, head, chunked(message, 1))
        assert response.status == 200 and "mcp-session-id" in response.headers
        # Refused before the body is read (bad Origin, wrong media type), still arriving in tiny chunks.
        for headers in ({"Origin": "http://evil.example.com"}, {"Content-Type": "text/plain"}):
            refused = request_head("POST", server.port, headers={**MCP_HEADERS, "Transfer-Encoding": "chunked",
                                                                 **headers})
            response = raw_exchange(server.port, refused, chunked(b" " * (limit // 2), 1))
            assert response.status in (403, 415) and response.headers["connection"] == "close"
    finally:
        # Nothing is left hanging on those connections: the server stops at once.
        started = time.monotonic()
        assert server.stop() == 0
        assert time.monotonic() - started < 5


def test_b2_lying_and_invalid_lengths_never_reach_5xx(server: HttpServer, client: httpx.Client,
                                                      session: str) -> None:
    message = json.dumps(rpc(1, "ping")).encode()
    base = {**MCP_HEADERS, "Mcp-Session-Id": session}
    cases = [
        # An understated length: the rest of the bytes is not a request.
        (request_head("POST", server.port, headers={**base, "Content-Length": "5"}), [message * 100]),
        (request_head("POST", server.port, headers={**base, "Content-Length": "abc"}), [message]),
        (request_head("POST", server.port, headers={**base, "Content-Length": "-1"}), [message]),
        (request_head("POST", server.port, headers={**base, "Content-Length": "1, 2"}), [message]),
        (request_head("POST", server.port, headers={**base, "Transfer-Encoding": "chunked"}),
         [b"zz\r\n" + message + b"\r\n0\r\n\r\n"]),
    ]
    for head, chunks in cases:
        response = raw_exchange(server.port, head, chunks)
        assert 400 <= response.status < 500, (head, response)
    # Both Transfer-Encoding and Content-Length: the chunked framing wins (RFC 9112 6.3), no 5xx.
    head = request_head("POST", server.port, headers={**base, "Transfer-Encoding": "chunked", "Content-Length": "10"})
    assert raw_exchange(server.port, head, chunked(message, 8)).status < 500
    assert_serving(server, client, session)


def test_b3_the_limit_covers_every_route(server: HttpServer, client: httpx.Client) -> None:
    for path in ("/other", "/probe/body", "/mcp/../other", "/.well-known/oauth-protected-resource"):
        for method in ("POST", "PUT", "GET"):
            head = request_head(method, server.port, path, {"Content-Type": "application/json",
                                                            "Content-Length": str(MAX_BODY + 1)})
            response = raw_exchange(server.port, head)
            assert response.status == 413, (path, method, response)
            assert "server" not in response.headers
    # A streamed (chunked) body over the limit to a plugin route that reads it: 413 too.
    head = request_head("POST", server.port, "/probe/body", {"Content-Type": "application/json",
                                                             "Transfer-Encoding": "chunked"})
    response = raw_exchange(server.port, head, chunked(b"a" * (MAX_BODY + 65536), 65536))
    assert response.status == 413, response
    # Under the limit the route works.
    assert client.post(f"http://127.0.0.1:{server.port}/probe/body", content=b"x" * 1000).json() == {"length": 1000}


def test_b4_a_header_block_over_max_header_bytes_is_431_however_it_arrives(server: HttpServer,
                                                                          client: httpx.Client) -> None:
    message = json.dumps(rpc(1, "ping")).encode()
    base = {**MCP_HEADERS, "Content-Length": str(len(message))}
    for path in ("/mcp", "/other", "/healthz"):
        big = request_head("POST", server.port, path, {**base, "X-Pad": "a" * (17 * 1024)})
        # All at once (one read: h11 accepts it, the app measures it) and in small pieces (h11's own limit).
        for chunks in ([big + message], [big[i:i + 512] for i in range(0, len(big), 512)] + [message]):
            response = raw_exchange(server.port, chunks[0], chunks[1:])
            assert response.status == 431, (path, response)
    # Just under the default 16 KiB the request is served as usual.
    session_id = server.initialize(client)
    small = request_head("POST", server.port, "/mcp", {**base, "Mcp-Session-Id": session_id,
                                                       "MCP-Protocol-Version": "2025-11-25",
                                                       "X-Pad": "a" * (15 * 1024)})
    assert raw_exchange(server.port, small, [message]).status == 200
    assert_serving(server, client, session_id)


def test_b4_a_body_slower_than_body_timeout_is_408_and_the_server_keeps_serving(tmp_path: Path) -> None:
    server = HttpServer(tmp_path, plugins="demo", env={"MCPHOST_BODY_TIMEOUT": "1"})
    try:
        head = request_head("POST", server.port, headers={**MCP_HEADERS, "Content-Length": "100"})

        def trickle() -> Iterator[bytes]:
            for _ in range(10):
                yield b" "
                time.sleep(0.5)

        started = time.monotonic()
        response = raw_exchange(server.port, head, trickle())
        assert response.status == 408, response
        assert response.headers["connection"] == "close"
        assert 1 <= time.monotonic() - started < 2
        with httpx.Client(timeout=10) as client:
            assert_serving(server, client, server.initialize(client))
    finally:
        server.stop()


# -- C1-C4: sessions -----------------------------------------------------------------------------------

async def test_c1_session_ids_are_unique_visible_ascii_and_random() -> None:
    count = 1200
    # One client address opens them all: lift its per-principal cap too. In process (the ids are
    # the app's, not the socket's): 1 200 initializes over loopback to a process took most of a minute.
    config = {"server": {"max_sessions": count + 10, "max_sessions_per_principal": 0, "log_level": "warning"},
              "plugins": {"allow": ["demo"]}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    async with app_client(config, timeout=30) as client:
        ids = []
        for n in range(count):
            response = await client.post("/mcp", headers=headers, json=rpc(n, "initialize", INIT))
            assert response.status_code == 200
            ids.append(response.headers["mcp-session-id"])
    assert len(set(ids)) == count
    assert all(re.fullmatch(r"[\x21-\x7E]+", session_id) for session_id in ids)
    # 256 bits, URL-safe base64 without padding (documented): at least 128 bits of randomness.
    raw = [base64.urlsafe_b64decode(session_id + "=" * (-len(session_id) % 4)) for session_id in ids]
    assert all(len(value) * 8 >= 128 for value in raw)
    # No sequential pattern: no shared prefixes, and the bits are balanced.
    assert len({session_id[:6] for session_id in ids}) == count
    ones = sum(bin(byte).count("1") for value in raw for byte in value)
    total = sum(len(value) * 8 for value in raw)
    assert abs(ones / total - 0.5) < 0.01


def test_c2_a_non_initialize_request_without_a_session_id_is_400(server: HttpServer,
                                                                 client: httpx.Client) -> None:
    rpc_error(post(client, server, None, rpc(1, "tools/list")), 400, -32600, 1)
    rpc_error(post(client, server, None, {"jsonrpc": "2.0", "method": "notifications/initialized"}), 400, -32600)
    rpc_error(client.get(server.url, headers=SSE_ACCEPT), 400, -32600)
    rpc_error(client.delete(server.url), 400, -32600)


def test_c3_unknown_and_deleted_session_ids_get_404_on_every_method(server: HttpServer,
                                                                    client: httpx.Client) -> None:
    deleted = server.initialize(client)
    assert client.delete(server.url, headers=server.headers(deleted)).status_code == 204
    bodies: dict[str, set[bytes]] = {"POST": set(), "GET": set(), "DELETE": set()}
    for session_id in ("no-such-session", deleted, "x" * 2000, "%00", "Ω".encode()):
        headers: dict[str, Any] = server.headers()
        headers["mcp-session-id"] = session_id
        for method, response, request_id in (
                ("POST", client.post(server.url, headers=headers, json=rpc(1, "ping")), 1),  # the id is echoed
                ("GET", client.get(server.url, headers={**headers, **SSE_ACCEPT}), None),
                ("DELETE", client.delete(server.url, headers=headers), None)):
            body = rpc_error(response, 404, -32600, request_id)
            assert body["error"]["message"] == "Session not found"
            bodies[method].add(response.content)
    assert all(len(seen) == 1 for seen in bodies.values()), bodies


def test_c4_a_session_used_by_another_principal_is_a_byte_identical_404(server: HttpServer,
                                                                        client: httpx.Client) -> None:
    def initialize(**who: str) -> str:
        response = post(client, server, None, rpc(1, "initialize", INIT), **who)
        assert response.status_code == 200
        return response.headers["mcp-session-id"]

    alice = {"x_test_user": "alice", "x_test_issuer": "https://idp.example"}
    owned = initialize(**alice)
    anonymous = initialize()

    def exchanges(session_id: str, **who: str) -> list[httpx.Response]:
        headers = server.headers(session_id, **who)
        return [client.post(server.url, headers=headers, json=rpc(1, "ping")),
                client.get(server.url, headers={**headers, **SSE_ACCEPT}),
                client.delete(server.url, headers=headers)]

    unknown = exchanges("no-such-session", **alice)
    reference = [(r.status_code, r.content, r.headers.get("content-type"), r.headers.get("content-length"))
                 for r in unknown]
    assert all(status == 404 for status, *_ in reference)
    intruders = [
        {"x_test_user": "mallory", "x_test_issuer": "https://idp.example"},  # another subject
        {"x_test_user": "alice", "x_test_issuer": "https://other-idp.example"},  # same subject, other issuer
        {"x_test_user": "alice"},  # no issuer
        {"x_test_user": "alice", "x_test_issuer": "https://idp.example", "x_test_client": "other-app"},
        {},  # anonymous on an authenticated session
    ]
    for who in intruders:
        seen = [(r.status_code, r.content, r.headers.get("content-type"), r.headers.get("content-length"))
                for r in exchanges(owned, **who)]
        assert seen == reference, who
    # An authenticated principal on an anonymous session: the same.
    seen = [(r.status_code, r.content, r.headers.get("content-type"), r.headers.get("content-length"))
            for r in exchanges(anonymous, **alice)]
    assert seen == reference
    # Nothing was ended by the intruders' DELETEs: the owners still use their sessions.
    assert answer(post(client, server, owned, rpc(2, "ping"), **alice), 2)["result"] == {}
    assert answer(post(client, server, anonymous, rpc(3, "ping")), 3)["result"] == {}


# -- E: transport security ---------------------------------------------------------------------------

BAD_ORIGINS = ["http://evil.example.com", "https://evil.example.com:443", "null", "not a url",
               "http://localhost.evil.example.com", "http://127.0.0.1.evil.example.com",
               "http://evil.example.com/localhost", "file://", "file:///etc/passwd", "chrome-extension://abc",
               "http://localhost:3000/path", "http://localhost@evil.example.com", "http://[::1].evil.com",
               "http://", "http://:80", "http://localhost:99999", ""]


@pytest.mark.parametrize("origin", BAD_ORIGINS)
def test_e1_e2_a_bad_origin_is_403_before_session_lookup_and_body_parsing(
        server: HttpServer, client: httpx.Client, session: str, origin: str) -> None:
    for session_id in (None, session, "no-such-session"):
        headers = {**server.headers(session_id), "origin": origin}
        responses = [
            client.post(server.url, headers=headers, content=b"this is not json"),
            client.post(server.url, headers={**headers, "content-type": "text/plain"}, json=rpc(1, "initialize")),
            client.get(server.url, headers={**headers, "accept": "text/html"}),
            client.delete(server.url, headers=headers),
        ]
        for response in responses:
            body = rpc_error(response, 403, -32600)
            assert "Origin" in body["error"]["message"]
            assert "access-control-allow-origin" not in response.headers
    # The DELETEs were refused before anything: the session is alive.
    assert_serving(server, client, session)


@pytest.mark.parametrize("origin", ["http://localhost", "http://localhost:3000", "https://127.0.0.1:8443",
                                    "http://[::1]:8080", "HTTP://LOCALHOST:3000", "http://localhost:3000/"])
def test_e2_loopback_origins_are_allowed_on_a_loopback_bind(server: HttpServer, client: httpx.Client,
                                                            session: str, origin: str) -> None:
    assert answer(post(client, server, session, rpc(1, "ping"), origin=origin), 1)["result"] == {}


def test_e3_requests_without_origin_are_allowed(server: HttpServer, client: httpx.Client) -> None:
    session_id = server.initialize(client)  # server.headers() sends no Origin
    assert answer(post(client, server, session_id, rpc(1, "tools/list")), 1, "tools/list")


@pytest.mark.parametrize(("name", "values"), [
    ("mcp-protocol-version", ["2025-11-25", "2026-07-28"]), ("mcp-session-id", ["<session>", "other"])])
def test_conflicting_mcp_headers_are_a_400_and_repeated_equal_ones_pass(server: HttpServer, client: httpx.Client,
                                                                       session: str, name: str,
                                                                       values: list[str]) -> None:
    # Either value alone would be answered in its own way: with both, none is right.
    values = [session if value == "<session>" else value for value in values]
    headers = [(k, v) for k, v in server.headers(session).items() if k != name]
    body = json.dumps(rpc(1, "ping"))
    response = client.post(server.url, headers=[*headers, *((name, value) for value in values)], content=body)
    assert rpc_error(response, 400, -32600)["error"]["message"].startswith("Bad request: conflicting ")
    same = [*headers, (name, values[0]), (name, values[0])]
    assert answer(client.post(server.url, headers=same, content=body), 1)["result"] == {}


@pytest.mark.parametrize("host", ["evil.example.com", "evil.example.com:8000", "localhost.evil.example.com",
                                  "127.0.0.1.evil.example.com:80", "10.0.0.1", "[::2]:80", "",
                                  "0.0.0.0"])
def test_e4_a_host_header_that_is_not_loopback_is_421(server: HttpServer, client: httpx.Client, session: str,
                                                      host: str) -> None:
    for response in (post(client, server, session, rpc(1, "ping"), host=host),
                     post(client, server, None, rpc(1, "initialize", INIT), host=host),
                     client.get(server.url, headers={**server.headers(session), **SSE_ACCEPT, "host": host})):
        assert 400 <= response.status_code < 500
        if host:  # an empty Host is refused by the HTTP layer already (400)
            rpc_error(response, 421, -32600)
        assert "mcp-session-id" not in response.headers
    for good in (f"localhost:{server.port}", f"127.0.0.1:{server.port}", "localhost", f"[::1]:{server.port}"):
        assert answer(post(client, server, session, rpc(2, "ping"), host=good), 2)


def run_serve(tmp_path: Path, *args: str, config: str = "", plugins: str = "demo",
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os
    config_file = tmp_path / f"e5-{free_port()}.toml"
    config_file.write_text(config, encoding="utf-8")
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("MCPHOST_")}
    full_env.update({"MCPHOST_CONFIG": str(config_file), "MCPHOST_PLUGINS": plugins, **(env or {})})
    return subprocess.run([str(MCPHOST), "serve", "--port", str(free_port()), *args], env=full_env,
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("address", ["0.0.0.0", "::", "192.0.2.10"])
def test_e5_a_non_loopback_bind_without_auth_or_allowed_hosts_refuses_to_start(tmp_path: Path,
                                                                               address: str) -> None:
    result = run_serve(tmp_path, "--host", address)
    assert result.returncode == 1, result
    assert f"refusing to listen on {address} without authentication or allowed_hosts" in result.stderr
    assert "--allow-remote" in result.stderr


@pytest.mark.parametrize("how", ["allow-remote", "allowed_hosts", "auth-plugin"])
def test_e5_a_non_loopback_bind_starts_with_an_opt_in(tmp_path: Path, how: str) -> None:
    args = ["--host", "0.0.0.0"]
    config, plugins, env = "", "demo", None
    if how == "allow-remote":
        args.append("--allow-remote")
    elif how == "allowed_hosts":
        config = '[server]\nallowed_hosts = ["mcp.example.com", "127.0.0.1"]\n'
    else:
        plugins, env = "demo,httpauth", probe_env(tmp_path, {"MCPHOST_ALLOW_ANONYMOUS": "true"})
    server = HttpServer(tmp_path, plugins=plugins, args=args, config=config, env=env)
    try:
        with httpx.Client(timeout=10) as client:
            session_id = server.initialize(client)
            assert answer(post(client, server, session_id, rpc(1, "ping")), 1)
            if how == "allowed_hosts":
                response = post(client, server, session_id, rpc(2, "ping"), host="evil.example.com")
                rpc_error(response, 421, -32600)
                assert answer(post(client, server, session_id, rpc(3, "ping"), host="mcp.example.com"), 3)
            # Not loopback-bound: only same-origin browsers (or allowed_origins) get through.
            response = post(client, server, session_id, rpc(4, "ping"), origin="http://evil.example.com")
            rpc_error(response, 403, -32600)
    finally:
        server.stop()


def test_e6_cors_is_never_opened_to_any_origin(server: HttpServer, client: httpx.Client, session: str) -> None:
    origin = {"origin": "http://localhost:3000"}
    responses = [
        client.options(server.url, headers={**origin, "access-control-request-method": "POST",
                                            "access-control-request-headers": "content-type, mcp-session-id"}),
        post(client, server, session, rpc(1, "ping"), **origin),
        post(client, server, session, {"jsonrpc": "2.0", "method": "notifications/initialized"}, **origin),
        client.get(server.url, headers={**server.headers("nope"), **SSE_ACCEPT, **origin}),
        client.options(f"http://127.0.0.1:{server.port}/other", headers=origin),
    ]
    assert responses[0].status_code == 405
    for response in responses:
        assert response.status_code < 500
        assert not any(name.startswith("access-control-") for name in response.headers), response.headers


def test_e7_sse_responses_carry_the_streaming_headers(server: HttpServer, client: httpx.Client,
                                                      session: str) -> None:
    with client.stream("GET", server.url, headers={**server.headers(session), **SSE_ACCEPT}) as get:
        get_headers = get.headers
    reply = post(client, server, session, rpc(1, "ping"))
    post_headers = reply.headers
    for headers in (get_headers, post_headers):
        assert headers["content-type"] == "text/event-stream"
        assert headers["cache-control"] == "no-cache"
        assert headers["x-accel-buffering"] == "no"
    # An open stream is not framed by length; a reply stream complete when written (the ping's)
    # goes out whole, with its length, as one SSE body that still carries its event id.
    assert "content-length" not in get_headers
    assert "transfer-encoding" not in post_headers
    assert int(post_headers["content-length"]) == len(reply.content)
    assert reply.text.startswith("id: ") and '"id":1' in reply.text


def test_e10_no_response_carries_a_server_header(server: HttpServer, client: httpx.Client, session: str) -> None:
    responses = [
        post(client, server, session, rpc(1, "ping")),
        post(client, server, session, {"jsonrpc": "2.0", "method": "notifications/initialized"}),
        post(client, server, "nope", rpc(1, "ping")),
        client.post(server.url, headers=server.headers(session), content=b"nope"),
        client.put(server.url),
        client.get(f"http://127.0.0.1:{server.port}/other"),
        client.post(f"http://127.0.0.1:{server.port}/probe/body", content=b"{}"),
    ]
    for response in responses:
        assert "server" not in response.headers, response.headers
    raw = raw_exchange(server.port, request_head("POST", server.port, headers={"Content-Length": "1073741824"}))
    assert "server" not in raw.headers
    raw = raw_exchange(server.port, b"GARBAGE\r\n\r\n")
    assert raw.status == 400 and "server" not in raw.headers
