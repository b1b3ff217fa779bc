"""End to end against a real OAuth 2.1 / OpenID Connect authorization server: panva's ``oidc-provider``
(pinned in oidc/package-lock.json) run with node on loopback, issuing client-credentials access tokens
whose ``aud`` is the resource (RFC 8707) the client asked for.

The provider is started by tests/support/oidc.py (installed on first use with ``npm ci``). Without
node, npm or the npm registry these tests fail: they never skip.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import httpx2
import pytest
from jwt_support import ACCEPT, INIT, McphostServer, free_port, initialize, post, result, toml_section
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.oidc import AuthorizationServer, ensure_oidc_provider

CLIENT = ("mcp-client", "mcp-client-secret")
RESOURCE_SERVER = ("mcphost-rs", "mcphost-rs-secret")


@pytest.fixture(scope="module")
def authorization_server() -> Iterator[AuthorizationServer]:
    server = AuthorizationServer(ensure_oidc_provider())
    yield server
    server.stop()


@pytest.fixture
def protected(authorization_server, mcphost_server) -> McphostServer:
    """mcphost with demo and jwt, trusting the authorization server found through discovery."""
    return mcphost_server(toml_section({"issuer": authorization_server.issuer, "audience": "{url}",
                                        "required_scopes": ["mcp:tools"], "allow_insecure": True}))


def test_a_token_for_this_server_lists_and_calls_tools(authorization_server, protected):
    token = authorization_server.token(protected.url)
    session = initialize(protected, token)
    tools = result(post(protected, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, token, session))["tools"]
    assert "echo" in {tool["name"] for tool in tools}
    called = result(post(protected, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                     "params": {"name": "echo", "arguments": {"text": "from the AS"}}},
                         token, session))
    assert called["content"][0]["text"] == "from the AS"


def test_a_token_minted_for_another_resource_is_refused(authorization_server, protected):
    elsewhere = f"http://127.0.0.1:{free_port()}/mcp"
    token = authorization_server.token(elsewhere)
    response = post(protected, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, token)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token"') and "another resource" in challenge
    # And no token at all:
    with httpx.Client(timeout=10) as client:
        bare = client.post(protected.url, headers={"content-type": "application/json", "accept": ACCEPT},
                           json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
    assert bare.status_code == 401 and bare.headers["www-authenticate"].startswith("Bearer")


async def test_the_python_sdk_client_initializes_and_calls_a_tool_with_a_token(authorization_server, protected):
    token = authorization_server.token(protected.url)
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30))
    client = Client(streamable_http_client(protected.url, http_client=http), mode="legacy", read_timeout_seconds=30)
    async with http, client:
        assert client.server_info is not None and client.server_info.name == "mcphost"
        assert "echo" in {tool.name for tool in (await client.list_tools()).tools}
        called = await client.call_tool("echo", {"text": "sdk with a token"})
        assert called.content[0].text == "sdk with a token"


def test_opaque_tokens_are_introspected_and_revocation_takes_effect(authorization_server, mcphost_server):
    server = mcphost_server(toml_section({
        "issuer": authorization_server.issuer, "audience": "{url}", "allow_insecure": True,
        "introspection_endpoint": authorization_server.issuer + "/token/introspection",
        "client_id": RESOURCE_SERVER[0], "client_secret": RESOURCE_SERVER[1]}), path="/opaque-mcp")
    token = authorization_server.token(server.url)
    assert token.count(".") == 0  # opaque, as the authorization server was told for this resource
    session = initialize(server, token)
    called = result(post(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                  "params": {"name": "echo", "arguments": {"text": "opaque"}}}, token, session))
    assert called["content"][0]["text"] == "opaque"
    # An opaque token for another resource is active, but not for this server.
    other = authorization_server.token(f"http://127.0.0.1:{free_port()}/opaque-mcp")
    assert post(server, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, other).status_code == 401
    # Revoked at the authorization server: the next request is refused.
    with httpx.Client(timeout=10) as client:
        assert client.post(authorization_server.issuer + "/token/revocation", auth=CLIENT,
                           data={"token": token}).status_code == 200
    response = post(server, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, token, session)
    assert response.status_code == 401 and "not active" in response.headers["www-authenticate"]
