"""Tests of the mcphost-demo plugin, written the way a plugin author would write them.

They use mcphost's test kit (the ``mcphost_host`` and ``mcphost_client`` fixtures, registered
through mcphost's ``pytest11`` entry point): a Host serving exactly this plugin, and an
in-memory client that speaks real JSON-RPC messages to it and answers elicitation, sampling
and roots requests with callbacks.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import mcphost_demo
import pytest

import mcphost

pytestmark = pytest.mark.asyncio

FILES = "demo://files/{+path}"
NOT_FOUND = -32002
INVALID_PARAMS = -32602


@pytest.fixture
def demo_host(mcphost_host):
    return mcphost_host(mcphost_demo)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A root directory with files inside, and a secret beside it that must stay unreachable."""
    served = tmp_path / "served"
    (served / "deep" / "er").mkdir(parents=True)
    (served / "top.txt").write_text("top level\n", encoding="utf-8")
    (served / "deep" / "er" / "leaf.md").write_text("# leaf\n", encoding="utf-8")
    (served / "image.bin").write_bytes(b"\x89PNG\xff\x00")
    (tmp_path / "secret.txt").write_text("the secret\n", encoding="utf-8")
    return served


def _text(result: dict[str, Any]) -> str:
    assert not result.get("isError"), result
    [block] = result["content"]
    assert block["type"] == "text"
    return block["text"]


async def _error_code(coroutine: Any) -> int:
    with pytest.raises(mcphost.McpError) as caught:
        await coroutine
    return caught.value.code


# -- tools ------------------------------------------------------------------------------------------

async def test_the_catalog_lists_the_demo_tools_with_schemas(demo_host, mcphost_client):
    async with mcphost_client(demo_host) as client:
        tools = {tool["name"]: tool for tool in await client.list_tools()}
    assert set(tools) >= {"echo", "progress", "greet_user", "summarize", "list_roots"}
    assert tools["echo"]["inputSchema"] == {"type": "object", "properties": {"text": {"type": "string"}},
                                            "required": ["text"], "additionalProperties": False}
    assert tools["progress"]["inputSchema"]["properties"]["steps"]["default"] == 5
    assert tools["echo"]["annotations"]["readOnlyHint"] is True


async def test_echo_returns_the_text_unchanged(demo_host, mcphost_client):
    async with mcphost_client(demo_host) as client:
        for text in ("hello", "", "ünïcødé ✓", "line\nbreak"):
            assert _text(await client.call_tool("echo", {"text": text})) == text
        bad = await client.call_tool("echo", {})
    assert bad["isError"] is True and "text" in bad["content"][0]["text"]


async def test_progress_sends_one_increasing_notification_per_step(demo_host, mcphost_client):
    async with mcphost_client(demo_host) as client:
        result = await client.call_tool("progress", {"steps": 4}, progress_token="tok")
        notes = [n["params"] for n in client.notifications if n["method"] == "notifications/progress"]
    assert _text(result) == "completed 4 steps"
    assert notes == [{"progressToken": "tok", "progress": step, "total": 4, "message": f"step {step} of 4"}
                     for step in range(1, 5)]


async def test_progress_without_a_token_sends_nothing_and_clamps_steps(demo_host, mcphost_client):
    async with mcphost_client(demo_host) as client:
        assert _text(await client.call_tool("progress", {"steps": 2})) == "completed 2 steps"
        assert _text(await client.call_tool("progress", {"steps": -3}, progress_token=1)) == "completed 0 steps"
        assert [n for n in client.notifications if n["method"] == "notifications/progress"] == []


async def test_progress_honours_the_delay(demo_host, mcphost_client):
    import time
    async with mcphost_client(demo_host) as client:
        started = time.monotonic()
        await client.call_tool("progress", {"steps": 3, "delay_ms": 50}, progress_token="t")
    assert time.monotonic() - started >= 0.14


@pytest.mark.parametrize("action,expected", [
    ("accept", "Hello, Ada!"),
    ("decline", "No greeting: the user chose to decline."),
    ("cancel", "No greeting: the user chose to cancel."),
])
async def test_greet_user_asks_for_a_name_by_elicitation(demo_host, mcphost_client, action, expected):
    asked: list[dict[str, Any]] = []

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"name": "Ada"}} if action == "accept" else {"action": action}

    async with mcphost_client(demo_host, elicitation=elicit) as client:
        assert _text(await client.call_tool("greet_user")) == expected
    [params] = asked
    assert params["message"] == "What is your name?"
    assert params["requestedSchema"]["required"] == ["name"]


