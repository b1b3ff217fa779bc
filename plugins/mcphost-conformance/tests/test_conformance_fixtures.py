"""The conformance fixtures, called the way the official suite calls them, checked for the shapes it requires.

Every test talks to a Host serving only this plugin through mcphost's in-memory client, and every
message the host sent to any client is validated against the official JSON schema of the revision
the client negotiated (``tests/support/wire.py`` of the mcphost repository).
"""

from __future__ import annotations

import asyncio
import base64
import importlib
import io
import itertools
import json
import re
import struct
import sys
import time
import wave
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcphost_conformance import PNG, WATCHED_URI, WAV, ConformancePlugin

import mcphost
from mcphost.config import config_from_dict
from mcphost.errors import ConfigError
from mcphost.host import Host
from mcphost.testing import MemoryClient

REPO_ROOT = Path(__file__).resolve().parents[3]
LATEST = "2025-11-25"
SESSION_ERAS = ("2025-11-25", "2025-06-18")
NOT_FOUND = -32002

TOOL_NAMES = {
    "test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource",
    "test_multiple_content_types", "test_tool_with_progress", "test_error_handling", "test_tool_with_logging",
    "test_sampling", "test_elicitation", "test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums",
    "test_reconnection", "json_schema_2020_12_tool", "test_custom_header",
    # 2026-07-28 fixtures, listed in every revision (they work in the session era too)
    "test_missing_capability", "test_streaming_elicitation", "test_logging_tool", "test_trigger_tool_change",
    "test_trigger_prompt_change", "test_input_required_result_elicitation", "test_input_required_result_sampling",
    "test_input_required_result_list_roots", "test_input_required_result_request_state",
    "test_input_required_result_multiple_inputs", "test_input_required_result_multi_round",
    "test_input_required_result_tampered_state", "test_input_required_result_capabilities",
    # tasks-extension fixtures (plain synchronous calls in the session era)
    "greet", "slow_compute", "failing_job", "protocol_error_job", "confirm_delete", "multi_input",
    "test_tool_with_task",
}
PROMPT_NAMES = ["test_simple_prompt", "test_prompt_with_arguments", "test_prompt_with_embedded_resource",
                "test_prompt_with_image", "test_input_required_result_prompt"]

#: Written out here, not imported: the suite compares the listed schema with exactly this.
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                          "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

SEP1034_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    },
}

SEP1330_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "oneOf": [{"const": "value1", "title": "First Option"},
                                                     {"const": "value2", "title": "Second Option"},
                                                     {"const": "value3", "title": "Third Option"}]},
        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                       "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "items": {"anyOf": [{"const": "value1", "title": "First Choice"},
                                                             {"const": "value2", "title": "Second Choice"},
                                                             {"const": "value3", "title": "Third Choice"}]}},
    },
}


