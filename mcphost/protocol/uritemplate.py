"""RFC 6570 URI templates for MCP resource templates: parsing, level-4 expansion and matching.

A resource template such as ``repo://{owner}/{repo}/blob{/path*}`` is parsed once by
:class:`UriTemplate`.  :meth:`UriTemplate.expand` implements full RFC 6570 level 4
expansion.  :meth:`UriTemplate.match` goes the other way: it takes a concrete URI sent by a
client and recovers the variables, or returns ``None``.

Matching is the security-relevant half: URIs come from untrusted clients, so it runs in
time linear in the URI length and never backtracks (no regex with nested or competing
quantifiers is used; every regex here is a fixed-length check).  It never raises for any
input string.  Where a value may run is found with ``str.find`` of each character that ends
it (memchr, C speed) rather than a regex character-class run, which ``re`` steps through one
character at a time: a 1 MiB URI costs tens of microseconds, not milliseconds, of the event
loop it is matched on.

Matching semantics
------------------
RFC 6570 expansion is not injective, so matching picks one deterministic parse:

* The template is split into literals and *groups* of adjacent expressions.  The leading
  literal must be a prefix of the URI and the trailing literal a suffix (anchored at both
  ends).  Every literal in between is located at its **first** occurrence after the
  preceding group (first fit; the group can never extend past a character that none of its
  expressions may contain).  There is no backtracking, so a URI that only a later
  occurrence would fit is rejected: ``{+a}/x/{b}`` does not match ``p/x/q/x/r``.
* Character classes of a value (the part after the operator character):

  ======== ==================================================================
  ``{v}``  one or more characters, never ``/``, ``?`` or ``#``
  ``{+v}`` one or more characters, anything (reserved expansion)
  ``{#v}`` ``#`` then anything
  ``{.v}`` ``.`` then anything but ``/``, ``?``, ``#``; items split on ``.``
  ``{/v}`` ``/`` then anything but ``?``, ``#``; items split on ``/`` (a single
           non-exploded variable may not contain ``/``)
  ``{;v}`` ``;`` then ``name[=value]`` items split on ``;``, never ``/?#``
  ``{?v}`` ``?`` then ``name[=value]`` pairs split on ``&``, never ``#``
  ======== ==================================================================

* An expression's value never contains the operator character of the expression right
  after it in the same group (``{+path}{?q}`` stops the path at ``?``; ``{name}{.ext}``
  stops the name at the first ``.``).  Adjacent expressions without such a character
  (``{a}{b}{c}``) split **greedy-left**: each takes the longest run it can while leaving
  one character for every later ``{x}``/``{+x}`` expression of the group.
* ``{?...}`` followed by any ``{&...}`` expressions forms one query block, opening with ``?``
  (or ``&``, which is what it expands to when the ``{?...}`` part is empty): pairs may come in
  any order, keys are compared verbatim to variable names, an unknown key or a repeated
  non-exploded key means no match, empty pairs (``a=1&&b=2``) are skipped, ``k`` alone means
  ``k=``, and variables whose key is absent are omitted from the result.
* Multiple variables in one unnamed expression (``{x,y}``, ``{/a,b}``) are assigned items
  positionally; missing trailing items leave those variables out; surplus items mean no
  match.  An exploded variable takes all remaining items.  Named operators (``;``, ``?``,
  ``&``) assign by name.
* A single non-exploded variable takes the whole value (so ``{x}`` may contain ``,`` and
  ``{.x}`` may contain ``.``).
* Exploded variables yield ``list[str]``; an empty or absent unnamed exploded expression
  (``{/path*}`` or ``{list*}`` matching nothing) yields ``[]``.  Exploded maps cannot be
  recovered (their keys are not variable names): with an unnamed operator they come back as a
  list of ``key=value`` strings, with a named one they do not match.  Non-exploded lists and
  maps come back as the raw comma-joined string.
* Values for ``{x}`` and ``{+x}`` (and each item of their exploded lists) must be non-empty.
* A ``:n`` prefix variable matches only values of at most ``n`` characters (after decoding).
* Values are percent-decoded as UTF-8; a malformed escape or invalid UTF-8 means no match.
  ``+`` is not treated as a space.
* A variable that appears more than once must get the same value each time.
* Literals are compared in their expanded (percent-encoded) form.
* A URI containing a lone surrogate (which has no UTF-8 form) never matches.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias
from urllib.parse import quote

__all__ = ["MatchResult", "TemplateValue", "UriTemplate", "UriTemplateError"]

TemplateValue: TypeAlias = str | int | Sequence[str] | Mapping[str, str] | None
MatchResult: TypeAlias = dict[str, str | list[str]]


class UriTemplateError(ValueError):
    """A malformed template, or a value the template cannot expand."""


class _NoMatch(Exception):
    """Internal signal: the URI does not match (never escapes :meth:`UriTemplate.match`)."""


@dataclass(frozen=True, slots=True)
class _Operator:
    """One row of the RFC 6570 appendix A table, plus what a matched value may not contain."""

    char: str
    first: str
    sep: str
    named: bool
    ifemp: str
    allow_reserved: bool
    excluded: str


_OPERATORS: Final[dict[str, _Operator]] = {
    "": _Operator("", "", ",", False, "", False, "/?#"),
    "+": _Operator("+", "", ",", False, "", True, ""),
    "#": _Operator("#", "#", ",", False, "", True, ""),
    ".": _Operator(".", ".", ".", False, "", False, "/?#"),
    "/": _Operator("/", "/", "/", False, "", False, "?#"),
    ";": _Operator(";", ";", ";", True, "", False, "/?#"),
    "?": _Operator("?", "?", "&", True, "=", False, "#"),
    "&": _Operator("&", "&", "&", True, "=", False, "#"),
}
# RFC 6570 section 2.2 reserves these for future extensions; a template using them is invalid.
_RESERVED_OPERATORS: Final = frozenset("=,!@|")
_QUERY_OPS: Final = frozenset("?&")
_RESERVED_CHARS: Final = ":/?#[]@!$&'()*+,;="

_VARSPEC: Final = re.compile(
    r"((?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*)"
    r"(?::([1-9][0-9]{0,3})|(\*))?"
)
# Characters RFC 6570 section 2.1 forbids in literals, a "%" that is not a pct-triplet, or a
# lone surrogate (which has no UTF-8 encoding).
_BAD_LITERAL: Final = re.compile(r"[\x00-\x20\x7f\"'<>\\^`{|}\ud800-\udfff]|%(?![0-9A-Fa-f]{2})")
_PCT_TRIPLET: Final = re.compile(r"(%[0-9A-Fa-f]{2})")
_BAD_ESCAPE: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")
_ESCAPED_FF: Final = re.compile(r"%[Ff][Ff]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_UNDECODED: Final = re.compile("[\udc80-\udcff]")
_UNDECODED_BUT_FF: Final = re.compile("[\udc80-\udcfe]")


@dataclass(frozen=True, slots=True)
class _VarSpec:
    name: str
    max_length: int | None
    explode: bool


@dataclass(frozen=True, slots=True)
class _Expression:
    op: _Operator
    varspecs: tuple[_VarSpec, ...]


@dataclass(frozen=True, slots=True)
class _Unit:
    """A matchable piece of a group: one expression, or a ``{?..}{&..}`` query block."""

    prefixes: str  # operator characters a non-empty span may start with ("" for {x} and {+x})
    excluded: str  # characters the value may not contain (where its longest run ends: _run_end)
    min_len: int
    exprs: tuple[_Expression, ...]
    is_query: bool


@dataclass(frozen=True, slots=True)
class _Group:
    """Adjacent expressions and the literal that follows them."""

    units: tuple[_Unit, ...]
    literal: str
    min_len: int
    min_rest: tuple[int, ...]  # characters later units of the group still need
    limit: str  # a span can never run past one of these chars, which no unit allows ("": no limit)


def _run_end(uri: str, start: int, end: int, stops: str) -> int:
    """Where the longest run of ``uri[start:end]`` without any of ``stops`` ends.

    What a ``[^stops]*`` match from ``start`` would give, found with one ``str.find`` per stop
    character (each narrowing the range of the next), so linear and at memchr speed.
    """
    for char in stops:
        found = uri.find(char, start, end)
        if found >= 0:
            end = found
    return end


# ---------------------------------------------------------------------------- encoding


def _encode(text: str, allow_reserved: bool) -> str:
    """Percent-encode ``text`` as UTF-8, keeping unreserved (and optionally reserved) chars."""
    if not allow_reserved:
        return quote(text, safe="")
    # Reserved expansion passes existing pct-triplets through untouched (RFC 6570 3.2.3).
    pieces = _PCT_TRIPLET.split(text)
    return "".join(p if i % 2 else quote(p, safe=_RESERVED_CHARS) for i, p in enumerate(pieces))


def _percent_decode(text: str) -> str:
    """Decode ``%XX`` escapes as UTF-8; bytes that do not decode come out as U+DC80..U+DCFF.

    ``urllib.parse.unquote`` loops in Python once per escape, which an adversarial URI with
    tens of thousands of escapes turns into real time.  Rewriting ``%XX`` as ``\\xXX`` lets
    the ``unicode_escape`` codec do the work in C (backslashes are doubled first so nothing
    else is an escape).  Callers have already rejected lone surrogates in the input.
    """
    if _BAD_ESCAPE.search(text):
        raise _NoMatch
    escaped = text.replace("\\", "\\\\").replace("%", "\\x").encode()
    return escaped.decode("unicode_escape").encode("latin-1").decode("utf-8", "surrogateescape")


def _decode(text: str) -> str:
    """Percent-decode one value, or raise :class:`_NoMatch` if it is malformed."""
    if "%" not in text:
        return text
    decoded = _percent_decode(text)
    if _UNDECODED.search(decoded):
        raise _NoMatch
    return decoded


def _decode_split(body: str, sep: str) -> list[str]:
    """Split ``body`` on unescaped ``sep`` and percent-decode every item in one pass.

    Each separator becomes the byte 0xFF, which valid UTF-8 never contains, so after the
    bulk decode it shows up as U+DCFF and nowhere else (an escaped ``%FF`` is rejected up
    front); any other U+DC80..U+DCFE means some item was not valid UTF-8.
    """
    if "%" not in body:
        return body.split(sep)
    if _ESCAPED_FF.search(body):
        raise _NoMatch
    decoded = _percent_decode(body.replace(sep, "%FF"))
    if _UNDECODED_BUT_FF.search(decoded):
        raise _NoMatch
    return decoded.split("\udcff")


# ----------------------------------------------------------------------------- parsing


def _parse_expression(body: str, offset: int) -> _Expression:
    if not body:
        raise UriTemplateError(f"empty expression at offset {offset}")
    op_char = body[0]
    if op_char in _RESERVED_OPERATORS:
        raise UriTemplateError(f"reserved operator {op_char!r} at offset {offset}")
    if op_char in _OPERATORS:
        body = body[1:]
    else:
        op_char = ""
    specs: list[_VarSpec] = []
    for raw in body.split(","):
        m = _VARSPEC.fullmatch(raw)
        if m is None:
            raise UriTemplateError(f"invalid variable specification {raw!r} at offset {offset}")
        max_length = int(m.group(2)) if m.group(2) else None
        specs.append(_VarSpec(m.group(1), max_length, m.group(3) is not None))
    return _Expression(_OPERATORS[op_char], tuple(specs))


def _parse(template: str) -> list[str | _Expression]:
    """Split a template into encoded literals and expressions, validating as we go."""
    parts: list[str | _Expression] = []
    i, n = 0, len(template)
    while i < n:
        j = template.find("{", i)
        if j < 0:
            j = n
        if j > i:
            literal = template[i:j]
            bad = _BAD_LITERAL.search(literal)
            if bad is not None:
                where = i + bad.start()
                raise UriTemplateError(f"invalid literal character {bad.group()!r} at offset {where}")
            parts.append(_encode(literal, allow_reserved=True))
        if j == n:
            break
        k = template.find("}", j + 1)
        if k < 0:
            raise UriTemplateError(f"unclosed expression at offset {j}")
        body = template[j + 1 : k]
        if "{" in body:
            raise UriTemplateError(f"nested '{{' in expression at offset {j}")
        parts.append(_parse_expression(body, j))
        i = k + 1
    return parts


def _build_units(exprs: list[_Expression]) -> tuple[_Unit, ...]:
    """Turn a run of adjacent expressions into units with their stop characters."""
    blocks: list[list[_Expression]] = []
    for expr in exprs:
        # "&" continues a preceding "?" (or "&") block so its pairs can come in any order.
        if expr.op.char == "&" and blocks and blocks[-1][0].op.char in _QUERY_OPS:
            blocks[-1].append(expr)
        else:
            blocks.append([expr])
    units: list[_Unit] = []
    for idx, block in enumerate(blocks):
        head = block[0]
        op = head.op
        excluded = op.excluded
        if op.char == "/" and len(head.varspecs) == 1 and not head.varspecs[0].explode:
            excluded += "/"  # "/" is always encoded inside a single path segment value
        if idx + 1 < len(blocks):
            excluded += _openers(blocks[idx + 1])
        min_len = 1 if not op.first and not any(s.explode for s in head.varspecs) else 0
        is_query = op.char in _QUERY_OPS
        units.append(_Unit(_openers(block), "".join(sorted(set(excluded))), min_len, tuple(block), is_query))
    return tuple(units)


def _openers(block: list[_Expression]) -> str:
    """Characters a block's expansion can start with: ``{?a}{&b}`` gives ``&b=..`` when a is undefined."""
    return "".join(dict.fromkeys(e.op.first for e in block))


