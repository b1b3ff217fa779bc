"""The 2026-07-28 fixtures, driven through the host's kernel the way a stateless client reaches it.

Each request gets its own short-lived modern session (``kernel.sessions.ephemeral``) and goes through
``kernel.receive_modern``, the steps ``Kernel.serve`` runs for the stdio and HTTP transports; the notifications the
kernel sends meanwhile are collected from the session's outlet. Every reply and notification is
validated against the official 2026-07-28 schema (``tests/support/wire.py`` of the mcphost repository).
The scenarios follow ``CONFORMANCE.md``: server-stateless (the diagnostic tools) and the
input-required-result (MRTR) family. The session-era behaviour of the same fixtures is checked
at the end with mcphost's in-memory client.
"""

from __future__ import annotations

import asyncio
import base64
import importlib
import itertools
import json
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcphost_conformance import ConformancePlugin
from mcphost_conformance.stateless import CAPITAL_QUESTION

from mcphost.host import Host
from mcphost.protocol.modern import validate_modern
from mcphost.testing import MemoryClient, make_host

REPO_ROOT = Path(__file__).resolve().parents[3]
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
INVALID_PARAMS = -32602
MISSING_CLIENT_CAPABILITY = -32021
FULL_CAPABILITIES = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}
CLIENT_INFO = {"name": "conformance-test-client", "version": "1.0.0"}
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "description": "Your name"}},
               "required": ["name"]}
ROOTS = {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}
PARIS = {"role": "assistant", "content": {"type": "text", "text": "The capital of France is Paris."},
         "model": "test-model", "stopReason": "endTurn"}

STATELESS_TOOLS = {
    "test_missing_capability", "test_streaming_elicitation", "test_logging_tool", "test_trigger_tool_change",
    "test_trigger_prompt_change", "test_input_required_result_elicitation", "test_input_required_result_sampling",
    "test_input_required_result_list_roots", "test_input_required_result_request_state",
    "test_input_required_result_multiple_inputs", "test_input_required_result_multi_round",
    "test_input_required_result_tampered_state", "test_input_required_result_capabilities",
}


def _wire_validator() -> Any:
    """``tests.support.wire.WireValidator`` of the mcphost checkout this plugin lives in."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    return importlib.import_module("tests.support.wire").WireValidator


WireValidator = _wire_validator()


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


# -- a stateless client straight into the kernel -------------------------------------------------------

@dataclass
class Reply:
    """One answered modern request: the response and the notifications sent while it ran."""

    message: dict[str, Any]
    notifications: list[dict[str, Any]] = field(default_factory=list)

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.message, self.message
        return self.message["result"]

    @property
    def error(self) -> dict[str, Any]:
        assert "error" in self.message, self.message
        return self.message["error"]

    @property
    def complete(self) -> bool:
        return "result" in self.message and self.message["result"].get("resultType") == "complete"

    @property
    def input_required(self) -> dict[str, Any]:
        """The InputRequiredResult (asserted to be one)."""
        result = self.result
        assert result["resultType"] == "input_required", result
        assert isinstance(result["inputRequests"], dict) and result["inputRequests"]
        assert isinstance(result["requestState"], str) and result["requestState"]
        return result

    @property
    def text(self) -> str:
        result = self.result
        assert result["resultType"] == "complete" and not result.get("isError"), result
        [block] = result["content"]
        assert block["type"] == "text"
        return block["text"]

    def notes(self, method: str) -> list[dict[str, Any]]:
        return [n.get("params", {}) for n in self.notifications if n.get("method") == method]


class ModernClient:
    """Sends 2026-07-28 requests into ``host``'s kernel; checks everything sent back against the schema."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.validator = WireValidator(MODERN)
        self._ids = itertools.count(1)

    def message(self, method: str, params: dict[str, Any] | None = None, *,
                capabilities: dict[str, Any] | None = None, log_level: str | None = None,
                progress_token: str | int | None = None, request_id: Any = None) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
            "io.modelcontextprotocol/clientCapabilities": FULL_CAPABILITIES if capabilities is None else capabilities,
        }
        if log_level is not None:
            meta["io.modelcontextprotocol/logLevel"] = log_level
        if progress_token is not None:
            meta["progressToken"] = progress_token
        return {"jsonrpc": "2.0", "id": next(self._ids) if request_id is None else request_id,
                "method": method, "params": {**(params or {}), "_meta": meta}}

    def start(self, message: dict[str, Any], notifications: list[dict[str, Any]]) -> asyncio.Future[Any]:
        """Hand ``message`` to the kernel; notifications land in ``notifications`` (checked as they come)."""
        kernel = self.host.kernel
        assert kernel is not None

        async def outlet(note: dict[str, Any], related: Any) -> None:
            self.validator.check(note)  # a server-to-client *request* fails here: 2026 has none
            notifications.append(note)

        session = kernel.sessions.ephemeral(validate_modern(message, None), None, outlet)
        assert session.era == "modern"
        reply = kernel.receive_modern(session, message)
        assert reply is not None
        return reply

    async def send(self, message: dict[str, Any]) -> Reply:
        notifications: list[dict[str, Any]] = []
        answer = await self.start(message, notifications)
        assert answer["id"] == message["id"]
        self.validator.check(answer, request_method=message["method"])
        return Reply(answer, notifications)

    async def request(self, method: str, params: dict[str, Any] | None = None, **options: Any) -> Reply:
        return await self.send(self.message(method, params, **options))

    async def call(self, name: str, arguments: dict[str, Any] | None = None, *,
                   responses: Any = ..., state: str | None = None, **options: Any) -> Reply:
        """``tools/call``; ``responses`` becomes ``inputResponses`` (``None`` sends JSON null)."""
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        if responses is not ...:
            params["inputResponses"] = responses
        if state is not None:
            params["requestState"] = state
        return await self.request("tools/call", params, **options)

    async def prompt(self, name: str, *, responses: Any = ..., state: str | None = None, **options: Any) -> Reply:
        params: dict[str, Any] = {"name": name}
        if responses is not ...:
            params["inputResponses"] = responses
        if state is not None:
            params["requestState"] = state
        return await self.request("prompts/get", params, **options)