async def test_greet_user_fails_cleanly_without_elicitation_or_with_an_invalid_answer(demo_host, mcphost_client):
    async with mcphost_client(demo_host) as client:
        refused = await client.call_tool("greet_user")
    assert refused["isError"] is True and "elicitation" in refused["content"][0]["text"]
    async with mcphost_client(demo_host, elicitation=lambda p: {"action": "accept", "content": {"name": ""}}) as c:
        invalid = await c.call_tool("greet_user")
    assert invalid["isError"] is True


async def test_summarize_asks_the_client_model_by_sampling(demo_host, mcphost_client):
    requests: list[dict[str, Any]] = []

    async def sample(params: dict[str, Any]) -> dict[str, Any]:
        requests.append(params)
        return {"role": "assistant", "content": {"type": "text", "text": "It is short."}, "model": "test"}

    async with mcphost_client(demo_host, sampling=sample) as client:
        assert _text(await client.call_tool("summarize", {"text": "A very long story."})) == "It is short."
    [params] = requests
    assert params["maxTokens"] == 200
    assert "A very long story." in params["messages"][0]["content"]["text"]


async def test_summarize_accepts_a_list_of_content_blocks(demo_host, mcphost_client):
    def sample(params: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "model": "m",
                "content": [{"type": "image", "data": "AA==", "mimeType": "image/png"},
                            {"type": "text", "text": "From a list."}]}

    async with mcphost_client(demo_host, sampling=sample) as client:
        assert _text(await client.call_tool("summarize", {"text": "x"})) == "From a list."


async def test_list_roots_returns_the_client_roots(demo_host, mcphost_client):
    roots = [{"uri": "file:///home/ada/project", "name": "project"}, {"uri": "file:///tmp"}]
    async with mcphost_client(demo_host, roots=roots) as client:
        result = await client.call_tool("list_roots")
    assert result["structuredContent"] == {"result": ["file:///home/ada/project", "file:///tmp"]}
    async with mcphost_client(demo_host) as client:
        assert (await client.call_tool("list_roots"))["isError"] is True  # no roots capability


# -- resources --------------------------------------------------------------------------------------

async def test_the_readme_resource(demo_host, mcphost_client):
    async with mcphost_client(demo_host) as client:
        listed = await client.list_resources()
        [content] = (await client.read_resource("demo://readme"))["contents"]
    assert [r["uri"] for r in listed] == ["demo://readme"]
    assert listed[0]["mimeType"] == "text/markdown" and listed[0]["title"] == "About this server"
    assert content["mimeType"] == "text/markdown"
    assert content["text"] == (Path(mcphost_demo.__file__).parent / "data" / "README.md").read_text()


async def test_the_file_template_serves_the_bundled_samples(demo_host, mcphost_client):
    async with mcphost_client(demo_host) as client:
        [template] = await client.list_resource_templates()
        hello = (await client.read_resource("demo://files/hello.txt"))["contents"]
        todo = (await client.read_resource("demo://files/notes/todo.txt"))["contents"]
    assert template["uriTemplate"] == FILES
    assert hello == [{"uri": "demo://files/hello.txt", "mimeType": "text/plain", "text": "hello from a demo file\n"}]
    assert todo[0]["uri"] == "demo://files/notes/todo.txt" and todo[0]["text"]


async def test_the_configured_root_is_served(mcphost_host, mcphost_client, root):
    host = mcphost_host(("demo", mcphost_demo), config={"plugins": {"demo": {"root": str(root)}}})
    async with mcphost_client(host) as client:
        assert (await client.read_resource("demo://files/top.txt"))["contents"][0]["text"] == "top level\n"
        leaf = (await client.read_resource("demo://files/deep/er/leaf.md"))["contents"][0]
        assert leaf["text"] == "# leaf\n"
        binary = (await client.read_resource("demo://files/image.bin"))["contents"][0]
        assert base64.b64decode(binary["blob"]) == b"\x89PNG\xff\x00"
        assert binary["mimeType"] == "application/octet-stream"
        # The bundled samples are no longer reachable.
        assert await _error_code(client.read_resource("demo://files/hello.txt")) == NOT_FOUND


async def test_two_hosts_in_one_process_keep_their_own_roots(mcphost_host, mcphost_client, root, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "only-other.txt").write_text("other\n", encoding="utf-8")
    first = mcphost_host(("demo", mcphost_demo), config={"plugins": {"demo": {"root": str(root)}}})
    second = mcphost_host(("demo", mcphost_demo), config={"plugins": {"demo": {"root": str(other)}}})
    async with mcphost_client(first) as client:
        assert (await client.read_resource("demo://files/top.txt"))["contents"][0]["text"] == "top level\n"
        assert await _error_code(client.read_resource("demo://files/only-other.txt")) == NOT_FOUND
    async with mcphost_client(second) as client:
        assert (await client.read_resource("demo://files/only-other.txt"))["contents"][0]["text"] == "other\n"


