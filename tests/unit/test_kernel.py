"""Kernel tests: lifecycle, descriptors, pagination, middleware, allow-lists, reload, JSON-RPC plumbing.

The helpers (``Plugin``, ``make``, ``connected``, ``reply_error``...) live in
``tests/support/kernel_support.py``, shared with the other ``tests/unit/test_kernel_*.py`` files.
Every client opened with ``connected`` has each message the host sent it checked against the
official schema of the negotiated revision when it closes.
"""

from typing import Any

import pytest

import mcphost
from mcphost.kernel.paging import encode_cursor
from mcphost.testing import MemoryClient, make_host
from tests.support.kernel_support import (
    LATEST,
    VERSIONS,
    Plugin,
    connected,
    error_of,
    make,
    negotiated,
    notifications,
    reply_error,
    send,
    text_of,
    validate,
)
from tests.support.wire import WireValidator

# -- records used in this file ---------------------------------------------------------------------------


@mcphost.tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


@mcphost.prompt
def greet(name: str) -> str:
    """Greet someone."""
    return f"Hello {name}"


@mcphost.resource("memo://one", mime_type="text/plain")
def memo_one() -> str:
    return "one"


@mcphost.resource_template("users://{user}/profile")
def profile(user: str) -> str:
    return f"profile of {user}"


def _tool(name: str) -> mcphost.Tool:
    return mcphost.tool(name=name, description=f"tool {name}")(lambda: name)


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    return request.param


# -- initialize ---------------------------------------------------------------------------------------------


async def test_initialize_echoes_a_supported_version(version: str) -> None:
    async with connected(make(echo), protocol_version=version) as client:
        assert client.initialize_result is not None
        assert client.initialize_result["protocolVersion"] == version
        assert (await client.call_tool("echo", {"text": "x"}))["content"] == [{"type": "text", "text": "x"}]


@pytest.mark.parametrize("requested", ["1999-01-01", "2024-11-05", "2026-07-28", "draft", ""])
async def test_initialize_answers_an_unsupported_version_with_the_latest(requested: str) -> None:
    async with connected(make(echo), protocol_version=requested) as client:
        assert client.initialize_result is not None
        assert client.initialize_result["protocolVersion"] == LATEST
        assert client.session is not None and client.session.protocol_version == LATEST