def _make_group(exprs: list[_Expression], literal: str) -> _Group:
    units = _build_units(exprs)
    mins = [u.min_len for u in units]
    min_rest = tuple(sum(mins[i + 1 :]) for i in range(len(units)))
    # A span cannot contain a character every unit excludes, unless it is some unit's prefix.
    common: set[str] | None = None
    for unit in units:
        chars = set(unit.excluded)
        common = chars if common is None else common & chars
    common = (common or set()) - {c for u in units for c in u.prefixes}
    return _Group(units, literal, sum(mins), min_rest, "".join(sorted(common)))


# ---------------------------------------------------------------------------- matching


def _put(out: MatchResult, name: str, value: str | list[str]) -> None:
    previous = out.get(name)
    if previous is not None and previous != value:
        raise _NoMatch
    out[name] = value


def _check_length(spec: _VarSpec, value: str) -> None:
    if spec.max_length is not None and len(value) > spec.max_length:
        raise _NoMatch


def _assign_named(specs: Mapping[str, _VarSpec], body: str, sep: str, out: MatchResult) -> None:
    """Assign ``name[=value]`` items by name (``;``, ``?`` and ``&`` operators)."""
    names: list[str] = []
    raws: list[str] = []
    for item in body.split(sep):
        if item:
            name, _, raw = item.partition("=")
            names.append(name)
            raws.append(raw)
    # The raw values hold no unescaped ``sep`` any more, so one bulk decode can re-split them.
    values = _decode_split(sep.join(raws), sep) if raws else []
    singles: dict[str, str] = {}
    lists: dict[str, list[str]] = {}
    for name, value in zip(names, values, strict=True):
        spec = specs.get(name)
        if spec is None:
            raise _NoMatch
        if spec.explode:
            lists.setdefault(name, []).append(value)
        else:
            if name in singles:
                raise _NoMatch
            _check_length(spec, value)
            singles[name] = value
    for name, single in singles.items():
        _put(out, name, single)
    for name, values_list in lists.items():
        _put(out, name, values_list)


