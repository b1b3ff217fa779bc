"""Turn handler signatures into MCP JSON Schemas, and call arguments into validated keyword arguments.

Tools and prompts are plain (async) Python functions. :func:`inspect_signature` reads a function
once, at registration, and hands its parameters to pydantic: one ``TypeAdapter`` over a TypedDict of
the parameters (unknown keys forbidden) gives the tool's ``inputSchema`` (JSON Schema 2020-12, named
types under ``$defs``) and, kept on the :class:`Signature`, validates each call's arguments in strict
JSON mode. Strict JSON mode is what makes the advertised schema the one that is checked: ``"3"`` is
not an integer, ``1.5`` is not one either, a date is an ISO string, bytes are base64. The validated
values are the Python values the annotations ask for (models, dataclasses, enums, dates, UUIDs,
``Decimal``, ``Path``...), so binding is validation. The return annotation gives the
``outputSchema`` the same way and serialises return values for ``structuredContent``.

Why pydantic rather than our own derivation: it is what the Python MCP ecosystem (the official SDK,
FastMCP) already builds tool schemas with, so ``Annotated[int, Field(ge=0, description=...)]``,
models, dataclasses, TypedDicts, ``NamedTuple``, enums, ``Literal``, unions and the standard scalar
types mean here what they mean there, constraints included, and its compiled validators cost a few
microseconds per call. What pydantic does not know about MCP stays here: which parameter takes the
context, docstring descriptions, content return types, and prompt arguments being strings.
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
from collections.abc import Callable, Collection
from typing import Any, Literal

import orjson
import pydantic
import pydantic_core
import typing_extensions
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import core_schema

__all__ = [
    "CONTENT_TYPES",
    "ArgumentError",
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


class ArgumentError(ValueError):
    """A call's arguments do not match the handler's signature; the message names each argument and rule."""


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


# --------------------------------------------------------------------------- pydantic set-up

#: One configuration for every adapter: unknown keys are refused (nested dataclasses and TypedDicts
#: inherit it; a pydantic model keeps its own), bytes travel as base64 and durations as ISO 8601.
_CONFIG = pydantic.ConfigDict(
    extra="forbid",
    val_json_bytes="base64",
    ser_json_bytes="base64",
    ser_json_timedelta="iso8601",
    json_schema_serialization_defaults_required=True,
)

_MAX_ERRORS = 5


class _SchemaGenerator(GenerateJsonSchema):
    """pydantic's 2020-12 generator, minus invented titles, plus what strict validation really checks."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False  # "Count" for a parameter named count says nothing; explicit Field(title=) stays

    def field_is_present(self, field: Any) -> bool:
        # A dataclass field with init=False cannot be passed, so it is not advertised as an input.
        if self.mode == "validation" and field.get("init") is False:
            return False
        return super().field_is_present(field)

    def field_is_required(self, field: Any, total: bool) -> bool:
        if field["type"] == "typed-dict-field":  # a NotRequired key may be missing from output too
            return bool(field.get("required", total))
        return super().field_is_required(field, total)

    def bytes_schema(self, schema: core_schema.BytesSchema) -> Any:
        json_schema = super().bytes_schema(schema)
        if json_schema.pop("format", None) in ("base64url", "binary"):
            json_schema["contentEncoding"] = "base64"  # the 2020-12 keyword; standard and URL-safe both decode
        return json_schema

    def dict_schema(self, schema: core_schema.DictSchema) -> Any:
        json_schema = super().dict_schema(schema)
        keys = schema.get("keys_schema")
        if keys is not None and keys.get("type") == "int":  # JSON keys are strings: say which ones parse
            json_schema["propertyNames"] = {"pattern": r"^-?[0-9]+$"}
        return json_schema

    def generate(self, schema: Any, mode: Any = "validation") -> Any:
        json_schema = super().generate(schema, mode=mode)
        _tidy_class_schema(json_schema)
        for definition in json_schema.get("$defs", {}).values():
            _tidy_class_schema(definition)
        return json_schema