@pytest.fixture
async def host() -> AsyncIterator[Host]:
    host = make_host(("conformance", ConformancePlugin()), config={"plugins": {"conformance": {"enabled": True}}})
    await host.start()
    try:
        yield host
    finally:
        await host.stop()


@pytest.fixture
def modern(host: Host) -> ModernClient:
    return ModernClient(host)


def _methods(result: dict[str, Any]) -> dict[str, str]:
    return {key: request["method"] for key, request in result["inputRequests"].items()}


def _sealed_answers(state: str) -> dict[str, Any]:
    """What a requestState carries (signed, not encrypted: the client may read it)."""
    body = state.split(".")[2]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))["a"]


# -- listings ----------------------------------------------------------------------------------------

async def test_modern_listings_have_every_fixture_with_a_description(modern):
    tools = await modern.request("tools/list")
    prompts = await modern.request("prompts/list")
    listed = {tool["name"]: tool for tool in tools.result["tools"]}
    assert STATELESS_TOOLS <= set(listed)
    assert all(tool["description"].strip() for tool in listed.values())
    assert all(listed[name]["inputSchema"] == {"type": "object", "properties": {}, "additionalProperties": False}
               for name in STATELESS_TOOLS)
    [prompt] = [p for p in prompts.result["prompts"] if p["name"] == "test_input_required_result_prompt"]
    assert prompt["description"].strip() and not prompt.get("arguments")
    # input-required-result-unsupported-methods: listings are never input_required
    assert tools.result["resultType"] == prompts.result["resultType"] == "complete"


# -- server-stateless: the diagnostic tools ----------------------------------------------------------

async def test_missing_capability_fails_with_32021_naming_sampling(modern):
    message = modern.message("tools/call", {"name": "test_missing_capability", "arguments": {}},
                             capabilities={}, request_id="cap-1")
    reply = await modern.send(message)
    assert reply.message["id"] == "cap-1"
    assert reply.error["code"] == MISSING_CLIENT_CAPABILITY
    assert reply.error["data"]["requiredCapabilities"] == {"sampling": {}}
    assert reply.notifications == []
    for capabilities in ({"elicitation": {}}, {"roots": {}}):
        other = await modern.call("test_missing_capability", capabilities=capabilities)
        assert other.error["code"] == MISSING_CLIENT_CAPABILITY