def _assign(unit: _Unit, body: str | None, out: MatchResult) -> None:
    """Record the variables of ``unit`` given its value (``None`` when absent)."""
    if unit.is_query:
        if body is not None:
            _assign_named({s.name: s for e in unit.exprs for s in e.varspecs}, body, "&", out)
        return
    (expr,) = unit.exprs
    op, specs = expr.op, expr.varspecs
    if body is None:
        for spec in specs:
            if spec.explode and not op.named:
                _put(out, spec.name, [])
        return
    if op.named:
        _assign_named({s.name: s for s in specs}, body, op.sep, out)
        return
    nonempty = not op.first  # {x} and {+x} values may not be empty
    if len(specs) == 1 and not specs[0].explode:
        value = _decode(body)
        if nonempty and not value:
            raise _NoMatch
        _check_length(specs[0], value)
        _put(out, specs[0].name, value)
        return
    # Without an operator character an empty body means "no items"; with one it is one empty item.
    items = _decode_split(body, op.sep) if body or op.first else []
    if nonempty and "" in items:
        raise _NoMatch
    index = 0
    for spec in specs:
        if spec.explode:
            _put(out, spec.name, items[index:])
            index = len(items)
        elif index < len(items):
            _check_length(spec, items[index])
            _put(out, spec.name, items[index])
            index += 1
    if index < len(items):
        raise _NoMatch


