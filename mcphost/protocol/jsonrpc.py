"""JSON-RPC 2.0 framing: parse and classify incoming messages, build and encode outgoing ones.

Parsing uses orjson, which is strict where the standard library is lenient: invalid UTF-8,
lone surrogates, NaN/Infinity, control characters, overflowing numbers and absurd nesting all
fail as one ``JSONDecodeError``, so a single except clause maps every malformed body to -32700.
"""

from __future__ import annotations

import enum
import logging
from typing import Any, TypeGuard

import orjson

from mcphost.protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR, McpError

log = logging.getLogger("mcphost.protocol")

RequestId = str | int
Message = dict[str, Any]


class Kind(enum.Enum):
    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"


def parse(data: bytes | str) -> Any:
    """Decode one JSON text; any malformed input raises ``McpError(PARSE_ERROR)``."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise McpError(PARSE_ERROR, "Parse error: the body is not valid JSON") from None


def encode(message: Any) -> bytes:
    """Serialize one message (or a batch) to compact UTF-8 JSON.

    Nothing that cannot be encoded reaches the wire: a reply holding a value JSON cannot carry (a
    class, a set, an object a handler returned) becomes that request's ``-32603`` error, its cause
    logged; in a batch only that reply does. An unencodable request or notification raises
    ``McpError(INTERNAL_ERROR)`` to whoever sends it (:func:`check_encodable` catches them earlier,
    where a handler made them).
    """
    try:
        return orjson.dumps(message)
    except TypeError as exc:
        return _unencodable(message, exc)


def _unencodable(message: Any, exc: TypeError) -> bytes:
    if isinstance(message, list):
        return b"[" + b",".join(encode(item) for item in message) + b"]"
    if isinstance(message, dict) and "id" in message and ("result" in message or "error" in message):
        request_id = message["id"] if valid_id(message["id"]) else None
        log.error("the reply to request %r cannot be encoded as JSON (%s); answered with an internal error",
                  request_id, exc)
        return orjson.dumps(error(request_id, McpError(
            INTERNAL_ERROR, f"Internal error: the result cannot be encoded as JSON ({exc})")))
    method = message.get("method") if isinstance(message, dict) else None
    log.error("message %r cannot be encoded as JSON (%s); not sent", method, exc)
    raise McpError(INTERNAL_ERROR, f"Internal error: {method or 'a message'} cannot be encoded as JSON ({exc})"
                   ) from None


def check_encodable(value: Any, what: str) -> None:
    """Raise ``McpError(INTERNAL_ERROR)`` naming ``what`` when ``value`` cannot be encoded as JSON.

    For what a handler hands over to be sent later, by another task (a log message's data, a question's
    parameters): the fault then fails the handler's own call instead of the stream that writes it.
    """
    try:
        orjson.dumps(value)
    except TypeError as exc:
        raise McpError(INTERNAL_ERROR, f"Internal error: {what} cannot be encoded as JSON ({exc})") from None


def valid_id(value: object) -> TypeGuard[RequestId]:
    # bool is an int subclass; JSON-RPC ids are strings or integers, never true/false.
    return (isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)))


def readable_id(message: object) -> RequestId | None:
    """The message's id when it is a usable one, for error replies to otherwise invalid messages."""
    if isinstance(message, dict):
        value = message.get("id")
        if valid_id(value):
            return value
    return None


def classify(message: object) -> Kind:
    """Check the envelope of one decoded message and say what it is; raise -32600 when it is none."""
    if not isinstance(message, dict):
        raise McpError(INVALID_REQUEST, "Invalid request: a message must be a JSON object")
    if message.get("jsonrpc") != "2.0":
        raise McpError(INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"')
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        raise McpError(INVALID_REQUEST, 'Invalid request: "params" must be an object')
    if "method" in message:
        if not isinstance(message["method"], str):
            raise McpError(INVALID_REQUEST, 'Invalid request: "method" must be a string')
        if "id" not in message:
            return Kind.NOTIFICATION
        if not valid_id(message["id"]):
            raise McpError(INVALID_REQUEST, 'Invalid request: "id" must be a string or an integer')
        return Kind.REQUEST
    if "id" in message and ("result" in message) != ("error" in message):
        if message["id"] is not None and not valid_id(message["id"]):
            raise McpError(INVALID_REQUEST, 'Invalid response: "id" must be a string or an integer')
        if "error" in message and not isinstance(message["error"], dict):
            raise McpError(INVALID_REQUEST, 'Invalid response: "error" must be an object')
        return Kind.RESPONSE
    raise McpError(INVALID_REQUEST, "Invalid request: not a request, notification or response")


def result(request_id: RequestId, value: dict[str, Any]) -> Message:
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def error(request_id: RequestId | None, err: McpError) -> Message:
    return {"jsonrpc": "2.0", "id": request_id, "error": err.to_error()}


def notification(method: str, params: dict[str, Any] | None = None) -> Message:
    if params is None:
        return {"jsonrpc": "2.0", "method": method}
    return {"jsonrpc": "2.0", "method": method, "params": params}


def request(request_id: RequestId, method: str, params: dict[str, Any] | None = None) -> Message:
    message: Message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message
