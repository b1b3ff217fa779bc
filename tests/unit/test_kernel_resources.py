"""Kernel tests for resources (read, templates, errors, subscriptions), prompts and completion."""

import asyncio
import base64
import json
from typing import Any

import pytest

import mcphost
from mcphost import Context
from tests.support.kernel_support import VERSIONS, connected, error_of, make, notifications, text_of


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    return request.param


READS: list[tuple[str, Any]] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    READS.clear()


# -- resources --------------------------------------------------------------------------------------------


@mcphost.resource("memo://text", description="Plain text.")
def memo_text() -> str:
    return "hello text"


@mcphost.resource("memo://markdown", mime_type="text/markdown")
async def memo_markdown() -> str:
    await asyncio.sleep(0)
    return "# Title"


@mcphost.resource("memo://bytes")
def memo_bytes() -> bytes:
    return b"\x00\x01\xffbinary"


@mcphost.resource("memo://png", mime_type="image/png")
def memo_png() -> bytes:
    return b"\x89PNG"


@mcphost.resource("memo://dict")
def memo_dict() -> dict[str, Any]:
    return {"debug": False, "items": [1, 2]}


@mcphost.resource("memo://contents")
def memo_contents() -> Any:
    return mcphost.resource_contents("memo://contents", text="explicit", mime_type="text/csv")


@mcphost.resource("memo://several", mime_type="text/plain")
def memo_several() -> Any:
    return ["first", b"second", mcphost.resource_contents("memo://several/3", blob=b"3", mime_type="x/y")]


@mcphost.resource("memo://missing-file")
def memo_missing_file() -> str:
    raise FileNotFoundError("/srv/private/path.txt")


@mcphost.resource("memo://missing-key")
def memo_missing_key() -> str:
    return {}["nope"]  # type: ignore[no-any-return]


@mcphost.resource("memo://none")
def memo_none() -> None:
    return None


@mcphost.resource("memo://broken")
def memo_broken() -> str:
    raise RuntimeError("connection string postgres://admin:SECRET@db")


@mcphost.resource("memo://protocol")
def memo_protocol() -> str:
    raise mcphost.McpError(-32602, "memo is archived", {"uri": "memo://protocol"})


@mcphost.resource("memo://ctx")
async def memo_ctx(ctx: Context) -> str:
    await ctx.info("reading memo")
    return f"method={ctx.method}"


@mcphost.resource_template("users://{user}/posts/{post}", mime_type="application/json")
def user_post(user: str, post: str) -> dict[str, str]:
    READS.append(("user_post", (user, post)))
    return {"user": user, "post": post}


@mcphost.resource_template("files://{+path}")
def files(path: str) -> str:
    READS.append(("files", path))
    if path.startswith("secret"):
        raise PermissionError("denied: SECRET path")
    if path == "gone":
        raise FileNotFoundError(path)
    return f"file {path}"


@mcphost.resource_template("tags://{tag}{?limit}")
def tags(tag: str, limit: str = "10") -> str:
    READS.append(("tags", (tag, limit)))
    return f"{tag} x{limit}"


RESOURCES = [memo_text, memo_markdown, memo_bytes, memo_png, memo_dict, memo_contents, memo_several,
             memo_missing_file, memo_missing_key, memo_none, memo_broken, memo_protocol, memo_ctx,
             user_post, files, tags]


async def test_list_resources_and_templates(version: str) -> None:
    async with connected(make(*RESOURCES), protocol_version=version) as client:
        listed = await client.list_resources()
        templates = await client.list_resource_templates()
    assert [r["uri"] for r in listed] == [r.uri for r in RESOURCES if isinstance(r, mcphost.Resource)]
    assert listed[0] == {"uri": "memo://text", "name": "memo_text", "description": "Plain text."}
    assert [t["uriTemplate"] for t in templates] == [
        "users://{user}/posts/{post}", "files://{+path}", "tags://{tag}{?limit}"]
    assert templates[0] == {"uriTemplate": "users://{user}/posts/{post}", "name": "user_post",
                            "mimeType": "application/json"}