def _match_group(group: _Group, uri: str, pos: int, end: int, out: MatchResult) -> None:
    """Split ``uri[pos:end]`` among the group's units, left to right, without backtracking."""
    for idx, unit in enumerate(group.units):
        reserve = end - group.min_rest[idx]
        if unit.prefixes:
            if pos < end and uri[pos] in unit.prefixes:
                start = pos + 1
                stop = max(start, min(_run_end(uri, start, end, unit.excluded), reserve))
                _assign(unit, uri[start:stop], out)
                pos = stop
            else:
                _assign(unit, None, out)
        else:
            stop = min(_run_end(uri, pos, end, unit.excluded), reserve)
            if stop - pos < unit.min_len:
                raise _NoMatch
            _assign(unit, uri[pos:stop], out)
            pos = stop
    if pos != end:
        raise _NoMatch


# ------------------------------------------------------------------------------ public


class UriTemplate:
    """A parsed RFC 6570 URI template that can expand values and match concrete URIs."""

    __slots__ = ("_groups", "_head", "_parts", "is_literal", "template", "variables")

    template: str
    variables: tuple[str, ...]
    is_literal: bool

    def __init__(self, template: str) -> None:
        if not isinstance(template, str):
            raise TypeError("template must be a str")
        self.template = template
        self._parts = _parse(template)
        names: dict[str, None] = {}
        for part in self._parts:
            if isinstance(part, _Expression):
                names.update((s.name, None) for s in part.varspecs)
        self.variables = tuple(names)
        self.is_literal = not any(isinstance(p, _Expression) for p in self._parts)
        self._head, self._groups = self._compile()

    def _compile(self) -> tuple[str, tuple[_Group, ...]]:
        head = ""
        groups: list[_Group] = []
        pending: list[_Expression] = []
        for part in self._parts:
            if isinstance(part, _Expression):
                pending.append(part)
            elif pending:
                groups.append(_make_group(pending, part))
                pending = []
            else:
                head = part  # literals are maximal, so only the very first one lands here
        if pending:
            groups.append(_make_group(pending, ""))
        return head, tuple(groups)

    def __repr__(self) -> str:
        return f"UriTemplate({self.template!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, UriTemplate):
            return NotImplemented
        return self.template == other.template

    def __hash__(self) -> int:
        return hash(self.template)

    # -- expansion

    def expand(self, values: Mapping[str, TemplateValue]) -> str:
        """Expand the template (RFC 6570 level 4); missing or ``None`` values are undefined."""
        out: list[str] = []
        for part in self._parts:
            out.append(part if isinstance(part, str) else _expand_expression(part, values))
        return "".join(out)

    # -- matching

    def match(self, uri: str) -> MatchResult | None:
        """Variables extracted from ``uri``, or ``None`` if it does not match (never raises)."""
        if not isinstance(uri, str):
            return None
        if not uri.isascii() and _SURROGATE.search(uri):  # isascii: O(1), a flag of the str
            return None  # not encodable as UTF-8, so not a URI any client could have meant
        if self.is_literal:
            return {} if uri == self._head else None
        if not uri.startswith(self._head):
            return None
        pos, end = len(self._head), len(uri)
        tail = self._groups[-1].literal
        if tail:
            if end - len(tail) < pos or not uri.endswith(tail):
                return None
            end -= len(tail)
        out: MatchResult = {}
        last = len(self._groups) - 1
        try:
            for i, group in enumerate(self._groups):
                if i == last:
                    _match_group(group, uri, pos, end, out)
                    break
                literal = group.literal
                bound = _run_end(uri, pos, end, group.limit)
                # First fit: the earliest occurrence the group could end at.
                j = uri.find(literal, pos + group.min_len, min(bound + len(literal), end))
                if j < 0:
                    return None
                _match_group(group, uri, pos, j, out)
                pos = j + len(literal)
        except _NoMatch:
            return None
        return out