@pytest.mark.parametrize("requested", [None, 20250618, ["2025-06-18"]])
async def test_initialize_without_a_string_version_is_invalid_params(requested: Any) -> None:
    """The schema requires a string (RELIABILITY H11); an unknown string still gets the latest."""
    async with connected(make(echo), initialize=False) as client:
        params: dict[str, Any] = {"capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        if requested is not None:
            params["protocolVersion"] = requested
        error = await error_of(client, "initialize", params)
        assert error["code"] == -32602 and "protocolVersion" in error["message"]


async def test_initialize_with_non_object_capabilities_is_invalid_params() -> None:
    async with connected(make(echo), initialize=False) as client:
        error = await error_of(client, "initialize", {"protocolVersion": LATEST, "capabilities": [],
                                                      "clientInfo": {"name": "t", "version": "1"}})
        assert error["code"] == -32602
        # The failed attempt did not initialize the session: a proper one still works.
        client.protocol_version = LATEST
        await client.initialize()
        assert await client.request("ping") == {}


async def test_capabilities_follow_the_catalog(version: str) -> None:
    async with connected(make(echo), protocol_version=version) as client:
        assert client.initialize_result is not None
        assert client.initialize_result["capabilities"] == {"logging": {}, "tools": {"listChanged": True}}
        for method in ("prompts/list", "resources/list", "resources/templates/list"):
            assert (await error_of(client, method))["code"] == -32601
        for method, params in (("prompts/get", {"name": "greet"}),
                               ("resources/read", {"uri": "memo://one"}),
                               ("resources/subscribe", {"uri": "memo://one"}),
                               ("completion/complete", {"ref": {"type": "ref/prompt", "name": "greet"},
                                                        "argument": {"name": "name", "value": ""}})):
            assert (await error_of(client, method, params))["code"] == -32601


async def test_full_catalog_declares_every_capability(version: str) -> None:
    async with connected(make(echo, greet, memo_one, profile), protocol_version=version) as client:
        assert client.initialize_result is not None
        assert client.initialize_result["capabilities"] == {
            "logging": {},
            "tools": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "prompts": {"listChanged": True},
            "completions": {},
        }


async def test_prompts_only_catalog_has_no_tools_capability() -> None:
    async with connected(make(greet)) as client:
        assert client.initialize_result is not None
        assert set(client.initialize_result["capabilities"]) == {"logging", "prompts", "completions"}
        assert (await error_of(client, "tools/list"))["code"] == -32601
        assert (await error_of(client, "tools/call", {"name": "echo", "arguments": {}}))["code"] == -32601
        assert [p["name"] for p in await client.list_prompts()] == ["greet"]


async def test_server_info_and_instructions_come_from_config(version: str) -> None:
    server = {"name": "acme-host", "version": "9.8.7", "title": "Acme Host", "instructions": "Use echo."}
    async with connected(make(echo, server=server), protocol_version=version) as client:
        assert client.initialize_result is not None
        info = client.initialize_result["serverInfo"]
        assert info["name"] == "acme-host"
        assert info["version"] == "9.8.7"
        if version == "2025-03-26":
            assert "title" not in info
        else:
            assert info["title"] == "Acme Host"
        assert client.initialize_result["instructions"] == "Use echo."


async def test_no_instructions_and_default_server_info_without_config() -> None:
    async with connected(make(echo)) as client:
        assert client.initialize_result is not None
        assert "instructions" not in client.initialize_result
        assert client.initialize_result["serverInfo"] == {"name": "mcphost", "version": mcphost.__version__}


async def test_second_initialize_is_refused(version: str) -> None:
    async with connected(make(echo), protocol_version=version) as client:
        other = "2025-03-26" if version != "2025-03-26" else "2025-11-25"
        error = await error_of(client, "initialize", {"protocolVersion": other, "capabilities": {},
                                                      "clientInfo": {"name": "again", "version": "2"}})
        assert error["code"] == -32600
        assert client.session is not None
        # The refused attempt changed nothing: the session keeps its version and still serves.
        assert client.session.protocol_version == version
        assert client.session.client_info["name"] == "mcphost-memory-client"
        assert (await client.call_tool("echo", {"text": "still"}))["content"][0]["text"] == "still"


async def test_requests_before_initialize_are_refused_but_ping_is_answered() -> None:
    async with connected(make(echo, greet), initialize=False, protocol_version="2025-06-18") as client:
        assert await client.request("ping") == {}
        for method, params in (("tools/list", None), ("tools/call", {"name": "echo", "arguments": {"text": "x"}}),
                               ("prompts/list", None), ("logging/setLevel", {"level": "debug"})):
            error = await error_of(client, method, params)
            assert error["code"] == -32600, method
            assert "initialize" in error["message"]
        # Notifications before initialize are ignored without a reply or a crash.
        client.notify("notifications/roots/list_changed")
        client.notify("notifications/cancelled", {"requestId": 99})
        await client.initialize()
        assert [t["name"] for t in await client.list_tools()] == ["echo"]


async def test_tool_handler_does_not_run_before_initialize() -> None:
    calls: list[str] = []

    @mcphost.tool
    def spy() -> str:
        calls.append("ran")
        return "ran"

    async with connected(make(spy), initialize=False) as client:
        assert (await error_of(client, "tools/call", {"name": "spy", "arguments": {}}))["code"] == -32600
    assert calls == []


@pytest.mark.parametrize("method", ["no/such/method", "server/discover", "tasks/list", "resources/listen", ""])
async def test_unknown_method_is_method_not_found(method: str) -> None:
    async with connected(make(echo)) as client:
        error = await error_of(client, method)
        assert error["code"] == -32601
        assert await client.request("ping") == {}


async def test_ping_after_initialize(version: str) -> None:
    async with connected(make(echo), protocol_version=version) as client:
        assert await client.request("ping") == {}
        assert await client.request("ping", {}) == {}


# -- descriptors per revision ------------------------------------------------------------------------------

ICON = {"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"]}


@mcphost.tool(title="Fancy tool", annotations={"readOnlyHint": True, "title": "Fancy"}, icons=[ICON],
              meta={"com.example/owner": "team-a"})
