"""The fixtures themselves: the tools, resources, templates and prompts the conformance suite calls.

Imported by :class:`mcphost_conformance.ConformancePlugin` only once the plugin is active, so an
installed but dormant conformance plugin costs a command line nothing (their schemas are built at
import).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import mcphost
from mcphost import Context
from mcphost.content import AudioContent, EmbeddedResourceContent, ImageContent, TextContent
from mcphost_conformance.media import PNG, WAV
from mcphost_conformance.stateless import STATELESS_PROMPTS, STATELESS_TOOLS
from mcphost_conformance.stateless import reply_text as _reply_text
from mcphost_conformance.tasks import TASK_TOOLS

SIMPLE_TEXT = "This is a simple text response for testing."
STATIC_TEXT = "This is the content of the static text resource."
ERROR_TEXT = "This tool intentionally returns an error for testing"
LOG_MESSAGES = ("Tool execution started", "Tool processing data", "Tool execution completed")

# -- tools: content -------------------------------------------------------------------------------

READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}


@mcphost.tool(name="test_simple_text", annotations=READ_ONLY)
def simple_text() -> str:
    """Return one text block with a fixed sentence."""
    return SIMPLE_TEXT


@mcphost.tool(name="test_image_content", annotations=READ_ONLY)
def image_content() -> ImageContent:
    """Return one image block: a 1x1 red PNG (image/png, base64)."""
    return mcphost.image(PNG, "image/png")


@mcphost.tool(name="test_audio_content", annotations=READ_ONLY)
def audio_content() -> AudioContent:
    """Return one audio block: a 50 ms 440 Hz tone (audio/wav, base64)."""
    return mcphost.audio(WAV, "audio/wav")


@mcphost.tool(name="test_embedded_resource", annotations=READ_ONLY)
def embedded_resource() -> EmbeddedResourceContent:
    """Return one embedded resource block (test://embedded-resource, text/plain)."""
    return mcphost.embedded_resource("test://embedded-resource", mime_type="text/plain",
                                     text="This is an embedded resource content.")


@mcphost.tool(name="test_multiple_content_types", annotations=READ_ONLY)
def multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResourceContent]:
    """Return a text, an image and an embedded JSON resource block together."""
    return [
        mcphost.text("Multiple content types test:"),
        mcphost.image(PNG, "image/png"),
        mcphost.embedded_resource("test://mixed-content-resource", mime_type="application/json",
                                  text=json.dumps({"test": "data", "value": 123}, separators=(",", ":"))),
    ]


@mcphost.tool(name="test_error_handling", annotations=READ_ONLY)
def error_handling() -> str:
    """Always fail with an isError result (not a JSON-RPC error)."""
    raise mcphost.ToolError(ERROR_TEXT)


# -- tools: notifications ---------------------------------------------------------------------------

@mcphost.tool(name="test_tool_with_progress", annotations=READ_ONLY)
async def tool_with_progress(*, ctx: Context) -> str:
    """Report progress 0/100, 50/100 and 100/100 (when the call carries a progress token)."""
    for step, value in enumerate((0, 50, 100)):
        if step:
            await asyncio.sleep(0.05)
        await ctx.progress(value, total=100, message=f"Completed step {step + 1} of 3")
    return "Progress test completed"


@mcphost.tool(name="test_tool_with_logging", annotations=READ_ONLY)
async def tool_with_logging(*, ctx: Context) -> str:
    """Send three info log messages about 50 ms apart, then finish."""
    for step, line in enumerate(LOG_MESSAGES):
        if step:
            await asyncio.sleep(0.05)
        await ctx.info(line)
    return "Logging test completed"


