"""Tests for mcphost.signature: schema derivation, argument binding and output dumping."""

import collections.abc as cabc
import dataclasses
import datetime as dt
import enum
import functools
import sys
import types
import typing
import uuid
from typing import Annotated, Any, Literal, NewType, NotRequired, Optional, TypedDict, Union

import pytest
import typing_extensions
from jsonschema import Draft202012Validator
from pydantic import Field

from mcphost.signature import (
    CONTENT_TYPES,
    Signature,
    SignatureError,
    docstring_summary,
    inspect_signature,
    prompt_arguments,
    register_content_type,
    to_jsonable,
)

# --------------------------------------------------------------------------- sample types


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mixed(enum.Enum):
    """Values of several JSON types."""

    ONE = 1
    TWO = "two"


class Shade(enum.StrEnum):
    LIGHT = "light"
    DARK = "dark"


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


@dataclasses.dataclass
class Tree:
    """A labelled tree.

    Attributes:
        label: the node label
    """

    label: str
    children: list["Tree"] = dataclasses.field(default_factory=list)
    color: Color = Color.RED


@dataclasses.dataclass
class Item:
    name: str = dataclasses.field(metadata={"description": "item name"})
    when: dt.datetime | None = None
    pos: tuple[int, int] = (0, 0)
    cached: int = dataclasses.field(default=0, init=False)


@dataclasses.dataclass(frozen=True)
class Tag:
    key: str


class Movie(TypedDict):
    """A movie."""

    title: str
    year: NotRequired[int]
    color: NotRequired[Color]


class Partial(TypedDict, total=False):
    a: int
    b: Annotated[str, Field(description="bee")]


# pydantic takes typing.TypedDict from Python 3.12 on; mcphost stands in for non-recursive ones on 3.11.
class LinkedTD(typing_extensions.TypedDict):
    value: int
    next: Optional["LinkedTD"]


class Ctx:
    """Stand-in for the host's context class."""


T = typing.TypeVar("T")


class Box(typing.Generic[T]):
    pass


class FancyContent:
    pass


class Widget:
    pass


UserId = NewType("UserId", str)


# --------------------------------------------------------------------------- helpers


def check(schema: dict[str, Any]) -> Draft202012Validator:
    """Assert ``schema`` is valid 2020-12 and return a (format-checking) validator for it."""
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def sig_of(fn: Any, **kwargs: Any) -> Signature:
    sig = inspect_signature(fn, **kwargs)
    check(sig.input_schema)
    if sig.output_schema is not None:
        check(sig.output_schema)
    return sig


def param_schema(annotation: Any) -> dict[str, Any]:
    """Input property schema (with $defs kept at the root) for a single parameter ``x``."""

    def fn(x):  # type: ignore[no-untyped-def]
        pass

    fn.__annotations__ = {"x": annotation}
    return sig_of(fn).input_schema


def prop(annotation: Any) -> dict[str, Any]:
    return param_schema(annotation)["properties"]["x"]


def roundtrip(sig: Signature, arguments: dict[str, Any]) -> dict[str, Any]:
    """Validate, bind, dump back to JSON and validate again; return the bound kwargs."""
    validator = check(sig.input_schema)
    validator.validate(arguments)
    bound = sig.bind(arguments)
    validator.validate(to_jsonable(bound))
    return bound


