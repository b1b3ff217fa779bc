"""A real ``mcphost serve`` with the demo and jwt plugins, driven over HTTP with real tokens; the issuer's
keys come from the loopback stub in this process."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from jwt_support import (
    ACCEPT,
    INIT,
    Idp,
    Key,
    McphostServer,
    claims_for,
    initialize,
    post,
    result,
    start_idp,
    toml_section,
)

from mcphost.testing import app_client

MODERN = "2026-07-28"


def config(idp: Idp, **extra: Any) -> str:
    return toml_section({"issuer": idp.issuer, "audience": "{url}", "jwks_uri": idp.url + "/jwks",
                         "allow_insecure": True, "jwks_min_refresh_seconds": 0, "timeout": 8, **extra})


def hmac_confused(key: Key, claims: dict[str, Any]) -> str:
    pem = key.private.public_key().public_bytes(serialization.Encoding.PEM,
                                                serialization.PublicFormat.SubjectPublicKeyInfo)

    def b64(data: bytes) -> bytes:
        return base64.urlsafe_b64encode(data).rstrip(b"=")

    signing_input = b64(json.dumps({"alg": "HS256", "kid": key.kid}).encode()) + b"." + b64(json.dumps(claims).encode())
    return (signing_input + b"." + b64(hmac.new(pem, signing_input, hashlib.sha256).digest())).decode()


@pytest.fixture(scope="module")
def shared(rsa_key: Key, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Idp, McphostServer]]:
    """One stub and one server for the tests that only read (server starts cost about a second each)."""
    stub, stub_server = start_idp()
    stub.serve_jwks(rsa_key)
    server = McphostServer(tmp_path_factory.mktemp("served"), config(stub))
    yield stub, server
    server.stop()
    stub_server.shutdown()
    stub_server.server_close()


@pytest.fixture
def served(shared: tuple[Idp, McphostServer]) -> McphostServer:
    return shared[1]


@pytest.fixture
def issuer(shared: tuple[Idp, McphostServer]) -> str:
    return shared[0].issuer


def test_a_valid_token_initializes_lists_and_calls_tools(served, issuer, rsa_key):
    token = rsa_key.sign(claims_for(issuer, audience=served.url))
    session = initialize(served, token)
    tools = result(post(served, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, token, session))["tools"]
    assert {"echo", "progress"} <= {tool["name"] for tool in tools}
    called = result(post(served, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                  "params": {"name": "echo", "arguments": {"text": "signed"}}}, token, session))
    assert called["content"] == [{"type": "text", "text": "signed"}]


def test_no_token_gets_401_with_a_bearer_challenge(served):
    response = post(served, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"]["code"] == -32600
    # A token in the query string is not a token.
    with httpx.Client(timeout=10) as client:
        response = client.post(served.url + "?access_token=x", headers={"content-type": "application/json",
                                                                          "accept": ACCEPT},
                               content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                   "params": INIT}))
    assert response.status_code == 401


@pytest.mark.parametrize("kind", ["expired", "not-yet-valid", "wrong-issuer", "wrong-audience", "bad-signature",
                                  "alg-none", "hmac-confusion", "no-exp", "garbage", "unknown-kid"])
def test_each_bad_token_gets_401_invalid_token(served, issuer, rsa_key, other_rsa_key, kind):
    now = int(time.time())
    good = claims_for(issuer, audience=served.url)
    tokens = {
        "expired": lambda: rsa_key.sign({**good, "exp": now - 3600}),
        "not-yet-valid": lambda: rsa_key.sign({**good, "nbf": now + 3600}),
        "wrong-issuer": lambda: rsa_key.sign({**good, "iss": "https://evil.test"}),
        "wrong-audience": lambda: rsa_key.sign({**good, "aud": "http://127.0.0.1:1/mcp"}),
        "bad-signature": lambda: Key(other_rsa_key.private, rsa_key.kid, "RS256").sign(good),
        "alg-none": lambda: jwt.encode(good, None, algorithm="none"),
        "hmac-confusion": lambda: hmac_confused(rsa_key, good),
        "no-exp": lambda: rsa_key.sign({k: v for k, v in good.items() if k != "exp"}),
        "garbage": lambda: "definitely-not-a-jwt",
        "unknown-kid": lambda: other_rsa_key.sign(good),
    }
    token = tokens[kind]()
    response = post(served, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, token)
    assert response.status_code == 401, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token", '), challenge
    assert 'error_description="' in challenge, challenge
    assert f'resource_metadata="{served.url.rsplit("/mcp", 1)[0]}/.well-known/oauth-protected-resource/mcp"' \
        in challenge, challenge  # added by the host
    assert token not in response.text and token not in challenge


def test_a_token_for_another_principal_cannot_use_a_session(served, issuer, rsa_key):
    session = initialize(served, rsa_key.sign(claims_for(issuer, audience=served.url)))
    other = rsa_key.sign(claims_for(issuer, audience=served.url, sub="someone-else"))
    assert post(served, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, other, session).status_code == 404
    # Without a token: 401 with the challenge (authentication runs before the session lookup).
    missing = post(served, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, None, session)
    assert missing.status_code == 401
    assert 'resource_metadata="' in missing.headers["www-authenticate"]


def test_the_2026_revision_is_authenticated_too(served, issuer, rsa_key):
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"text": "modern"}, "_meta": meta}}
    headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "echo"}
    assert post(served, message, **headers).status_code == 401
    token = rsa_key.sign(claims_for(issuer, audience=served.url))
    assert result(post(served, message, token, **headers))["content"][0]["text"] == "modern"


IN_PROCESS = "http://127.0.0.1:8000"  # app_client's base URL: the audience of the tests served in process


def in_process(idp: Idp, **extra: Any) -> dict[str, Any]:
    """The config of :func:`config` as a mapping for ``app_client`` (the demo and jwt plugins)."""
    jwt_section = {"issuer": idp.issuer, "audience": IN_PROCESS + "/mcp", "jwks_uri": idp.url + "/jwks",
                   "allow_insecure": True, "jwks_min_refresh_seconds": 0, "timeout": 8, **extra}
    return {"server": {"log_level": "warning"}, "plugins": {"allow": ["demo", "jwt"], "jwt": jwt_section}}


async def app_post(client: httpx.AsyncClient, message: dict[str, Any], token: str | None = None,
                   session: str | None = None) -> httpx.Response:
    """:func:`jwt_support.post`, through an in-process ``app_client``."""
    sent = {"content-type": "application/json", "accept": ACCEPT}
    if token is not None:
        sent["authorization"] = f"Bearer {token}"
    if session is not None:
        sent["mcp-session-id"] = session
    return await client.post("/mcp", headers=sent, content=json.dumps(message))


async def test_insufficient_scope_gets_403(idp, rsa_key):
    """In process: plain requests; the identity provider stub is a real HTTP server."""
    idp.serve_jwks(rsa_key)
    async with app_client(in_process(idp, required_scopes=["mcp:tools", "mcp:call"]), base_url=IN_PROCESS) as client:
        token = rsa_key.sign(claims_for(idp.issuer, audience=IN_PROCESS + "/mcp", scope="mcp:tools"))
        response = await app_post(client, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, token)
        assert response.status_code == 403
        assert response.headers["www-authenticate"].startswith(
            'Bearer error="insufficient_scope", scope="mcp:call mcp:tools"')
        enough = rsa_key.sign(claims_for(idp.issuer, audience=IN_PROCESS + "/mcp", scope="mcp:call mcp:tools"))
        response = await app_post(client, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, enough)
        result(response)
        session = response.headers["mcp-session-id"]
        initialized = await app_post(client, {"jsonrpc": "2.0", "method": "notifications/initialized"}, enough, session)
        assert initialized.status_code == 202


async def test_an_unreachable_identity_provider_gets_503_without_a_challenge(idp, rsa_key):
    idp.routes["/jwks"] = lambda seen: (500, {}, b"")
    async with app_client(in_process(idp), base_url=IN_PROCESS) as client:
        token = rsa_key.sign(claims_for(idp.issuer, audience=IN_PROCESS + "/mcp"))
        response = await app_post(client, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, token)
    assert response.status_code == 503
    assert "www-authenticate" not in response.headers and response.headers["retry-after"]


def test_serving_without_an_audience_refuses_to_start(idp, mcphost_server):
    with pytest.raises(RuntimeError, match="audience is required"):
        mcphost_server(toml_section({"issuer": idp.issuer, "allow_insecure": True}))


def test_installed_but_unconfigured_is_dormant_on_loopback_and_refuses_a_remote_bind(mcphost_server, tmp_path):
    """No section: the plugin does nothing (as if not installed), so the loopback server answers
    without tokens, and listening beyond loopback is refused as for any host without auth."""
    server = mcphost_server("")
    response = post(server, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
    assert response.status_code == 200 and "www-authenticate" not in response.headers
    assert "ERROR" not in server.log() and "Traceback" not in server.log()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPHOST_")}
    env.update({"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "MCPHOST_PLUGINS": "jwt,demo"})
    refused = subprocess.run([str(Path(sys.executable).parent / "mcphost"), "serve", "--host", "0.0.0.0",
                              "--port", "0"], env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "refusing to listen on 0.0.0.0 without authentication" in refused.stderr
