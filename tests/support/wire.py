"""Wire-level schema checks for messages an MCP server sends.

:class:`WireValidator` validates every JSON-RPC message the host *sends* against the official MCP JSON
schema of the negotiated protocol revision (``tests/data/schema/<revision>.json``, see its README).

The schemas have no root schema, so each check validates against named definitions:

* a result response: the revision's result envelope (``JSONRPCResponse`` in 2025-03-26/2025-06-18,
  ``JSONRPCResultResponse`` later) plus the result definition(s) for the request method (see
  :func:`result_definitions`), or the ``ServerResult`` union when the method is not known;
* an error response: ``JSONRPCError`` / ``JSONRPCErrorResponse``;
* a notification: ``JSONRPCNotification`` plus the notification definition for its method plus the
  ``ServerNotification`` union;
* a server-to-client request: ``JSONRPCRequest`` plus the request definition for its method plus the
  ``ServerRequest`` union (2026-07-28 has no ``ServerRequest``: input requests travel inside an
  ``InputRequiredResult`` instead, so any server-to-client request is a violation there).

The official schemas are used as published: they are loose in places (most definitions allow extra
properties, ``format`` is an annotation), and this module does not tighten them.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from jsonschema import Draft7Validator, Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from jsonschema.protocols import Validator
from referencing import Registry, Resource

#: Where the official schemas live: ``tests/data/schema`` (copies kept with the tests, so a bare clone
#: runs them); ``MCPHOST_SPEC_SCHEMA_DIR`` points elsewhere, e.g. at a newer checkout of the spec.
SCHEMA_DIR: Final = Path(
    os.environ.get("MCPHOST_SPEC_SCHEMA_DIR") or Path(__file__).resolve().parents[1] / "data" / "schema"
)

#: The revisions this module knows, oldest first.
REVISIONS: Final = ("2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")

#: How many characters of the offending message a :class:`WireSchemaError` quotes.
_QUOTE_LIMIT: Final = 600
#: How many failed ``anyOf`` alternatives a :class:`WireSchemaError` lists.
_BRANCH_LIMIT: Final = 6

#: Request method (client -> server) -> result definitions the server may answer with, in preference
#: order.  Names a revision does not define are dropped; a method is only valid for a revision whose
#: ``ClientRequest`` union contains it.  The first surviving name is the "normal" result.
_RESULTS: Final[Mapping[str, tuple[str, ...]]] = {
    "initialize": ("InitializeResult",),
    "ping": ("EmptyResult",),
    "server/discover": ("DiscoverResult",),
    "tools/list": ("ListToolsResult",),
    "tools/call": ("CallToolResult", "InputRequiredResult", "CreateTaskResult"),
    "resources/list": ("ListResourcesResult",),
    "resources/templates/list": ("ListResourceTemplatesResult",),
    "resources/read": ("ReadResourceResult", "InputRequiredResult"),
    "resources/subscribe": ("EmptyResult",),
    "resources/unsubscribe": ("EmptyResult",),
    "subscriptions/listen": ("SubscriptionsListenResult",),
    "prompts/list": ("ListPromptsResult",),
    "prompts/get": ("GetPromptResult", "InputRequiredResult"),
    "completion/complete": ("CompleteResult",),
    "logging/setLevel": ("EmptyResult",),
    "tasks/get": ("GetTaskResult",),
    "tasks/result": ("GetTaskPayloadResult",),
    "tasks/cancel": ("CancelTaskResult",),
    "tasks/list": ("ListTasksResult",),
}


class WireSchemaError(AssertionError):
    """A message the server sent does not validate against its revision's schema.

    The text names the revision, the definition(s), the best-matching schema error (JSON path and
    message) and the offending message (JSON, truncated).
    """

    def __init__(
        self,
        revision: str,
        definition: str,
        message: object,
        detail: str,
        *,
        path: str = "$",
    ) -> None:
        self.revision = revision
        self.definition = definition
        self.message = message
        self.detail = detail
        self.path = path
        super().__init__(
            f"[MCP {revision}] message does not validate against {definition}\n"
            f"  at {path}: {detail}\n"
            f"  message: {_quote(message)}"
        )


def _quote(message: object) -> str:
    try:
        text = json.dumps(message, ensure_ascii=False, default=repr)
    except ValueError:  # circular structures
        text = repr(message)
    if len(text) > _QUOTE_LIMIT:
        text = f"{text[:_QUOTE_LIMIT]}... ({len(text)} chars)"
    return text


def _describe(error: ValidationError, prefix: str) -> str:
    """The error's message, plus one line per failed branch when it is an ``anyOf``/``oneOf`` failure."""
    if not error.context or error.validator not in ("anyOf", "oneOf"):
        return error.message
    branches: dict[int, list[ValidationError]] = {}
    for sub in error.context:
        index = sub.relative_schema_path[0] if sub.relative_schema_path else -1
        branches.setdefault(index if isinstance(index, int) else -1, []).append(sub)
    members = error.schema.get(error.validator, []) if isinstance(error.schema, dict) else []
    lines = [error.message]
    for index, subs in list(branches.items())[:_BRANCH_LIMIT]:
        member = members[index] if 0 <= index < len(members) else {}
        name = member.get("$ref", f"#{index}").rsplit("/", 1)[-1] if isinstance(member, dict) else f"#{index}"
        sub = best_match(subs)
        if sub is not None:
            lines.append(f"    - {name}: at {prefix}{sub.json_path[1:]}: {sub.message}")
    if len(branches) > _BRANCH_LIMIT:
        lines.append(f"    - ... {len(branches) - _BRANCH_LIMIT} more alternatives")
    return "\n".join(lines)


