"""``[endpoints.NAME]`` with real tokens: a real ``mcphost serve`` (demo, jwt and two small plugins,
``ledger`` with scoped tools and ``desk``), the official Python SDK client in both eras, and raw HTTP
for the statuses. Two endpoints over one catalog with different selections and scopes: each principal
sees and calls only its endpoint's tools; a tool outside the view is answered like an unknown one.
A third endpoint uses search discovery."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from jwt_support import ACCEPT, INIT, Key, McphostServer, claims_for, start_idp, toml_section
from mcp import MCPError
from mcp.client.streamable_http import streamable_http_client

from tests.support.fixtures.distributions import make_distribution
from tests.support.sdk_support import ClientSide, text_of

pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")

REPO_ROOT = Path(__file__).resolve().parents[3]
#: The session era, and 2026-07-28 (the SDK's "auto" mode discovers it, then speaks it).
ERAS = ["legacy", "auto"]

LEDGER = '''
import mcphost


@mcphost.tool(scopes=["ledger:read"])
def ledger_balance(account: str) -> str:
    """Show the balance of one ledger account."""
    return f"balance of {account}: 100"


@mcphost.tool(scopes=["ledger:write"])
def ledger_post_entry(account: str, amount: int) -> str:
    """Write a new entry into the ledger of an account."""
    return f"posted {amount} to {account}"


@mcphost.tool()
def ledger_accounts() -> str:
    """List the accounts the ledger keeps."""
    return "cash, bank"


@mcphost.hookimpl
def mcphost_tools(host):
    return [ledger_balance, ledger_post_entry, ledger_accounts]
'''

DESK = '''
import mcphost


@mcphost.tool()
def ticket_open(subject: str) -> str:
    """Open a support ticket about a customer's problem."""
    return f"opened: {subject}"


@mcphost.tool()
def ticket_close(ticket_id: int) -> str:
    """Close a support ticket once it is solved."""
    return f"closed {ticket_id}"


@mcphost.hookimpl
def mcphost_tools(host):
    return [ticket_open, ticket_close]