@pytest.mark.parametrize("uri, contents", [
    ("memo://text", [{"uri": "memo://text", "mimeType": "text/plain", "text": "hello text"}]),
    ("memo://markdown", [{"uri": "memo://markdown", "mimeType": "text/markdown", "text": "# Title"}]),
    ("memo://bytes", [{"uri": "memo://bytes", "mimeType": "application/octet-stream",
                       "blob": base64.b64encode(b"\x00\x01\xffbinary").decode()}]),
    ("memo://png", [{"uri": "memo://png", "mimeType": "image/png", "blob": base64.b64encode(b"\x89PNG").decode()}]),
    ("memo://contents", [{"uri": "memo://contents", "mimeType": "text/csv", "text": "explicit"}]),
    ("memo://several", [
        {"uri": "memo://several", "mimeType": "text/plain", "text": "first"},
        {"uri": "memo://several", "mimeType": "text/plain", "blob": base64.b64encode(b"second").decode()},
        {"uri": "memo://several/3", "mimeType": "x/y", "blob": base64.b64encode(b"3").decode()},
    ]),
])
async def test_read_static_resources(uri: str, contents: list[dict[str, Any]], version: str) -> None:
    async with connected(make(*RESOURCES), protocol_version=version) as client:
        assert await client.read_resource(uri) == {"contents": contents}


async def test_dict_resource_is_json_text(version: str) -> None:
    async with connected(make(*RESOURCES), protocol_version=version) as client:
        [content] = (await client.read_resource("memo://dict"))["contents"]
    assert content["uri"] == "memo://dict"
    assert content["mimeType"] == "application/json"
    assert json.loads(content["text"]) == {"debug": False, "items": [1, 2]}


@pytest.mark.parametrize("value", [[1, 2, 3], [{"a": 1}, {"b": 2}], ["x", 1], []])
async def test_list_of_data_is_one_json_text(value: list[Any]) -> None:
    @mcphost.resource("memo://list")
    def memo_list() -> Any:
        return value

    async with connected(make(memo_list)) as client:
        [content] = (await client.read_resource("memo://list"))["contents"]
    assert content["mimeType"] == "application/json"
    assert json.loads(content["text"]) == value


async def test_resource_handler_gets_a_context() -> None:
    async with connected(make(*RESOURCES)) as client:
        result = await client.read_resource("memo://ctx")
    assert result["contents"][0]["text"] == "method=resources/read"
    assert notifications(client, "notifications/message") == [{"level": "info", "data": "reading memo"}]


@pytest.mark.parametrize("uri, expected", [
    ("users://ann/posts/42", ("user_post", ("ann", "42"))),
    ("users://b%20c/posts/x%2Fy", ("user_post", ("b c", "x/y"))),
    ("files://a/b/c.txt", ("files", "a/b/c.txt")),
    ("tags://red?limit=3", ("tags", ("red", "3"))),
    ("tags://blue", ("tags", ("blue", "10"))),
])
async def test_template_variables_reach_the_handler(uri: str, expected: tuple[str, Any]) -> None:
    async with connected(make(*RESOURCES)) as client:
        result = await client.read_resource(uri)
    assert READS == [expected]
    assert [c["uri"] for c in result["contents"]] == [uri]


async def test_template_result_uses_the_template_mime_type() -> None:
    async with connected(make(*RESOURCES)) as client:
        [content] = (await client.read_resource("users://ann/posts/1"))["contents"]
    assert content["mimeType"] == "application/json"
    assert json.loads(content["text"]) == {"user": "ann", "post": "1"}


@pytest.mark.parametrize("uri", [
    "memo://nope", "users://ann/posts", "users://ann/posts/1/extra", "users:///posts/1", "", "MEMO://TEXT",
    "memo://missing-file", "memo://missing-key", "memo://none", "files://gone",
])
async def test_not_found_is_32002_with_the_uri(uri: str, version: str) -> None:
    async with connected(make(*RESOURCES), protocol_version=version) as client:
        reply = await client.raw_request("resources/read", {"uri": uri})
        error = reply["error"]
        assert error["code"] == -32002
        assert error["data"] == {"uri": uri}
        assert "/srv/private" not in json.dumps(reply)
        assert (await client.read_resource("memo://text"))["contents"][0]["text"] == "hello text"


