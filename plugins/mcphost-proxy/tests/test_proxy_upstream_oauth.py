"""Per-user upstream credentials, end to end (issue 33): a real OpenID provider (``oidc-provider``, see
tests/support/oidc.py), an upstream mcphost whose mcphost-jwt accepts only that provider's tokens for
its own URL, and a gateway mcphost whose mcphost-proxy mounts it with ``auth.mode = "oauth"``. The
official Python SDK client calls the upstream's tool through the gateway, gets the URL elicitation, a
real headless Chromium opens the link and signs in at the provider, and the call then goes through as
that user. The gateway authenticates its own callers with mcphost-jwt too (client-credentials tokens of
two clients: two principals)."""

from __future__ import annotations

import asyncio
import html
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from mcphost.testing import ServeProcess
from tests.support.browser import browser
from tests.support.fixtures.distributions import make_distribution
from tests.support.oidc import AuthorizationServer, ensure_oidc_provider

MCPHOST = Path(sys.executable).parent / "mcphost"
CALLERS = {"alice": ("mcp-client", "mcp-client-secret"), "bob": ("mcp-client-2", "mcp-client-2-secret")}
#: The provider's per-user access tokens' lifetime (seconds) in the Redis cluster's tests: they expire for real.
TTL = 8
WHOAMI = '''
import mcphost


@mcphost.tool
def whoami(ctx: mcphost.Context) -> str:
    """The subject of the token this call came with."""
    return ctx.principal.subject if ctx.principal is not None else "anonymous"


@mcphost.hookimpl
def mcphost_tools(host):
    return [whoami]
'''


def _jwt(issuer: str, *, keep: bool = False) -> str:
    return (f'[plugins.jwt]\nissuer = "{issuer}"\naudience = "{{url}}"\nrequired_scopes = ["mcp:tools"]\n'
            f'allow_insecure = true\nkeep_subject_token = {"true" if keep else "false"}\n')


class Deployment:
    """The provider, the protected upstream and the gateway node(s) in front of it (on Redis: every node
    shares one redis-server, ``nodes`` of them)."""

    def __init__(self, tmp: Path, *, redis: Any = None, nodes: int = 1, auth: str = "", provider: tuple[str, ...] = (),
                 login: bool = False, listing: bool = True) -> None:
        self.tmp = tmp
        self.provider = AuthorizationServer(ensure_oidc_provider(), "authcode.mjs", *provider)
        extra = tmp / "site"
        make_distribution(extra, "whoami-probe", "1.0", {"whoami": "whoami_probe"}, {"whoami_probe": WHOAMI})
        self.upstream = ServeProcess(tmp, _jwt(self.provider.issuer), plugins="whoami,jwt", extra_path=extra)
        token = self.provider.token(self.upstream.url)  # the gateway's own token: it lists the catalog
        # Without it: each server is listed with the token of the first principal who signs in.
        headers = f'headers = {{ Authorization = "Bearer {token}" }}\n' if listing else ""
        # With login: the host's own login of the browser (the same provider: the callers' tokens are its).
        browser_login = (f'browser_login = {{ issuer = "{self.provider.issuer}", client_id = "mcphost-login", '
                         f'client_secret = "mcphost-login-secret", allow_insecure_http = true }}\n' if login else "")
        oauth = (f'mode = "oauth"\nclient_id = "mcphost-gateway"\nclient_secret = "mcphost-gateway-secret"\n'
                 f'scopes = ["openid", "offline_access", "mcp:tools"]\nallow_insecure_http = true\n{auth}\n')
        self.config = (
            f"{_jwt(self.provider.issuer, keep=True)}\n[plugins.proxy]\nstartup_wait = 30\n{browser_login}\n"
            f'[plugins.proxy.servers.up]\nurl = "{self.upstream.url}"\n'
            f'{headers}\n'
            f"[plugins.proxy.servers.up.auth]\n{oauth}"
            # The same upstream a second time, signed in to separately.
            f'[plugins.proxy.servers.up2]\nurl = "{self.upstream.url}"\n'
            f'{headers}\n'
            f"[plugins.proxy.servers.up2.auth]\n{oauth}"
            # The same upstream again, called with the caller's own token exchanged (RFC 8693).
            f'[plugins.proxy.servers.ex]\nurl = "{self.upstream.url}"\n'
            f'{headers}\n'
            f'[plugins.proxy.servers.ex.auth]\nmode = "token-exchange"\nclient_id = "mcphost-gateway"\n'
            f'client_secret = "mcphost-gateway-secret"\nscopes = ["mcp:tools"]\nallow_insecure_http = true\n')
        # The operator's console, for a caller's token (its scope): it shows the stored credentials.
        self.config += '\n[plugins.console]\nscope = "mcp:tools"\npoll_seconds = 0.5\n'
        self.plugins = "proxy,jwt,console"
        if redis is not None:
            self.config += f'\n[plugins.redis]\nurl = "{redis.url}"\n'
            self.plugins += ",redis"
        self.nodes = [ServeProcess(tmp, self.config, plugins=self.plugins) for _ in range(nodes)]
        self.gateway = self.nodes[0]

    def stop(self) -> None:
        for process in (*self.nodes, self.upstream):
            process.stop()
        self.provider.stop()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    deployed = Deployment(tmp_path_factory.mktemp("upstream-oauth"))
    yield deployed
    deployed.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """Two gateway nodes on one redis-server. The provider's per-user access tokens live TTL seconds and
    each refresh rotates the refresh token (a spent one used again is refused, and its grant revoked)."""
    from mcphost_redis.testing import RedisServer, redis_server_path

    if redis_server_path() is None:
        pytest.fail("redis-server is required (scripts/ensure-tools installs it)")
    tmp = tmp_path_factory.mktemp("upstream-oauth-redis")
    redis = RedisServer(tmp / "redis")
    deployed = Deployment(tmp, redis=redis, nodes=2, provider=(str(TTL), "rotate"))
    deployed.redis = redis  # type: ignore[attr-defined]
    yield deployed
    deployed.stop()
    redis.stop()