def make_reconnection_tool(retry_ms: int) -> mcphost.Tool:
    """``test_reconnection`` asking clients to reconnect after ``retry_ms``."""

    @mcphost.tool(name="test_reconnection", annotations=READ_ONLY)
    async def reconnection(*, ctx: Context) -> str:
        """Drop the SSE stream mid-call, then answer: the client must reconnect (Last-Event-ID) to see it."""
        await ctx.info("Closing the stream; the result follows after the client reconnects")
        await ctx.progress(0, total=1)
        closed = await ctx.close_stream(retry_ms=retry_ms)
        # Give the client a moment to notice the closed stream; the result is then replayed on resume.
        await asyncio.sleep(0.1)
        await ctx.progress(1, total=1)
        how = "after the stream was closed" if closed else "on the same stream (this transport cannot close it)"
        return f"Reconnection test completed: result sent {how}."

    return reconnection


# -- tools: server-to-client requests -------------------------------------------------------------

@mcphost.tool(name="test_sampling", annotations={"readOnlyHint": True})
async def sampling(prompt: str, *, ctx: Context) -> str:
    """Ask the client's model (sampling/createMessage, maxTokens 100) and return its answer.

    Args:
        prompt: The user message to send to the client's model.
    """
    reply = await ctx.sample([{"role": "user", "content": {"type": "text", "text": prompt}}], max_tokens=100)
    return f"LLM response: {_reply_text(reply)}"


ELICITATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}

SEP1034_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    },
}

SEP1330_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "oneOf": [
            {"const": "value1", "title": "First Option"},
            {"const": "value2", "title": "Second Option"},
            {"const": "value3", "title": "Third Option"},
        ]},
        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                       "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "items": {"anyOf": [
            {"const": "value1", "title": "First Choice"},
            {"const": "value2", "title": "Second Choice"},
            {"const": "value3", "title": "Third Choice"},
        ]}},
    },
}


def _answer(answer: mcphost.ElicitResult) -> str:
    return f"action={answer.action}, content={json.dumps(answer.content)}"


@mcphost.tool(name="test_elicitation", annotations={"readOnlyHint": True})
async def elicitation(message: str, *, ctx: Context) -> str:
    """Ask the user for a username and an email (elicitation/create) and echo the answer.

    Args:
        message: The message shown to the user.
    """
    return f"User response: {_answer(await ctx.elicit(message, ELICITATION_SCHEMA))}"


@mcphost.tool(name="test_elicitation_sep1034_defaults", annotations={"readOnlyHint": True})
async def elicitation_sep1034_defaults(*, ctx: Context) -> str:
    """Elicit a form whose string, integer, number, enum and boolean fields have defaults (SEP-1034)."""
    answer = await ctx.elicit("Please review and update the form fields with defaults", SEP1034_SCHEMA)
    return f"Elicitation completed: {_answer(answer)}"


@mcphost.tool(name="test_elicitation_sep1330_enums", annotations={"readOnlyHint": True})
async def elicitation_sep1330_enums(*, ctx: Context) -> str:
    """Elicit a form with the five enum shapes: untitled/titled single and multi select, legacy enumNames."""
    answer = await ctx.elicit("Please select options from the enum fields", SEP1330_SCHEMA)
    return f"Elicitation completed: {_answer(answer)}"


# -- tools: schemas ----------------------------------------------------------------------------------

JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        },
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@mcphost.tool(name="json_schema_2020_12_tool", input_schema=JSON_SCHEMA_2020_12, annotations=READ_ONLY)
def json_schema_2020_12_tool(name: str | None = None, address: dict[str, Any] | None = None,
                             contactMethod: str | None = None, phone: str | None = None,
                             email: str | None = None) -> str:
    """Tool with JSON Schema 2020-12 features ($defs, $anchor, allOf/anyOf, if/then/else)."""
    given = {key: value for key, value in (("name", name), ("address", address), ("contactMethod", contactMethod),
                                           ("phone", phone), ("email", email)) if value is not None}
    return f"Received: {json.dumps(given, sort_keys=True)}"


# -- tools: SEP-2243 custom headers (2026-07-28 Streamable HTTP) ----------------------------------------

CUSTOM_HEADER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "value": {"type": "string", "description": "Any text; mirrored in the Mcp-Param-Value header",
                  "x-mcp-header": "Value"},
        "count": {"type": "integer", "description": "An optional number; mirrored in Mcp-Param-Count",
                  "x-mcp-header": "Count"},
    },
    "required": ["value"],
}