@pytest.mark.parametrize("uri, secret, logged", [
    ("memo://broken", "SECRET@db", "RuntimeError: connection string postgres://admin:"),
    ("files://secret/x", "SECRET path", "PermissionError: denied: SECRET path"),
])
async def test_resource_handler_failure_is_a_generic_internal_error(
        uri: str, secret: str, logged: str, caplog: pytest.LogCaptureFixture) -> None:
    async with connected(make(*RESOURCES)) as client:
        reply = await client.raw_request("resources/read", {"uri": uri})
        assert reply["error"] == {"code": -32603, "message": "Internal error"}
        assert secret not in json.dumps(reply)
        assert (await client.read_resource("memo://text"))["contents"][0]["text"] == "hello text"
    # The detail is in the log (a URL's password redacted where mcphost's log filter is installed).
    assert logged in caplog.text


async def test_mcp_error_from_a_resource_passes_through() -> None:
    async with connected(make(*RESOURCES)) as client:
        error = await error_of(client, "resources/read", {"uri": "memo://protocol"})
    assert error == {"code": -32602, "message": "memo is archived", "data": {"uri": "memo://protocol"}}


@pytest.mark.parametrize("params", [{}, {"uri": 5}, {"uri": None}, {"uri": ["memo://text"]}])
async def test_read_without_a_string_uri_is_invalid_params(params: dict[str, Any]) -> None:
    async with connected(make(*RESOURCES)) as client:
        assert (await error_of(client, "resources/read", params))["code"] == -32602


async def test_a_uri_longer_than_max_read_uri_bytes_is_refused_before_any_handler(version: str) -> None:
    host = make(*RESOURCES, server={"max_read_uri_bytes": 64})
    async with connected(host, protocol_version=version) as client:
        at_limit = "files://" + "p" * 56  # 64 bytes: still read
        assert (await client.read_resource(at_limit))["contents"][0]["text"] == "file " + "p" * 56
        for uri in ("files://" + "p" * 57, "files://" + "é" * 29):  # 65 characters; 66 bytes in 37 characters
            error = await error_of(client, "resources/read", {"uri": uri})
            assert error == {"code": -32602, "message": "URI longer than 64 bytes (server.max_read_uri_bytes)"}
    assert READS == [("files", "p" * 56)]


async def test_static_resource_wins_over_a_matching_template() -> None:
    @mcphost.resource("users://ann/posts/pinned")
    def pinned() -> str:
        return "pinned post"

    async with connected(make(user_post, pinned)) as client:
        assert (await client.read_resource("users://ann/posts/pinned"))["contents"][0]["text"] == "pinned post"
        await client.read_resource("users://ann/posts/2")
    assert READS == [("user_post", ("ann", "2"))]


# -- subscriptions ---------------------------------------------------------------------------------------


@mcphost.tool
async def touch(uri: str, ctx: Context) -> str:
    await ctx.notify_resource_updated(uri)
    return "touched"


async def test_resource_updates_reach_only_subscribed_sessions(version: str) -> None:
    h = make(memo_text, memo_bytes, touch)
    await h.start()
    try:
        async with connected(h, protocol_version=version) as watcher, \
                connected(h, protocol_version=version) as bystander, connected(h, initialize=False) as raw:
            assert await watcher.request("resources/subscribe", {"uri": "memo://text"}) == {}
            assert await watcher.request("resources/subscribe", {"uri": "memo://text"}) == {}  # idempotent
            assert await bystander.request("resources/subscribe", {"uri": "memo://bytes"}) == {}

            assert text_of(await bystander.call_tool("touch", {"uri": "memo://text"})) == "touched"
            assert notifications(watcher, "notifications/resources/updated") == [{"uri": "memo://text"}]
            assert notifications(bystander, "notifications/resources/updated") == []
            assert raw.notifications == []

            await bystander.call_tool("touch", {"uri": "memo://bytes"})
            assert notifications(bystander, "notifications/resources/updated") == [{"uri": "memo://bytes"}]
            assert len(notifications(watcher, "notifications/resources/updated")) == 1

            assert await watcher.request("resources/unsubscribe", {"uri": "memo://text"}) == {}
            assert await watcher.request("resources/unsubscribe", {"uri": "memo://never"}) == {}
            await bystander.call_tool("touch", {"uri": "memo://text"})
            assert len(notifications(watcher, "notifications/resources/updated")) == 1
    finally:
        await h.stop()


async def test_a_closed_session_gets_no_updates() -> None:
    h = make(memo_text, touch)
    await h.start()
    try:
        async with connected(h) as gone:
            await gone.request("resources/subscribe", {"uri": "memo://text"})
        async with connected(h) as other:
            await other.call_tool("touch", {"uri": "memo://text"})
        assert gone.notifications == []
    finally:
        await h.stop()


