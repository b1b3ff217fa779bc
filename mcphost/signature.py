"""Derive MCP JSON Schemas from handler signatures and bind JSON arguments back.

Tools and prompts are plain (async) Python functions. :func:`inspect_signature`
reads a function's annotations once, at registration, and produces the tool's
``inputSchema`` and, from the return annotation, its ``outputSchema``. It also
precomputes the conversions :meth:`Signature.bind` applies to each call's
(already validated) JSON arguments, turning them into the values the
annotations ask for: enum members, dataclass instances, tuples, sets, datetimes
and UUIDs. :meth:`Signature.dump_output` goes the other way for return values.

Supported annotations: ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``,
``Optional``/unions, ``Literal``, ``Enum`` subclasses, lists, sequences, sets,
tuples, string-keyed dicts and mappings, ``TypedDict``, dataclasses,
``datetime``/``date``/``time``, ``uuid.UUID``, ``NewType`` and ``Annotated``
(a ``str`` in the metadata becomes the description). Named types (enums,
TypedDicts, dataclasses) are emitted once under ``$defs`` and referenced, which
is also what makes recursive types terminate.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import datetime as dt
import enum
import functools
import inspect
import math
import re
import sys
import types
import typing
import uuid
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any, Literal

__all__ = [
    "CONTENT_TYPES",
    "Signature",
    "SignatureError",
    "docstring_summary",
    "inspect_signature",
    "prompt_arguments",
    "register_content_type",
    "to_jsonable",
]


class SignatureError(TypeError):
    """A handler signature cannot be expressed as a JSON Schema."""


CONTENT_TYPES: list[type] = []
"""Return types that mean "unstructured content" (no outputSchema).

Classes whose name ends in ``Content`` or ``ToolResult`` are recognised by name;
others can be added with :func:`register_content_type`.
"""


def register_content_type(cls: type) -> type:
    """Treat ``cls`` (and subclasses) as unstructured content when it is a return type.

    Returns ``cls`` so it can be used as a class decorator.
    """
    if cls not in CONTENT_TYPES:
        CONTENT_TYPES.append(cls)
    return cls


# --------------------------------------------------------------------------- type model

_Kind = Literal[
    "any", "null", "str", "int", "float", "bool", "literal", "enum", "list", "set", "tuple",
    "dict", "typeddict", "dataclass", "union", "annotated", "datetime", "date", "time", "uuid",
]


class _NoDefault:
    """Marker for "no (JSON-able) default"; a class so it reprs usefully."""

    def __repr__(self) -> str:
        return "<no default>"


_NO_DEFAULT: Any = _NoDefault()


@dataclasses.dataclass(eq=False)
class _Node:
    """A parsed annotation; schema emission and converter building both walk these.

    Named nodes (enum, typeddict, dataclass) are shared per class, so the graph
    may contain cycles for recursive types. ``eq=False`` keeps identity hashing.
    """

    kind: _Kind
    py: Any = None  # the class for named kinds; set/frozenset for "set"
    args: list[_Node] = dataclasses.field(default_factory=list)  # items / members / prefix / value / child
    values: tuple[Any, ...] = ()  # literal values or enum members
    fields: list[_Field] = dataclasses.field(default_factory=list)
    description: str | None = None
    variadic: bool = True  # tuples: tuple[T, ...] (or bare) rather than fixed prefixItems


@dataclasses.dataclass(eq=False)
class _Field:
    """One TypedDict key or dataclass field."""

    name: str
    node: _Node
    required: bool
    init: bool = True
    default: Any = _NO_DEFAULT
    description: str | None = None


class _Unsupported(Exception):
    """Internal: an annotation cannot be mapped; callers add function/parameter context."""


_SCALAR_KINDS: dict[type, _Kind] = {str: "str", int: "int", float: "float", bool: "bool"}
_FORMAT_KINDS: dict[type, _Kind] = {
    dt.datetime: "datetime", dt.date: "date", dt.time: "time", uuid.UUID: "uuid",
}
_SEQUENCE_ORIGINS = (list, cabc.Sequence, cabc.MutableSequence, cabc.Iterable, cabc.Collection)
_SET_ORIGINS = (set, frozenset, cabc.Set, cabc.MutableSet)
_MAPPING_ORIGINS = (dict, cabc.Mapping, cabc.MutableMapping)
# typing's bare aliases have an origin but no args; they mean "unparameterized".
_BARE_ALIASES = (typing.List, typing.Tuple, typing.Dict, typing.Set, typing.FrozenSet,  # noqa: UP006
                 typing.Sequence, typing.Mapping)
_UNION_ORIGINS = (typing.Union, types.UnionType)


def _is_typeddict(tp: Any) -> bool:
    # Duck-typed so typing_extensions.TypedDict classes are recognised too.
    return (isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")
            and hasattr(tp, "__total__"))


def _json_type(value: Any) -> str | None:
    """The JSON Schema type name of a scalar, or None if it is not a JSON scalar."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number" if math.isfinite(value) else None
    if isinstance(value, str):
        return "string"
    return None


