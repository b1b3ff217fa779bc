"""Kernel tests for tools/call: validation, errors, return types, progress, logging, cancellation,
duplicate ids, in-flight limits and deferred replies."""

import asyncio
import base64
import dataclasses
import datetime
import json
import threading
from typing import Any

import pytest

import mcphost
from mcphost import Context
from tests.support.kernel_support import (
    VERSIONS,
    connected,
    error_of,
    make,
    notifications,
    reply_error,
    text_of,
    wait_for,
)


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    return request.param


# -- records -----------------------------------------------------------------------------------------------

CALLS: list[tuple[str, Any]] = []


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    CALLS.clear()


@mcphost.tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


@mcphost.tool
def typed(count: int, label: str, ratio: float = 0.5) -> str:
    """Record a validated call."""
    CALLS.append(("typed", (count, label, ratio)))
    return f"{label}:{count}:{ratio}"


@mcphost.tool
def no_args() -> str:
    CALLS.append(("no_args", None))
    return "none"


@mcphost.tool
def sync_tool(x: int) -> str:
    CALLS.append(("sync", threading.current_thread() is threading.main_thread()))
    return f"sync {x}"


@mcphost.tool
async def async_tool(x: int) -> str:
    await asyncio.sleep(0)
    CALLS.append(("async", threading.current_thread() is threading.main_thread()))
    return f"async {x}"


@mcphost.tool(thread=True)
def thread_tool(x: int) -> str:
    CALLS.append(("thread", threading.current_thread() is threading.main_thread()))
    return f"thread {x}"


@mcphost.tool
def tool_error() -> str:
    raise mcphost.ToolError("the widget is jammed; try again with a smaller widget")


@mcphost.tool
def crash() -> str:
    raise RuntimeError("database password is hunter2-SECRET")


@mcphost.tool
async def async_crash() -> str:
    await asyncio.sleep(0)
    raise KeyError("api-key-SECRET")


@mcphost.tool(thread=True)
def thread_crash() -> str:
    raise ValueError("thread-SECRET")


@mcphost.tool
def protocol_error() -> str:
    raise mcphost.McpError(-32602, "widget id is malformed", {"field": "id"})


@mcphost.tool
def returns_dict():
    return {"a": 1, "nested": {"b": [1, 2]}}


@mcphost.tool
def returns_typed_dict() -> dict[str, int]:
    return {"a": 1, "b": 2}


@dataclasses.dataclass
class Point:
    x: int
    y: int
    label: str = "origin"


@mcphost.tool
def returns_point(x: int, y: int) -> Point:
    return Point(x, y, "p")


@mcphost.tool
def returns_int(a: int, b: int) -> int:
    return a + b


@mcphost.tool
def returns_list() -> list[str]:
    return ["a", "b"]


@mcphost.tool
def returns_none() -> None:
    return None


@mcphost.tool
def returns_unannotated_int():
    return 7


PNG = b"\x89PNG\r\n\x1a\nfake"
WAV = b"RIFF0000WAVEfake"


@mcphost.tool
def returns_blocks():
    return [
        mcphost.text("hello", annotations={"audience": ["user"], "priority": 0.7}),
        mcphost.image(PNG, "image/png"),
        mcphost.audio(WAV, "audio/wav"),
        mcphost.resource_link("file:///tmp/report.txt", "report", description="The report", mime_type="text/plain"),
        mcphost.embedded_resource("memo://inline", text="inline text", mime_type="text/plain"),
        mcphost.embedded_resource("memo://bin", blob=b"\x00\x01", mime_type="application/octet-stream"),
    ]


@mcphost.tool
def returns_one_block():
    return mcphost.image("aGVsbG8=", "image/gif")


@mcphost.tool
def returns_link():
    return [mcphost.text("see"), mcphost.resource_link("memo://one", "one")]


@mcphost.tool
def returns_error_result():
    return mcphost.ToolResult(content=[mcphost.text("quota exceeded")], is_error=True)


@mcphost.tool
def returns_explicit_result():
    return mcphost.ToolResult(content=[mcphost.text("42")], structured={"answer": 42},
                              meta={"com.example/trace": "t1"})


STRICT_OUTPUT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
                 "additionalProperties": False}


@mcphost.tool(output_schema=STRICT_OUTPUT)
def bad_output(good: bool = False):
    return {"n": 1} if good else {"n": "one"}


@mcphost.tool
def bad_declared_output() -> Point:
    return {"x": "not an int", "y": 2}  # type: ignore[return-value]


