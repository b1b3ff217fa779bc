"""Validation of one 2026-07-28 (stateless) request: its ``_meta`` and, over HTTP, its mirrored headers.

:func:`validate_modern` applies the checks in the order that satisfies both the specification and
the conformance suite (and matches the reference server):

1. ``_meta`` names a protocol version but the ``MCP-Protocol-Version`` header is missing → -32020.
2. ``_meta`` missing, or its ``protocolVersion`` / ``clientCapabilities`` missing or mistyped → -32602
   (even when the header is present). One refinement: when the body names no version at all and the
   header names one the host does not serve (``1991-01-01``), the answer is -32022 for the header's
   version, so the body carries the literal ``Unsupported protocol version`` other clients look for.
3. Header ≠ ``_meta`` version (or the header holds invalid characters) → -32020.
4. Version (header == body) not a modern revision → -32022 with ``data.supported`` / ``data.requested``.
5. ``logLevel`` present and not a logging level → -32602.
6. HTTP only: ``Mcp-Method`` (required on requests; checked on notifications when sent), ``Mcp-Name``
   (``tools/call``, ``prompts/get``: ``params.name``; ``resources/read``: ``params.uri``;
   ``tasks/get|update|cancel``: ``params.taskId``), then ``Mcp-Param-{X}`` for ``tools/call`` → -32020.

Every failure is a :class:`ModernError` carrying the HTTP status (400 here; 404 for
:func:`method_not_found`). Header *names* are case-insensitive (the mapping is lower-cased here
again, so either case works); header *values* are case-sensitive. Values are trimmed of optional
whitespace (SP / HTAB) first; ``Mcp-Name`` and ``Mcp-Param-*`` values may use the base64 sentinel
``=?base64?<standard base64 of UTF-8>?=``, decoded strictly (padding required, canonical, valid
UTF-8). A value lacking the prefix or the suffix is taken literally.

Values are always compared with the *parsed* body, so a body with duplicate keys (the parser keeps
the last one) cannot make a header and the body disagree unnoticed.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from mcphost.protocol.era import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    request_meta,
)
from mcphost.protocol.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    McpError,
)
from mcphost.protocol.versions import SUPPORTED_VERSIONS, is_modern

#: ``notifications/message`` levels (RFC 5424 severities), the values ``logLevel`` may take.
LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

#: Which ``params`` field ``Mcp-Name`` mirrors, per method.
NAME_FIELDS: Final[Mapping[str, str]] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}

SENTINEL_PREFIX: Final = "=?base64?"
SENTINEL_SUFFIX: Final = "?="
PARAM_HEADER_PREFIX: Final = "mcp-param-"

_OWS = " \t"
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_NUMBER = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_MAX_NUMBER_LENGTH = 400
_HEADER_TYPES = ("string", "integer", "boolean")
# JSON Schema keywords whose value is a schema, a list of schemas, or a map of name → schema.
_SUBSCHEMA = ("items", "additionalProperties", "unevaluatedProperties", "unevaluatedItems", "contains",
              "propertyNames", "not", "if", "then", "else", "additionalItems")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems", "items")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


class ModernError(McpError):
    """A rejected modern request: the JSON-RPC error plus the HTTP status to answer it with."""

    def __init__(self, code: int, message: str, data: Any = None, *, status: int = 400) -> None:
        super().__init__(code, message, data)
        self.status = status

    def __repr__(self) -> str:
        return f"ModernError({self.code}, {self.message!r}, status={self.status})"


@dataclass(frozen=True)
class ModernRequest:
    """What a valid modern request says about its sender (never remembered across requests)."""

    version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    log_level: str | None
    progress_token: str | int | None
    meta: dict[str, Any] = field(repr=False)


def method_not_found(method: str) -> ModernError:
    """Unknown, removed or unadvertised method on the modern path: 404 + -32601."""
    return ModernError(METHOD_NOT_FOUND, f"Method not found: {method[:100]}", status=404)


def _mismatch(message: str, header: str) -> ModernError:
    return ModernError(HEADER_MISMATCH, f"Header mismatch: {message}", {"header": header})


def _invalid(message: str) -> ModernError:
    return ModernError(INVALID_PARAMS, f"Invalid params: {message}")


def _unsupported(requested: str) -> ModernError:
    shown = requested if len(requested) <= 64 else requested[:64] + "..."
    return ModernError(
        UNSUPPORTED_PROTOCOL_VERSION,
        f"Unsupported protocol version: {shown}",
        {"supported": list(SUPPORTED_VERSIONS), "requested": requested},
    )


def _valid_chars(value: str) -> bool:
    # Visible ASCII, SP and HTAB only: no controls, no DEL, no obs-text / non-ASCII. (For ASCII,
    # str.isprintable is exactly SP to "~"; checked in C rather than character by character.)
    return value.isascii() and (value.isprintable() or value.replace("\t", " ").isprintable())


def _is_sentinel(value: str) -> bool:
    return (
        len(value) >= len(SENTINEL_PREFIX) + len(SENTINEL_SUFFIX)
        and value.startswith(SENTINEL_PREFIX)
        and value.endswith(SENTINEL_SUFFIX)
    )


def decode_header_value(raw: str, *, sentinel: bool = True) -> str | None:
    """The value a header carries: OWS-trimmed, sentinel-decoded; ``None`` when it is malformed.

    Malformed means a character outside visible ASCII / SP / HTAB, or (with ``sentinel``) a
    ``=?base64?...?=`` value whose payload is not canonical padded standard base64 of UTF-8.
    """
    value = raw.strip(_OWS)
    if not _valid_chars(value):
        return None
    if not (sentinel and _is_sentinel(value)):
        return value
    payload = value[len(SENTINEL_PREFIX) : -len(SENTINEL_SUFFIX)]
    if _BASE64.fullmatch(payload) is None:
        return None
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(data).decode("ascii") != payload:  # non-zero padding bits: not canonical
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def encode_header_value(value: str) -> str:
    """``value`` as a header value: literal when safe, else the base64 sentinel.

    The sentinel is used for the empty string, anything outside visible ASCII and inner spaces
    (non-ASCII, controls, HTAB), leading or trailing spaces, and values that look like a sentinel.
    """
    safe = (
        value != ""
        and all(" " <= ch <= "~" for ch in value)
        and value.strip(" ") == value
        and not _is_sentinel(value)
    )
    if safe:
        return value
    return SENTINEL_PREFIX + base64.b64encode(value.encode("utf-8")).decode("ascii") + SENTINEL_SUFFIX


def param_header_value(value: object) -> str | None:
    """The ``Mcp-Param-*`` header value a client sends for an argument; ``None`` = send no header."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return encode_header_value(value)
    return None