def fancy(n: int) -> dict[str, int]:
    """Do fancy things."""
    return {"n": n}


@mcphost.resource("memo://fancy", title="Fancy memo", description="A memo.", mime_type="text/plain", size=5,
                  annotations={"audience": ["user"], "priority": 0.5}, icons=[ICON],
                  meta={"com.example/x": 1})
def fancy_memo() -> str:
    return "fancy"


@mcphost.resource_template("fancy://{id}", title="Fancy template", description="Templated.",
                           mime_type="text/plain", annotations={"priority": 1}, icons=[ICON],
                           meta={"com.example/y": 2})
def fancy_template(id: str) -> str:
    return id


@mcphost.prompt(title="Fancy prompt", icons=[ICON], meta={"com.example/z": 3})
def fancy_prompt(topic: str, tone: str = "calm") -> str:
    """Write about a topic."""
    return f"{topic} {tone}"


async def test_descriptors_follow_the_revision(version: str) -> None:
    host = make(fancy, fancy_memo, fancy_template, fancy_prompt)
    async with connected(host, protocol_version=version) as client:
        [tool] = await client.list_tools()
        [resource] = await client.list_resources()
        [template] = await client.list_resource_templates()
        [prompt] = await client.list_prompts()

    assert tool["name"] == "fancy"
    assert tool["description"] == "Do fancy things."
    assert tool["inputSchema"]["type"] == "object"
    assert tool["inputSchema"]["required"] == ["n"]
    assert tool["annotations"] == {"readOnlyHint": True, "title": "Fancy"}
    assert resource["annotations"] == {"audience": ["user"], "priority": 0.5}
    assert template["annotations"] == {"priority": 1}
    assert {k: resource[k] for k in ("uri", "name", "description", "mimeType", "size")} == {
        "uri": "memo://fancy", "name": "fancy_memo", "description": "A memo.", "mimeType": "text/plain",
        "size": 5}
    assert {k: template[k] for k in ("uriTemplate", "name", "description", "mimeType")} == {
        "uriTemplate": "fancy://{id}", "name": "fancy_template", "description": "Templated.",
        "mimeType": "text/plain"}
    assert prompt["arguments"] == [{"name": "topic", "required": True}, {"name": "tone", "required": False}]
    assert prompt["description"] == "Write about a topic."

    described = (tool, resource, template, prompt)
    if version == "2025-03-26":
        for item in described:
            assert not {"title", "_meta", "icons"} & set(item), item
        assert "outputSchema" not in tool
    else:
        assert [item["title"] for item in described] == [
            "Fancy tool", "Fancy memo", "Fancy template", "Fancy prompt"]
        assert tool["_meta"] == {"com.example/owner": "team-a"}
        assert resource["_meta"] == {"com.example/x": 1}
        assert template["_meta"] == {"com.example/y": 2}
        assert prompt["_meta"] == {"com.example/z": 3}
        assert tool["outputSchema"]["type"] == "object"
    if version == LATEST:
        for item in described:
            assert item["icons"] == [ICON]
    else:
        for item in described:
            assert "icons" not in item


async def test_descriptors_are_cached_per_revision_not_shared_between_them() -> None:
    host = make(fancy)
    await host.start()
    try:
        async with connected(host, protocol_version="2025-11-25") as new, \
                connected(host, protocol_version="2025-03-26") as old:
            [new_tool] = await new.list_tools()
            [old_tool] = await old.list_tools()
            [new_again] = await new.list_tools()
        assert "icons" in new_tool and "icons" not in old_tool
        assert new_again == new_tool
    finally:
        await host.stop()


# -- pagination ------------------------------------------------------------------------------------------

FIVE_TOOLS = [_tool(f"t{i}") for i in range(5)]


