"""Kernel tests for what a tool asks of the client: elicitation (form and URL), sampling and roots,
including missing capabilities, malformed answers (A16), client errors and timeouts (F8)."""

import asyncio
import json
from typing import Any

import pytest

import mcphost
from mcphost import Context
from tests.support.kernel_support import connected, make, notifications, text_of, wait_for

FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "age": {"type": "integer", "minimum": 0},
        "email": {"type": "string", "format": "email"},
        "subscribe": {"type": "boolean"},
    },
    "required": ["name"],
}


def outcome(exc: mcphost.ClientRequestError) -> str:
    return f"error {exc.code}: {exc.message}"


@mcphost.tool
async def ask(ctx: Context) -> str:
    """Ask for a name and report what came back (or the error)."""
    try:
        answer = await ctx.elicit("Who are you?", FORM)
    except mcphost.ClientRequestError as exc:
        return outcome(exc)
    return f"{answer.action} {json.dumps(answer.content, sort_keys=True)} accepted={answer.accepted}"


@mcphost.tool
async def ask_uncaught(ctx: Context) -> str:
    answer = await ctx.elicit("Who are you?", FORM)
    return answer.action


@mcphost.tool
async def ask_url(elicitation_id: str = "", *, ctx: Context) -> str:
    try:
        answer = await ctx.elicit_url("Link your account", "https://example.com/link?state=abc",
                                      elicitation_id=elicitation_id or None)
    except mcphost.ClientRequestError as exc:
        return outcome(exc)
    return f"{answer.action} {answer.content}"


@mcphost.tool
async def ask_quickly(ctx: Context) -> str:
    try:
        answer = await ctx.elicit("Quick!", FORM, timeout=0.1)
    except mcphost.ClientRequestError as exc:
        return outcome(exc)
    return answer.action


@mcphost.tool
async def ask_quickly_uncaught(ctx: Context) -> str:
    return (await ctx.elicit("Quick!", FORM, timeout=0.1)).action


@mcphost.tool
async def echo(text: str) -> str:
    return text


ELICIT_TOOLS = [ask, ask_uncaught, ask_url, ask_quickly, ask_quickly_uncaught, echo]


def answering(answer: Any) -> Any:
    seen: list[dict[str, Any]] = []

    def callback(params: dict[str, Any]) -> Any:
        seen.append(params)
        return answer

    callback.seen = seen  # type: ignore[attr-defined]
    return callback


def elicit_requests(client: Any) -> list[dict[str, Any]]:
    return [r for r in client.server_requests if r["method"] == "elicitation/create"]


# -- elicitation: the happy paths ------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_elicit_accept(version: str) -> None:
    cb = answering({"action": "accept", "content": {"name": "Ada", "age": 36, "subscribe": True}})
    async with connected(make(*ELICIT_TOOLS), protocol_version=version, elicitation=cb) as client:
        result = await client.call_tool("ask")
    assert text_of(result) == 'accept {"age": 36, "name": "Ada", "subscribe": true} accepted=True'
    [request] = elicit_requests(client)
    params = request["params"]
    assert params["message"] == "Who are you?"
    assert params["requestedSchema"] == FORM
    if version == "2025-06-18":
        assert "mode" not in params  # mode arrived in 2025-11-25
    else:
        assert params["mode"] == "form"
    # The question went out before the tool's reply.
    assert [m.get("method") for m, _ in client.sent[1:]] == ["elicitation/create", None]


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_elicit_decline_and_cancel(action: str, version: str) -> None:
    cb = answering({"action": action})
    async with connected(make(*ELICIT_TOOLS), protocol_version=version, elicitation=cb) as client:
        assert text_of(await client.call_tool("ask")) == f"{action} null accepted=False"


async def test_content_on_a_decline_is_dropped() -> None:
    cb = answering({"action": "decline", "content": {"name": "ignored"}})
    async with connected(make(*ELICIT_TOOLS), elicitation=cb) as client:
        assert text_of(await client.call_tool("ask")) == "decline null accepted=False"