@pytest.mark.parametrize("method", ["resources/subscribe", "resources/unsubscribe"])
@pytest.mark.parametrize("params", [{}, {"uri": 1}, {"uri": {"u": 1}}])
async def test_subscribe_without_a_string_uri_is_invalid_params(method: str, params: dict[str, Any]) -> None:
    async with connected(make(memo_text)) as client:
        assert (await error_of(client, method, params))["code"] == -32602


# -- prompts -----------------------------------------------------------------------------------------------


@mcphost.prompt(description="Review some code.")
def review(code: str, language: str = "python") -> str:
    return f"Review this {language} code:\n{code}"


@mcphost.prompt
def dialogue(topic: str) -> list[dict[str, Any]]:
    """A short dialogue."""
    return [mcphost.message("user", f"Tell me about {topic}"),
            mcphost.message("assistant", "Sure."),
            mcphost.message("user", mcphost.image(b"img", "image/png"))]


@mcphost.prompt
async def described(topic: str) -> dict[str, Any]:
    """Docstring description."""
    return {"description": f"About {topic}", "messages": [mcphost.message("user", topic)]}


@mcphost.prompt
def mixed() -> list[Any]:
    return ["plain string", mcphost.text("a block"), mcphost.embedded_resource("memo://x", text="embedded")]


@mcphost.prompt
def prompt_broken() -> str:
    raise RuntimeError("prompt SECRET token")


@mcphost.prompt
def prompt_bad_return() -> Any:
    return 42


@mcphost.prompt
async def with_ctx(ctx: Context) -> str:
    return f"{ctx.method} for {ctx.session.client_info['name']}"


PROMPTS = [review, dialogue, described, mixed, prompt_broken, prompt_bad_return, with_ctx]


async def test_list_prompts_declares_arguments(version: str) -> None:
    async with connected(make(*PROMPTS), protocol_version=version) as client:
        listed = {p["name"]: p for p in await client.list_prompts()}
    assert listed["review"] == {"name": "review", "description": "Review some code.", "arguments": [
        {"name": "code", "required": True}, {"name": "language", "required": False}]}
    assert listed["dialogue"]["description"] == "A short dialogue."
    assert "arguments" not in listed["mixed"]
    assert "arguments" not in listed["with_ctx"]  # the context is not an argument


async def test_get_prompt_with_arguments(version: str) -> None:
    async with connected(make(*PROMPTS), protocol_version=version) as client:
        with_default = await client.get_prompt("review", {"code": "x = 1"})
        explicit = await client.get_prompt("review", {"code": "fn main(){}", "language": "rust"})
    assert with_default == {"description": "Review some code.", "messages": [
        {"role": "user", "content": {"type": "text", "text": "Review this python code:\nx = 1"}}]}
    assert explicit["messages"][0]["content"]["text"] == "Review this rust code:\nfn main(){}"


async def test_get_prompt_returning_messages_and_dicts() -> None:
    async with connected(make(*PROMPTS)) as client:
        listed = await client.get_prompt("dialogue", {"topic": "owls"})
        as_dict = await client.get_prompt("described", {"topic": "bats"})
        mix = await client.get_prompt("mixed")
        ctx = await client.get_prompt("with_ctx")
    assert [m["role"] for m in listed["messages"]] == ["user", "assistant", "user"]
    assert listed["messages"][0]["content"] == {"type": "text", "text": "Tell me about owls"}
    assert listed["messages"][2]["content"]["type"] == "image"
    assert listed["description"] == "A short dialogue."
    assert as_dict == {"description": "About bats", "messages": [
        {"role": "user", "content": {"type": "text", "text": "bats"}}]}
    assert mix["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "plain string"}},
        {"role": "user", "content": {"type": "text", "text": "a block"}},
        {"role": "user", "content": {"type": "resource", "resource": {"uri": "memo://x", "text": "embedded"}}},
    ]
    assert ctx["messages"][0]["content"]["text"] == "prompts/get for mcphost-memory-client"


async def test_unknown_arguments_are_not_passed_on() -> None:
    async with connected(make(*PROMPTS)) as client:
        result = await client.get_prompt("review", {"code": "c", "extra": "ignored"})
    assert result["messages"][0]["content"]["text"] == "Review this python code:\nc"