def _module_ns(obj: Any) -> dict[str, Any]:
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    return vars(module) if module is not None else {}


def _type_hints(obj: Any) -> dict[str, Any] | None:
    """``get_type_hints`` with extras, or None when some name does not resolve."""
    try:
        return typing.get_type_hints(obj, include_extras=True)
    except Exception:
        # Any failure (NameError for TYPE_CHECKING-only imports, TypeError for odd
        # objects) falls back to resolving annotations one at a time.
        return None


class _Parser:
    """Turns annotations into :class:`_Node` graphs, sharing one node per named class."""

    def __init__(self) -> None:
        self._named: dict[type, _Node] = {}

    def parse(self, tp: Any, ns: dict[str, Any]) -> _Node:
        if tp is inspect.Parameter.empty or tp is Any or tp is object:
            return _Node("any")
        if isinstance(tp, typing.ForwardRef):
            tp = tp.__forward_arg__
        if isinstance(tp, str):
            tp = self._evaluate(tp, ns)
        if tp is None or tp is type(None):
            return _Node("null")
        if isinstance(tp, typing.NewType):
            return self.parse(tp.__supertype__, ns)
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            base, *meta = typing.get_args(tp)
            child = self.parse(base, ns)
            desc = next((m for m in meta if isinstance(m, str)), None)
            if desc is None:
                return child
            return _Node("annotated", args=[child], description=inspect.cleandoc(desc))
        if origin is typing.Required or origin is typing.NotRequired:
            return self.parse(typing.get_args(tp)[0], ns)
        if origin in _UNION_ORIGINS:
            return _Node("union", args=[self.parse(a, ns) for a in typing.get_args(tp)])
        if origin is Literal:
            return self._literal(typing.get_args(tp))
        if origin is not None:
            return self._generic(tp, origin, typing.get_args(tp), ns)
        if isinstance(tp, type):
            return self._class(tp, ns)
        raise _Unsupported(f"unsupported annotation {tp!r}")

    @staticmethod
    def _evaluate(text: str, ns: dict[str, Any]) -> Any:
        try:
            # Evaluating annotation strings in the defining namespace is what get_type_hints does.
            return eval(text, ns)
        except Exception as exc:
            raise _Unsupported(f"cannot resolve annotation {text!r}: {exc}") from exc

    @staticmethod
    def _literal(values: tuple[Any, ...]) -> _Node:
        for value in values:
            plain = value.value if isinstance(value, enum.Enum) else value
            if _json_type(plain) is None:
                raise _Unsupported(f"Literal value {value!r} is not a JSON scalar")
        return _Node("literal", values=values)

    def _generic(self, tp: Any, origin: Any, args: tuple[Any, ...], ns: dict[str, Any]) -> _Node:
        if tp in _BARE_ALIASES:
            return self._class(origin, ns)
        if origin in _SEQUENCE_ORIGINS:
            return _Node("list", args=[self.parse(args[0], ns)] if args else [])
        if origin in _SET_ORIGINS:
            item = self.parse(args[0], ns) if args else None
            if item is not None and _unhashable(item):
                raise _Unsupported(f"set items of type {args[0]!r} are not hashable")
            factory = frozenset if origin is frozenset else set
            return _Node("set", py=factory, args=[] if item is None else [item])
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return _Node("tuple", args=[self.parse(args[0], ns)])
            return _Node("tuple", args=[self.parse(a, ns) for a in args], variadic=False)
        if origin in _MAPPING_ORIGINS:
            if not args:
                return _Node("dict")
            key = self.parse(args[0], ns)
            while key.kind == "annotated":
                key = key.args[0]
            if key.kind not in ("str", "any"):
                raise _Unsupported(f"mapping keys must be str (JSON object keys), got {args[0]!r}")
            return _Node("dict", args=[self.parse(args[1], ns)])
        if dataclasses.is_dataclass(origin) or _is_typeddict(origin):
            raise _Unsupported(f"generic {origin.__qualname__}[...] is not supported; use a concrete class")
        raise _Unsupported(f"unsupported annotation {tp!r}")

    def _class(self, tp: type, ns: dict[str, Any]) -> _Node:
        if issubclass(tp, enum.Enum):
            return self._enum(tp)
        kind = _SCALAR_KINDS.get(tp) or _FORMAT_KINDS.get(tp)
        if kind is not None:
            return _Node(kind)
        if issubclass(tp, (bytes, bytearray, memoryview)):
            raise _Unsupported("bytes cannot be represented in JSON; use str (e.g. base64-encoded)")
        if tp is list or tp in (cabc.Sequence, cabc.MutableSequence, cabc.Iterable, cabc.Collection):
            return _Node("list")
        if tp is set or tp is frozenset or tp in (cabc.Set, cabc.MutableSet):
            return _Node("set", py=frozenset if tp is frozenset else set)
        if tp is tuple:
            return _Node("tuple")
        if tp is dict or tp in (cabc.Mapping, cabc.MutableMapping):
            return _Node("dict")
        if _is_typeddict(tp):
            return self._typeddict(tp)
        if dataclasses.is_dataclass(tp):
            return self._dataclass(tp)
        raise _Unsupported(f"unsupported type {tp.__qualname__}")

    def _enum(self, cls: type[enum.Enum]) -> _Node:
        node = self._named.get(cls)
        if node is None:
            members = tuple(cls)
            for member in members:
                if _json_type(member.value) is None:
                    raise _Unsupported(f"enum {cls.__qualname__} value {member.value!r} is not a JSON scalar")
            node = _Node("enum", py=cls, values=members, description=_class_description(cls))
            self._named[cls] = node
        return node

    def _typeddict(self, cls: type) -> _Node:
        node = self._named.get(cls)
        if node is not None:
            return node
        # Registered before the fields are parsed so self-references find it.
        node = self._named[cls] = _Node("typeddict", py=cls, description=_class_description(cls))
        hints = _type_hints(cls)
        if hints is None:
            hints = {}
            for base in reversed(cls.__mro__):
                hints.update(getattr(base, "__annotations__", {}))
        attr_docs = _parse_section(inspect.getdoc(cls) or "", _ATTR_SECTIONS)
        required: Collection[str] = getattr(cls, "__required_keys__", frozenset())
        ns = _module_ns(cls)
        for name, hint in hints.items():
            child = self._field(cls, name, hint, ns)
            node.fields.append(_Field(name, child, name in required, description=attr_docs.get(name)))
        return node

    def _dataclass(self, cls: type) -> _Node:
        node = self._named.get(cls)
        if node is not None:
            return node
        node = self._named[cls] = _Node("dataclass", py=cls, description=_class_description(cls))
        hints = _type_hints(cls) or {}
        attr_docs = _parse_section(inspect.getdoc(cls) or "", _ATTR_SECTIONS)
        ns = _module_ns(cls)
        for f in dataclasses.fields(cls):
            child = self._field(cls, f.name, hints.get(f.name, f.type), ns)
            has_default = f.default is not dataclasses.MISSING
            required = not has_default and f.default_factory is dataclasses.MISSING
            desc = f.metadata.get("description") if f.metadata else None
            node.fields.append(_Field(
                f.name, child, required, init=f.init,
                default=_json_default(f.default) if has_default else _NO_DEFAULT,
                description=desc if isinstance(desc, str) else attr_docs.get(f.name),
            ))
        return node

    def _field(self, cls: type, name: str, hint: Any, ns: dict[str, Any]) -> _Node:
        try:
            return self.parse(hint, ns)
        except _Unsupported as exc:
            raise _Unsupported(f"field {name!r} of {cls.__qualname__}: {exc}") from None


