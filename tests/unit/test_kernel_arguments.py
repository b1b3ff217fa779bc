"""tools/call argument checking in the kernel: pydantic for derived schemas, jsonschema for explicit ones.

A schema derived from the signature is checked by the signature's compiled pydantic validator while
binding (strict JSON mode); an explicit ``input_schema=`` is checked by the catalog's jsonschema
validator and the arguments then converted leniently. Either way a violation is an ``isError``
result naming the argument and the rule, in every protocol version and in 2026-07-28.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any

import pytest
from pydantic import Field

import mcphost
from tests.support.kernel_support import VERSIONS, connected, make, text_of
from tests.support.modern_support import modern_call

CALLS: list[Any] = []


class Speed(enum.Enum):
    SLOW = "slow"
    FAST = "fast"


@mcphost.tool
def bounded(count: Annotated[int, Field(ge=0, le=10)], speed: Speed = Speed.SLOW) -> str:
    CALLS.append((count, speed))
    return f"{count}:{speed.value}"


@mcphost.tool
def fielded(query: str = Field(description="what"), limit: int = Field(default=3, ge=1)) -> str:
    CALLS.append((query, limit))
    return f"{query}:{limit}"


@mcphost.tool(input_schema={"type": "object", "properties": {"speed": {"type": "string", "enum": ["slow", "fast"]}},
                            "required": ["speed"], "additionalProperties": False})
def explicit(speed: Speed) -> str:
    CALLS.append(speed)
    return speed.value


@pytest.fixture(autouse=True)
def _clear() -> None:
    CALLS.clear()


def host() -> Any:
    return make(bounded, fielded, explicit)


@pytest.mark.parametrize("version", VERSIONS)
async def test_derived_schema_is_checked_by_pydantic(version: str) -> None:
    async with connected(host(), protocol_version=version) as client:
        [tool] = [t for t in await client.list_tools() if t["name"] == "bounded"]
        assert tool["inputSchema"]["properties"]["count"] == {"type": "integer", "minimum": 0, "maximum": 10}
        assert text_of(await client.call_tool("bounded", {"count": 3, "speed": "fast"})) == "3:fast"
        for arguments, fragment in [({"count": 11}, "argument 'count': Input should be less than or equal to 10"),
                                    ({"count": "3"}, "argument 'count': Input should be a valid integer"),
                                    ({"count": 1, "speed": "warp"}, "argument 'speed': Input should be 'slow'"),
                                    ({}, "argument 'count' is required"),
                                    ({"count": 1, "colour": "red"}, "argument 'colour' is not a parameter")]:
            result = await client.call_tool("bounded", arguments)
            assert result["isError"] is True, arguments
            assert text_of(result).startswith("Invalid arguments for tool 'bounded': ")
            assert fragment in text_of(result)
    assert CALLS == [(3, Speed.FAST)]


async def test_the_same_answer_in_2026_07_28() -> None:
    served = host()
    served.prepare()
    reply = await modern_call(served, "tools/call", {"name": "bounded", "arguments": {"count": -1}})
    result = reply["result"]
    assert result["isError"] is True
    assert "argument 'count': Input should be greater than or equal to 0" in text_of(result)
    reply = await modern_call(served, "tools/call", {"name": "bounded", "arguments": {"count": 2}})
    assert text_of(reply["result"]) == "2:slow"


async def test_field_as_default_fills_absent_arguments() -> None:
    async with connected(host()) as client:
        [tool] = [t for t in await client.list_tools() if t["name"] == "fielded"]
        schema = tool["inputSchema"]
        assert schema["required"] == ["query"]
        assert schema["properties"]["limit"] == {"type": "integer", "minimum": 1, "default": 3}
        assert text_of(await client.call_tool("fielded", {"query": "q"})) == "q:3"
        assert (await client.call_tool("fielded", {"query": "q", "limit": 0}))["isError"] is True
    assert CALLS == [("q", 3)]


async def test_explicit_schema_is_checked_by_jsonschema_then_converted() -> None:
    async with connected(host()) as client:
        assert text_of(await client.call_tool("explicit", {"speed": "fast"})) == "fast"
        result = await client.call_tool("explicit", {"speed": "warp"})
        assert result["isError"] is True
        assert "speed" in text_of(result) and "is not one of" in text_of(result)  # jsonschema's wording
    assert CALLS == [Speed.FAST]
