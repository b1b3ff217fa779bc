"""The official MCP Python SDK client drives a real ``mcphost serve`` over each transport it has.

Each test runs once per transport (``stdio``: the SDK spawns ``mcphost serve --stdio`` behind
``tests/support/stdio_tee.py``; ``http``: Streamable HTTP through a recording ``httpx2`` client) with
the demo and conformance plugins. After the session every message the server sent is validated
against the official schema of the negotiated revision. Where the transports legitimately differ
(HTTP has a session id, statuses and a DELETE at the end) the test says so for the ``http`` cell.
What exists on one transport only is in ``test_stdio_sdk.py`` (raw JSON lines, the tee) and
``test_http_sdk.py`` (subscriptions on the standalone stream, resumption, session end in raw HTTP).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp.client.session as sdk_session
import mcp_types as types
import pytest
from mcp import MCPError

from tests.support.sdk_support import DEMO_TOOLS, ROOTS, SUMMARY, ClientSide, SdkTarget, text_of
from tests.support.stdio_support import LATEST

FILES_TEMPLATE = "demo://files/{+path}"

# logging/setLevel and ping are deprecated in 2026-07-28; these sessions are 2025-era on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")


@pytest.fixture(params=["stdio", "http"])
def sdk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SdkTarget]:
    """The server the SDK client talks to, over the transport of this test's cell."""
    target = SdkTarget(request.param, tmp_path, "demo,conformance")
    yield target
    target.stop()


def _post_status(sdk: SdkTarget, session_id: str) -> httpx.Response:
    assert sdk.server is not None
    with httpx.Client(timeout=10) as raw:
        return raw.post(sdk.server.url, headers=sdk.server.headers(session_id, mcp_protocol_version=LATEST),
                        json={"jsonrpc": "2.0", "id": 99, "method": "ping"})


async def test_python_sdk_client_drives_every_demo_feature_and_the_wire_is_schema_valid(sdk):
    side = ClientSide(["accept", "decline", "cancel"])
    session_id = None
    async with sdk.connect(side) as client:
        _check_initialize(client)
        await _check_tools(client)
        await _check_client_features(client, side)
        await _check_resources_prompts_and_completion(client)
        # logging
        await client.set_logging_level("warning")
        await client.send_ping()
        if sdk.transport == "http":
            [session_id] = sdk.recorder.session_ids()
            assert _post_status(sdk, session_id).status_code == 200  # live while the client is

    # Everything the server wrote is valid under 2025-11-25.
    assert sdk.validate(LATEST) > 20
    server = sdk.server_messages()
    requests = [m["method"] for m in server if "method" in m and "id" in m]
    assert requests == ["elicitation/create"] * 3 + ["sampling/createMessage", "roots/list"]
    progress = [m["params"] for m in server if m.get("method") == "notifications/progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3, 1, 2, 3, 4]
    tokens = {json.dumps(m["params"]["_meta"]["progressToken"]) for m in sdk.client_messages()
              if m.get("method") == "tools/call" and "progressToken" in m.get("params", {}).get("_meta", {})}
    assert {json.dumps(p["progressToken"]) for p in progress} == tokens

    if sdk.transport == "http":
        _check_http_exchanges(sdk, session_id)


def _check_initialize(client: Any) -> None:
    assert client.protocol_version == LATEST
    assert client.server_info is not None and client.server_info.name == "mcphost"
    assert client.server_info.version
    caps = client.server_capabilities
    for capability in (caps.tools, caps.resources, caps.prompts, caps.completions, caps.logging):
        assert capability is not None, caps
    assert caps.resources.subscribe is True


async def _check_tools(client: Any) -> None:
    # tools/list
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert DEMO_TOOLS | {"test_simple_text", "test_reconnection"} <= set(tools)
    for name in DEMO_TOOLS:
        assert tools[name].input_schema["type"] == "object"
    assert tools["echo"].input_schema["required"] == ["text"]
    assert tools["echo"].input_schema["properties"]["text"]["type"] == "string"
    assert tools["progress"].description

    # tools/call, plain and with progress
    assert text_of(await client.call_tool("echo", {"text": "héllo, wörld"})) == "héllo, wörld"
    assert text_of(await client.call_tool("echo", {"text": "über HTTP"})) == "über HTTP"
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    result = await client.call_tool("progress", {"steps": 3}, progress_callback=on_progress)
    assert text_of(result) == "completed 3 steps"
    assert seen == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]
    seen.clear()
    result = await client.call_tool("progress", {"steps": 4, "delay_ms": 20}, progress_callback=on_progress)
    assert text_of(result) == "completed 4 steps"
    assert seen == [(n, 4, f"step {n} of 4") for n in (1, 2, 3, 4)]