'''

ENDPOINTS = """
[endpoints.support]
title = "Support desk"
instructions = "Tickets only."
scopes = ["support"]
[endpoints.support.include]
plugins = ["desk"]
tools = ["echo"]

[endpoints.finance]
name = "finance-server"
scopes = ["finance"]
[endpoints.finance.include]
plugins = ["ledger"]

[endpoints.finder]
discovery = "search"
path = "/find"
[endpoints.finder.exclude]
tools = ["summarize"]
"""


@pytest.fixture
def setup(tmp_path: Path, rsa_key: Key) -> Iterator[tuple[McphostServer, Any]]:
    idp, stub = start_idp()
    idp.serve_jwks(rsa_key)
    site = tmp_path / "site"
    make_distribution(site, "mcphost-endpoint-test", "1.0", {"ledger": "endpoint_ledger", "desk": "endpoint_desk"},
                      {"endpoint_ledger": LEDGER, "endpoint_desk": DESK})
    jwt_section = toml_section({"issuer": idp.issuer, "audience": "{url}", "jwks_uri": idp.url + "/jwks",
                                "allow_insecure": True, "timeout": 8})
    paths = [str(site), str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    try:
        server = McphostServer(tmp_path, jwt_section + ENDPOINTS, plugins="demo,jwt,ledger,desk")
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old

    def token(scope: str, sub: str = "user-42") -> str:
        return rsa_key.sign(claims_for(idp.issuer, audience=server.url, scope=scope, sub=sub))

    yield server, token
    server.stop()
    stub.shutdown()
    stub.server_close()


def base(server: McphostServer) -> str:
    return server.url.rsplit("/mcp", 1)[0]


class Connected:
    def __init__(self, url: str, token: str, mode: str, side: ClientSide | None = None) -> None:
        self.http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"},
                                       timeout=httpx2.Timeout(30, read=60))
        self.side = side or ClientSide()
        self.client = self.side.client(streamable_http_client(url, http_client=self.http), mode)

    async def __aenter__(self) -> Any:
        await self.http.__aenter__()
        return await self.client.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        await self.client.__aexit__(*exc)
        await self.http.__aexit__(*exc)


async def names(client: Any) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


async def unknown_answer(client: Any, name: str) -> tuple[Any, str]:
    with pytest.raises(MCPError) as caught:
        await client.call_tool(name, {"text": "x"})
    return caught.value.code, caught.value.message.replace(name, "<NAME>")


@pytest.mark.parametrize("mode", ERAS)
async def test_two_endpoints_show_and_run_only_their_own_tools(setup, mode):
    server, token = setup
    alice, bob = token("support", "alice"), token("finance ledger:read", "bob")
    async with Connected(base(server) + "/mcp/support", alice, mode) as client:
        assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
        assert await names(client) == {"ticket_open", "ticket_close", "echo"}
        assert client.server_info.name == "support"
        if mode == "legacy":
            assert client.server_info.title == "Support desk"
        assert text_of(await client.call_tool("ticket_open", {"subject": "printer"})) == "opened: printer"
        assert text_of(await client.call_tool("echo", {"text": "hi"})) == "hi"
        # A tool of the catalog outside the view is answered exactly like a name that exists nowhere.
        assert await unknown_answer(client, "ledger_accounts") == await unknown_answer(client, "no_such_tool")
        assert await unknown_answer(client, "progress") == await unknown_answer(client, "no_such_tool")
        # ... a scoped one too (alice lacks ledger:read): no insufficient_scope that would betray it.
        assert await unknown_answer(client, "ledger_balance") == await unknown_answer(client, "no_such_tool")
    async with Connected(base(server) + "/mcp/finance", bob, mode) as client:
        # ledger_post_entry needs ledger:write, which bob lacks: the endpoint's view and scopes intersect.
        assert await names(client) == {"ledger_balance", "ledger_accounts"}
        assert client.server_info.name == "finance-server"
        assert text_of(await client.call_tool("ledger_balance", {"account": "cash"})) == "balance of cash: 100"
        assert await unknown_answer(client, "ticket_open") == await unknown_answer(client, "no_such_tool")
    # The whole catalog stays at /mcp.
    async with Connected(server.url, bob, mode) as client:
        assert {"ticket_open", "ledger_balance", "echo", "progress"} <= await names(client)


def _post(url: str, token: str | None, message: dict[str, Any], **headers: str) -> httpx.Response:
    sent = {"content-type": "application/json", "accept": ACCEPT, **headers}
    if token is not None:
        sent["authorization"] = f"Bearer {token}"
    with httpx.Client(timeout=10) as client:
        return client.post(url, headers=sent, content=json.dumps(message))


def test_endpoint_scopes_are_checked_like_the_mcp_endpoint(setup):
    server, token = setup
    alice = token("support", "alice")
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}
    finance = base(server) + "/mcp/finance"
    anonymous = _post(finance, None, init)
    assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"].startswith("Bearer")
    refused = _post(finance, alice, init)
    assert refused.status_code == 403
    assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]
    assert 'scope="finance"' in refused.headers["www-authenticate"]
    # A session belongs to the endpoint that created it: elsewhere it is unknown.
    created = _post(base(server) + "/mcp/support", alice, init)
    assert created.status_code == 200
    session = created.headers["mcp-session-id"]
    listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    elsewhere = _post(server.url, alice, listed, **{"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"})
    assert elsewhere.status_code == 404
    here = _post(base(server) + "/mcp/support", alice, listed,
                 **{"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"})
    assert here.status_code == 200 and "ticket_open" in here.text and "ledger" not in here.text


@pytest.mark.parametrize("mode", ERAS)
async def test_search_endpoint_lists_two_tools_and_finds_only_what_the_caller_may_use(setup, mode):
    server, token = setup
    reader, writer = token("ledger:read", "reader"), token("ledger:read ledger:write", "writer")
    url = base(server) + "/find"
    async with Connected(url, reader, mode) as client:
        tools = (await client.list_tools()).tools
        assert [tool.name for tool in tools] == ["search_tools", "call_tool"]
        found = await client.call_tool("search_tools", {"query": "write an entry into the ledger", "limit": 10})
        structured = found.structured_content["tools"]
        assert json.loads(text_of(found)) == {"tools": structured}
        assert "ledger_post_entry" not in {tool["name"] for tool in structured}  # needs ledger:write
        assert "ledger_balance" in {tool["name"] for tool in structured}
        balance = next(tool for tool in structured if tool["name"] == "ledger_balance")
        assert balance["inputSchema"]["properties"]["account"]["type"] == "string"
        # summarize is excluded from this endpoint: never found, and unknown when called.
        about = await client.call_tool("search_tools", {"query": "summarize text"})
        assert "summarize" not in {tool["name"] for tool in about.structured_content["tools"]}
        # Hidden tools stay callable directly by name; call_tool runs them with the same checks.
        assert text_of(await client.call_tool("echo", {"text": "direct"})) == "direct"
        ran = await client.call_tool("call_tool", {"name": "ledger_balance", "arguments": {"account": "bank"}})
        assert text_of(ran) == "balance of bank: 100"
        invalid = await client.call_tool("call_tool", {"name": "ledger_balance", "arguments": {"account": 7}})
        assert invalid.is_error and "account" in text_of(invalid)
        with pytest.raises(MCPError) as refused:
            await client.call_tool("call_tool", {"name": "ledger_post_entry",
                                                 "arguments": {"account": "bank", "amount": 1}})
        assert "ledger:write" in refused.value.message
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("call_tool", {"name": "summarize", "arguments": {"text": "x"}})
        assert unknown.value.message == "Unknown tool: summarize"
    async with Connected(url, writer, mode) as client:
        found = await client.call_tool("search_tools", {"query": "write an entry into the ledger", "limit": 3})
        assert found.structured_content["tools"][0]["name"] == "ledger_post_entry"


@pytest.mark.parametrize("mode", ERAS)
async def test_call_tool_runs_a_found_tool_with_progress_and_an_elicitation(setup, mode):
    server, token = setup
    async with Connected(base(server) + "/find", token("mcp:tools"), mode, ClientSide(["accept"])) as client:
        found = await client.call_tool("search_tools", {"query": "report progress steps", "limit": 3})
        assert found.structured_content["tools"][0]["name"] == "progress"
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        result = await client.call_tool("call_tool", {"name": "progress", "arguments": {"steps": 3}},
                                        progress_callback=on_progress)
        assert text_of(result) == "completed 3 steps"
        assert seen == [1, 2, 3]
        asked = await client.call_tool("search_tools", {"query": "ask the user for their name", "limit": 3})
        assert asked.structured_content["tools"][0]["name"] == "greet_user"
        greeted = await client.call_tool("call_tool", {"name": "greet_user", "arguments": {}})
        assert text_of(greeted) == "Hello, Ada!"