async def test_unknown_extra_fields_in_the_answer_are_ignored() -> None:
    cb = answering({"action": "accept", "content": {"name": "Ada"}, "_meta": {"x": 1}, "mood": "happy",
                    "unexpected": [1, 2, 3]})
    async with connected(make(*ELICIT_TOOLS), elicitation=cb) as client:
        assert text_of(await client.call_tool("ask")) == 'accept {"name": "Ada"} accepted=True'


async def test_async_elicitation_callback_and_session_keeps_serving() -> None:
    async def cb(params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return {"action": "accept", "content": {"name": "Bo"}}

    async with connected(make(*ELICIT_TOOLS), elicitation=cb) as client:
        results = await asyncio.gather(*(client.call_tool("ask") for _ in range(3)))
        assert [text_of(r) for r in results] == ['accept {"name": "Bo"} accepted=True'] * 3
        ids = [r["id"] for r in elicit_requests(client)]
        assert len(set(ids)) == 3  # every server-to-client request has its own id
        assert client.session is not None and client.session.pending == {}


# -- elicitation: not available ------------------------------------------------------------------------


async def test_elicitation_is_not_available_in_2025_03_26() -> None:
    cb = answering({"action": "accept", "content": {"name": "Ada"}})
    async with connected(make(*ELICIT_TOOLS), protocol_version="2025-03-26", elicitation=cb) as client:
        caught = text_of(await client.call_tool("ask"))
        uncaught = await client.call_tool("ask_uncaught")
        url = text_of(await client.call_tool("ask_url"))
    assert caught.startswith("error -32601")
    assert "2025-03-26" in caught
    assert uncaught["isError"] is True and "2025-03-26" in text_of(uncaught)
    assert url.startswith("error -32601")
    assert elicit_requests(client) == [] and cb.seen == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_client_without_the_elicitation_capability(version: str) -> None:
    async with connected(make(*ELICIT_TOOLS), protocol_version=version) as client:
        caught = text_of(await client.call_tool("ask"))
        uncaught = await client.call_tool("ask_uncaught")
    assert caught.startswith("error -32601") and "elicitation" in caught
    assert uncaught["isError"] is True and "elicitation" in text_of(uncaught)
    assert client.server_requests == []


@pytest.mark.parametrize("declared", [{}, {"form": {}}])
async def test_url_mode_requires_the_url_capability(declared: dict[str, Any]) -> None:
    cb = answering({"action": "accept", "content": {"name": "x"}})
    async with connected(make(*ELICIT_TOOLS), elicitation=cb, capabilities={"elicitation": declared}) as client:
        assert text_of(await client.call_tool("ask_url")).startswith("error -32601")
        # Form mode is what an empty capability (or form) means.
        assert text_of(await client.call_tool("ask")) == 'accept {"name": "x"} accepted=True'
    assert [r["params"].get("mode") for r in elicit_requests(client)] == ["form"]


@pytest.mark.parametrize("declared", [True, "form", ["url"]])
async def test_a_malformed_elicitation_capability_means_form_only(declared: Any) -> None:
    cb = answering({"action": "accept", "content": {"name": "x"}})
    async with connected(make(*ELICIT_TOOLS), elicitation=cb, capabilities={"elicitation": declared}) as client:
        assert text_of(await client.call_tool("ask_url")).startswith("error -32601")
        assert text_of(await client.call_tool("ask")) == 'accept {"name": "x"} accepted=True'


async def test_url_only_client_gets_no_form_elicitation() -> None:
    cb = answering({"action": "accept", "content": {"name": "x"}})
    async with connected(make(*ELICIT_TOOLS), elicitation=cb, capabilities={"elicitation": {"url": {}}}) as client:
        assert text_of(await client.call_tool("ask")).startswith("error -32601")
        assert text_of(await client.call_tool("ask_url")) == "accept None"
    assert [r["params"]["mode"] for r in elicit_requests(client)] == ["url"]


@pytest.mark.parametrize("elicitation_id", ["", "my-elicitation-1"])
async def test_url_elicitation_in_2025_11_25(elicitation_id: str) -> None:
    cb = answering({"action": "accept", "content": {"ignored": True}})
    async with connected(make(*ELICIT_TOOLS), elicitation=cb) as client:
        result = await client.call_tool("ask_url", {"elicitation_id": elicitation_id} if elicitation_id else {})
    assert text_of(result) == "accept None"  # URL mode: accept means consent, no content
    [request] = elicit_requests(client)
    params = request["params"]
    assert params["mode"] == "url"
    assert params["url"] == "https://example.com/link?state=abc"
    assert "requestedSchema" not in params
    assert isinstance(params["elicitationId"], str) and params["elicitationId"]
    if elicitation_id:
        assert params["elicitationId"] == elicitation_id


async def test_url_elicitation_ids_are_unique() -> None:
    cb = answering({"action": "decline"})
    async with connected(make(*ELICIT_TOOLS), elicitation=cb) as client:
        await client.call_tool("ask_url")
        await client.call_tool("ask_url")
    ids = [r["params"]["elicitationId"] for r in elicit_requests(client)]
    assert len(set(ids)) == 2


async def test_url_elicitation_is_not_available_in_2025_06_18() -> None:
    cb = answering({"action": "accept"})
    async with connected(make(*ELICIT_TOOLS), protocol_version="2025-06-18", elicitation=cb,
                         capabilities={"elicitation": {"form": {}, "url": {}}}) as client:
        result = text_of(await client.call_tool("ask_url"))
    assert result.startswith("error -32601")
    assert elicit_requests(client) == []


# -- elicitation: malformed answers (A16) -----------------------------------------------------------------


@pytest.mark.parametrize("answer", [
    {"action": "maybe"},
    {"action": "ACCEPT", "content": {"name": "x"}},
    {"action": None},
    {"action": ["accept"]},
    {"action": {"accept": True}},
    {"content": {"name": "x"}},
])
async def test_invalid_action_is_an_error_to_the_tool(answer: dict[str, Any]) -> None:
    async with connected(make(*ELICIT_TOOLS), elicitation=answering(answer)) as client:
        result = text_of(await client.call_tool("ask"))
        assert result.startswith("error -32602")
        assert "action" in result
        uncaught = await client.call_tool("ask_uncaught")
        assert uncaught["isError"] is True and "action" in text_of(uncaught)
        assert text_of(await client.call_tool("echo", {"text": "ok"})) == "ok"


@pytest.mark.parametrize("content, problem", [
    ({"age": 3}, "name"),
    ({"name": 5}, "5"),
    ({"name": ""}, "non-empty"),
    ({"name": "Ada", "age": -1}, "minimum"),
    ({"name": "Ada", "age": "old"}, "old"),
    ({"name": "Ada", "email": "not-an-email"}, "email"),
    ({"name": "Ada", "subscribe": "yes"}, "yes"),
])
async def test_content_violating_the_requested_schema_is_an_error(content: dict[str, Any], problem: str) -> None:
    cb = answering({"action": "accept", "content": content})
    async with connected(make(*ELICIT_TOOLS), elicitation=cb) as client:
        result = text_of(await client.call_tool("ask"))
        assert result.startswith("error -32602")
        assert "schema" in result and problem in result
        assert text_of(await client.call_tool("echo", {"text": "ok"})) == "ok"


@pytest.mark.parametrize("content", [None, "Ada", ["Ada"], 1])
async def test_accept_without_a_content_object_is_an_error(content: Any) -> None:
    answer: dict[str, Any] = {"action": "accept"}
    if content is not None:
        answer["content"] = content
    async with connected(make(*ELICIT_TOOLS), elicitation=answering(answer)) as client:
        assert text_of(await client.call_tool("ask")).startswith("error -32602")


@pytest.mark.parametrize("result", [["accept"], "accept", 1, None])
async def test_a_non_object_result_is_an_error(result: Any) -> None:
    async with connected(make(*ELICIT_TOOLS), elicitation=answering(result)) as client:
        out = text_of(await client.call_tool("ask"))
        assert out.startswith("error -32602")
        assert "non-object" in out


async def test_client_error_answer_reaches_the_tool_with_its_code() -> None:
    def refuse(params: dict[str, Any]) -> Any:
        raise mcphost.McpError(-32603, "the user closed the window", {"why": "closed"})

    async with connected(make(*ELICIT_TOOLS), elicitation=refuse) as client:
        assert text_of(await client.call_tool("ask")) == "error -32603: the user closed the window"
        uncaught = await client.call_tool("ask_uncaught")
        assert uncaught == {"content": [{"type": "text", "text": "the user closed the window"}], "isError": True}


@pytest.mark.parametrize("error, expected", [
    ({"code": "x", "message": "odd"}, "error 0: odd"),
    ({"code": 1.5, "message": "float code"}, "error 0: float code"),
    ({"message": "no code"}, "error 0: no code"),
    ({"code": -5}, "error -5: client error"),
    ({}, "error 0: client error"),
])
async def test_malformed_client_error_answers_do_not_crash(error: dict[str, Any], expected: str) -> None:
    async with connected(make(*ELICIT_TOOLS), elicitation=never_answers) as client:
        pending = asyncio.ensure_future(client.call_tool("ask"))
        await wait_for(lambda: elicit_requests(client))
        request_id = elicit_requests(client)[0]["id"]
        assert client.send({"jsonrpc": "2.0", "id": request_id, "error": error}) is None
        assert text_of(await pending) == expected
        assert text_of(await client.call_tool("echo", {"text": "ok"})) == "ok"


# -- elicitation: timeouts (F8) ---------------------------------------------------------------------------


async def never_answers(params: dict[str, Any]) -> Any:
    await asyncio.Event().wait()


async def test_elicitation_timeout_cancels_at_the_client_and_the_session_keeps_serving() -> None:
    async with connected(make(*ELICIT_TOOLS), elicitation=never_answers) as client:
        result = text_of(await client.call_tool("ask_quickly"))
        assert result == "error -32001: Request 'elicitation/create' timed out"
        [request] = elicit_requests(client)
        cancels = notifications(client, "notifications/cancelled")
        assert len(cancels) == 1
        assert cancels[0]["requestId"] == request["id"]
        assert isinstance(cancels[0].get("reason"), str)
        assert client.session is not None and client.session.pending == {}

        # A late answer is discarded without a reply or an error.
        before = len(client.sent)
        assert client.send({"jsonrpc": "2.0", "id": request["id"],
                            "result": {"action": "accept", "content": {"name": "late"}}}) is None
        assert len(client.sent) == before

        uncaught = await client.call_tool("ask_quickly_uncaught")
        assert uncaught["isError"] is True and "timed out" in text_of(uncaught)
        assert text_of(await client.call_tool("echo", {"text": "still here"})) == "still here"
        assert len(notifications(client, "notifications/cancelled")) == 2


async def test_client_request_timeout_from_config_applies_to_sampling() -> None:
    @mcphost.tool
    async def sample_it(ctx: Context) -> str:
        try:
            await ctx.sample("hello")
        except mcphost.ClientRequestError as exc:
            return outcome(exc)
        return "answered"

    h = make(sample_it, echo, server={"client_request_timeout": 0.05})
    async with connected(h, sampling=never_answers) as client:
        assert text_of(await client.call_tool("sample_it")) == (
            "error -32001: Request 'sampling/createMessage' timed out")
        [request] = [r for r in client.server_requests if r["method"] == "sampling/createMessage"]
        assert notifications(client, "notifications/cancelled")[0]["requestId"] == request["id"]
        assert text_of(await client.call_tool("echo", {"text": "ok"})) == "ok"


async def test_cancelling_the_tool_abandons_its_pending_question() -> None:
    async with connected(make(*ELICIT_TOOLS), elicitation=never_answers) as client:
        pending = asyncio.ensure_future(client.raw_request("tools/call", {"name": "ask", "arguments": {}},
                                                           request_id="q"))
        await wait_for(lambda: elicit_requests(client))
        client.notify("notifications/cancelled", {"requestId": "q"})
        assert await pending is None
        assert client.session is not None and client.session.pending == {}
        assert client.session.inflight == {}


# -- sampling ------------------------------------------------------------------------------------------

SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "test-model",
           "stopReason": "endTurn"}