# --------------------------------------------------------------------------- type mapping


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (type(None), {"type": "null"}),
        (Any, {}),
        (object, {}),
        (UserId, {"type": "string"}),
        (dt.datetime, {"type": "string", "format": "date-time"}),
        (dt.date, {"type": "string", "format": "date"}),
        (dt.time, {"type": "string", "format": "time"}),
        (uuid.UUID, {"type": "string", "format": "uuid"}),
        (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),  # noqa: UP045
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (Union[int, str], {"anyOf": [{"type": "integer"}, {"type": "string"}]}),  # noqa: UP007
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Literal[True], {"type": "boolean", "const": True}),
        (Literal["a", 1], {"enum": ["a", 1]}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (typing.List[int], {"type": "array", "items": {"type": "integer"}}),  # noqa: UP006
        (cabc.Sequence[str], {"type": "array", "items": {"type": "string"}}),
        (typing.Sequence[str], {"type": "array", "items": {"type": "string"}}),
        (list, {"type": "array", "items": {}}),
        (typing.List, {"type": "array", "items": {}}),  # noqa: UP006
        (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        (frozenset[int], {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
        (set, {"type": "array", "items": {}, "uniqueItems": True}),
        (
            tuple[int, str],
            {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
             "minItems": 2, "maxItems": 2},
        ),
        (tuple[float, ...], {"type": "array", "items": {"type": "number"}}),
        (tuple, {"type": "array", "items": {}}),
        (typing.Tuple, {"type": "array", "items": {}}),  # noqa: UP006
        (tuple[()], {"type": "array", "minItems": 0, "maxItems": 0}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (cabc.Mapping[str, bool], {"type": "object", "additionalProperties": {"type": "boolean"}}),
        (dict[str, Any], {"type": "object", "additionalProperties": True}),
        (dict, {"type": "object", "additionalProperties": True}),
        (dict[int, str], {"type": "object", "additionalProperties": {"type": "string"},
                          "propertyNames": {"pattern": "^-?[0-9]+$"}}),
        (Annotated[int, "a count"], {"type": "integer", "description": "a count"}),
        (Annotated[int, 42], {"type": "integer"}),
    ],
)
def test_type_mapping(annotation: Any, expected: dict[str, Any]) -> None:
    assert prop(annotation) == expected


def test_missing_annotation_is_any() -> None:
    def fn(x, y=3):  # type: ignore[no-untyped-def]
        pass

    schema = sig_of(fn).input_schema
    assert schema["properties"] == {"x": {}, "y": {"default": 3}}
    assert schema["required"] == ["x"]


def test_enum_goes_to_defs_with_uniform_type() -> None:
    schema = param_schema(Color)
    assert schema["properties"]["x"] == {"$ref": "#/$defs/Color"}
    assert schema["$defs"]["Color"] == {"type": "string", "enum": ["red", "green"]}
    assert param_schema(Level)["$defs"]["Level"] == {"type": "integer", "enum": [1, 2]}
    mixed = param_schema(Mixed)["$defs"]["Mixed"]
    assert mixed == {"enum": [1, "two"], "description": "Values of several JSON types."}


def test_literal_of_enum_members() -> None:
    def fn(c: Literal[Color.RED]) -> None:
        pass

    sig = sig_of(fn)
    assert sig.input_schema["properties"]["c"] == {"type": "string", "const": "red"}
    assert roundtrip(sig, {"c": "red"}) == {"c": Color.RED}


def test_typeddict_schema() -> None:
    schema = param_schema(Movie)
    assert schema["properties"]["x"] == {"$ref": "#/$defs/Movie"}
    assert schema["$defs"]["Movie"] == {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "year": {"type": "integer"},
            "color": {"$ref": "#/$defs/Color"},
        },
        "required": ["title"],
        "additionalProperties": False,
        "description": "A movie.",
    }
    partial = param_schema(Partial)["$defs"]["Partial"]
    assert "required" not in partial
    assert partial["properties"]["b"] == {"type": "string", "description": "bee"}


def test_recursive_typeddict() -> None:
    schema = param_schema(LinkedTD)
    linked = schema["$defs"]["LinkedTD"]
    assert linked["properties"]["next"] == {"anyOf": [{"$ref": "#/$defs/LinkedTD"}, {"type": "null"}]}
    check(schema).validate({"x": {"value": 1, "next": {"value": 2, "next": None}}})


def test_dataclass_schema() -> None:
    schema = param_schema(Item)
    assert schema["$defs"]["Item"] == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "item name"},
            "when": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}], "default": None},
            "pos": {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "integer"}],
                "minItems": 2,
                "maxItems": 2,
                "default": [0, 0],
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    }


def test_recursive_dataclass_schema_terminates() -> None:
    schema = param_schema(Tree)
    tree = schema["$defs"]["Tree"]
    assert tree["description"] == "A labelled tree."
    assert tree["properties"]["label"] == {"type": "string", "description": "the node label"}
    assert tree["properties"]["children"] == {"type": "array", "items": {"$ref": "#/$defs/Tree"}}
    assert tree["properties"]["color"] == {"$ref": "#/$defs/Color", "default": "red"}
    assert tree["required"] == ["label"]
    validator = check(schema)
    validator.validate({"x": {"label": "a", "children": [{"label": "b", "children": []}]}})
    assert not validator.is_valid({"x": {"label": "a", "children": [{"label": 1}]}})
    assert not validator.is_valid({"x": {"label": "a", "extra": 1}})


def _other_point() -> type:
    @dataclasses.dataclass
    class Point:  # same __name__ as the module-level one
        z: str

    return Point