async def _check_client_features(client: Any, side: ClientSide) -> None:
    """Elicitation, sampling and roots: the tools that ask the client back; one conformance fixture."""
    # elicitation: accept, decline, cancel
    assert text_of(await client.call_tool("greet_user", {})) == "Hello, Ada!"
    assert text_of(await client.call_tool("greet_user", {})) == "No greeting: the user chose to decline."
    assert text_of(await client.call_tool("greet_user", {})) == "No greeting: the user chose to cancel."
    assert len(side.elicitations) == 3
    assert side.elicitations[0].message == "What is your name?"
    assert side.elicitations[0].requested_schema["required"] == ["name"]

    # sampling
    assert text_of(await client.call_tool("summarize", {"text": "MCP connects models to tools."})) == SUMMARY
    [sampling] = side.samplings
    assert sampling.max_tokens == 200
    assert "MCP connects models to tools." in sampling.messages[0].content.text

    # roots
    roots = await client.call_tool("list_roots", {})
    assert roots.is_error is not True
    # A list return value is wrapped as {"result": ...}; the text block mirrors structuredContent.
    assert roots.structured_content == {"result": [uri for uri, _ in ROOTS]}
    assert json.loads(text_of(roots)) == roots.structured_content
    assert side.roots_calls == 1

    # a conformance fixture
    assert text_of(await client.call_tool("test_simple_text", {})) == "This is a simple text response for testing."


async def _check_resources_prompts_and_completion(client: Any) -> None:
    # resources
    resources = {r.uri: r for r in (await client.list_resources()).resources}
    assert resources["demo://readme"].mime_type == "text/markdown"
    templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
    assert FILES_TEMPLATE in templates
    readme = (await client.read_resource("demo://readme")).contents
    assert readme[0].mime_type == "text/markdown" and readme[0].text.startswith("# mcphost demo")
    hello = (await client.read_resource("demo://files/hello.txt")).contents
    assert hello[0].uri == "demo://files/hello.txt" and hello[0].text == "hello from a demo file\n"
    todo = (await client.read_resource("demo://files/notes/todo.txt")).contents
    assert todo[0].text
    for uri in ("demo://files/../../etc/passwd", "demo://files//etc/passwd", "demo://files/missing.txt"):
        with pytest.raises(MCPError) as caught:
            await client.read_resource(uri, cache_mode="bypass")
        assert caught.value.code == -32002, uri
        assert "root:" not in caught.value.message

    # prompts
    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    arguments = {a.name: a for a in prompts["review_code"].arguments or []}
    assert arguments["code"].required is True and not arguments["language"].required
    prompt = await client.get_prompt("review_code", {"code": "x = 1", "language": "rust"})
    assert prompt.messages[0].role == "user"
    assert "rust" in prompt.messages[0].content.text and "x = 1" in prompt.messages[0].content.text
    with pytest.raises(MCPError) as caught:
        await client.get_prompt("review_code", {"language": "rust"})
    assert caught.value.code == -32602

    # completion
    language = await client.complete(types.PromptReference(type="ref/prompt", name="review_code"),
                                     {"name": "language", "value": "py"})
    assert language.completion.values == ["python"]
    path = await client.complete(types.ResourceTemplateReference(type="ref/resource", uri=FILES_TEMPLATE),
                                 {"name": "path", "value": "no"})
    assert path.completion.values == ["notes/todo.txt"]