@dataclass(frozen=True)
class _Revision:
    """One loaded revision: its schema document, dialect and the registry its refs resolve through."""

    name: str
    schema: Mapping[str, Any]
    defs_key: str  # "definitions" (draft-07) or "$defs" (2020-12)
    validator_class: type[Validator]
    uri: str
    registry: Registry[Any]

    @property
    def defs(self) -> Mapping[str, Any]:
        return self.schema[self.defs_key]

    def ref(self, definition: str) -> dict[str, str]:
        return {"$ref": f"{self.uri}#/{self.defs_key}/{definition}"}

    def union_methods(self, union: str) -> dict[str, str]:
        """``method`` const -> definition name, for each member of a union (``ServerNotification``...)."""
        schema = self.defs.get(union)
        if schema is None:
            return {}
        members = (
            [ref["$ref"].rsplit("/", 1)[-1] for ref in schema["anyOf"]] if "anyOf" in schema else [union]
        )
        methods: dict[str, str] = {}
        for name in members:
            method = self.defs[name].get("properties", {}).get("method", {}).get("const")
            if isinstance(method, str):
                methods[method] = name
        return methods


@functools.cache
def _load(revision: str) -> _Revision:
    path = SCHEMA_DIR / f"{revision}.json"
    if revision not in REVISIONS or not path.is_file():
        raise ValueError(
            f"unknown MCP revision {revision!r} (known: {', '.join(REVISIONS)}; looked in {path})"
        )
    schema = json.loads(path.read_text(encoding="utf-8"))
    dialect = schema.get("$schema", "")
    validator_class: type[Validator]
    if "draft-07" in dialect:
        validator_class, defs_key = Draft7Validator, "definitions"
    elif "2020-12" in dialect:
        validator_class, defs_key = Draft202012Validator, "$defs"
    else:
        raise ValueError(f"{path}: unexpected $schema {dialect!r}")
    validator_class.check_schema(schema)
    uri = f"urn:mcp-schema:{revision}"
    registry: Registry[Any] = Registry().with_resource(uri, Resource.from_contents(schema))
    return _Revision(revision, schema, defs_key, validator_class, uri, registry)