def _tidy_class_schema(schema: dict[str, Any]) -> None:
    """Drop the class-name title; a class docstring's summary describes it, its Attributes its fields."""
    schema.pop("title", None)  # the $defs key already says it
    doc = schema.get("description")
    if not isinstance(doc, str):
        return
    summary = _summary(doc)
    if summary:
        schema["description"] = summary
    else:
        del schema["description"]
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, text in _parse_section(doc, _ATTR_SECTIONS).items():
            prop = properties.get(name)
            if isinstance(prop, dict) and "description" not in prop:
                prop["description"] = text


def _typeddict_class(name: str, fields: dict[str, Any], doc: str | None = None, module: str | None = None) -> Any:
    cls: Any = typing.cast(Any, typing_extensions.TypedDict)(name, fields)  # its name is known only at run time
    cls.__pydantic_config__ = _CONFIG
    if doc is not None:
        cls.__doc__ = doc
    if module is not None:
        cls.__module__ = module
    return cls


# pydantic accepts typing.TypedDict only from Python 3.12; on 3.11 an equivalent typing_extensions class
# stands in for it (the values validate to plain dicts either way).
_NEEDS_TYPEDDICT_COPY = sys.version_info < (3, 12)


def _is_typing_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and type(tp).__module__ == "typing" and hasattr(tp, "__required_keys__")


def _compatible(tp: Any, copies: dict[Any, Any]) -> Any:
    """``tp`` made digestible for pydantic: typing.TypedDicts copied where needed, enum Literals spelled out."""
    if _NEEDS_TYPEDDICT_COPY and _is_typing_typeddict(tp):
        return _typeddict_copy(tp, copies)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Literal:
        return _enum_literal(tp, args)
    if origin is None or not args:
        return tp
    if origin is typing.Annotated:
        inner = _compatible(args[0], copies)
        return tp if inner is args[0] else typing.Annotated[(inner, *tp.__metadata__)]
    new = tuple(a if a is Ellipsis else _compatible(a, copies) for a in args)
    if all(a is b for a, b in zip(new, args, strict=True)):
        return tp
    if origin is types.UnionType or origin is typing.Union:
        return typing.Union[new]  # noqa: UP007
    if isinstance(tp, types.GenericAlias):
        return types.GenericAlias(origin, new)
    return tp.copy_with(new)


def _enum_literal(tp: Any, values: tuple[Any, ...]) -> Any:
    """``Literal[Color.RED]``: strict JSON validation wants the value ("red"), the handler the member."""
    members = {v.value: v for v in values if isinstance(v, enum.Enum)}
    if not members:
        return tp
    plain = tuple(v.value if isinstance(v, enum.Enum) else v for v in values)

    def to_member(value: Any) -> Any:
        return members.get(value, value)

    return typing.Annotated[Literal[plain], pydantic.AfterValidator(to_member)]


def _typeddict_copy(cls: Any, copies: dict[Any, Any]) -> Any:
    if cls in copies:
        if copies[cls] is None:
            raise _Unsupported(f"the recursive TypedDict {cls.__qualname__} needs typing_extensions.TypedDict "
                               "on Python 3.11")
        return copies[cls]
    copies[cls] = None  # in progress
    hints = _type_hints(cls) or {}
    fields = {}
    for name, hint in hints.items():
        # Python 3.11 reads Required/NotRequired wrongly from string annotations: the hint itself wins.
        required = name in cls.__required_keys__
        while typing.get_origin(hint) in (typing.Required, typing.NotRequired):
            required = typing.get_origin(hint) is typing.Required
            hint = typing.get_args(hint)[0]
        hint = _compatible(hint, copies)
        fields[name] = typing.Required[hint] if required else typing.NotRequired[hint]
    copy = _typeddict_class(cls.__name__, fields, cls.__doc__, cls.__module__)
    copy.__qualname__ = cls.__qualname__
    copies[cls] = copy
    return copy


class _Unsupported(Exception):
    """Internal: an annotation cannot be used; callers add function/parameter context."""


