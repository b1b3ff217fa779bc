"""The official MCP Python SDK client drives ``mcphost serve --stdio`` with mcphost-demo installed.

The server runs behind ``tests/support/stdio_tee.py``, which records every line in both directions, so
after each session every message the server wrote is validated against the official JSON schema
of the negotiated revision (``tests/support/wire.py``). The SDK's ``initialize`` always asks for its
latest handshake revision; the older revisions are reached by pinning the module constant the
SDK reads for that request, and independently with raw JSON lines over pipes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp.client.session as sdk_session
import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters

from tests.support.stdio_support import (
    LATEST,
    LEGACY_REVISIONS,
    paired_server_messages,
    read_jsonl,
    server_env,
    tee_argv,
    validate_capture,
    validate_wire,
)

DEMO_TOOLS = {"echo", "progress", "greet_user", "summarize", "list_roots"}
ROOTS = [("file:///work/project", "project"), ("file:///work/docs", "docs")]
FILES_TEMPLATE = "demo://files/{+path}"

# logging/setLevel and ping are deprecated in 2026-07-28; these sessions are 2025-era on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")


class Recording:
    """Where one tee'd session is recorded, and the SDK parameters that start it."""

    def __init__(self, tmp_path: Path, name: str = "session") -> None:
        self.server_out = tmp_path / f"{name}-server.jsonl"
        self.client_in = tmp_path / f"{name}-client.jsonl"
        argv = tee_argv(self.server_out, self.client_in)
        self.params = StdioServerParameters(command=argv[0], args=argv[1:], env=server_env(tmp_path))

    def server_messages(self) -> list[Any]:
        return read_jsonl(self.server_out)

    def client_messages(self) -> list[Any]:
        return read_jsonl(self.client_in)

    def validate(self, revision: str) -> int:
        return validate_capture(revision, self.server_out, self.client_in)


class ClientSide:
    """The callbacks a client answers server requests with, and what they saw."""

    def __init__(self, elicit_actions: list[str] | None = None) -> None:
        self.elicit_actions = list(elicit_actions or ["accept"])
        self.elicitations: list[Any] = []
        self.samplings: list[Any] = []
        self.roots_calls = 0
        self.logs: list[Any] = []

    async def elicit(self, context: Any, params: Any) -> types.ElicitResult:
        self.elicitations.append(params)
        action = self.elicit_actions.pop(0) if self.elicit_actions else "accept"
        if action == "accept":
            return types.ElicitResult(action="accept", content={"name": "Ada"})
        return types.ElicitResult(action=action)

    async def sample(self, context: Any, params: Any) -> types.CreateMessageResult:
        self.samplings.append(params)
        return types.CreateMessageResult(role="assistant", model="sdk-test-model", stop_reason="endTurn",
                                         content=types.TextContent(type="text", text="A one-line summary."))

    async def roots(self, context: Any) -> types.ListRootsResult:
        self.roots_calls += 1
        return types.ListRootsResult(roots=[types.Root(uri=uri, name=name) for uri, name in ROOTS])

    async def log(self, params: Any) -> None:
        self.logs.append(params)

    def client(self, recording: Recording, mode: str = "legacy") -> Client:
        return Client(recording.params, mode=mode, elicitation_callback=self.elicit, sampling_callback=self.sample,
                      list_roots_callback=self.roots, logging_callback=self.log, read_timeout_seconds=30)


def _text(result: Any) -> str:
    assert len(result.content) == 1, result
    assert result.content[0].type == "text"
    return result.content[0].text


