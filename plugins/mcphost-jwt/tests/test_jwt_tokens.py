"""Token checks through the host's own auth path (``Host.authenticate``), with real keys, real signed
JWTs and the issuer's keys served over real HTTP on loopback."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from jwt_support import AUDIENCE, Idp, Key, claims_for
from mcphost_jwt import JwksUnavailable, JwtPlugin
from mcphost_jwt.fetch import IdentityProviderUnavailable

from mcphost import Connection, Forbidden, Principal, Refused, Unauthorized
from mcphost.host import Host
from mcphost.testing import make_host

pytestmark = pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")

Start = Callable[..., Any]


@pytest.fixture
async def start(idp: Idp) -> AsyncIterator[Start]:
    """``await start(**config)``: a started host with the jwt plugin configured against ``idp``."""
    hosts: list[Host] = []

    async def run(**section: Any) -> tuple[Host, JwtPlugin]:
        config = {"issuer": idp.issuer, "audience": AUDIENCE, "allow_insecure": True, "timeout": 8,
                  "jwks_min_refresh_seconds": 0, **section}
        config = {k: v for k, v in config.items() if v is not None}
        plugin = JwtPlugin()
        host = make_host(("jwt", plugin), config={"plugins": {"jwt": config}})
        await host.start()
        hosts.append(host)
        return host, plugin

    yield run
    for host in hosts:
        await host.stop()


def bearer(token: str, scheme: str = "Bearer") -> Connection:
    return Connection(transport="http", headers={"authorization": f"{scheme} {token}"}, method="POST", path="/mcp")


async def refused(host: Host, token: str) -> Unauthorized:
    with pytest.raises(Unauthorized) as caught:
        await host.authenticate(bearer(token))
    error = caught.value
    challenge = error.headers["WWW-Authenticate"]
    assert challenge.startswith('Bearer error="invalid_token", error_description="'), challenge
    assert error.status == 401
    # Nothing of the token reaches the answer, and the header stays one well-formed line.
    for part in token.split("."):
        if len(part) >= 8:
            assert part not in challenge and part not in error.message
    assert "\r" not in challenge and "\n" not in challenge and challenge.count('"') == 4
    return error


# -- valid tokens -------------------------------------------------------------------------------------

async def test_a_valid_token_becomes_a_principal_with_subject_issuer_client_scopes_and_claims(start, idp, rsa_key):
    idp.serve_discovery()
    idp.serve_jwks(rsa_key)
    host, _ = await start()
    claims = claims_for(idp.issuer, extra="kept")
    principal = await host.authenticate(bearer(rsa_key.sign(claims)))
    assert isinstance(principal, Principal)
    assert principal.subject == "user-42" and principal.issuer == idp.issuer and principal.client_id == "client-7"
    assert principal.scopes == frozenset({"mcp:tools", "mcp:read"})
    assert principal.claims["extra"] == "kept" and principal.claims["jti"] == claims["jti"]
    # The keys were found through the issuer's discovery document, fetched once and then cached.
    assert idp.requests_to("/.well-known/openid-configuration") == 1
    await host.authenticate(bearer(rsa_key.sign(claims_for(idp.issuer))))
    assert idp.requests_to("/jwks") == 1


async def test_the_validated_token_is_kept_on_the_principal_only_with_keep_subject_token(start, idp, rsa_key):
    idp.serve_discovery()
    idp.serve_jwks(rsa_key)
    token = rsa_key.sign(claims_for(idp.issuer))
    plain, _ = await start()
    assert (await plain.authenticate(bearer(token))).token is None  # off by default
    keeping, _ = await start(keep_subject_token=True)
    principal = await keeping.authenticate(bearer(token))
    assert principal.token == token and token not in repr(principal)  # for a plugin's exchange; never shown


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "BeArEr"])
async def test_the_scheme_is_case_insensitive(start, idp, rsa_key, scheme):
    idp.serve_jwks(rsa_key)
    host, _ = await start(jwks_uri=idp.url + "/jwks")
    principal = await host.authenticate(bearer(rsa_key.sign(claims_for(idp.issuer)), scheme))
    assert principal is not None and principal.subject == "user-42"


@pytest.mark.parametrize("key_name", ["ec_key", "ed_key", "rsa_key"])
async def test_ec_eddsa_and_rsa_signatures_verify(start, idp, request, key_name):
    key: Key = request.getfixturevalue(key_name)
    idp.serve_jwks(key)
    host, _ = await start(jwks_uri=idp.url + "/jwks")
    assert (await host.authenticate(bearer(key.sign(claims_for(idp.issuer))))).subject == "user-42"


async def test_scp_lists_aud_lists_azp_and_a_client_only_token(start, idp, rsa_key):
    idp.serve_jwks(rsa_key)
    host, _ = await start(jwks_uri=idp.url + "/jwks")
    claims = claims_for(idp.issuer, aud=["https://other.test/api", AUDIENCE], scope=None, scp=["a", "b"],
                        client_id=None, azp="app-1")
    principal = await host.authenticate(bearer(rsa_key.sign(claims)))
    assert principal.scopes == {"a", "b"} and principal.client_id == "app-1"
    # A client-credentials token may have no sub: the client is the subject.
    principal = await host.authenticate(bearer(rsa_key.sign(claims_for(idp.issuer, sub=None))))
    assert principal.subject == "client-7"


async def test_the_audience_is_compared_as_a_url(start, idp, rsa_key):
    idp.serve_jwks(rsa_key)
    host, _ = await start(jwks_uri=idp.url + "/jwks", audience="HTTPS://MCP.Example.test/mcp/")
    for aud in (AUDIENCE, AUDIENCE + "/", "https://MCP.EXAMPLE.TEST/mcp"):
        assert await host.authenticate(bearer(rsa_key.sign(claims_for(idp.issuer, aud=aud))))
    await refused(host, rsa_key.sign(claims_for(idp.issuer, aud="https://mcp.example.test/MCP")))


async def test_leeway_accepts_a_token_just_expired_but_not_one_long_gone(start, idp, rsa_key):
    idp.serve_jwks(rsa_key)
    host, _ = await start(jwks_uri=idp.url + "/jwks", leeway=30)
    now = int(time.time())
    assert await host.authenticate(bearer(rsa_key.sign(claims_for(idp.issuer, exp=now - 10))))
    assert await host.authenticate(bearer(rsa_key.sign(claims_for(idp.issuer, nbf=now + 10))))
    error = await refused(host, rsa_key.sign(claims_for(idp.issuer, exp=now - 31)))
    assert "expired" in error.message


# -- no token, or not ours ----------------------------------------------------------------------------

async def test_no_authorization_header_or_another_scheme_is_no_opinion(start, idp, rsa_key):
    host, _plugin = await start(jwks_uri=idp.url + "/jwks")
    assert await host.authenticate(Connection(transport="http", headers={})) is None
    assert await host.authenticate(bearer("dXNlcjpwYXNz", scheme="Basic")) is None
    # The query string is never read.
    assert await host.authenticate(Connection(transport="http", headers={}, path="/mcp?access_token=x")) is None
    assert idp.seen == []


@pytest.mark.parametrize("value", ["Bearer a, Bearer b", "Basic dXNlcjpwYXNz, Bearer abc", "Bearer abc,"])
async def test_several_credentials_in_one_header_are_a_bad_request(start, idp, value):
    host, _ = await start(jwks_uri=idp.url + "/jwks")
    with pytest.raises(Refused) as caught:
        await host.authenticate(Connection(transport="http", headers={"authorization": value}))
    assert caught.value.status == 400
    assert caught.value.headers["WWW-Authenticate"].startswith('Bearer error="invalid_request"')


# -- refused tokens -----------------------------------------------------------------------------------

@pytest.mark.parametrize("token", ["", "not a token", "abc\"def", "abc\r\nx: y", "x" * 20_000, "a.b.c",
                                   "eyJhbGciOiJSUzI1NiJ9.e30", "....", "🙂"])
async def test_malformed_tokens_are_invalid(start, idp, token):
    host, _ = await start(jwks_uri=idp.url + "/jwks")
    with pytest.raises(Unauthorized) as caught:
        await host.authenticate(Connection(transport="http", headers={"authorization": f"Bearer {token}"}))
    challenge = caught.value.headers["WWW-Authenticate"]
    assert challenge.startswith('Bearer error="invalid_token"') and "\n" not in challenge
    assert token.strip() == "" or token not in challenge


@pytest.mark.parametrize("change,expected", [
    ({"exp": int(time.time()) - 3600}, "expired"),
    ({"nbf": int(time.time()) + 3600}, "not yet valid"),
    ({"iat": int(time.time()) + 3600}, "not yet valid"),
    ({"exp": None}, "no exp claim"),
    ({"iss": "https://evil.test"}, "another issuer"),
    ({"iss": None}, "no iss claim"),
    ({"aud": "https://other.test/mcp"}, "another resource"),
    ({"aud": ["https://a.test", "https://b.test"]}, "another resource"),
    ({"aud": None}, "no audience"),
    ({"sub": None, "client_id": None}, "no subject"),
    ({"cnf": {"jkt": "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"}}, "bound to a key"),
])
async def test_tokens_with_bad_claims_are_refused(start, idp, rsa_key, change, expected):
    idp.serve_jwks(rsa_key)
    host, _ = await start(jwks_uri=idp.url + "/jwks", leeway=5)
    claims = claims_for(idp.issuer, **change)
    error = await refused(host, rsa_key.sign(claims))
    assert expected in error.message


async def test_a_bad_signature_is_refused(start, idp, rsa_key, other_rsa_key):
    idp.serve_jwks(rsa_key)
    host, _ = await start(jwks_uri=idp.url + "/jwks")
    # Signed by another key claiming the published key's kid.
    forged = Key(other_rsa_key.private, rsa_key.kid, "RS256").sign(claims_for(idp.issuer))
    assert "signature" in (await refused(host, forged)).message
    # A valid token whose payload was swapped afterwards.
    header, _, signature = rsa_key.sign(claims_for(idp.issuer)).split(".")
    payload = base64.urlsafe_b64encode(json.dumps(claims_for(idp.issuer, sub="admin")).encode()).rstrip(b"=")
    assert "signature" in (await refused(host, f"{header}.{payload.decode()}.{signature}")).message


async def test_alg_none_is_refused(start, idp, rsa_key):
    idp.serve_jwks(rsa_key)
    host, _ = await start(jwks_uri=idp.url + "/jwks")
    unsigned = jwt.encode(claims_for(idp.issuer), None, algorithm="none", headers={"kid": rsa_key.kid})
    assert "algorithm not allowed" in (await refused(host, unsigned)).message
    assert "algorithm not allowed" in (await refused(host, unsigned + "c2lnbmF0dXJl")).message


async def test_hmac_signed_with_the_public_key_is_refused(start, idp, rsa_key):
    """The classic confusion: HS256 with the RSA public key's PEM as the shared secret."""
    idp.serve_jwks(rsa_key)
    host, _ = await start(jwks_uri=idp.url + "/jwks")
    pem = rsa_key.private.public_key().public_bytes(serialization.Encoding.PEM,
                                                    serialization.PublicFormat.SubjectPublicKeyInfo)
    header = base64.urlsafe_b64encode(json.dumps({"alg": "HS256", "typ": "JWT", "kid": rsa_key.kid}).encode())
    payload = base64.urlsafe_b64encode(json.dumps(claims_for(idp.issuer)).encode())
    signing_input = header.rstrip(b"=") + b"." + payload.rstrip(b"=")
    import hashlib
    import hmac
    signature = base64.urlsafe_b64encode(hmac.new(pem, signing_input, hashlib.sha256).digest()).rstrip(b"=")
    token = (signing_input + b"." + signature).decode()
    assert "algorithm not allowed" in (await refused(host, token)).message