@functools.cache
def _validator(revision: str, definitions: tuple[str, ...]) -> Validator:
    """A compiled validator for one definition, or for ``anyOf`` several."""
    rev = _load(revision)
    missing = [name for name in definitions if name not in rev.defs]
    if missing:
        raise KeyError(f"{revision} defines no {', '.join(missing)}")
    schema: dict[str, Any] = (
        rev.ref(definitions[0]) if len(definitions) == 1 else {"anyOf": [rev.ref(n) for n in definitions]}
    )
    return rev.validator_class(schema, registry=rev.registry)


def definitions(revision: str) -> frozenset[str]:
    """Every definition name the revision's schema has."""
    return frozenset(_load(revision).defs)


def _result_names(revision: str, method: str) -> tuple[str, ...] | None:
    rev = _load(revision)
    if method not in rev.union_methods("ClientRequest"):
        return None
    names = tuple(name for name in _RESULTS.get(method, ()) if name in rev.defs)
    return names or None


def _unknown_method(revision: str, method: object, message: object | None) -> WireSchemaError:
    """The error for a result of ``method``; ``message`` is the response, or None outside a check."""
    known = ", ".join(sorted(_load(revision).union_methods("ClientRequest")))
    return WireSchemaError(
        revision,
        "ClientRequest",
        {"method": method} if message is None else message,
        f"{method!r} is not a client request method of this revision, so it has no result (known: {known})",
        path="$.method" if message is None else "$.result",
    )


def client_request_methods(revision: str) -> frozenset[str]:
    """The request methods a client may send under ``revision`` (its ``ClientRequest`` union)."""
    return frozenset(_load(revision).union_methods("ClientRequest"))


def result_definitions(revision: str, method: str) -> tuple[str, ...]:
    """Result definitions a server may answer ``method`` with under ``revision``, normal result first.

    Raises :class:`WireSchemaError` when the revision has no such client request method.
    """
    names = _result_names(revision, method)
    if names is None:
        raise _unknown_method(revision, method, None)
    return names


def result_definition(revision: str, method: str) -> str:
    """The normal result definition for ``method``.

    ``result_definition("2025-06-18", "tools/call") == "CallToolResult"``.
    """
    return result_definitions(revision, method)[0]


def _discriminate(names: tuple[str, ...], result: object) -> tuple[str, ...]:
    """Narrow ``X | InputRequiredResult`` by the result's own ``resultType``.

    ``InputRequiredResult`` only requires ``resultType`` and allows any other property, so the plain
    ``anyOf`` (as in the 2026 ``*ResultResponse`` definitions) would accept a malformed ``X``.  The result
    says which branch it claims to be: ``"input_required"`` -> only ``InputRequiredResult``;
    ``"complete"`` or absent -> only the normal result(s); anything else (extension values such as
    ``"task"``) keeps the official ``anyOf``.
    """
    if "InputRequiredResult" not in names or len(names) == 1 or not isinstance(result, dict):
        return names
    result_type = result.get("resultType")
    if result_type == "input_required":
        return ("InputRequiredResult",)
    if result_type is None or result_type == "complete":
        return tuple(name for name in names if name != "InputRequiredResult")
    return names