async def test_pagination_cursor_chain_returns_every_tool_in_order(version: str) -> None:
    async with connected(make(*FIVE_TOOLS, server={"page_size": 2}), protocol_version=version) as client:
        pages: list[list[str]] = []
        cursors: list[str] = []
        params: dict[str, Any] = {}
        while True:
            result = await client.request("tools/list", params)
            pages.append([t["name"] for t in result["tools"]])
            if "nextCursor" not in result:
                break
            assert isinstance(result["nextCursor"], str)
            cursors.append(result["nextCursor"])
            params = {"cursor": result["nextCursor"]}
        assert pages == [["t0", "t1"], ["t2", "t3"], ["t4"]]
        assert len(set(cursors)) == 2
        # Cursors are stable: the same cursor gives the same page again.
        again = await client.request("tools/list", {"cursor": cursors[0]})
        assert [t["name"] for t in again["tools"]] == ["t2", "t3"]
        assert again["nextCursor"] == cursors[1]


async def test_a_page_size_covering_everything_has_no_next_cursor() -> None:
    async with connected(make(*FIVE_TOOLS, server={"page_size": 5})) as client:
        result = await client.request("tools/list")
        assert len(result["tools"]) == 5
        assert "nextCursor" not in result


@pytest.mark.parametrize("kind", ["prompts", "resources", "resourceTemplates"])
async def test_other_lists_paginate_too(kind: str) -> None:
    records: list[Any] = []
    for i in range(5):
        if kind == "prompts":
            records.append(mcphost.prompt(name=f"p{i}")(lambda: "x"))
        elif kind == "resources":
            records.append(mcphost.resource(f"memo://r{i}", name=f"r{i}")(lambda: "x"))
        else:
            records.append(mcphost.resource_template(f"tpl{i}://{{x}}", name=f"tpl{i}")(lambda x: x))
    method = {"prompts": "prompts/list", "resources": "resources/list",
              "resourceTemplates": "resources/templates/list"}[kind]
    async with connected(make(*records, server={"page_size": 2})) as client:
        first = await client.request(method)
        assert len(first[kind]) == 2 and "nextCursor" in first
        everything = await client._all_pages(method, kind)
        names = [item["name"] for item in everything]
        assert names == [r.name for r in records]


@pytest.mark.parametrize("cursor", [
    "garbage", "", "x" * 65, "!!!", encode_cursor(50), encode_cursor(6), encode_cursor(-1),
    "bWNwaG9zdDphYmM",  # base64 of "mcphost:abc"
    "Zm9vOjI",  # base64 of "foo:2"
    "//79",  # decodes to bytes that are not UTF-8
    "bWNwaG9zdDorMg",  # "mcphost:+2"
    "bWNwaG9zdDowMg",  # "mcphost:02"
    "bWNwaG9zdDogMg",  # "mcphost: 2"
    "bWNwaG9zdDowXzI",  # "mcphost:0_2"
    "bWNwaG9zdDrZog",  # "mcphost:" + ARABIC-INDIC DIGIT TWO
    encode_cursor(2) + "==",  # padded spelling of a real cursor
    5, None, ["a"], {"offset": 2},
])
async def test_bad_cursor_is_invalid_params(cursor: Any) -> None:
    async with connected(make(*FIVE_TOOLS, server={"page_size": 2})) as client:
        reply = await client.raw_request("tools/list", {"cursor": cursor})
        if cursor is None:  # an explicit null cursor means "no cursor"
            assert [t["name"] for t in reply["result"]["tools"]] == ["t0", "t1"]
            return
        error = reply_error(reply)
        assert error["code"] == -32602
        assert "cursor" in error["message"].lower()
        # The session is unaffected.
        assert len(await client.list_tools()) == 5


async def test_cursor_at_the_end_gives_an_empty_last_page() -> None:
    async with connected(make(*FIVE_TOOLS, server={"page_size": 2})) as client:
        result = await client.request("tools/list", {"cursor": encode_cursor(5)})
        assert result == {"tools": []}


# -- logging/setLevel --------------------------------------------------------------------------------------


@pytest.mark.parametrize("level", ["verbose", "INFO", "", 3, None, ["info"], {"level": "info"}])
async def test_invalid_log_level_is_invalid_params(level: Any) -> None:
    async with connected(make(echo)) as client:
        params = {} if level is None else {"level": level}
        error = await error_of(client, "logging/setLevel", params)
        assert error["code"] == -32602
        assert client.session is not None and client.session.log_level is None


@pytest.mark.parametrize("level", ["debug", "info", "notice", "warning", "error", "critical", "alert",
                                   "emergency"])