def test_defs_names_do_not_collide() -> None:
    other = _other_point()

    def fn(a: Point, b: other) -> None:  # type: ignore[valid-type]
        pass

    schema = sig_of(fn).input_schema
    a, b = schema["properties"]["a"]["$ref"], schema["properties"]["b"]["$ref"]
    assert a != b
    assert list(schema["$defs"][b.rsplit("/", 1)[-1]]["properties"]) == ["z"]
    assert list(schema["$defs"][a.rsplit("/", 1)[-1]]["properties"]) == ["x", "y"]


def test_shared_named_type_defined_once() -> None:
    def fn(a: Color, b: list[Color], c: dict[str, Color]) -> None:
        pass

    schema = sig_of(fn).input_schema
    assert list(schema["$defs"]) == ["Color"]
    assert schema["properties"]["b"]["items"] == {"$ref": "#/$defs/Color"}


# --------------------------------------------------------------------------- root, required, defaults


def test_root_shape_and_required() -> None:
    def fn(
        a: int,
        b: str = "x",
        c: Optional[int] = None,  # noqa: UP045
        d: int | None = None,
        e: float | None = 1.5,
    ) -> None:
        pass

    schema = sig_of(fn).input_schema
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["a"]
    assert schema["properties"]["b"] == {"type": "string", "default": "x"}
    assert schema["properties"]["c"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}
    assert schema["properties"]["e"]["default"] == 1.5
    assert "$defs" not in schema


def test_required_omitted_when_empty() -> None:
    def fn(a: int = 1) -> None:
        pass

    assert "required" not in sig_of(fn).input_schema

    def nothing() -> None:
        pass

    assert sig_of(nothing).input_schema == {"type": "object", "properties": {}, "additionalProperties": False}


def test_optional_without_default_is_required() -> None:
    def fn(a: int | None) -> None:
        pass

    assert sig_of(fn).input_schema["required"] == ["a"]


def test_defaults_are_json_values() -> None:
    sentinel = object()

    def fn(
        c: Color = Color.GREEN,
        t: tuple[int, int] = (1, 2),
        when: dt.date = dt.date(2024, 5, 1),
        p: Point = Point(1, 2),  # noqa: B008
        odd: Any = sentinel,
        nan: float = float("nan"),
    ) -> None:
        pass

    props = sig_of(fn).input_schema["properties"]
    assert props["c"]["default"] == "green"
    assert props["t"]["default"] == [1, 2]
    assert props["when"]["default"] == "2024-05-01"
    assert props["p"]["default"] == {"x": 1, "y": 2}
    assert "default" not in props["odd"]
    assert "default" not in props["nan"]


# --------------------------------------------------------------------------- descriptions


def test_annotated_and_docstring_descriptions() -> None:
    def fn(
        a: Annotated[int, "from annotated"],
        b: int,
        c: str,
        d: Annotated[bool, "annotated wins"] = False,
    ) -> None:
        """Summary line.

        Longer explanation
        over two lines.

        Args:
            a: ignored, Annotated wins
            b (int): the b value,
                continued here.
            c:
                described on the next line
            d: docstring loses

        Returns:
            nothing.
        """

    sig = sig_of(fn)
    props = sig.input_schema["properties"]
    assert props["a"]["description"] == "from annotated"
    assert props["b"]["description"] == "the b value, continued here."
    assert props["c"]["description"] == "described on the next line"
    assert props["d"]["description"] == "annotated wins"
    assert docstring_summary(fn) == "Summary line.\n\nLonger explanation\nover two lines."


def test_annotated_description_is_cleaned() -> None:
    text = """
        Multi-line
        description.
    """
    assert prop(Annotated[str, text])["description"] == "Multi-line\ndescription."


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (None, None),
        ("", None),
        ("Just one line.", "Just one line."),
        ("Title.\n\n    Raises:\n        ValueError: bad", "Title."),
        ("Title.\n\n    Returns:\n        x", "Title."),
        ("Args:\n    x: y", None),
        ("\n    Indented first.\n\n    Second para.\n    ", "Indented first.\n\nSecond para."),
        ("Keeps Examples:\n    here", "Keeps Examples:\nhere"),
    ],
)
def test_docstring_summary(doc: str | None, expected: str | None) -> None:
    def fn() -> None:
        pass

    fn.__doc__ = doc
    assert docstring_summary(fn) == expected


def test_docstring_summary_of_partial() -> None:
    def fn(a: int) -> None:
        """Real doc."""

    assert docstring_summary(functools.partial(fn, 1)) == "Real doc."


# --------------------------------------------------------------------------- context, skip, callables


