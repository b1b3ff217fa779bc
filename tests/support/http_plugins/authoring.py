"""``fastmcpstyle`` and ``typeforms``: plugins for the authoring interop tests (tests/interop/test_http_authoring.py).

``fastmcpstyle`` serves the functions of :mod:`tests.support.http_plugins.fastmcp_style` as they are.
``typeforms`` has one tool per parameter type form mcphost supports, each taking ``value`` and
answering what the handler received: the Python type's name and its JSON form.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import ipaddress
import pathlib
import uuid
from typing import Annotated, Any, Literal, NamedTuple, NotRequired, Optional, TypedDict

from pydantic import BaseModel, Field

import mcphost
from mcphost.signature import to_jsonable
from tests.support.http_plugins import fastmcp_style


class fastmcpstyle:  # named like its entry point
    @staticmethod
    @mcphost.hookimpl
    def mcphost_tools(host: Any) -> list[mcphost.Tool]:
        functions = (fastmcp_style.add, fastmcp_style.forecast, fastmcp_style.search, fastmcp_style.count_down,
                     fastmcp_style.sync_shout)
        return [mcphost.tool(fn) for fn in functions]


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


class Movie(TypedDict):
    title: str
    year: NotRequired[int]


class Pair(NamedTuple):
    left: int
    right: str


class Address(BaseModel):
    street: str
    zip: Annotated[str, Field(pattern=r"^[0-9]{5}$")]


#: name -> the annotation of its ``value`` parameter
TYPE_FORMS: dict[str, Any] = {
    "str_bounded": Annotated[str, Field(min_length=2, max_length=5, pattern="^[a-z]+$")],
    "int_bounded": Annotated[int, Field(ge=0, le=10, description="a small count")],
    "float_positive": Annotated[float, Field(gt=0)],
    "bool": bool,
    "enum": Color,
    "literal": Literal["a", "b"],
    "optional": Optional[int],  # noqa: UP045
    "union": int | str,
    "list": Annotated[list[str], Field(min_length=1)],
    "dict": dict[str, int],
    "tuple": tuple[int, str],
    "set": set[int],
    "model": Address,
    "dataclass": Point,
    "typeddict": Movie,
    "namedtuple": Pair,
    "nested": list[Point],
    "datetime": dt.datetime,
    "date": dt.date,
    "time": dt.time,
    "timedelta": dt.timedelta,
    "uuid": uuid.UUID,
    "decimal": Annotated[decimal.Decimal, Field(max_digits=5, decimal_places=2)],
    "path": pathlib.Path,
    "bytes": bytes,
    "ipv4": ipaddress.IPv4Address,
    "ipv6": ipaddress.IPv6Address,
}


def _form_tool(name: str, annotation: Any) -> mcphost.Tool:
    def handler(value):  # type: ignore[no-untyped-def]
        return {"type": type(value).__name__, "value": to_jsonable(value)}

    handler.__annotations__ = {"value": annotation, "return": dict[str, Any]}
    handler.__name__ = handler.__qualname__ = name
    return mcphost.tool(name=f"form_{name}")(handler)


class typeforms:
    @staticmethod
    @mcphost.hookimpl
    def mcphost_tools(host: Any) -> list[mcphost.Tool]:
        return [_form_tool(name, annotation) for name, annotation in TYPE_FORMS.items()]