ALL = [echo, typed, no_args, sync_tool, async_tool, thread_tool, tool_error, crash, async_crash, thread_crash,
       protocol_error, returns_dict, returns_typed_dict, returns_point, returns_int, returns_list, returns_none,
       returns_unannotated_int, returns_blocks, returns_one_block, returns_link, returns_error_result,
       returns_explicit_result, bad_output, bad_declared_output]


def host(**server: Any) -> Any:
    return make(*ALL, server=server)


# -- argument validation and request errors ---------------------------------------------------------------


async def test_valid_arguments_reach_the_handler_with_defaults(version: str) -> None:
    async with connected(host(), protocol_version=version) as client:
        assert text_of(await client.call_tool("typed", {"count": 3, "label": "x"})) == "x:3:0.5"
        # A JSON integer is a number; a float parameter receives it as a float (pydantic, as in FastMCP).
        assert text_of(await client.call_tool("typed", {"count": 3, "label": "x", "ratio": 2})) == "x:3:2.0"
    assert CALLS == [("typed", (3, "x", 0.5)), ("typed", (3, "x", 2.0))]
    assert type(CALLS[1][1][2]) is float


@pytest.mark.parametrize("arguments, field", [
    ({"count": "three", "label": "x"}, "count"),
    ({"count": 1.5, "label": "x"}, "count"),
    ({"count": True, "label": "x"}, "count"),
    ({"count": 1, "label": 5}, "label"),
    ({"count": 1, "label": "x", "ratio": "high"}, "ratio"),
    ({"label": "x"}, "count"),
    ({"count": 1, "label": "x", "extra": 1}, "extra"),
])
async def test_invalid_arguments_are_an_error_result_naming_the_field(arguments: dict[str, Any],
                                                                       field: str, version: str) -> None:
    async with connected(host(), protocol_version=version) as client:
        result = await client.call_tool("typed", arguments)
        assert result["isError"] is True
        message = text_of(result)
        assert "typed" in message
        assert field in message
    assert CALLS == []


async def test_missing_arguments_mean_an_empty_object() -> None:
    async with connected(host()) as client:
        assert text_of(await client.request("tools/call", {"name": "no_args"})) == "none"
        assert text_of(await client.request("tools/call", {"name": "no_args", "arguments": None})) == "none"
        result = await client.request("tools/call", {"name": "typed"})
        assert result["isError"] is True and "count" in text_of(result)
    assert CALLS == [("no_args", None), ("no_args", None)]


@pytest.mark.parametrize("params", [
    {"name": "no_such_tool", "arguments": {}},
    {"name": "", "arguments": {}},
    {"name": "x" * 10_000, "arguments": {}},
    {"arguments": {}},
    {"name": None},
    {"name": 42, "arguments": {}},
    {"name": ["echo"], "arguments": {}},
    {"name": "echo", "arguments": "text=hi"},
    {"name": "echo", "arguments": ["hi"]},
    {"name": "echo", "arguments": 1},
    {"name": "echo", "arguments": True},
])
async def test_malformed_tools_call_is_invalid_params_and_the_session_survives(params: dict[str, Any]) -> None:
    async with connected(host()) as client:
        reply = await client.raw_request("tools/call", params)
        error = reply_error(reply)
        assert error["code"] == -32602
        assert len(error["message"]) < 300  # an attacker-sized name is not echoed whole
        assert text_of(await client.call_tool("echo", {"text": "next"})) == "next"


async def test_unknown_tool_message_names_it() -> None:
    async with connected(host()) as client:
        error = await error_of(client, "tools/call", {"name": "frobnicate", "arguments": {}})
        assert error["code"] == -32602
        assert "frobnicate" in error["message"]


# -- errors raised by tools ---------------------------------------------------------------------------------


async def test_tool_error_is_an_error_result_with_its_message(version: str) -> None:
    async with connected(host(), protocol_version=version) as client:
        result = await client.call_tool("tool_error")
        assert result == {"content": [{"type": "text",
                                       "text": "the widget is jammed; try again with a smaller widget"}],
                          "isError": True}


@pytest.mark.parametrize("name, secret", [("crash", "hunter2-SECRET"), ("async_crash", "api-key-SECRET"),
                                          ("thread_crash", "thread-SECRET")])