def _adapter(name: str, fields: dict[str, Any]) -> pydantic.TypeAdapter[Any]:
    """A compiled adapter for a dict with ``fields`` (TypedDict field annotations)."""
    try:
        return pydantic.TypeAdapter(_typeddict_class(name, fields))
    except pydantic.errors.PydanticSchemaGenerationError as exc:
        # pydantic's own advice (arbitrary_types_allowed) is not for plugin authors to follow here.
        found = re.search(r"schema for (.*?)\. Set `arbitrary", str(exc))
        what = found.group(1) if found else _first_line(str(exc))
        raise _Unsupported(f"unsupported type {what}; use a standard type, a pydantic model, a dataclass "
                           "or a TypedDict") from None
    except pydantic.PydanticUserError as exc:
        raise _Unsupported(_first_line(str(exc))) from None
    except (TypeError, NameError, AttributeError) as exc:  # odd annotations pydantic cannot digest
        raise _Unsupported(f"unsupported annotation: {exc}") from None


def _json_schema(adapter: pydantic.TypeAdapter[Any], mode: Literal["validation", "serialization"]) -> dict[str, Any]:
    try:
        return adapter.json_schema(mode=mode, schema_generator=_SchemaGenerator)
    except pydantic.errors.PydanticInvalidForJsonSchema as exc:
        raise _Unsupported(f"unsupported annotation: {_first_line(str(exc))}") from None


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


# --------------------------------------------------------------------------- annotations


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


def _resolve(tp: Any, ns: dict[str, Any]) -> Any:
    if isinstance(tp, typing.ForwardRef):
        tp = tp.__forward_arg__
    if isinstance(tp, str):
        try:
            # Evaluating annotation strings in the defining namespace is what get_type_hints does.
            return eval(tp, ns)
        except Exception as exc:
            raise _Unsupported(f"cannot resolve annotation {tp!r}: {exc}") from exc
    return tp


def _strip_annotated(tp: Any) -> tuple[Any, str | None]:
    """The annotation without ``Annotated``, and the description a plain-string metadata item gives."""
    description = None
    while typing.get_origin(tp) is typing.Annotated:
        base, *meta = typing.get_args(tp)
        text = next((m for m in meta if isinstance(m, str)), None)
        if text is not None and description is None:
            description = inspect.cleandoc(text)
        tp = base
    return tp, description


def _check_annotation(tp: Any) -> None:
    """Refuse what pydantic would accept but JSON cannot carry faithfully."""
    base, _ = _strip_annotated(tp)
    if isinstance(base, typing.TypeVar):
        raise _Unsupported(f"unsupported annotation {base!r}: a type variable says nothing about the value")
    if isinstance(base, type) and issubclass(base, enum.Enum):
        for member in base:
            if _json_type(member.value) is None:
                raise _Unsupported(f"enum {base.__qualname__} value {member.value!r} is not a JSON scalar")


def _json_type(value: Any) -> str | None:
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


# --------------------------------------------------------------------------- output


_PRIMITIVE_TYPES = frozenset({str, int, float, bool, type(None)})


def to_jsonable(value: Any) -> Any:
    """Convert a Python value to plain JSON data (models, dataclasses, enums, tuples, dates, UUIDs...).

    Values with no JSON form are returned unchanged.
    """
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
    try:  # models, Decimal, Path, timedelta, IP addresses, bytes...
        return pydantic_core.to_jsonable_python(value, bytes_mode="base64", timedelta_mode="iso8601")
    except pydantic_core.PydanticSerializationError:
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


class _NoDefault:
    def __repr__(self) -> str:
        return "<no default>"


_NO_DEFAULT: Any = _NoDefault()


def _json_default(value: Any) -> Any:
    """``value`` as JSON for a schema "default", or ``_NO_DEFAULT`` if it has no JSON form."""
    if isinstance(value, float) and not math.isfinite(value):
        return _NO_DEFAULT
    try:
        converted = to_jsonable(value)
    except Exception:
        return _NO_DEFAULT
    return converted if _is_json(converted) else _NO_DEFAULT


_UNION_ORIGINS = (typing.Union, types.UnionType)
_SEQUENCE_ORIGINS = (list, cabc.Sequence, cabc.MutableSequence, cabc.Iterable, cabc.Collection)


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