@mcphost.tool
async def capital(country: str, ctx: Context) -> str:
    try:
        answer = await ctx.sample(f"Capital of {country}?", max_tokens=50, system_prompt="Be brief.",
                                  temperature=0.2, model_preferences={"hints": [{"name": "small"}]},
                                  stop_sequences=["\n"], metadata={"trace": "t"})
    except mcphost.ClientRequestError as exc:
        return outcome(exc)
    return f"{answer['model']}: {answer['content']['text']}"


@mcphost.tool
async def capital_uncaught(ctx: Context) -> str:
    return (await ctx.sample([{"role": "user", "content": {"type": "text", "text": "hi"}}]))["model"]


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
async def test_sampling_round_trip(version: str) -> None:
    cb = answering(SAMPLED)
    async with connected(make(capital, capital_uncaught), protocol_version=version, sampling=cb) as client:
        assert text_of(await client.call_tool("capital", {"country": "France"})) == "test-model: Paris"
        assert text_of(await client.call_tool("capital_uncaught")) == "test-model"
    first = cb.seen[0]  # type: ignore[attr-defined]
    assert first == {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Capital of France?"}}],
        "maxTokens": 50, "systemPrompt": "Be brief.", "temperature": 0.2,
        "modelPreferences": {"hints": [{"name": "small"}]}, "stopSequences": ["\n"], "metadata": {"trace": "t"},
    }
    assert cb.seen[1]["maxTokens"] == 1000  # type: ignore[attr-defined]