def _wire_validator() -> Any:
    """``tests.support.wire.WireValidator`` of the mcphost checkout this plugin lives in."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    return importlib.import_module("tests.support.wire").WireValidator


WireValidator = _wire_validator()


# -- fixtures ----------------------------------------------------------------------------------------

@pytest.fixture
def make_host(mcphost_host: Callable[..., Host]) -> Callable[..., Host]:
    """``make_host(**section)``: a prepared Host serving a fresh plugin with ``[plugins.conformance]`` = section."""

    def factory(plugin: ConformancePlugin | None = None, **section: Any) -> Host:
        section = {"enabled": True, **section}
        return mcphost_host(plugin or ConformancePlugin(), config={"plugins": {"conformance": section}})

    return factory


@pytest.fixture
def host(make_host: Callable[..., Host]) -> Host:
    return make_host()


@pytest.fixture
async def connect() -> AsyncIterator[Callable[..., Any]]:
    """``async with connect(host, **options) as client``: a MemoryClient (2025-11-25 unless told).

    At teardown every message the host sent to every client is validated against the schema of
    the revision that client negotiated.
    """
    clients: list[MemoryClient] = []

    @asynccontextmanager
    async def open_client(host: Host, **options: Any) -> AsyncIterator[MemoryClient]:
        options.setdefault("protocol_version", LATEST)
        client = MemoryClient(host, **options)
        clients.append(client)
        async with client:
            yield client

    yield open_client
    for client in clients:
        revision = client.initialize_result["protocolVersion"] if client.initialize_result else client.protocol_version
        assert WireValidator(revision).check_all(client.sent) > 0


def _content(result: dict[str, Any]) -> list[dict[str, Any]]:
    assert not result.get("isError"), result
    assert "structuredContent" not in result
    return result["content"]


def _text(result: dict[str, Any]) -> str:
    [block] = _content(result)
    assert block["type"] == "text"
    return block["text"]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _notes(client: MemoryClient, method: str) -> list[dict[str, Any]]:
    return [n.get("params", {}) for n in client.notifications if n["method"] == method]


async def _eventually(predicate: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


# -- the media ---------------------------------------------------------------------------------------

def test_the_png_is_a_valid_one_pixel_image():
    assert PNG.startswith(b"\x89PNG\r\n\x1a\n")
    chunks, offset = [], 8
    while offset < len(PNG):
        (length,) = struct.unpack(">I", PNG[offset:offset + 4])
        kind, data = PNG[offset + 4:offset + 8], PNG[offset + 8:offset + 8 + length]
        (crc,) = struct.unpack(">I", PNG[offset + 8 + length:offset + 12 + length])
        assert crc == zlib.crc32(kind + data) & 0xFFFFFFFF
        chunks.append((kind, data))
        offset += 12 + length
    assert [kind for kind, _ in chunks] == [b"IHDR", b"IDAT", b"IEND"]
    assert struct.unpack(">IIBB", chunks[0][1][:10]) == (1, 1, 8, 2)
    assert zlib.decompress(chunks[1][1]) == b"\x00\xff\x00\x00"


def test_the_wav_is_a_valid_short_pcm_file():
    with wave.open(io.BytesIO(WAV)) as audio:
        assert (audio.getnchannels(), audio.getsampwidth(), audio.getframerate()) == (1, 2, 8000)
        assert audio.getnframes() == 400 and len(audio.readframes(400)) == 800
    assert WAV[:4] == b"RIFF" and WAV[8:12] == b"WAVE" and len(WAV) < 1024


# -- listings ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("revision", SESSION_ERAS)
async def test_tools_list_has_every_fixture_with_a_description_and_a_valid_name(host, connect, revision):
    async with connect(host, protocol_version=revision) as client:
        tools = {tool["name"]: tool for tool in await client.list_tools()}
    assert set(tools) == TOOL_NAMES
    for name, tool in tools.items():
        assert re.fullmatch(r"[A-Za-z0-9_./-]{1,64}", name)
        assert tool["description"].strip()
        assert tool["inputSchema"]["type"] == "object"
        assert "outputSchema" not in tool, name
    assert tools["json_schema_2020_12_tool"]["inputSchema"] == JSON_SCHEMA_2020_12
    assert tools["test_sampling"]["inputSchema"]["required"] == ["prompt"]
    assert tools["test_elicitation"]["inputSchema"]["required"] == ["message"]
    assert tools["test_simple_text"]["inputSchema"] == {"type": "object", "properties": {},
                                                        "additionalProperties": False}


async def test_resources_list_starts_with_a_readable_resource(host, connect):
    async with connect(host) as client:
        resources = await client.list_resources()
        first = await client.read_resource(resources[0]["uri"])
        templates = await client.list_resource_templates()
    assert [(r["uri"], r["name"], r["mimeType"]) for r in resources] == [
        ("test://static-text", "static-text", "text/plain"),
        ("test://static-binary", "static-binary", "image/png"),
        ("test://watched-resource", "watched-resource", "text/plain"),
    ]
    assert first["contents"][0]["text"]
    [template] = templates
    assert (template["uriTemplate"], template["name"], template["mimeType"]) == (
        "test://template/{id}/data", "template-data", "application/json")


async def test_prompts_list_describes_every_prompt_and_its_arguments(host, connect):
    async with connect(host) as client:
        prompts = {prompt["name"]: prompt for prompt in await client.list_prompts()}
    assert list(prompts) == PROMPT_NAMES
    assert all(prompt["description"].strip() for prompt in prompts.values())
    assert prompts["test_prompt_with_arguments"]["arguments"] == [
        {"name": "arg1", "description": "First test argument.", "required": True},
        {"name": "arg2", "description": "Second test argument.", "required": True},
    ]
    assert prompts["test_prompt_with_embedded_resource"]["arguments"] == [
        {"name": "resourceUri", "description": "URI of the resource to embed.", "required": True}]
    assert "arguments" not in prompts["test_simple_prompt"] or prompts["test_simple_prompt"]["arguments"] == []


# -- tools: content ----------------------------------------------------------------------------------

@pytest.mark.parametrize("revision", SESSION_ERAS)
async def test_content_tools_return_the_exact_blocks(host, connect, revision):
    async with connect(host, protocol_version=revision) as client:
        simple = await client.call_tool("test_simple_text")
        image = await client.call_tool("test_image_content")
        audio = await client.call_tool("test_audio_content")
        embedded = await client.call_tool("test_embedded_resource")
        mixed = await client.call_tool("test_multiple_content_types")
    assert _content(simple) == [{"type": "text", "text": "This is a simple text response for testing."}]
    assert _content(image) == [{"type": "image", "data": _b64(PNG), "mimeType": "image/png"}]
    assert _content(audio) == [{"type": "audio", "data": _b64(WAV), "mimeType": "audio/wav"}]
    assert _content(embedded) == [{"type": "resource", "resource": {
        "uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}}]
    text, picture, resource = _content(mixed)
    assert text == {"type": "text", "text": "Multiple content types test:"}
    assert picture == {"type": "image", "data": _b64(PNG), "mimeType": "image/png"}
    assert resource["type"] == "resource"
    assert resource["resource"]["uri"] == "test://mixed-content-resource"
    assert resource["resource"]["mimeType"] == "application/json"
    assert json.loads(resource["resource"]["text"]) == {"test": "data", "value": 123}


@pytest.mark.parametrize("revision", SESSION_ERAS)
async def test_error_handling_is_an_error_result_not_a_protocol_error(host, connect, revision):
    async with connect(host, protocol_version=revision) as client:
        result = await client.call_tool("test_error_handling")
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "This tool intentionally returns an error for testing"}]


async def test_json_schema_2020_12_tool_validates_with_its_schema(host, connect):
    async with connect(host) as client:
        ok = await client.call_tool("json_schema_2020_12_tool", {
            "name": "Ada", "contactMethod": "phone", "phone": "123", "address": {"city": "London"}})
        missing = await client.call_tool("json_schema_2020_12_tool", {"name": "Ada"})
        extra = await client.call_tool("json_schema_2020_12_tool", {"email": "a@example.com", "other": 1})
    assert json.loads(_text(ok).removeprefix("Received: ")) == {
        "name": "Ada", "contactMethod": "phone", "phone": "123", "address": {"city": "London"}}
    assert missing["isError"] is True and extra["isError"] is True


# -- tools: notifications ----------------------------------------------------------------------------

@pytest.mark.parametrize("revision", SESSION_ERAS)
async def test_progress_sends_0_50_100_out_of_100_with_the_token(host, connect, revision):
    async with connect(host, protocol_version=revision) as client:
        started = time.monotonic()
        result = await client.call_tool("test_tool_with_progress", progress_token="progress-test-1")
        elapsed = time.monotonic() - started
        quiet = await client.call_tool("test_tool_with_progress")
        progress = _notes(client, "notifications/progress")
    assert _text(result) == _text(quiet) == "Progress test completed"
    assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == [
        ("progress-test-1", 0, 100), ("progress-test-1", 50, 100), ("progress-test-1", 100, 100)]
    assert elapsed >= 0.09


async def test_logging_tool_sends_three_info_messages_about_50ms_apart(host, connect):
    async with connect(host) as client:
        assert await client.request("logging/setLevel", {"level": "debug"}) == {}
        assert client.session is not None
        arrivals: list[float] = []
        outlet = client.session.outlet

        async def timed(message: dict[str, Any], related: Any) -> None:
            if message.get("method") == "notifications/message":
                arrivals.append(time.monotonic())
            await outlet(message, related)

        client.session.outlet = timed
        result = await client.call_tool("test_tool_with_logging")
        logs = _notes(client, "notifications/message")
    assert _text(result) == "Logging test completed"
    assert [(log["level"], log["data"]) for log in logs] == [
        ("info", "Tool execution started"), ("info", "Tool processing data"), ("info", "Tool execution completed")]
    assert all(later - earlier >= 0.04 for earlier, later in itertools.pairwise(arrivals))


async def test_logging_tool_respects_the_client_log_level(host, connect):
    async with connect(host) as client:
        await client.request("logging/setLevel", {"level": "warning"})
        result = await client.call_tool("test_tool_with_logging")
        logs = _notes(client, "notifications/message")
    assert _text(result) == "Logging test completed" and logs == []


class ClosableOutlet:
    """A session outlet whose transport can drop a request's stream, like Streamable HTTP."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.closed: list[tuple[Any, int | None]] = []
        self.order: list[str] = []

    async def __call__(self, message: dict[str, Any], related: Any) -> None:
        self.order.append(message.get("method", "result"))
        await self.inner(message, related)

    async def close_stream(self, request_id: Any, retry_ms: int | None) -> bool:
        self.closed.append((request_id, retry_ms))
        self.order.append("close")
        return True