async def test_valid_log_levels_are_accepted(level: str) -> None:
    async with connected(make(echo)) as client:
        assert await client.request("logging/setLevel", {"level": level}) == {}
        assert client.session is not None and client.session.log_level == level


# -- middleware --------------------------------------------------------------------------------------------


async def test_middleware_wraps_every_request_outermost_first() -> None:
    trail: list[str] = []

    @mcphost.middleware
    async def outer(request: Any, call_next: Any) -> Any:
        trail.append(f"outer>{request.method}")
        result = await call_next(request)
        trail.append(f"outer<{request.method}")
        return result

    @mcphost.middleware(name="inner-mw")
    async def inner(request: Any, call_next: Any) -> Any:
        trail.append(f"inner>{request.method}:{request.name}")
        return await call_next(request)

    async with connected(make(echo, memo_one, middleware=[outer, inner])) as client:
        await client.request("ping")
        await client.call_tool("echo", {"text": "hi"})
        await client.read_resource("memo://one")
    assert trail == [
        "outer>initialize", "inner>initialize:None", "outer<initialize",
        "outer>ping", "inner>ping:None", "outer<ping",
        "outer>tools/call", "inner>tools/call:echo", "outer<tools/call",
        "outer>resources/read", "inner>resources/read:memo://one", "outer<resources/read",
    ]


async def test_middleware_sees_request_details_and_can_change_the_result() -> None:
    seen: list[tuple[Any, str, dict[str, Any]]] = []

    @mcphost.middleware
    async def stamp(request: Any, call_next: Any) -> Any:
        seen.append((request.id, request.session.id, dict(request.params)))
        result = await call_next(request)
        if request.method == "tools/call":
            result = {**result, "_meta": {"com.example/stamped": True}}
        return result

    async with connected(make(echo, middleware=[stamp])) as client:
        reply = await client.raw_request("tools/call", {"name": "echo", "arguments": {"text": "a"}},
                                         request_id="req-9")
        assert reply["result"]["_meta"] == {"com.example/stamped": True}
        assert client.session is not None
        assert ("req-9", client.session.id, {"name": "echo", "arguments": {"text": "a"}}) in seen


async def test_middleware_can_short_circuit() -> None:
    calls: list[str] = []

    @mcphost.tool
    def guarded() -> str:
        calls.append("handler")
        return "handler ran"

    @mcphost.middleware
    async def gate(request: Any, call_next: Any) -> Any:
        if request.method == "tools/call" and request.name == "guarded":
            return {"content": [mcphost.text("blocked by policy")], "isError": True}
        if request.method == "prompts/list":
            raise mcphost.McpError(-32601, "Method not found: prompts/list")
        return await call_next(request)

    async with connected(make(guarded, greet, middleware=[gate])) as client:
        result = await client.call_tool("guarded")
        assert result == {"content": [{"type": "text", "text": "blocked by policy"}], "isError": True}
        assert (await error_of(client, "prompts/list"))["code"] == -32601
        assert (await client.get_prompt("greet", {"name": "x"}))["messages"]
    assert calls == []


async def test_fail_closed_middleware_exception_is_a_generic_internal_error(
        caplog: pytest.LogCaptureFixture) -> None:
    @mcphost.middleware(fail_closed=True)
    async def broken(request: Any, call_next: Any) -> Any:
        if request.method == "tools/list":
            raise RuntimeError("middleware secret s3cr3t")
        return await call_next(request)

    async with connected(make(echo, middleware=[broken])) as client:
        reply = await client.raw_request("tools/list")
        error = reply_error(reply)
        assert error == {"code": -32603, "message": "Internal error"}
        assert "s3cr3t" not in str(reply)
        assert (await client.call_tool("echo", {"text": "ok"}))["content"][0]["text"] == "ok"
    assert "s3cr3t" in caplog.text


# -- allow-lists from a connect hook ------------------------------------------------------------------


@mcphost.prompt(completions={"name": lambda value, ctx: ["ann", "bob"]})
def secret_prompt(name: str) -> str:
    return f"secret {name}"


@mcphost.resource_template("vault://{key}", completions={"key": lambda value, ctx: ["k1"]})
def vault(key: str) -> str:
    return f"vault {key}"


@mcphost.tool
def hidden(text: str) -> str:
    return text


