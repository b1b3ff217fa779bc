"""The auth pieces that need no network: scope hierarchy, credentials, challenges, resource URLs,
the metadata merge, configuration, and scope enforcement in the kernel (in-process clients)."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

import mcphost
from mcphost import Connection, Principal
from mcphost.config import config_from_dict
from mcphost.errors import ConfigError
from mcphost.protocol.auth import (
    bearer_challenge,
    bearer_token,
    canonical_resource_url,
    compose_challenge,
    metadata_url,
    missing_scopes,
    parse_challenge,
    request_resource_url,
    scope_satisfied,
)
from mcphost.protocol.errors import INVALID_REQUEST, McpError
from mcphost.testing import MemoryClient, make_host

# -- the scope hierarchy ------------------------------------------------------------------------------

@pytest.mark.parametrize(("granted", "needed", "ok"), [
    ({"files"}, "files", True),
    ({"files"}, "files:read", True),
    ({"files"}, "files:read:secret", True),
    ({"files:read"}, "files:read:secret", True),
    ({"files:read"}, "files", False),
    ({"files:read"}, "files:write", False),
    ({"files:read"}, "filesystem", False),
    ({"file"}, "files:read", False),
    ({"Files"}, "files:read", False),
    (set(), "files", False),
    ({"files:"}, "files:read", False),
])
def test_a_granted_scope_covers_itself_and_its_descendants_only(granted, needed, ok):
    assert scope_satisfied(frozenset(granted), needed) is ok
    assert mcphost.scope_satisfied(frozenset(granted), needed) is ok


def test_missing_scopes_lists_what_is_not_covered_sorted():
    assert missing_scopes(frozenset({"files"}), ["files:write", "admin", "audit:read"]) == ["admin", "audit:read"]
    assert missing_scopes(frozenset({"admin", "audit"}), ["admin", "audit:read"]) == []


def test_a_principal_takes_a_space_separated_scope_claim():
    assert Principal("a", scopes="files:read  files:write").scopes == {"files:read", "files:write"}  # type: ignore[arg-type]
    assert Principal("a", scopes=["x", "x"]).scopes == frozenset({"x"})  # type: ignore[arg-type]


def test_a_principal_never_shows_or_stores_its_token():
    principal = Principal("alice", issuer="https://as.example", token="tok-secret-1")
    assert "tok-secret-1" not in repr(principal)
    assert "tok-secret-1" not in str(principal.to_state())
    assert principal == Principal("alice", issuer="https://as.example")  # the token is not identity
    assert Principal.from_state(principal.to_state()).token is None


# -- credentials ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "token"), [
    ("Bearer abc.def-ghi_~+/==", "abc.def-ghi_~+/=="),
    ("bearer abc", "abc"),
    ("BEARER   abc  ", "abc"),
    ("Bearer", None),
    ("Bearer ", None),
    ("Basic dXNlcjpwYXNz", None),
    ("Bearer a, Bearer b", None),
    ("Bearer a b", None),
    ('Bearer "abc"', None),
    ("Bearer a=b", None),
    ("", None),
    (None, None),
])
def test_bearer_token_accepts_exactly_one_token68(value, token):
    assert bearer_token(value) == token


# -- challenges ----------------------------------------------------------------------------------------

def test_bearer_challenge_escapes_values_and_strips_control_characters():
    text = bearer_challenge(error="invalid_token", description='say "hi"\r\nX-Evil: 1 \\ ü')
    assert text == r'Bearer error="invalid_token", error_description="say \"hi\"X-Evil: 1 \\ ?"'
    assert parse_challenge(text) == ("Bearer", [("error", "invalid_token"),
                                                ("error_description", 'say "hi"X-Evil: 1 \\ ?')])


def test_compose_adds_resource_metadata_and_scope_where_missing():
    prm = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    assert compose_challenge("Bearer", resource_metadata=prm, scope="a b") == \
        f'Bearer scope="a b", resource_metadata="{prm}"'
    given = 'bearer realm="x", error=invalid_token, scope="c", resource_metadata="https://other/"'
    assert compose_challenge(given, resource_metadata=prm, scope="a b") == \
        'Bearer realm="x", error="invalid_token", scope="c", resource_metadata="https://other/"'
    assert compose_challenge("Bearer", resource_metadata=None, scope=None) == "Bearer"


def test_compose_keeps_what_parses_and_drops_the_rest_of_a_malformed_challenge():
    broken = 'Bearer error="invalid_token", error_description="a "quoted" word", evil=1'
    assert compose_challenge(broken, resource_metadata="https://x/m", scope=None) == \
        'Bearer error="invalid_token", resource_metadata="https://x/m", error_description="a "'
    unterminated = 'Bearer error="invalid_token", error_description="never closed'
    assert compose_challenge(unterminated, resource_metadata=None, scope=None) == 'Bearer error="invalid_token"'


def test_compose_leaves_other_schemes_alone_but_header_safe():
    assert compose_challenge('Basic realm="x"\r\nSet-Cookie: a=b', resource_metadata="https://x/m", scope="s") == \
        'Basic realm="x"Set-Cookie: a=b'


def test_insufficient_scope_renders_one_challenge_with_all_scopes():
    refusal = mcphost.InsufficientScope(["files:write", "files:read", "files:write"])
    assert isinstance(refusal, mcphost.Forbidden) and refusal.status == 403
    assert refusal.scopes == ("files:read", "files:write")
    assert refusal.headers == {"WWW-Authenticate": 'Bearer error="insufficient_scope", scope="files:read '
                               'files:write", error_description="Insufficient scope: this operation needs '
                               'files:read files:write"'}


def test_unauthorized_keeps_a_given_challenge_and_builds_one_from_an_error_code():
    assert mcphost.Unauthorized().headers == {"WWW-Authenticate": "Bearer"}
    assert mcphost.Unauthorized(challenge='Bearer realm="r"').headers == {"WWW-Authenticate": 'Bearer realm="r"'}
    assert mcphost.Unauthorized("Expired", error="invalid_token").headers == {
        "WWW-Authenticate": 'Bearer error="invalid_token", error_description="Expired"'}


# -- canonical resource URLs ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("given", "canonical"), [
    ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp"),
    ("HTTPS://MCP.Example.COM/mcp/", "https://mcp.example.com/mcp"),
    ("https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp"),
    ("http://localhost:8000/mcp", "http://localhost:8000/mcp"),
    ("https://mcp.example.com:8443/Public/MCP", "https://mcp.example.com:8443/Public/MCP"),
    ("https://mcp.example.com", "https://mcp.example.com"),
    ("https://[::1]:9000/mcp", "https://[::1]:9000/mcp"),
])
def test_canonical_resource_url(given, canonical):
    assert canonical_resource_url(given) == canonical


@pytest.mark.parametrize(("given", "problem"), [
    ("mcp.example.com/mcp", "absolute http(s) URL"),
    ("ftp://mcp.example.com/mcp", "absolute http(s) URL"),
    ("https:///mcp", "no host"),
    ("https://mcp.example.com/mcp#frag", "fragment"),
    ("https://mcp.example.com/mcp#", "fragment"),
    ("https://mcp.example.com/mcp?x=1", "query"),
    ("https://user:pw@mcp.example.com/mcp", "user information"),
    ("https://mcp.example.com:99999/mcp", "not a valid URL"),
])
def test_a_bad_resource_url_is_refused_saying_why(given, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        canonical_resource_url(given)


def test_metadata_url_inserts_the_well_known_prefix_before_the_path():
    assert metadata_url("https://mcp.example.com/public/mcp") == \
        "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp"
    assert metadata_url("https://mcp.example.com") == "https://mcp.example.com/.well-known/oauth-protected-resource"


@pytest.mark.parametrize("host_header", ["evil.example/x?", "a b", "", "x\r\ny", "[zz]"])
def test_a_strange_host_header_is_not_echoed_into_the_resource_url(host_header):
    assert request_resource_url("http", host_header, "/mcp") == "http://localhost/mcp"


def test_configured_resource_url_is_canonicalized_and_checked():
    config = config_from_dict({"server": {"resource_url": "HTTPS://MCP.example.com/mcp/"}})
    assert config.server.resource_url == "https://mcp.example.com/mcp"
    assert config_from_dict({}).server.resource_url is None
    with pytest.raises(ConfigError, match=r"server.resource_url: 'https://x/mcp#a' must not contain a fragment"):
        config_from_dict({"server": {"resource_url": "https://x/mcp#a"}})
    env = {"MCPHOST_RESOURCE_URL": "https://Env.example/mcp", "MCPHOST_ALLOW_ANONYMOUS": "yes"}
    server = config_from_dict({}, env=env).server
    assert server.resource_url == "https://env.example/mcp" and server.allow_anonymous is True


# -- the protected resource metadata merge --------------------------------------------------------------------

class Metadata:
    def __init__(self, document: Any) -> None:
        self.document = document

    @mcphost.hookimpl
    def mcphost_protected_resource_metadata(self, host):
        if isinstance(self.document, Exception):
            raise self.document
        return self.document


class AsyncMetadata(Metadata):
    @mcphost.hookimpl
    async def mcphost_protected_resource_metadata(self, host):
        return self.document


class Auth:
    @mcphost.hookimpl
    def mcphost_authenticate(self, request):
        return None


async def test_metadata_is_merged_in_plugin_order(caplog):
    host = make_host(
        Metadata({"authorization_servers": ["https://a.example"], "scopes_supported": ["files:read"],
                  "resource_name": "first", "resource": "https://ignored.example",
                  "bearer_methods_supported": ["body"]}),
        AsyncMetadata({"authorization_servers": ["https://b.example", "https://a.example"],
                       "scopes_supported": ["offline_access", "files:read", "notes"], "resource_name": "second",
                       "resource_documentation": "https://docs.example"}),
        Metadata(None),
        config={"server": {"resource_url": "https://mcp.example.com/mcp"}})
    with caplog.at_level(logging.INFO, "mcphost.auth"):
        await host.start()
    try:
        assert host.resource_server.metadata("http", "127.0.0.1:1") == {
            "resource": "https://mcp.example.com/mcp",
            "authorization_servers": ["https://a.example", "https://b.example"],
            "scopes_supported": ["files:read", "notes"],
            "resource_name": "second",
            "resource_documentation": "https://docs.example",
            "bearer_methods_supported": ["header"],
        }
        assert host.resource_server.baseline_scope == "files:read notes"
        assert "offline_access left out of scopes_supported" in caplog.text
        assert "'resource' is ignored" in caplog.text
    finally:
        await host.stop()


@pytest.mark.parametrize(("documents", "logged"), [
    ([{"scopes_supported": ["a"]}], "names no authorization_servers"),
    ([["https://a.example"]], "returned list, expected a dict"),
    ([{"authorization_servers": "https://a.example"}], "authorization_servers must be a list of non-empty strings"),
    ([RuntimeError("metadata service down")], "mcphost_protected_resource_metadata raised"),
])
async def test_unusable_metadata_is_left_out_with_a_log_line(caplog, documents, logged):
    host = make_host(*(Metadata(d) for d in documents))
    await host.start()
    try:
        assert host.resource_server.metadata("http", "localhost") is None
        assert logged in caplog.text
    finally:
        await host.stop()


def test_the_audience_for_a_request_is_the_configured_url_or_the_request_s_own():
    request = Connection(transport="http", headers={"host": "MCP.example.com:8000"}, scheme="https")
    assert make_host().resource_server.resource_url_for(request) == "https://mcp.example.com:8000/mcp"
    configured = make_host(config={"server": {"resource_url": "https://public.example/mcp"}})
    assert configured.resource_server.resource_url_for(request) == "https://public.example/mcp"


def test_metadata_paths_cover_the_mcp_path_the_public_path_and_the_root():
    host = make_host(config={"server": {"path": "/mcp", "resource_url": "https://x.example/public/mcp"}})
    assert host.resource_server.metadata_paths() == [
        "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource/public/mcp",
        "/.well-known/oauth-protected-resource"]


def test_a_refusal_s_headers_are_made_header_safe():
    host = make_host(Auth())
    refusal = mcphost.Forbidden("no", headers={"X-Reason": "a\r\nb", "Bad Name": "x", "WWW-Authenticate": "Bearer"})
    assert host.resource_server.response_headers(refusal, "http", "localhost") == {
        "X-Reason": "ab", "WWW-Authenticate": "Bearer"}


# -- scopes in the kernel ----------------------------------------------------------------------------------

@mcphost.tool(scopes=["notes:write"])
def write_note(text: str) -> str:
    """Write a note."""
    return f"noted {text}"


@mcphost.tool
def open_tool() -> str:
    """Anyone."""
    return "open"


@mcphost.resource_template("notes://{id}", name="note", scopes=["notes:read"],
                           completions={"id": lambda value, context: ["1", "2"]})
def note(id: str) -> str:
    return f"note {id}"


class Notes:
    @mcphost.hookimpl
    def mcphost_tools(self, host):
        return [write_note, open_tool]

    @mcphost.hookimpl
    def mcphost_resource_templates(self, host):
        return [note]


def network(principal: Principal | None) -> Connection:
    return Connection(transport="http", principal=principal)


async def test_a_network_client_without_the_scopes_neither_sees_nor_calls_the_record():
    host = make_host(Notes())
    reader = Principal("ann", scopes=frozenset({"notes:read"}))
    async with MemoryClient(host, connection=network(reader)) as client:
        assert [t["name"] for t in await client.list_tools()] == ["open_tool"]
        assert [t["uriTemplate"] for t in await client.list_resource_templates()] == ["notes://{id}"]
        with pytest.raises(McpError) as refused:
            await client.call_tool("write_note", {"text": "x"})
        assert refused.value.code == INVALID_REQUEST
        assert refused.value.data == {"requiredScopes": ["notes:write"]}
        assert (await client.read_resource("notes://7"))["contents"][0]["text"] == "note 7"
    async with MemoryClient(host, connection=network(None)) as client:  # anonymous over the network
        assert [t["uriTemplate"] for t in await client.list_resource_templates()] == []
        with pytest.raises(McpError) as refused:
            await client.read_resource("notes://7")
        assert refused.value.data == {"requiredScopes": ["notes:read"]}
        with pytest.raises(McpError):
            await client.complete({"type": "ref/resource", "uri": "notes://{id}"}, "id", "")
    writer = Principal("bo", scopes=frozenset({"notes"}))  # the parent scope covers notes:write
    async with MemoryClient(host, connection=network(writer)) as client:
        assert (await client.call_tool("write_note", {"text": "x"}))["content"][0]["text"] == "noted x"


async def test_a_local_client_is_trusted_with_every_record():
    host = make_host(Notes())
    async with MemoryClient(host) as client:  # like stdio: no credentials, the local user
        assert {t["name"] for t in await client.list_tools()} == {"write_note", "open_tool"}
        assert (await client.call_tool("write_note", {"text": "y"}))["content"][0]["text"] == "noted y"


async def test_authorize_refuses_before_anything_runs_and_costs_nothing_without_scopes():
    host = make_host(Notes())
    async with MemoryClient(host):
        kernel = host.kernel
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "write_note"}}
        with pytest.raises(mcphost.InsufficientScope) as refused:
            kernel.authorize(call, Principal("ann", scopes=frozenset({"notes:read"})))
        assert refused.value.scopes == ("notes:write",)
        kernel.authorize(call, Principal("bo", scopes=frozenset({"notes:write"})))
        kernel.authorize(call, None, trusted=True)
        for odd in (None, [], {"method": 3}, {"method": "tools/call", "params": "x"},
                    {"method": "tools/call", "params": {"name": ["x"]}}, {"method": "resources/read", "params": {}}):
            kernel.authorize(odd, None)  # malformed requests are the handlers' business
    plain = make_host(Auth())
    async with MemoryClient(plain):
        assert not plain.catalog.scoped_kinds  # authorize returns at once


async def test_middleware_and_ctx_see_the_principal_of_the_request():
    seen: list[Any] = []

    @mcphost.middleware
    async def record(request, call_next):
        seen.append(request.principal)
        return await call_next(request)

    @mcphost.tool
    def me(*, ctx: mcphost.Context) -> str:
        assert ctx.principal is not None and ctx.session.principal is not None
        return f"{','.join(sorted(ctx.principal.scopes))}/{','.join(sorted(ctx.session.principal.scopes))}"

    class Plugin:
        @mcphost.hookimpl
        def mcphost_middleware(self, host):
            return [record]

        @mcphost.hookimpl
        def mcphost_tools(self, host):
            return [me]

    host = make_host(Plugin())
    first = Principal("ann", scopes=frozenset({"a"}))
    async with MemoryClient(host, connection=network(first)) as client:
        assert (await client.call_tool("me"))["content"][0]["text"] == "a/a"
        # A refreshed token of the same identity, as the HTTP transport hands it over per request.
        refreshed = Principal("ann", scopes=frozenset({"a", "b"}))
        future = host.kernel.receive(client.session, {"jsonrpc": "2.0", "id": 99, "method": "tools/call",
                                                      "params": {"name": "me", "arguments": {}}}, principal=refreshed)
        assert (await future)["result"]["content"][0]["text"] == "a,b/a"  # the session keeps the first
    assert seen[-1] is refreshed and seen[-2] is first


@pytest.mark.parametrize("scopes", [["has space"], ['quo"te'], [""], [3]])
def test_records_with_invalid_scopes_are_refused_at_collection(scopes):
    broken = mcphost.Tool(name="broken", fn=lambda: "x", input_schema={"type": "object"}, scopes=scopes)  # type: ignore[arg-type]

    class Plugin:
        @mcphost.hookimpl
        def mcphost_tools(self, host):
            return [broken]

    host = make_host(Plugin())
    host.prepare()
    assert "broken" not in host.catalog.tools
    [info] = [info for info in host.plugin_infos.values() if info.status == "failed"]
    assert "scope" in (info.error or "")


def test_a_string_is_not_a_list_of_scopes():
    with pytest.raises(TypeError, match="list of scope strings"):
        mcphost.tool(scopes="files:read")(lambda: None)  # type: ignore[arg-type]
