"""jsonrpc.encode: what JSON cannot carry never reaches the wire."""

from __future__ import annotations

import orjson
import pytest

from mcphost.protocol import jsonrpc
from mcphost.protocol.errors import INTERNAL_ERROR, McpError


def test_unencodable_reply_becomes_its_requests_internal_error(caplog):
    data = orjson.loads(jsonrpc.encode(jsonrpc.result(7, {"content": [], "_meta": {"tags": {1}}})))
    assert data["id"] == 7 and data["error"]["code"] == INTERNAL_ERROR
    assert "cannot be encoded as JSON" in data["error"]["message"]
    assert "reply to request 7 cannot be encoded" in caplog.text


def test_in_a_batch_only_the_faulty_reply_is_replaced():
    batch = [jsonrpc.result(1, {"ok": True}), jsonrpc.result(2, {"bad": object()})]
    first, second = orjson.loads(jsonrpc.encode(batch))
    assert first == {"jsonrpc": "2.0", "id": 1, "result": {"ok": True}}
    assert second["id"] == 2 and second["error"]["code"] == INTERNAL_ERROR


def test_unencodable_notification_raises_to_its_sender():
    with pytest.raises(McpError) as caught:
        jsonrpc.encode(jsonrpc.notification("notifications/message", {"data": {1}}))
    assert caught.value.code == INTERNAL_ERROR
    with pytest.raises(McpError):
        jsonrpc.check_encodable({"x": object()}, "the thing")
    jsonrpc.check_encodable({"x": [1, "a", None]}, "the thing")
