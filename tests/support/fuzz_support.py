"""Strategies, budgets and outcome checks for the fuzz tests (``tests/test_fuzz*.py``).

- :data:`SEED`, :func:`fuzz_settings`, :func:`budget`: every fuzz test runs with one seed per
  run (``MCPHOST_FUZZ_SEED`` to replay one) and a per-strategy example count that
  ``MCPHOST_FUZZ_EXAMPLES`` (the total over all HTTP strategies) scales for nightly runs; the
  example database lives in the gitignored ``.hypothesis/`` (or ``MCPHOST_FUZZ_DB``);
- :func:`from_schema`: a Hypothesis strategy for values valid against a definition of the
  official MCP JSON schema (the subset of draft 2020-12 those schemas use), so requests are
  generated from ``tests/data/schema/<revision>.json`` rather than written by hand;
- JSON, envelope and header strategies, and :data:`A11_BODIES`, the parser edge cases of
  RELIABILITY.md row A11 that every run replays;
- :func:`check_http_reply`, :func:`check_message` and :func:`log_problems`: what a reply must
  look like, and which server log lines count as a crash.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import math
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from tests.support.wire import SCHEMA_DIR, WireValidator

REPO_ROOT = Path(__file__).resolve().parents[2]
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
OLD = "2025-03-26"  # the last revision with batches
REVISIONS = (LEGACY, MODERN)

# -- run settings -------------------------------------------------------------------------------------

#: One seed for the whole run, printed by every fuzz test; set MCPHOST_FUZZ_SEED to replay a run.
SEED = int(os.environ.get("MCPHOST_FUZZ_SEED") or secrets.randbits(32))
#: The CI total over the six HTTP strategies (RELIABILITY.md target figure 1: at least 10 000).
CI_TOTAL = 10_000
#: The total asked for (a nightly run sets e.g. MCPHOST_FUZZ_EXAMPLES=1000000).
TOTAL = int(os.environ.get("MCPHOST_FUZZ_EXAMPLES") or CI_TOTAL)
NIGHTLY = TOTAL > CI_TOTAL
DATABASE_DIR = Path(os.environ.get("MCPHOST_FUZZ_DB") or REPO_ROOT / ".hypothesis" / "fuzz")


def budget(share: int) -> int:
    """Examples for a strategy whose CI share is ``share`` (the shares add up to at least CI_TOTAL)."""
    return max(1, math.ceil(share * TOTAL / CI_TOTAL))


def fuzz_settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, derandomize=False, print_blob=True,
                    database=DirectoryBasedExampleDatabase(str(DATABASE_DIR)),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.large_base_example])


def seed_note() -> str:
    return f"fuzz seed {SEED}: replay with MCPHOST_FUZZ_SEED={SEED}"


# -- JSON -----------------------------------------------------------------------------------------------

#: Text with the characters parsers trip on: NUL and other controls, lone surrogates, a BOM,
#: non-BMP characters, quotes and backslashes.
nasty_text = st.text(st.one_of(
    st.characters(codec="utf-8"),
    st.sampled_from(["\x00", "\ud800", "\udfff", "\ufeff", "\u2028", "\U0001f600", '"', "\\", "\x7f", "\n"]),
), max_size=40)

json_leaves = st.one_of(
    st.none(), st.booleans(),
    st.integers(),
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.floats(allow_nan=True, allow_infinity=True),
    nasty_text,
)


@functools.cache  # one strategy per size: building st.recursive anew on every draw is slow
def json_values(max_leaves: int = 30) -> st.SearchStrategy[Any]:
    return st.recursive(json_leaves, lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(nasty_text, children, max_size=5)), max_leaves=max_leaves)


@st.composite
def json_bytes(draw: st.DrawFn, values: st.SearchStrategy[Any] | None = None) -> bytes:
    """A JSON value serialized the ways a client might: ASCII-escaped, raw UTF-8 (lone surrogates
    then become invalid UTF-8), with NaN/Infinity literals, with a BOM or surrounding whitespace."""
    value = draw(values if values is not None else json_values())
    ascii_only = draw(st.booleans())
    text = json.dumps(value, ensure_ascii=ascii_only, allow_nan=True)
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 9)) == 0:
        data = b"\xef\xbb\xbf" + data
    if draw(st.integers(0, 9)) == 0:
        data = draw(st.sampled_from([b" ", b"\n", b"\t", b"\r\n"])) + data + draw(st.sampled_from([b"", b"\n"]))
    return data


def dumps(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode("utf-8", "surrogatepass")


# -- RELIABILITY.md A11: the seed corpus every run replays ----------------------------------------------

def _deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


A11_BODIES: list[bytes] = [
    _deep(1000),  # nesting
    _deep(100_000),
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":' + b'{"a":' * 5000 + b"1" + b"}" * 5001,
    b"[" * 1000,  # unbalanced
    b"\xff\xfe",  # invalid UTF-8
    b'{"jsonrpc":"2.0","id":1,"method":"p\xffing"}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"\\ud800"}}}',
    b'{"jsonrpc":"2.0","id":"\\udfff","method":"ping"}',
    b'{"jsonrpc":"2.0","id":"\xed\xa0\x80","method":"ping"}',  # a surrogate as (CESU) bytes
    b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}',  # > 4300 digits
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":' + b"1" * 4301 + b"}}",
    b'{"jsonrpc":"2.0","id":1e400,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":Infinity}}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":-Infinity}}',
    b'{"jsonrpc":"2.0","id":1,"method":"a","method":"ping"}',  # duplicate keys
    b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"test_simple_text"}}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping\x00"}',  # NUL bytes
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}\x00',
    b"\x00" * 64,
    b'{"jsonrpc":"2.0","id":"\\u0000","method":"ping"}',
    b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"ping"}',  # BOM
    b'\xfe\xff\x00{',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"' + b"n" * (1024 * 1024) + b'"}}',
    b'{"jsonrpc":"2.0","id":true,"method":"ping"}',  # id types
    b'{"jsonrpc":"2.0","id":1.0,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":null,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}',
    b'{"jsonrpc":"2.0","id":[],"method":"ping"}',
    b'{"jsonrpc":"2.0","id":-0,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}',
    b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":1,"method":"ping"}]',  # batches
    b'[{"jsonrpc":"2.0","id":1,"method":"ping"},1,null,[]]',
    b"[]", b"[[]]", b"{}", b"", b" ", b"null", b"0", b'""', b"true",
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0","id":2,"method":"ping"}',  # trailing data
    b'{"jsonrpc":"2.0","id":1,"method":"ping"',  # truncated
    b'{"jsonrpc":"2.0","id":1,"method":"ping",}',
    b"{'jsonrpc':'2.0'}",
]


# -- the official schemas as strategies -----------------------------------------------------------------

@functools.cache
def schema_defs(revision: str) -> Mapping[str, Any]:
    return json.loads((SCHEMA_DIR / f"{revision}.json").read_text(encoding="utf-8"))["$defs"]


def client_request_definitions(revision: str) -> list[str]:
    return [ref["$ref"].rsplit("/", 1)[1] for ref in schema_defs(revision)["ClientRequest"]["anyOf"]]


#: How deep $refs are followed before objects keep only their required members.
_REF_DEPTH = 6
_STRING = st.one_of(st.text(max_size=12), nasty_text, st.sampled_from(["", "a", "x" * 300]))


def from_schema(schema: Any, defs: Mapping[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values valid against ``schema`` (draft 2020-12, the keywords the MCP schemas use: $ref,
    allOf, anyOf, const, enum, type, properties, required, additionalProperties, items,
    maxItems, minimum, maximum; ``format`` is an annotation there and ignored here)."""
    if schema is True or schema == {} or schema is None:
        return json_values(10) if depth <= _REF_DEPTH else json_leaves
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return _ref(name, defs, depth + 1) if depth < 2 * _REF_DEPTH else _smallest(defs[name], defs)
    if "allOf" in schema:
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            part = defs[part["$ref"].rsplit("/", 1)[1]] if "$ref" in part else part
            for key, value in part.items():
                if key == "properties":
                    merged["properties"] = {**merged.get("properties", {}), **value}
                elif key == "required":
                    merged["required"] = sorted({*merged.get("required", []), *value})
                else:
                    merged.setdefault(key, value)
        return from_schema(merged, defs, depth)
    if "anyOf" in schema:
        return st.one_of([from_schema(option, defs, depth) for option in schema["anyOf"]])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": k}, defs, depth) for k in kind])
    if kind == "string":
        return _STRING
    if kind == "integer":
        return st.integers(schema.get("minimum", -(2 ** 53)), schema.get("maximum", 2 ** 53))
    if kind == "number":
        low, high = schema.get("minimum"), schema.get("maximum")
        return st.one_of(st.integers(int(low) if low is not None else -(2 ** 53),
                                     int(high) if high is not None else 2 ** 53),
                         st.floats(low, high, allow_nan=False, allow_infinity=False))
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(from_schema(schema.get("items", True), defs, depth), max_size=min(3, schema.get("maxItems", 3)))
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        if depth > _REF_DEPTH:  # deep enough: the required members only
            properties = {k: v for k, v in properties.items() if k in required}
        members = {k: from_schema(v, defs, depth) for k, v in properties.items()}
        fixed = st.fixed_dictionaries({k: s for k, s in members.items() if k in required},
                                      optional={k: s for k, s in members.items() if k not in required})
        extra = schema.get("additionalProperties", True)
        if extra is False or (properties and extra is True):
            return fixed
        more = st.dictionaries(st.text(max_size=8).filter(lambda k: k not in properties),
                               from_schema(extra, defs, depth + 1), max_size=3)
        return st.tuples(fixed, more).map(lambda pair: {**pair[1], **pair[0]})
    return json_values(10)


