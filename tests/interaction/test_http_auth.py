"""Authentication over HTTP (RELIABILITY rows D1, D5-D11), against a real ``mcphost serve``.

The ``httpbearer`` test plugin maps static bearer tokens to principals and declares scoped
tools, prompts, resources and a template. Every answer is checked on the wire: the status, the
``WWW-Authenticate`` challenge (parsed, not substring-matched), the JSON-RPC body (against the
official schema when it carries an id), for both the session era and 2026-07-28.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcphost.protocol.auth import parse_challenge
from tests.support.http_plugins.bearer import ISSUER, OPT_IN, TOKENS
from tests.support.http_plugins.harness import check_wire, probe_env, raw_exchange, request_head
from tests.support.http_support import INIT_PARAMS, HttpServer, sse_messages
from tests.support.wire import WireValidator

MODERN = "2026-07-28"
MODERN_WIRE = WireValidator(MODERN)
ALICE, ALICE_WRITE, BOB, CAROL, ROOT = list(TOKENS)
STATE_KEY = "auth-tests-state-key-0123456789ab"
PRM_PATH = "/.well-known/oauth-protected-resource"


# -- helpers ---------------------------------------------------------------------------------------------

def bearer(token: str | None) -> dict[str, str]:
    return {} if token is None else {"authorization": f"Bearer {token}"}


def rpc(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if request_id is not None:
        message["id"] = request_id
    if params is not None:
        message["params"] = params
    return message


def challenge(response: httpx.Response) -> dict[str, str]:
    """The one Bearer challenge of a response, as a dict of its parameters."""
    values = response.headers.get_list("www-authenticate")
    assert len(values) == 1, values
    scheme, params = parse_challenge(values[0])
    assert scheme == "Bearer", values
    # What the parser read is all there is: re-reading the raw text finds no smuggled parameter.
    assert len(params) == values[0].count("=") - sum(v.count("=") for _, v in params), values
    return dict(params)


def error_body(response: httpx.Response, request_id: Any = None) -> dict[str, Any]:
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == request_id, body
    assert isinstance(body["error"]["code"], int) and body["error"]["message"], body
    if request_id is not None:
        check_wire([body])
    return body


def modern(method: str, params: dict[str, Any] | None = None, token: str | None = None, *,
           request_id: Any = 1) -> tuple[dict[str, Any], dict[str, str]]:
    params = dict(params or {})
    params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                       "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": MODERN, "mcp-method": method, **bearer(token)}
    name = params.get("name", params.get("uri"))
    if isinstance(name, str):
        headers["mcp-name"] = name
    return rpc(request_id, method, params), headers


def modern_post(client: httpx.Client, server: HttpServer, method: str, params: dict[str, Any] | None = None,
                token: str | None = None, *, request_id: Any = 1) -> httpx.Response:
    message, headers = modern(method, params, token, request_id=request_id)
    return client.post(server.url, headers=headers, content=json.dumps(message))


def modern_reply(response: httpx.Response, method: str) -> dict[str, Any]:
    assert response.status_code == 200, (response.status_code, response.text)
    found = sse_messages(response.text) if response.headers["content-type"].startswith("text/event-stream") \
        else [response.json()]
    for message in found:
        MODERN_WIRE.check(message, request_method=method)
    return found[-1]


def legacy_reply(response: httpx.Response, request_id: Any, method: str) -> dict[str, Any]:
    assert response.status_code == 200, (response.status_code, response.text)
    messages = sse_messages(response.text)
    check_wire(messages, method)
    [reply] = [m for m in messages if m.get("id") == request_id]
    return reply


class Legacy:
    """A session-era client of one principal (the token may change between requests)."""

    def __init__(self, client: httpx.Client, server: HttpServer, token: str | None) -> None:
        self.client, self.server, self.token = client, server, token
        response = client.post(server.url, headers=server.headers(**bearer(token)),
                               json=rpc(1, "initialize", INIT_PARAMS))
        assert response.status_code == 200, (response.status_code, response.text)
        self.session_id = response.headers["mcp-session-id"]
        self.post(rpc(None, "notifications/initialized"))
        self.ids = iter(range(2, 1_000_000))

    def post(self, message: dict[str, Any], token: str | bool | None = True, **headers: str) -> httpx.Response:
        token = self.token if token is True else token
        return self.client.post(self.server.url, json=message,
                                headers={**self.server.headers(self.session_id, **headers), **bearer(token)})

    def call(self, method: str, params: dict[str, Any] | None = None, token: str | bool | None = True
             ) -> tuple[httpx.Response, int]:
        request_id = next(self.ids)
        return self.post(rpc(request_id, method, params), token), request_id

    def result(self, method: str, params: dict[str, Any] | None = None, token: str | bool | None = True
               ) -> dict[str, Any]:
        response, request_id = self.call(method, params, token)
        reply = legacy_reply(response, request_id, method)
        assert "result" in reply, reply
        return reply["result"]


def tool_text(result: dict[str, Any]) -> str:
    assert not result.get("isError"), result
    return result["content"][0]["text"]


# -- fixtures --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("http-auth")


def start(root: Path, **env: str) -> HttpServer:
    return HttpServer(root, plugins="httpbearer", env=probe_env(root, {"MCPHOST_STATE_KEYS": STATE_KEY, **env}))


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[HttpServer]:
    server = start(root)
    yield server
    server.stop()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as client:
        yield client


def prm_url(server: HttpServer) -> str:
    return f"http://127.0.0.1:{server.port}{PRM_PATH}/mcp"


# -- D1: no credentials, every kind of request ---------------------------------------------------------------

def _requests(server: HttpServer, session_id: str) -> list[tuple[str, dict[str, str], bytes]]:
    legacy = server.headers(session_id)
    message, modern_headers = modern("tools/call", {"name": "whoami", "arguments": {}})
    notification, notification_headers = modern("notifications/cancelled", {"requestId": 1}, request_id=None)
    return [
        ("POST", server.headers(), json.dumps(rpc(1, "initialize", INIT_PARAMS)).encode()),
        ("POST", legacy, json.dumps(rpc(2, "tools/call", {"name": "whoami", "arguments": {}})).encode()),
        ("POST", legacy, json.dumps(rpc(None, "notifications/initialized")).encode()),
        ("POST", legacy, b"this is not json"),
        ("GET", {"accept": "text/event-stream", "mcp-session-id": session_id}, b""),
        ("DELETE", {"mcp-session-id": session_id}, b""),
        ("POST", modern_headers, json.dumps(message).encode()),
        ("POST", notification_headers, json.dumps(notification).encode()),
    ]


def test_d1_every_request_without_credentials_is_challenged(server, client):
    alice = Legacy(client, server, ALICE)
    for method, headers, body in _requests(server, alice.session_id):
        response = client.request(method, server.url, headers=headers, content=body)
        assert response.status_code == 401, (method, headers, response.status_code, response.text)
        assert challenge(response) == {"resource_metadata": prm_url(server), "scope": "files:read"}, method
        assert error_body(response)["error"]["code"] == -32600
    # Alice's session is untouched by all that: her next request works.
    assert json.loads(tool_text(alice.result("tools/call", {"name": "whoami"})))["subject"] == "alice"


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_d1_an_unknown_token_is_invalid_token_with_the_same_pointers(server, client, era):
    if era == "legacy":
        response = client.post(server.url, headers=server.headers(**bearer("tok-nobody")),
                               json=rpc(1, "initialize", INIT_PARAMS))
    else:
        response = modern_post(client, server, "tools/list", token="tok-nobody")
    assert response.status_code == 401
    assert challenge(response) == {"error": "invalid_token", "error_description": "Unknown token",
                                   "resource_metadata": prm_url(server), "scope": "files:read"}
    error_body(response)


def test_d1_a_session_of_alice_presented_without_a_token_is_401_not_404(server, client):
    alice = Legacy(client, server, ALICE)
    response, _ = alice.call("tools/list", token=None)
    assert response.status_code == 401
    assert alice.result("tools/list")["tools"]


# -- D5: insufficient scope ------------------------------------------------------------------------------------

def test_d5_legacy_a_tool_needing_more_scope_is_403_with_all_its_scopes_in_one_challenge(server, client):
    alice = Legacy(client, server, ALICE)
    assert tool_text(alice.result("tools/call", {"name": "read_file", "arguments": {"name": "a"}})) == \
        "contents of a"
    response, request_id = alice.call("tools/call", {"name": "write_file", "arguments": {"name": "a", "text": "b"}})
    assert response.status_code == 403, response.text
    assert challenge(response) == {
        "error": "insufficient_scope", "scope": "files:read files:write", "resource_metadata": prm_url(server),
        "error_description": "Insufficient scope: this operation needs files:read files:write"}
    assert "needs files:read files:write" in error_body(response, request_id)["error"]["message"]
    # Alice comes back with a wider token (same identity): same session, now allowed.
    result = alice.result("tools/call", {"name": "write_file", "arguments": {"name": "a", "text": "bc"}},
                          token=ALICE_WRITE)
    assert tool_text(result) == "wrote 2 characters to a"
    assert json.loads(tool_text(alice.result("tools/call", {"name": "whoami"}, token=ALICE_WRITE)))["scopes"] == [
        "files:read", "files:write"]


def test_d5_scopes_are_hierarchical(server, client):
    bob = Legacy(client, server, BOB)  # holds "files": implies files:read and files:write
    assert tool_text(bob.result("tools/call", {"name": "write_file", "arguments": {"name": "x", "text": ""}})) == \
        "wrote 0 characters to x"
    assert bob.result("resources/read", {"uri": "files://secret/plans"})["contents"][0]["text"] == "secret plans"
    response, _ = bob.call("tools/call", {"name": "shutdown_everything"})
    assert response.status_code == 403 and challenge(response)["scope"] == "admin"
    root = Legacy(client, server, ROOT)
    assert tool_text(root.result("tools/call", {"name": "shutdown_everything"})) == "done"


@pytest.mark.parametrize(("method", "params", "token", "scope"), [
    ("prompts/get", {"name": "audit_prompt"}, BOB, "admin"),
    ("resources/read", {"uri": "files://readme"}, CAROL, "files:read"),
    ("resources/read", {"uri": "files://secret/x"}, ALICE, "files:write"),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": "audit_prompt"},
                             "argument": {"name": "x", "value": ""}}, BOB, "admin"),
])
def test_d5_prompts_resources_and_templates_are_guarded_in_both_eras(server, client, method, params, token, scope):
    legacy = Legacy(client, server, token)
    response, request_id = legacy.call(method, params)
    assert response.status_code == 403, response.text
    assert challenge(response)["scope"] == scope
    error_body(response, request_id)
    response = modern_post(client, server, method, params, token, request_id="m-1")
    assert response.status_code == 403, response.text
    assert challenge(response) == {"error": "insufficient_scope", "scope": scope,
                                   "resource_metadata": prm_url(server),
                                   "error_description": f"Insufficient scope: this operation needs {scope}"}
    body = response.json()
    MODERN_WIRE.check(body)
    assert body["id"] == "m-1"


def test_d5_modern_tool_call_refused_then_allowed_with_a_wider_token(server, client):
    arguments = {"name": "write_file", "arguments": {"name": "n", "text": "t"}}
    response = modern_post(client, server, "tools/call", arguments, ALICE)
    assert response.status_code == 403
    assert challenge(response)["scope"] == "files:read files:write"
    reply = modern_reply(modern_post(client, server, "tools/call", arguments, ALICE_WRITE), "tools/call")
    assert reply["result"]["content"][0]["text"] == "wrote 1 characters to n"


# -- list filtering ----------------------------------------------------------------------------------------------

EXPECTED_LISTS = {
    CAROL: ({"whoami", "ask_name", "call_downstream"}, {"open_prompt"}, {"files://public"}, set()),
    ALICE: ({"whoami", "ask_name", "call_downstream", "read_file"}, {"open_prompt"},
            {"files://public", "files://readme"}, set()),
    BOB: ({"whoami", "ask_name", "call_downstream", "read_file", "write_file"}, {"open_prompt"},
          {"files://public", "files://readme"}, {"files://secret/{name}"}),
    ROOT: ({"whoami", "ask_name", "call_downstream", "read_file", "write_file", "shutdown_everything"},
           {"open_prompt", "audit_prompt"}, {"files://public", "files://readme"}, {"files://secret/{name}"}),
}
LISTS = [("tools/list", "tools", "name"), ("prompts/list", "prompts", "name"),
         ("resources/list", "resources", "uri"), ("resources/templates/list", "resourceTemplates", "uriTemplate")]


def test_lists_show_each_caller_what_its_token_allows_legacy(server, client):
    sessions = {token: Legacy(client, server, token) for token in EXPECTED_LISTS}
    for _ in range(2):  # interleaved, twice: no caller's filtered list reaches another
        for token, expected in EXPECTED_LISTS.items():
            for (method, key, field), wanted in zip(LISTS, expected, strict=True):
                got = {item[field] for item in sessions[token].result(method)[key]}
                assert got == wanted, (token, method, got)


def test_lists_show_each_caller_what_its_token_allows_modern_and_are_private(server, client):
    for _ in range(2):
        for token, expected in EXPECTED_LISTS.items():
            for (method, key, field), wanted in zip(LISTS, expected, strict=True):
                reply = modern_reply(modern_post(client, server, method, {}, token), method)
                assert {item[field] for item in reply["result"][key]} == wanted, (token, method)
                assert reply["result"]["cacheScope"] == "private", reply


# -- D6, D7: where and how the credentials come ------------------------------------------------------------------

def test_d6_a_token_in_the_query_string_is_ignored(server, client):
    response = client.post(f"{server.url}?access_token={ALICE}", headers=server.headers(),
                           json=rpc(1, "initialize", INIT_PARAMS))
    assert response.status_code == 401
    assert "error" not in challenge(response)  # as if no credentials were sent at all


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "BeArEr"])
def test_d7_the_scheme_is_case_insensitive(server, client, scheme):
    response = client.post(server.url, headers={**server.headers(), "authorization": f"{scheme} {ALICE}"},
                           json=rpc(1, "initialize", INIT_PARAMS))
    assert response.status_code == 200, response.text
    assert response.headers["mcp-session-id"]


@pytest.mark.parametrize("headers", [
    [("authorization", f"Bearer {ALICE}"), ("authorization", f"Bearer {BOB}")],
    [("authorization", f"Bearer {ALICE}, Bearer {BOB}")],
    [("authorization", f"Bearer {ALICE} {BOB}")],
])
def test_d7_duplicate_or_joined_credentials_are_a_400(server, client, headers):
    sent = httpx.Headers([("content-type", "application/json"), ("accept", "application/json, text/event-stream"),
                          *headers])
    response = client.post(server.url, headers=sent, content=json.dumps(rpc(1, "initialize", INIT_PARAMS)))
    assert response.status_code == 400, response.text
    params = challenge(response)
    assert params["error"] == "invalid_request" and params["resource_metadata"] == prm_url(server)
    error_body(response)


@pytest.mark.parametrize("token", ["evil", "evil-raw"])
def test_d7_plugin_descriptions_are_escaped_and_cannot_inject_headers(server, client, token):
    response = client.post(server.url, headers=server.headers(**bearer(token)),
                           json=rpc(1, "initialize", INIT_PARAMS))
    assert response.status_code == 401
    assert "x-injected" not in response.headers
    raw = response.headers["www-authenticate"]
    assert "\r" not in raw and "\n" not in raw
    params = challenge(response)
    assert params["error"] == "invalid_token" and params["resource_metadata"] == prm_url(server)
    if token == "evil":  # the description survives, escaped: it reads back exactly, minus CR/LF
        assert params["error_description"] == 'bad "token"X-Injected: yes'
        assert r'error_description="bad \"token\"X-Injected: yes"' in raw


# -- D8: the identity provider is down ----------------------------------------------------------------------------

@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_d8_a_failing_auth_hook_is_503_without_a_challenge(server, client, era):
    if era == "legacy":
        response = client.post(server.url, headers=server.headers(**bearer("boom")),
                               json=rpc(1, "initialize", INIT_PARAMS))
    else:
        response = modern_post(client, server, "tools/list", token="boom")
    assert response.status_code == 503
    assert "www-authenticate" not in response.headers
    assert int(response.headers["retry-after"]) > 0
    assert "retry later" in error_body(response)["error"]["message"]
    assert "identity provider unreachable" not in response.text  # the exception stays in the log
    assert "identity provider unreachable" in server.log()


# -- D9: protected resource metadata ------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [f"{PRM_PATH}/mcp", PRM_PATH])
def test_d9_metadata_is_served_at_the_path_suffixed_and_root_urls(server, client, path):
    response = client.get(f"http://127.0.0.1:{server.port}{path}")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.headers["access-control-allow-origin"] == "*"
    assert response.json() == {"resource": server.url, "authorization_servers": [ISSUER],
                               "scopes_supported": ["files:read"], "bearer_methods_supported": ["header"],
                               "resource_name": "Test files"}
    head = client.head(f"http://127.0.0.1:{server.port}{path}")
    assert head.status_code == 200 and head.content == b""
    preflight = client.options(f"http://127.0.0.1:{server.port}{path}",
                               headers={"origin": "https://app.example", "access-control-request-method": "GET"})
    assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == "*"
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        response = client.request(method, f"http://127.0.0.1:{server.port}{path}", content=b"{}")
        assert response.status_code == 405, method
        assert response.headers["allow"] == "GET, HEAD, OPTIONS"
        assert response.json()["error"]


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_d9_the_body_limit_holds_on_the_metadata_routes(server, method):
    head = request_head(method, server.port, f"{PRM_PATH}/mcp", {"Content-Length": "1073741824"})
    assert raw_exchange(server.port, head).status == 413


def test_d9_other_well_known_paths_are_not_metadata(server, client):
    for path in (f"{PRM_PATH}/other", f"{PRM_PATH}/mcp/x", "/.well-known/oauth-authorization-server"):
        assert client.get(f"http://127.0.0.1:{server.port}{path}").status_code == 404, path


def test_d9_the_configured_resource_url_is_canonical_everywhere(root, client):
    server = start(root, MCPHOST_RESOURCE_URL="HTTPS://MCP.Example.COM:443/public/mcp/")
    try:
        canonical = "https://mcp.example.com/public/mcp"
        for path in (f"{PRM_PATH}/mcp", f"{PRM_PATH}/public/mcp", PRM_PATH):
            response = client.get(f"http://127.0.0.1:{server.port}{path}")
            assert response.status_code == 200, path
            assert response.json()["resource"] == canonical
        response = client.post(server.url, headers=server.headers(), json=rpc(1, "initialize", INIT_PARAMS))
        assert challenge(response)["resource_metadata"] == f"https://mcp.example.com{PRM_PATH}/public/mcp"
        reply = modern_reply(modern_post(client, server, "tools/call", {"name": "whoami", "arguments": {}}, ALICE),
                             "tools/call")
        assert json.loads(reply["result"]["content"][0]["text"])["audience"] == canonical
        assert "resource_url is not set" not in server.log()
    finally:
        server.stop()


def test_d9_without_metadata_nothing_points_to_it(root, client):
    server = start(root, MCPHOST_TEST_NO_PRM="1")
    try:
        for path in (f"{PRM_PATH}/mcp", PRM_PATH):
            assert client.get(f"http://127.0.0.1:{server.port}{path}").status_code == 404
        response = client.post(server.url, headers=server.headers(), json=rpc(1, "initialize", INIT_PARAMS))
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        # Without resource_url the operator is told, once, at startup.
        assert server.log().count("[server] resource_url is not set") == 1
    finally:
        server.stop()


# -- D10: no token passthrough ---------------------------------------------------------------------------------------

class _Downstream(BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:
        type(self).seen.append({k.lower(): v for k, v in self.headers.items()})
        body = b"downstream ok"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def downstream() -> Iterator[tuple[str, list[dict[str, str]]]]:
    httpd = HTTPServer(("127.0.0.1", 0), _Downstream)
    _Downstream.seen = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/api", _Downstream.seen
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_d10_tools_never_see_the_inbound_token(server, client, downstream, era):
    url, seen = downstream
    if era == "legacy":
        alice = Legacy(client, server, ALICE)
        who = json.loads(tool_text(alice.result("tools/call", {"name": "whoami"})))
        called = tool_text(alice.result("tools/call", {"name": "call_downstream", "arguments": {"url": url}}))
    else:
        reply = modern_reply(modern_post(client, server, "tools/call", {"name": "whoami", "arguments": {}}, ALICE),
                             "tools/call")
        who = json.loads(reply["result"]["content"][0]["text"])
        reply = modern_reply(modern_post(client, server, "tools/call",
                                         {"name": "call_downstream", "arguments": {"url": url}}, ALICE), "tools/call")
        called = reply["result"]["content"][0]["text"]
    assert who["subject"] == "alice" and who["token"] is None
    assert who["audience"] == server.url  # what the plugin learnt from host.resource_server
    # Principal, session state and the headers a connect hook stashed: no credential anywhere.
    assert ALICE not in who["visible"] and "authorization" not in who["visible"].lower()
    assert "content-type" in who["visible"]  # the headers did get there, just not that one
    assert called == "downstream ok"
    assert seen and all("authorization" not in headers for headers in seen)
    assert ALICE not in json.dumps(seen)


def test_d10_an_auth_plugin_can_opt_in_to_hand_the_token_to_tools(server, client):
    reply = modern_reply(modern_post(client, server, "tools/call", {"name": "whoami", "arguments": {}}, OPT_IN),
                         "tools/call")
    who = json.loads(reply["result"]["content"][0]["text"])
    assert who["subject"] == "opted" and who["token"] == OPT_IN
    assert "authorization" not in who["visible"].lower()  # still not in the headers
    assert OPT_IN not in server.log()


# -- D11: many principals at once -------------------------------------------------------------------------------------

async def _concurrently(server: HttpServer, era: str, count: int = 200) -> list[tuple[str, str]]:
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=50)) as client:
        sessions: dict[str, str] = {}
        if era == "legacy":
            for token in (ALICE, BOB):
                response = await client.post(server.url, headers=server.headers(**bearer(token)),
                                             json=rpc(1, "initialize", INIT_PARAMS))
                sessions[token] = response.headers["mcp-session-id"]

        async def one(index: int) -> tuple[str, str]:
            token = (ALICE, BOB)[index % 2]
            params = {"name": "whoami", "arguments": {"delay_ms": index % 7}}
            if era == "legacy":
                response = await client.post(server.url, json=rpc(index + 10, "tools/call", params),
                                             headers={**server.headers(sessions[token]), **bearer(token)})
                reply = legacy_reply(response, index + 10, "tools/call")
            else:
                message, headers = modern("tools/call", params, token, request_id=1)  # every request is id 1
                reply = modern_reply(await client.post(server.url, headers=headers, content=json.dumps(message)),
                                     "tools/call")
            who = json.loads(reply["result"]["content"][0]["text"])
            return TOKENS[token].subject, who["subject"]

        return await asyncio.gather(*(one(i) for i in range(count)))


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_d11_concurrent_requests_of_two_principals_each_see_their_own(server, era):
    outcomes = asyncio.run(_concurrently(server, era))
    assert len(outcomes) == 200
    assert all(expected == seen for expected, seen in outcomes), [o for o in outcomes if o[0] != o[1]][:5]


# -- sessions and sealed state are bound to the principal -----------------------------------------------------------

def test_a_session_is_invisible_to_another_principal(server, client):
    alice = Legacy(client, server, ALICE)
    for method, body, request_id in (("POST", json.dumps(rpc(5, "tools/list")).encode(), 5), ("DELETE", b"", None)):
        response = client.request(method, server.url, content=body,
                                  headers={**server.headers(alice.session_id), **bearer(BOB)})
        assert response.status_code == 404, (method, response.text)
        assert error_body(response, request_id)["error"]["message"] == "Session not found"
    get = client.get(server.url, headers={"accept": "text/event-stream", "mcp-session-id": alice.session_id,
                                          **bearer(BOB)})
    assert get.status_code == 404
    assert alice.result("tools/list")["tools"]  # still alice's, still alive


def test_sealed_request_state_minted_for_one_principal_is_refused_for_another(server, client):
    first = modern_reply(modern_post(client, server, "tools/call", {"name": "ask_name", "arguments": {}}, ALICE),
                         "tools/call")
    state = first["result"]["requestState"]
    answer = {"name": {"action": "accept", "content": {"name": "Alice"}}}
    retry = {"name": "ask_name", "arguments": {}, "requestState": state, "inputResponses": answer}
    bob = modern_reply(modern_post(client, server, "tools/call", retry, BOB), "tools/call")
    garbage = modern_reply(modern_post(client, server, "tools/call", {**retry, "requestState": "x" * 40}, BOB),
                           "tools/call")
    assert bob["error"] == garbage["error"] and bob["error"]["code"] == -32602, bob
    ok = modern_reply(modern_post(client, server, "tools/call", retry, ALICE_WRITE), "tools/call")  # same identity
    assert ok["result"]["content"][0]["text"] == "Hello, Alice!", ok


# -- anonymous mode ----------------------------------------------------------------------------------------------------

def test_allow_anonymous_serves_unauthenticated_callers_without_scopes(root, client):
    server = start(root, MCPHOST_ALLOW_ANONYMOUS="true")
    try:
        anonymous = Legacy(client, server, None)
        assert {t["name"] for t in anonymous.result("tools/list")["tools"]} == EXPECTED_LISTS[CAROL][0]
        response, _ = anonymous.call("tools/call", {"name": "read_file", "arguments": {"name": "a"}})
        assert response.status_code == 403 and challenge(response)["scope"] == "files:read"
        who = json.loads(tool_text(anonymous.result("tools/call", {"name": "whoami"})))
        assert who["subject"] is None
        # A bad token is still refused: anonymous means "no credentials", not "wrong ones".
        response = modern_post(client, server, "tools/list", token="tok-nobody")
        assert response.status_code == 401 and challenge(response)["error"] == "invalid_token"
        reply = modern_reply(modern_post(client, server, "tools/list"), "tools/list")
        assert reply["result"]["cacheScope"] == "private"  # the list depends on who asks
    finally:
        server.stop()


# -- the official Python SDK client ------------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
@pytest.mark.parametrize(("mode", "revision"), [("legacy", "2025-11-25"), ("auto", MODERN)])
async def test_the_python_sdk_client_with_a_bearer_header(server, mode, revision):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from tests.support.sdk_support import ClientSide, RecordingTransport

    recorder, side = RecordingTransport(), ClientSide()
    http = httpx2.AsyncClient(transport=recorder, headers={"Authorization": f"Bearer {ALICE}"},
                              timeout=httpx2.Timeout(30))
    async with http, side.client(streamable_http_client(server.url, http_client=http), mode) as sdk:
        assert sdk.protocol_version == revision
        assert sdk.server_info is not None
        tools = {tool.name for tool in (await sdk.list_tools()).tools}
        assert tools == EXPECTED_LISTS[ALICE][0]
        result = await sdk.call_tool("read_file", {"name": "notes"})
        assert result.content[0].text == "contents of notes"
        who = json.loads((await sdk.call_tool("whoami", {})).content[0].text)
        assert who["subject"] == "alice"
    assert all(e.status in (200, 202, 204) for e in recorder.exchanges), [(e.method, e.status)
                                                                          for e in recorder.exchanges]
    assert all(e.request_headers.get("authorization") == f"Bearer {ALICE}" for e in recorder.exchanges)
    assert recorder.validate(revision) > 0


# -- stdio: the local user is trusted -----------------------------------------------------------------------------

def test_over_stdio_no_auth_hook_runs_and_scoped_records_are_available(root, stdio_server):
    env = probe_env(root)
    server = stdio_server(env={"PYTHONPATH": env["PYTHONPATH"], "MCPHOST_PLUGINS": "httpbearer"})
    server.initialize()
    names = {tool["name"] for tool in server.result("tools/list")["tools"]}
    assert names == EXPECTED_LISTS[ROOT][0]
    result = server.result("tools/call", {"name": "write_file", "arguments": {"name": "a", "text": "xy"}})
    assert tool_text(result) == "wrote 2 characters to a"
    who = json.loads(tool_text(server.result("tools/call", {"name": "whoami", "arguments": {}})))
    assert who["subject"] is None and who["token"] is None
    modern_call = {"name": "shutdown_everything", "arguments": {},
                   "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                             "io.modelcontextprotocol/clientCapabilities": {}}}
    assert tool_text(server.result("tools/call", modern_call)) == "done"
    server.assert_serving()