async def test_missing_capability_with_sampling_asks_and_completes(modern):
    first = await modern.call("test_missing_capability", capabilities={"sampling": {}})
    assert _methods(first.input_required) == {"capability_probe": "sampling/createMessage"}
    done = await modern.call("test_missing_capability", capabilities={"sampling": {}},
                             responses={"capability_probe": PARIS}, state=first.result["requestState"])
    assert done.text == "Sampling capability is declared. LLM response: The capital of France is Paris."


async def test_streaming_elicitation_succeeds_without_sending_requests(modern):
    quiet = await modern.call("test_streaming_elicitation", capabilities={"elicitation": {}})
    assert quiet.text.startswith("Streaming complete")
    assert quiet.notifications == []  # no progress token, no logLevel: nothing to stream
    loud = await modern.call("test_streaming_elicitation", capabilities={"elicitation": {}},
                             progress_token="stream-1", log_level="info")
    assert loud.text.startswith("Streaming complete")
    assert all("id" not in note for note in loud.notifications)
    assert [(p["progressToken"], p["progress"], p["total"]) for p in loud.notes("notifications/progress")] == [
        ("stream-1", 0, 2), ("stream-1", 1, 2), ("stream-1", 2, 2)]
    assert [p["data"] for p in loud.notes("notifications/message")] == [
        "Streaming started", "Streaming in progress", "Streaming finished"]


async def test_logging_tool_logs_only_when_the_request_sets_a_level(modern):
    silent = await modern.call("test_logging_tool")
    assert silent.text == "Logging tool completed"
    assert silent.notes("notifications/message") == [] and silent.notifications == []
    everything = await modern.call("test_logging_tool", log_level="debug")
    assert [(p["level"], p["data"]) for p in everything.notes("notifications/message")] == [
        ("debug", "Logging tool: debug details"), ("info", "Logging tool: started"),
        ("warning", "Logging tool: a warning for testing")]
    info = await modern.call("test_logging_tool", log_level="info")
    assert [p["level"] for p in info.notes("notifications/message")] == ["info", "warning"]
    errors_only = await modern.call("test_logging_tool", log_level="error")
    assert errors_only.text == "Logging tool completed" and errors_only.notifications == []


@pytest.mark.parametrize("tool,kind", [("test_trigger_tool_change", "tools"),
                                       ("test_trigger_prompt_change", "prompts")])
async def test_trigger_tools_complete_and_announce_to_session_era_clients(host, modern, tool, kind):
    async with MemoryClient(host, protocol_version=LEGACY) as bystander:
        reply = await modern.call(tool)
        assert reply.text == f"Sent notifications/{kind}/list_changed"
        assert reply.notifications == []  # not on the trigger's own response stream
        await asyncio.sleep(0)
        assert [n["method"] for n in bystander.notifications] == [f"notifications/{kind}/list_changed"]
    assert WireValidator(LEGACY).check_all(bystander.sent) > 0


async def _listen(modern: ModernClient, wanted: dict[str, Any], request_id: str
                  ) -> tuple[asyncio.Future[Any], list[dict[str, Any]]]:
    notes: list[dict[str, Any]] = []
    stream = modern.start(modern.message("subscriptions/listen", {"notifications": wanted}, request_id=request_id),
                          notes)
    for _ in range(100):
        if notes:
            break
        await asyncio.sleep(0.01)
    [ack] = notes
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["_meta"][SUBSCRIPTION_ID] == request_id
    return stream, notes


async def _close(stream: asyncio.Future[Any]) -> None:
    stream.cancel()
    await asyncio.gather(stream, return_exceptions=True)


async def test_a_listen_stream_filtered_to_prompts_hears_no_tool_change(modern):
    stream, notes = await _listen(modern, {"promptsListChanged": True}, "listen-prompts")
    try:
        assert (await modern.call("test_trigger_tool_change")).text == "Sent notifications/tools/list_changed"
        await asyncio.sleep(0.05)
        assert [n["method"] for n in notes] == ["notifications/subscriptions/acknowledged"]
    finally:
        await _close(stream)


@pytest.mark.parametrize("tool,flag,method", [
    ("test_trigger_tool_change", "toolsListChanged", "notifications/tools/list_changed"),
    ("test_trigger_prompt_change", "promptsListChanged", "notifications/prompts/list_changed"),
])
async def test_triggers_reach_matching_listen_streams_tagged_with_the_subscription(modern, tool, flag, method):
    stream, notes = await _listen(modern, {flag: True}, "listen-1")
    try:
        await modern.call(tool)
        for _ in range(50):
            if len(notes) > 1:
                break
            await asyncio.sleep(0.01)
        assert [n["method"] for n in notes] == ["notifications/subscriptions/acknowledged", method]
        assert all(n["params"]["_meta"][SUBSCRIPTION_ID] == "listen-1" for n in notes)
    finally:
        await _close(stream)