@pytest.mark.parametrize("section,retry_ms", [({}, 500), ({"reconnect_retry_ms": 1500}, 1500)])
async def test_reconnection_closes_the_stream_mid_call_and_still_answers(make_host, connect, section, retry_ms):
    async with connect(make_host(**section)) as client:
        assert client.session is not None
        outlet = client.session.outlet = ClosableOutlet(client.session.outlet)
        reply = await client.raw_request("tools/call", {"name": "test_reconnection", "arguments": {},
                                                         "_meta": {"progressToken": "reconnect"}},
                                         request_id="call-1")
    assert "after the stream was closed" in _text(reply["result"])
    assert outlet.closed == [("call-1", retry_ms)]
    assert outlet.order == ["notifications/message", "notifications/progress", "close", "notifications/progress"]


@pytest.mark.parametrize("revision", SESSION_ERAS)
async def test_reconnection_answers_where_the_stream_cannot_be_closed(host, connect, revision):
    async with connect(host, protocol_version=revision) as client:
        result = await client.call_tool("test_reconnection")
    assert _text(result) == ("Reconnection test completed: result sent on the same stream "
                             "(this transport cannot close it).")


# -- tools: sampling and elicitation -----------------------------------------------------------------

@pytest.mark.parametrize("revision,content", [
    ("2025-11-25", {"type": "text", "text": "This is a test response from the client"}),
    ("2025-11-25", [{"type": "text", "text": "This is a test response "}, {"type": "text", "text": "from the client"}]),
    ("2025-06-18", {"type": "text", "text": "This is a test response from the client"}),
])
async def test_sampling_asks_the_client_model_with_the_prompt(host, connect, revision, content):
    asked: list[dict[str, Any]] = []

    def sample(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"role": "assistant", "content": content, "model": "test-model", "stopReason": "endTurn"}

    async with connect(host, protocol_version=revision, sampling=sample) as client:
        result = await client.call_tool("test_sampling", {"prompt": "Test prompt for sampling"})
    assert _text(result) == "LLM response: This is a test response from the client"
    assert asked == [{"messages": [{"role": "user", "content": {"type": "text", "text": "Test prompt for sampling"}}],
                      "maxTokens": 100}]