def _expand_expression(expr: _Expression, values: Mapping[str, TemplateValue]) -> str:
    """RFC 6570 section 3.2.1 expansion of one expression."""
    op = expr.op
    items: list[str] = []

    def enc(text: str) -> str:
        return _encode(text, op.allow_reserved)

    for spec in expr.varspecs:
        value = values.get(spec.name)
        if value is None:
            continue
        name = spec.name
        if isinstance(value, bytes | bytearray):
            raise TypeError(f"value for {name!r} must be str, int, a sequence or a mapping, not bytes")
        if isinstance(value, Mapping):
            pairs = [(str(k), str(v)) for k, v in value.items()]
            if not pairs:
                continue
            _no_prefix(spec)
            if spec.explode:
                if op.named:
                    items.extend(enc(k) + ("=" + enc(v) if v else op.ifemp) for k, v in pairs)
                else:
                    items.extend(enc(k) + "=" + enc(v) for k, v in pairs)
            else:
                joined = ",".join(enc(k) + "," + enc(v) for k, v in pairs)
                items.append(_named(op, name, joined) if op.named else joined)
        elif isinstance(value, Sequence) and not isinstance(value, str):
            seq = [str(v) for v in value]
            if not seq:
                continue
            _no_prefix(spec)
            if spec.explode:
                if op.named:
                    items.extend(_named(op, name, enc(v)) for v in seq)
                else:
                    items.extend(enc(v) for v in seq)
            else:
                joined = ",".join(enc(v) for v in seq)
                items.append(_named(op, name, joined) if op.named else joined)
        else:
            text = str(value)
            if spec.max_length is not None:
                text = text[: spec.max_length]
            items.append(_named(op, name, enc(text)) if op.named else enc(text))
    if not items:
        return ""
    return op.first + op.sep.join(items)


def _named(op: _Operator, name: str, encoded: str) -> str:
    return name + ("=" + encoded if encoded else op.ifemp)


def _no_prefix(spec: _VarSpec) -> None:
    if spec.max_length is not None:
        raise UriTemplateError(f"prefix modifier on composite value for {spec.name!r}")