# -- input-required-result: basics -----------------------------------------------------------------------

async def test_basic_elicitation_asks_for_user_name_then_greets(modern):
    first = await modern.call("test_input_required_result_elicitation")
    result = first.input_required
    assert "resultType" in result  # input-required-result-result-type
    [(key, request)] = result["inputRequests"].items()
    assert key == "user_name" and request["method"] == "elicitation/create"
    assert request["params"]["requestedSchema"] == NAME_SCHEMA and request["params"]["message"]
    assert request["params"].get("mode", "form") == "form" and "elicitationId" not in request["params"]
    assert first.notifications == []
    done = await modern.call("test_input_required_result_elicitation",
                             responses={"user_name": accept(name="Alice")}, state=result["requestState"])
    assert done.text == "Hello, Alice!"
    # The state is the server's memory, not a requirement: an answer alone completes too.
    alone = await modern.call("test_input_required_result_elicitation", responses={"user_name": accept(name="Bob")})
    assert alone.text == "Hello, Bob!"


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_basic_elicitation_reports_a_refusal(modern, action):
    done = await modern.call("test_input_required_result_elicitation", responses={"user_name": {"action": action}})
    assert done.text == f"No name given (action={action})."


async def test_basic_sampling_asks_the_capital_question_with_100_tokens(modern):
    first = await modern.call("test_input_required_result_sampling")
    [(key, request)] = first.input_required["inputRequests"].items()
    assert key == "capital_question" and request["method"] == "sampling/createMessage"
    assert request["params"] == {"messages": [{"role": "user", "content": {"type": "text", "text": CAPITAL_QUESTION}}],
                                 "maxTokens": 100}
    done = await modern.call("test_input_required_result_sampling", responses={key: PARIS},
                             state=first.result["requestState"])
    assert done.text == "LLM response: The capital of France is Paris."


async def test_basic_list_roots_asks_for_the_roots_then_lists_them(modern):
    first = await modern.call("test_input_required_result_list_roots")
    [(key, request)] = first.input_required["inputRequests"].items()
    assert request["method"] == "roots/list"
    done = await modern.call("test_input_required_result_list_roots", responses={key: ROOTS},
                             state=first.result["requestState"])
    assert done.text == "Client roots: file:///test/root (Test Root)"
    empty = await modern.call("test_input_required_result_list_roots", responses={key: {"roots": []}})
    assert empty.text == "Client roots: no roots"
    # A malformed roots answer is asked again rather than handed to the tool.
    odd = await modern.call("test_input_required_result_list_roots",
                            responses={key: {"roots": [1, {"name": "no uri"}, {"uri": "file:///a", "name": 2}]}})
    assert list(odd.input_required["inputRequests"]) == [key]