_UNSTRUCTURED = (str, bytes, bytearray, memoryview, type(None))


@dataclasses.dataclass(frozen=True)
class _Output:
    schema: dict[str, Any]
    wrap: bool
    adapter: pydantic.TypeAdapter[Any]


def _output(annotation: Any, ns: dict[str, Any]) -> _Output | None:
    annotation = _unwrap_awaitable(annotation)
    if annotation is inspect.Signature.empty or _is_content(annotation):
        return None
    try:
        annotation = _resolve(annotation, ns)
        base, description = _strip_annotated(annotation)
        if base is None or (isinstance(base, type) and issubclass(base, _UNSTRUCTURED)):
            return None
        _check_annotation(annotation)
        adapter = _adapter("Output", {"result": typing.Required[_compatible(annotation, {})]})
        schema = _json_schema(adapter, "serialization")
    except _Unsupported:
        # A return type we cannot describe is still returnable as content; the host
        # decides how to render it, so this is not an error.
        return None
    defs: dict[str, Any] = schema.get("$defs", {})
    result: dict[str, Any] = schema["properties"]["result"]
    if description and "description" not in result:
        result["description"] = description
    root = _object_root(result, defs)
    wrap = root is None
    if root is None:
        root = {"type": "object", "properties": {"result": result}, "required": ["result"],
                "x-mcphost-wrapped": True}
    if defs:
        root["$defs"] = defs
    return _Output(root, wrap, adapter)


def _object_root(result: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any] | None:
    """``result`` as an object schema fit for the outputSchema root (MCP wants type object), or None."""
    ref = result.get("$ref")
    if ref is None:
        return dict(result) if result.get("type") == "object" else None
    name = ref.rsplit("/", 1)[-1]
    target = defs.get(name)
    if target is None or target.get("type") != "object":
        return None
    root = {**target, **{k: v for k, v in result.items() if k != "$ref"}}
    if ref not in orjson.dumps(defs).decode():  # only the root used it; recursive types keep it
        del defs[name]
    return root


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
    annotation: Any
    required: bool
    default: Any  # the JSON form for the schema, or _NO_DEFAULT
    description: str | None
    field_default: FieldInfo | None = None  # ``x: int = Field(...)``: fills absent arguments


@dataclasses.dataclass
class _Analysis:
    label: str
    params: list[_Param]
    context_param: str | None
    return_annotation: Any
    ns: dict[str, Any]


def _hint_target(fn: Any) -> Any:
    """The object whose annotations describe calling ``fn``."""
    fn = _doc_target(fn)
    if isinstance(fn, type):
        return fn.__init__  # type: ignore[misc]  # read for its annotations, never called
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


#: Context classes of the official SDK's MCPServer (FastMCP) and of FastMCP: a handler written for
#: them gets mcphost's Context, which answers the same calls (log levels, report_progress, elicit...).
_FOREIGN_CONTEXT_PACKAGES = frozenset({"mcp", "fastmcp"})


def _is_foreign_context(tp: Any) -> bool:
    return (isinstance(tp, type) and tp.__name__ == "Context"
            and (tp.__module__ or "").split(".", 1)[0] in _FOREIGN_CONTEXT_PACKAGES)


def _is_context(annotation: Any, context_type: type | None) -> bool:
    if context_type is None or annotation is inspect.Parameter.empty:
        return False
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        return _names_class(annotation, context_type.__name__)
    if annotation is context_type or _is_foreign_context(annotation):
        return True
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is context_type or _is_foreign_context(origin):  # Context[Something]
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
    params: list[_Param] = []
    context_param: str | None = None
    copies: dict[Any, Any] = {}
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
            annotation = Any if annotation is param.empty else _resolve(annotation, ns)
            if _is_foreign_context(typing.get_origin(annotation) or _strip_annotated(annotation)[0]):
                raise _Unsupported("a context parameter, but this handler kind takes no context")
            _check_annotation(annotation)
            annotation = _compatible(annotation, copies)
        except _Unsupported as exc:
            raise SignatureError(f"{label}: parameter {name!r}: {exc}") from None
        _, text_description = _strip_annotated(annotation)
        default = param.default
        field_default = None
        if isinstance(default, FieldInfo):  # FastMCP style: x: int = Field(3, ge=0)
            field_default = default
            annotation = typing.Annotated[annotation, default]
            default = param.empty if default.is_required() else default.get_default(call_default_factory=True)
        has_default = default is not param.empty
        params.append(_Param(
            name=name,
            annotation=annotation,
            required=not has_default,
            default=_json_default(default) if has_default else _NO_DEFAULT,
            description=text_description or param_docs.get(name),
            field_default=field_default if has_default else None,
        ))
    return_annotation = hints.get("return", sig.return_annotation)
    return _Analysis(label, params, context_param, return_annotation, ns)


