"""The demo plugin's features, written once and run in every cell of the interaction matrix.

Tools (plain, with progress, asking the client), resources and prompts, over memory, stdio and
HTTP, in the session era and in 2026-07-28. Where the eras legitimately differ (a question to
the client is a server request in the session era and an input-required result in 2026-07-28)
the test says so per cell.
"""

from __future__ import annotations

from typing import Any

from tests.support.matrix import Client

DEMO_TOOLS = {"echo", "progress", "greet_user", "summarize", "list_roots"}


def text_of(result: dict[str, Any]) -> str:
    [block] = result["content"]
    assert block["type"] == "text", result
    return block["text"]  # type: ignore[no-any-return]


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The session-era client's answers to the server's questions."""
    if request["method"] == "elicitation/create":
        return {"action": "accept", "content": {"name": "Ada"}}
    if request["method"] == "sampling/createMessage":
        return {"role": "assistant", "model": "matrix", "content": {"type": "text", "text": "A matrix summary."}}
    raise AssertionError(f"unexpected server request {request}")


async def test_echo_and_the_tool_list(connect):
    async with connect() as client:
        tools = {tool["name"]: tool for tool in (await client.result("tools/list"))["tools"]}
        assert DEMO_TOOLS <= set(tools)
        assert tools["echo"]["inputSchema"]["required"] == ["text"]
        assert text_of(await client.call_tool("echo", {"text": "héllo, wörld"})) == "héllo, wörld"


async def test_progress_notifications_precede_the_result(connect):
    async with connect() as client:
        result = await client.call_tool("progress", {"steps": 3}, _meta={"progressToken": "p-1"})
        assert text_of(result) == "completed 3 steps"
        progress = [n["params"] for n in client.notifications if n["method"] == "notifications/progress"]
    assert [(p["progressToken"], p["progress"], p["total"], p["message"]) for p in progress] == [
        ("p-1", n, 3, f"step {n} of 3") for n in (1, 2, 3)]


async def ask_and_answer(client: Client, tool: str, arguments: dict[str, Any], key_answer: dict[str, Any]
                         ) -> dict[str, Any]:
    """Call a tool that asks the client something; 2026-07-28: answer the input-required round."""
    first = await client.call_tool(tool, arguments)
    if not client.cell.modern:
        return first
    assert first["resultType"] == "input_required", first
    [(key, question)] = first["inputRequests"].items()
    return await client.call_tool(tool, arguments, requestState=first.get("requestState"),
                                  inputResponses={key: key_answer(question)})


async def test_a_tool_asks_the_client_elicitation_and_sampling(connect):
    async with connect(answer=answer) as client:
        greeting = await ask_and_answer(client, "greet_user", {}, lambda q: answer(q))
        assert text_of(greeting) == "Hello, Ada!"
        summary = await ask_and_answer(client, "summarize", {"text": "MCP connects models to tools."},
                                       lambda q: answer(q))
        assert text_of(summary) == "A matrix summary."
        if client.cell.modern:  # questions came back as results: the server asked nothing itself
            assert client.server_requests == []
        else:
            assert [r["method"] for r in client.server_requests] == ["elicitation/create", "sampling/createMessage"]
            assert client.server_requests[0]["params"]["message"] == "What is your name?"


async def test_resources_read_and_refuse_escapes(connect):
    async with connect() as client:
        resources = {r["uri"]: r for r in (await client.result("resources/list"))["resources"]}
        assert resources["demo://readme"]["mimeType"] == "text/markdown"
        readme = (await client.result("resources/read", {"uri": "demo://readme"}))["contents"]
        assert readme[0]["text"].startswith("# mcphost demo")
        hello = (await client.result("resources/read", {"uri": "demo://files/hello.txt"}))["contents"]
        assert hello[0]["text"] == "hello from a demo file\n"
        # Resource not found: -32002 in the session era; 2026-07-28 answers -32602.
        not_found = -32602 if client.cell.modern else -32002
        for uri in ("demo://files/../../etc/passwd", "demo://files/missing.txt"):
            error = await client.error("resources/read", {"uri": uri})
            assert error["code"] == not_found and error["message"] == "Resource not found", uri


async def test_prompts_get_and_complete(connect):
    async with connect() as client:
        prompt = await client.result("prompts/get", {"name": "review_code",
                                                     "arguments": {"code": "x = 1", "language": "rust"}})
        assert prompt["messages"][0]["role"] == "user"
        assert "rust" in prompt["messages"][0]["content"]["text"]
        assert (await client.error("prompts/get", {"name": "review_code", "arguments": {}}))["code"] == -32602
        completion = await client.result("completion/complete", {
            "ref": {"type": "ref/prompt", "name": "review_code"}, "argument": {"name": "language", "value": "py"}})
        assert completion["completion"]["values"] == ["python"]