def _unhashable(node: _Node) -> bool:
    while node.kind == "annotated":
        node = node.args[0]
    return node.kind in ("list", "dict", "typeddict") or (node.kind == "set" and node.py is set)


def _class_description(cls: type) -> str | None:
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str) or not doc.strip():
        return None
    # dataclass() invents "Name(field: type, ...)" when there is no docstring.
    if dataclasses.is_dataclass(cls) and doc.startswith(f"{cls.__name__}("):
        return None
    return _summary(inspect.cleandoc(doc))


def _strip_annotated(node: _Node) -> _Node:
    while node.kind == "annotated":
        node = node.args[0]
    return node


# --------------------------------------------------------------------------- schema emission


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {}
    json_types = {_json_type(v) for v in values}
    if len(json_types) == 1:
        schema["type"] = json_types.pop()
    schema["enum"] = values
    return schema


_SIMPLE_SCHEMAS: dict[str, str] = {
    "null": "null", "str": "string", "int": "integer", "float": "number", "bool": "boolean",
}
_FORMATS: dict[str, str] = {"datetime": "date-time", "date": "date", "time": "time", "uuid": "uuid"}


class _Emitter:
    """Emits JSON Schema for nodes into one root document, collecting ``$defs``.

    ``output`` mode describes values produced by :func:`to_jsonable`: dataclasses
    list every field (including ``init=False`` ones) and all of them are required.
    """

    def __init__(self, *, output: bool) -> None:
        self.output = output
        self.defs: dict[str, dict[str, Any]] = {}
        self.ref_counts: Counter[str] = Counter()
        self._names: dict[_Node, str] = {}

    def emit(self, node: _Node) -> dict[str, Any]:
        kind = node.kind
        if kind == "any":
            return {}
        simple = _SIMPLE_SCHEMAS.get(kind)
        if simple is not None:
            return {"type": simple}
        fmt = _FORMATS.get(kind)
        if fmt is not None:
            return {"type": "string", "format": fmt}
        if kind == "annotated":
            return {**self.emit(node.args[0]), "description": node.description}
        if kind == "literal":
            return _enum_schema([v.value if isinstance(v, enum.Enum) else v for v in node.values])
        if kind in ("enum", "typeddict", "dataclass"):
            return self._ref(node)
        if kind == "union":
            return {"anyOf": [self.emit(a) for a in node.args]}
        if kind in ("list", "set"):
            schema: dict[str, Any] = {"type": "array"}
            if node.args:
                schema["items"] = self.emit(node.args[0])
            if kind == "set":
                schema["uniqueItems"] = True
            return schema
        if kind == "tuple":
            if node.variadic:
                return {"type": "array", "items": self.emit(node.args[0])} if node.args else {"type": "array"}
            n = len(node.args)
            if n == 0:
                return {"type": "array", "maxItems": 0}
            return {"type": "array", "prefixItems": [self.emit(a) for a in node.args],
                    "minItems": n, "maxItems": n}
        if kind == "dict":
            schema = {"type": "object"}
            if node.args:
                values = self.emit(node.args[0])
                if values:  # {} (Any) adds no constraint
                    schema["additionalProperties"] = values
            return schema
        raise AssertionError(f"unhandled node kind {kind}")  # pragma: no cover

    def _ref(self, node: _Node) -> dict[str, Any]:
        name = self._names.get(node)
        if name is None:
            name = self._names[node] = self._fresh_name(node.py.__name__)
            self.defs[name] = {}  # reserve the slot: recursion re-enters _ref before we finish
            self.defs[name] = self._named_schema(node)
        self.ref_counts[name] += 1
        return {"$ref": f"#/$defs/{name}"}

    def _fresh_name(self, base: str) -> str:
        name, i = base, 1
        while name in self.defs:
            i += 1
            name = f"{base}_{i}"
        return name

    def _named_schema(self, node: _Node) -> dict[str, Any]:
        if node.kind == "enum":
            schema = _enum_schema([m.value for m in node.values])
        else:
            fields = node.fields
            if node.kind == "dataclass" and not self.output:
                fields = [f for f in fields if f.init]  # init=False fields cannot be passed in
            props: dict[str, Any] = {}
            required: list[str] = []
            for f in fields:
                prop = self.emit(f.node)
                if f.description and "description" not in prop:
                    prop["description"] = f.description
                if not self.output and f.default is not _NO_DEFAULT:
                    prop["default"] = f.default
                props[f.name] = prop
                # to_jsonable always emits every dataclass field, so output mode requires them all.
                if f.required or (self.output and node.kind == "dataclass"):
                    required.append(f.name)
            schema = {"type": "object", "properties": props}
            if required:
                schema["required"] = required
            schema["additionalProperties"] = False
        if node.description:
            schema["description"] = node.description
        return schema