def test_context_param_excluded() -> None:
    def fn(query: str, ctx: Ctx) -> None:
        pass

    sig = sig_of(fn, context_type=Ctx)
    assert sig.context_param == "ctx"
    assert list(sig.input_schema["properties"]) == ["query"]
    assert sig.input_schema["required"] == ["query"]


@pytest.mark.parametrize(
    "annotation",
    [Ctx, Optional[Ctx], Ctx | None, Annotated[Ctx, "ctx"], "Ctx", "Optional[Ctx]", "Ctx | None", "mod.Ctx"],  # noqa: UP045
)
def test_context_param_forms(annotation: Any) -> None:
    def fn(a: int, c=None):  # type: ignore[no-untyped-def]
        pass

    fn.__annotations__ = {"a": int, "c": annotation}
    sig = sig_of(fn, context_type=Ctx)
    assert sig.context_param == "c"
    assert list(sig.input_schema["properties"]) == ["a"]


def test_unresolvable_context_annotation_is_tolerated() -> None:
    # As with a context class imported only under TYPE_CHECKING: get_type_hints fails.
    def fn(a: int, ctx: "UnimportedCtx") -> int:  # type: ignore[name-defined] # noqa: F821
        return a

    fn.__annotations__["ctx"] = "Ctx"
    fn.__annotations__["other"] = "Nope"  # makes get_type_hints raise NameError
    sig = sig_of(fn, context_type=Ctx)
    assert sig.context_param == "ctx"
    assert sig.input_schema["properties"] == {"a": {"type": "integer"}}
    assert sig.output_schema is not None


def test_without_context_type_a_context_annotation_is_an_error() -> None:
    def fn(ctx: Ctx) -> None:
        pass

    with pytest.raises(SignatureError, match="ctx"):
        inspect_signature(fn)


def test_two_context_params_rejected() -> None:
    def fn(a: Ctx, b: Ctx) -> None:
        pass

    with pytest.raises(SignatureError, match="both take the context"):
        inspect_signature(fn, context_type=Ctx)


def test_skip() -> None:
    def fn(a: int, session: Widget, b: str = "") -> None:
        pass

    sig = sig_of(fn, skip={"session"})
    assert list(sig.input_schema["properties"]) == ["a", "b"]


class Service:
    def method(self, a: int) -> int:
        """Add one."""
        return a + 1

    @classmethod
    def build(cls, name: str) -> str:
        return name


class CallableTool:
    def __call__(self, a: Color) -> Point:
        return Point(1)


def test_bound_methods_and_callables() -> None:
    sig = sig_of(Service().method)
    assert list(sig.input_schema["properties"]) == ["a"]
    assert sig.output_schema is not None and sig.wrap_output
    assert docstring_summary(Service().method) == "Add one."
    assert list(sig_of(Service.build).input_schema["properties"]) == ["name"]

    sig = sig_of(CallableTool())
    assert sig.input_schema["properties"] == {"a": {"$ref": "#/$defs/Color"}}
    assert sig.bind({"a": "red"}) == {"a": Color.RED}
    assert sig.wrap_output is False


def test_partial() -> None:
    def fn(a: int, b: Color) -> None:
        pass

    sig = sig_of(functools.partial(fn, 1))
    assert list(sig.input_schema["properties"]) == ["b"]
    assert sig.bind({"b": "green"}) == {"b": Color.GREEN}


def test_future_annotations_module() -> None:
    source = '''
from __future__ import annotations
import dataclasses
import datetime as dt

@dataclasses.dataclass
class Node:
    name: str
    next: Node | None = None
    at: dt.date | None = None

def handler(node: Node, when: dt.datetime, n: int = 1) -> list[Node]:
    return [node]
'''
    module = types.ModuleType("sigtest_future_mod")
    sys.modules[module.__name__] = module
    try:
        exec(compile(source, "<sigtest>", "exec"), module.__dict__)
        sig = sig_of(module.handler)
        assert sig.input_schema["properties"]["when"] == {"type": "string", "format": "date-time"}
        assert sig.input_schema["$defs"]["Node"]["properties"]["next"] == {
            "anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}],
            "default": None,
        }
        bound = roundtrip(sig, {"node": {"name": "a", "next": {"name": "b", "at": "2024-02-03"}},
                                "when": "2024-02-03T04:05:06"})
        assert bound["node"].next.at == dt.date(2024, 2, 3)
        assert isinstance(bound["node"], module.Node)
        assert sig.wrap_output is True
        assert sig.output_schema["properties"]["result"]["items"] == {"$ref": "#/$defs/Node"}
    finally:
        del sys.modules[module.__name__]


