"""The 2026-07-28 fixtures: stateless diagnostics (SEP-2575) and ``input_required`` results (SEP-2322).

Every fixture here is an ordinary mcphost handler written against the one Context API. For a
2026-07-28 request, ``ctx.elicit`` / ``ctx.sample`` / ``ctx.list_roots`` look the answer up by
``key`` among the request's ``inputResponses`` (and the answers sealed into ``requestState``);
when it is missing the host ends the handler and answers an ``InputRequiredResult`` naming every
question asked so far, and the client's retry runs the handler again from the start. Handlers
must therefore be safe to re-run up to their last question: none of them has a side effect
before it. For a session-era client the same calls are server-to-client requests (``key`` is
ignored), so every fixture also works on 2025-06-18 / 2025-11-25.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

import mcphost
from mcphost import ClientRequestError, Context
from mcphost.protocol.errors import METHOD_NOT_FOUND, MISSING_CLIENT_CAPABILITY

__all__ = [
    "CAPITAL_QUESTION",
    "STATELESS_PROMPTS",
    "STATELESS_TOOLS",
    "reply_text",
]

T = TypeVar("T")

#: The question the sampling fixtures put to the client's model.
CAPITAL_QUESTION = "What is the capital of France?"
#: What test_logging_tool logs, at which level.
LOGGING_TOOL_MESSAGES = (("debug", "Logging tool: debug details"), ("info", "Logging tool: started"),
                         ("warning", "Logging tool: a warning for testing"))

NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "Your name"}},
    "required": ["name"],
}
COLOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"color": {"type": "string", "description": "Your favorite color"}},
    "required": ["color"],
}
OK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean", "description": "Whether to continue"}},
    "required": ["ok"],
}
CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "description": "Confirm the operation"}},
    "required": ["confirm"],
}
CONTEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"context": {"type": "string", "description": "Context for the prompt"}},
    "required": ["context"],
}

READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
ASKS_CLIENT = {"readOnlyHint": True}


def reply_text(reply: Mapping[str, Any]) -> str:
    """The text of a CreateMessageResult (one block or a list of them)."""
    content = reply.get("content")
    blocks = content if isinstance(content, list) else [content]
    texts = [b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text" and "text" in b]
    if texts:
        return "".join(str(text) for text in texts)
    kinds = ", ".join(str(b.get("type")) for b in blocks if isinstance(b, dict))
    return f"<no text: {kinds or 'no content'}>"


def _field(answer: mcphost.ElicitResult, name: str) -> Any:
    return (answer.content or {}).get(name) if answer.accepted else None


def _roots_text(roots: list[Any]) -> str:
    """``uri (name), ...`` of the roots that have a URI (a client's answer is not trusted to be well-formed)."""
    shown = [f"{root['uri']} ({root['name']})" if isinstance(root.get("name"), str) else str(root["uri"])
             for root in roots if isinstance(root, dict) and isinstance(root.get("uri"), str)]
    return ", ".join(shown) if shown else "no roots"


async def _if_declared(ask: Awaitable[T]) -> T | None:
    """``await ask``, or None when the client's capabilities do not allow the question.

    2026-07-28 refuses such a question with -32021 before anything is asked; the session era
    with -32601 (the capability was not declared at initialize).
    """
    try:
        return await ask
    except ClientRequestError as exc:
        if exc.code in (MISSING_CLIENT_CAPABILITY, METHOD_NOT_FOUND):
            return None
        raise


# -- SEP-2575 diagnostics (the server-stateless scenario) ----------------------------------------------

@mcphost.tool(name="test_missing_capability", annotations=ASKS_CLIENT)
async def missing_capability(*, ctx: Context) -> str:
    """Needs the client's sampling capability: asks its model one question (sampling, key "capability_probe").

    A 2026-07-28 request whose clientCapabilities lack "sampling" fails with -32021 and
    data.requiredCapabilities {"sampling": {}}; a session-era client gets an isError result.
    """
    reply = await ctx.sample("Reply with one word: are you there?", max_tokens=20, key="capability_probe")
    return f"Sampling capability is declared. LLM response: {reply_text(reply)}"


@mcphost.tool(name="test_streaming_elicitation", annotations=READ_ONLY)
async def streaming_elicitation(*, ctx: Context) -> str:
    """Stream progress and log notifications on the response, then complete without asking the client anything.

    Where a session-era server would send elicitation/create on this stream, a 2026-07-28 response
    stream carries notifications only (progress with a progressToken, logs with a logLevel) and
    the result; questions would travel in an InputRequiredResult instead. Always succeeds.
    """
    steps = ("Streaming started", "Streaming in progress", "Streaming finished")
    for step, message in enumerate(steps):
        if step:
            await asyncio.sleep(0.01)
        await ctx.progress(step, total=len(steps) - 1, message=message)
        await ctx.info(message)
    return "Streaming complete: notifications only, no requests on the response stream."


@mcphost.tool(name="test_logging_tool", annotations=READ_ONLY)
async def logging_tool(*, ctx: Context) -> str:
    """Log a debug, an info and a warning message, then succeed.

    A 2026-07-28 client receives them only when its request's _meta names a logLevel (and only
    those at or above it); without one nothing is sent. Session-era clients: logging/setLevel.
    """
    for level, message in LOGGING_TOOL_MESSAGES:
        await ctx.log(level, message)  # type: ignore[arg-type]
    return "Logging tool completed"


@mcphost.tool(name="test_trigger_tool_change", annotations={"readOnlyHint": False, "idempotentHint": True})
async def trigger_tool_change(*, ctx: Context) -> str:
    """Announce that the tool list changed: notifications/tools/list_changed to sessions and listen streams."""
    await ctx.host.notify_list_changed("tools")
    return "Sent notifications/tools/list_changed"


@mcphost.tool(name="test_trigger_prompt_change", annotations={"readOnlyHint": False, "idempotentHint": True})
async def trigger_prompt_change(*, ctx: Context) -> str:
    """Announce that the prompt list changed: notifications/prompts/list_changed to sessions and listen streams."""
    await ctx.host.notify_list_changed("prompts")
    return "Sent notifications/prompts/list_changed"


# -- SEP-2322 input_required results ----------------------------------------------------------------

@mcphost.tool(name="test_input_required_result_elicitation", annotations=ASKS_CLIENT)
async def input_required_result_elicitation(*, ctx: Context) -> str:
    """Ask the user's name (form elicitation {name: string}, key "user_name") and greet them: "Hello, <name>!"."""
    answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    name = _field(answer, "name")
    return f"Hello, {name}!" if name is not None else f"No name given (action={answer.action})."


@mcphost.tool(name="test_input_required_result_sampling", annotations=ASKS_CLIENT)
async def input_required_result_sampling(*, ctx: Context) -> str:
    """Ask the client's model "What is the capital of France?" (sampling, maxTokens 100, key "capital_question")."""
    reply = await ctx.sample(CAPITAL_QUESTION, max_tokens=100, key="capital_question")
    return f"LLM response: {reply_text(reply)}"


@mcphost.tool(name="test_input_required_result_list_roots", annotations=ASKS_CLIENT)
async def input_required_result_list_roots(*, ctx: Context) -> str:
    """Ask for the client's roots (roots/list, key "client_roots") and list them."""
    roots = await ctx.list_roots(key="client_roots")
    return f"Client roots: {_roots_text(roots)}"


@mcphost.tool(name="test_input_required_result_request_state", annotations=ASKS_CLIENT)
async def input_required_result_request_state(*, ctx: Context) -> str:
    """Ask to continue (elicitation {ok: boolean}, key "confirm_state"); the answer round-trips with requestState.

    The first result carries an integrity-protected requestState; the retry echoes it with the
    answer and gets a result containing "state-ok".
    """
    answer = await ctx.elicit("Continue with the request state test?", OK_SCHEMA, key="confirm_state")
    if not answer.accepted:
        return f"state-ok: nothing to continue (action={answer.action})"
    return f"state-ok: ok={'true' if _field(answer, 'ok') else 'false'}"


@mcphost.tool(name="test_input_required_result_multiple_inputs", annotations=ASKS_CLIENT)
async def input_required_result_multiple_inputs(*, ctx: Context) -> str:
    """Ask three questions at once: the user's name (elicitation, "user_name"), the model (sampling,
    "capital_question") and the roots ("client_roots"); one InputRequiredResult lists all three."""
    answer, reply, roots = await asyncio.gather(
        ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name"),
        ctx.sample(CAPITAL_QUESTION, max_tokens=100, key="capital_question"),
        ctx.list_roots(key="client_roots"),
    )
    name = _field(answer, "name")
    return (f"Name: {name if name is not None else f'(action={answer.action})'}; "
            f"LLM response: {reply_text(reply)}; Client roots: {_roots_text(roots)}")


@mcphost.tool(name="test_input_required_result_multi_round", annotations=ASKS_CLIENT)
async def input_required_result_multi_round(*, ctx: Context) -> str:
    """Ask in two rounds: the user's name (key "step1"), then their favorite color (key "step2")."""
    first = await ctx.elicit("Step 1: what is your name?", NAME_SCHEMA, key="step1")
    name = _field(first, "name")
    if name is None:
        return f"Stopped after step 1 (action={first.action})."
    second = await ctx.elicit(f"Step 2: {name}, what is your favorite color?", COLOR_SCHEMA, key="step2")
    color = _field(second, "color")
    if color is None:
        return f"Hello, {name}! No color given (action={second.action})."
    return f"Hello, {name}! Your favorite color is {color}."


@mcphost.tool(name="test_input_required_result_tampered_state", annotations=ASKS_CLIENT)
async def input_required_result_tampered_state(*, ctx: Context) -> str:
    """Ask for a confirmation (elicitation {confirm: boolean}, key "confirmation"); a retry whose
    requestState was altered is refused with -32602."""
    answer = await ctx.elicit("Confirm the operation?", CONFIRM_SCHEMA, key="confirmation")
    confirmed = _field(answer, "confirm")
    return f"Confirmed: {'true' if confirmed else 'false'} (action={answer.action})"


@mcphost.tool(name="test_input_required_result_capabilities", annotations=ASKS_CLIENT)
async def input_required_result_capabilities(*, ctx: Context) -> str:
    """Ask the user's name (elicitation, "user_name") and the model (sampling, "capital_question"), each only
    if the client declared that capability: a client with just {sampling: {}} is asked nothing else."""
    answer, reply = await asyncio.gather(
        _if_declared(ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")),
        _if_declared(ctx.sample(CAPITAL_QUESTION, max_tokens=100, key="capital_question")),
    )
    elicited = "not asked (no elicitation capability)" if answer is None else (
        f"{_field(answer, 'name')}" if answer.accepted else f"(action={answer.action})")
    sampled = "not asked (no sampling capability)" if reply is None else reply_text(reply)
    return f"Name: {elicited}; LLM response: {sampled}"


@mcphost.prompt(name="test_input_required_result_prompt", title="Prompt with an input_required result")
async def input_required_result_prompt(*, ctx: Context) -> list[dict[str, Any]]:
    """A prompt that first asks the user for context (elicitation {context: string}, key "user_context")
    and then puts it into its message."""
    answer = await ctx.elicit("What context should the prompt include?", CONTEXT_SCHEMA, key="user_context")
    context = _field(answer, "context")
    if context is None:
        return [mcphost.message("user", f"No context was provided (action={answer.action}). Please answer generally.")]
    return [mcphost.message("user", f"Context from the user: {context}. Please take it into account.")]


#: The 2026-07-28 tools (listed in every revision: they work in the session era too).
STATELESS_TOOLS: tuple[mcphost.Tool, ...] = (
    missing_capability, streaming_elicitation, logging_tool, trigger_tool_change, trigger_prompt_change,
    input_required_result_elicitation, input_required_result_sampling, input_required_result_list_roots,
    input_required_result_request_state, input_required_result_multiple_inputs, input_required_result_multi_round,
    input_required_result_tampered_state, input_required_result_capabilities,
)
STATELESS_PROMPTS: tuple[mcphost.Prompt, ...] = (input_required_result_prompt,)