def _smallest(schema: Any, defs: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """The smallest value valid against ``schema``: where a recursive definition stops."""
    if schema is True or schema == {}:
        return st.none()
    if "$ref" in schema:
        return _smallest(defs[schema["$ref"].rsplit("/", 1)[1]], defs)
    if "anyOf" in schema:
        return _smallest(schema["anyOf"][0], defs)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.just(schema["enum"][0])
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    simple = {"string": "", "integer": schema.get("minimum", 0), "number": schema.get("minimum", 0), "boolean": False,
              "null": None, "array": []}
    if kind in simple:
        return st.just(simple[kind])
    required = schema.get("required", ())
    return st.fixed_dictionaries({k: _smallest(v, defs) for k, v in schema.get("properties", {}).items()
                                  if k in required})


def _ref(name: str, defs: Mapping[str, Any], depth: int) -> st.SearchStrategy[Any]:
    return _ref_cached(name, id(defs), depth, defs)


@functools.cache
def _ref_cached(name: str, _defs_id: int, depth: int, defs: Any) -> st.SearchStrategy[Any]:
    return st.deferred(lambda: from_schema(defs[name], defs, depth))


@functools.cache
def request_strategy(revision: str, definition: str) -> st.SearchStrategy[dict[str, Any]]:
    defs = schema_defs(revision)
    return _ref(definition, _Hashable(defs), 0)


class _Hashable(dict):  # a schema $defs mapping usable as an lru_cache argument (by identity)
    __hash__ = object.__hash__  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return self is other


# -- 2026-07-28 standard headers --------------------------------------------------------------------------

_PLAIN_HEADER = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")


def header_value(value: str) -> str:
    """``value`` as an ``Mcp-Name``/``Mcp-Param-*`` header: plain when it is visible ASCII, else the
    Base64 sentinel the 2026-07-28 transport defines."""
    if _PLAIN_HEADER.fullmatch(value):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8", "surrogatepass")).decode() + "?="


def modern_headers(message: Any) -> dict[str, str]:
    """The headers a conformant 2026-07-28 client sends with ``message`` (mirrored from the body)."""
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": MODERN}
    if isinstance(message, dict):
        if isinstance(message.get("method"), str):
            headers["mcp-method"] = header_value(message["method"])
        params = message.get("params")
        if isinstance(params, dict):
            target = params.get("name", params.get("uri"))
            if isinstance(params.get("ref"), dict):  # completion/complete names its reference
                target = params["ref"].get("name", params["ref"].get("uri"))
            if isinstance(target, str) and len(target) <= 4096:  # longer: no client would send the header
                headers["mcp-name"] = header_value(target)
    return headers


def modern_meta(**extra: Any) -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "sampling": {}, "roots": {}},
            **extra}