def _narrow(session: mcphost.Session) -> None:
    session.allowed_tools = {"echo"}
    session.allowed_prompts = {"greet"}
    session.allowed_templates = {"users://{user}/profile"}


async def test_allow_lists_hide_and_refuse(version: str) -> None:
    calls: list[str] = []

    @mcphost.tool
    def hidden_spy() -> str:
        calls.append("ran")
        return "ran"

    host = make(echo, hidden, hidden_spy, greet, secret_prompt, profile, vault, memo_one, connect=_narrow)
    async with connected(host, protocol_version=version) as client:
        assert [t["name"] for t in await client.list_tools()] == ["echo"]
        assert [p["name"] for p in await client.list_prompts()] == ["greet"]
        assert [t["uriTemplate"] for t in await client.list_resource_templates()] == ["users://{user}/profile"]

        for name in ("hidden", "hidden_spy"):
            error = await error_of(client, "tools/call", {"name": name, "arguments": {"text": "x"}})
            assert error["code"] == -32602
        assert (await error_of(client, "prompts/get", {"name": "secret_prompt",
                                                       "arguments": {"name": "a"}}))["code"] == -32602
        error = await error_of(client, "resources/read", {"uri": "vault://k1"})
        assert error["code"] == -32002
        assert error["data"] == {"uri": "vault://k1"}
        for ref, arg in (({"type": "ref/prompt", "name": "secret_prompt"}, "name"),
                         ({"type": "ref/resource", "uri": "vault://{key}"}, "key")):
            error = await error_of(client, "completion/complete",
                                   {"ref": ref, "argument": {"name": arg, "value": ""}})
            assert error["code"] == -32602

        # What is allowed still works.
        assert text_of(await client.call_tool("echo", {"text": "ok"})) == "ok"
        assert (await client.get_prompt("greet", {"name": "Ann"}))["messages"][0]["content"]["text"] == "Hello Ann"
        assert (await client.read_resource("users://ann/profile"))["contents"][0]["text"] == "profile of ann"
        assert (await client.read_resource("memo://one"))["contents"][0]["text"] == "one"
    assert calls == []


async def test_allow_lists_apply_per_session() -> None:
    def narrow_first(session: mcphost.Session) -> None:
        if not narrowed:
            session.allowed_tools = set()
            narrowed.append(session.id)

    narrowed: list[str] = []
    host = make(echo, hidden, connect=narrow_first)
    await host.start()
    try:
        async with connected(host) as first, connected(host) as second:
            assert await first.list_tools() == []
            assert [t["name"] for t in await second.list_tools()] == ["echo", "hidden"]
            assert (await error_of(first, "tools/call", {"name": "echo", "arguments": {"text": "x"}}))[
                "code"] == -32602
            assert text_of(await second.call_tool("echo", {"text": "x"})) == "x"
    finally:
        await host.stop()


# -- reload --------------------------------------------------------------------------------------------


async def test_reload_announces_a_changed_tool_list_to_initialized_sessions() -> None:
    plugin = Plugin(echo)
    host = make_host(plugin)
    await host.start()
    try:
        async with connected(host) as ready, connected(host, initialize=False) as fresh:
            assert [t["name"] for t in await ready.list_tools()] == ["echo"]
            plugin.records.append(hidden)
            await host.reload()
            assert notifications(ready, "notifications/tools/list_changed") == [{}]
            assert fresh.notifications == []  # not initialized: no list_changed
            assert [t["name"] for t in await ready.list_tools()] == ["echo", "hidden"]
            assert text_of(await ready.call_tool("hidden", {"text": "new"})) == "new"

            plugin.records.remove(echo)
            await host.reload()
            assert len(notifications(ready, "notifications/tools/list_changed")) == 2
            assert [t["name"] for t in await ready.list_tools()] == ["hidden"]
            assert (await error_of(ready, "tools/call", {"name": "echo", "arguments": {"text": "x"}}))[
                "code"] == -32602
    finally:
        await host.stop()