# --------------------------------------------------------------------------- errors


def _fn_with(annotation: Any) -> Any:
    def handler(x):  # type: ignore[no-untyped-def]
        pass

    handler.__annotations__ = {"x": annotation}
    return handler


@pytest.mark.parametrize(
    ("annotation", "fragment"),
    [
        (bytearray, "unsupported type <class 'bytearray'>"),
        (Widget, "unsupported type .*Widget"),
        (list[Widget], "Widget"),
        (typing.Callable[[int], int], "unsupported"),
        (T, "unsupported"),
        (Box[int], "unsupported"),
        ("NoSuchName", "cannot resolve"),
    ],
)
def test_unsupported_annotations(annotation: Any, fragment: str) -> None:
    with pytest.raises(SignatureError, match=fragment) as info:
        inspect_signature(_fn_with(annotation))
    message = str(info.value)
    assert "handler" in message and "'x'" in message
    assert "arbitrary_types_allowed" not in message  # pydantic's advice is not for plugin authors


def test_nested_field_error_names_the_parameter_and_type() -> None:
    @dataclasses.dataclass
    class Blob:
        data: Widget

    def handler(ok: int, x: list[Blob]) -> None:
        pass

    with pytest.raises(SignatureError, match=r"parameter 'x': unsupported type .*Widget"):
        inspect_signature(handler)


def test_enum_with_non_json_values_rejected() -> None:
    class Bad(enum.Enum):
        A = (1, 2)

    with pytest.raises(SignatureError, match="not a JSON scalar"):
        inspect_signature(_fn_with(Bad))


def test_generic_dataclass_parametrized() -> None:
    @dataclasses.dataclass
    class Holder(typing.Generic[T]):
        value: T

    sig = inspect_signature(_fn_with(Holder[int]))
    assert sig.bind({"x": {"value": 3}}) == {"x": Holder(3)}
    with pytest.raises(ValueError, match="argument 'x' at value: Input should be a valid integer"):
        sig.bind({"x": {"value": "3"}})


def test_var_args_and_positional_only_rejected() -> None:
    def star(*args: int) -> None:
        pass

    def double_star(**kwargs: int) -> None:
        pass

    def pos_only(a: int, /) -> None:
        pass

    with pytest.raises(SignatureError, match=r"star\(\): parameter \*args"):
        inspect_signature(star)
    with pytest.raises(SignatureError, match=r"\*\*kwargs"):
        inspect_signature(double_star)
    with pytest.raises(SignatureError, match="positional-only"):
        inspect_signature(pos_only)


def test_signature_error_is_type_error() -> None:
    assert issubclass(SignatureError, TypeError)


# --------------------------------------------------------------------------- bind


def test_primitive_bind_is_a_cheap_copy() -> None:
    def fn(a: int, b: str, c: list[str], d: dict[str, float] | None = None, e: Any = None) -> None:
        pass

    sig = sig_of(fn)
    args = {"a": 1, "b": "x", "c": ["y"]}
    bound = sig.bind(args)
    assert bound == args and bound is not args


def test_bind_leaves_missing_optionals_absent() -> None:
    def fn(a: Color, b: Color = Color.RED, c: Point | None = None) -> None:
        pass

    sig = sig_of(fn)
    assert sig.bind({"a": "green"}) == {"a": Color.GREEN}
    assert sig.bind({"a": "red", "c": None}) == {"a": Color.RED, "c": None}
    assert sig.bind({"a": "red", "c": {"x": 3}}) == {"a": Color.RED, "c": Point(3)}


