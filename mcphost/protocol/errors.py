"""JSON-RPC and MCP error codes, and the exception that carries one to the wire."""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# Implementation-defined range, used the way the reference SDKs use it.
REQUEST_TIMEOUT = -32001
REQUEST_CANCELLED = -32800
SERVER_BUSY = -32000
# MCP-defined.
RESOURCE_NOT_FOUND = -32002  # legacy revisions only
URL_ELICITATION_REQUIRED = -32042  # 2025-11-25 only
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022


class McpError(Exception):
    """An error that reaches the client as a JSON-RPC error object.

    Raise it from a handler when the request itself is wrong (unknown name, bad
    arguments) rather than the tool failing; tool failures become ``isError`` results.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def __repr__(self) -> str:
        return f"McpError({self.code}, {self.message!r})"


def invalid_params(message: str, data: Any = None) -> McpError:
    return McpError(INVALID_PARAMS, message, data)


def method_not_found(method: str) -> McpError:
    return McpError(METHOD_NOT_FOUND, f"Method not found: {method[:100]}")