async def test_request_state_round_trips_and_the_retry_says_state_ok(modern):
    first = await modern.call("test_input_required_result_request_state")
    result = first.input_required
    [(key, request)] = result["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    assert request["params"]["requestedSchema"]["properties"]["ok"]["type"] == "boolean"
    done = await modern.call("test_input_required_result_request_state", responses={key: accept(ok=True)},
                             state=result["requestState"])
    assert "state-ok" in done.text and done.text.endswith("ok=true")


async def test_multiple_inputs_are_asked_in_one_round(modern):
    first = await modern.call("test_input_required_result_multiple_inputs")
    assert _methods(first.input_required) == {"user_name": "elicitation/create",
                                              "capital_question": "sampling/createMessage",
                                              "client_roots": "roots/list"}
    answers = {"user_name": accept(name="Alice"), "capital_question": PARIS, "client_roots": ROOTS}
    done = await modern.call("test_input_required_result_multiple_inputs", responses=answers,
                             state=first.result["requestState"])
    assert done.text == ("Name: Alice; LLM response: The capital of France is Paris.; "
                         "Client roots: file:///test/root (Test Root)")


async def test_multiple_inputs_answered_in_part_asks_only_what_is_missing(modern):
    first = await modern.call("test_input_required_result_multiple_inputs")
    partial = await modern.call("test_input_required_result_multiple_inputs",
                                responses={"user_name": accept(name="Alice")}, state=first.result["requestState"])
    assert _methods(partial.input_required) == {"capital_question": "sampling/createMessage",
                                                "client_roots": "roots/list"}
    assert set(_sealed_answers(partial.result["requestState"])) == {"user_name"}
    done = await modern.call("test_input_required_result_multiple_inputs",
                             responses={"capital_question": PARIS, "client_roots": ROOTS},
                             state=partial.result["requestState"])
    assert done.text.startswith("Name: Alice; ")


async def test_multi_round_asks_step1_then_step2_with_an_updated_state(modern):
    first = await modern.call("test_input_required_result_multi_round")
    assert _methods(first.input_required) == {"step1": "elicitation/create"}
    second = await modern.call("test_input_required_result_multi_round", responses={"step1": accept(name="Alice")},
                               state=first.result["requestState"])
    result = second.input_required
    assert _methods(result) == {"step2": "elicitation/create"}
    assert "Alice" in result["inputRequests"]["step2"]["params"]["message"]
    assert result["inputRequests"]["step2"]["params"]["requestedSchema"]["properties"]["color"]["type"] == "string"
    assert result["requestState"] != first.result["requestState"]
    done = await modern.call("test_input_required_result_multi_round", responses={"step2": accept(color="blue")},
                             state=result["requestState"])
    assert done.text == "Hello, Alice! Your favorite color is blue."


async def test_multi_round_retry_without_the_state_starts_over(modern):
    lost = await modern.call("test_input_required_result_multi_round", responses={"step2": accept(color="blue")})
    assert _methods(lost.input_required) == {"step1": "elicitation/create"}


# -- input-required-result: integrity, capabilities, validation ----------------------------------------

async def test_a_tampered_request_state_is_refused_with_32602(modern):
    first = await modern.call("test_input_required_result_tampered_state")
    result = first.input_required
    [key] = result["inputRequests"]
    answer = {key: accept(confirm=True)}
    tampered = await modern.call("test_input_required_result_tampered_state", responses=answer,
                                 state=result["requestState"] + "-TAMPERED")
    assert tampered.error["code"] == INVALID_PARAMS
    done = await modern.call("test_input_required_result_tampered_state", responses=answer,
                             state=result["requestState"])
    assert done.text == "Confirmed: true (action=accept)"


async def test_a_request_state_replayed_on_another_tool_is_refused(modern):
    first = await modern.call("test_input_required_result_elicitation")
    replayed = await modern.call("test_input_required_result_tampered_state", state=first.result["requestState"],
                                 responses={"confirmation": accept(confirm=True)})
    assert replayed.error["code"] == INVALID_PARAMS


@pytest.mark.parametrize("capabilities,expected", [
    ({"sampling": {}}, {"capital_question": "sampling/createMessage"}),
    ({"elicitation": {}}, {"user_name": "elicitation/create"}),
    (FULL_CAPABILITIES, {"user_name": "elicitation/create", "capital_question": "sampling/createMessage"}),
])
async def test_capabilities_only_what_the_client_declared_is_asked(modern, capabilities, expected):
    first = await modern.call("test_input_required_result_capabilities", capabilities=capabilities)
    assert _methods(first.input_required) == expected
    answers = {"user_name": accept(name="Alice"), "capital_question": PARIS}
    done = await modern.call("test_input_required_result_capabilities", capabilities=capabilities,
                             responses={key: answers[key] for key in expected}, state=first.result["requestState"])
    assert done.complete and "Name: " in done.text


async def test_capabilities_with_neither_capability_completes_without_asking(modern):
    done = await modern.call("test_input_required_result_capabilities", capabilities={})
    assert done.text == ("Name: not asked (no elicitation capability); "
                         "LLM response: not asked (no sampling capability)")


@pytest.mark.parametrize("tool", [
    "test_input_required_result_elicitation", "test_input_required_result_sampling",
    "test_input_required_result_list_roots", "test_input_required_result_multiple_inputs",
])
async def test_questions_the_client_cannot_answer_fail_with_32021(modern, tool):
    reply = await modern.call(tool, capabilities={})
    assert reply.error["code"] == MISSING_CLIENT_CAPABILITY
    assert len(reply.error["data"]["requiredCapabilities"]) == 1


async def test_a_missing_input_response_gets_a_new_input_required_result(modern):
    reply = await modern.call("test_input_required_result_elicitation",
                              responses={"wrong_key": accept(name="Alice")})
    assert _methods(reply.input_required) == {"user_name": "elicitation/create"}


async def test_extra_input_responses_are_ignored(modern):
    responses = {"user_name": accept(name="Alice"), "unexpected_key": accept(x=1),
                 "another_unknown": {"roots": []}}
    done = await modern.call("test_input_required_result_elicitation", responses=responses)
    assert done.text == "Hello, Alice!"


@pytest.mark.parametrize("responses", [
    {"user_name": 12345},
    None,
    {"user_name": accept(name=12345)},  # content that breaks the requested schema
    {"user_name": {"action": "maybe"}},
    {"user_name": "Alice"},
    "not an object",
])
async def test_invalid_input_responses_never_complete(modern, responses):
    reply = await modern.call("test_input_required_result_elicitation", responses=responses)
    assert not reply.complete
    assert _methods(reply.input_required) == {"user_name": "elicitation/create"}


async def test_the_prompt_asks_for_user_context_then_returns_messages(modern):
    first = await modern.prompt("test_input_required_result_prompt")
    [(key, request)] = first.input_required["inputRequests"].items()
    assert key == "user_context" and request["method"] == "elicitation/create"
    assert request["params"]["requestedSchema"]["properties"]["context"]["type"] == "string"
    done = await modern.prompt("test_input_required_result_prompt",
                               responses={"user_context": accept(context="a conformance run")},
                               state=first.result["requestState"])
    assert done.result["resultType"] == "complete"
    assert done.result["messages"] == [{"role": "user", "content": {
        "type": "text", "text": "Context from the user: a conformance run. Please take it into account."}}]
    assert done.result["description"]
    declined = await modern.prompt("test_input_required_result_prompt",
                                   responses={"user_context": {"action": "decline"}})
    assert "No context was provided" in declined.result["messages"][0]["content"]["text"]


# -- input-required-result: host limits ---------------------------------------------------------------

async def test_unknown_input_responses_are_not_sealed_into_the_state(modern):
    reply = await modern.call("test_input_required_result_elicitation", responses={"unknown_key": accept(x=1)})
    assert _methods(reply.input_required) == {"user_name": "elicitation/create"}
    assert "unknown_key" not in _sealed_answers(reply.result["requestState"])


async def test_a_round_whose_answers_are_too_large_to_seal_still_gets_an_answer(modern):
    reply = await modern.call("test_input_required_result_multi_round", responses={"step1": accept(name="x" * 60_000)})
    assert "error" in reply.message or reply.result["resultType"] == "input_required"


# -- the session-era tools over 2026-07-28 --------------------------------------------------------------

async def test_session_era_sampling_and_elicitation_tools_work_through_input_required(modern):
    first = await modern.call("test_sampling", {"prompt": "Test prompt for sampling"})
    [(key, request)] = first.input_required["inputRequests"].items()
    assert request["params"]["maxTokens"] == 100
    done = await modern.call("test_sampling", {"prompt": "Test prompt for sampling"}, responses={key: PARIS},
                             state=first.result["requestState"])
    assert done.text == "LLM response: The capital of France is Paris."

    first = await modern.call("test_elicitation", {"message": "Please provide your information"})
    [(key, request)] = first.input_required["inputRequests"].items()
    assert request["params"]["message"] == "Please provide your information"
    done = await modern.call("test_elicitation", {"message": "Please provide your information"},
                             responses={key: accept(username="testuser", email="test@example.com")},
                             state=first.result["requestState"])
    assert done.text == ('User response: action=accept, '
                         'content={"username": "testuser", "email": "test@example.com"}')

    for tool in ("test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums"):
        first = await modern.call(tool)
        [key] = first.input_required["inputRequests"]
        done = await modern.call(tool, responses={key: {"action": "decline"}}, state=first.result["requestState"])
        assert done.text == "Elicitation completed: action=decline, content=null"


async def test_session_era_notification_tools_work_over_2026(modern):
    progress = await modern.call("test_tool_with_progress", progress_token="progress-test-1")
    assert progress.text == "Progress test completed"
    assert [p["progress"] for p in progress.notes("notifications/progress")] == [0, 50, 100]
    logged = await modern.call("test_tool_with_logging", log_level="debug")
    assert len(logged.notes("notifications/message")) == 3
    assert (await modern.call("test_tool_with_logging")).notifications == []
    reconnect = await modern.call("test_reconnection")
    assert "on the same stream" in reconnect.text


# -- the same fixtures in the session era ---------------------------------------------------------------

@pytest.fixture
async def legacy(host: Host) -> AsyncIterator[Callable[..., MemoryClient]]:
    """``async with legacy(**options) as client``: a session-era client; its traffic is schema-checked."""
    clients: list[MemoryClient] = []

    def open_client(**options: Any) -> MemoryClient:
        options.setdefault("protocol_version", LEGACY)
        client = MemoryClient(host, **options)
        clients.append(client)
        return client

    yield open_client
    for client in clients:
        assert WireValidator(client.protocol_version).check_all(client.sent) > 0


def _legacy_text(result: dict[str, Any]) -> str:
    assert not result.get("isError"), result
    [block] = result["content"]
    return block["text"]


@pytest.mark.parametrize("revision", [LEGACY, "2025-06-18"])
async def test_session_era_clients_are_asked_with_server_to_client_requests(legacy, revision):
    asked: list[str] = []

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append("elicitation")
        fields = params["requestedSchema"]["properties"]
        return accept(**{name: {"name": "Alice", "color": "blue", "ok": True, "confirm": True,
                                "context": "ctx"}[name] for name in fields})

    def sample(params: dict[str, Any]) -> dict[str, Any]:
        asked.append("sampling")
        return PARIS

    async with legacy(protocol_version=revision, elicitation=elicit, sampling=sample, roots=ROOTS["roots"]) as client:
        texts = {name: _legacy_text(await client.call_tool(name)) for name in sorted(STATELESS_TOOLS)}
        prompt = await client.get_prompt("test_input_required_result_prompt")
    assert texts["test_input_required_result_elicitation"] == "Hello, Alice!"
    assert texts["test_input_required_result_sampling"] == "LLM response: The capital of France is Paris."
    assert texts["test_input_required_result_list_roots"] == "Client roots: file:///test/root (Test Root)"
    assert texts["test_input_required_result_request_state"] == "state-ok: ok=true"
    assert texts["test_input_required_result_multiple_inputs"] == (
        "Name: Alice; LLM response: The capital of France is Paris.; Client roots: file:///test/root (Test Root)")
    assert texts["test_input_required_result_multi_round"] == "Hello, Alice! Your favorite color is blue."
    assert texts["test_input_required_result_tampered_state"] == "Confirmed: true (action=accept)"
    assert texts["test_input_required_result_capabilities"] == (
        "Name: Alice; LLM response: The capital of France is Paris.")
    assert texts["test_missing_capability"].startswith("Sampling capability is declared.")
    assert texts["test_logging_tool"] == "Logging tool completed"
    assert texts["test_streaming_elicitation"].startswith("Streaming complete")
    assert prompt["messages"][0]["content"]["text"].startswith("Context from the user: ctx.")
    assert asked.count("sampling") == 4 and asked.count("elicitation") == 8
    methods = [n["method"] for n in client.notifications]
    assert "notifications/tools/list_changed" in methods and "notifications/prompts/list_changed" in methods


async def test_session_era_clients_without_capabilities_get_error_results(legacy):
    async with legacy() as client:
        missing = await client.call_tool("test_missing_capability")
        capabilities = await client.call_tool("test_input_required_result_capabilities")
        streaming = await client.call_tool("test_streaming_elicitation")
    assert missing["isError"] is True and "sampling" in missing["content"][0]["text"]
    assert _legacy_text(capabilities) == ("Name: not asked (no elicitation capability); "
                                          "LLM response: not asked (no sampling capability)")
    assert _legacy_text(streaming).startswith("Streaming complete")


async def test_session_era_capabilities_tool_skips_elicitation_for_a_sampling_only_client(legacy):
    async with legacy(sampling=lambda params: PARIS) as client:
        result = await client.call_tool("test_input_required_result_capabilities")
        asked = [m for m, _ in client.sent if "id" in m and "method" in m]
    assert _legacy_text(result) == "Name: not asked (no elicitation capability); LLM response: " \
                                   "The capital of France is Paris."
    assert [m["method"] for m in asked] == ["sampling/createMessage"]
