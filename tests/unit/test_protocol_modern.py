"""Era detection and validation of 2026-07-28 requests (``mcphost.protocol.era`` / ``.modern``)."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcphost.protocol.era import era_of, has_modern_meta, request_meta
from mcphost.protocol.errors import HEADER_MISMATCH, INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION
from mcphost.protocol.modern import (
    ModernError,
    ModernRequest,
    check_x_mcp_headers,
    decode_header_value,
    encode_header_value,
    method_not_found,
    param_header_value,
    validate_modern,
    x_mcp_headers,
)
from mcphost.protocol.versions import LEGACY_VERSIONS, MODERN_VERSIONS, SUPPORTED_VERSIONS, is_modern

V = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
MODERN_META = {PV: V, CAPS: {}}


def request(method: str = "tools/list", params: dict[str, Any] | None = None, *, meta: Any = "default",
            notification: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = dict(params or {})
    if meta == "default":
        body["_meta"] = dict(MODERN_META)
    elif meta is not None:
        body["_meta"] = meta
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": body}
    if not notification:
        message["id"] = 1
    return message


def headers(method: str = "tools/list", **extra: str) -> dict[str, str]:
    result = {"mcp-protocol-version": V, "mcp-method": method}
    result.update({name.replace("_", "-").lower(): value for name, value in extra.items()})
    return result


def call(name: str = "echo", arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return request("tools/call", {"name": name, "arguments": arguments if arguments is not None else {}})


def accepted(message: dict[str, Any], hdrs: dict[str, str] | None, **kwargs: Any) -> ModernRequest:
    """What ``validate_modern`` answers for a request it lets through: the sender as its ``_meta``
    describes it, and the message left as it came (what the handler reads)."""
    before = copy.deepcopy(message)
    result = validate_modern(message, hdrs, **kwargs)
    assert isinstance(result, ModernRequest)
    meta = message["params"]["_meta"]
    assert result.version == meta[PV] == V
    assert result.client_capabilities == meta[CAPS]
    assert result.meta == meta
    assert message == before
    return result


def rejected(message: dict[str, Any], hdrs: dict[str, str] | None, **kwargs: Any) -> ModernError:
    with pytest.raises(ModernError) as info:
        validate_modern(message, hdrs, **kwargs)
    return info.value


# ---------------------------------------------------------------- versions


def test_versions() -> None:
    assert MODERN_VERSIONS == ("2026-07-28",)
    assert SUPPORTED_VERSIONS == MODERN_VERSIONS + LEGACY_VERSIONS
    assert is_modern("2026-07-28")
    assert not is_modern("2025-11-25")
    assert not is_modern(None)


# ---------------------------------------------------------------- era


@pytest.mark.parametrize(
    ("method", "meta", "header", "session", "era"),
    [
        # session id → legacy (unless the body carries modern _meta)
        ("tools/list", None, "2025-11-25", "abc", "legacy"),
        ("tools/list", None, V, "abc", "legacy"),
        ("tools/list", MODERN_META, V, "abc", "modern"),
        # modern _meta → modern, even for initialize, even without a header (stdio)
        ("tools/list", MODERN_META, None, None, "modern"),
        ("initialize", MODERN_META, V, None, "modern"),
        ("tools/list", {PV: V}, None, None, "modern"),
        ("tools/list", {CAPS: {}}, None, None, "modern"),
        ("tools/list", {PV: None}, V, None, "modern"),
        # header naming a non-legacy version → modern (then -32602 for the missing _meta)
        ("tools/list", None, V, None, "modern"),
        ("server/discover", {}, V, None, "modern"),
        ("tools/list", None, "1991-01-01", None, "modern"),
        ("tools/list", None, f"  {V} ", None, "modern"),
        # initialize without modern _meta → legacy, whatever the header says
        ("initialize", None, None, None, "legacy"),
        ("initialize", {"progressToken": 1}, V, None, "legacy"),
        # otherwise legacy
        ("tools/list", None, None, None, "legacy"),
        ("tools/list", {"progressToken": 1}, None, None, "legacy"),
        ("tools/list", None, "2025-06-18", None, "legacy"),
        ("tools/list", None, "2025-03-26", None, "legacy"),
        ("tools/list", None, "2024-11-05", None, "legacy"),
        ("tools/list", None, "", None, "legacy"),
        ("tools/list", None, None, "", "legacy"),
        ("tools/list", "not an object", None, None, "legacy"),
        ("tools/list", {"io.modelcontextprotocol/related-task": {"taskId": "t"}}, None, None, "legacy"),
        (None, None, None, None, "legacy"),
    ],
)
def test_era_of(method: str | None, meta: object, header: str | None, session: str | None, era: str) -> None:
    assert era_of(method=method, meta=meta, header_version=header, session_id=session) == era


def test_request_meta() -> None:
    assert request_meta({"_meta": {"a": 1}}) == {"a": 1}
    assert request_meta({"_meta": [1]}) is None
    assert request_meta({}) is None
    assert request_meta(None) is None
    assert request_meta("x") is None
    assert has_modern_meta(MODERN_META)
    assert not has_modern_meta({"progressToken": 1})


# ---------------------------------------------------------------- validate_modern: _meta and versions


def test_valid_request_over_http_and_stdio() -> None:
    meta = {**MODERN_META, "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
            "io.modelcontextprotocol/logLevel": "warning", "progressToken": "p1"}
    for hdrs in (headers(), None):
        result = validate_modern(request(meta=meta), hdrs)
        assert result == ModernRequest(version=V, client_capabilities={}, client_info={"name": "c", "version": "1"},
                                       log_level="warning", progress_token="p1", meta=meta)


def test_optional_meta_fields_default() -> None:
    result = validate_modern(request(meta={**MODERN_META, "progressToken": True,
                                           "io.modelcontextprotocol/clientInfo": "x"}), headers())
    assert result.client_info is None
    assert result.log_level is None
    assert result.progress_token is None
    assert validate_modern(request(meta={**MODERN_META, "progressToken": 7}), None).progress_token == 7


def test_meta_version_without_header_is_header_mismatch() -> None:
    hdrs = headers()
    del hdrs["mcp-protocol-version"]
    error = rejected(request(), hdrs)
    assert (error.code, error.status) == (HEADER_MISMATCH, 400)
    assert "MCP-Protocol-Version" in error.message
    # ... even when the rest of _meta is missing: this check comes first
    error = rejected(request(meta={PV: V}), hdrs)
    assert error.code == HEADER_MISMATCH


@pytest.mark.parametrize(
    "meta",
    [None, {}, {CAPS: {}}, {PV: V}, {PV: V, CAPS: None}, {PV: V, CAPS: []}, {PV: 2026, CAPS: {}}, {PV: None, CAPS: {}}],
)
def test_missing_meta_fields_are_invalid_params_even_with_header(meta: Any) -> None:
    for hdrs in (headers(), None):
        error = rejected(request(meta=meta), hdrs)
        assert (error.code, error.status) == (INVALID_PARAMS, 400)


def test_missing_meta_comes_before_header_mismatch() -> None:
    # header present and differing from nothing: -32602, not -32020
    error = rejected(request(meta={CAPS: {}}), headers())
    assert error.code == INVALID_PARAMS


def test_params_absent_entirely() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "server/discover"}
    assert rejected(message, headers("server/discover")).code == INVALID_PARAMS


def test_header_differs_from_meta_version() -> None:
    error = rejected(request(meta={PV: "v999.0.0", CAPS: {}}), headers())
    assert (error.code, error.status) == (HEADER_MISMATCH, 400)
    error = rejected(request(), {**headers(), "mcp-protocol-version": "2025-11-25"})
    assert error.code == HEADER_MISMATCH
    error = rejected(request(meta={PV: V + "\x01", CAPS: {}}), {**headers(), "mcp-protocol-version": V + "\x01"})
    assert error.code == HEADER_MISMATCH


def test_unsupported_version() -> None:
    for hdrs in ({**headers(), "mcp-protocol-version": "v999.0.0"}, None):
        error = rejected(request(meta={PV: "v999.0.0", CAPS: {}}), hdrs)
        assert (error.code, error.status) == (UNSUPPORTED_PROTOCOL_VERSION, 400)
        assert "Unsupported protocol version" in error.message
        assert error.data == {"supported": list(SUPPORTED_VERSIONS), "requested": "v999.0.0"}
        assert set(error.data["supported"]) <= set(SUPPORTED_VERSIONS)


def test_legacy_version_in_modern_meta_is_unsupported() -> None:
    error = rejected(request(meta={PV: "2025-11-25", CAPS: {}}), {**headers(), "mcp-protocol-version": "2025-11-25"})
    assert error.code == UNSUPPORTED_PROTOCOL_VERSION


def test_unknown_header_version_without_body_version_names_it() -> None:
    # RELIABILITY A6: the body must contain the literal other clients sniff.
    error = rejected(request(meta=None), {"mcp-protocol-version": "1991-01-01", "mcp-method": "tools/list"})
    assert error.code == UNSUPPORTED_PROTOCOL_VERSION
    assert "Unsupported protocol version" in error.message
    assert error.data["requested"] == "1991-01-01"


def test_invalid_log_level() -> None:
    meta = {**MODERN_META, "io.modelcontextprotocol/logLevel": "verbose"}
    error = rejected(request(meta=meta), headers())
    assert (error.code, error.status) == (INVALID_PARAMS, 400)
    # the logLevel check comes before the mirrored headers
    assert rejected(request(meta=meta), {**headers(), "mcp-method": "x"}).code == INVALID_PARAMS


def test_unsupported_version_comes_before_mirrored_headers() -> None:
    hdrs = {"mcp-protocol-version": "v9", "mcp-method": "wrong"}
    assert rejected(request(meta={PV: "v9", CAPS: {}}), hdrs).code == UNSUPPORTED_PROTOCOL_VERSION


# ---------------------------------------------------------------- Mcp-Method


def test_mcp_method_required_and_equal() -> None:
    hdrs = headers()
    del hdrs["mcp-method"]
    error = rejected(request(), hdrs)
    assert (error.code, error.status) == (HEADER_MISMATCH, 400)
    assert "Mcp-Method" in error.message
    error = rejected(request(), headers("tools/call"))
    assert error.code == HEADER_MISMATCH
    assert "Mcp-Method" in error.message


def test_mcp_method_value_is_case_sensitive() -> None:
    assert rejected(request(), headers("TOOLS/LIST")).code == HEADER_MISMATCH


@pytest.mark.parametrize("name", ["mcp-method", "MCP-METHOD", "Mcp-Method", "mCp-MeThOd"])
def test_header_names_case_insensitive(name: str) -> None:
    hdrs = {"MCP-Protocol-Version": V, name: "tools/list"}
    accepted(request(), hdrs)
    assert rejected(request(), {"MCP-Protocol-Version": V, name: "tools/call"}).code == HEADER_MISMATCH


def test_mcp_method_whitespace_trimmed() -> None:
    accepted(request(), headers(" \ttools/list \t"))
    assert rejected(request(), headers(" \ttools/call \t")).code == HEADER_MISMATCH  # trimmed, still compared


def test_mcp_method_invalid_chars() -> None:
    assert rejected(request(), headers("tools/list\x00")).code == HEADER_MISMATCH
    assert rejected(request(), headers("tools/listé")).code == HEADER_MISMATCH


def test_notification_needs_no_mcp_method_but_a_sent_one_must_match() -> None:
    message = request("notifications/something", notification=True)
    validate_modern(message, {"mcp-protocol-version": V})
    assert rejected(message, {"mcp-protocol-version": V, "mcp-method": "other"}).code == HEADER_MISMATCH
    hdrs = {"mcp-method": "notifications/something"}
    assert rejected(message, hdrs).code == HEADER_MISMATCH  # the version header is still required


def test_stdio_skips_header_checks() -> None:
    accepted(call("x", {"a": 1}), None, tool_header_params=lambda name: {"a": "a"})
    # The same request over HTTP without its Mcp-Param-a header is refused: the skip is stdio's alone.
    error = rejected(call("x", {"a": 1}), headers("tools/call", mcp_name="x"),
                     tool_header_params=lambda name: {"a": "a"})
    assert (error.code, error.status) == (HEADER_MISMATCH, 400)


def test_method_not_found_is_404() -> None:
    error = method_not_found("ping")
    assert (error.code, error.status) == (-32601, 404)


# ---------------------------------------------------------------- Mcp-Name


@pytest.mark.parametrize(
    ("method", "params", "value"),
    [
        ("tools/call", {"name": "echo", "arguments": {}}, "echo"),
        ("prompts/get", {"name": "greet"}, "greet"),
        ("resources/read", {"uri": "file:///a b.txt"}, "file:///a b.txt"),
        ("tasks/get", {"taskId": "t-1"}, "t-1"),
        ("tasks/update", {"taskId": "t-1"}, "t-1"),
        ("tasks/cancel", {"taskId": "t-1"}, "t-1"),
    ],
)
def test_mcp_name(method: str, params: dict[str, Any], value: str) -> None:
    message = request(method, params)
    validate_modern(message, headers(method, mcp_name=value))
    missing = rejected(message, headers(method))
    assert (missing.code, missing.status) == (HEADER_MISMATCH, 400)
    assert "Mcp-Name" in missing.message
    assert rejected(message, headers(method, mcp_name=value + "x")).code == HEADER_MISMATCH
    assert rejected(message, headers(method, mcp_name=value.upper())).code == HEADER_MISMATCH


def test_mcp_name_padded_accepted() -> None:
    accepted(call("tool"), headers("tools/call", mcp_name="  tool  "))
    accepted(call("tool"), headers("tools/call", mcp_name="\ttool\t"))
    assert rejected(call("tool"), headers("tools/call", mcp_name="  tol  ")).code == HEADER_MISMATCH


def test_mcp_name_not_needed_elsewhere() -> None:
    assert accepted(request("tools/list"), headers("tools/list")).version == V
    assert accepted(request("tools/list"), headers("tools/list", mcp_name="whatever")).version == V  # ignored


def test_mcp_name_body_missing_is_left_to_the_handler() -> None:
    nameless = request("tools/call", {"arguments": {}})
    accepted(nameless, headers("tools/call"))
    assert "name" not in nameless["params"]  # the handler still sees the body as sent, and refuses it
    numbered = request("tools/call", {"name": 5})
    accepted(numbered, headers("tools/call", mcp_name="5"))
    assert numbered["params"]["name"] == 5


def test_mcp_name_sentinel() -> None:
    name = "  héllo wörld "
    validate_modern(call(name), headers("tools/call", mcp_name=encode_header_value(name)))
    assert rejected(call(name), headers("tools/call", mcp_name=name.strip())).code == HEADER_MISMATCH


def test_mcp_name_non_ascii_literal_rejected() -> None:
    assert rejected(call("héllo"), headers("tools/call", mcp_name="héllo")).code == HEADER_MISMATCH


# ---------------------------------------------------------------- base64 sentinel


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [
        ("=?base64?SGVsbG8=?=", "Hello"),
        ("  =?base64?SGVsbG8=?=  ", "Hello"),
        ("=?base64?SGVsbG8?=", None),  # missing padding
        ("=?base64?SGVs!!!bG8=?=", None),  # invalid characters
        ("=?base64?SGVsbG9=?=", None),  # non-canonical (padding bits set)
        ("=?base64?SGVsbG8_?=", None),  # URL-safe alphabet is not base64
        ("=?base64?SGVs bG8=?=", None),
        ("=?base64?/w==?=", None),  # not UTF-8
        ("=?base64??=", ""),
        ("=?base64?SGVsbG8=", "=?base64?SGVsbG8="),  # no suffix: literal
        ("SGVsbG8=?=", "SGVsbG8=?="),  # no prefix: literal
        ("=?BASE64?SGVsbG8=?=", "=?BASE64?SGVsbG8=?="),  # markers are lowercase: literal
        ("=?base64?=", "=?base64?="),  # too short to hold both markers: literal
        ("plain value", "plain value"),
        ("a\tb", "a\tb"),
        ("bad\x7f", None),
        ("bad\r\n", None),
        ("caf\u00e9", None),
    ],
)
def test_decode_header_value(raw: str, decoded: str | None) -> None:
    assert decode_header_value(raw) == decoded


def test_sentinel_not_decoded_when_disabled() -> None:
    assert decode_header_value("=?base64?SGVsbG8=?=", sentinel=False) == "=?base64?SGVsbG8=?="


def test_encode_header_value() -> None:
    assert encode_header_value("Hello") == "Hello"
    assert encode_header_value("a b") == "a b"
    assert encode_header_value(" a") == "=?base64?IGE=?="
    assert encode_header_value("") == "=?base64??="
    assert encode_header_value("=?base64?SGVsbG8=?=").startswith("=?base64?")
    assert encode_header_value("tab\there") != "tab\there"
    assert encode_header_value("日本") == "=?base64?" + base64.b64encode("日本".encode()).decode() + "?="


@given(st.text())
def test_encode_decode_round_trip(value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return  # lone surrogates cannot travel in UTF-8 at all
    encoded = encode_header_value(value)
    assert all(" " <= ch <= "~" for ch in encoded)
    assert decode_header_value(encoded) == value


def test_param_header_value() -> None:
    assert param_header_value(None) is None
    assert param_header_value(True) == "true"
    assert param_header_value(False) == "false"
    assert param_header_value(42) == "42"
    assert param_header_value(42.0) == "42"
    assert param_header_value("x y") == "x y"
    assert param_header_value([1]) is None


# ---------------------------------------------------------------- Mcp-Param-*

SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
        "note": {"type": "string"},
    },
}


def mapping(name: str) -> dict[str, str] | None:
    return x_mcp_headers(SCHEMA) if name == "deploy" else None


def deploy(arguments: dict[str, Any], **hdrs: str) -> ModernRequest:
    """A deploy call the headers let through (see :func:`accepted`)."""
    return accepted(call("deploy", arguments), headers("tools/call", mcp_name="deploy", **hdrs),
                    tool_header_params=mapping)


def deploy_rejected(arguments: dict[str, Any], **hdrs: str) -> ModernError:
    return rejected(call("deploy", arguments), headers("tools/call", mcp_name="deploy", **hdrs),
                    tool_header_params=mapping)


def test_x_mcp_headers_map() -> None:
    assert x_mcp_headers(SCHEMA) == {"region": "region", "count": "count", "dry-run": "dry"}
    assert x_mcp_headers({}) == {}
    assert x_mcp_headers(None) == {}
    assert x_mcp_headers({"properties": {"a": {"type": "string", "x-mcp-header": "bad name"}}}) == {}


def test_params_match() -> None:
    matched = deploy({"region": "eu-west", "count": 3, "dry": True},
                     mcp_param_region="eu-west", mcp_param_count="3", mcp_param_dry_run="true")
    assert matched.version == V and matched.progress_token is None
    deploy({"dry": False}, mcp_param_dry_run="false")
    deploy({"note": "free"})  # no mirrored argument, no header needed
    # Each of the three headers is compared: one wrong value is enough to refuse the call.
    assert deploy_rejected({"region": "eu-west", "count": 3, "dry": True}, mcp_param_region="eu-west",
                           mcp_param_count="3", mcp_param_dry_run="false").code == HEADER_MISMATCH


def test_param_header_name_case_insensitive() -> None:
    message = call("deploy", {"region": "eu"})
    hdrs = {"MCP-PROTOCOL-VERSION": V, "MCP-METHOD": "tools/call", "MCP-NAME": "deploy", "MCP-PARAM-REGION": "eu"}
    accepted(message, hdrs, tool_header_params=mapping)
    hdrs["MCP-PARAM-REGION"] = "us"  # found under the upper-case name, so compared
    assert rejected(message, hdrs, tool_header_params=mapping).code == HEADER_MISMATCH


def test_param_missing_when_argument_present() -> None:
    error = deploy_rejected({"region": "eu"})
    assert (error.code, error.status) == (HEADER_MISMATCH, 400)
    assert "Mcp-Param-region" in error.message


def test_param_mismatch() -> None:
    assert deploy_rejected({"region": "eu"}, mcp_param_region="us").code == HEADER_MISMATCH
    assert deploy_rejected({"region": "eu"}, mcp_param_region="EU").code == HEADER_MISMATCH
    assert deploy_rejected({"dry": True}, mcp_param_dry_run="True").code == HEADER_MISMATCH
    assert deploy_rejected({"dry": True}, mcp_param_dry_run="1").code == HEADER_MISMATCH
    assert deploy_rejected({"count": 3}, mcp_param_count="4").code == HEADER_MISMATCH
    assert deploy_rejected({"count": 3}, mcp_param_count="three").code == HEADER_MISMATCH
    assert deploy_rejected({"count": 3}, mcp_param_count="NaN").code == HEADER_MISMATCH


@pytest.mark.parametrize(("body", "header"), [(42, "42"), (42, "42.0"), (42.0, "42"), (42, " 42 "), (-7, "-7"),
                                              (42, "4.2e1"), (2**53 - 1, "9007199254740991")])
def test_param_numeric_compare(body: Any, header: str) -> None:
    assert deploy({"count": body}, mcp_param_count=header).version == V
    assert deploy_rejected({"count": body}, mcp_param_count="1" + header.strip()).code == HEADER_MISMATCH


def test_param_absent_or_null_needs_no_header_and_stray_is_ignored() -> None:
    assert deploy({"region": None}).version == V
    assert deploy({"region": None}, mcp_param_region="anything").version == V
    assert deploy({}, mcp_param_region="anything").version == V
    assert deploy({"region": "eu"}, mcp_param_region="eu", mcp_param_unknown="x").version == V


def test_stray_param_header_must_still_be_well_formed() -> None:
    assert deploy_rejected({}, mcp_param_region="bad\x01").code == HEADER_MISMATCH


def test_param_sentinel() -> None:
    deploy({"region": "Hello"}, mcp_param_region="=?base64?SGVsbG8=?=")
    assert deploy_rejected({"region": "Hello"}, mcp_param_region="=?base64?SGVsbG8?=").code == HEADER_MISMATCH
    assert deploy_rejected({"region": "Hello"}, mcp_param_region="=?base64?SGVs!!!bG8=?=").code == HEADER_MISMATCH
    deploy({"region": "=?base64?SGVsbG8="}, mcp_param_region="=?base64?SGVsbG8=")
    deploy({"region": "SGVsbG8=?="}, mcp_param_region="SGVsbG8=?=")
    deploy({"region": " spaced "}, mcp_param_region=encode_header_value(" spaced "))


def test_params_checked_after_name() -> None:
    error = rejected(call("deploy", {"region": "eu"}), headers("tools/call"), tool_header_params=mapping)
    assert "Mcp-Name" in error.message


def test_unknown_tool_or_bad_arguments_left_to_handler() -> None:
    # A tool with no x-mcp-header map needs no Mcp-Param header, even for an argument deploy mirrors.
    accepted(call("other", {"region": "eu"}), headers("tools/call", mcp_name="other"), tool_header_params=mapping)
    message = request("tools/call", {"name": "deploy", "arguments": "oops"})
    accepted(message, headers("tools/call", mcp_name="deploy"), tool_header_params=mapping)
    assert message["params"]["arguments"] == "oops"  # untouched: the handler answers it with invalid params


def test_duplicate_keys_compare_with_parsed_body() -> None:
    # RELIABILITY A11: the parser keeps the last duplicate; headers are compared with that value.
    from mcphost.protocol.jsonrpc import parse

    raw = ('{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"a","name":"b",'
           '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
           '"io.modelcontextprotocol/clientCapabilities":{}}}}')
    message = parse(raw)
    assert rejected(message, headers("tools/list", mcp_name="b")).code == HEADER_MISMATCH
    assert rejected(message, headers("tools/call", mcp_name="a")).code == HEADER_MISMATCH
    validate_modern(message, headers(message["method"], mcp_name=message["params"]["name"]))


# ---------------------------------------------------------------- check_x_mcp_headers


def test_check_x_mcp_headers_clean() -> None:
    assert check_x_mcp_headers(SCHEMA) == []
    assert check_x_mcp_headers({"type": "object"}) == []
    assert check_x_mcp_headers(None) == []
    nullable = {"properties": {"a": {"type": ["string", "null"], "x-mcp-header": "A"}}}
    assert check_x_mcp_headers(nullable) == []
    # a *property* named x-mcp-header is not the keyword
    assert check_x_mcp_headers({"properties": {"x-mcp-header": {"type": "object"}}}) == []
    assert check_x_mcp_headers({"properties": {"a": {"type": "string", "default": {"x-mcp-header": 1}}}}) == []


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}, "non-empty"),
        ({"properties": {"a": {"type": "string", "x-mcp-header": 5}}}, "non-empty"),
        ({"properties": {"a": {"type": "string", "x-mcp-header": "A\r\nX-Evil: 1"}}}, "CR or LF"),
        ({"properties": {"a": {"type": "string", "x-mcp-header": "has space"}}}, "token"),
        ({"properties": {"a": {"type": "string", "x-mcp-header": "Région"}}}, "token"),
        ({"properties": {"a": {"type": "string", "x-mcp-header": "Dup"},
                         "b": {"type": "string", "x-mcp-header": "dup"}}}, "duplicates"),
        ({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}, "string, integer or boolean"),
        ({"properties": {"a": {"type": "object", "x-mcp-header": "A"}}}, "string, integer or boolean"),
        ({"properties": {"a": {"x-mcp-header": "A"}}}, "string, integer or boolean"),
        ({"properties": {"a": {"type": ["string", "integer"], "x-mcp-header": "A"}}}, "string, integer or boolean"),
        ({"properties": {"a": {"type": "object", "properties": {"b": {"type": "string", "x-mcp-header": "B"}}}}},
         "#/properties/a/properties/b"),
        ({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "B"}}}},
         "#/properties/a/items"),
        ({"anyOf": [{"properties": {"b": {"type": "string", "x-mcp-header": "B"}}}]}, "#/anyOf/0/properties/b"),
        ({"$defs": {"d": {"type": "string", "x-mcp-header": "B"}}}, "#/$defs/d"),
        ({"x-mcp-header": "Root"}, "#:"),
    ],
)
def test_check_x_mcp_headers_problems(schema: dict[str, Any], fragment: str) -> None:
    problems = check_x_mcp_headers(schema)
    assert problems, schema
    assert any(fragment in problem for problem in problems), problems
