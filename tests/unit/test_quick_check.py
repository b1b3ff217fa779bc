"""The catalog's quick argument check agrees with the full JSON Schema validator wherever it says yes."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mcphost.catalog import compile_validator, quick_check

PLAIN = [
    {"type": "object", "properties": {"text": {"type": "string", "title": "Text"}}, "required": ["text"]},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "number"},
                                      "c": {"type": ["boolean", "null"]}, "d": {}},
     "required": ["a"], "additionalProperties": False},
    {"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N", "default": 3}}},
    {"type": "object", "additionalProperties": False},
]
NOT_PLAIN = [
    {"type": "object", "properties": {"text": {"type": "string", "minLength": 2}}},
    {"type": "object", "properties": {"x": {"type": "array"}}},
    {"type": "object", "properties": {"x": {"type": "string"}}, "anyOf": [{"required": ["x"]}]},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
    {"type": "object", "additionalProperties": {"type": "string"}},
]
VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                      | st.text(max_size=5), lambda inner: st.lists(inner, max_size=2)
                      | st.dictionaries(st.text(max_size=3), inner, max_size=2), max_leaves=4)
ARGUMENTS = st.dictionaries(st.sampled_from(["text", "a", "b", "c", "d", "n", "x", "other"]), VALUES, max_size=5)


@settings(max_examples=400, deadline=None)
@given(arguments=ARGUMENTS)
def test_a_yes_of_the_quick_check_is_a_yes_of_the_validator(arguments: dict[str, Any]) -> None:
    for schema in PLAIN:
        check = quick_check(schema)
        assert check is not None
        if check(arguments):
            assert compile_validator(schema).is_valid(arguments), (schema, arguments)


def test_it_says_yes_to_the_usual_call_and_no_to_what_it_must_refuse() -> None:
    echo, typed, header, closed = (quick_check(schema) for schema in PLAIN)
    assert echo is not None and echo({"text": "hi"}) and echo({"text": "hi", "more": 1})
    assert not echo({}) and not echo({"text": 3})
    assert typed is not None and typed({"a": 1, "b": 2.5, "c": None, "d": [1]}) and typed({"a": -4, "c": True})
    assert not typed({"a": True}) and not typed({"a": 1, "b": "2"}) and not typed({"a": 1, "z": 0})
    assert not typed({"a": 1.0})  # valid (an integral float), but left to the full validator
    assert header is not None and header({}) and header({"n": 2}) and not header({"n": "2"})
    assert closed is not None and closed({}) and not closed({"k": 1})


def test_schemas_with_other_keywords_are_left_to_the_validator() -> None:
    assert all(quick_check(schema) is None for schema in NOT_PLAIN)