async def test_sampling_without_the_capability_is_an_error_result(host, connect):
    async with connect(host) as client:
        result = await client.call_tool("test_sampling", {"prompt": "hi"})
    assert result["isError"] is True and "sampling" in result["content"][0]["text"]


@pytest.mark.parametrize("revision", SESSION_ERAS)
async def test_elicitation_asks_with_the_message_and_reports_the_answer(host, connect, revision):
    asked: list[dict[str, Any]] = []

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"username": "testuser", "email": "test@example.com"}}

    async with connect(host, protocol_version=revision, elicitation=elicit) as client:
        result = await client.call_tool("test_elicitation", {"message": "Please provide your information"})
    assert _text(result) == ('User response: action=accept, '
                             'content={"username": "testuser", "email": "test@example.com"}')
    [params] = asked
    assert params["message"] == "Please provide your information"
    assert params["requestedSchema"] == {
        "type": "object",
        "properties": {"username": {"type": "string", "description": "User's response"},
                       "email": {"type": "string", "description": "User's email address"}},
        "required": ["username", "email"],
    }
    assert params.get("mode") == ("form" if revision >= "2025-11-25" else None)


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_elicitation_reports_a_refusal(host, connect, action):
    async with connect(host, elicitation=lambda params: {"action": action}) as client:
        result = await client.call_tool("test_elicitation", {"message": "Who are you?"})
    assert _text(result) == f"User response: action={action}, content=null"