@pytest.fixture(scope="module")
def unlisted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """A gateway with no listing credential of its own: each server is listed with the token of the first
    principal who signs in (or whose token is exchanged)."""
    deployed = Deployment(tmp_path_factory.mktemp("upstream-oauth-unlisted"), listing=False)
    yield deployed
    deployed.stop()


@pytest.fixture(scope="module")
def unlisted_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """Two gateway nodes on one redis-server, with no listing credential."""
    from mcphost_redis.testing import RedisServer, redis_server_path

    if redis_server_path() is None:
        pytest.fail("redis-server is required (scripts/ensure-tools installs it)")
    tmp = tmp_path_factory.mktemp("upstream-oauth-unlisted-redis")
    redis = RedisServer(tmp / "redis")
    deployed = Deployment(tmp, redis=redis, nodes=2, listing=False)
    yield deployed
    deployed.stop()
    redis.stop()


@pytest.fixture(scope="module")
def bound(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """A gateway with a host login ([plugins.proxy.browser_login]): a sign-in link completes only in a
    browser signed in to the host as the principal the link was made for."""
    deployed = Deployment(tmp_path_factory.mktemp("upstream-oauth-bound"), login=True)
    yield deployed
    deployed.stop()


class Walk:
    """What a browser went through for one link: the gateway URLs it was sent to and each page's text."""

    def __init__(self) -> None:
        self.urls: list[str] = []
        self.texts: list[str] = []
        self.logins = 0

    @property
    def text(self) -> str:
        return self.texts[-1] if self.texts else ""


async def walk(context: Any, url: str, login: str) -> Walk:
    """Open ``url`` in the browser ``context`` and go through whatever pages come: the gateway's own
    confirmation (Continue), the provider's login page (as ``login``), its consent pages; until a page of
    the gateway's own that ends the flow (it has ``#message``)."""
    seen = Walk()
    page = await context.new_page()
    page.on("request", lambda request: seen.urls.append(request.url) if request.is_navigation_request() else None)
    await page.goto(url)
    for _ in range(12):
        await page.wait_for_load_state()
        seen.texts.append(str(await page.inner_text("body")))
        if await page.locator("#message").count():
            break
        if await page.locator("input[name=login]").count():
            seen.logins += 1
            await page.fill("input[name=login]", login)
            await page.fill("input[name=password]", "any")
        if not await page.locator("button[type=submit]").count():
            raise AssertionError(f"a page with nothing to press at {page.url}: {seen.text[:500]!r}")
        async with page.expect_navigation(timeout=30_000):
            await page.click("button[type=submit]")
    else:
        raise AssertionError(f"the sign-in never ended: {seen.urls}")
    await page.close()
    return seen


async def sign_in(url: str, login: str, context: Any = None) -> Walk:
    """:func:`walk` in ``context``, or in a fresh headless Chromium."""
    if context is not None:
        return await walk(context, url, login)
    async with browser() as fresh:
        return await walk(fresh, url, login)


class Caller:
    """The SDK client of one principal: records the URL elicitations it gets and signs in as ``login``
    (in ``context``, a browser of its own, when given); it accepts when the sign-in ended signed in."""

    def __init__(self, deployment: Deployment, who: str, *, login: str | None = None, can_open: bool = True,
                 node: int = 0, context: Any = None) -> None:
        self.deployment = deployment
        self.url = deployment.nodes[node].url
        self.token = deployment.provider.token(self.url, client=CALLERS[who])
        self.login = login or who
        self.asked: list[dict[str, Any]] = []
        self.pages: list[str] = []
        self.walks: list[Walk] = []
        self.can_open = can_open
        self.context = context
        self.notes: list[str] = []
        self.versions: list[str | None] = []

    async def elicit(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.append(params.model_dump(by_alias=True, exclude_none=True))
        seen = await sign_in(params.url, self.login, self.context)
        self.walks.append(seen)
        self.pages.append(seen.text)
        return types.ElicitResult(action="accept" if "You may close this page" in seen.text else "decline")

    async def on_message(self, message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method:
            self.notes.append(method)

    async def call(self, name: str, arguments: dict[str, Any] | None = None, mode: str = "legacy") -> Any:
        http = httpx2.AsyncClient(headers={"authorization": f"Bearer {self.token}"}, timeout=httpx2.Timeout(120))
        options: dict[str, Any] = {"elicitation_callback": self.elicit} if self.can_open else {}
        client = Client(streamable_http_client(self.url, http_client=http), mode=mode,
                        read_timeout_seconds=120, message_handler=self.on_message, **options)
        async with http, client:
            self.versions.append(client.protocol_version)
            return await client.call_tool(name, arguments or {})


    async def names(self, mode: str = "legacy") -> list[str]:
        """The tool names a tools/list of a fresh client session gets."""
        http = httpx2.AsyncClient(headers={"authorization": f"Bearer {self.token}"}, timeout=httpx2.Timeout(120))
        options: dict[str, Any] = {"elicitation_callback": self.elicit} if self.can_open else {}
        client = Client(streamable_http_client(self.url, http_client=http), mode=mode,
                        read_timeout_seconds=120, message_handler=self.on_message, **options)
        async with http, client:
            self.versions.append(client.protocol_version)
            return [tool.name for tool in (await client.list_tools()).tools]


def _text(result: Any) -> str:
    return str(result.content[0].text)


async def test_a_call_asks_the_user_to_sign_in_in_band_and_then_goes_through_as_that_user(deployment):
    alice = Caller(deployment, "alice")
    result = await alice.call("up_whoami")
    assert not result.is_error, result
    assert _text(result) == "alice"  # the upstream saw the provider's token for alice, not the gateway's
    assert len(alice.asked) == 1
    asked = alice.asked[0]
    assert asked["mode"] == "url" and asked["url"].startswith(deployment.gateway.base + "/oauth/start?state=")
    assert "up" in asked["message"]
    assert "You may close this page" in alice.pages[0]
    assert "notifications/elicitation/complete" in alice.notes
    assert alice.versions == ["2025-11-25"]
    # Signed in once: the next call (a new session) asks nothing.
    again = await alice.call("up_whoami")
    assert _text(again) == "alice" and len(alice.asked) == 1


async def test_two_principals_get_two_upstream_identities(deployment):
    alice, bob = Caller(deployment, "alice", login="alice"), Caller(deployment, "bob", login="bob")
    assert _text(await bob.call("up_whoami")) == "bob"
    assert len(bob.asked) == 1  # bob has his own sign-in, whatever alice did
    assert _text(await alice.call("up_whoami")) == "alice"
    assert _text(await bob.call("up_whoami")) == "bob"


async def test_token_exchange_calls_the_upstream_as_the_caller_without_asking(deployment):
    alice, bob = Caller(deployment, "alice"), Caller(deployment, "bob")
    # The callers' own tokens are for the gateway; each is exchanged for one whose audience is the upstream,
    # with the same subject (the client-credentials clients' ids), and the upstream sees that subject.
    assert _text(await alice.call("ex_whoami")) == CALLERS["alice"][0]
    assert _text(await bob.call("ex_whoami")) == CALLERS["bob"][0]
    assert _text(await alice.call("ex_whoami")) == CALLERS["alice"][0]
    assert alice.asked == [] and bob.asked == []


async def test_a_used_or_unknown_sign_in_link_is_refused(deployment):
    with httpx2.Client(timeout=30) as http:
        response = http.get(deployment.gateway.base + "/oauth/callback", params={"state": "nope", "code": "x"})
        assert response.status_code == 400 and "expired" in response.text
        response = http.get(deployment.gateway.base + "/oauth/start", params={"state": "nope"})
        assert response.status_code == 400


async def test_a_client_without_url_elicitation_gets_an_error_naming_the_url(deployment):
    carol = Caller(deployment, "alice", can_open=False)
    carol.token = deployment.provider.token(deployment.gateway.url, client=CALLERS["alice"])
    # alice may already be signed in (another test): sign her out first, through the tool.
    await Caller(deployment, "alice").call("sign_out", {"upstream": "up"})
    with pytest.raises(BaseException) as raised:
        await carol.call("up_whoami")
    error = raised.value
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, MCPError), repr(error)
    assert error.error.code == -32042  # URL elicitation required (2025-11-25), naming the URL to open
    assert deployment.gateway.base + "/oauth/start?state=" in error.error.message and "browser" in error.error.message
    link = error.error.data["elicitations"][0]["url"]
    assert link.startswith(deployment.gateway.base + "/oauth/start?state=")
    # The callback is taken only in the browser that went through the start page: a code brought for
    # this link by anyone else is refused, and the link is still there for its user.
    state = link.partition("state=")[2]
    with httpx2.Client(timeout=30, follow_redirects=False) as http:
        response = http.get(deployment.gateway.base + "/oauth/callback", params={"state": state, "code": "x"})
        assert response.status_code == 403 and "not started in this browser" in response.text
        response = http.get(link)
        assert response.status_code == 200 and "Continue to up" in response.text
        assert "'mcp-client'" in html.unescape(response.text)
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


async def test_the_user_signs_out_and_the_next_call_asks_again(deployment):
    alice = Caller(deployment, "alice")
    assert _text(await alice.call("up_whoami")) == "alice"
    asked = len(alice.asked)
    signed_out = await alice.call("sign_out", {"upstream": "up"})
    assert _text(signed_out) == "Signed out of up."
    assert _text(await alice.call("up_whoami")) == "alice"
    assert len(alice.asked) == asked + 1


async def test_in_2026_07_28_the_sign_in_comes_as_an_input_required_round(deployment):
    await Caller(deployment, "bob").call("sign_out", {"upstream": "up"}, mode="auto")
    bob = Caller(deployment, "bob")
    result = await bob.call("up_whoami", mode="auto")
    assert not result.is_error, result
    assert _text(result) == "bob"
    assert len(bob.asked) == 1 and bob.asked[0]["mode"] == "url"
    assert bob.versions == ["2026-07-28"]
    assert _text(await bob.call("up_whoami", mode="auto")) == "bob" and len(bob.asked) == 1


async def test_without_a_host_login_the_link_names_whom_it_is_for_and_asks_for_a_click(deployment):
    alice = Caller(deployment, "alice")
    await alice.call("sign_out", {"upstream": "up2"})
    assert _text(await alice.call("up2_whoami")) == "alice"
    [seen] = alice.walks
    assert "'mcp-client'" in seen.texts[0] and "up2" in seen.texts[0]  # the principal and the upstream, named
    # The click is a POST from the page itself: one from elsewhere (no matching cookie) is refused, and so
    # is one whose Origin is another site's.
    link = alice.asked[0]["url"]
    state = link.partition("state=")[2]
    with httpx2.Client(timeout=30, follow_redirects=False) as http:
        forged = http.post(deployment.gateway.base + "/oauth/start", data={"state": state, "csrf": "x"})
        assert forged.status_code == 403 and "not sent from this host" in forged.text
        http.cookies.set("mcphost_csrf", "x")
        other = http.post(deployment.gateway.base + "/oauth/start", data={"state": state, "csrf": "x"},
                          headers={"origin": "https://evil.example"})
        assert other.status_code == 403


async def test_a_link_opened_in_a_browser_signed_in_as_another_user_is_refused(bound):
    """alice's link reaching bob (or bob's link reaching alice) does not bind bob's upstream account to
    alice: the host login must find the link's own principal in the browser."""
    alice_subject, bob_subject = CALLERS["alice"][0], CALLERS["bob"][0]
    async with browser() as bobs_browser:
        bob = Caller(bound, "bob", login=bob_subject, context=bobs_browser)
        first = await bob.call("up_whoami")
        assert _text(first) == bob_subject, [(w.urls, w.texts) for w in bob.walks]
        assert bob.walks[0].logins == 1 and any("/oauth/login/callback" in u for u in bob.walks[0].urls)
        # alice's link, opened in bob's browser (signed in to the host as bob): refused, and alice declines.
        misled = Caller(bound, "alice", login=alice_subject, context=bobs_browser)
        result = await misled.call("up_whoami")
        assert result.is_error and "declined" in _text(result)
        [refusal] = misled.walks
        assert "Sign-in refused" in refusal.text and "made for another user" in refusal.text
        assert refusal.logins == 0  # the host's cookie said who the browser was: no login asked
        assert not any("/oauth/callback" in u for u in refusal.urls)  # never sent to the upstream's sign-in
        # The same, without the cookie: bob signs in to the host afresh and is refused all the same.
        async with browser() as other_browser:
            fresh = Caller(bound, "alice", login=bob_subject, context=other_browser)
            result = await fresh.call("up_whoami")
            assert result.is_error and "Sign-in refused" in fresh.walks[0].text and fresh.walks[0].logins == 1
    # Nothing was stored: alice's next call asks again, and her own browser completes it, as alice.
    async with browser() as alices_browser:
        alice = Caller(bound, "alice", login=alice_subject, context=alices_browser)
        assert _text(await alice.call("up_whoami")) == alice_subject and len(alice.asked) == 1
        # A second upstream in the same browser: the host's cookie vouches, no host login again.
        assert _text(await alice.call("up2_whoami")) == alice_subject and len(alice.asked) == 2
        assert not any("/oauth/login/callback" in u for u in alice.walks[1].urls)
    assert "made for another user" not in alice.pages[0]


async def test_the_host_login_is_taken_only_in_the_browser_that_started_it(bound):
    """Login CSRF: a login callback brought to another browser (an attacker's own code and state, say,
    which would sign the victim's browser in to the host as the attacker) is refused."""
    caller = Caller(bound, "alice", can_open=False)
    await Caller(bound, "alice").call("sign_out", {"upstream": "up2"})
    with pytest.raises(BaseException) as raised:
        await caller.call("up2_whoami")
    error = raised.value
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    link = error.error.data["elicitations"][0]["url"]  # type: ignore[attr-defined]
    with httpx2.Client(timeout=30, follow_redirects=False) as starter, \
            httpx2.Client(timeout=30, follow_redirects=False) as other:
        started = starter.get(link)
        assert started.status_code == 302 and started.headers["location"].startswith(bound.provider.issuer)
        assert "scope=openid" in started.headers["location"] and "nonce=" in started.headers["location"]
        flow = started.headers["location"].partition("&state=")[2].partition("&")[0]
        cookie = started.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/oauth" in cookie
        refused = other.get(bound.gateway.base + "/oauth/login/callback", params={"state": flow, "code": "x"})
        assert refused.status_code == 403 and "another browser" in refused.text


async def test_the_console_shows_the_stored_credentials_and_never_a_token(deployment):
    alice = Caller(deployment, "alice")
    assert _text(await alice.call("up_whoami")) == "alice"
    headers = {"authorization": f"Bearer {alice.token}"}
    state: dict[str, Any] = {}
    async with httpx2.AsyncClient(timeout=30, headers=headers) as http:
        for _ in range(60):  # the report's list is read from the vault in the background, every 2 s
            response = await http.get(deployment.gateway.base + "/console/api/state")
            assert response.status_code == 200, response.text
            state = response.json()
            if any(c["upstream"] == "up" and "'mcp-client'" in c["principal"] for c in state["credentials"]):
                break
            await asyncio.sleep(0.5)
    rows = [c for c in state["credentials"] if c["upstream"] == "up" and "'mcp-client'" in c["principal"]]
    assert len(rows) == 1, [p.get("report") for p in state["plugins"] if p.get("name") == "proxy"]
    [row] = rows
    assert set(row) == {"principal", "upstream", "expires_at", "refreshable"}
    assert row["expires_at"] > time.time() and row["refreshable"] is True
    assert state["credentials_total"] >= 1
    assert "eyJ" not in response.text  # every token here is a JWT: none anywhere in what the console reads
    async with browser(extra_http_headers=headers) as context:
        page = await context.new_page()
        await page.goto(deployment.gateway.base + "/console")
        cell = page.locator('#credentials-table tr[data-upstream="up"] .credential-principal', has_text="mcp-client'")
        await cell.first.wait_for(timeout=30_000)
        text = await page.locator("#credentials").inner_text()
        assert "up" in text and "mcp-client" in text and "Z" in text  # principal, upstream, expiry
        assert "eyJ" not in await page.content()


def credentials(deployment: Deployment, *args: str) -> subprocess.CompletedProcess[str]:
    """``mcphost credentials ARGS`` with the gateway's configuration, as an operator runs it."""
    config = deployment.tmp / "operator.toml"
    config.write_text(deployment.config.replace("{url}", deployment.gateway.url), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPHOST_")}
    env.update({"MCPHOST_CONFIG": str(config), "MCPHOST_PLUGINS": deployment.plugins})
    return subprocess.run([str(MCPHOST), "credentials", *args], capture_output=True, text=True, env=env, timeout=120)


def _stored(deployment: Deployment) -> dict[bytes, bytes]:
    """Every string value in the cluster's Redis, by key."""
    import redis

    client = redis.Redis.from_url(deployment.redis.url)  # type: ignore[attr-defined]
    try:
        return {key: value for key in client.scan_iter(count=1000) if client.type(key) == b"string"
                and (value := client.get(key)) is not None}
    finally:
        client.close()


def _entry(deployment: Deployment, subject: str, upstream: str = "up") -> dict[str, Any]:
    """``mcphost credentials list --json``'s one entry for the caller ``subject`` (a client id) and ``upstream``."""
    listed = credentials(deployment, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [entry] = [e for e in json.loads(listed.stdout) if e["upstream"] == upstream and f"'{subject}'" in e["principal"]]
    return dict(entry)


async def _until_expired(entry: dict[str, Any]) -> None:
    """Wait until the access token of ``entry`` has expired (by the provider's own clock: its ``exp``)."""
    left = float(entry["expires_at"]) - time.time()
    assert left < TTL + 1, entry  # the provider's short lifetime, no longer
    await asyncio.sleep(max(0.0, left) + 1.0)


async def test_on_redis_another_node_uses_the_stored_token_sealed_and_refreshed_without_the_user(cluster):
    alice = Caller(cluster, "alice", node=0)
    assert _text(await alice.call("up_whoami")) == "alice" and len(alice.asked) == 1
    first = _entry(cluster, "mcp-client")
    # The second node: same principal, no question, once the access token has really expired (the provider
    # made it live TTL seconds; refresh_before is the default): a new one, got with the refresh token.
    await _until_expired(first)
    elsewhere = Caller(cluster, "alice", node=1)
    assert _text(await elsewhere.call("up_whoami")) == "alice" and elsewhere.asked == []
    second = _entry(cluster, "mcp-client")
    assert second["expires_at"] > first["expires_at"] + 1 and second["refreshable"]
    # Sealed at rest: the records are there, and no value holds a JWT (every token here is one) or the user.
    stored = _stored(cluster)
    assert [key for key in stored if b"proxy-cred:up:" in key]
    assert not [key for key, value in stored.items() if b"eyJ" in value or b"alice" in value]


async def test_two_nodes_refreshing_at_once_spend_the_rotating_refresh_token_once(cluster):
    """The provider rotates refresh tokens and revokes the grant when a spent one comes back: if both
    nodes refreshed with the same one, the second would be refused and bob asked to sign in again."""
    bob = Caller(cluster, "bob", node=0)
    await bob.call("sign_out", {"upstream": "up2"})
    assert _text(await bob.call("up2_whoami")) == "bob" and len(bob.asked) == 1
    for _ in range(2):  # twice: the refresh token the first round stored is the one the second spends
        await _until_expired(_entry(cluster, "mcp-client-2", "up2"))
        here, there = Caller(cluster, "bob", node=0), Caller(cluster, "bob", node=1)
        results = await asyncio.gather(here.call("up2_whoami"), there.call("up2_whoami"))
        assert [_text(r) for r in results] == ["bob", "bob"]
        assert here.asked == [] and there.asked == []  # nobody was asked to sign in again
    assert _text(await Caller(cluster, "bob", node=1).call("up2_whoami")) == "bob"


async def test_the_operator_lists_and_revokes_and_the_next_call_asks_again(cluster):
    bob = Caller(cluster, "bob", node=1)
    assert _text(await bob.call("up_whoami")) == "bob"
    listed = credentials(cluster, "list")
    assert listed.returncode == 0, listed.stderr
    assert "'mcp-client-2'" in listed.stdout and "\tup\t" in listed.stdout and "eyJ" not in listed.stdout
    revoked = credentials(cluster, "revoke", "mcp-client-2", "up")  # a bare subject names one principal
    assert revoked.returncode == 0, revoked.stderr
    assert not [line for line in credentials(cluster, "list").stdout.splitlines()
                if "'mcp-client-2'" in line and "\tup\t" in line]
    asked = len(bob.asked)
    assert _text(await bob.call("up_whoami")) == "bob" and len(bob.asked) == asked + 1
    missing = credentials(cluster, "revoke", "nobody", "up")
    assert missing.returncode != 0 and "no credential" in missing.stderr


def test_the_status_report_names_who_is_connected_to_what_never_a_token():
    """The console's upstreams table reads this: each principal's own connection, most recently used
    first, with its principal and upstream, and no token anywhere in it."""
    from types import SimpleNamespace

    from mcphost_proxy.credentials import Credentials

    def connection(label: str, used: float) -> Any:
        return SimpleNamespace(last_used=used, describe=lambda: {"name": label, "state": "running"})

    credentials = Credentials.__new__(Credentials)
    credentials.personal = {("github", "p:alice"): ("token-of-alice", connection("github@a1", 10.0)),
                            ("github", "p:bob"): ("token-of-bob", connection("github@b2", 20.0))}
    rows = credentials.connected()
    assert [(r["principal"], r["upstream"], r["name"]) for r in rows] == [
        ("p:bob", "github", "github@b2"), ("p:alice", "github", "github@a1")]
    assert "token-of" not in json.dumps(rows)


async def _upstream_states(deployment: Deployment, token: str, node: int = 0) -> dict[str, str]:
    """The shared upstreams' states as the console's API reports them (the proxy's status report)."""
    async with httpx2.AsyncClient(timeout=30, headers={"authorization": f"Bearer {token}"}) as http:
        response = await http.get(deployment.nodes[node].base + "/console/api/state")
    assert response.status_code == 200, response.text
    [proxy] = [p for p in response.json()["plugins"] if p.get("name") == "proxy"]
    return {row["name"]: row["state"] for row in proxy["report"]["upstreams"]}


async def test_without_a_listing_credential_a_list_asks_for_the_first_sign_in_and_lists_with_it(unlisted):
    alice, bob = Caller(unlisted, "alice"), Caller(unlisted, "bob")
    states = await _upstream_states(unlisted, alice.token)
    assert states["up"] == "awaiting a sign-in" and states["up2"] == "awaiting a sign-in", states
    # A 2026-07-28 list may not ask (no input-required round on a list): it answers, without up's tools.
    # (The token-exchange server "ex" is listed with the caller's own token exchanged: nobody asked.)
    modern = await bob.names(mode="auto")
    assert "up_whoami" not in modern and "ex_whoami" in modern and bob.asked == [], modern
    assert bob.versions == ["2026-07-28"]
    # A session-era client without URL elicitation: the list answers as it is, nothing of up, no error.
    plain = Caller(unlisted, "bob", can_open=False)
    assert "up_whoami" not in await plain.names()
    # One that declared URL elicitation is asked to sign in at its list, and the list then has up's tools.
    # Both oauth servers await a sign-in: she is asked for each, in turn, within that one list.
    listed = await alice.names()
    assert [a["mode"] for a in alice.asked] == ["url", "url"], alice.asked
    assert [a["message"] for a in alice.asked] == ["Sign in to up to let this server call it as you",
                                                   "Sign in to up2 to let this server call it as you"]
    assert all(a["url"].startswith(unlisted.gateway.base + "/oauth/start?state=") for a in alice.asked)
    assert "up_whoami" in listed and "up2_whoami" in listed, listed
    assert all("You may close this page" in text for text in alice.pages)
    assert alice.notes.count("notifications/elicitation/complete") == 2, alice.notes
    assert "notifications/tools/list_changed" in alice.notes  # the catalog grew while she waited
    states = await _upstream_states(unlisted, alice.token)
    assert states["up"] == "running" and states["up2"] == "running", states
    # Calls still go with each caller's own token: alice is not asked again, bob is asked for his own.
    assert _text(await alice.call("up_whoami")) == "alice" and len(alice.asked) == 2
    assert _text(await bob.call("up_whoami")) == "bob" and len(bob.asked) == 1
    # Now listed: a 2026-07-28 list has up's tools too, and a sign-out of the lister does not unmount them.
    assert "up_whoami" in await bob.names(mode="auto")
    assert _text(await alice.call("sign_out", {"upstream": "up"})) == "Signed out of up."
    assert "up_whoami" in await Caller(unlisted, "bob", can_open=False).names()


async def test_on_redis_another_node_lists_with_the_stored_token_without_asking(unlisted_cluster):
    alice = Caller(unlisted_cluster, "alice", node=0)
    assert "up_whoami" in await alice.names() and len(alice.asked) == 2  # up and up2, on node 0
    # Node 1 still awaits: its next list finds alice's token in the shared vault and lists with it.
    bob = Caller(unlisted_cluster, "bob", can_open=False, node=1)
    states = await _upstream_states(unlisted_cluster, bob.token, node=1)
    assert states["up"] == "awaiting a sign-in", states
    listed = await bob.names()
    assert "up_whoami" in listed and "up2_whoami" in listed and bob.asked == [], listed
    assert (await _upstream_states(unlisted_cluster, bob.token, node=1))["up"] == "running"
    # bob's own calls still need his own sign-in: his client cannot open a link, so he gets -32042.
    with pytest.raises(BaseException) as raised:
        await bob.call("up_whoami")
    error = raised.value
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, MCPError) and error.error.code == -32042, repr(error)