@pytest.mark.parametrize("params, needle", [
    ({"name": "review", "arguments": {}}, "code"),
    ({"name": "review"}, "code"),
    ({"name": "review", "arguments": {"language": "go"}}, "code"),
    ({"name": "review", "arguments": {"code": 1}}, "string"),
    ({"name": "review", "arguments": {"code": None}}, "string"),
    ({"name": "review", "arguments": {"code": ["a"]}}, "string"),
    ({"name": "review", "arguments": "code=1"}, "arguments"),
    ({"name": "review", "arguments": ["x"]}, "arguments"),
    ({"name": "nope", "arguments": {}}, "nope"),
    ({"arguments": {}}, "name"),
    ({"name": 3}, "name"),
])
async def test_bad_prompt_requests_are_invalid_params(params: dict[str, Any], needle: str) -> None:
    async with connected(make(*PROMPTS)) as client:
        error = await error_of(client, "prompts/get", params)
        assert error["code"] == -32602
        assert needle in error["message"]
        assert (await client.get_prompt("review", {"code": "ok"}))["messages"]


@pytest.mark.parametrize("name", ["prompt_broken", "prompt_bad_return"])
async def test_prompt_failure_is_a_generic_internal_error(name: str, caplog: pytest.LogCaptureFixture) -> None:
    async with connected(make(*PROMPTS)) as client:
        reply = await client.raw_request("prompts/get", {"name": name})
        assert reply["error"] == {"code": -32603, "message": "Internal error"}
        assert "SECRET" not in json.dumps(reply)
    assert name in caplog.text


# -- completion ---------------------------------------------------------------------------------------------

LANGUAGES = ["python", "perl", "php", "rust", "ruby"]


def complete_language(value: str, context: dict[str, str]) -> list[str]:
    READS.append(("language", dict(context)))
    return [lang for lang in LANGUAGES if lang.startswith(value)]


async def complete_style(value: str, context: dict[str, str]) -> list[str]:
    await asyncio.sleep(0)
    return [f"{value}-{context.get('language', 'none')}"]


def complete_many(value: str, context: dict[str, str]) -> list[str]:
    return [f"{value}{i}" for i in range(250)]


def complete_object(value: str, context: dict[str, str]) -> mcphost.Completion:
    return mcphost.Completion(values=["a", "b"], total=500, has_more=True)


def complete_broken(value: str, context: dict[str, str]) -> list[str]:
    raise RuntimeError("completer SECRET")


@mcphost.prompt(completions={"language": complete_language, "style": complete_style, "many": complete_many,
                             "obj": complete_object, "broken": complete_broken})
def styled(language: str, style: str = "", many: str = "", obj: str = "", broken: str = "", plain: str = "") -> str:
    return language


async def complete_user(value: str, context: dict[str, str]) -> list[str]:
    return [u for u in ("ann", "anna", "bob") if u.startswith(value)]


@mcphost.resource_template("people://{user}/posts/{post}",
                           completions={"user": complete_user,
                                        "post": lambda value, ctx: [f"{ctx.get('user', '?')}-{value}1"]})
def people(user: str, post: str) -> str:
    return f"{user}/{post}"


COMPLETABLE = [styled, people, memo_text]
PROMPT_REF = {"type": "ref/prompt", "name": "styled"}
TEMPLATE_REF = {"type": "ref/resource", "uri": "people://{user}/posts/{post}"}


async def test_prompt_argument_completion_sync_and_async(version: str) -> None:
    async with connected(make(*COMPLETABLE), protocol_version=version) as client:
        assert client.initialize_result is not None
        assert client.initialize_result["capabilities"]["completions"] == {}
        assert await client.complete(PROMPT_REF, "language", "p") == {"values": ["python", "perl", "php"]}
        assert await client.complete(PROMPT_REF, "language", "") == {"values": LANGUAGES}
        assert await client.complete(PROMPT_REF, "language", "zz") == {"values": []}
        assert await client.complete(PROMPT_REF, "style", "terse", {"language": "rust"}) == {
            "values": ["terse-rust"]}
        assert await client.complete(PROMPT_REF, "style", "x") == {"values": ["x-none"]}
    assert READS == [("language", {})] * 3