async def test_python_sdk_client_drives_every_demo_feature_and_the_wire_is_schema_valid(tmp_path):
    recording = Recording(tmp_path)
    side = ClientSide(["accept", "decline", "cancel"])
    async with side.client(recording) as client:
        # initialize
        assert client.protocol_version == LATEST
        assert client.server_info is not None and client.server_info.name == "mcphost"
        assert client.server_info.version
        caps = client.server_capabilities
        for capability in (caps.tools, caps.resources, caps.prompts, caps.completions, caps.logging):
            assert capability is not None, caps

        # tools/list
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert DEMO_TOOLS <= set(tools)
        for name in DEMO_TOOLS:
            assert tools[name].input_schema["type"] == "object"
        assert tools["echo"].input_schema["required"] == ["text"]
        assert tools["echo"].input_schema["properties"]["text"]["type"] == "string"
        assert tools["progress"].description

        # tools/call, plain and with progress
        assert _text(await client.call_tool("echo", {"text": "héllo, wörld"})) == "héllo, wörld"
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        result = await client.call_tool("progress", {"steps": 3}, progress_callback=on_progress)
        assert _text(result) == "completed 3 steps"
        assert seen == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]

        # elicitation: accept, decline, cancel
        assert _text(await client.call_tool("greet_user", {})) == "Hello, Ada!"
        assert _text(await client.call_tool("greet_user", {})) == "No greeting: the user chose to decline."
        assert _text(await client.call_tool("greet_user", {})) == "No greeting: the user chose to cancel."
        assert len(side.elicitations) == 3
        assert side.elicitations[0].message == "What is your name?"
        assert side.elicitations[0].requested_schema["required"] == ["name"]

        # sampling
        assert _text(await client.call_tool("summarize", {"text": "MCP connects models to tools."})) == (
            "A one-line summary.")
        [sampling] = side.samplings
        assert sampling.max_tokens == 200
        assert "MCP connects models to tools." in sampling.messages[0].content.text

        # roots
        roots = await client.call_tool("list_roots", {})
        assert roots.is_error is not True
        # A list return value is wrapped as {"result": ...}; the text block mirrors structuredContent.
        assert roots.structured_content == {"result": [uri for uri, _ in ROOTS]}
        assert json.loads(_text(roots)) == roots.structured_content
        assert side.roots_calls == 1

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

        # logging
        await client.set_logging_level("warning")
        await client.send_ping()

    # Everything the server wrote is valid under 2025-11-25.
    assert recording.validate(LATEST) > 20
    server = recording.server_messages()
    requests = [m["method"] for m in server if "method" in m and "id" in m]
    assert requests.count("elicitation/create") == 3
    assert requests.count("sampling/createMessage") == 1 and requests.count("roots/list") == 1
    progress = [m["params"] for m in server if m.get("method") == "notifications/progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3]
    tokens = {json.dumps(m["params"]["_meta"]["progressToken"]) for m in recording.client_messages()
              if m.get("method") == "tools/call" and "progressToken" in m.get("params", {}).get("_meta", {})}
    assert {json.dumps(p["progressToken"]) for p in progress} == tokens


async def test_python_sdk_client_in_auto_mode_speaks_2026_07_28(tmp_path):
    recording = Recording(tmp_path, "auto")
    async with ClientSide().client(recording, mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        assert client.server_info is not None and client.server_info.name == "mcphost"
        assert _text(await client.call_tool("echo", {"text": "auto"})) == "auto"
        assert DEMO_TOOLS <= {tool.name for tool in (await client.list_tools()).tools}
        # The same ctx.elicit, answered through an input-required round instead of a server request.
        assert _text(await client.call_tool("greet_user", {})) == "Hello, Ada!"
    sent = [m for m in recording.client_messages() if "method" in m]
    assert sent[0]["method"] == "server/discover"
    assert "initialize" not in [m["method"] for m in sent]
    assert recording.validate("2026-07-28") >= 4


@pytest.mark.parametrize("revision", ["2025-03-26", "2025-06-18"])
async def test_python_sdk_client_pinned_to_an_older_revision(tmp_path, monkeypatch, revision):
    # The SDK's initialize requests LATEST_HANDSHAKE_VERSION; pin it for this session only.
    monkeypatch.setattr(sdk_session, "LATEST_HANDSHAKE_VERSION", revision)
    recording = Recording(tmp_path, revision)
    side = ClientSide()
    async with side.client(recording) as client:
        assert client.protocol_version == revision
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert DEMO_TOOLS <= set(tools)
        assert _text(await client.call_tool("echo", {"text": revision})) == revision
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        await client.call_tool("progress", {"steps": 2}, progress_callback=on_progress)
        assert seen == [1, 2]
        greeting = await client.call_tool("greet_user", {})
        if revision == "2025-03-26":  # elicitation arrived in 2025-06-18: a tool error, no request sent
            assert greeting.is_error is True and side.elicitations == []
        else:
            assert _text(greeting) == "Hello, Ada!"
        assert _text(await client.call_tool("summarize", {"text": "abc"})) == "A one-line summary."
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
    assert recording.validate(revision) > 12


# -- the same flow in raw JSON lines, once per revision ------------------------------------------------

def _answer(request: dict[str, Any]) -> dict[str, Any]:
    method = request["method"]
    if method == "elicitation/create":
        return {"action": "accept", "content": {"name": "Grace"}}
    if method == "sampling/createMessage":
        return {"role": "assistant", "content": {"type": "text", "text": "raw summary"}, "model": "raw"}
    if method == "roots/list":
        return {"roots": [{"uri": "file:///raw", "name": "raw"}]}
    raise AssertionError(f"unexpected server request {method}")


@pytest.mark.parametrize("revision", LEGACY_REVISIONS)
def test_raw_json_lines_session_validates_against_each_revision(stdio_server, revision):
    server = stdio_server()
    capabilities = {"sampling": {}, "roots": {"listChanged": True}}
    if revision != "2025-03-26":
        capabilities["elicitation"] = {}
    init = server.initialize(revision, capabilities)
    assert init["protocolVersion"] == revision
    assert init["serverInfo"]["name"] == "mcphost"
    assert {"tools", "resources", "prompts", "completions", "logging"} <= set(init["capabilities"])

    def call(name: str, arguments: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return server.result("tools/call", {"name": name, "arguments": arguments, **kwargs}, answer=_answer)

    tools = server.result("tools/list")["tools"]
    assert DEMO_TOOLS <= {tool["name"] for tool in tools}
    by_name = {tool["name"]: tool for tool in tools}
    assert ("outputSchema" in by_name["list_roots"]) == (revision != "2025-03-26")
    assert call("echo", {"text": "raw"})["content"] == [{"type": "text", "text": "raw"}]
    assert call("progress", {"steps": 4}, _meta={"progressToken": f"tok-{revision}"})["content"][0]["text"] == (
        "completed 4 steps")
    progress = [n["params"] for n in server.notifications if n["method"] == "notifications/progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3, 4]
    assert {p["progressToken"] for p in progress} == {f"tok-{revision}"}
    greeting = call("greet_user", {})
    if revision == "2025-03-26":
        assert greeting["isError"] is True
    else:
        assert greeting["content"][0]["text"] == "Hello, Grace!"
    assert call("summarize", {"text": "t"})["content"][0]["text"] == "raw summary"
    roots = call("list_roots", {})
    assert ("structuredContent" in roots) == (revision != "2025-03-26")
    assert server.result("resources/list")["resources"][0]["uri"] == "demo://readme"
    assert server.result("resources/templates/list")["resourceTemplates"][0]["uriTemplate"] == FILES_TEMPLATE
    assert server.result("resources/read", {"uri": "demo://readme"})["contents"][0]["mimeType"] == "text/markdown"
    assert server.result("resources/read", {"uri": "demo://files/hello.txt"})["contents"][0]["text"] == (
        "hello from a demo file\n")
    missing = server.request("resources/read", {"uri": "demo://files/../../etc/passwd"})
    assert missing["error"]["code"] == -32002
    assert server.result("resources/subscribe", {"uri": "demo://readme"}) == {}
    assert server.result("resources/unsubscribe", {"uri": "demo://readme"}) == {}
    assert server.result("prompts/list")["prompts"][0]["name"] == "review_code"
    assert "go" in server.result("prompts/get", {"name": "review_code",
                                                 "arguments": {"code": "x", "language": "go"}})[
        "messages"][0]["content"]["text"]
    assert server.request("prompts/get", {"name": "review_code"})["error"]["code"] == -32602
    completion = server.result("completion/complete", {"ref": {"type": "ref/resource", "uri": FILES_TEMPLATE},
                                                       "argument": {"name": "path", "value": "he"}})
    assert completion["completion"]["values"] == ["hello.txt"]
    assert server.result("logging/setLevel", {"level": "debug"}) == {}
    assert server.result("ping") == {}
    assert server.request("tools/call", {"name": "nope"})["error"]["code"] == -32602
    server.send_bytes(b"{not json\n")  # an id-less error on the wire as well
    assert server.recv()["error"]["code"] == -32700
    assert server.close() == 0
    pairs = paired_server_messages([json.loads(line) for line in server.stdout_lines], server.sent)
    assert validate_wire(revision, pairs) > 25


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))


# -- the recorder itself ---------------------------------------------------------------------------------

_FAKE_SERVER = """
import sys
for line in sys.stdin.buffer:
    sys.stdout.buffer.write(b"<" + line)
    sys.stdout.buffer.flush()
sys.stdout.buffer.write(b"bye\\n")
sys.exit(3)
"""


def test_the_tee_records_both_directions_byte_for_byte_and_keeps_the_exit_code(tmp_path):
    server_out, client_in = tmp_path / "out.bin", tmp_path / "in.bin"
    sent = b"".join([b'{"a":"\\u00e9 \xc3\xa9"}\n', b"x" * 200_000 + b"\n", b"\xff\xfe raw bytes\n", b"last"])
    proc = subprocess.run(tee_argv(server_out, client_in, [sys.executable, "-c", _FAKE_SERVER]), input=sent,
                          capture_output=True, timeout=30)
    expected = b"".join(b"<" + line for line in sent.splitlines(keepends=True)) + b"bye\n"
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == expected
    assert server_out.read_bytes() == expected
    assert client_in.read_bytes() == sent
