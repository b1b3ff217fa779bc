"""Tests for the wire-schema validator in :mod:`tests.support.wire`, for every protocol revision."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.wire import (
    _RESULTS,
    REVISIONS,
    SCHEMA_DIR,
    WireSchemaError,
    WireValidator,
    client_request_methods,
    definitions,
    result_definition,
    result_definitions,
)

MODERN = "2026-07-28"
LEGACY = tuple(r for r in REVISIONS if r != MODERN)


@pytest.fixture(params=REVISIONS)
def revision(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def wire(revision: str) -> WireValidator:
    return WireValidator(revision)


# -- message builders ---------------------------------------------------------------------------------


def complete(revision: str, result: dict[str, Any], *, cacheable: bool = False) -> dict[str, Any]:
    """``result`` in the revision's shape: 2026 adds ``resultType`` (and caching hints on cacheable ones)."""
    if revision != MODERN:
        return result
    extra: dict[str, Any] = {"resultType": "complete"}
    if cacheable:
        extra |= {"ttlMs": 0, "cacheScope": "private"}
    return result | extra


def response(result: dict[str, Any], rid: int | str = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def handshake(revision: str) -> tuple[dict[str, Any], str]:
    """The revision's opening result: ``initialize`` (legacy) or ``server/discover`` (2026)."""
    capabilities = {"tools": {"listChanged": True}, "logging": {}}
    if revision == MODERN:
        result = {"supportedVersions": [MODERN], "capabilities": capabilities}
        return response(complete(revision, result, cacheable=True)), "server/discover"
    result = {
        "protocolVersion": revision,
        "capabilities": capabilities,
        "serverInfo": {"name": "mcphost", "version": "0.1.0"},
        "instructions": "Be nice.",
    }
    return response(result), "initialize"


def tools_list(revision: str, tool: dict[str, Any] | None = None) -> dict[str, Any]:
    if tool is None:
        tool = {"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}}
    return response(complete(revision, {"tools": [tool]}, cacheable=True))


def call_result(revision: str, block: dict[str, Any] | None = None) -> dict[str, Any]:
    if block is None:
        block = {"type": "text", "text": "hello"}
    return response(complete(revision, {"content": [block], "isError": False}))


ERROR = {"jsonrpc": "2.0", "id": 7, "error": {"code": -32601, "message": "Method not found"}}
PROGRESS = notification("notifications/progress", {"progressToken": "tok", "progress": 1, "total": 2})
ELICIT = {
    "jsonrpc": "2.0",
    "id": 3,
    "method": "elicitation/create",
    "params": {
        "message": "Name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}


# -- valid messages -----------------------------------------------------------------------------------


def test_handshake_result(wire: WireValidator, revision: str) -> None:
    message, method = handshake(revision)
    wire.check(message, request_method=method)
    wire.check(message)  # ServerResult union


def test_tools_list_result(wire: WireValidator, revision: str) -> None:
    wire.check(tools_list(revision), request_method="tools/list")


def test_call_result_with_text(wire: WireValidator, revision: str) -> None:
    wire.check(call_result(revision), request_method="tools/call")


def test_progress_notification(wire: WireValidator) -> None:
    wire.check(PROGRESS)


def test_error_with_int_id(wire: WireValidator) -> None:
    wire.check(ERROR)
    wire.check({**ERROR, "id": "abc", "error": {"code": -32602, "message": "Bad.", "data": {"x": 1}}})


@pytest.mark.parametrize(
    "method",
    [
        "notifications/tools/list_changed",
        "notifications/resources/list_changed",
        "notifications/prompts/list_changed",
    ],
)
def test_list_changed_notifications(wire: WireValidator, method: str) -> None:
    wire.check(notification(method))


def test_logging_and_updated_notifications(wire: WireValidator) -> None:
    wire.check(notification("notifications/message", {"level": "info", "logger": "x", "data": {"a": 1}}))
    wire.check(notification("notifications/resources/updated", {"uri": "file:///a.txt"}))


def test_cancelled_notification(wire: WireValidator) -> None:
    wire.check(notification("notifications/cancelled", {"requestId": 4, "reason": "gone"}))


def test_empty_results(wire: WireValidator, revision: str) -> None:
    methods = ["ping", "resources/subscribe", "logging/setLevel"] if revision in LEGACY else []
    for method in methods:
        wire.check(response({}), request_method=method)


def test_check_all_counts(wire: WireValidator, revision: str) -> None:
    handshake_message, method = handshake(revision)
    messages = [
        (handshake_message, method),
        (tools_list(revision), "tools/list"),
        (PROGRESS, None),
        (call_result(revision), "tools/call"),
        (ERROR, None),
    ]
    assert wire.check_all(messages) == 5
    assert wire.check_all([]) == 0


@pytest.mark.parametrize("revision", LEGACY)
def test_ping_request_from_server(revision: str) -> None:
    WireValidator(revision).check({"jsonrpc": "2.0", "id": "s1", "method": "ping"})


@pytest.mark.parametrize("revision", ["2025-06-18", "2025-11-25"])
def test_elicitation_request_where_defined(revision: str) -> None:
    WireValidator(revision).check(ELICIT)


def test_error_without_id_only_in_newer_schemas(wire: WireValidator, revision: str) -> None:
    no_id = {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}
    if revision in ("2025-03-26", "2025-06-18"):
        with pytest.raises(WireSchemaError, match="'id' is a required property"):
            wire.check(no_id)
    else:
        wire.check(no_id)


def test_modern_input_required_result() -> None:
    wire = WireValidator(MODERN)
    result = {
        "resultType": "input_required",
        "inputRequests": {"name": {"method": "elicitation/create", "params": ELICIT["params"]}},
        "requestState": "opaque",
    }
    for method in ("tools/call", "prompts/get", "resources/read"):
        wire.check(response(result), request_method=method)
    with pytest.raises(WireSchemaError, match="ListToolsResult"):
        wire.check(response(result), request_method="tools/list")


def test_task_result_for_tools_call() -> None:
    task = {
        "taskId": "t1",
        "status": "working",
        "createdAt": "2025-11-25T00:00:00Z",
        "lastUpdatedAt": "2025-11-25T00:00:00Z",
        "ttl": None,
    }
    WireValidator("2025-11-25").check(response({"task": task}), request_method="tools/call")


def test_modern_subscription_results() -> None:
    wire = WireValidator(MODERN)
    wire.check(
        response({"resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": 9}}),
        request_method="subscriptions/listen",
    )
    wire.check(
        notification(
            "notifications/subscriptions/acknowledged",
            {"notifications": {}, "_meta": {"io.modelcontextprotocol/subscriptionId": 9}},
        )
    )


# -- invalid messages ---------------------------------------------------------------------------------


def test_tool_missing_input_schema(wire: WireValidator, revision: str) -> None:
    with pytest.raises(WireSchemaError, match="'inputSchema' is a required property") as info:
        wire.check(tools_list(revision, {"name": "echo"}), request_method="tools/list")
    assert info.value.path == "$.result.tools[0]"
    assert info.value.revision == revision
    assert "ListToolsResult" in info.value.definition


def test_content_block_with_unknown_type(wire: WireValidator, revision: str) -> None:
    with pytest.raises(WireSchemaError, match=r"\$\.result\.content\[0\]") as info:
        wire.check(call_result(revision, {"type": "bogus", "text": "x"}), request_method="tools/call")
    assert "TextContent" in str(info.value)  # the failed alternatives are listed


def test_progress_without_token(wire: WireValidator) -> None:
    bad = notification("notifications/progress", {"progress": 1})
    with pytest.raises(WireSchemaError, match="'progressToken' is a required property") as info:
        wire.check(bad)
    assert info.value.definition == "ProgressNotification"
    assert info.value.path == "$.params"


def test_error_with_null_id(wire: WireValidator) -> None:
    # No revision's schema admits a null id: RequestId is string|integer everywhere (2025-11-25 and
    # later only make the id optional).
    with pytest.raises(WireSchemaError, match=r"at \$\.id: None is not of type"):
        wire.check({**ERROR, "id": None})


def test_error_with_null_id_2025_03_26() -> None:
    with pytest.raises(WireSchemaError, match="JSONRPCError"):
        WireValidator("2025-03-26").check({**ERROR, "id": None})


def test_elicitation_request_under_2025_03_26() -> None:
    with pytest.raises(WireSchemaError, match="'elicitation/create' is not a server-to-client request"):
        WireValidator("2025-03-26").check(ELICIT)


def test_no_server_requests_in_2026() -> None:
    wire = WireValidator(MODERN)
    for message in (ELICIT, {"jsonrpc": "2.0", "id": 1, "method": "ping"}):
        with pytest.raises(WireSchemaError, match="no server-to-client requests"):
            wire.check(message)


def test_result_for_unknown_method(wire: WireValidator, revision: str) -> None:
    message = response(complete(revision, {}))
    with pytest.raises(WireSchemaError, match="'tools/frobnicate' is not a client request method") as info:
        wire.check(message, request_method="tools/frobnicate")
    assert "tools/list" in str(info.value)  # the known methods are named
    with pytest.raises(WireSchemaError, match="tools/frobnicate"):
        result_definition(revision, "tools/frobnicate")


def test_unknown_notification_method(wire: WireValidator) -> None:
    with pytest.raises(WireSchemaError, match="is not a server notification"):
        wire.check(notification("notifications/whatever"))


def test_client_only_notification_is_not_a_server_notification(wire: WireValidator) -> None:
    with pytest.raises(WireSchemaError, match="notifications/initialized"):
        wire.check(notification("notifications/initialized"))


def test_malformed_envelopes(wire: WireValidator) -> None:
    with pytest.raises(WireSchemaError, match="'jsonrpc' is a required property"):
        wire.check({"id": 1, "result": {}})
    with pytest.raises(WireSchemaError, match=r"'2\.0' was expected"):
        wire.check({**ERROR, "jsonrpc": "1.0"})
    with pytest.raises(WireSchemaError, match="ambiguous"):
        wire.check({"jsonrpc": "2.0", "id": 1, "result": {}, "error": ERROR["error"]})
    with pytest.raises(WireSchemaError, match="neither"):
        wire.check({"jsonrpc": "2.0", "id": 1})
    with pytest.raises(WireSchemaError, match="expected one JSON object"):
        wire.check([ERROR])  # type: ignore[arg-type]
    with pytest.raises(WireSchemaError, match="is not of type 'object'"):
        wire.check({"jsonrpc": "2.0", "id": 1, "result": 5}, request_method="tools/call")


def test_modern_result_requires_result_type() -> None:
    wire = WireValidator(MODERN)
    with pytest.raises(WireSchemaError, match="'resultType' is a required property"):
        wire.check(response({"content": []}), request_method="tools/call")
    with pytest.raises(WireSchemaError, match=r"'(cacheScope|ttlMs)' is a required property"):
        wire.check(response({"resultType": "complete", "tools": []}), request_method="tools/list")


def test_modern_complete_result_is_not_excused_by_input_required() -> None:
    # anyOf(CallToolResult, InputRequiredResult) alone would accept this (InputRequiredResult is open);
    # resultType "complete" selects the CallToolResult branch.
    bad = response({"resultType": "complete", "content": [{"type": "bogus"}]})
    with pytest.raises(WireSchemaError, match="CallToolResult"):
        WireValidator(MODERN).check(bad, request_method="tools/call")


def test_error_text_names_revision_definition_and_message(wire: WireValidator, revision: str) -> None:
    bad = tools_list(revision, {"name": "echo-" + "x" * 2000})
    with pytest.raises(WireSchemaError) as info:
        wire.check(bad, request_method="tools/list")
    text = str(info.value)
    assert f"[MCP {revision}]" in text
    assert "ListToolsResult (tools/list result)" in text
    assert '"jsonrpc": "2.0"' in text
    assert "chars)" in text  # long messages are truncated
    assert len(text) < 2000
    assert isinstance(info.value, AssertionError)


# -- the method -> definition table -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("revision", "method", "expected"),
    [
        ("2025-06-18", "tools/call", ("CallToolResult",)),
        ("2025-03-26", "initialize", ("InitializeResult",)),
        ("2025-03-26", "ping", ("EmptyResult",)),
        ("2025-06-18", "resources/templates/list", ("ListResourceTemplatesResult",)),
        ("2025-06-18", "completion/complete", ("CompleteResult",)),
        ("2025-11-25", "tools/call", ("CallToolResult", "CreateTaskResult")),
        ("2025-11-25", "tasks/get", ("GetTaskResult",)),
        ("2025-11-25", "tasks/result", ("GetTaskPayloadResult",)),
        ("2025-11-25", "logging/setLevel", ("EmptyResult",)),
        (MODERN, "tools/call", ("CallToolResult", "InputRequiredResult")),
        (MODERN, "prompts/get", ("GetPromptResult", "InputRequiredResult")),
        (MODERN, "resources/read", ("ReadResourceResult", "InputRequiredResult")),
        (MODERN, "server/discover", ("DiscoverResult",)),
        (MODERN, "subscriptions/listen", ("SubscriptionsListenResult",)),
    ],
)
def test_result_definitions(revision: str, method: str, expected: tuple[str, ...]) -> None:
    assert result_definitions(revision, method) == expected
    assert result_definition(revision, method) == expected[0]


@pytest.mark.parametrize(
    ("revision", "method"),
    [
        (MODERN, "initialize"),
        (MODERN, "ping"),
        (MODERN, "logging/setLevel"),
        (MODERN, "resources/subscribe"),
        ("2025-06-18", "tasks/get"),
        ("2025-11-25", "server/discover"),
    ],
)
def test_methods_a_revision_lacks(revision: str, method: str) -> None:
    with pytest.raises(WireSchemaError):
        result_definition(revision, method)


def test_every_client_request_has_a_result(revision: str) -> None:
    methods = client_request_methods(revision)
    assert "tools/call" in methods
    for method in methods:
        assert set(result_definitions(revision, method)) <= definitions(revision)


def test_table_names_exist_somewhere() -> None:
    known = set().union(*(definitions(r) for r in REVISIONS))
    for names in _RESULTS.values():
        assert set(names) <= known


def test_table_matches_modern_result_responses() -> None:
    # 2026-07-28 spells out each method's response as <X>ResultResponse; the table must agree.
    defs = json.loads((SCHEMA_DIR / f"{MODERN}.json").read_text())["$defs"]
    checked = 0
    for method in client_request_methods(MODERN):
        names = result_definitions(MODERN, method)
        envelope = defs.get(names[0] + "Response")
        if envelope is None:
            continue
        schema = envelope["properties"]["result"]
        refs = [s["$ref"] for s in schema["anyOf"]] if "anyOf" in schema else [schema["$ref"]]
        assert {ref.rsplit("/", 1)[-1] for ref in refs} == set(names), method
        checked += 1
    assert checked == len(client_request_methods(MODERN))


def test_unknown_revision() -> None:
    with pytest.raises(ValueError, match="unknown MCP revision"):
        WireValidator("2024-11-05")