async def test_an_algorithm_outside_the_configured_list_is_refused(start, idp, rsa_key, ec_key):
    idp.serve_jwks(rsa_key, ec_key)
    host, _ = await start(jwks_uri=idp.url + "/jwks", algorithms=["ES256"])
    assert await host.authenticate(bearer(ec_key.sign(claims_for(idp.issuer))))
    assert "algorithm not allowed" in (await refused(host, rsa_key.sign(claims_for(idp.issuer)))).message


async def test_a_key_is_used_only_for_its_own_algorithm(start, idp, rsa_key):
    """A JWK declaring RS256 does not verify a PS256 signature made with the same key."""
    idp.serve_jwks(rsa_key)
    host, _ = await start(jwks_uri=idp.url + "/jwks")
    token = Key(rsa_key.private, rsa_key.kid, "PS256").sign(claims_for(idp.issuer))
    assert "key the issuer does not publish" in (await refused(host, token)).message


async def test_critical_header_extensions_are_refused(start, idp, rsa_key):
    idp.serve_jwks(rsa_key)
    host, _ = await start(jwks_uri=idp.url + "/jwks")
    token = rsa_key.sign(claims_for(idp.issuer), crit=["x-custom"], **{"x-custom": 1})
    assert "critical" in (await refused(host, token)).message


