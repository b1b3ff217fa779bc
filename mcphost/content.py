"""Helpers that build MCP content blocks, resource contents and prompt messages.

They return plain dicts shaped like the wire types, so a handler's return value is
serialized as it is, once, with no model layer in between.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict, cast

Role = Literal["user", "assistant"]


class TextContent(TypedDict):
    type: Literal["text"]
    text: str
    annotations: NotRequired[dict[str, Any]]
    _meta: NotRequired[dict[str, Any]]


class ImageContent(TypedDict):
    type: Literal["image"]
    data: str
    mimeType: str
    annotations: NotRequired[dict[str, Any]]
    _meta: NotRequired[dict[str, Any]]


class AudioContent(TypedDict):
    type: Literal["audio"]
    data: str
    mimeType: str
    annotations: NotRequired[dict[str, Any]]
    _meta: NotRequired[dict[str, Any]]


class ResourceLinkContent(TypedDict):
    type: Literal["resource_link"]
    uri: str
    name: str
    description: NotRequired[str]
    mimeType: NotRequired[str]
    annotations: NotRequired[dict[str, Any]]
    _meta: NotRequired[dict[str, Any]]


class EmbeddedResourceContent(TypedDict):
    type: Literal["resource"]
    resource: dict[str, Any]
    annotations: NotRequired[dict[str, Any]]
    _meta: NotRequired[dict[str, Any]]


ContentBlock = TextContent | ImageContent | AudioContent | ResourceLinkContent | EmbeddedResourceContent
CONTENT_TYPE_NAMES = frozenset({"text", "image", "audio", "resource_link", "resource"})


def _extras(block: dict[str, Any], annotations: dict[str, Any] | None, meta: dict[str, Any] | None) -> Any:
    if annotations:
        block["annotations"] = annotations
    if meta:
        block["_meta"] = meta
    return block


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


def text(value: str, *, annotations: dict[str, Any] | None = None, meta: dict[str, Any] | None = None
         ) -> TextContent:
    """A text content block."""
    return cast("TextContent", _extras({"type": "text", "text": value}, annotations, meta))


def image(data: bytes | str, mime_type: str, *, annotations: dict[str, Any] | None = None,
          meta: dict[str, Any] | None = None) -> ImageContent:
    """An image block; ``data`` is raw bytes or an already base64-encoded string."""
    return cast("ImageContent", _extras({"type": "image", "data": _b64(data), "mimeType": mime_type},
                                        annotations, meta))


def audio(data: bytes | str, mime_type: str, *, annotations: dict[str, Any] | None = None,
          meta: dict[str, Any] | None = None) -> AudioContent:
    """An audio block; ``data`` is raw bytes or an already base64-encoded string."""
    return cast("AudioContent", _extras({"type": "audio", "data": _b64(data), "mimeType": mime_type},
                                        annotations, meta))


def resource_link(uri: str, name: str, *, description: str | None = None, mime_type: str | None = None,
                  title: str | None = None, size: int | None = None,
                  annotations: dict[str, Any] | None = None, meta: dict[str, Any] | None = None
                  ) -> ResourceLinkContent:
    """A link to a resource the client may read (it need not appear in resources/list)."""
    block: dict[str, Any] = {"type": "resource_link", "uri": uri, "name": name}
    if title is not None:
        block["title"] = title
    if description is not None:
        block["description"] = description
    if mime_type is not None:
        block["mimeType"] = mime_type
    if size is not None:
        block["size"] = size
    return cast("ResourceLinkContent", _extras(block, annotations, meta))


def resource_contents(uri: str, *, text: str | None = None, blob: bytes | str | None = None,
                      mime_type: str | None = None, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """TextResourceContents or BlobResourceContents, as ``resources/read`` returns them."""
    if (text is None) == (blob is None):
        raise ValueError("resource contents need exactly one of text= or blob=")
    contents: dict[str, Any] = {"uri": uri}
    if mime_type is not None:
        contents["mimeType"] = mime_type
    if text is not None:
        contents["text"] = text
    else:
        assert blob is not None  # exactly one of text= and blob= (checked above)
        contents["blob"] = _b64(blob)
    if meta:
        contents["_meta"] = meta
    return contents


def embedded_resource(uri: str, *, text: str | None = None, blob: bytes | str | None = None,
                      mime_type: str | None = None, annotations: dict[str, Any] | None = None,
                      meta: dict[str, Any] | None = None) -> EmbeddedResourceContent:
    """A resource embedded in a tool result or prompt message."""
    block = {"type": "resource", "resource": resource_contents(uri, text=text, blob=blob, mime_type=mime_type)}
    return cast("EmbeddedResourceContent", _extras(block, annotations, meta))


def message(role: Role, content: str | ContentBlock | dict[str, Any]) -> dict[str, Any]:
    """A prompt message; a string becomes a text block."""
    return {"role": role, "content": text(content) if isinstance(content, str) else content}


@dataclass(frozen=True, slots=True)
class ToolResult:
    """An explicit tool result, when returning plain values is not enough.

    ``structured`` becomes ``structuredContent``; ``is_error`` marks a failure the model may retry.
    """

    content: list[dict[str, Any]] = field(default_factory=list)
    structured: Any = None
    is_error: bool = False
    meta: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Completion:
    """What a completion provider returns when it knows more than a list of values."""

    values: list[str]
    total: int | None = None
    has_more: bool | None = None


def is_content_block(value: object) -> bool:
    return isinstance(value, dict) and value.get("type") in CONTENT_TYPE_NAMES