def _numbers_equal(header: str, body: int | float) -> bool:
    if len(header) > _MAX_NUMBER_LENGTH or _NUMBER.fullmatch(header) is None:
        return False
    try:
        return Decimal(header) == Decimal(body)
    except (InvalidOperation, ValueError, OverflowError):
        return False


def _argument_matches(header: str, value: object) -> bool:
    if isinstance(value, bool):
        return header == ("true" if value else "false")
    if isinstance(value, int | float):
        return _numbers_equal(header, value)
    return header == value


def _lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def _check_version(meta: dict[str, Any] | None, headers: Mapping[str, str] | None) -> str:
    """Steps 1 to 4: the version checks; returns the (modern) version the request speaks."""
    raw_header = headers.get("mcp-protocol-version") if headers is not None else None
    if headers is not None and meta is not None and META_PROTOCOL_VERSION in meta and raw_header is None:
        raise _mismatch("the MCP-Protocol-Version header is required", "MCP-Protocol-Version")
    header = raw_header.strip(_OWS) if raw_header is not None else None
    body_version = meta.get(META_PROTOCOL_VERSION) if meta is not None else None
    if (
        body_version is None
        and header
        and _valid_chars(header)
        and header not in SUPPORTED_VERSIONS
    ):
        raise _unsupported(header)
    if meta is None:
        raise _invalid(f'a modern request needs "_meta" with "{META_PROTOCOL_VERSION}" and '
                       f'"{META_CLIENT_CAPABILITIES}"')
    if not isinstance(body_version, str):
        raise _invalid(f'"_meta" needs "{META_PROTOCOL_VERSION}" (a string)')
    if not isinstance(meta.get(META_CLIENT_CAPABILITIES), dict):
        raise _invalid(f'"_meta" needs "{META_CLIENT_CAPABILITIES}" (an object)')
    if header is not None and (not _valid_chars(header) or header != body_version):
        raise _mismatch("MCP-Protocol-Version does not match the _meta protocol version", "MCP-Protocol-Version")
    if not is_modern(body_version):
        raise _unsupported(body_version)
    return body_version