async def test_sampling_without_the_capability() -> None:
    async with connected(make(capital, capital_uncaught)) as client:
        caught = text_of(await client.call_tool("capital", {"country": "France"}))
        uncaught = await client.call_tool("capital_uncaught")
    assert caught.startswith("error -32601") and "sampling" in caught
    assert uncaught["isError"] is True and "sampling" in text_of(uncaught)
    assert client.server_requests == []


@pytest.mark.parametrize("code", [-1, -32600, -32603, 1234])
async def test_sampling_answered_with_a_jsonrpc_error(code: int) -> None:
    def refuse(params: dict[str, Any]) -> Any:
        raise mcphost.McpError(code, "User rejected sampling request")

    async with connected(make(capital, capital_uncaught), sampling=refuse) as client:
        assert text_of(await client.call_tool("capital", {"country": "X"})) == (
            f"error {code}: User rejected sampling request")
        uncaught = await client.call_tool("capital_uncaught")
        assert uncaught["isError"] is True
        assert text_of(uncaught) == "User rejected sampling request"


# -- roots -------------------------------------------------------------------------------------------------

ROOTS = [{"uri": "file:///home/ann/project", "name": "project"}, {"uri": "file:///tmp"}]


@mcphost.tool
async def roots(ctx: Context) -> str:
    try:
        found = await ctx.list_roots()
    except mcphost.ClientRequestError as exc:
        return outcome(exc)
    return json.dumps(found)


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
async def test_list_roots(version: str) -> None:
    async with connected(make(roots), protocol_version=version, roots=ROOTS) as client:
        assert json.loads(text_of(await client.call_tool("roots"))) == ROOTS
    [request] = client.server_requests
    assert request["method"] == "roots/list"


