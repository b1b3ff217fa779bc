"""RELIABILITY.md rows that hold the same on every transport, in every cell of the matrix.

Bad ``tools/call`` params (A12) are answered in band, and messages about unknown requests (A17)
get no answer; the transport-specific rows (framing, sizes, statuses, streams, EOF) stay in
``test_reliability_stdio.py``, ``test_http_reliability_input.py`` and ``test_http_reliability_streams.py``.
"""

from __future__ import annotations

import pytest

from tests.support.matrix import SESSION_ERA, Client
from tests.support.wire import WireValidator

INVALID_PARAMS = -32602


async def assert_serving(client: Client) -> None:
    """The server still answers: the next call works."""
    echoed = await client.call_tool("echo", {"text": "still here"})
    assert echoed["content"][0]["text"] == "still here"


# -- A12: bad tools/call params -------------------------------------------------------------------------

A12_CASES = {
    "arguments a string": {"name": "echo", "arguments": "text=hi"},
    "arguments an array": {"name": "echo", "arguments": ["hi"]},
    "name missing": {"arguments": {"text": "hi"}},
    "name a number": {"name": 42},
    "name a number with arguments": {"name": 5, "arguments": {}},
    "name null": {"name": None},
    "name empty": {"name": ""},
    "unknown tool": {"name": "no_such_tool", "arguments": {}},
    "unknown tool without arguments": {"name": "no-such-tool"},
}


@pytest.mark.parametrize("params", A12_CASES.values(), ids=A12_CASES.keys())
async def test_a12_bad_tools_call_params_are_invalid_params_in_band(connect, params):
    async with connect() as client:
        reply = await client.request("tools/call", params)
        assert set(reply) == {"jsonrpc", "id", "error"} and reply["jsonrpc"] == "2.0", reply
        assert reply["id"] == client.last_id and type(reply["id"]) is type(client.last_id), reply
        assert reply["error"]["code"] == INVALID_PARAMS, reply
        assert isinstance(reply["error"]["message"], str) and reply["error"]["message"], reply
        if client.cell.transport == "http":
            assert client.status == 200  # in band: the request was fine as HTTP
        WireValidator(client.cell.era).check(reply)
        await assert_serving(client)


@pytest.mark.parametrize("arguments", [{"text": 5}, {"text": 5, "extra": True}], ids=["wrong type", "extra too"])
async def test_a12_arguments_that_violate_the_input_schema_are_a_tool_error_result(connect, arguments):
    async with connect() as client:
        result = await client.call_tool("echo", arguments)
        assert result["isError"] is True
        assert "Invalid arguments" in result["content"][0]["text"]
        await assert_serving(client)


# -- A17: messages about unknown requests ---------------------------------------------------------------

A17_CASES = {
    "cancel an unknown integer id": {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                     "params": {"requestId": 4242, "reason": "nope"}},
    "cancel an unknown string id": {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                    "params": {"requestId": "ghost"}},
    "cancel without a requestId": {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}},
    "cancel without params": {"jsonrpc": "2.0", "method": "notifications/cancelled"},
    "cancel with an object requestId": {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                        "params": {"requestId": {"x": 1}}},
    "a result for an unknown id": {"jsonrpc": "2.0", "id": 4242, "result": {"action": "accept"}},
    "an error for an unknown id": {"jsonrpc": "2.0", "id": "ghost", "error": {"code": -1, "message": "x"}},
    "an error with a null id": {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}},
    "an unknown notification": {"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"a": 1}},
}


@pytest.mark.cells(eras=[SESSION_ERA], reason="a session's client may send these; a 2026-07-28 client sends "
                                                "requests only (test_http_modern covers what it gets for others)")
@pytest.mark.parametrize("message", A17_CASES.values(), ids=A17_CASES.keys())
async def test_a17_messages_about_unknown_requests_are_ignored(connect, message):
    async with connect() as client:
        await client.send(message)  # asserts that nothing answered it (HTTP: 202 and an empty body)
        await assert_serving(client)