# --------------------------------------------------------------------------- bind converters

Converter = Callable[[Any], Any]
_INTRINSIC = frozenset({"enum", "dataclass", "set", "tuple", "datetime", "date", "time", "uuid"})


def _needs_conversion(root: _Node) -> bool:
    """Whether any value reachable from ``root`` must change type when bound."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.kind in _INTRINSIC:
            return True
        if node.kind == "literal" and any(isinstance(v, enum.Enum) for v in node.values):
            return True
        stack.extend(node.args)
        stack.extend(f.node for f in node.fields)
    return False


class _Lazy:
    """Forwarding converter used while a recursive type's converter is being built."""

    __slots__ = ("fn",)

    def __init__(self) -> None:
        self.fn: Converter | None = None

    def __call__(self, value: Any) -> Any:
        assert self.fn is not None
        return self.fn(value)


class _Converters:
    """Builds JSON -> Python converters; ``None`` means "use the JSON value as is"."""

    def __init__(self, emitter: _Emitter) -> None:
        self._emitter = emitter  # unions match members against their input schemas
        self._memo: dict[_Node, Converter] = {}

    def build(self, node: _Node) -> Converter | None:
        return self._build(node) if _needs_conversion(node) else None

    def _build(self, node: _Node) -> Converter:
        kind = node.kind
        if kind == "annotated":
            return self._build(node.args[0])
        if kind in ("dataclass", "typeddict"):
            existing = self._memo.get(node)
            if existing is not None:
                return existing
            lazy = _Lazy()
            self._memo[node] = lazy
            fn = self._dataclass(node) if kind == "dataclass" else self._typeddict(node)
            lazy.fn = self._memo[node] = fn
            return fn
        if kind == "enum":
            return typing.cast(Converter, node.py)  # Enum classes look members up by value
        if kind == "literal":
            members = {v.value: v for v in node.values if isinstance(v, enum.Enum)}
            return lambda value: members.get(value, value)
        if kind == "datetime":
            return dt.datetime.fromisoformat
        if kind == "date":
            return dt.date.fromisoformat
        if kind == "time":
            return dt.time.fromisoformat
        if kind == "uuid":
            return uuid.UUID
        if kind == "list":
            item = self._build(node.args[0])
            return lambda value: [item(x) for x in value]
        if kind == "set":
            factory = node.py
            elem = self.build(node.args[0]) if node.args else None
            if elem is None:
                return typing.cast(Converter, factory)
            return lambda value: factory(map(elem, value))
        if kind == "tuple":
            return self._tuple(node)
        if kind == "dict":
            val = self._build(node.args[0])
            return lambda value: {k: val(x) for k, x in value.items()}
        if kind == "union":
            return self._union(node)
        raise AssertionError(f"no converter for node kind {kind}")  # pragma: no cover

    def _tuple(self, node: _Node) -> Converter:
        if node.variadic:
            elem = self.build(node.args[0]) if node.args else None
            if elem is None:
                return tuple
            return lambda value: tuple(map(elem, value))
        convs = [self.build(a) for a in node.args]
        return lambda value: tuple(x if c is None else c(x) for c, x in zip(convs, value, strict=False))

    def _fields(self, node: _Node, *, init_only: bool) -> list[tuple[str, Converter]]:
        out = []
        for f in node.fields:
            if init_only and not f.init:
                continue
            conv = self.build(f.node)
            if conv is not None:
                out.append((f.name, conv))
        return out

    def _dataclass(self, node: _Node) -> Converter:
        cls = node.py
        convs = self._fields(node, init_only=True)

        def convert(value: Any) -> Any:
            kwargs = dict(value)
            for name, conv in convs:
                if name in kwargs:
                    kwargs[name] = conv(kwargs[name])
            return cls(**kwargs)

        return convert

    def _typeddict(self, node: _Node) -> Converter:
        convs = self._fields(node, init_only=False)

        def convert(value: Any) -> Any:
            out = dict(value)
            for name, conv in convs:
                if name in out:
                    out[name] = conv(out[name])
            return out

        return convert

    def _union(self, node: _Node) -> Converter:
        members = node.args
        non_null = [m for m in members if m.kind != "null"]
        if len(non_null) == 1 and len(members) == 2:
            inner = self._build(non_null[0])  # Optional[T]: the common case needs no schema matching
            return lambda value: None if value is None else inner(value)
        # Otherwise pick the first member whose schema accepts the value, exactly as
        # anyOf validation would, so binding agrees with what validation accepted.
        entries = [(self._emitter.emit(m), self.build(m)) for m in members]
        defs = self._emitter.defs
        compiled: dict[str, list[Any]] = {}

        def convert(value: Any) -> Any:
            validators = compiled.get("validators")
            if validators is None:
                # Imported and compiled on first use: only mixed unions need it. Built
                # whole and then published, so concurrent first calls cannot interleave.
                from jsonschema import Draft202012Validator

                validators = [Draft202012Validator({**schema, "$defs": defs}) for schema, _ in entries]
                compiled["validators"] = validators
            for validator, (_, conv) in zip(validators, entries, strict=True):
                if validator.is_valid(value):
                    if conv is None:
                        return value
                    try:
                        return conv(value)
                    except (ValueError, TypeError):
                        continue  # e.g. a string that is not a datetime: try the next member
            raise ValueError(f"{value!r} matches no member of the union")

        return convert