async def test_unexpected_exception_is_a_generic_error_result(name: str, secret: str,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    async with connected(host()) as client:
        reply = await client.raw_request("tools/call", {"name": name, "arguments": {}})
        result = reply["result"]
        assert result["isError"] is True
        assert name in text_of(result)
        assert "internal error" in text_of(result)
        assert secret not in json.dumps(reply)
        assert all(secret not in json.dumps(message) for message, _ in client.sent)
        assert text_of(await client.call_tool("echo", {"text": "fine"})) == "fine"
    assert secret in caplog.text
    assert name in caplog.text


async def test_mcp_error_from_a_tool_is_a_jsonrpc_error() -> None:
    async with connected(host()) as client:
        error = await error_of(client, "tools/call", {"name": "protocol_error", "arguments": {}})
        assert error == {"code": -32602, "message": "widget id is malformed", "data": {"field": "id"}}


# -- how return values become results ---------------------------------------------------------------------


async def test_str_is_one_text_block(version: str) -> None:
    async with connected(host(), protocol_version=version) as client:
        assert await client.call_tool("echo", {"text": "hi"}) == {"content": [{"type": "text", "text": "hi"}]}


async def test_dict_is_json_text_plus_structured_content(version: str) -> None:
    async with connected(host(), protocol_version=version) as client:
        for name, expected in (("returns_dict", {"a": 1, "nested": {"b": [1, 2]}}),
                               ("returns_typed_dict", {"a": 1, "b": 2})):
            result = await client.call_tool(name)
            assert json.loads(text_of(result)) == expected
            assert "isError" not in result
            if version == "2025-03-26":
                assert "structuredContent" not in result
            else:
                assert result["structuredContent"] == expected


async def test_dataclass_with_output_schema(version: str) -> None:
    async with connected(host(), protocol_version=version) as client:
        [descriptor] = [t for t in await client.list_tools() if t["name"] == "returns_point"]
        result = await client.call_tool("returns_point", {"x": 1, "y": 2})
    expected = {"x": 1, "y": 2, "label": "p"}
    assert json.loads(text_of(result)) == expected
    if version == "2025-03-26":
        assert "outputSchema" not in descriptor
        assert "structuredContent" not in result
    else:
        schema = descriptor["outputSchema"]
        assert schema["type"] == "object"
        assert set(schema["properties"]) == {"x", "y", "label"}
        assert result["structuredContent"] == expected


async def test_scalars_and_lists_are_wrapped_in_result(version: str) -> None:
    async with connected(host(), protocol_version=version) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
        three = await client.call_tool("returns_int", {"a": 1, "b": 2})
        listed = await client.call_tool("returns_list")
    assert json.loads(text_of(three)) == {"result": 3}
    assert json.loads(text_of(listed)) == {"result": ["a", "b"]}
    if version == "2025-03-26":
        assert "structuredContent" not in three and "structuredContent" not in listed
    else:
        assert three["structuredContent"] == {"result": 3}
        assert listed["structuredContent"] == {"result": ["a", "b"]}
        schema = tools["returns_int"]["outputSchema"]
        assert schema["type"] == "object"
        assert schema["properties"]["result"]["type"] == "integer"
        assert schema["required"] == ["result"]


async def test_none_and_unannotated_scalars(version: str) -> None:
    async with connected(host(), protocol_version=version) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
        assert await client.call_tool("returns_none") == {"content": []}
        seven = await client.call_tool("returns_unannotated_int")
    assert seven == {"content": [{"type": "text", "text": "7"}]}
    assert "outputSchema" not in tools["returns_none"]
    assert "outputSchema" not in tools["returns_unannotated_int"]
    assert "outputSchema" not in tools["echo"]


async def test_content_blocks_pass_through(version: str) -> None:
    async with connected(host(), protocol_version=version) as client:
        result = await client.call_tool("returns_blocks")
    content = result["content"]
    assert "structuredContent" not in result and "isError" not in result
    assert content[0] == {"type": "text", "text": "hello", "annotations": {"audience": ["user"], "priority": 0.7}}
    assert content[1] == {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}
    assert content[2] == {"type": "audio", "data": base64.b64encode(WAV).decode(), "mimeType": "audio/wav"}
    if version == "2025-03-26":
        assert content[3] == {"type": "text", "text": "report: file:///tmp/report.txt"}
    else:
        assert content[3] == {"type": "resource_link", "uri": "file:///tmp/report.txt", "name": "report",
                              "description": "The report", "mimeType": "text/plain"}
    assert content[4] == {"type": "resource", "resource": {"uri": "memo://inline", "mimeType": "text/plain",
                                                           "text": "inline text"}}
    assert content[5] == {"type": "resource", "resource": {
        "uri": "memo://bin", "mimeType": "application/octet-stream", "blob": base64.b64encode(b"\x00\x01").decode()}}


async def test_a_single_block_is_wrapped_in_a_list() -> None:
    async with connected(host()) as client:
        result = await client.call_tool("returns_one_block")
    assert result == {"content": [{"type": "image", "data": "aGVsbG8=", "mimeType": "image/gif"}]}


async def test_resource_link_downgrades_to_text_only_for_2025_03_26(version: str) -> None:
    async with connected(host(), protocol_version=version) as client:
        result = await client.call_tool("returns_link")
    types = [block["type"] for block in result["content"]]
    if version == "2025-03-26":
        assert types == ["text", "text"]
        assert "memo://one" in result["content"][1]["text"]
    else:
        assert types == ["text", "resource_link"]


async def test_tool_result_is_error(version: str) -> None:
    async with connected(host(), protocol_version=version) as client:
        result = await client.call_tool("returns_error_result")
    assert result == {"content": [{"type": "text", "text": "quota exceeded"}], "isError": True}


async def test_explicit_tool_result_with_structured_content_and_meta(version: str) -> None:
    async with connected(host(), protocol_version=version) as client:
        result = await client.call_tool("returns_explicit_result")
    assert result["content"] == [{"type": "text", "text": "42"}]
    assert result["_meta"] == {"com.example/trace": "t1"}
    if version == "2025-03-26":
        assert "structuredContent" not in result
    else:
        assert result["structuredContent"] == {"answer": 42}


async def test_output_violating_the_output_schema_is_an_error_result(
        version: str, caplog: pytest.LogCaptureFixture) -> None:
    async with connected(host(), protocol_version=version) as client:
        [descriptor] = [t for t in await client.list_tools() if t["name"] == "bad_output"]
        bad = await client.call_tool("bad_output")
        good = await client.call_tool("bad_output", {"good": True})
        declared = await client.call_tool("bad_declared_output")
    for result in (bad, declared):
        assert result["isError"] is True
        assert "output schema" in text_of(result)
        assert "structuredContent" not in result
    assert json.loads(text_of(good)) == {"n": 1}
    assert "isError" not in good
    if version != "2025-03-26":
        assert descriptor["outputSchema"] == STRICT_OUTPUT
        assert good["structuredContent"] == {"n": 1}
    assert "bad_output" in caplog.text


async def test_sync_async_and_thread_tools(version: str) -> None:
    async with connected(host(), protocol_version=version) as client:
        assert text_of(await client.call_tool("sync_tool", {"x": 1})) == "sync 1"
        assert text_of(await client.call_tool("async_tool", {"x": 2})) == "async 2"
        assert text_of(await client.call_tool("thread_tool", {"x": 3})) == "thread 3"
    # A synchronous tool runs in the kernel's thread pool (RELIABILITY H2); an async one on the loop.
    assert CALLS == [("sync", False), ("async", True), ("thread", False)]


# -- progress --------------------------------------------------------------------------------------------


@mcphost.tool
async def steps(ctx: Context) -> str:
    await ctx.progress(1, total=4, message="first")
    await ctx.progress(1, total=4, message="repeat: dropped")
    await ctx.progress(0.5, message="backwards: dropped")
    await ctx.progress(2.5)
    await ctx.progress(4, total=4, message="done")
    return "finished"


@pytest.mark.parametrize("token", ["tok-1", 7, 0, ""])
async def test_progress_is_sent_with_the_token_and_only_increasing(token: Any, version: str) -> None:
    async with connected(make(steps), protocol_version=version) as client:
        result = await client.request("tools/call", {"name": "steps", "arguments": {},
                                                     "_meta": {"progressToken": token}})
        assert text_of(result) == "finished"
    progress = notifications(client, "notifications/progress")
    assert progress == [
        {"progressToken": token, "progress": 1, "total": 4, "message": "first"},
        {"progressToken": token, "progress": 2.5},
        {"progressToken": token, "progress": 4, "total": 4, "message": "done"},
    ]
    # Progress notifications come before the reply.
    methods = [m.get("method", "reply") for m, _ in client.sent[1:]]
    assert methods == ["notifications/progress"] * 3 + ["reply"]


@pytest.mark.parametrize("meta", [None, {}, {"other": 1}, {"progressToken": None}, "token"])
async def test_no_progress_without_a_token(meta: Any) -> None:
    async with connected(make(steps)) as client:
        params: dict[str, Any] = {"name": "steps", "arguments": {}}
        if meta is not None:
            params["_meta"] = meta
        assert text_of(await client.request("tools/call", params)) == "finished"
    assert client.notifications == []


async def test_progress_tokens_are_per_request() -> None:
    gate = asyncio.Event()

    @mcphost.tool
    async def twice(n: int, ctx: Context) -> str:
        await ctx.progress(n)
        await gate.wait()
        await ctx.progress(n + 1)
        return str(n)

    async with connected(make(twice)) as client:
        first = asyncio.ensure_future(client.call_tool("twice", {"n": 5}, progress_token="a"))
        second = asyncio.ensure_future(client.call_tool("twice", {"n": 1}, progress_token="b"))
        await wait_for(lambda: len(client.notifications) == 2)
        gate.set()
        await first
        await second
    by_token: dict[Any, list[float]] = {}
    for params in notifications(client, "notifications/progress"):
        by_token.setdefault(params["progressToken"], []).append(params["progress"])
    assert by_token == {"a": [5, 6], "b": [1, 2]}


# -- logging --------------------------------------------------------------------------------------------


@mcphost.tool
async def chatty(ctx: Context) -> str:
    await ctx.debug("debug line")
    await ctx.info({"step": 1})
    await ctx.log("notice", "notice line", logger="audit")
    await ctx.warning("warning line")
    await ctx.error(["error", "line"], logger="db")
    await ctx.log("emergency", "emergency line")
    return "logged"


@mcphost.tool
async def bad_level(ctx: Context) -> str:
    await ctx.log("loud", "x")  # type: ignore[arg-type]
    return "unreachable"


async def test_log_messages_without_a_level_set(version: str) -> None:
    async with connected(make(chatty), protocol_version=version) as client:
        assert text_of(await client.call_tool("chatty")) == "logged"
    assert notifications(client, "notifications/message") == [
        {"level": "debug", "data": "debug line"},
        {"level": "info", "data": {"step": 1}},
        {"level": "notice", "data": "notice line", "logger": "audit"},
        {"level": "warning", "data": "warning line"},
        {"level": "error", "data": ["error", "line"], "logger": "db"},
        {"level": "emergency", "data": "emergency line"},
    ]


@pytest.mark.parametrize("level, expected", [
    ("debug", ["debug", "info", "notice", "warning", "error", "emergency"]),
    ("notice", ["notice", "warning", "error", "emergency"]),
    ("warning", ["warning", "error", "emergency"]),
    ("critical", ["emergency"]),
    ("emergency", ["emergency"]),
])
async def test_set_level_filters_lower_levels(level: str, expected: list[str]) -> None:
    async with connected(make(chatty)) as client:
        assert await client.request("logging/setLevel", {"level": level}) == {}
        await client.call_tool("chatty")
    assert [n["level"] for n in notifications(client, "notifications/message")] == expected


async def test_unknown_log_level_from_a_tool_is_a_tool_failure() -> None:
    async with connected(make(bad_level, chatty)) as client:
        result = await client.call_tool("bad_level")
        assert result["isError"] is True
        assert client.notifications == []
        assert text_of(await client.call_tool("chatty")) == "logged"


# -- cancellation ---------------------------------------------------------------------------------------


class Slow:
    """A tool that blocks until released, recording how it ended."""

    def __init__(self, name: str = "slow") -> None:
        self.started = 0
        self.release = asyncio.Event()
        self.outcomes: list[str] = []

        async def slow(tag: str = "") -> str:
            self.started += 1
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.outcomes.append(f"cancelled {tag}")
                raise
            self.outcomes.append(f"finished {tag}")
            return f"done {tag}"

        self.tool = mcphost.tool(name=name)(slow)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


async def test_cancelled_request_gets_no_reply_and_the_session_keeps_working(version: str) -> None:
    slow = Slow()
    async with connected(make(slow.tool, echo), protocol_version=version) as client:
        pending = asyncio.ensure_future(client.raw_request("tools/call", call("slow", tag="a"), request_id="s-1"))
        await wait_for(lambda: slow.started == 1)
        client.notify("notifications/cancelled", {"requestId": "s-1", "reason": "user pressed stop"})
        assert await pending is None
        assert slow.outcomes == ["cancelled a"]
        assert client.session is not None and client.session.inflight == {}
        assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"
        # The id may be used again once the cancelled request is gone.
        slow.release.set()
        reply = await client.raw_request("tools/call", call("slow", tag="b"), request_id="s-1")
        assert reply["result"]["content"][0]["text"] == "done b"
    replies = [message for message, _ in client.sent if message.get("id") == "s-1"]
    assert replies == [{"jsonrpc": "2.0", "id": "s-1",
                        "result": {"content": [{"type": "text", "text": "done b"}]}}]


async def test_a_handler_that_swallows_the_cancellation_still_gets_no_reply() -> None:
    started = asyncio.Event()

    @mcphost.tool
    async def stubborn() -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "ignored the cancel"
        return "slept"

    async with connected(make(stubborn, echo)) as client:
        pending = asyncio.ensure_future(client.raw_request("tools/call", call("stubborn"), request_id="st"))
        await started.wait()
        client.notify("notifications/cancelled", {"requestId": "st"})
        assert await pending is None
        assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"


async def test_cancelling_one_request_leaves_the_others_alone() -> None:
    slow = Slow()
    async with connected(make(slow.tool)) as client:
        one = asyncio.ensure_future(client.raw_request("tools/call", call("slow", tag="1"), request_id=1))
        two = asyncio.ensure_future(client.raw_request("tools/call", call("slow", tag="2"), request_id=2))
        await wait_for(lambda: slow.started == 2)
        client.notify("notifications/cancelled", {"requestId": 1})
        assert await one is None
        slow.release.set()
        assert (await two)["result"]["content"][0]["text"] == "done 2"
    assert slow.outcomes == ["cancelled 1", "finished 2"]


@pytest.mark.parametrize("lookalike", [True, 1.0, "1", [1]])
async def test_cancellation_ids_must_match_exactly(lookalike: Any) -> None:
    slow = Slow()
    async with connected(make(slow.tool)) as client:
        pending = asyncio.ensure_future(client.raw_request("tools/call", call("slow"), request_id=1))
        await wait_for(lambda: slow.started == 1)
        client.notify("notifications/cancelled", {"requestId": lookalike})
        client.notify("notifications/cancelled", {"requestId": 999})
        await asyncio.sleep(0.01)
        assert not pending.done()
        slow.release.set()
        assert (await pending)["result"]["content"][0]["text"] == "done "
    assert slow.outcomes == ["finished "]


async def test_cancelling_a_finished_request_is_ignored() -> None:
    async with connected(make(echo)) as client:
        reply = await client.raw_request("tools/call", call("echo", text="x"), request_id=3)
        assert reply["result"]["content"][0]["text"] == "x"
        client.notify("notifications/cancelled", {"requestId": 3})
        assert text_of(await client.call_tool("echo", {"text": "y"})) == "y"


async def test_sync_handler_cancelled_while_in_a_thread_gets_no_reply() -> None:
    release = threading.Event()

    @mcphost.tool(thread=True)
    def blocking() -> str:
        release.wait(5)
        return "late"

    async with connected(make(blocking, echo)) as client:
        pending = asyncio.ensure_future(client.raw_request("tools/call", call("blocking"), request_id="b"))
        await wait_for(lambda: client.session is not None and "b" in client.session.inflight)
        await asyncio.sleep(0.01)
        client.notify("notifications/cancelled", {"requestId": "b"})
        assert await pending is None
        release.set()
        assert text_of(await client.call_tool("echo", {"text": "ok"})) == "ok"


# -- duplicate ids and the in-flight limit -------------------------------------------------------------


@pytest.mark.parametrize("request_id", [7, "dup"])
async def test_duplicate_in_flight_id_is_refused_and_the_first_completes(request_id: Any) -> None:
    slow = Slow()
    async with connected(make(slow.tool, echo)) as client:
        first = asyncio.ensure_future(client.raw_request("tools/call", call("slow", tag="first"),
                                                         request_id=request_id))
        await wait_for(lambda: slow.started == 1)
        second = await client.raw_request("tools/call", call("echo", text="second"), request_id=request_id)
        error = reply_error(second)
        assert second["id"] == request_id
        assert error["code"] == -32600
        assert repr(request_id) in error["message"]
        assert not first.done()
        slow.release.set()
        reply = await first
        assert reply["id"] == request_id
        assert reply["result"]["content"] == [{"type": "text", "text": "done first"}]
    assert slow.started == 1
    assert slow.outcomes == ["finished first"]


async def test_a_duplicate_id_does_not_let_a_cancel_reach_the_wrong_request() -> None:
    slow = Slow()
    async with connected(make(slow.tool)) as client:
        first = asyncio.ensure_future(client.raw_request("tools/call", call("slow"), request_id=5))
        await wait_for(lambda: slow.started == 1)
        assert reply_error(await client.raw_request("ping", request_id=5))["code"] == -32600
        assert client.session is not None and 5 in client.session.inflight
        client.notify("notifications/cancelled", {"requestId": 5})
        assert await first is None
        assert slow.outcomes == ["cancelled "]


async def test_max_inflight_is_enforced_per_session() -> None:
    slow = Slow()
    server = {"max_inflight": 2}
    h = make(slow.tool, echo, server=server)
    await h.start()
    try:
        async with connected(h) as client, connected(h) as other:
            running = [asyncio.ensure_future(client.raw_request("tools/call", call("slow", tag=str(i))))
                       for i in range(2)]
            await wait_for(lambda: slow.started == 2)
            busy = await client.raw_request("tools/call", call("echo", text="third"))
            assert reply_error(busy)["code"] == -32000
            assert slow.started == 2
            # Another session has its own budget.
            assert text_of(await other.call_tool("echo", {"text": "other"})) == "other"
            slow.release.set()
            replies = await asyncio.gather(*running)
            assert sorted(r["result"]["content"][0]["text"] for r in replies) == ["done 0", "done 1"]
            assert text_of(await client.call_tool("echo", {"text": "again"})) == "again"
    finally:
        await h.stop()


async def test_terminating_the_session_cancels_its_requests() -> None:
    slow = Slow()
    h = make(slow.tool)
    async with connected(h) as client:
        pending = asyncio.ensure_future(client.raw_request("tools/call", call("slow")))
        await wait_for(lambda: slow.started == 1)
        assert client.session is not None
        await h.manager.terminate(client.session, "deleted")
        assert await pending is None
    assert slow.outcomes == ["cancelled "]


# -- deferred replies ----------------------------------------------------------------------------------


class Approvals:
    def __init__(self) -> None:
        self.pending: dict[str, mcphost.Deferred] = {}

        async def approve(key: str, ctx: Context):
            deferred = ctx.defer()
            assert deferred.session_id == ctx.session.id and deferred.request_id == ctx.request_id
            self.pending[key] = deferred
            return deferred

        self.tool = mcphost.tool(name="approve")(approve)


async def test_deferred_reply_via_host_respond(version: str) -> None:
    approvals = Approvals()
    h = make(approvals.tool, echo)
    async with connected(h, protocol_version=version) as client:
        assert client.session is not None
        pending = asyncio.ensure_future(client.raw_request("tools/call", call("approve", key="k"),
                                                           request_id="d-1"))
        await wait_for(lambda: "k" in approvals.pending)
        await asyncio.sleep(0.01)
        assert not pending.done()
        # Other requests are served while this one waits.
        assert text_of(await client.call_tool("echo", {"text": "meanwhile"})) == "meanwhile"
        assert h.respond(client.session.id, "d-1", "approved by Ann") is True
        reply = await pending
        assert reply == {"jsonrpc": "2.0", "id": "d-1",
                         "result": {"content": [{"type": "text", "text": "approved by Ann"}]}}
        assert h.respond(client.session.id, "d-1", "twice") is False
        assert approvals.pending["k"].done


async def test_respond_for_unknown_requests_returns_false() -> None:
    approvals = Approvals()
    h = make(approvals.tool, echo)
    async with connected(h) as client:
        assert client.session is not None
        assert h.respond(client.session.id, "nope", "x") is False
        assert h.respond("no-such-session", 1, "x") is False
        await client.raw_request("tools/call", call("echo", text="x"), request_id="e")
        assert h.respond(client.session.id, "e", "x") is False  # answered normally, not deferred


async def test_deferred_resolve_converts_like_a_return_value(version: str) -> None:
    approvals = Approvals()
    async with connected(make(approvals.tool), protocol_version=version) as client:
        pending = asyncio.ensure_future(client.call_tool("approve", {"key": "k"}))
        await wait_for(lambda: "k" in approvals.pending)
        assert approvals.pending["k"].resolve({"approved": True}) is True
        assert approvals.pending["k"].resolve({"approved": False}) is False
        result = await pending
    assert json.loads(text_of(result)) == {"approved": True}
    assert ("structuredContent" in result) == (version != "2025-03-26")


@pytest.mark.parametrize("error, expected", [
    (mcphost.ToolError("denied by reviewer"), {"isError": True, "text": "denied by reviewer"}),
    (RuntimeError("secret-REJECT"), {"isError": True, "text": None}),
    (mcphost.McpError(-32602, "bad approval"), {"code": -32602}),
])
async def test_deferred_reject(error: BaseException, expected: dict[str, Any]) -> None:
    approvals = Approvals()
    h = make(approvals.tool)
    async with connected(h) as client:
        assert client.session is not None
        pending = asyncio.ensure_future(client.raw_request("tools/call", call("approve", key="k"), request_id=9))
        await wait_for(lambda: "k" in approvals.pending)
        assert h.respond(client.session.id, 9, error=error) is True
        reply = await pending
    if "code" in expected:
        assert reply["error"]["code"] == expected["code"]
    else:
        result = reply["result"]
        assert result["isError"] is True
        if expected["text"] is not None:
            assert text_of(result) == expected["text"]
        assert "secret-REJECT" not in json.dumps(reply)


async def test_cancelled_deferred_request_gets_no_reply() -> None:
    approvals = Approvals()
    h = make(approvals.tool, echo)
    async with connected(h) as client:
        assert client.session is not None
        pending = asyncio.ensure_future(client.raw_request("tools/call", call("approve", key="k"), request_id="c"))
        await wait_for(lambda: "k" in approvals.pending)
        client.notify("notifications/cancelled", {"requestId": "c"})
        assert await pending is None
        assert approvals.pending["k"].done
        assert approvals.pending["k"].resolve("too late") is False
        assert h.respond(client.session.id, "c", "too late") is False
        assert text_of(await client.call_tool("echo", {"text": "alive"})) == "alive"
    assert all(message.get("id") != "c" for message, _ in client.sent)


async def test_deferred_requests_are_keyed_by_session() -> None:
    approvals = Approvals()
    h = make(approvals.tool)
    await h.start()
    try:
        async with connected(h) as one, connected(h) as two:
            assert one.session is not None and two.session is not None
            a = asyncio.ensure_future(one.raw_request("tools/call", call("approve", key="a"), request_id=1))
            b = asyncio.ensure_future(two.raw_request("tools/call", call("approve", key="b"), request_id=1))
            await wait_for(lambda: len(approvals.pending) == 2)
            assert h.respond(two.session.id, 1, "for two") is True
            assert (await b)["result"]["content"][0]["text"] == "for two"
            assert not a.done()
            assert h.respond(one.session.id, 1, "for one") is True
            assert (await a)["result"]["content"][0]["text"] == "for one"
    finally:
        await h.stop()


# -- arguments the schema lets through but the annotation cannot take -----------------------------------


@mcphost.tool
def at_time(at: datetime.datetime) -> str:
    CALLS.append(("at_time", at))
    return at.isoformat()


@pytest.mark.parametrize("value", ["not a date", "2024-02-30T00:00:00Z"])
async def test_unconvertible_argument_is_an_error_result_not_an_internal_error(value: str) -> None:
    async with connected(make(at_time)) as client:
        result = await client.call_tool("at_time", {"at": value})
        assert result["isError"] is True
        assert "at" in text_of(result) and "at_time" in text_of(result)
        ok = await client.call_tool("at_time", {"at": "2024-01-02T03:04:05+00:00"})
        assert text_of(ok) == "2024-01-02T03:04:05+00:00"
    assert [name for name, _ in CALLS] == ["at_time"]


@pytest.mark.parametrize("structured", [[1, 2], "text", 3])
async def test_non_object_structured_content_is_not_sent(structured: Any, version: str) -> None:
    @mcphost.tool
    def odd():
        return mcphost.ToolResult(content=[mcphost.text("body")], structured=structured)

    async with connected(make(odd), protocol_version=version) as client:
        result = await client.call_tool("odd")
    assert result == {"content": [{"type": "text", "text": "body"}]}


# -- reload while a deferred request waits -------------------------------------------------------------


async def test_deferred_request_survives_a_reload() -> None:
    approvals = Approvals()
    h = make(approvals.tool)
    async with connected(h) as client:
        assert client.session is not None
        pending = asyncio.ensure_future(client.raw_request("tools/call", call("approve", key="k"), request_id=1))
        await wait_for(lambda: "k" in approvals.pending)
        await h.reload()
        assert h.respond(client.session.id, 1, "after reload") is True
        assert (await pending)["result"]["content"] == [{"type": "text", "text": "after reload"}]