def _header(headers: Mapping[str, str], name: str, display: str, *, sentinel: bool) -> str | None:
    raw = headers.get(name)
    if raw is None:
        return None
    value = decode_header_value(raw, sentinel=sentinel)
    if value is None:
        raise _mismatch(f"{display} has an invalid value", display)
    return value


def _check_headers(
    message: dict[str, Any],
    params: dict[str, Any],
    headers: Mapping[str, str],
    tool_header_params: Callable[[str], Mapping[str, str] | None] | None,
) -> None:
    """Step 6: Mcp-Method, Mcp-Name, Mcp-Param-*."""
    method = message.get("method")
    is_request = "id" in message
    sent_method = _header(headers, "mcp-method", "Mcp-Method", sentinel=False)
    if sent_method is None:
        if is_request:
            raise _mismatch("the Mcp-Method header is required", "Mcp-Method")
    elif sent_method != method:
        raise _mismatch("Mcp-Method does not match the request method", "Mcp-Method")
    if not is_request or not isinstance(method, str):
        return

    name_field = NAME_FIELDS.get(method)
    if name_field is not None:
        sent_name = _header(headers, "mcp-name", "Mcp-Name", sentinel=True)
        body_name = params.get(name_field)
        # A missing or mistyped body value is the handler's -32602, not a header problem.
        if isinstance(body_name, str):
            if sent_name is None:
                raise _mismatch("the Mcp-Name header is required", "Mcp-Name")
            if sent_name != body_name:
                raise _mismatch(f"Mcp-Name does not match params.{name_field}", "Mcp-Name")

    if method != "tools/call" or tool_header_params is None:
        return
    tool = params.get("name")
    if not isinstance(tool, str):
        return
    mapping = tool_header_params(tool)
    if not mapping:
        return
    arguments = params.get("arguments")
    if not isinstance(arguments, dict):
        arguments = {}  # a mistyped "arguments" is rejected by the handler (-32602)
    for header_name, argument in mapping.items():
        display = "Mcp-Param-" + header_name
        sent = _header(headers, PARAM_HEADER_PREFIX + header_name.lower(), display, sentinel=True)
        value = arguments.get(argument)
        if value is None or not isinstance(value, str | int | float):
            continue  # absent / null: no header expected (a stray one is ignored once well-formed)
        if sent is None:
            raise _mismatch(f"the {display} header is required when argument {argument!r} is set", display)
        if not _argument_matches(sent, value):
            raise _mismatch(f"{display} does not match argument {argument!r}", display)


def validate_modern(
    message: dict[str, Any],
    headers: Mapping[str, str] | None,
    *,
    tool_header_params: Callable[[str], Mapping[str, str] | None] | None = None,
    lower_case: bool = False,
) -> ModernRequest:
    """Validate one modern request or notification; raise :class:`ModernError` on the first failure.

    ``message`` is an already classified JSON-RPC request/notification (see ``jsonrpc.classify``).
    ``headers`` are the HTTP request headers (names in any case) or ``None`` on stdio, where only the
    ``_meta`` checks apply. ``tool_header_params(tool_name)`` returns the tool's ``x-mcp-header`` map
    as built by :func:`x_mcp_headers` — ``{X lower-cased: argument name}`` for header ``Mcp-Param-{X}``
    — or ``None`` for an unknown tool (whose call the handler then rejects). ``lower_case``: the
    header names are lower-case already (a transport's :class:`Exchange` promises it), so they are
    used as they are.
    """
    params = message.get("params")
    if not isinstance(params, dict):
        params = {}
    meta = request_meta(params)
    lowered = headers if lower_case or headers is None else _lower(headers)
    version = _check_version(meta, lowered)
    assert meta is not None  # _check_version raised otherwise

    log_level = meta.get(META_LOG_LEVEL)
    if log_level is not None and log_level not in LOG_LEVELS:
        raise _invalid(f'"{META_LOG_LEVEL}" must be one of {", ".join(LOG_LEVELS)}')

    if lowered is not None:
        _check_headers(message, params, lowered, tool_header_params)

    client_info = meta.get(META_CLIENT_INFO)
    token = meta.get("progressToken")
    if isinstance(token, bool) or not isinstance(token, str | int):
        token = None
    return ModernRequest(
        version=version,
        client_capabilities=meta[META_CLIENT_CAPABILITIES],
        client_info=client_info if isinstance(client_info, dict) else None,
        log_level=log_level,
        progress_token=token,
        meta=meta,
    )


