"""The console behind mcphost-jwt, with real signed tokens checked against a loopback JWKS: no token is
401, a token without the admin scope is 403 (for the page, its data and its action), a token with it
gets the page, in a real browser too."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from console_support import browser
from cryptography.hazmat.primitives.asymmetric import rsa

JWT_TESTS = Path(__file__).resolve().parents[2] / "mcphost-jwt" / "tests"
if str(JWT_TESTS) not in sys.path:
    sys.path.insert(0, str(JWT_TESTS))

from jwt_support import Idp, Key, McphostServer, claims_for, start_idp, toml_section  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Idp, Key, McphostServer]]:
    key = Key(rsa.generate_private_key(public_exponent=65537, key_size=2048), "console-1", "RS256")
    stub, stub_server = start_idp()
    stub.serve_jwks(key)
    config = toml_section({"issuer": stub.issuer, "audience": "{url}", "jwks_uri": stub.url + "/jwks",
                           "allow_insecure": True, "timeout": 2})
    server = McphostServer(tmp_path_factory.mktemp("console-jwt"), config + "[plugins.console]\npoll_seconds = 0.5\n",
                           plugins="demo,jwt,console")
    yield stub, key, server
    server.stop()
    stub_server.shutdown()
    stub_server.server_close()


def _token(served: tuple[Idp, Key, McphostServer], scope: str) -> str:
    stub, key, server = served
    return key.sign(claims_for(stub.issuer, audience=server.url, scope=scope, sub="operator-1"))


def _base(server: McphostServer) -> str:
    return server.url.rsplit("/", 1)[0]


def test_no_token_401_without_scope_403_with_scope_the_page(served: tuple[Idp, Key, McphostServer]) -> None:
    server = served[2]
    base = _base(server)
    admin = {"authorization": f"Bearer {_token(served, 'mcp:tools mcphost:admin')}"}
    user = {"authorization": f"Bearer {_token(served, 'mcp:tools')}"}
    action = {"x-mcphost-console": "1", "origin": base}
    with httpx.Client(timeout=10) as client:
        for path in ("/console", "/console/api/state", "/console/static/console.js"):
            anonymous = client.get(base + path)
            assert anonymous.status_code == 401, (path, anonymous.text)
            assert anonymous.headers["www-authenticate"].startswith("Bearer")
            forged = client.get(base + path, headers={"authorization": "Bearer not.a.token"})
            assert forged.status_code == 401, (path, forged.text)
            assert 'error="invalid_token"' in forged.headers["www-authenticate"]
            lacking = client.get(base + path, headers=user)
            assert lacking.status_code == 403, (path, lacking.text)
            assert 'error="insufficient_scope"' in lacking.headers["www-authenticate"]
            assert 'scope="mcphost:admin"' in lacking.headers["www-authenticate"]
        page = client.get(base + "/console", headers=admin)
        assert page.status_code == 200 and "<title>mcphost console</title>" in page.text
        state = client.get(base + "/console/api/state", headers=admin).json()
        assert {p["name"]: p["status"] for p in state["plugins"]}["jwt"] == "active"
        # The action needs the scope too (its checks pass, then the session is simply unknown).
        end = base + "/console/api/sessions/nope/end"
        assert client.post(end, headers=action).status_code == 401
        assert client.post(end, headers={**user, **action}).status_code == 403
        assert client.post(end, headers={**admin, **action}).status_code == 404


async def test_the_page_works_in_a_browser_that_sends_an_admin_token(
        served: tuple[Idp, Key, McphostServer]) -> None:
    server = served[2]
    token = _token(served, "mcphost:admin")
    async with browser(extra_http_headers={"authorization": f"Bearer {token}"}) as context:
        page = await context.new_page()
        answer = await page.goto(_base(server) + "/console")
        assert answer is not None and answer.status == 200
        await page.locator('#live[data-state="live"]').wait_for(timeout=15000)
        await page.locator('.plugin[data-plugin="jwt"] .badge[data-state="active"]').wait_for(timeout=15000)