def test_bind_conversions_roundtrip() -> None:
    def fn(
        points: list[Point],
        tree: Tree,
        level: Level,
        shade: Shade,
        pair: tuple[Color, int],
        many: tuple[dt.date, ...],
        tags: frozenset[Tag],
        names: set[str],
        at: dt.datetime,
        clock: dt.time,
        ident: uuid.UUID,
        movie: Movie,
        by_name: dict[str, Level],
    ) -> None:
        pass

    sig = sig_of(fn)
    uid = uuid.uuid4()
    bound = roundtrip(sig, {
        "points": [{"x": 1, "y": 2}, {"x": 3}],
        "tree": {"label": "root", "children": [{"label": "leaf", "color": "green"}]},
        "level": 2,
        "shade": "dark",
        "pair": ["red", 5],
        "many": ["2024-01-01", "2024-12-31"],
        "tags": [{"key": "a"}, {"key": "b"}],
        "names": ["x", "y"],
        "at": "2024-03-04T05:06:07+02:00",
        "clock": "12:30:00",
        "ident": str(uid),
        "movie": {"title": "M", "color": "green"},
        "by_name": {"a": 1},
    })
    assert bound["points"] == [Point(1, 2), Point(3, 0)]
    assert bound["tree"] == Tree("root", [Tree("leaf", [], Color.GREEN)], Color.RED)
    assert bound["level"] is Level.HIGH
    assert bound["shade"] is Shade.DARK
    assert bound["pair"] == (Color.RED, 5)
    assert bound["many"] == (dt.date(2024, 1, 1), dt.date(2024, 12, 31))
    assert bound["tags"] == frozenset({Tag("a"), Tag("b")})
    assert bound["names"] == {"x", "y"}
    assert bound["at"] == dt.datetime(2024, 3, 4, 5, 6, 7, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert bound["clock"] == dt.time(12, 30)
    assert bound["ident"] == uid
    assert bound["movie"] == {"title": "M", "color": Color.GREEN}
    assert bound["by_name"] == {"a": Level.LOW}


def test_bind_dataclass_with_init_false_field() -> None:
    def fn(item: Item) -> None:
        pass

    sig = sig_of(fn)
    check(sig.input_schema).validate({"item": {"name": "n", "when": "2024-01-01T00:00:00Z", "pos": [3, 4]}})
    item = sig.bind({"item": {"name": "n", "when": "2024-01-01T00:00:00Z", "pos": [3, 4]}})["item"]
    assert item == Item("n", dt.datetime(2024, 1, 1, tzinfo=dt.UTC), (3, 4))
    assert item.cached == 0
    assert not check(sig.input_schema).is_valid({"item": {"name": "n", "cached": 1}})


def test_bind_does_not_mutate_input() -> None:
    def fn(p: Point, movie: Movie) -> None:
        pass

    args = {"p": {"x": 1}, "movie": {"title": "t", "color": "red"}}
    sig_of(fn).bind(args)
    assert args == {"p": {"x": 1}, "movie": {"title": "t", "color": "red"}}


def test_bind_mixed_union_is_pydantic_smart_mode() -> None:
    # pydantic's smart mode: a JSON string that str takes as it is stays a str even when an enum or a
    # date would also take it; order decides only among equally good matches (as in FastMCP).
    def fn(v: int | Color | dt.date | Point | str, w: Color | dt.date) -> None:
        pass

    sig = sig_of(fn)
    assert sig.bind({"v": 3, "w": "red"}) == {"v": 3, "w": Color.RED}
    assert sig.bind({"v": "red", "w": "2024-01-01"}) == {"v": "red", "w": dt.date(2024, 1, 1)}
    assert sig.bind({"v": {"x": 1}, "w": "red"}) == {"v": Point(1), "w": Color.RED}
    assert sig.bind({"v": "not a date", "w": "red"}) == {"v": "not a date", "w": Color.RED}
    with pytest.raises(ValueError, match="argument 'w'"):
        sig.bind({"v": 1, "w": "not a date"})


def test_bind_error_names_argument() -> None:
    def fn(when: dt.datetime) -> None:
        pass

    with pytest.raises(ValueError, match="argument 'when'"):
        sig_of(fn).bind({"when": "yesterday"})


def test_schema_rejects_what_bind_cannot_convert() -> None:
    def fn(pair: tuple[int, str], tags: set[str], color: Color, p: Point) -> None:
        pass

    validator = check(sig_of(fn).input_schema)
    good = {"pair": [1, "a"], "tags": ["x"], "color": "red", "p": {"x": 1}}
    assert validator.is_valid(good)
    for bad in (
        {**good, "pair": [1, "a", 2]},
        {**good, "pair": [1]},
        {**good, "tags": ["x", "x"]},
        {**good, "color": "blue"},
        {**good, "p": {"x": 1, "z": 2}},
        {**good, "p": {"y": 1}},
        {**good, "extra": 1},
    ):
        assert not validator.is_valid(bad), bad


# --------------------------------------------------------------------------- output schema


def _returns(annotation: Any) -> Signature:
    def fn():  # type: ignore[no-untyped-def]
        pass

    if annotation is not inspect_empty:
        fn.__annotations__ = {"return": annotation}
    return sig_of(fn)


inspect_empty = object()


class ToolResultish:
    pass


class CallToolResult:
    pass


@pytest.mark.parametrize(
    "annotation",
    [inspect_empty, None, str, FancyContent, CallToolResult, list[FancyContent],
     list[FancyContent | CallToolResult], FancyContent | None, "list[ImageContent]", bytes, Widget],
)
def test_unstructured_returns(annotation: Any) -> None:
    sig = _returns(annotation)
    assert sig.output_schema is None and sig.wrap_output is False


def test_registered_content_type() -> None:
    class Picture:
        pass

    class Photo(Picture):
        pass

    assert register_content_type(Picture) is Picture
    try:
        assert _returns(Photo).output_schema is None
        assert _returns(list[Picture]).output_schema is None
    finally:
        CONTENT_TYPES.remove(Picture)
    assert _returns(list[Picture]).output_schema is None  # unsupported class: still no schema


def test_object_outputs_are_not_wrapped() -> None:
    sig = _returns(Movie)
    assert sig.wrap_output is False
    assert sig.output_schema == {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "year": {"type": "integer"},
            "color": {"$ref": "#/$defs/Color"},
        },
        "required": ["title"],
        "additionalProperties": False,
        "description": "A movie.",
        "$defs": {"Color": {"type": "string", "enum": ["red", "green"]}},
    }
    expected = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert _returns(dict[str, int]).output_schema == expected
    assert _returns(dict).output_schema == {"type": "object", "additionalProperties": True}
    assert _returns(dict).wrap_output is False