async def test_insufficient_scope_is_403_with_the_scopes_needed(start, idp, rsa_key):
    idp.serve_jwks(rsa_key)
    host, _ = await start(jwks_uri=idp.url + "/jwks", required_scopes=["mcp:tools", "mcp:admin"])
    with pytest.raises(Forbidden) as caught:
        await host.authenticate(bearer(rsa_key.sign(claims_for(idp.issuer))))
    assert caught.value.status == 403
    challenge = caught.value.headers["WWW-Authenticate"]
    assert challenge.startswith('Bearer error="insufficient_scope", scope="mcp:admin mcp:tools"')
    principal = await host.authenticate(bearer(rsa_key.sign(claims_for(idp.issuer,
                                                                       scope="mcp:tools mcp:admin x"))))
    assert principal.scopes == {"mcp:tools", "mcp:admin", "x"}


# -- the issuer's keys ----------------------------------------------------------------------------------

async def test_an_unknown_kid_refreshes_the_jwks_and_finds_a_rotated_key(start, idp, rsa_key, other_rsa_key):
    idp.serve_jwks(rsa_key)
    host, _ = await start(jwks_uri=idp.url + "/jwks")
    assert await host.authenticate(bearer(rsa_key.sign(claims_for(idp.issuer))))
    idp.serve_jwks(other_rsa_key)  # the issuer rotated its keys
    principal = await host.authenticate(bearer(other_rsa_key.sign(claims_for(idp.issuer))))
    assert principal.subject == "user-42"
    assert idp.requests_to("/jwks") == 2
    # The retired key is gone after the refresh.
    assert "does not publish" in (await refused(host, rsa_key.sign(claims_for(idp.issuer)))).message