# --------------------------------------------------------------------------- output


_PRIMITIVE_TYPES = frozenset({str, int, float, bool, type(None)})


def to_jsonable(value: Any) -> Any:
    """Convert a Python value to plain JSON data (dataclasses, enums, tuples, datetimes, UUIDs)."""
    cls = type(value)
    if cls in _PRIMITIVE_TYPES:
        return value
    if cls is dict:
        return {k if type(k) is str else _json_key(k): to_jsonable(v) for k, v in value.items()}
    if cls is list or cls is tuple:
        return [to_jsonable(v) for v in value]
    if isinstance(value, enum.Enum):  # before str/int: StrEnum/IntEnum members are both
        return to_jsonable(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (dt.date, dt.time)):  # dt.datetime is a dt.date
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, cabc.Mapping):
        return {k if type(k) is str else _json_key(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    return value


def _json_key(key: Any) -> str:
    key = to_jsonable(key)
    return key if isinstance(key, str) else str(key)


def _is_json(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False


def _json_default(value: Any) -> Any:
    """``value`` as JSON for a schema "default", or ``_NO_DEFAULT`` if it has no JSON form."""
    try:
        converted = to_jsonable(value)
    except Exception:
        return _NO_DEFAULT
    return converted if _is_json(converted) else _NO_DEFAULT


def _is_content_class(tp: Any) -> bool:
    if not isinstance(tp, type):
        return False
    if tp.__name__.endswith(("Content", "ToolResult")):
        return True
    return any(issubclass(tp, c) for c in CONTENT_TYPES)


def _is_content(tp: Any) -> bool:
    """Whether a return annotation means unstructured content blocks."""
    if isinstance(tp, (str, typing.ForwardRef)):
        text = tp if isinstance(tp, str) else tp.__forward_arg__
        names = re.findall(r"[A-Za-z_][\w.]*", text)
        return bool(names) and any(n.endswith(("Content", "ToolResult")) for n in names)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return _is_content(args[0])
    if origin in _UNION_ORIGINS:
        real = [a for a in args if a is not type(None)]
        return bool(real) and all(_is_content(a) for a in real)
    if origin in _SEQUENCE_ORIGINS or origin is tuple:
        items = [a for a in args if a is not Ellipsis]
        return bool(items) and all(_is_content(a) for a in items)
    return _is_content_class(tp)


def _unwrap_awaitable(tp: Any) -> Any:
    # A sync function annotated "-> Awaitable[T]" is as good as "async def ... -> T".
    while typing.get_origin(tp) in (cabc.Awaitable, cabc.Coroutine):
        args = typing.get_args(tp)
        if not args:
            return Any
        tp = args[-1]
    return tp


def _output_schema(
    annotation: Any, parser: _Parser, ns: dict[str, Any]
) -> tuple[dict[str, Any] | None, bool]:
    annotation = _unwrap_awaitable(annotation)
    if annotation is inspect.Signature.empty or _is_content(annotation):
        return None, False
    try:
        node = parser.parse(annotation, ns)
    except _Unsupported:
        # A return type we cannot describe is still returnable as content; the host
        # decides how to render it, so this is not an error.
        return None, False
    base = _strip_annotated(node)
    if base.kind in ("null", "str"):
        return None, False
    emitter = _Emitter(output=True)
    schema = emitter.emit(node)
    if base.kind in ("dataclass", "typeddict", "dict"):
        ref = schema.pop("$ref", None)
        if ref is not None:
            # MCP wants the outputSchema root itself to be an object schema, not a $ref.
            name = ref.rsplit("/", 1)[-1]
            schema = {**emitter.defs[name], **schema}
            if emitter.ref_counts[name] == 1:  # only the root used it; recursive types keep it
                del emitter.defs[name]
        wrap = False
    else:
        schema = {"type": "object", "properties": {"result": schema}, "required": ["result"],
                  "x-mcphost-wrapped": True}
        wrap = True
    if emitter.defs:
        schema["$defs"] = emitter.defs
    return schema, wrap


# --------------------------------------------------------------------------- docstrings

_PARAM_SECTIONS = frozenset({"Args", "Arguments", "Parameters", "Keyword Args", "Keyword Arguments"})
_ATTR_SECTIONS = frozenset({"Attributes"})
_SUMMARY_STOP = _PARAM_SECTIONS | _ATTR_SECTIONS | {"Returns", "Return", "Yields", "Raises"}
_HEADER_RE = re.compile(r"^(\s*)([A-Z][A-Za-z ]*?)\s*:\s*$")
_ENTRY_RE = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _summary(doc: str) -> str | None:
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        m = _HEADER_RE.match(line)
        if m and m.group(2) in _SUMMARY_STOP:
            lines = lines[:i]
            break
    text = inspect.cleandoc("\n".join(lines)).strip()
    return text or None


def _parse_section(doc: str, headers: Collection[str]) -> dict[str, str]:
    """Google-style ``name: text`` / ``name (type): text`` entries under the given headers."""
    entries: dict[str, list[str]] = {}
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        m = _HEADER_RE.match(lines[i])
        i += 1
        if not m or m.group(2) not in headers:
            continue
        header_indent = len(m.group(1))
        entry_indent: int | None = None
        current: list[str] | None = None
        while i < len(lines):
            line = lines[i]
            if not line.strip():
                i += 1
                continue
            indent = _indent(line)
            if indent <= header_indent:
                break  # next section or the end of this one
            if entry_indent is None:
                entry_indent = indent
            if indent <= entry_indent:
                entry = _ENTRY_RE.match(line.strip())
                current = None
                if entry:
                    current = entries[entry.group(1)] = [entry.group(2).strip()]
            elif current is not None:
                current.append(line.strip())
            i += 1
    return {name: " ".join(p for p in parts if p) for name, parts in entries.items() if any(parts)}


def _doc_target(fn: Any) -> Any:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def docstring_summary(fn: Any) -> str | None:
    """The description part of ``fn``'s docstring (before Args/Returns/Raises), or None."""
    doc = inspect.getdoc(_doc_target(fn))
    return _summary(doc) if doc else None


# --------------------------------------------------------------------------- parameters


@dataclasses.dataclass
class _Param:
    name: str
    node: _Node
    required: bool
    default: Any
    description: str | None


@dataclasses.dataclass
class _Analysis:
    label: str
    params: list[_Param]
    context_param: str | None
    return_annotation: Any
    ns: dict[str, Any]
    parser: _Parser


def _hint_target(fn: Any) -> Any:
    """The object whose annotations describe calling ``fn``."""
    fn = _doc_target(fn)
    if isinstance(fn, type):
        return fn.__init__
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)) and callable(fn):
        call = type(fn).__call__  # a callable instance: its class's __call__ has the annotations
        if inspect.isfunction(call):
            return call
    return fn


def _globals_of(obj: Any) -> dict[str, Any]:
    unwrapped = inspect.unwrap(obj) if callable(obj) else obj
    ns = getattr(unwrapped, "__globals__", None)
    return ns if isinstance(ns, dict) else _module_ns(unwrapped)


_OPTIONAL_TEXT = re.compile(r"^(?:[\w.]+\.)?Optional\[(.*)\]$")


def _names_class(text: str, name: str) -> bool:
    """Whether a string annotation names ``name`` (optionally Optional/None-unioned or qualified)."""
    text = text.replace(" ", "")
    m = _OPTIONAL_TEXT.match(text)
    if m:
        text = m.group(1)
    elif text.endswith("|None"):
        text = text[:-5]
    elif text.startswith("None|"):
        text = text[5:]
    return text.split("[", 1)[0].rsplit(".", 1)[-1] == name


def _is_context(annotation: Any, context_type: type | None) -> bool:
    if context_type is None or annotation is inspect.Parameter.empty:
        return False
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        return _names_class(annotation, context_type.__name__)
    if annotation is context_type:
        return True
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is context_type:  # Context[Something]
        return True
    if origin is typing.Annotated:
        return _is_context(args[0], context_type)
    if origin in _UNION_ORIGINS:
        real = [a for a in args if a is not type(None)]
        return len(real) == 1 and _is_context(real[0], context_type)
    return False


def _analyse(fn: Any, context_type: type | None, skip: Collection[str]) -> _Analysis:
    target = _doc_target(fn)
    label = f"{getattr(target, '__qualname__', None) or type(target).__qualname__}()"
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise SignatureError(f"{label}: cannot read signature: {exc}") from exc
    hint_target = _hint_target(fn)
    ns = _globals_of(hint_target)
    hints = _type_hints(hint_target) or {}
    param_docs = _parse_section(inspect.getdoc(target) or "", _PARAM_SECTIONS)
    parser = _Parser()
    params: list[_Param] = []
    context_param: str | None = None
    for name, param in sig.parameters.items():
        if name in skip:
            continue
        annotation = hints.get(name, param.annotation)
        if _is_context(param.annotation, context_type) or _is_context(annotation, context_type):
            if context_param is not None:
                raise SignatureError(
                    f"{label}: parameters {context_param!r} and {name!r} both take the context"
                )
            context_param = name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            star = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise SignatureError(f"{label}: parameter {star}{name} is not supported; declare each argument")
        if param.kind is param.POSITIONAL_ONLY:
            raise SignatureError(
                f"{label}: parameter {name!r} is positional-only; arguments are passed by name"
            )
        try:
            node = parser.parse(annotation, ns)
        except _Unsupported as exc:
            raise SignatureError(f"{label}: parameter {name!r}: {exc}") from None
        has_default = param.default is not param.empty
        description = node.description if node.kind == "annotated" else None
        params.append(_Param(
            name=name,
            node=node,
            required=not has_default,
            default=_json_default(param.default) if has_default else _NO_DEFAULT,
            description=description or param_docs.get(name),
        ))
    return_annotation = hints.get("return", sig.return_annotation)
    return _Analysis(label, params, context_param, return_annotation, ns, parser)


# --------------------------------------------------------------------------- public API


@dataclasses.dataclass(frozen=True)
class Signature:
    """What a handler accepts and returns, in JSON Schema terms, plus its argument binder."""

    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    wrap_output: bool
    context_param: str | None
    _converters: tuple[tuple[str, Converter], ...] = dataclasses.field(default=(), repr=False, compare=False)

    def bind(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Turn validated JSON arguments into keyword arguments for the handler.

        Always returns a new dict (callers may add the context argument to it).
        Absent optional arguments stay absent so the Python defaults apply.
        Raises ValueError naming the argument if a value cannot be converted.
        """
        kwargs = dict(arguments)
        for name, convert in self._converters:
            if name in kwargs:
                try:
                    kwargs[name] = convert(kwargs[name])
                except (ValueError, TypeError, KeyError) as exc:
                    raise ValueError(f"invalid value for argument {name!r}: {exc}") from exc
        return kwargs

    def dump_output(self, value: Any) -> Any:
        """The structured (JSON) form of a handler's return value, wrapped if the schema says so."""
        data = to_jsonable(value)
        return {"result": data} if self.wrap_output else data


def inspect_signature(
    fn: Callable[..., Any], *, context_type: type | None = None, skip: Collection[str] = ()
) -> Signature:
    """Analyse ``fn`` once: input/output schemas, the context parameter and argument converters.

    Raises SignatureError for parameters that cannot be expressed in JSON Schema.
    """
    analysis = _analyse(fn, context_type, skip)
    emitter = _Emitter(output=False)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for p in analysis.params:
        prop = emitter.emit(p.node)
        if p.description and "description" not in prop:
            prop["description"] = p.description
        if p.default is not _NO_DEFAULT:
            prop["default"] = p.default
        properties[p.name] = prop
        if p.required:
            required.append(p.name)
    input_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    input_schema["additionalProperties"] = False
    if emitter.defs:
        input_schema["$defs"] = emitter.defs

    converters = _Converters(emitter)
    bound = tuple(
        (p.name, conv) for p in analysis.params if (conv := converters.build(p.node)) is not None
    )
    output_schema, wrap = _output_schema(analysis.return_annotation, analysis.parser, analysis.ns)
    return Signature(input_schema, output_schema, wrap, analysis.context_param, bound)


def _is_str_like(node: _Node) -> bool:
    node = _strip_annotated(node)
    if node.kind in ("str", "any"):
        return True
    if node.kind in ("literal", "enum"):
        values = [v.value if isinstance(v, enum.Enum) else v for v in node.values]
        return bool(values) and all(isinstance(v, str) for v in values)
    if node.kind == "union":
        real = [m for m in node.args if _strip_annotated(m).kind != "null"]
        return bool(real) and all(_is_str_like(m) for m in real)
    return False


def prompt_arguments(fn: Callable[..., Any], *, context_type: type | None = None) -> list[dict[str, Any]]:
    """MCP ``PromptArgument`` dicts for ``fn``; every parameter must accept a string.

    Raises SignatureError for parameters that are not str-compatible (str,
    Optional[str], Literal of strings, an Enum with string values).
    """
    analysis = _analyse(fn, context_type, ())
    arguments: list[dict[str, Any]] = []
    for p in analysis.params:
        if not _is_str_like(p.node):
            raise SignatureError(
                f"{analysis.label}: parameter {p.name!r}: prompt arguments are strings; annotate it as "
                "str, Optional[str], a Literal of strings or a str-valued Enum"
            )
        arg: dict[str, Any] = {"name": p.name}
        if p.description:
            arg["description"] = p.description
        arg["required"] = p.required
        arguments.append(arg)
    return arguments