async def test_elicitation_without_the_capability_is_an_error_result(host, connect):
    async with connect(host) as client:
        result = await client.call_tool("test_elicitation", {"message": "Who are you?"})
    assert result["isError"] is True and "elicitation" in result["content"][0]["text"]


async def test_sep1034_elicitation_schema_carries_the_defaults(host, connect):
    asked: list[dict[str, Any]] = []
    answer = {"name": "Jane Smith", "age": 25, "score": 88.0, "status": "inactive", "verified": False}

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": answer}

    async with connect(host, elicitation=elicit) as client:
        result = await client.call_tool("test_elicitation_sep1034_defaults")
    [params] = asked
    assert params["requestedSchema"] == SEP1034_SCHEMA
    assert params["mode"] == "form" and params["message"]
    assert _text(result) == f"Elicitation completed: action=accept, content={json.dumps(answer)}"


async def test_sep1330_elicitation_schema_has_the_five_enum_shapes(host, connect):
    asked: list[dict[str, Any]] = []
    answer = {"untitledSingle": "option1", "titledSingle": "value1", "legacyEnum": "opt1",
              "untitledMulti": ["option1", "option2"], "titledMulti": ["value1", "value2"]}

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": answer}

    async with connect(host, elicitation=elicit) as client:
        result = await client.call_tool("test_elicitation_sep1330_enums")
    [params] = asked
    assert params["requestedSchema"] == SEP1330_SCHEMA
    assert params["mode"] == "form" and params["message"]
    assert _text(result) == f"Elicitation completed: action=accept, content={json.dumps(answer)}"


async def test_sep1330_answers_outside_the_enums_are_refused(host, connect):
    bad = {"untitledSingle": "option9", "titledMulti": ["value1"]}
    async with connect(host, elicitation=lambda params: {"action": "accept", "content": bad}) as client:
        result = await client.call_tool("test_elicitation_sep1330_enums")
    assert result["isError"] is True


# -- resources ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("revision", SESSION_ERAS)
async def test_resources_read_with_exact_contents(host, connect, revision):
    async with connect(host, protocol_version=revision) as client:
        text = await client.read_resource("test://static-text")
        binary = await client.read_resource("test://static-binary")
        template = await client.read_resource("test://template/123/data")
        watched = await client.read_resource(WATCHED_URI)
        with pytest.raises(mcphost.McpError) as caught:
            await client.read_resource("test://nonexistent-resource-for-conformance-testing")
    assert text["contents"] == [{"uri": "test://static-text", "mimeType": "text/plain",
                                 "text": "This is the content of the static text resource."}]
    assert binary["contents"] == [{"uri": "test://static-binary", "mimeType": "image/png", "blob": _b64(PNG)}]
    assert template["contents"] == [{"uri": "test://template/123/data", "mimeType": "application/json",
                                     "text": '{"id":"123","templateTest":true,"data":"Data for ID: 123"}'}]
    [contents] = watched["contents"]
    assert contents["uri"] == WATCHED_URI and contents["mimeType"] == "text/plain"
    assert contents["text"].startswith("Watched resource content")
    assert caught.value.code == NOT_FOUND


async def test_subscribe_and_unsubscribe_answer_empty_results(host, connect):
    async with connect(host) as client:
        assert await client.request("resources/subscribe", {"uri": WATCHED_URI}) == {}
        assert await client.request("resources/unsubscribe", {"uri": WATCHED_URI}) == {}
        assert client.initialize_result is not None
        assert client.initialize_result["capabilities"]["resources"].get("subscribe") is True