def test_dataclass_output_requires_every_field() -> None:
    sig = _returns(Item)
    assert sig.wrap_output is False
    schema = sig.output_schema
    assert schema is not None
    assert schema["required"] == ["name", "when", "pos", "cached"]
    assert "$defs" not in schema
    item = Item("n", dt.datetime(2024, 1, 1, tzinfo=dt.UTC))
    dumped = sig.dump_output(item)
    assert dumped == {"name": "n", "when": "2024-01-01T00:00:00Z", "pos": [0, 0], "cached": 0}
    check(schema).validate(dumped)


def test_recursive_output_root_keeps_defs() -> None:
    sig = _returns(Tree)
    schema = sig.output_schema
    assert schema is not None and schema["type"] == "object"
    assert "Tree" in schema["$defs"]
    tree = Tree("a", [Tree("b", color=Color.GREEN)])
    dumped = sig.dump_output(tree)
    check(schema).validate(dumped)
    assert dumped == {"label": "a", "color": "red",
                      "children": [{"label": "b", "children": [], "color": "green"}]}


@pytest.mark.parametrize(
    ("annotation", "result_schema", "value", "dumped"),
    [
        (int, {"type": "integer"}, 3, 3),
        (float, {"type": "number"}, 1.5, 1.5),
        (bool, {"type": "boolean"}, True, True),
        (list[int], {"type": "array", "items": {"type": "integer"}}, (1, 2), [1, 2]),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}, "a", "a"),
        (Color, {"$ref": "#/$defs/Color"}, Color.GREEN, "green"),
        (str | None, {"anyOf": [{"type": "string"}, {"type": "null"}]}, None, None),
        (Movie | None, {"anyOf": [{"$ref": "#/$defs/Movie"}, {"type": "null"}]},
         {"title": "t"}, {"title": "t"}),
        (Any, {}, {"k": [1]}, {"k": [1]}),
        (dt.date, {"type": "string", "format": "date"}, dt.date(2020, 2, 2), "2020-02-02"),
        (tuple[int, Point],
         {"type": "array", "prefixItems": [{"type": "integer"}, {"$ref": "#/$defs/Point"}],
          "minItems": 2, "maxItems": 2},
         (1, Point(2)), [1, {"x": 2, "y": 0}]),
    ],
)
def test_wrapped_outputs(annotation: Any, result_schema: dict[str, Any], value: Any, dumped: Any) -> None:
    sig = _returns(annotation)
    assert sig.wrap_output is True
    schema = sig.output_schema
    assert schema is not None
    assert schema["type"] == "object"
    assert schema["properties"] == {"result": result_schema}
    assert schema["required"] == ["result"]
    assert schema["x-mcphost-wrapped"] is True
    out = sig.dump_output(value)
    assert out == {"result": dumped}
    check(schema).validate(out)


def test_async_and_awaitable_returns() -> None:
    async def afn() -> list[str]:
        return []

    sig = sig_of(afn)
    assert sig.wrap_output is True
    assert sig.output_schema is not None
    assert sig.output_schema["properties"]["result"] == {"type": "array", "items": {"type": "string"}}

    async def acontent() -> FancyContent:
        return FancyContent()

    assert sig_of(acontent).output_schema is None
    assert _returns(cabc.Awaitable[Point]).wrap_output is False


