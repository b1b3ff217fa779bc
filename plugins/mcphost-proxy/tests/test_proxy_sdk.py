"""The official Python SDK server mounted over stdio, called by the official SDK client in both eras."""

from __future__ import annotations

import pytest
from proxy_support import front, sdk_upstream


def _text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_tools_prompts_resources_forwarded(side, mode):
    async with front({"sdk": sdk_upstream()}) as live, side.client(live.url, mode) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"sdk_add", "sdk_ask_name", "sdk_slow"} <= names
        result = await client.call_tool("sdk_add", {"a": 2, "b": 3})
        assert _text(result) == "5"
        assert result.structured_content == {"result": 5}
        prompt = await client.get_prompt("sdk_greet", {"name": "Bo"})
        assert "Say hello to Bo" in prompt.messages[0].content.text
        read = await client.read_resource("sdk://motd")
        assert read.contents[0].text == "hello from the SDK"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_elicitation_mid_call_reaches_upstream_and_the_tool_runs_once(side, mode, tmp_path):
    """2025-11-25: the question travels on the call's stream. 2026-07-28: the upstream call stays
    open across the input-required round trip and the retry resumes it: one run either way."""
    count = tmp_path / "runs.txt"
    upstream = sdk_upstream(env={"PROXY_TEST_COUNT_FILE": str(count)})
    async with front({"sdk": upstream}) as live, side.client(live.url, mode) as client:
        result = await client.call_tool("sdk_ask_name", {})
        assert _text(result) == "Hello, Ada!"
        assert len(side.elicitations) == 1
        assert side.elicitations[0].message == "What is your name?"
        assert count.read_text().splitlines() == ["run"]
        # A second call is a second run, and it gets its own question.
        side.name = "Grace"
        assert _text(await client.call_tool("sdk_ask_name", {})) == "Hello, Grace!"
        assert count.read_text().splitlines() == ["run", "run"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_progress_and_logging_forwarded(side, mode):
    async with front({"sdk": sdk_upstream()}) as live, side.client(live.url, mode) as client:
        seen = []

        async def progress(value, total, message):
            seen.append((value, total, message))

        result = await client.call_tool("sdk_slow", {"seconds": 0.01}, progress_callback=progress)
        assert _text(result) == "slept"
        assert seen == [(1, 2, "started")]