async def test_the_watched_resource_changes_and_subscribers_hear_of_it(make_host, connect):
    plugin = ConformancePlugin()
    host = make_host(plugin, watched_interval_seconds=0.05)
    await host.start()
    try:
        async with connect(host) as subscriber, connect(host) as bystander:
            before = (await subscriber.read_resource(WATCHED_URI))["contents"][0]["text"]
            await subscriber.request("resources/subscribe", {"uri": WATCHED_URI})
            await _eventually(lambda: len(_notes(subscriber, "notifications/resources/updated")) >= 2)
            after = (await subscriber.read_resource(WATCHED_URI))["contents"][0]["text"]
            await subscriber.request("resources/unsubscribe", {"uri": WATCHED_URI})
            heard = len(_notes(subscriber, "notifications/resources/updated"))
            await asyncio.sleep(0.2)
            assert len(_notes(subscriber, "notifications/resources/updated")) <= heard + 1  # one may be in flight
            assert _notes(bystander, "notifications/resources/updated") == []
        assert set(map(json.dumps, _notes(subscriber, "notifications/resources/updated"))) == {
            json.dumps({"uri": WATCHED_URI})}
        assert before != after
        task = plugin.watched(host).task
        assert task is not None and not task.done()
    finally:
        await host.stop()
    assert task.done() and plugin.watched(host).task is None


async def test_host_stop_cancels_the_background_task(make_host, connect):
    plugin = ConformancePlugin()
    host = make_host(plugin, watched_interval_seconds=0.05)
    async with connect(host) as client:  # the client starts the host, and stops it on exit
        await client.request("resources/subscribe", {"uri": WATCHED_URI})
        await _eventually(lambda: bool(_notes(client, "notifications/resources/updated")))
        task = plugin.watched(host).task
        assert task is not None and not task.done()
    assert task.cancelled()
    revision = plugin.watched(host).revision
    await asyncio.sleep(0.2)
    assert plugin.watched(host).revision == revision


async def test_each_host_has_its_own_watched_resource_task(make_host):
    plugin = ConformancePlugin()  # even one plugin object shared by two hosts keeps them apart
    first, second = make_host(plugin, watched_interval_seconds=0.05), make_host(plugin, watched_interval_seconds=10)
    await first.start()
    await second.start()
    try:
        one, two = plugin.watched(first), plugin.watched(second)
        assert one is not two and one.task is not two.task
        await first.stop()
        assert one.task is None and two.task is not None and not two.task.done()
        await asyncio.sleep(0.15)
        assert one.revision <= 1 and two.revision == 0
    finally:
        await first.stop()
        await second.stop()
    assert two.task is None


# -- prompts and completion --------------------------------------------------------------------------

@pytest.mark.parametrize("revision", SESSION_ERAS)
async def test_prompts_return_the_expected_messages(host, connect, revision):
    async with connect(host, protocol_version=revision) as client:
        simple = await client.get_prompt("test_simple_prompt")
        with_args = await client.get_prompt("test_prompt_with_arguments", {"arg1": "testValue1", "arg2": "testValue2"})
        embedded = await client.get_prompt("test_prompt_with_embedded_resource",
                                           {"resourceUri": "test://example-resource"})
        image = await client.get_prompt("test_prompt_with_image")
        with pytest.raises(mcphost.McpError) as caught:
            await client.get_prompt("test_prompt_with_arguments", {"arg1": "only one"})
    assert simple["messages"] == [{"role": "user", "content": {"type": "text",
                                                               "text": "This is a simple prompt for testing."}}]
    assert with_args["messages"] == [{"role": "user", "content": {
        "type": "text", "text": "Prompt with arguments: arg1='testValue1', arg2='testValue2'"}}]
    assert embedded["messages"] == [
        {"role": "user", "content": {"type": "resource", "resource": {
            "uri": "test://example-resource", "mimeType": "text/plain",
            "text": "Embedded resource content for testing."}}},
        {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}},
    ]
    assert image["messages"] == [
        {"role": "user", "content": {"type": "image", "data": _b64(PNG), "mimeType": "image/png"}},
        {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}},
    ]
    assert caught.value.code == -32602


async def test_completion_for_arg1_returns_a_list(host, connect):
    ref = {"type": "ref/prompt", "name": "test_prompt_with_arguments"}
    async with connect(host) as client:
        completion = await client.complete(ref, "arg1", "test")
        nothing = await client.complete(ref, "arg1", "zzz")
        other = await client.complete(ref, "arg2", "test")
    assert completion["values"] and all(value.startswith("test") for value in completion["values"])
    assert nothing["values"] == [] and other["values"] == []


