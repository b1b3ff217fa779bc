"""Hidden text and size caps: what of an upstream's listing reaches the catalog.

Titles and descriptions (the record's own, a prompt's arguments', and those inside its schemas)
are normalized (NFKC) and cleared of text a person reading the catalog would not see but a
model would: zero-width characters, bidi controls, Unicode tag characters, other control
characters, ANSI escapes and HTML comments. What was removed is kept (:class:`Removal`) so a
console can show it; with ``hidden_text = "hold"`` such a definition is held instead of cleaned.

:func:`capped` keeps at most ``max_tools`` items of each kind, none larger than
``max_definition_bytes`` and at most ``max_catalog_bytes`` in all; what it refuses is told in one
warning per kind and cap.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

log = logging.getLogger("mcphost.proxy")

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?|\x9b[0-?]*[ -/]*[@-~]")
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_ZERO_WIDTH = "\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u180e\u00ad\u034f"
_BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
_HIDDEN = re.compile(
    f"(?P<zero_width>[{_ZERO_WIDTH}]+)|(?P<bidi>[{_BIDI}]+)|(?P<tag>[\U000e0000-\U000e007f]+)"
    r"|(?P<control>[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]+)")
#: Keys whose string values are read by a model: cleaned wherever they appear in a definition.
TEXT_KEYS = ("title", "description")


@dataclass(frozen=True)
class Removal:
    """One piece of hidden text taken out: where (``description``, ``inputSchema.properties.q.title``),
    what kind, and the text (escaped, so a console shows it as characters)."""

    where: str
    kind: str
    text: str

    def to_json(self) -> dict[str, str]:
        return {"where": self.where, "kind": self.kind, "text": self.text}


def clean_text(text: str, where: str, removed: list[Removal]) -> str:
    """``text`` normalized and cleared of hidden text; each removal appended to ``removed``."""
    def cut(kind: str) -> Any:
        def replace(match: re.Match[str]) -> str:
            removed.append(Removal(where, kind, match.group(0).encode("unicode_escape").decode("ascii")[:200]))
            return ""
        return replace

    text = _ANSI.sub(cut("ansi"), text)
    text = _COMMENT.sub(cut("html_comment"), text)
    normalized = unicodedata.normalize("NFKC", text)
    if normalized != text:
        removed.append(Removal(where, "nfkc", "normalized (NFKC)"))
    text = normalized

    def hidden(match: re.Match[str]) -> str:
        kind = match.lastgroup or "hidden"
        removed.append(Removal(where, kind, match.group(0).encode("unicode_escape").decode("ascii")[:200]))
        return ""

    text = _HIDDEN.sub(hidden, text)
    return _COMMENT.sub(cut("html_comment"), text)  # a comment hidden behind zero-width characters


def _clean_value(value: Any, where: str, removed: list[Removal], depth: int = 0) -> Any:
    if depth > 32:
        return value
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            place = f"{where}.{key}" if where else str(key)
            if key in TEXT_KEYS and isinstance(inner, str):
                out[key] = clean_text(inner, place, removed)
            elif isinstance(inner, dict | list) and key not in ("const", "default", "enum", "examples", "_meta"):
                out[key] = _clean_value(inner, place, removed, depth + 1)
            else:
                out[key] = inner
        return out
    if isinstance(value, list):
        return [_clean_value(inner, f"{where}[{i}]", removed, depth + 1) for i, inner in enumerate(value)]
    return value


def clean(item: Mapping[str, Any]) -> tuple[dict[str, Any], list[Removal]]:
    """A listed item with its titles and descriptions cleaned (top level, arguments, schemas), and what went."""
    removed: list[Removal] = []
    cleaned = _clean_value(dict(item), "", removed)
    return cleaned, removed


@dataclass
class Caps:
    """The caps of one server and what they refused (counted, for one warning per kind and cap).

    :meth:`capped` keeps the first ``max_items`` items; :meth:`fits` is asked of each item after
    the record-level checks (``max_description_chars``, ``max_schema_bytes``: their own warnings
    come first) and counts its bytes; :meth:`report` warns once per cap that refused any."""

    max_items: int
    max_definition_bytes: int
    max_catalog_bytes: int
    total: int = 0
    over_count: int = 0
    over_size: int = 0
    over_total: int = 0

    def capped(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.over_count = max(0, len(items) - self.max_items)
        return items[:self.max_items]

    def fits(self, item: Mapping[str, Any]) -> bool:
        size = len(orjson.dumps(item, option=orjson.OPT_NON_STR_KEYS))
        if size > self.max_definition_bytes:
            self.over_size += 1
            return False
        if self.total + size > self.max_catalog_bytes:
            self.over_total += 1
            return False
        self.total += size
        return True

    def report(self, server: str, kind: str) -> None:
        if self.over_count:
            log.warning("upstream %s: %d %s are not mounted: past max_tools (%d mounted)", server,
                        self.over_count, kind, self.max_items)
        if self.over_size:
            log.warning("upstream %s: %d %s are not mounted: each over max_definition_bytes (%d)", server,
                        self.over_size, kind, self.max_definition_bytes)
        if self.over_total:
            log.warning("upstream %s: %d %s are not mounted: past max_catalog_bytes (%d bytes in all)", server,
                        self.over_total, kind, self.max_catalog_bytes)
        self.over_count = self.over_size = self.over_total = 0