ESCAPES = [
    "../secret.txt",
    "../../secret.txt",
    "deep/../../secret.txt",
    "deep/er/../../../secret.txt",
    "%2e%2e/secret.txt",
    "%2E%2E%2Fsecret.txt",
    "..%2fsecret.txt",
    "%252e%252e/secret.txt",
    "/etc/passwd",
    "%2Fetc%2Fpasswd",
    "top.txt%00",
    "top.txt%00.png",
    "..\\secret.txt",
    "",
    "deep",
    "missing.txt",
]


@pytest.mark.parametrize("path", ESCAPES)
async def test_paths_never_escape_the_root(mcphost_host, mcphost_client, root, path):
    host = mcphost_host(("demo", mcphost_demo), config={"plugins": {"demo": {"root": str(root)}}})
    async with mcphost_client(host) as client:
        code = await _error_code(client.read_resource(f"demo://files/{path}"))
    assert code == NOT_FOUND


async def test_absolute_paths_and_nul_bytes_never_resolve(mcphost_host, mcphost_client, root, tmp_path):
    host = mcphost_host(("demo", mcphost_demo), config={"plugins": {"demo": {"root": str(root)}}})
    async with mcphost_client(host) as client:
        for path in (str(tmp_path / "secret.txt"), "top.txt\x00", "\x00"):
            assert await _error_code(client.read_resource(f"demo://files/{path}")) == NOT_FOUND


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
async def test_a_symlink_out_of_the_root_is_neither_served_nor_offered(mcphost_host, mcphost_client, root, tmp_path):
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    (root / "inside.txt").symlink_to(root / "top.txt")
    host = mcphost_host(("demo", mcphost_demo), config={"plugins": {"demo": {"root": str(root)}}})
    async with mcphost_client(host) as client:
        assert await _error_code(client.read_resource("demo://files/link.txt")) == NOT_FOUND
        assert (await client.read_resource("demo://files/inside.txt"))["contents"][0]["text"] == "top level\n"
        offered = (await client.complete({"type": "ref/resource", "uri": FILES}, "path", ""))["values"]
    assert "link.txt" not in offered and "inside.txt" in offered


# -- completions ------------------------------------------------------------------------------------

async def test_path_completion_lists_files_under_the_root(mcphost_host, mcphost_client, root):
    host = mcphost_host(("demo", mcphost_demo), config={"plugins": {"demo": {"root": str(root)}}})
    async with mcphost_client(host) as client:
        everything = await client.complete({"type": "ref/resource", "uri": FILES}, "path", "")
        deep = await client.complete({"type": "ref/resource", "uri": FILES}, "path", "deep/")
        none = await client.complete({"type": "ref/resource", "uri": FILES}, "path", "zzz")
    assert everything["values"] == ["deep/er/leaf.md", "image.bin", "top.txt"]
    assert deep["values"] == ["deep/er/leaf.md"]
    assert none["values"] == []


async def test_language_completion_for_the_review_prompt(demo_host, mcphost_client):
    ref = {"type": "ref/prompt", "name": "review_code"}
    async with mcphost_client(demo_host) as client:
        assert (await client.complete(ref, "language", "py"))["values"] == ["python"]
        assert (await client.complete(ref, "language", "J"))["values"] == ["java", "javascript"]
        assert (await client.complete(ref, "language", ""))["values"] == mcphost_demo.LANGUAGES
        assert (await client.complete(ref, "code", "x"))["values"] == []  # no completer for code


# -- prompts ----------------------------------------------------------------------------------------

async def test_review_code_prompt(demo_host, mcphost_client):
    async with mcphost_client(demo_host) as client:
        [listed] = await client.list_prompts()
        default = await client.get_prompt("review_code", {"code": "print('hi')"})
        rust = await client.get_prompt("review_code", {"code": "fn main() {}", "language": "rust"})
    assert listed["name"] == "review_code" and listed["title"] == "Review code"
    assert [(a["name"], a.get("required", False)) for a in listed["arguments"]] == [
        ("code", True), ("language", False)]
    [message] = default["messages"]
    assert message["role"] == "user"
    assert message["content"]["text"] == "Please review this python code for bugs and clarity:\n\nprint('hi')"
    assert "rust code" in rust["messages"][0]["content"]["text"]


async def test_review_code_requires_code(demo_host, mcphost_client):
    async with mcphost_client(demo_host) as client:
        assert await _error_code(client.get_prompt("review_code", {"language": "go"})) == INVALID_PARAMS
        assert await _error_code(client.get_prompt("review_code")) == INVALID_PARAMS