async def test_reload_announces_prompt_and_resource_changes() -> None:
    plugin = Plugin(echo, greet, memo_one)
    host = make_host(plugin)
    await host.start()
    try:
        async with connected(host) as client:
            plugin.records.remove(greet)
            plugin.records.append(secret_prompt)
            plugin.records.append(profile)
            await host.reload()
            methods = {n["method"] for n in client.notifications}
            assert {"notifications/prompts/list_changed", "notifications/resources/list_changed"} <= methods
            assert [p["name"] for p in await client.list_prompts()] == ["secret_prompt"]
            assert [t["name"] for t in await client.list_resource_templates()] == ["profile"]
    finally:
        await host.stop()


async def test_reload_without_changes_announces_nothing() -> None:
    host = make_host(Plugin(echo, greet, memo_one, profile))
    await host.start()
    try:
        async with connected(host) as client:
            await host.reload()
            assert client.notifications == []
            assert text_of(await client.call_tool("echo", {"text": "same"})) == "same"
    finally:
        await host.stop()


# -- JSON-RPC plumbing in the dispatcher ---------------------------------------------------------------


@pytest.mark.parametrize("message, expected_id", [
    ({"jsonrpc": "1.0", "id": 5, "method": "ping"}, 5),
    ({"id": "a", "method": "ping"}, "a"),
    ({"jsonrpc": "2.0", "id": 6, "method": "ping", "params": [1]}, 6),
    ({"jsonrpc": "2.0", "id": 7, "method": 42}, 7),
    ({"jsonrpc": "2.0", "id": True, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": None, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}, None),
    ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], None),
    ("ping", None),
    ({"jsonrpc": "2.0", "id": 8}, 8),
])
async def test_invalid_messages_get_invalid_request_and_the_session_survives(
        message: Any, expected_id: Any) -> None:
    async with connected(make(echo)) as client:
        reply = await send(client, message)
        assert reply is not None
        assert reply["error"]["code"] == -32600
        assert reply["id"] == expected_id
        if expected_id is not None:
            WireValidator(negotiated(client)).check(reply)
        assert await client.request("ping") == {}


@pytest.mark.parametrize("request_id", [None, [1], {"a": 1}, 1.5, "never-sent", 12345])
async def test_cancellation_for_unknown_or_malformed_ids_is_ignored(request_id: Any) -> None:
    async with connected(make(echo)) as client:
        params = {} if request_id is None else {"requestId": request_id}
        assert client.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}) is None
        assert text_of(await client.call_tool("echo", {"text": "alive"})) == "alive"


@pytest.mark.parametrize("response", [
    {"jsonrpc": "2.0", "id": 424242, "result": {}},
    {"jsonrpc": "2.0", "id": "nope", "error": {"code": -32601, "message": "no"}},
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse"}},
])
async def test_a_response_for_an_unknown_id_is_ignored(response: dict[str, Any]) -> None:
    async with connected(make(echo)) as client:
        assert client.send(response) is None
        assert client.sent[-1][1] == "initialize"  # nothing was sent in answer
        assert text_of(await client.call_tool("echo", {"text": "alive"})) == "alive"


async def test_unknown_notifications_are_ignored() -> None:
    async with connected(make(echo)) as client:
        before = len(client.sent)
        for method in ("notifications/whatever", "notifications/roots/list_changed", "notifications/progress"):
            assert client.send({"jsonrpc": "2.0", "method": method, "params": {}}) is None
        assert len(client.sent) == before
        assert await client.request("ping") == {}


async def test_string_and_integer_ids_are_echoed() -> None:
    async with connected(make(echo)) as client:
        for request_id in ("abc", 0, -3, 2**53, "1"):
            reply = await client.raw_request("ping", request_id=request_id)
            assert reply == {"jsonrpc": "2.0", "id": request_id, "result": {}}


# -- the schema check behind ``connected`` ---------------------------------------------------------------


async def test_the_wire_check_catches_an_invalid_message() -> None:
    from tests.support.wire import WireSchemaError

    async with MemoryClient(make(echo), protocol_version="2025-06-18") as client:
        await client.call_tool("echo", {"text": "x"})
    assert validate(client) == 2
    client.sent.append(({"jsonrpc": "2.0", "id": 9, "result": {"content": "not a list"}}, "tools/call"))
    with pytest.raises(WireSchemaError):
        validate(client)
    client.sent[-1] = ({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "loud"}}, None)
    with pytest.raises(WireSchemaError):
        validate(client)
