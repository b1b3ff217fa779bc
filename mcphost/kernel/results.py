"""Turn what handlers return into MCP results, per protocol revision.

Handlers return plain values (str, dicts, dataclasses, content blocks, bytes for
resources); these functions are the one place that decides what reaches the wire.
"""

from __future__ import annotations

import base64
import logging
from typing import Any, cast

import jsonschema
import orjson

from mcphost.catalog import ToolEntry
from mcphost.content import ToolResult, is_content_block, message, text
from mcphost.protocol.versions import at_least
from mcphost.signature import to_jsonable

log = logging.getLogger("mcphost.kernel")


def error_result(message_text: str) -> dict[str, Any]:
    return {"content": [text(message_text)], "isError": True}


def _json_text(value: Any) -> str:
    return orjson.dumps(value).decode()


def _downgrade(blocks: list[dict[str, Any]], version: str) -> list[dict[str, Any]]:
    # resource_link blocks arrived in 2025-06-18; older clients get the link as text.
    if at_least(version, "2025-06-18") or not any(b.get("type") == "resource_link" for b in blocks):
        return blocks
    return [cast("dict[str, Any]", text(f"{b.get('name', '')}: {b['uri']}")) if b.get("type") == "resource_link" else b
            for b in blocks]


def tool_result(entry: ToolEntry, value: Any, version: str) -> dict[str, Any]:
    """The CallToolResult for a tool's return value; an output-schema violation is an error result."""
    record = entry.record
    structured: Any = None
    if isinstance(value, ToolResult):
        result: dict[str, Any] = {"content": list(value.content)}
        structured = value.structured
        if value.is_error:
            result["isError"] = True
        if value.meta:
            result["_meta"] = value.meta
    elif entry.output_validator is not None:
        structured = record.signature.dump_output(value) if record.signature else to_jsonable(value)
        result = {"content": [text(_json_text(structured))]}
    elif value is None:
        result = {"content": []}
    elif isinstance(value, str):
        result = {"content": [text(value)]}
    elif is_content_block(value):
        result = {"content": [value]}
    elif isinstance(value, list | tuple) and value and all(is_content_block(v) for v in value):
        result = {"content": list(value)}
    else:
        jsonable = to_jsonable(value)
        result = {"content": [text(_json_text(jsonable))]}
        if isinstance(jsonable, dict):
            structured = jsonable
    if structured is not None and entry.output_validator is not None and not result.get("isError"):
        error = jsonschema.exceptions.best_match(entry.output_validator.iter_errors(structured))
        if error is not None:
            log.error("tool %s returned output that does not match its outputSchema: %s", record.name,
                      error.message)
            return error_result(f"Tool {record.name!r} returned output that does not match its output schema")
    if structured is not None and at_least(version, "2025-06-18"):
        if isinstance(structured, dict):
            result["structuredContent"] = structured
        else:  # the session-era schemas allow only an object here
            log.warning("tool %s returned non-object structured content; it is not sent", record.name)
    result["content"] = _downgrade(result["content"], version)
    return result


def resource_contents(uri: str, mime_type: str | None, value: Any) -> list[dict[str, Any]]:
    """ReadResourceResult.contents for a resource handler's return value.

    A non-empty list of text, bytes and contents dicts is several contents; any other list is data
    and becomes one JSON text, like a dict.
    """
    several = isinstance(value, list) and bool(value) and all(_is_contents_item(item) for item in value)
    items = value if several else [value]
    contents = []
    for item in items:
        if isinstance(item, str):
            contents.append({"uri": uri, "mimeType": mime_type or "text/plain", "text": item})
        elif isinstance(item, bytes | bytearray):
            contents.append({"uri": uri, "mimeType": mime_type or "application/octet-stream",
                             "blob": base64.b64encode(item).decode("ascii")})
        elif isinstance(item, dict) and ("text" in item or "blob" in item):
            entry = {"uri": uri, **item}
            if mime_type and "mimeType" not in entry:
                entry["mimeType"] = mime_type
            contents.append(entry)
        else:
            contents.append({"uri": uri, "mimeType": mime_type or "application/json",
                             "text": _json_text(to_jsonable(item))})
    return contents


def _is_contents_item(item: Any) -> bool:
    if isinstance(item, dict):
        return "text" in item or "blob" in item
    return isinstance(item, str | bytes | bytearray)


def prompt_result(description: str | None, value: Any) -> dict[str, Any]:
    """GetPromptResult for a prompt handler's return value."""
    if isinstance(value, dict) and "messages" in value:
        result = dict(value)
    else:
        items = value if isinstance(value, list | tuple) else [value]
        messages = []
        for item in items:
            if isinstance(item, str):
                messages.append(message("user", item))
            elif isinstance(item, dict) and "role" in item:
                messages.append(item)
            elif is_content_block(item):
                messages.append({"role": "user", "content": item})
            else:
                raise TypeError(f"a prompt returned {type(item).__name__}; expected str, messages or content")
        result = {"messages": messages}
    if description and "description" not in result:
        result["description"] = description
    return result