def _check_http_exchanges(sdk: SdkTarget, session_id: Any) -> None:
    # Every request after initialize carried the session and the negotiated revision.
    posts = [e for e in sdk.recorder.exchanges if e.method == "POST"]
    assert posts[0].rpc["method"] == "initialize" and "mcp-session-id" not in posts[0].request_headers
    for exchange in posts[1:]:
        assert exchange.request_headers.get("mcp-session-id") == session_id, exchange
        assert exchange.request_headers.get("mcp-protocol-version") == LATEST, exchange
    # The client's replies to elicitation/create, sampling/createMessage and roots/list were accepted.
    replies = [e for e in posts if e.rpc and "method" not in e.rpc]
    assert len(replies) == 5 and {e.status for e in replies} == {202}
    # Leaving the context ended the session with DELETE; the id is now unknown.
    [delete] = [e for e in sdk.recorder.exchanges if e.method == "DELETE"]
    assert delete.request_headers["mcp-session-id"] == session_id and delete.status == 204
    gone = _post_status(sdk, session_id)
    assert gone.status_code == 404, gone.text


async def test_python_sdk_client_in_auto_mode_speaks_2026_07_28(sdk):
    async with sdk.connect(ClientSide(), mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        assert client.server_info is not None and client.server_info.name == "mcphost"
        assert text_of(await client.call_tool("echo", {"text": "auto"})) == "auto"
        assert DEMO_TOOLS <= {tool.name for tool in (await client.list_tools()).tools}
        # The same ctx.elicit, answered through an input-required round instead of a server request.
        assert text_of(await client.call_tool("greet_user", {})) == "Hello, Ada!"
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        assert text_of(await client.call_tool("progress", {"steps": 3}, progress_callback=on_progress)) \
            == "completed 3 steps"
        assert seen == [1, 2, 3]
    # On the wire: server/discover answered, then stateless requests, no session.
    sent = [m for m in sdk.client_messages() if "method" in m]
    assert sent[0]["method"] == "server/discover"
    assert "initialize" not in [m["method"] for m in sent]
    assert sdk.validate("2026-07-28") >= 4
    if sdk.transport == "http":
        posts = [e for e in sdk.recorder.exchanges if e.method == "POST"]
        assert posts[0].rpc["method"] == "server/discover" and posts[0].status == 200
        assert sdk.recorder.session_ids() == []


@pytest.mark.parametrize("revision", ["2025-03-26", "2025-06-18"])
async def test_python_sdk_client_pinned_to_an_older_revision(sdk, monkeypatch, revision):
    # The SDK's initialize requests LATEST_HANDSHAKE_VERSION; pin it for this session only.
    monkeypatch.setattr(sdk_session, "LATEST_HANDSHAKE_VERSION", revision)
    side = ClientSide()
    async with sdk.connect(side) as client:
        assert client.protocol_version == revision
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert DEMO_TOOLS <= set(tools)
        assert text_of(await client.call_tool("echo", {"text": revision})) == revision
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        await client.call_tool("progress", {"steps": 2}, progress_callback=on_progress)
        assert seen == [1, 2]
        greeting = await client.call_tool("greet_user", {})
        if revision == "2025-03-26":  # elicitation arrived in 2025-06-18: a tool error, no request sent
            assert greeting.is_error is True and side.elicitations == []
        else:
            assert text_of(greeting) == "Hello, Ada!"
        assert text_of(await client.call_tool("summarize", {"text": "abc"})) == SUMMARY
        roots = await client.call_tool("list_roots", {})
        # structuredContent and outputSchema arrived in 2025-06-18.
        assert (roots.structured_content is None) == (revision == "2025-03-26")
        assert (tools["list_roots"].output_schema is None) == (revision == "2025-03-26")
        assert (await client.read_resource("demo://files/hello.txt")).contents[0].text == "hello from a demo file\n"
        prompt = await client.get_prompt("review_code", {"code": "print(1)"})
        assert "python" in prompt.messages[0].content.text
        language = await client.complete(types.PromptReference(type="ref/prompt", name="review_code"),
                                         {"name": "language", "value": "ja"})
        assert language.completion.values == ["java", "javascript"]
        await client.set_logging_level("error")
    assert sdk.validate(revision) > 12