async def test_a_flood_of_made_up_kids_does_not_hammer_the_issuer(start, idp, rsa_key):
    idp.serve_jwks(rsa_key)
    host, _ = await start(jwks_uri=idp.url + "/jwks", jwks_min_refresh_seconds=30)
    assert await host.authenticate(bearer(rsa_key.sign(claims_for(idp.issuer))))
    tokens = [Key(rsa_key.private, f"random-{n}", "RS256").sign(claims_for(idp.issuer)) for n in range(50)]
    results = await asyncio.gather(*(host.authenticate(bearer(t)) for t in tokens), return_exceptions=True)
    assert all(isinstance(r, Unauthorized) for r in results)
    assert idp.requests_to("/jwks") == 1  # within the refresh interval: no fetch at all
    assert await host.authenticate(bearer(rsa_key.sign(claims_for(idp.issuer))))


async def test_concurrent_first_requests_share_one_fetch(start, idp, rsa_key):
    idp.serve_jwks(rsa_key)
    idp.delay = 0.2
    host, _ = await start(jwks_uri=idp.url + "/jwks")
    tokens = [rsa_key.sign(claims_for(idp.issuer)) for _ in range(20)]
    principals = await asyncio.gather(*(host.authenticate(bearer(t)) for t in tokens))
    assert all(p.subject == "user-42" for p in principals)
    assert idp.requests_to("/jwks") == 1


async def test_jwks_down_is_an_error_the_host_answers_with_503(start, idp, rsa_key):
    host, plugin = await start(jwks_uri=idp.url + "/jwks", jwks_min_refresh_seconds=30)
    idp.routes["/jwks"] = lambda seen: (500, {}, b"down")
    token = rsa_key.sign(claims_for(idp.issuer))
    # The plugin raises something that is not a Refused ...
    with pytest.raises(JwksUnavailable):
        await plugin.mcphost_authenticate(bearer(token))
    # ... which the host turns into 503 without a challenge.
    with pytest.raises(Refused) as caught:
        await host.authenticate(bearer(token))
    assert caught.value.status == 503 and "WWW-Authenticate" not in caught.value.headers
    assert not isinstance(caught.value, Unauthorized)
    # Within the refresh interval a failed fetch is not retried for every request.
    assert idp.requests_to("/jwks") == 1


async def test_an_unreachable_jwks_is_an_error(start, idp, rsa_key):
    from jwt_support import free_port
    _host, plugin = await start(jwks_uri=f"http://127.0.0.1:{free_port()}/jwks")
    with pytest.raises(IdentityProviderUnavailable):
        await plugin.mcphost_authenticate(bearer(rsa_key.sign(claims_for(idp.issuer))))


async def test_a_slow_jwks_is_an_error_after_the_timeout(start, idp, rsa_key):
    idp.serve_jwks(rsa_key)
    idp.delay = 1.5
    _host, plugin = await start(jwks_uri=idp.url + "/jwks", timeout=0.3)
    started = time.monotonic()
    with pytest.raises(IdentityProviderUnavailable, match="did not answer within"):
        await plugin.mcphost_authenticate(bearer(rsa_key.sign(claims_for(idp.issuer))))
    assert time.monotonic() - started < 1.2