# -- as installed ------------------------------------------------------------------------------------

def _installed_host(section: dict[str, Any] | None = None) -> Host:
    host = Host(config_from_dict({"plugins": {"conformance": section or {"enabled": True}}}), selection=None)
    host.prepare()
    return host


def test_the_installed_entry_point_is_named_conformance_and_serves_every_fixture():
    host = _installed_host()
    info = host.plugin_infos["conformance"]
    assert info.status == "active" and info.distribution == "mcphost-conformance", info
    assert TOOL_NAMES <= set(host.catalog.tools)
    assert {"test://static-text", "test://static-binary", WATCHED_URI} <= set(host.catalog.resources)
    assert "test://template/{id}/data" in host.catalog.templates
    assert set(PROMPT_NAMES) <= set(host.catalog.prompts)


@pytest.mark.parametrize("section,message", [
    ({"watched_interval_seconds": 0}, "plugins.conformance.watched_interval_seconds"),
    ({"watched_interval_seconds": "fast"}, "plugins.conformance.watched_interval_seconds"),
    ({"reconnect_retry_ms": -1}, "plugins.conformance.reconnect_retry_ms"),
    ({"interval": 3}, "interval"),
])
def test_the_config_section_is_validated(section, message):
    with pytest.raises(ConfigError) as caught:
        _installed_host(section)
    assert message in str(caught.value)


# -- SEP-2243 custom headers -------------------------------------------------------------------------

async def test_custom_header_tool_declares_a_string_x_mcp_header_and_echoes_its_argument(host, connect):
    """http-custom-header-server-validation needs a tool with a string ``x-mcp-header`` property.

    The suite takes the first tool having one and sends ``Mcp-Param-{X}``; the listed schema must
    pass mcphost's own annotation checks, and the header map must name the argument.
    """
    from mcphost.protocol.modern import (
        ModernError,
        check_x_mcp_headers,
        encode_header_value,
        validate_modern,
        x_mcp_headers,
    )

    async with connect(host) as client:
        tools = {tool["name"]: tool for tool in await client.list_tools()}
        echoed = await client.call_tool("test_custom_header", {"value": "Hello", "count": 42})
        plain = await client.call_tool("test_custom_header", {"value": "x"})
    schema = tools["test_custom_header"]["inputSchema"]
    assert tools["test_custom_header"]["description"].strip()
    assert schema["properties"]["value"] == {
        "type": "string", "description": "Any text; mirrored in the Mcp-Param-Value header", "x-mcp-header": "Value"}
    assert schema["required"] == ["value"]
    assert check_x_mcp_headers(schema) == []
    assert x_mcp_headers(schema) == {"value": "value", "count": "count"}
    # The suite picks the first listed tool with an x-mcp-header property: this one is the only one.
    marked = [name for name, tool in tools.items()
              if any("x-mcp-header" in prop for prop in tool["inputSchema"].get("properties", {}).values())]
    assert marked == ["test_custom_header"]
    assert _text(echoed) == "Received: value='Hello', count=42"
    assert _text(plain) == "Received: value='x'"

    def request(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "test_custom_header", "arguments": arguments,
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}}

    base = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "test_custom_header"}
    mapping = x_mcp_headers(schema)
    lookup = {"test_custom_header": mapping}.get
    accepted = [("Hello", "=?base64?SGVsbG8=?="), ("Hello", "Hello"), ("caf\u00e9", encode_header_value("caf\u00e9")),
                ("SGVsbG8=", "SGVsbG8="), ("=?base64?SGVsbG8=", "=?base64?SGVsbG8=")]
    for value, header in accepted:
        validate_modern(request({"value": value}), {**base, "Mcp-Param-Value": header}, tool_header_params=lookup)
    rejected = [({"value": "Hello"}, "=?base64?SGVsbG8?="), ({"value": "Hello"}, "=?base64?SGVs!!!bG8=?="),
                ({"value": "Hello"}, "World"), ({"value": "test-value"}, None)]
    for arguments, header in rejected:
        headers = dict(base) if header is None else {**base, "Mcp-Param-Value": header}
        with pytest.raises(ModernError) as caught:
            validate_modern(request(arguments), headers, tool_header_params=lookup)
        assert caught.value.code == -32020, (arguments, header)
