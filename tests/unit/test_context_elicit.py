"""ctx.elicit takes a JSON Schema dict, a pydantic model class (schema= as in the SDK, response_type= as
in FastMCP) and FastMCP's one-field shorthands; what the client is asked and what the tool gets back."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import mcphost
from mcphost import Context
from mcphost.testing import MemoryClient, make_host


class Confirm(BaseModel):
    ok: bool


SPECS: dict[str, Any] = {
    "dict": {"schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}},
    "model": {"schema": Confirm},
    "response_type_model": {"response_type": Confirm},
    "scalar": {"response_type": str},
    "choices": {"response_type": ["red", "blue"]},
    "nothing": {},
}


@pytest.mark.parametrize(("case", "content", "asked", "data"), [
    ("dict", {"ok": True}, {"ok": {"type": "boolean"}}, "{'ok': True}"),
    ("model", {"ok": True}, {"ok": {"title": "Ok", "type": "boolean"}}, "ok=True"),
    ("response_type_model", {"ok": False}, {"ok": {"title": "Ok", "type": "boolean"}}, "ok=False"),
    ("scalar", {"value": "Ada"}, {"value": {"type": "string"}}, "Ada"),
    ("choices", {"value": "blue"}, {"value": {"type": "string", "enum": ["red", "blue"]}}, "blue"),
    ("nothing", {}, {}, "{}"),
])
async def test_elicit_shapes(case: str, content: dict[str, Any], asked: dict[str, Any], data: str) -> None:
    @mcphost.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("Well?", **SPECS[case])
        return str(answer.data)

    class Plugin:
        @mcphost.hookimpl
        def mcphost_tools(self) -> list[mcphost.Tool]:
            return [ask]

    questions: list[dict[str, Any]] = []

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        questions.append(params)
        return {"action": "accept", "content": content}

    async with MemoryClient(make_host(("p", Plugin())), elicitation=answer) as client:
        result = await client.call_tool("ask", {})
    assert result["content"][0]["text"] == data
    assert questions[0]["requestedSchema"]["properties"] == asked


async def test_a_schema_of_another_kind_fails_the_call() -> None:
    @mcphost.tool()
    async def ask(ctx: Context) -> str:
        await ctx.elicit("Well?", schema=42)  # type: ignore[arg-type]
        return "asked"

    class Plugin:
        @mcphost.hookimpl
        def mcphost_tools(self) -> list[mcphost.Tool]:
            return [ask]

    async with MemoryClient(make_host(("p", Plugin())), elicitation=lambda p: {"action": "cancel"}) as client:
        result = await client.call_tool("ask", {})
    assert result.get("isError") is True or "error" in result