async def test_an_oversized_jwks_is_refused(start, idp, rsa_key):
    padding = [{"kty": "RSA", "kid": f"pad-{n}", "n": "x" * 1000, "e": "AQAB"} for n in range(70)]
    idp.serve_json("/jwks", {"keys": [rsa_key.jwk, *padding]})
    _host, plugin = await start(jwks_uri=idp.url + "/jwks")
    with pytest.raises(JwksUnavailable, match="limit"):
        await plugin.mcphost_authenticate(bearer(rsa_key.sign(claims_for(idp.issuer))))


async def test_a_jwks_over_the_key_cap_is_an_error_naming_the_setting(start, idp, rsa_key, other_rsa_key, caplog):
    """RELIABILITY H15: the cap is a setting, and exceeding it is never a silent 401."""
    others = [{**other_rsa_key.jwk, "kid": f"other-{n}"} for n in range(3)]
    idp.serve_json("/jwks", {"keys": [*others, rsa_key.jwk]})
    capped, _ = await start(jwks_uri=idp.url + "/jwks", max_jwks_keys=3)
    await refused(capped, rsa_key.sign(claims_for(idp.issuer)))
    errors = [r for r in caplog.records if r.levelname == "ERROR" and "max_jwks_keys = 3" in r.getMessage()]
    assert errors and "holds 4 keys" in errors[0].getMessage()
    roomy, _ = await start(jwks_uri=idp.url + "/jwks", max_jwks_keys=4)
    assert await roomy.authenticate(bearer(rsa_key.sign(claims_for(idp.issuer))))


async def test_a_cached_jwks_survives_a_failed_refresh(start, idp, rsa_key, other_rsa_key):
    idp.serve_jwks(rsa_key)
    host, _ = await start(jwks_uri=idp.url + "/jwks")
    assert await host.authenticate(bearer(rsa_key.sign(claims_for(idp.issuer))))
    idp.routes["/jwks"] = lambda seen: (503, {}, b"")
    # The unknown kid triggers a refresh that fails: that token is refused, the known key keeps working.
    await refused(host, other_rsa_key.sign(claims_for(idp.issuer)))
    assert await host.authenticate(bearer(rsa_key.sign(claims_for(idp.issuer))))


async def test_symmetric_and_encryption_keys_in_the_jwks_are_ignored(start, idp, rsa_key):
    secret = base64.urlsafe_b64encode(b"s" * 32).rstrip(b"=").decode()
    idp.serve_json("/jwks", {"keys": [{"kty": "oct", "kid": "hmac", "k": secret, "alg": "HS256"},
                                      {**rsa_key.jwk, "kid": "enc", "use": "enc"}]})
    host, _ = await start(jwks_uri=idp.url + "/jwks")
    await refused(host, Key(rsa_key.private, "enc", "RS256").sign(claims_for(idp.issuer)))


async def test_discovery_falls_back_to_rfc8414_metadata(start, idp, rsa_key):
    idp.serve_discovery(path="/.well-known/oauth-authorization-server")
    idp.serve_jwks(rsa_key)
    host, _ = await start()
    assert await host.authenticate(bearer(rsa_key.sign(claims_for(idp.issuer))))
    assert idp.requests_to("/.well-known/openid-configuration") == 1  # tried first, 404


async def test_metadata_naming_another_issuer_is_not_trusted(start, idp, rsa_key):
    idp.serve_discovery(issuer="https://evil.test")
    idp.serve_jwks(rsa_key)
    _host, plugin = await start()
    with pytest.raises(JwksUnavailable, match="another issuer"):
        await plugin.mcphost_authenticate(bearer(rsa_key.sign(claims_for(idp.issuer))))
    assert idp.requests_to("/jwks") == 0


# -- introspection (RFC 7662) -----------------------------------------------------------------------------

def introspection(idp: Idp, answers: dict[str, dict[str, Any]]) -> None:
    """Serve /introspect: answers by token; checks the resource server's client authentication."""
    expected = "Basic " + base64.b64encode(b"rs-client:rs%2Bsecret").decode()

    def route(seen: Any) -> tuple[int, dict[str, str], bytes]:
        if seen.headers.get("authorization") != expected:
            return 401, {"content-type": "application/json"}, b'{"error":"invalid_client"}'
        from urllib.parse import parse_qs
        form = parse_qs(seen.body.decode())
        answer = answers.get(form["token"][0], {"active": False})
        return 200, {"content-type": "application/json"}, json.dumps(answer).encode()

    idp.routes["/introspect"] = route