# -- JSON-RPC envelope mutations -----------------------------------------------------------------------------

@functools.cache
def base_messages(revision: str) -> list[dict[str, Any]]:
    """Valid messages of ``revision`` that answer at once (shared: copy before changing one)."""
    def request(method: str, params: dict[str, Any] | None = None, request_id: Any = 7) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if revision == MODERN:
            params = {**(params or {}), "_meta": modern_meta()}
        if params is not None:
            message["params"] = params
        return message

    common = [
        request("tools/list"), request("prompts/list"), request("resources/list"),
        request("resources/templates/list"),
        request("tools/call", {"name": "echo", "arguments": {"text": "hi"}}),
        request("tools/call", {"name": "test_simple_text", "arguments": {}}),
        request("tools/call", {"name": "json_schema_2020_12_tool", "arguments": {"name": "x",
                                                                                 "address": {"street": "y"}}}),
        request("resources/read", {"uri": "demo://readme"}),
        request("resources/read", {"uri": "test://template/7/data"}),
        request("prompts/get", {"name": "review_code", "arguments": {"code": "x = 1"}}),
        request("completion/complete", {"ref": {"type": "ref/prompt", "name": "review_code"},
                                        "argument": {"name": "language", "value": "py"}}),
        {"jsonrpc": "2.0", "id": 99, "result": {}},
        {"jsonrpc": "2.0", "id": 98, "error": {"code": -1, "message": "no"}},
    ]
    if revision == MODERN:
        return [*common, request("server/discover"),
                request("tools/call", {"name": "test_input_required_result_elicitation", "arguments": {}}),
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}]
    return [*common, request("ping"), request("logging/setLevel", {"level": "debug"}),
            request("resources/subscribe", {"uri": "demo://readme"}), request("tasks/list"),
            request("tasks/get", {"taskId": "nope"}),
            request("tools/call", {"name": "echo", "arguments": {"text": "t"}, "task": {"ttl": 1000}}),
            request("initialize", {"protocolVersion": revision, "capabilities": {},
                                   "clientInfo": {"name": "x", "version": "1"}}),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}},
            {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}]