def x_mcp_headers(input_schema: object) -> dict[str, str]:
    """``{X lower-cased: property name}`` for the top-level properties marked ``"x-mcp-header": "X"``.

    Only well-formed names (HTTP tokens) are returned; :func:`check_x_mcp_headers` reports the rest.
    """
    result: dict[str, str] = {}
    properties = input_schema.get("properties") if isinstance(input_schema, dict) else None
    if not isinstance(properties, dict):
        return result
    for name, schema in properties.items():
        if isinstance(schema, dict):
            header = schema.get("x-mcp-header")
            if isinstance(header, str) and _TOKEN.fullmatch(header):
                result.setdefault(header.lower(), name)
    return result


def _header_type_ok(declared: object) -> bool:
    if isinstance(declared, str):
        return declared in _HEADER_TYPES
    if isinstance(declared, list):
        kinds = [kind for kind in declared if kind != "null"]
        return len(kinds) == 1 and kinds[0] in _HEADER_TYPES
    return False


def _children(schema: dict[str, Any], path: str) -> Iterator[tuple[str, Any, str]]:
    """The subschemas of one schema object: (keyword, subschema, JSON pointer)."""
    for key in _SUBSCHEMA_MAPS:
        children = schema.get(key)
        if isinstance(children, dict):
            for name, child in children.items():
                yield key, child, f"{path}/{key}/{name}"
    for key in _SUBSCHEMA_LISTS:
        children = schema.get(key)
        if isinstance(children, list):
            for index, child in enumerate(children):
                yield key, child, f"{path}/{key}/{index}"
    for key in _SUBSCHEMA:
        child = schema.get(key)
        if isinstance(child, dict):
            yield key, child, f"{path}/{key}"


def _misplaced(schema: object, path: str, allowed: bool, found: list[str]) -> None:
    """Collect the paths of ``x-mcp-header`` keywords anywhere but on a top-level property."""
    if not isinstance(schema, dict):
        return
    if not allowed and "x-mcp-header" in schema:
        found.append(path)
    for key, child, child_path in _children(schema, path):
        _misplaced(child, child_path, path == "#" and key == "properties", found)


def check_x_mcp_headers(input_schema: object) -> list[str]:
    """Problems with an inputSchema's ``x-mcp-header`` annotations; an empty list means none.

    Rules: the value is a non-empty HTTP token (so no CR/LF, no spaces), unique case-insensitively
    within the schema, on a property of type ``string``, ``integer`` or ``boolean`` (optionally
    nullable), and only on top-level properties (clients accept any pure ``properties`` chain, but
    the host mirrors top-level arguments only). Clients drop tools that break these rules, so the
    catalog should refuse them.
    """
    problems: list[str] = []
    if not isinstance(input_schema, dict):
        return problems
    properties = input_schema.get("properties")
    seen: dict[str, str] = {}
    if isinstance(properties, dict):
        for name, schema in properties.items():
            if not isinstance(schema, dict) or "x-mcp-header" not in schema:
                continue
            header = schema["x-mcp-header"]
            where = f"property {name!r}"
            if not isinstance(header, str) or not header:
                problems.append(f"{where}: x-mcp-header must be a non-empty string")
                continue
            if "\r" in header or "\n" in header:
                problems.append(f"{where}: x-mcp-header must not contain CR or LF")
            elif _TOKEN.fullmatch(header) is None:
                problems.append(f"{where}: x-mcp-header {header!r} is not a valid HTTP header token")
            key = header.lower()
            if key in seen:
                problems.append(f"{where}: x-mcp-header {header!r} duplicates the one on property {seen[key]!r}")
            else:
                seen[key] = name
            if not _header_type_ok(schema.get("type")):
                problems.append(f"{where}: x-mcp-header is only allowed on string, integer or boolean properties")
    nested: list[str] = []
    _misplaced(input_schema, "#", False, nested)
    problems.extend(f"{path}: x-mcp-header is only supported on top-level properties" for path in nested)
    return problems