async def test_resource_template_completion(version: str) -> None:
    async with connected(make(*COMPLETABLE), protocol_version=version) as client:
        assert await client.complete(TEMPLATE_REF, "user", "an") == {"values": ["ann", "anna"]}
        assert await client.complete(TEMPLATE_REF, "post", "p", {"user": "bob"}) == {"values": ["bob-p1"]}


async def test_completion_is_capped_at_100_values() -> None:
    async with connected(make(*COMPLETABLE)) as client:
        completion = await client.complete(PROMPT_REF, "many", "v")
    assert completion["values"] == [f"v{i}" for i in range(100)]
    assert completion["hasMore"] is True
    assert completion["total"] == 250


async def test_completion_object_passes_through() -> None:
    async with connected(make(*COMPLETABLE)) as client:
        assert await client.complete(PROMPT_REF, "obj", "") == {"values": ["a", "b"], "total": 500,
                                                                "hasMore": True}


async def test_completion_without_a_completer_is_empty() -> None:
    async with connected(make(*COMPLETABLE)) as client:
        assert await client.complete(PROMPT_REF, "plain", "x") == {"values": []}
        assert await client.complete(PROMPT_REF, "not_an_argument", "x") == {"values": []}
        assert await client.complete({"type": "ref/resource", "uri": "memo://text"}, "x", "") == {"values": []}


@pytest.mark.parametrize("params, needle", [
    ({"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "a", "value": ""}}, "nope"),
    ({"ref": {"type": "ref/resource", "uri": "nope://{x}"}, "argument": {"name": "x", "value": ""}}, "nope"),
    ({"ref": {"type": "ref/tool", "name": "styled"}, "argument": {"name": "a", "value": ""}}, "ref"),
    ({"ref": {"name": "styled"}, "argument": {"name": "a", "value": ""}}, "ref"),
    ({"ref": "styled", "argument": {"name": "a", "value": ""}}, "ref"),
    ({"argument": {"name": "a", "value": ""}}, "ref"),
    ({"ref": PROMPT_REF}, "argument"),
    ({"ref": PROMPT_REF, "argument": "language"}, "argument"),
    ({"ref": PROMPT_REF, "argument": {"name": 1, "value": ""}}, "name"),
    ({"ref": PROMPT_REF, "argument": {"name": "language", "value": 1}}, "value"),
    ({"ref": {"type": "ref/prompt"}, "argument": {"name": "a", "value": ""}}, "name"),
    ({"ref": {"type": "ref/resource", "uri": 5}, "argument": {"name": "a", "value": ""}}, "uri"),
])
async def test_bad_completion_requests_are_invalid_params(params: dict[str, Any], needle: str) -> None:
    async with connected(make(*COMPLETABLE)) as client:
        error = await error_of(client, "completion/complete", params)
        assert error["code"] == -32602
        assert needle in error["message"]
        assert (await client.complete(PROMPT_REF, "language", "r"))["values"] == ["rust", "ruby"]


async def test_completer_failure_is_a_generic_internal_error(caplog: pytest.LogCaptureFixture) -> None:
    async with connected(make(*COMPLETABLE)) as client:
        reply = await client.raw_request("completion/complete", {"ref": PROMPT_REF,
                                                                 "argument": {"name": "broken", "value": ""}})
        assert reply["error"] == {"code": -32603, "message": "Internal error"}
        assert "SECRET" not in json.dumps(reply)
    assert "completer SECRET" in caplog.text


@pytest.mark.parametrize("context", [{"arguments": "language=rust"}, {"arguments": ["rust"]}, "rust", 5])
async def test_malformed_completion_context_is_not_an_internal_error(context: Any) -> None:
    async with connected(make(*COMPLETABLE)) as client:
        reply = await client.raw_request("completion/complete", {
            "ref": PROMPT_REF, "argument": {"name": "style", "value": "x"}, "context": context})
        if "error" in reply:
            assert reply["error"]["code"] == -32602
        else:
            assert reply["result"]["completion"] == {"values": ["x-none"]}


async def test_no_completions_capability_without_prompts_or_templates() -> None:
    async with connected(make(memo_text, touch)) as client:
        assert client.initialize_result is not None
        assert "completions" not in client.initialize_result["capabilities"]
        error = await error_of(client, "completion/complete", {"ref": {"type": "ref/resource", "uri": "memo://text"},
                                                               "argument": {"name": "x", "value": ""}})
        assert error["code"] == -32601