WEIRD_IDS = st.one_of(st.sampled_from([True, False, 1.0, 1.5, None, {}, {"a": 1}, [], [1], "", -1, 0, 2 ** 63,
                                       2 ** 64, -(2 ** 63) - 1, 10 ** 400, "\ud800", "x" * 10000]),
                      json_values(5))
METHODS = st.one_of(st.sampled_from(["initialize", "ping", "tools/list", "tools/call", "server/discover",
                                     "subscriptions/listen", "notifications/initialized", "notifications/cancelled",
                                     "tasks/result", "sampling/createMessage", "roots/list", "rpc.discover",
                                     "Tools/List", "tools/list ", "", "\x00", "resources/read"]), nasty_text,
                    json_values(3))


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, Any, bytes, dict[str, str] | None]:
    """(target, message, body, headers or None): a valid message of one revision, mutated."""
    revision = draw(st.sampled_from([LEGACY, OLD, MODERN]))
    message = copy.deepcopy(draw(st.sampled_from(base_messages(revision))))
    headers = modern_headers(message) if revision == MODERN else None
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["drop", "set", "add", "id", "method", "params", "jsonrpc", "meta",
                                     "argument", "batch"]))
        where = message.get("params") if kind in ("meta", "argument") else message
        if kind == "meta" and isinstance(where, dict):
            where = where.setdefault("_meta", {})
        elif kind == "argument" and isinstance(where, dict):
            where = where.setdefault("arguments", {})
        if not isinstance(where, dict):
            continue
        if kind == "drop" and where:
            where.pop(draw(st.sampled_from(sorted(where))))
        elif kind in ("set", "meta", "argument") and where:
            where[draw(st.sampled_from(sorted(where)))] = draw(json_values(8))
        elif kind == "add":
            where[draw(nasty_text)] = draw(json_values(4))
        elif kind == "id":
            message["id"] = draw(WEIRD_IDS)
        elif kind == "method":
            message["method"] = draw(METHODS)
        elif kind == "params":
            message["params"] = draw(st.one_of(json_values(8), st.sampled_from([None, 1, "x", [], [1], True])))
        elif kind == "jsonrpc":
            message["jsonrpc"] = draw(st.sampled_from(["1.0", "2", 2.0, 2, None, "", "2.0 ", "2.00"]))
        elif kind == "batch":
            others = draw(st.lists(st.sampled_from(base_messages(revision)), max_size=3))
            message = [message, *copy.deepcopy(others)] if draw(st.booleans()) else [message]
            break
    if revision == MODERN and draw(st.booleans()):  # a client that mirrors the mutated body
        headers = modern_headers(message)
    body = dumps(message)
    if isinstance(message, dict) and message and draw(st.integers(0, 4)) == 0:
        # A duplicate key: the same member twice, the first one a decoy.
        key = draw(st.sampled_from(sorted(message)))
        body = b"{" + json.dumps(key).encode() + b":" + dumps(draw(json_values(3))) + b"," + body[1:]
    if revision == MODERN:
        target = "modern"
    else:
        target = draw(st.sampled_from(["session", "no-session"])) if revision == LEGACY else "old-session"
    return target, message, body, headers