async def test_opaque_tokens_are_introspected(start, idp):
    now = int(time.time())
    introspection(idp, {
        "opaque-good": {"active": True, "sub": "user-9", "client_id": "c", "scope": "mcp:tools", "iss": idp.issuer,
                        "aud": AUDIENCE, "exp": now + 60, "token_type": "Bearer"},
        "opaque-other-aud": {"active": True, "sub": "u", "aud": "https://other.test/mcp", "exp": now + 60},
        "opaque-other-iss": {"active": True, "sub": "u", "aud": AUDIENCE, "iss": "https://evil.test"},
        "opaque-no-aud": {"active": True, "sub": "u"},
        "opaque-expired": {"active": True, "sub": "u", "aud": AUDIENCE, "exp": now - 3600},
        "opaque-refresh": {"active": True, "sub": "u", "aud": AUDIENCE, "token_type": "refresh_token"},
    })
    host, _ = await start(jwks_uri=idp.url + "/jwks", introspection_endpoint=idp.url + "/introspect",
                          client_id="rs-client", client_secret="rs+secret")
    principal = await host.authenticate(bearer("opaque-good"))
    assert (principal.subject, principal.issuer, principal.client_id) == ("user-9", idp.issuer, "c")
    assert principal.scopes == {"mcp:tools"}
    expectations = {"opaque-inactive": "not active", "opaque-other-aud": "another resource",
                    "opaque-other-iss": "another issuer", "opaque-no-aud": "no audience",
                    "opaque-expired": "expired", "opaque-refresh": "not a bearer access token"}
    for token, expected in expectations.items():
        error = await refused(host, token)
        assert expected in error.message, (token, error.message)
    assert idp.requests_to("/jwks") == 0  # opaque tokens never touch the JWKS


async def test_introspection_failures_are_errors_not_refusals(start, idp):
    introspection(idp, {})
    _host, plugin = await start(jwks_uri=idp.url + "/jwks", introspection_endpoint=idp.url + "/introspect",
                               client_id="rs-client", client_secret="wrong")
    with pytest.raises(IdentityProviderUnavailable, match="HTTP 401"):
        await plugin.mcphost_authenticate(bearer("opaque-good"))
    idp.routes["/introspect"] = lambda seen: (200, {}, b"[]")
    with pytest.raises(IdentityProviderUnavailable, match="no boolean active"):
        await plugin.mcphost_authenticate(bearer("opaque-good"))


async def test_without_introspection_an_opaque_token_is_malformed(start, idp):
    host, _ = await start(jwks_uri=idp.url + "/jwks")
    assert "not a JWT" in (await refused(host, "opaque-token-value")).message


async def test_a_verified_token_is_remembered_briefly_and_never_past_its_expiry(idp, rsa_key, other_rsa_key):
    from mcphost_jwt import build_authenticator, load_settings
    from mcphost_jwt.verify import VERIFIED_CACHE_SECONDS
    idp.serve_jwks(rsa_key)
    auth = build_authenticator(load_settings({"issuer": idp.issuer, "audience": AUDIENCE, "allow_insecure": True,
                                              "jwks_uri": idp.url + "/jwks", "jwks_min_refresh_seconds": 0,
                                              "jwks_cache_seconds": 30}))
    now = [time.time()]
    auth.clock = auth.keys.clock = lambda: now[0]
    soon = rsa_key.sign(claims_for(idp.issuer, exp=int(now[0]) + 20))
    later = rsa_key.sign(claims_for(idp.issuer, exp=int(now[0]) + 3600))
    first = await auth.verify(later)
    assert await auth.verify(soon)
    [(soon_until, _), (later_until, _)] = sorted(auth._verified.values(), key=lambda entry: entry[0])
    assert soon_until == int(now[0]) + 20 and later_until == now[0] + VERIFIED_CACHE_SECONDS
    # Remembered: the same token does not need the keys again (the issuer could be down meanwhile).
    idp.serve_jwks(other_rsa_key)
    assert await auth.verify(later) is first
    # After the memory lapses the token is checked in full again, against keys fetched anew: its key is gone.
    now[0] += VERIFIED_CACHE_SECONDS + 1
    with pytest.raises(Unauthorized):
        await auth.verify(later)
    await auth.fetcher.aclose()