# --------------------------------------------------------------------------- public API


@dataclasses.dataclass(frozen=True)
class Signature:
    """What a handler accepts and returns, in JSON Schema terms, with its compiled validators.

    :meth:`bind` checks a call's arguments against ``input_schema`` (strict JSON mode) and returns the
    handler's keyword arguments; :meth:`convert` only converts, for tools whose explicit input schema
    was checked elsewhere.
    """

    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    wrap_output: bool
    context_param: str | None
    _adapter: pydantic.TypeAdapter[Any] | None = dataclasses.field(default=None, repr=False, compare=False)
    _output_adapter: pydantic.TypeAdapter[Any] | None = dataclasses.field(default=None, repr=False, compare=False)
    _fills: tuple[tuple[str, FieldInfo], ...] = dataclasses.field(default=(), repr=False,
                                                                                 compare=False)

    def bind(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validate JSON ``arguments`` exactly as ``input_schema`` says and return the keyword arguments.

        Always returns a new dict (callers may add the context argument to it). Absent optional
        arguments stay absent so the Python defaults apply. Raises :class:`ArgumentError` (a
        ValueError) naming each offending argument and the rule it breaks.
        """
        return self._validate(arguments, strict=True)

    def convert(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Like :meth:`bind` but lenient (pydantic's lax mode): for arguments an explicit schema checked."""
        return self._validate(arguments, strict=False)

    def _validate(self, arguments: dict[str, Any], strict: bool) -> dict[str, Any]:
        if self._adapter is None:
            return dict(arguments)
        try:
            data = orjson.dumps(arguments)
        except (orjson.JSONEncodeError, TypeError) as exc:
            raise ArgumentError(f"the arguments are not JSON data ({exc})") from None
        try:
            kwargs: dict[str, Any] = self._adapter.validate_json(data, strict=strict)
        except pydantic.ValidationError as exc:
            raise ArgumentError(_describe(exc)) from None
        for name, info in self._fills:
            if name not in kwargs:
                kwargs[name] = info.get_default(call_default_factory=True)
        return kwargs

    def dump_output(self, value: Any) -> Any:
        """The structured (JSON) form of a handler's return value, wrapped if the schema says so."""
        data: Any = _NO_DEFAULT
        if self._output_adapter is not None:
            try:
                data = self._output_adapter.dump_python({"result": value}, mode="json", warnings=False)["result"]
            except (pydantic_core.PydanticSerializationError, ValueError, TypeError):
                data = _NO_DEFAULT
        if data is _NO_DEFAULT:
            data = to_jsonable(value)
        return {"result": data} if self.wrap_output else data


def _describe(exc: pydantic.ValidationError) -> str:
    """One line per error: the argument (and where inside it), pydantic's statement of the rule."""
    parts = []
    errors = exc.errors(include_url=False, include_input=False)
    for error in errors[:_MAX_ERRORS]:
        loc = [str(part) for part in error["loc"]]
        if not loc:
            parts.append(error["msg"])
            continue
        where = f"argument {loc[0][:100]!r}"
        if len(loc) > 1:
            where += f" at {'/'.join(loc[1:])[:200]}"
        if error["type"] == "missing":
            parts.append(f"{where} is required")
        elif error["type"] == "extra_forbidden" and len(loc) == 1:
            parts.append(f"{where} is not a parameter of this tool")
        else:
            parts.append(f"{where}: {error['msg']}")
    if len(errors) > _MAX_ERRORS:
        parts.append(f"and {len(errors) - _MAX_ERRORS} more")
    return "; ".join(parts)


def inspect_signature(
    fn: Callable[..., Any], *, context_type: type | None = None, skip: Collection[str] = ()
) -> Signature:
    """Analyse ``fn`` once: input/output schemas, the context parameter and the compiled validators.

    Raises SignatureError for parameters that cannot be expressed in JSON Schema.
    """
    analysis = _analyse(fn, context_type, skip)
    fields = {
        p.name: typing.Required[p.annotation] if p.required else typing.NotRequired[p.annotation]
        for p in analysis.params
    }
    try:
        adapter = _adapter(f"{analysis.label[:-2].rsplit('.', 1)[-1]}Arguments", fields)
        input_schema = _json_schema(adapter, "validation")
    except _Unsupported as exc:
        raise SignatureError(f"{analysis.label}: {_which_parameter(analysis, exc)}") from None
    properties: dict[str, Any] = input_schema.setdefault("properties", {})
    for p in analysis.params:
        prop = properties[p.name]
        if p.description and "description" not in prop:
            prop["description"] = p.description
        if p.default is not _NO_DEFAULT and "default" not in prop:
            prop["default"] = p.default
    ordered: dict[str, Any] = {"type": "object", "properties": properties}
    if input_schema.get("required"):
        ordered["required"] = input_schema["required"]
    ordered["additionalProperties"] = False
    if input_schema.get("$defs"):
        ordered["$defs"] = input_schema["$defs"]
    output = _output(analysis.return_annotation, analysis.ns)
    fills = tuple((p.name, p.field_default) for p in analysis.params if p.field_default is not None)
    return Signature(
        ordered,
        output.schema if output else None,
        output.wrap if output else False,
        analysis.context_param,
        adapter,
        output.adapter if output else None,
        fills,
    )


def _which_parameter(analysis: _Analysis, exc: _Unsupported) -> str:
    """Name the parameter whose annotation pydantic refused (by trying each alone)."""
    for p in analysis.params:
        try:
            _json_schema(_adapter("Probe", {"x": p.annotation}), "validation")
        except _Unsupported as alone:
            return f"parameter {p.name!r}: {alone}"
    return str(exc)


def _is_str_like(tp: Any) -> bool:
    tp, _ = _strip_annotated(tp)
    if tp is Any or tp is str or tp is inspect.Parameter.empty:
        return True
    if isinstance(tp, typing.NewType):
        return _is_str_like(tp.__supertype__)
    origin = typing.get_origin(tp)
    if origin is Literal:
        values = [v.value if isinstance(v, enum.Enum) else v for v in typing.get_args(tp)]
        return bool(values) and all(isinstance(v, str) for v in values)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [m.value for m in tp]
        return bool(values) and all(isinstance(v, str) for v in values)
    if origin in _UNION_ORIGINS:
        real = [a for a in typing.get_args(tp) if a is not type(None)]
        return bool(real) and all(_is_str_like(a) for a in real)
    return False


def prompt_arguments(fn: Callable[..., Any], *, context_type: type | None = None) -> list[dict[str, Any]]:
    """MCP ``PromptArgument`` dicts for ``fn``; every parameter must accept a string.

    Raises SignatureError for parameters that are not str-compatible (str,
    Optional[str], Literal of strings, an Enum with string values).
    """
    analysis = _analyse(fn, context_type, ())
    arguments: list[dict[str, Any]] = []
    for p in analysis.params:
        if not _is_str_like(p.annotation):
            raise SignatureError(
                f"{analysis.label}: parameter {p.name!r}: prompt arguments are strings; annotate it as "
                "str, Optional[str], a Literal of strings or a str-valued Enum"
            )
        description = p.description
        if description is None and p.field_default is not None:
            description = p.field_default.description
        arg: dict[str, Any] = {"name": p.name}
        if description:
            arg["description"] = description
        arg["required"] = p.required
        arguments.append(arg)
    return arguments