def test_annotated_return_description() -> None:
    sig = _returns(Annotated[Point, "where it is"])
    assert sig.wrap_output is False
    assert sig.output_schema is not None
    assert sig.output_schema["description"] == "where it is"
    assert sig.output_schema["required"] == ["x", "y"]


def test_dump_output_unwrapped_passthrough() -> None:
    sig = _returns(inspect_empty)
    assert sig.dump_output("text") == "text"


# --------------------------------------------------------------------------- to_jsonable


def test_to_jsonable() -> None:
    uid = uuid.uuid4()
    value = {
        "p": Point(1),
        "enum": Level.HIGH,
        "str_enum": Shade.LIGHT,
        "tuple": (1, (2, 3)),
        "set": {4},
        "dt": dt.datetime(2024, 1, 2, 3, 4, 5),
        "time": dt.time(1, 2),
        "uuid": uid,
        "nested": [{"c": Color.RED}],
        Color.GREEN: 1,
        5: "int key",
    }
    out = to_jsonable(value)
    assert out == {
        "p": {"x": 1, "y": 0},
        "enum": 2,
        "str_enum": "light",
        "tuple": [1, [2, 3]],
        "set": [4],
        "dt": "2024-01-02T03:04:05",
        "time": "01:02:00",
        "uuid": str(uid),
        "nested": [{"c": "red"}],
        "green": 1,
        "5": "int key",
    }
    assert type(out["enum"]) is int and type(out["str_enum"]) is str
    marker = Widget()
    assert to_jsonable(marker) is marker


# --------------------------------------------------------------------------- prompts


def test_prompt_arguments() -> None:
    def prompt(
        topic: str,
        tone: Literal["formal", "casual"] = "formal",
        shade: Shade | None = None,
        color: Color = Color.RED,
        note: Optional[str] = None,  # noqa: UP045
        raw=None,  # type: ignore[no-untyped-def]
        ctx: Ctx | None = None,
        style: Annotated[str, "writing style"] = "plain",
    ) -> str:
        """Write something.

        Args:
            topic: what to write about
            note: an optional note
        """
        return topic

    args = prompt_arguments(prompt, context_type=Ctx)
    assert args == [
        {"name": "topic", "description": "what to write about", "required": True},
        {"name": "tone", "required": False},
        {"name": "shade", "required": False},
        {"name": "color", "required": False},
        {"name": "note", "description": "an optional note", "required": False},
        {"name": "raw", "required": False},
        {"name": "style", "description": "writing style", "required": False},
    ]


@pytest.mark.parametrize("annotation", [int, Level, Mixed, Optional[int], list[str], Point, Literal["a", 1]])  # noqa: UP045
def test_prompt_arguments_reject_non_strings(annotation: Any) -> None:
    with pytest.raises(SignatureError, match=r"handler\(\): parameter 'x'"):
        prompt_arguments(_fn_with(annotation))


def test_typing_typeddict_keys_with_future_annotations_and_inheritance() -> None:
    # Python 3.11's typing.TypedDict misreads NotRequired/Required in string annotations; pydantic refuses
    # typing.TypedDict there, and mcphost's stand-in must get the required keys right.
    source = '''
from __future__ import annotations
from typing import NotRequired, Required, TypedDict

class Base(TypedDict, total=False):
    a: int

class Child(Base):
    b: str
    c: NotRequired[int]

class Loose(TypedDict, total=False):
    d: Required[str]
    e: int

def handler(x: Child, y: Loose) -> Child:
    return x
'''
    module = types.ModuleType("sigtest_typeddict_mod")
    sys.modules[module.__name__] = module
    try:
        exec(compile(source, "<sigtest>", "exec"), module.__dict__)
        sig = sig_of(module.handler)
        defs = sig.input_schema["$defs"]
        assert defs["Child"]["required"] == ["b"]
        assert defs["Loose"]["required"] == ["d"]
        assert sig.bind({"x": {"b": "s"}, "y": {"d": "t"}}) == {"x": {"b": "s"}, "y": {"d": "t"}}
        with pytest.raises(ValueError, match="argument 'x' at b is required"):
            sig.bind({"x": {"a": 1}, "y": {"d": "t"}})
        assert sig.output_schema is not None and sig.output_schema["required"] == ["b"]
    finally:
        del sys.modules[module.__name__]
