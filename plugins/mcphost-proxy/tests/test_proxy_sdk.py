"""The official Python SDK server mounted over stdio, called by the official SDK client in both eras."""

from __future__ import annotations

import pytest

from .conftest import front, sdk_upstream


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