@mcphost.tool(name="test_custom_header", input_schema=CUSTOM_HEADER_SCHEMA, annotations=READ_ONLY,
              description="Echo a value that an HTTP client mirrors into Mcp-Param-* headers (x-mcp-header, "
                          "SEP-2243); the server rejects a request whose header and argument differ.")
def custom_header(value: str, count: int | None = None) -> str:
    return f"Received: value={value!r}" + ("" if count is None else f", count={count}")


#: The tools every host gets as they are (``test_reconnection`` is built per host from config).
TOOLS: tuple[mcphost.Tool, ...] = (
    simple_text, image_content, audio_content, embedded_resource, multiple_content_types,
    tool_with_progress, error_handling, tool_with_logging, sampling, elicitation,
    elicitation_sep1034_defaults, elicitation_sep1330_enums, json_schema_2020_12_tool, custom_header,
    *STATELESS_TOOLS,
    *TASK_TOOLS,
)


# -- resources -------------------------------------------------------------------------------------

@mcphost.resource("test://static-text", name="static-text", title="Static text resource", mime_type="text/plain")
def static_text() -> str:
    """A fixed text resource."""
    return STATIC_TEXT


@mcphost.resource("test://static-binary", name="static-binary", title="Static binary resource",
                  mime_type="image/png")
def static_binary() -> bytes:
    """A fixed binary resource: a 1x1 PNG, read as a base64 blob."""
    return PNG


@mcphost.resource_template("test://template/{id}/data", name="template-data", title="Template resource",
                           mime_type="application/json")
def template_data(id: str) -> dict[str, Any]:
    """JSON data for any id: {"id", "templateTest": true, "data"}."""
    return {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}


RESOURCE_TEMPLATES: tuple[mcphost.ResourceTemplate, ...] = (template_data,)


# -- prompts ----------------------------------------------------------------------------------------

ARG1_SUGGESTIONS = ("testValue1", "test", "test-alpha", "test-beta", "example")


def complete_arg1(value: str, context: Mapping[str, str]) -> list[str]:
    return [candidate for candidate in ARG1_SUGGESTIONS if candidate.startswith(value)]


@mcphost.prompt(name="test_simple_prompt", title="Simple prompt")
def simple_prompt() -> list[dict[str, Any]]:
    """A prompt without arguments: one user text message."""
    return [mcphost.message("user", "This is a simple prompt for testing.")]


@mcphost.prompt(name="test_prompt_with_arguments", title="Prompt with arguments",
                completions={"arg1": complete_arg1})
def prompt_with_arguments(arg1: str, arg2: str) -> list[dict[str, Any]]:
    """A prompt that puts both of its required arguments into its message.

    Args:
        arg1: First test argument.
        arg2: Second test argument.
    """
    return [mcphost.message("user", f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]


@mcphost.prompt(name="test_prompt_with_embedded_resource", title="Prompt with embedded resource")
def prompt_with_embedded_resource(resourceUri: str) -> list[dict[str, Any]]:
    """A prompt whose first message embeds a text/plain resource at the given URI.

    Args:
        resourceUri: URI of the resource to embed.
    """
    return [
        mcphost.message("user", mcphost.embedded_resource(resourceUri, mime_type="text/plain",
                                                          text="Embedded resource content for testing.")),
        mcphost.message("user", "Please process the embedded resource above."),
    ]


@mcphost.prompt(name="test_prompt_with_image", title="Prompt with image")
def prompt_with_image() -> list[dict[str, Any]]:
    """A prompt whose first message is an image (a 1x1 PNG)."""
    return [
        mcphost.message("user", mcphost.image(PNG, "image/png")),
        mcphost.message("user", "Please analyze the image above."),
    ]


PROMPTS: tuple[mcphost.Prompt, ...] = (
    simple_prompt, prompt_with_arguments, prompt_with_embedded_resource, prompt_with_image, *STATELESS_PROMPTS,
)