async def test_roots_callback_and_odd_answers() -> None:
    answers = iter([{"roots": []}, {"roots": "not a list"}, {}])

    def cb(params: dict[str, Any]) -> Any:
        return next(answers)

    async with connected(make(roots), roots=cb) as client:
        assert json.loads(text_of(await client.call_tool("roots"))) == []
        assert json.loads(text_of(await client.call_tool("roots"))) == []
        assert json.loads(text_of(await client.call_tool("roots"))) == []


async def test_roots_without_the_capability() -> None:
    async with connected(make(roots)) as client:
        out = text_of(await client.call_tool("roots"))
    assert out.startswith("error -32601") and "roots" in out
    assert client.server_requests == []


async def test_roots_answered_with_an_error() -> None:
    def fail(params: dict[str, Any]) -> Any:
        raise mcphost.McpError(-32603, "roots unavailable")

    async with connected(make(roots), roots=fail) as client:
        assert text_of(await client.call_tool("roots")) == "error -32603: roots unavailable"


async def test_server_requests_use_their_own_id_sequence_per_session() -> None:
    h = make(roots)
    await h.start()
    try:
        async with connected(h, roots=ROOTS) as one, connected(h, roots=ROOTS) as two:
            await one.call_tool("roots")
            await one.call_tool("roots")
            await two.call_tool("roots")
        assert [r["id"] for r in one.server_requests] == [1, 2]
        assert [r["id"] for r in two.server_requests] == [1]
    finally:
        await h.stop()