class WireValidator:
    """Validates messages a server sends under one protocol revision."""

    def __init__(self, revision: str) -> None:
        self.revision = revision
        self._rev = _load(revision)
        defs = self._rev.defs
        self._result_envelope = (
            "JSONRPCResultResponse" if "JSONRPCResultResponse" in defs else "JSONRPCResponse"
        )
        self._error_envelope = "JSONRPCErrorResponse" if "JSONRPCErrorResponse" in defs else "JSONRPCError"
        self._notifications = self._rev.union_methods("ServerNotification")
        self._requests = self._rev.union_methods("ServerRequest")

    def __repr__(self) -> str:
        return f"WireValidator({self.revision!r})"

    # -- public -----------------------------------------------------------------------------------

    def check(self, message: dict[str, Any], *, request_method: str | None = None) -> None:
        """Validate one JSON-RPC message the server sent; raise :class:`WireSchemaError` if it is invalid.

        ``request_method`` is the method of the request a result response answers; it selects the
        result definition.  It is ignored for other kinds of messages.
        """
        if not isinstance(message, dict):
            raise WireSchemaError(
                self.revision,
                "JSONRPCMessage",
                message,
                f"expected one JSON object, got {type(message).__name__}",
            )
        kinds = [key for key in ("method", "result", "error") if key in message]
        if len(kinds) != 1:
            detail = (
                "neither 'method', 'result' nor 'error' present"
                if not kinds
                else f"ambiguous message: has {' and '.join(repr(k) for k in kinds)}"
            )
            raise WireSchemaError(self.revision, "JSONRPCMessage", message, detail)
        kind = kinds[0]
        if kind == "result":
            self._check_result(message, request_method)
        elif kind == "error":
            self._validate(message, (self._error_envelope,))
        elif "id" in message:
            self._check_request(message)
        else:
            self._check_notification(message)

    def check_all(self, messages: Iterable[tuple[dict[str, Any], str | None]]) -> int:
        """Check ``(message, request_method)`` pairs in order; return how many were checked."""
        count = 0
        for message, request_method in messages:
            self.check(message, request_method=request_method)
            count += 1
        return count

    # -- per kind ---------------------------------------------------------------------------------

    def _check_result(self, message: dict[str, Any], request_method: str | None) -> None:
        self._validate(message, (self._result_envelope,))
        if request_method is None:
            if "ServerResult" in self._rev.defs:
                self._validate(message["result"], ("ServerResult",), path="$.result", whole=message)
            return
        names = _result_names(self.revision, request_method)
        if names is None:
            raise _unknown_method(self.revision, request_method, message)
        names = _discriminate(names, message["result"])
        self._validate(
            message["result"], names, path="$.result", whole=message, label=f"{request_method} result"
        )

    def _check_notification(self, message: dict[str, Any]) -> None:
        self._validate(message, ("JSONRPCNotification",))
        method = message["method"]
        specific = self._notifications.get(method) if isinstance(method, str) else None
        if specific is None:
            raise WireSchemaError(
                self.revision,
                "ServerNotification",
                message,
                f"{method!r} is not a server notification in this revision "
                f"(known: {', '.join(sorted(self._notifications))})",
                path="$.method",
            )
        self._validate(message, (specific,))
        self._validate(message, ("ServerNotification",))

    def _check_request(self, message: dict[str, Any]) -> None:
        self._validate(message, ("JSONRPCRequest",))
        if not self._requests:
            raise WireSchemaError(
                self.revision,
                "ServerRequest",
                message,
                "this revision defines no server-to-client requests "
                "(they travel as inputRequests inside an InputRequiredResult)",
                path="$.method",
            )
        method = message["method"]
        specific = self._requests.get(method) if isinstance(method, str) else None
        if specific is None:
            raise WireSchemaError(
                self.revision,
                "ServerRequest",
                message,
                f"{method!r} is not a server-to-client request in this revision "
                f"(known: {', '.join(sorted(self._requests))})",
                path="$.method",
            )
        self._validate(message, (specific,))
        self._validate(message, ("ServerRequest",))

    # -- plumbing ---------------------------------------------------------------------------------

    def _validate(
        self,
        instance: object,
        names: tuple[str, ...],
        *,
        path: str = "$",
        whole: object = None,
        label: str | None = None,
    ) -> None:
        validator = _validator(self.revision, names)
        error: ValidationError | None = best_match(validator.iter_errors(instance))
        if error is None:
            return
        definition = " | ".join(names)
        if label:
            definition = f"{definition} ({label})"
        sub_path = error.json_path[1:]  # drop the leading "$"
        raise WireSchemaError(
            self.revision,
            definition,
            instance if whole is None else whole,
            _describe(error, path),
            path=f"{path}{sub_path}",
        )
