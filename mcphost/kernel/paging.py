"""Paging of list results: opaque cursors the host mints, and one page of a list."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from mcphost.protocol.errors import invalid_params

_CURSOR_PREFIX = "mcphost:"


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"{_CURSOR_PREFIX}{offset}".encode()).decode().rstrip("=")


def decode_cursor(cursor: object) -> int:
    """The offset an opaque cursor stands for; -32602 for anything the host did not mint."""
    if not isinstance(cursor, str) or len(cursor) > 64:
        raise invalid_params("Invalid cursor")
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if not text.startswith(_CURSOR_PREFIX):
            raise ValueError
        offset = int(text[len(_CURSOR_PREFIX):])
        if offset < 0:
            raise ValueError
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise invalid_params("Invalid cursor") from None
    if encode_cursor(offset) != cursor:  # "+2", "02", " 2", padding...: not a cursor the host minted
        raise invalid_params("Invalid cursor")
    return offset


def page(items: list[Any], cursor: object, size: int) -> tuple[list[Any], str | None]:
    """One page of ``items`` starting at ``cursor``, with the next cursor when more remain."""
    offset = 0 if cursor is None else decode_cursor(cursor)
    if offset > len(items):
        raise invalid_params("Invalid cursor")
    end = offset + size
    return items[offset:end], (encode_cursor(end) if end < len(items) else None)
