"""The stdio side of the SDK tests: the same flow as the official Python SDK client's in raw JSON
lines over pipes, once per protocol revision, and the recorder (``tests/support/stdio_tee.py``) itself.

What the SDK client does on every transport is in ``test_python_sdk.py``; every message the server
wrote is validated against the official JSON schema of the negotiated revision (``tests/support/wire.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.support.sdk_support import DEMO_TOOLS
from tests.support.stdio_support import (
    LEGACY_REVISIONS,
    paired_server_messages,
    tee_argv,
    validate_wire,
)

FILES_TEMPLATE = "demo://files/{+path}"

# logging/setLevel and ping are deprecated in 2026-07-28; these sessions are 2025-era on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")


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