# -- outcome checks ------------------------------------------------------------------------------------------

VALIDATORS = {revision: WireValidator(revision) for revision in ("2025-03-26", LEGACY, MODERN)}


class BadReply(AssertionError):
    pass


def strict_json(data: bytes) -> Any:
    """Parse what the server sent: strict JSON (no NaN/Infinity, valid UTF-8, no lone surrogates)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BadReply(f"the server sent invalid JSON ({exc}): {data[:300]!r}") from None


def check_message(message: Any, revision: str | None, request_method: str | None = None) -> None:
    """A well-formed JSON-RPC 2.0 message; schema-checked against ``revision`` where it has an id
    the schema can express (errors with ``id: null`` are checked by hand)."""
    if isinstance(message, list) and message and revision == "2025-03-26":  # a batch response
        for item in message:
            check_message(item, revision, None)
        return
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise BadReply(f"not a JSON-RPC 2.0 message: {str(message)[:300]}")
    if "error" in message:
        error = message["error"]
        if not (isinstance(error, dict) and isinstance(error.get("code"), int) and not isinstance(error["code"], bool)
                and isinstance(error.get("message"), str)) or "result" in message or "id" not in message:
            raise BadReply(f"malformed JSON-RPC error: {str(message)[:300]}")
        if message["id"] is None:
            return
    elif "result" not in message and "method" not in message:
        raise BadReply(f"neither a request, a notification nor a response: {str(message)[:300]}")
    if revision is not None:
        VALIDATORS[revision].check(message, request_method=request_method if "result" in message else None)


def sse_data(body: bytes) -> list[Any]:
    """The JSON payloads of the events in an SSE body (every event with data)."""
    text = body.decode("utf-8")
    found = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")]
        if data and any(data):
            found.append(strict_json("\n".join(data).encode()))
    return found


def check_http_reply(status: int, headers: Mapping[str, str], body: bytes, *, revision: str | None = None,
                     request_method: str | None = None, allow_503: bool = False, streamed: bool = False) -> list[Any]:
    """The outcome rules of target figure 1 for one HTTP reply from the MCP endpoint; returns the
    JSON-RPC messages it carried.

    - no status >= 500, except a 503 the test deliberately provoked (``allow_503``), which must
      still carry a JSON-RPC error body;
    - 200: an SSE stream of well-formed JSON-RPC messages (``streamed``: only the head was read)
      or one JSON-RPC message as application/json;
    - 202 / 204: an empty body;
    - every other status (4xx, 3xx are not expected either): a JSON body; on the MCP endpoint a
      JSON-RPC error, except 413, answered before routing with ``{"error": ...}``.
    """
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if status >= 500 and not (allow_503 and status == 503):
        raise BadReply(f"HTTP {status}: {body[:500]!r}")
    if status == 200:
        if content_type == "text/event-stream":
            if streamed:
                return []
            messages = sse_data(body)
            for message in messages:
                check_message(message, revision, request_method)
            return messages
        if content_type == "application/json":
            message = strict_json(body)
            check_message(message, revision, request_method)
            return [message]
        raise BadReply(f"200 with content-type {content_type!r}: {body[:300]!r}")
    if status in (202, 204):
        if body:
            raise BadReply(f"{status} with a body: {body[:300]!r}")
        return []
    if not 400 <= status < 600:
        raise BadReply(f"unexpected status {status}: {body[:300]!r}")
    if content_type != "application/json":
        raise BadReply(f"HTTP {status} without a JSON body (content-type {content_type!r}): {body[:300]!r}")
    document = strict_json(body)
    if status == 413 and isinstance(document, dict) and set(document) == {"error"}:
        return []
    if isinstance(document, list) and revision == "2025-03-26":  # errors for a whole batch
        check_message(document, revision)
        if all("error" in item for item in document):
            return document
        raise BadReply(f"HTTP {status} for a batch with a result in it: {body[:300]!r}")
    check_message(document, None)
    if "error" not in document:
        raise BadReply(f"HTTP {status} whose body is no JSON-RPC error: {body[:300]!r}")
    return [document]


# -- the server's log -----------------------------------------------------------------------------------------

#: A log line at these levels, a traceback or an ASGI framework error is a crash, unless it is a
#: record the test provoked on purpose (see ``expected``).
_LEVEL = re.compile(r"^\S+ \S+ (ERROR|CRITICAL) (\S+): (.*)$")
_CRASH_MARKERS = ("Traceback (most recent call last)", "Exception in ASGI application", "Error in ASGI Framework",
                  "Task exception was never retrieved", "Unhandled exception", "exception was never retrieved")


def log_problems(log: str, expected: tuple[str, ...] = ()) -> list[str]:
    """The lines of a server log that show a crash or an unhandled error.

    Counted: every ERROR or CRITICAL record, and every traceback or ASGI/asyncio crash marker
    that does not belong to an expected record. ``expected`` holds substrings of the messages of
    ERROR records a test provoked deliberately (a plugin hook raising on purpose); the traceback
    printed under such a record belongs to it.
    """
    problems: list[str] = []
    inside_expected = False
    for line in log.splitlines():
        record = _LEVEL.match(line)
        if record is not None:
            inside_expected = any(text in record.group(3) for text in expected)
            if not inside_expected:
                problems.append(line)
            continue
        if re.match(r"^\S+ \S+ (DEBUG|INFO|WARNING) ", line):
            inside_expected = False
            continue
        if any(marker in line for marker in _CRASH_MARKERS) and not inside_expected:
            problems.append(line)
    return problems
