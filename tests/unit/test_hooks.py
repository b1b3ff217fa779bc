"""One test per hook in ``mcphost/hookspecs.py``, plus one plugin that implements every hook.

Each test registers an in-process plugin (a class instance or a module object carrying
``@mcphost.hookimpl`` functions) through ``mcphost.testing.make_host`` and, where the hook
changes what a client sees, drives the host through ``MemoryClient``. The last test checks
that every hook spec has a test here, so a new hook cannot arrive untested.

Call order, where it matters, is pluggy's: the plugin registered last runs first.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
import types
from pathlib import Path
from typing import Any

import click
import pluggy
import pytest
from click.testing import CliRunner

import mcphost
from mcphost import hookspecs, introspect
from mcphost.builtin.memory import MemoryBackend
from mcphost.config import ConfigErrors
from mcphost.errors import ConfigError, Forbidden, Refused, Unauthorized
from mcphost.kernel import RequestInfo
from mcphost.plugins import make_plugin_manager
from mcphost.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND, McpError
from mcphost.records import Provenance
from mcphost.sessions.backend import Backend
from mcphost.sessions.session import Connection, Principal, Session
from mcphost.testing import MemoryClient, app_client, make_host

# -- shared records -----------------------------------------------------------------------------


@mcphost.tool
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


@mcphost.tool
def whoami(*, ctx: mcphost.Context) -> str:
    """The user a connect hook put into the session's assigns."""
    return str(ctx.session.assigns.get("user", "anonymous"))


@mcphost.tool
def public() -> str:
    """A tool every client may call."""
    return "public"


@mcphost.tool
def secret() -> str:
    """A tool a connect hook can hide."""
    return "secret"


@mcphost.prompt
def hello_prompt(name: str) -> str:
    """Say hello to someone."""
    return f"Hello, {name}!"


@mcphost.prompt
def hidden_prompt() -> str:
    """A prompt a connect hook can hide."""
    return "hidden"


@mcphost.resource_template("test://items/{item_id}", name="item", mime_type="text/plain")
def item(item_id: str) -> str:
    """One item by id."""
    return f"item {item_id}"


@mcphost.resource_template("test://hidden/{key}", name="hidden")
def hidden_item(key: str) -> str:
    """A template a connect hook can hide."""
    return f"hidden {key}"


def module_plugin(name: str, **hooks: Any) -> types.ModuleType:
    """A module-like plugin object called ``name`` carrying the given hook implementations."""
    module = types.ModuleType(name)
    for hook_name, fn in hooks.items():
        setattr(module, hook_name, fn)
    return module


class Recorder:
    """Records lifecycle calls as (hook, session id, reason), in the order they happen."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []

    @mcphost.hookimpl
    def mcphost_disconnect(self, session: Session, reason: str) -> None:
        self.calls.append(("disconnect", session.id, reason))

    @mcphost.hookimpl
    def mcphost_terminate(self, session: Session, reason: str) -> None:
        self.calls.append(("terminate", session.id, reason))


# -- catalog hooks --------------------------------------------------------------------------------


async def test_mcphost_tools_lists_calls_and_stamps_provenance() -> None:
    seen_hosts: list[Any] = []

    class ToolPlugin:
        @mcphost.hookimpl
        def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
            seen_hosts.append(host)
            return [shout]

    host = make_host(ToolPlugin())
    async with MemoryClient(host) as client:
        listed = await client.list_tools()
        result = await client.call_tool("shout", {"text": "hi"})

    assert seen_hosts == [host]
    assert [tool["name"] for tool in listed] == ["shout"]
    assert listed[0]["description"] == "Upper-case the text."
    assert listed[0]["inputSchema"]["required"] == ["text"]
    assert result["content"] == [{"type": "text", "text": "HI"}]
    assert not result.get("isError")
    assert host.catalog.tools["shout"].record.provenance == Provenance("ToolPlugin-0", None, None)
    assert shout.provenance is None  # the plugin's own record is left untouched; the host stamps a copy
    info = host.plugin_infos["ToolPlugin-0"]
    assert info.status == "active"
    assert info.provides == {"tools": ["shout"]}
    assert "mcphost_tools" in info.hooks


async def test_mcphost_tools_through_the_shipped_pytest_fixtures(mcphost_host: Any, mcphost_client: Any) -> None:
    # The same hook, registered the way plugin authors do it with the pytest11 test kit.
    plugin = module_plugin("kit", mcphost_tools=mcphost.hookimpl(lambda host: [shout]))
    host = mcphost_host(plugin)
    assert host.kernel is not None  # the fixture hands over a prepared host
    async with mcphost_client(host) as client:
        result = await client.call_tool("shout", {"text": "kit"})
    assert result["content"] == [{"type": "text", "text": "KIT"}]
    assert host.catalog.tools["shout"].record.provenance == Provenance("kit")


async def test_mcphost_resources_lists_reads_and_stamps_provenance() -> None:
    @mcphost.resource("test://hello", name="hello", mime_type="text/plain")
    def hello() -> str:
        """A greeting."""
        return "hello, world"

    @mcphost.hookimpl
    def mcphost_resources(host: Any) -> list[mcphost.Resource]:
        return [hello]

    host = make_host(module_plugin("resource_plugin", mcphost_resources=mcphost_resources))
    async with MemoryClient(host) as client:
        listed = await client.list_resources()
        read = await client.read_resource("test://hello")
        with pytest.raises(McpError) as missing:
            await client.read_resource("test://absent")

    assert listed == [{"uri": "test://hello", "name": "hello", "description": "A greeting.",
                       "mimeType": "text/plain"}]
    assert read["contents"] == [{"uri": "test://hello", "mimeType": "text/plain", "text": "hello, world"}]
    assert missing.value.code == RESOURCE_NOT_FOUND
    assert host.catalog.resources["test://hello"].provenance == Provenance("resource_plugin")
    assert host.plugin_infos["resource_plugin"].provides == {"resources": ["test://hello"]}


async def test_mcphost_resource_templates_list_read_and_stamp_provenance() -> None:
    @mcphost.hookimpl
    def mcphost_resource_templates(host: Any) -> list[mcphost.ResourceTemplate]:
        return [item]

    host = make_host(module_plugin("template_plugin", mcphost_resource_templates=mcphost_resource_templates))
    async with MemoryClient(host) as client:
        listed = await client.list_resource_templates()
        read = await client.read_resource("test://items/42")

    assert [t["uriTemplate"] for t in listed] == ["test://items/{item_id}"]
    assert listed[0]["name"] == "item"
    assert read["contents"] == [{"uri": "test://items/42", "mimeType": "text/plain", "text": "item 42"}]
    entry = host.catalog.templates["test://items/{item_id}"]
    assert entry.record.provenance == Provenance("template_plugin")
    assert host.plugin_infos["template_plugin"].provides == {"resourceTemplates": ["test://items/{item_id}"]}


async def test_mcphost_prompts_list_get_and_stamp_provenance() -> None:
    class PromptPlugin:
        @mcphost.hookimpl
        def mcphost_prompts(self, host: Any) -> list[mcphost.Prompt]:
            return [hello_prompt]

    host = make_host(PromptPlugin())
    async with MemoryClient(host) as client:
        listed = await client.list_prompts()
        got = await client.get_prompt("hello_prompt", {"name": "Ada"})
        with pytest.raises(McpError) as missing_argument:
            await client.get_prompt("hello_prompt", {})

    assert listed == [{"name": "hello_prompt", "description": "Say hello to someone.",
                       "arguments": [{"name": "name", "required": True}]}]
    assert got["messages"] == [{"role": "user", "content": {"type": "text", "text": "Hello, Ada!"}}]
    assert missing_argument.value.code == INVALID_PARAMS
    assert host.catalog.prompts["hello_prompt"].provenance == Provenance("PromptPlugin-0")
    assert host.plugin_infos["PromptPlugin-0"].provides == {"prompts": ["hello_prompt"]}


# -- session lifecycle ----------------------------------------------------------------------------


class Tools:
    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        return [whoami, public, secret]


async def test_mcphost_connect_sets_assigns_seen_by_tools() -> None:
    connections: list[Connection] = []

    class Login:
        @mcphost.hookimpl
        def mcphost_connect(self, session: Session, request: Connection) -> None:
            connections.append(request)
            session.assigns["user"] = "ada"

    host = make_host(Tools(), Login())
    async with MemoryClient(host) as client:
        result = await client.call_tool("whoami")
        session = client.session

    assert result["content"] == [{"type": "text", "text": "ada"}]
    assert session is not None and session.assigns == {"user": "ada"}
    assert [c.transport for c in connections] == ["memory"]


async def test_mcphost_connect_without_plugin_leaves_assigns_empty() -> None:
    # The counterpart of the test above: the assigns come from the hook, not from the client.
    async with MemoryClient(make_host(Tools())) as client:
        result = await client.call_tool("whoami")
    assert result["content"] == [{"type": "text", "text": "anonymous"}]


async def test_mcphost_connect_narrows_tools_prompts_and_templates() -> None:
    class Narrow:
        @mcphost.hookimpl
        def mcphost_prompts(self, host: Any) -> list[mcphost.Prompt]:
            return [hello_prompt, hidden_prompt]

        @mcphost.hookimpl
        def mcphost_resource_templates(self, host: Any) -> list[mcphost.ResourceTemplate]:
            return [item, hidden_item]

        @mcphost.hookimpl
        def mcphost_connect(self, session: Session, request: Connection) -> None:
            session.allowed_tools = {"public"}
            session.allowed_prompts = {"hello_prompt"}
            session.allowed_templates = {"test://items/{item_id}"}

    host = make_host(Tools(), Narrow())
    async with MemoryClient(host) as client:
        tools = await client.list_tools()
        assert await client.call_tool("public") == {"content": [{"type": "text", "text": "public"}]}
        with pytest.raises(McpError) as refused_tool:
            await client.call_tool("secret")
        prompts = await client.list_prompts()
        with pytest.raises(McpError) as refused_prompt:
            await client.get_prompt("hidden_prompt")
        templates = await client.list_resource_templates()
        assert (await client.read_resource("test://items/1"))["contents"][0]["text"] == "item 1"
        with pytest.raises(McpError) as refused_read:
            await client.read_resource("test://hidden/x")

    # The hidden records exist in the catalog: only this session's view is narrowed.
    assert {"public", "secret", "whoami"} <= set(host.catalog.tools)
    assert [t["name"] for t in tools] == ["public"]
    assert refused_tool.value.code == INVALID_PARAMS
    assert "secret" in refused_tool.value.message
    assert [p["name"] for p in prompts] == ["hello_prompt"]
    assert refused_prompt.value.code == INVALID_PARAMS
    assert [t["uriTemplate"] for t in templates] == ["test://items/{item_id}"]
    assert refused_read.value.code == RESOURCE_NOT_FOUND


@pytest.mark.parametrize(("error", "status", "headers"), [
    (Unauthorized("token expired", challenge='Bearer error="invalid_token"'), 401,
     {"WWW-Authenticate": 'Bearer error="invalid_token"'}),
    (Unauthorized(), 401, {"WWW-Authenticate": "Bearer"}),
    (Forbidden("not on the list"), 403, {}),
])
async def test_mcphost_connect_refusal_stops_the_client(error: Refused, status: int,
                                                       headers: dict[str, str]) -> None:
    later: list[str] = []

    class Gate:
        @mcphost.hookimpl
        def mcphost_connect(self, session: Session, request: Connection) -> None:
            raise error

    class Later:
        @mcphost.hookimpl
        def mcphost_connect(self, session: Session, request: Connection) -> None:
            later.append(session.id)

    # Hooks run in registration order, so Later runs after Gate.
    host = make_host(Gate(), Later())
    try:
        with pytest.raises(Refused) as refused:
            async with MemoryClient(host):
                pytest.fail("a refused client must not get a session")
    finally:
        await host.stop()

    assert refused.value.status == status
    assert refused.value.headers == headers
    assert refused.value.message == error.message
    assert later == []  # the refusal ends the chain


async def test_mcphost_connect_that_breaks_fails_closed(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        @mcphost.hookimpl
        def mcphost_connect(self, session: Session, request: Connection) -> None:
            raise RuntimeError("database password is hunter2")

    host = make_host(Broken())
    try:
        with caplog.at_level(logging.ERROR, logger="mcphost.host"), pytest.raises(Refused) as refused:
            async with MemoryClient(host):
                pytest.fail("a broken connect hook must not let the client in")
    finally:
        await host.stop()

    assert refused.value.status == 500
    assert "hunter2" not in str(refused.value)
    assert "Broken-0" in caplog.text and "mcphost_connect raised" in caplog.text


async def test_mcphost_connect_async_implementation_is_awaited() -> None:
    class AsyncLogin:
        @mcphost.hookimpl
        async def mcphost_connect(self, session: Session, request: Connection) -> None:
            await asyncio.sleep(0)
            session.assigns["user"] = "grace"

    async with MemoryClient(make_host(Tools(), AsyncLogin())) as client:
        result = await client.call_tool("whoami")
    assert result["content"] == [{"type": "text", "text": "grace"}]


async def test_mcphost_disconnect_and_terminate_get_their_reasons() -> None:
    recorder = Recorder()
    host = make_host(recorder)
    async with MemoryClient(host) as client:
        assert client.session is not None
        first = client.session.id
        assert recorder.calls == []
    assert recorder.calls == [("disconnect", first, "eof"), ("terminate", first, "eof")]

    recorder.calls.clear()
    await host.start()
    session = host.manager.new()
    await host.manager.close(session, "dropped")
    assert recorder.calls == [("disconnect", session.id, "dropped")]
    assert session.id in host.sessions  # a disconnect is not the end of the session
    await host.stop()
    assert recorder.calls == [("disconnect", session.id, "dropped"), ("terminate", session.id, "shutdown")]
    assert session.closed and session.id not in host.sessions


async def test_mcphost_terminate_fires_once_per_session() -> None:
    recorder = Recorder()
    host = make_host(recorder)
    await host.start()
    session = host.manager.new()
    await host.manager.terminate(session, "deleted")
    await host.manager.terminate(session, "expired")
    await host.stop()  # the session is already gone: no "shutdown" terminate for it
    assert recorder.calls == [("terminate", session.id, "deleted")]


async def test_mcphost_terminate_async_implementation_is_awaited() -> None:
    finished: list[str] = []

    class AsyncCleanup:
        @mcphost.hookimpl
        async def mcphost_disconnect(self, session: Session, reason: str) -> None:
            await asyncio.sleep(0)
            finished.append(f"disconnect:{reason}")

        @mcphost.hookimpl
        async def mcphost_terminate(self, session: Session, reason: str) -> None:
            await asyncio.sleep(0)
            finished.append(f"terminate:{reason}")

    async with MemoryClient(make_host(AsyncCleanup())):
        pass
    assert finished == ["disconnect:eof", "terminate:eof"]


async def test_mcphost_disconnect_and_terminate_errors_are_logged_and_swallowed(
        caplog: pytest.LogCaptureFixture) -> None:
    class Clumsy:
        @mcphost.hookimpl
        def mcphost_disconnect(self, session: Session, reason: str) -> None:
            raise RuntimeError("disconnect broke")

        @mcphost.hookimpl
        async def mcphost_terminate(self, session: Session, reason: str) -> None:
            raise RuntimeError("terminate broke")

    recorder = Recorder()
    # Clumsy runs first (registered last); the recorder must still hear about both events.
    host = make_host(recorder, Clumsy())
    await host.start()
    with caplog.at_level(logging.ERROR, logger="mcphost.host"):
        async with MemoryClient(host) as client:
            assert client.session is not None
            session_id = client.session.id
        async with MemoryClient(host) as client:
            assert client.session is not None
            second_id = client.session.id
    await host.stop()
    assert recorder.calls == [("disconnect", session_id, "eof"), ("terminate", session_id, "eof"),
                              ("disconnect", second_id, "eof"), ("terminate", second_id, "eof")]
    # Logged with its traceback once per plugin and hook, not once per session.
    assert caplog.text.count("Clumsy-1: mcphost_disconnect raised") == 1
    assert caplog.text.count("Clumsy-1: mcphost_terminate raised") == 1
    assert "disconnect broke" in caplog.text and "terminate broke" in caplog.text
    assert host.failures.counts == {("Clumsy-1", "mcphost_disconnect"): 2, ("Clumsy-1", "mcphost_terminate"): 2}


# -- auth (the specs; tests/unit/test_auth.py and test_http_auth.py cover the behaviour) --------------------------


def test_mcphost_authenticate_spec_accepts_implementations() -> None:
    class BearerAuth:
        @mcphost.hookimpl
        def mcphost_authenticate(self, request: Connection) -> Principal | None:
            header = request.headers.get("authorization", "")
            if not header:
                return None
            if header != "Bearer good":
                raise Unauthorized("bad token", challenge='Bearer error="invalid_token"')
            return Principal("ada", issuer="https://issuer.example")

    class NoOpinion:
        @mcphost.hookimpl
        def mcphost_authenticate(self, request: Connection) -> Principal | None:
            return None

    host = make_host(BearerAuth(), NoOpinion())
    assert "mcphost_authenticate" in host.plugin_infos["BearerAuth-0"].hooks
    assert [impl.plugin_name for impl in host.pm.hook.mcphost_authenticate.get_hookimpls()] == [
        "BearerAuth-0", "NoOpinion-1"]

    good = Connection(transport="http", headers={"authorization": "Bearer good"})
    assert host.pm.hook.mcphost_authenticate(request=good) == [Principal("ada", issuer="https://issuer.example")]
    assert host.pm.hook.mcphost_authenticate(request=Connection(transport="http")) == []
    with pytest.raises(Unauthorized) as refused:
        host.pm.hook.mcphost_authenticate(request=Connection(transport="http",
                                                             headers={"authorization": "Bearer bad"}))
    assert refused.value.headers == {"WWW-Authenticate": 'Bearer error="invalid_token"'}


def test_mcphost_authenticate_implementation_must_match_the_spec() -> None:
    class Misspelt:
        @mcphost.hookimpl
        def mcphost_authenticate(self, req: Connection) -> None:  # the spec's argument is "request"
            return None

    with pytest.raises(pluggy.PluginValidationError):
        make_host(Misspelt())


def test_mcphost_protected_resource_metadata_spec_collects_dicts() -> None:
    class Issuer:
        @mcphost.hookimpl
        def mcphost_protected_resource_metadata(self, host: Any) -> dict[str, Any]:
            return {"authorization_servers": ["https://issuer.example"]}

    class Scopes:
        @mcphost.hookimpl
        def mcphost_protected_resource_metadata(self, host: Any) -> dict[str, Any]:
            return {"scopes_supported": [host.config.server.name]}

    host = make_host(Issuer(), Scopes(), config={"server": {"name": "files"}})
    assert "mcphost_protected_resource_metadata" in host.plugin_infos["Issuer-0"].hooks
    # pluggy returns the results last-registered first; the transport merges them.
    assert host.pm.hook.mcphost_protected_resource_metadata(host=host) == [
        {"scopes_supported": ["files"]}, {"authorization_servers": ["https://issuer.example"]}]


# -- middleware -------------------------------------------------------------------------------------


async def test_mcphost_middleware_sees_requests_and_can_alter_results() -> None:
    seen: list[tuple[str, str | None, str, bool]] = []

    @mcphost.middleware
    async def stamp(request: RequestInfo, call_next: Any) -> dict[str, Any]:
        seen.append((request.method, request.name, request.session.id, isinstance(request, RequestInfo)))
        result = await call_next(request)
        if request.method == "tools/call":
            result = {**result, "_meta": {"stamped-by": "middleware"}}
        return result

    class Stamping:
        @mcphost.hookimpl
        def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
            return [shout]

        @mcphost.hookimpl
        def mcphost_middleware(self, host: Any) -> list[mcphost.Middleware]:
            return [stamp]

    async with MemoryClient(make_host(Stamping())) as client:
        assert client.session is not None
        session_id = client.session.id
        result = await client.call_tool("shout", {"text": "a"})
        await client.list_tools()

    assert result == {"content": [{"type": "text", "text": "A"}], "_meta": {"stamped-by": "middleware"}}
    assert seen == [("initialize", None, session_id, True), ("tools/call", "shout", session_id, True),
                    ("tools/list", None, session_id, True)]


async def test_mcphost_middleware_order_is_outermost_first() -> None:
    trace: list[str] = []

    def tracer(label: str) -> mcphost.Middleware:
        async def mw(request: RequestInfo, call_next: Any) -> dict[str, Any]:
            trace.append(f"{label} in")
            result = await call_next(request)
            trace.append(f"{label} out")
            return result
        return mcphost.middleware(mw, name=label)

    class Outer:
        @mcphost.hookimpl
        def mcphost_middleware(self, host: Any) -> list[mcphost.Middleware]:
            return [tracer("outer-1"), tracer("outer-2")]

    class Inner:
        @mcphost.hookimpl
        def mcphost_middleware(self, host: Any) -> list[mcphost.Middleware]:
            return [tracer("inner")]

    # Outer is registered first, so its middleware wraps the rest.
    async with MemoryClient(make_host(Outer(), Inner()), initialize=False) as client:
        await client.request("ping")
    assert trace == ["outer-1 in", "outer-2 in", "inner in", "inner out", "outer-2 out", "outer-1 out"]


async def test_mcphost_middleware_can_refuse_without_calling_the_handler() -> None:
    calls: list[str] = []

    @mcphost.tool
    def guarded() -> str:
        calls.append("handler")
        return "ran"

    @mcphost.middleware
    async def policy(request: RequestInfo, call_next: Any) -> dict[str, Any]:
        if request.method == "tools/call" and request.name == "guarded":
            raise McpError(INVALID_PARAMS, "Denied by policy")
        return await call_next(request)

    plugin = module_plugin("policy", mcphost_tools=mcphost.hookimpl(lambda host: [guarded]),
                           mcphost_middleware=mcphost.hookimpl(lambda host: [policy]))
    async with MemoryClient(make_host(plugin)) as client:
        with pytest.raises(McpError) as denied:
            await client.call_tool("guarded")
        assert [t["name"] for t in await client.list_tools()] == ["guarded"]
    assert (denied.value.code, denied.value.message) == (INVALID_PARAMS, "Denied by policy")
    assert calls == []


async def test_mcphost_middleware_that_raises_is_skipped_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    trail: list[str] = []

    @mcphost.middleware
    async def flaky(request: RequestInfo, call_next: Any) -> dict[str, Any]:
        if request.method == "tools/call":
            raise RuntimeError("redis password is hunter2")
        return await call_next(request)

    @mcphost.middleware
    async def inner(request: RequestInfo, call_next: Any) -> dict[str, Any]:
        trail.append(request.method)
        return await call_next(request)

    class Flaky:
        @mcphost.hookimpl
        def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
            return [shout]

        @mcphost.hookimpl
        def mcphost_middleware(self, host: Any) -> list[mcphost.Middleware]:
            return [flaky, inner]

    host = make_host(Flaky())
    async with MemoryClient(host) as client:
        with caplog.at_level(logging.DEBUG, logger="mcphost.kernel"):
            first = await client.call_tool("shout", {"text": "x"})
            second = await client.call_tool("shout", {"text": "y"})

    # The request went on without the broken middleware, and the rest of the chain still ran.
    assert first["content"] == [{"type": "text", "text": "X"}]
    assert second["content"] == [{"type": "text", "text": "Y"}]
    assert trail == ["initialize", "tools/call", "tools/call"]
    tracebacks = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(tracebacks) == 1 and "Flaky-0: middleware flaky raised" in tracebacks[0].getMessage()
    assert "hunter2" in caplog.text  # the operator sees it, once with its traceback
    assert host.kernel is not None and host.kernel.failures.counts == {("Flaky-0", "middleware flaky"): 2}


async def test_mcphost_middleware_failing_after_call_next_keeps_the_outcome(caplog: pytest.LogCaptureFixture) -> None:
    @mcphost.tool
    def broken() -> str:
        raise McpError(INVALID_PARAMS, "the handler's own refusal")

    @mcphost.middleware
    async def sloppy(request: RequestInfo, call_next: Any) -> dict[str, Any]:
        try:
            return await call_next(request)
        finally:
            if request.method == "tools/call":
                raise KeyError("bookkeeping bug")  # replaces whatever the rest returned or raised

    plugin = module_plugin("sloppy", mcphost_tools=mcphost.hookimpl(lambda host: [shout, broken]),
                           mcphost_middleware=mcphost.hookimpl(lambda host: [sloppy]))
    async with MemoryClient(make_host(plugin)) as client:
        with caplog.at_level(logging.ERROR, logger="mcphost.kernel"):
            result = await client.call_tool("shout", {"text": "ok"})
            reply = await client.raw_request("tools/call", {"name": "broken", "arguments": {}})

    assert result["content"] == [{"type": "text", "text": "OK"}]  # the result stands
    # The handler's error reaches the client exactly as without the middleware.
    assert reply["error"] == {"code": INVALID_PARAMS, "message": "the handler's own refusal"}
    assert caplog.text.count("sloppy: middleware sloppy raised") == 1


async def test_mcphost_middleware_fail_closed_turns_its_failure_into_an_internal_error(
        caplog: pytest.LogCaptureFixture) -> None:
    @mcphost.middleware(fail_closed=True)
    async def policy(request: RequestInfo, call_next: Any) -> dict[str, Any]:
        if request.method == "tools/call":
            raise RuntimeError("policy store password is hunter2")
        return await call_next(request)

    plugin = module_plugin("policy", mcphost_tools=mcphost.hookimpl(lambda host: [shout]),
                           mcphost_middleware=mcphost.hookimpl(lambda host: [policy]))
    async with MemoryClient(make_host(plugin)) as client:
        with caplog.at_level(logging.ERROR, logger="mcphost.kernel"):
            reply = await client.raw_request("tools/call", {"name": "shout", "arguments": {"text": "x"}})
        # The session survives the failure.
        assert [t["name"] for t in await client.list_tools()] == ["shout"]

    assert reply["error"] == {"code": INTERNAL_ERROR, "message": "Internal error"}
    assert "hunter2" not in str(reply)
    assert "hunter2" in caplog.text  # the operator sees it in the log


async def test_mcphost_middleware_context_names_principal_version_owner_and_connection() -> None:
    seen: list[tuple[Any, ...]] = []

    @mcphost.middleware
    async def look(request: RequestInfo, call_next: Any) -> dict[str, Any]:
        try:
            return await call_next(request)
        finally:
            seen.append((request.method, request.principal, request.protocol_version, request.plugin,
                         request.plugin_version, request.owner, request.connection))

    tools = module_plugin("tools", mcphost_tools=mcphost.hookimpl(lambda host: [shout]),
                          mcphost_prompts=mcphost.hookimpl(lambda host: [hello_prompt]),
                          mcphost_resource_templates=mcphost.hookimpl(lambda host: [item]))
    watcher = module_plugin("watcher", mcphost_middleware=mcphost.hookimpl(lambda host: [look]),
                            mcphost_connect=mcphost.hookimpl(lambda session: setattr(
                                session, "principal", Principal("ann"))))
    connection = Connection(transport="http", headers={"traceparent": "00-abc"}, remote="127.0.0.1:5")
    async with MemoryClient(make_host(tools, watcher), connection=connection) as client:
        await client.call_tool("shout", {"text": "a"})
        await client.get_prompt("hello_prompt", {"name": "b"})
        await client.read_resource("test://items/3")
        await client.raw_request("tools/call", {"name": "nope"})

    owner = Provenance("tools")
    version = client.protocol_version
    assert seen == [
        ("initialize", Principal("ann"), version, None, None, None, connection),
        ("tools/call", Principal("ann"), version, "tools", None, owner, connection),
        ("prompts/get", Principal("ann"), version, "tools", None, owner, connection),
        ("resources/read", Principal("ann"), version, "tools", None, owner, connection),
        ("tools/call", Principal("ann"), version, None, None, None, connection),  # unknown tool: no owner
    ]


async def test_mcphost_exception_sees_failing_handlers_inside_the_middleware_chain(
        caplog: pytest.LogCaptureFixture) -> None:
    import contextvars

    current = contextvars.ContextVar("current", default="outside")
    seen: list[tuple[str | None, str | None, str, str]] = []

    @mcphost.tool
    def explode() -> str:
        raise RuntimeError("tool secret")

    @mcphost.resource("boom://r", name="r")
    def bad_resource() -> str:
        raise RuntimeError("resource secret")

    @mcphost.prompt
    def bad_prompt() -> str:
        raise RuntimeError("prompt secret")

    @mcphost.middleware
    async def mark(request: RequestInfo, call_next: Any) -> dict[str, Any]:
        token = current.set(f"inside {request.method}")
        try:
            return await call_next(request)
        finally:
            current.reset(token)

    def observe(request: RequestInfo, exception: BaseException) -> None:
        seen.append((request.name, request.plugin, str(exception), current.get()))

    def clumsy(request: RequestInfo, exception: BaseException) -> None:
        raise ValueError("observer bug")

    handlers = module_plugin("handlers", mcphost_tools=mcphost.hookimpl(lambda host: [explode, shout]),
                             mcphost_resources=mcphost.hookimpl(lambda host: [bad_resource]),
                             mcphost_prompts=mcphost.hookimpl(lambda host: [bad_prompt]),
                             mcphost_middleware=mcphost.hookimpl(lambda host: [mark]))
    host = make_host(handlers, module_plugin("observer", mcphost_exception=mcphost.hookimpl(observe)),
                     module_plugin("clumsy", mcphost_exception=mcphost.hookimpl(clumsy)))
    async with MemoryClient(host) as client:
        with caplog.at_level(logging.ERROR, logger="mcphost.host"):
            result = await client.call_tool("explode")
            again = await client.call_tool("explode")
            resource = await client.raw_request("resources/read", {"uri": "boom://r"})
            prompt = await client.raw_request("prompts/get", {"name": "bad_prompt"})
            fine = await client.call_tool("shout", {"text": "fine"})

    # What clients see is unchanged: generic errors, no exception text.
    assert result["isError"] is True and "tool secret" not in str(result) and again == result
    assert resource["error"]["code"] == INTERNAL_ERROR and "secret" not in str(resource)
    assert prompt["error"] == {"code": INTERNAL_ERROR, "message": "Internal error"}
    assert fine["content"] == [{"type": "text", "text": "FINE"}]
    assert seen == [("explode", "handlers", "tool secret", "inside tools/call"),
                    ("explode", "handlers", "tool secret", "inside tools/call"),
                    ("boom://r", "handlers", "resource secret", "inside resources/read"),
                    ("bad_prompt", "handlers", "prompt secret", "inside prompts/get")]
    assert caplog.text.count("clumsy: mcphost_exception raised") == 1  # once, not per request
    assert host.failures.counts[("clumsy", "mcphost_exception")] == 4


async def test_mcphost_middleware_hook_mistakes_fail_only_that_plugin(caplog: pytest.LogCaptureFixture) -> None:
    trace: list[str] = []

    async def undecorated(request: RequestInfo, call_next: Any) -> dict[str, Any]:
        trace.append("undecorated")
        return await call_next(request)

    @mcphost.middleware
    async def good(request: RequestInfo, call_next: Any) -> dict[str, Any]:
        trace.append(request.method)
        return await call_next(request)

    def broken_hook(host: Any) -> list[mcphost.Middleware]:
        raise RuntimeError("no middleware today")

    host = make_host(module_plugin("good", mcphost_middleware=mcphost.hookimpl(lambda host: [good])),
                     module_plugin("bare", mcphost_middleware=mcphost.hookimpl(lambda host: [undecorated])),
                     module_plugin("broken", mcphost_middleware=mcphost.hookimpl(broken_hook)))
    with caplog.at_level(logging.ERROR, logger="mcphost.plugins"):
        host.prepare()
    async with MemoryClient(host, initialize=False) as client:
        assert await client.request("ping") == {}

    assert trace == ["ping"]
    assert "plugin bare failed at mcphost_middleware" in caplog.text
    assert "use @mcphost.middleware" in caplog.text
    assert "plugin broken failed at mcphost_middleware" in caplog.text
    # Fail closed: a plugin whose middleware is broken is failed and unregistered, not served half-way.
    assert [host.plugin_infos[n].status for n in ("good", "bare", "broken")] == ["active", "failed", "failed"]
    assert host.pm.get_plugin("bare") is None and host.pm.get_plugin("broken") is None


# -- backend ------------------------------------------------------------------------------------------


def test_a_backend_that_is_not_a_backend_subclass_is_refused_at_startup() -> None:
    class Duck:
        name = "duck"
        shared = False

    class DuckPlugin:
        @mcphost.hookimpl
        def mcphost_backend(self, host: Any) -> Any:
            return Duck()

    with pytest.raises(mcphost.PluginError, match=r"not a subclass of mcphost\.sessions\.backend\.Backend"):
        make_host(DuckPlugin()).prepare()


def test_the_backend_base_class_defaults_are_those_of_one_process() -> None:
    backend = Backend()
    assert (backend.shared, backend.lease, backend.subscriptions_apart) == (False, 0.0, False)
    assert asyncio.run(backend.health()) is True
    assert asyncio.run(backend.start()) is None and asyncio.run(backend.close()) is None


async def test_ctx_host_is_a_narrow_facade_of_the_host() -> None:
    seen: dict[str, Any] = {}

    @mcphost.tool
    async def inspect_host(*, ctx: mcphost.Context) -> str:
        """Look at what a tool can reach."""
        seen["config"] = dict(ctx.host.plugin_config("facade"))
        seen["settings"] = ctx.host.settings(FacadeSettings)
        seen["public"] = sorted(name for name in dir(ctx.host) if not name.startswith("_"))
        await ctx.host.notify_list_changed("tools")
        return "ok"

    class FacadeSettings(mcphost.PluginSettings):
        motd: str = ""
        limit: int = 3

    class Facade:
        @mcphost.hookimpl
        def mcphost_settings(self) -> type[FacadeSettings]:
            return FacadeSettings

        @mcphost.hookimpl
        def mcphost_tools(self, host: Any) -> list[Any]:
            return [inspect_host]

    host = make_host(("facade", Facade()), config={"plugins": {"facade": {"motd": "hi"}}})
    async with MemoryClient(host) as client:
        result = await client.call_tool("inspect_host")
    assert result["content"][0]["text"] == "ok"
    assert seen["config"] == {"motd": "hi"}
    assert seen["settings"] == FacadeSettings(motd="hi", limit=3)
    assert seen["public"] == ["notify_list_changed", "notify_resource_updated", "plugin_config", "reload", "respond",
                              "settings"]
    assert [n["method"] for n in client.notifications] == ["notifications/tools/list_changed"]


def test_mcphost_backend_first_result_wins_over_the_builtin() -> None:
    class RedisLike(Backend):
        name = "redis-like"

    backend = RedisLike()

    class BackendPlugin:
        @mcphost.hookimpl
        def mcphost_backend(self, host: Any) -> Any:
            return backend

    class NoBackend:
        @mcphost.hookimpl
        def mcphost_backend(self, host: Any) -> Any:
            return None

    installed = make_host(BackendPlugin(), NoBackend())
    installed.prepare()
    assert installed.backend is backend

    default = make_host(NoBackend())
    default.prepare()
    assert isinstance(default.backend, MemoryBackend)


# -- extension points -----------------------------------------------------------------------------------


class FakeApp:
    """Stands in for the Quart app until the HTTP transport exists: records route registrations."""

    def __init__(self) -> None:
        self.routes: dict[str, Any] = {}

    def route(self, path: str) -> Any:
        def register(fn: Any) -> Any:
            self.routes[path] = fn
            return fn
        return register


def test_mcphost_routes_implementations_receive_the_app() -> None:
    class Health:
        @mcphost.hookimpl
        def mcphost_routes(self, app: Any) -> None:
            @app.route("/healthz")
            def healthz() -> str:
                return "ok"

    host = make_host(Health())
    assert "mcphost_routes" in host.plugin_infos["Health-0"].hooks
    app = FakeApp()
    host.pm.hook.mcphost_routes(app=app)
    assert list(app.routes) == ["/healthz"]
    assert app.routes["/healthz"]() == "ok"


def test_mcphost_register_commands_adds_a_click_command() -> None:
    class Greeter:
        @mcphost.hookimpl
        def mcphost_register_commands(self, cli: click.Group) -> None:
            @cli.command()
            @click.option("--name", default="world")
            def hello(name: str) -> None:
                """Say hello."""
                click.echo(f"hello {name}")

    @click.group()
    def fresh() -> None:
        """A group standing in for the mcphost command line."""

    host = make_host(Greeter())
    host.pm.hook.mcphost_register_commands(cli=fresh)
    assert list(fresh.commands) == ["hello"]
    result = CliRunner().invoke(fresh, ["hello", "--name", "ada"])
    assert result.exit_code == 0, result.output
    assert result.output == "hello ada\n"


GREETER_SCHEMA = {"type": "object", "additionalProperties": False,
                  "properties": {"greeting": {"type": "string"}}}


def greeter_plugin() -> types.ModuleType:
    @mcphost.hookimpl
    def mcphost_config_schema() -> dict[str, Any]:
        return GREETER_SCHEMA

    @mcphost.hookimpl
    def mcphost_tools(host: Any) -> list[mcphost.Tool]:
        greeting = host.plugin_config("greeter").get("greeting", "hello")

        @mcphost.tool
        def greet(name: str) -> str:
            return f"{greeting} {name}"

        return [greet]

    return module_plugin("greeter", mcphost_config_schema=mcphost_config_schema, mcphost_tools=mcphost_tools)


class GreeterSettings(mcphost.PluginSettings):
    greeting: str = "hello"


async def test_mcphost_settings_model_is_checked_and_its_instance_handed_to_the_plugin() -> None:
    def tools(host: mcphost.Host) -> list[mcphost.Tool]:
        greeting = host.settings(GreeterSettings).greeting

        @mcphost.tool
        def greet(name: str) -> str:
            return f"{greeting} {name}"

        return [greet]

    def plugin() -> types.ModuleType:
        return module_plugin("greeter", mcphost_settings=mcphost.hookimpl(lambda: GreeterSettings),
                             mcphost_tools=mcphost.hookimpl(tools))

    host = make_host(plugin(), config={"plugins": {"greeter": {"greeting": "ahoy"}}})
    assert host.config_schemas()["greeter"]["properties"]["greeting"]["default"] == "hello"
    async with MemoryClient(host) as client:
        result = await client.call_tool("greet", {"name": "ada"})
    assert result["content"] == [{"type": "text", "text": "ahoy ada"}]
    with pytest.raises(ConfigErrors, match=r"\[plugins.greeter\] unknown key 'greting' \(did you mean 'greeting'\?\)"):
        make_host(plugin(), config={"plugins": {"greeter": {"greting": "ahoy"}}}).prepare()


async def test_mcphost_config_schema_valid_section_reaches_the_plugin() -> None:
    host = make_host(greeter_plugin(), config={"plugins": {"greeter": {"greeting": "ahoy"}}})
    assert host.config_schemas() == {"greeter": GREETER_SCHEMA}
    async with MemoryClient(host) as client:
        result = await client.call_tool("greet", {"name": "ada"})
    assert result["content"] == [{"type": "text", "text": "ahoy ada"}]


@pytest.mark.parametrize(("section", "expected"), [
    ({"greeting": 5}, ["[plugins.greeter.greeting]", "5 is not of type 'string'"]),
    ({"colour": "red"}, ["[plugins.greeter]", "'colour'"]),
])
def test_mcphost_config_schema_invalid_section_stops_prepare(section: dict[str, Any],
                                                             expected: list[str]) -> None:
    host = make_host(greeter_plugin(), config={"plugins": {"greeter": section}})
    with pytest.raises(ConfigError) as error:
        host.prepare()
    for fragment in expected:
        assert fragment in str(error.value)
    assert host.kernel is None  # nothing was collected


async def test_mcphost_unconfigured_sets_a_plugin_aside_until_its_setting_is_given() -> None:
    calls: list[str] = []

    class Waits:
        @mcphost.hookimpl
        def mcphost_unconfigured(self, host: Any) -> str | None:
            calls.append("asked")
            return None if host.plugin_config("waits").get("key") else "[plugins.waits] key"

        @mcphost.hookimpl
        def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
            calls.append("tools")
            return [mcphost.tool(name="waiting")(lambda: "here")]

        @mcphost.hookimpl
        def mcphost_startup(self, host: Any) -> None:
            calls.append("startup")

    dormant = make_host(("waits", Waits()))
    await dormant.start()
    info = dormant.plugin_infos["waits"]
    assert (info.status, info.wake) == ("not configured", "[plugins.waits] key")
    assert calls == ["asked"] and "waiting" not in dormant.catalog.tools
    assert dormant.pm.get_plugin("waits") is None
    await dormant.stop()
    calls.clear()
    awake = make_host(("waits", Waits()), config={"plugins": {"waits": {"key": "k"}}})
    await awake.start()
    assert awake.plugin_infos["waits"].status == "active" and "waiting" in awake.catalog.tools
    assert calls == ["asked", "tools", "startup"]
    await awake.stop()


def test_mcphost_unconfigured_that_raises_marks_the_plugin_failed() -> None:
    class Broken:
        @mcphost.hookimpl
        def mcphost_unconfigured(self, host: Any) -> str | None:
            raise RuntimeError("cannot tell")

    host = make_host(("broken", Broken()))
    host.prepare()
    assert host.plugin_infos["broken"].status == "failed" and "cannot tell" in (host.plugin_infos["broken"].error or "")


def test_mcphost_config_schema_that_is_not_a_schema_is_reported() -> None:
    bad = module_plugin("bad_schema", mcphost_config_schema=mcphost.hookimpl(lambda: {"type": 12}))
    with pytest.raises(ConfigError, match="plugin 'bad_schema' declares an invalid config schema"):
        make_host(bad).prepare()


async def test_mcphost_startup_and_shutdown_sync_and_async_run_once() -> None:
    events: list[str] = []

    class SyncHooks:
        @mcphost.hookimpl
        def mcphost_startup(self, host: Any) -> None:
            events.append(f"sync startup, tools={sorted(host.catalog.tools)}")

        @mcphost.hookimpl
        def mcphost_shutdown(self, host: Any) -> None:
            events.append(f"sync shutdown, sessions={len(host.sessions)}")

        @mcphost.hookimpl
        def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
            return [shout]

    class AsyncHooks:
        @mcphost.hookimpl
        async def mcphost_startup(self, host: Any) -> None:
            await asyncio.sleep(0)
            events.append("async startup")

        @mcphost.hookimpl
        async def mcphost_shutdown(self, host: Any) -> None:
            await asyncio.sleep(0)
            events.append("async shutdown")

        @mcphost.hookimpl
        def mcphost_terminate(self, session: Session, reason: str) -> None:
            events.append(f"terminate {reason}")

    host = make_host(SyncHooks(), AsyncHooks())
    await host.start()
    await host.start()  # idempotent
    assert events == ["sync startup, tools=['shout']", "async startup"]  # registration order
    host.manager.new()
    await host.stop()
    await host.stop()  # idempotent
    assert events[2:] == ["terminate shutdown", "sync shutdown, sessions=0", "async shutdown"]


async def test_mcphost_startup_failure_stops_start() -> None:
    def failing_startup(host: Any) -> None:
        raise RuntimeError("no database")

    host = make_host(module_plugin("failing_start", mcphost_startup=mcphost.hookimpl(failing_startup)))
    with pytest.raises(RuntimeError, match="no database"):
        await host.start()
    assert not host._started


async def test_mcphost_shutdown_failure_is_logged_and_the_others_still_run(
        caplog: pytest.LogCaptureFixture) -> None:
    shutdown_calls: list[str] = []

    async def failing_shutdown(host: Any) -> None:
        raise RuntimeError("flush failed")

    # failing_stop is registered last, so it runs first; "after" must still run.
    host = make_host(module_plugin("after", mcphost_shutdown=mcphost.hookimpl(
                         lambda host: shutdown_calls.append("after"))),
                     module_plugin("failing_stop", mcphost_shutdown=mcphost.hookimpl(failing_shutdown)))
    await host.start()
    with caplog.at_level(logging.ERROR, logger="mcphost.host"):
        await host.stop()
    assert shutdown_calls == ["after"]
    assert "plugin failing_stop: mcphost_shutdown raised" in caplog.text
    assert "flush failed" in caplog.text


# -- one plugin implementing every hook at once -----------------------------------------------------------


class Favourite:
    """A ranker that puts one tool first for every query (and is told of the index's changes)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.told: set[str] = set()

    def update(self, changes: Any) -> None:
        self.told.update(document.name for documents in changes.values() for document in documents)

    def rank(self, query: str, limit: int, accept: Any) -> list[tuple[str, float]]:
        if self.name not in self.told or (accept is not None and not accept(self.name)):
            return []
        return [(self.name, 1.0)]


async def test_mcphost_search_rankers_are_fused_with_the_lexical_search_within_the_callers_view() -> None:
    favourite = Favourite("shout")

    class Ranking:
        @mcphost.hookimpl
        def mcphost_search_rankers(self, host: Any) -> list[Any]:
            return [favourite]

    config = {"endpoints": {"find": {"discovery": "search"},
                            "narrow": {"discovery": "search", "exclude": {"tools": ["shout"]}}}}
    class Tools:
        @mcphost.hookimpl
        def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
            return [shout, whoami]

    host = make_host(Tools(), Ranking(), config=config)
    found = {}
    for endpoint in ("find", "narrow"):
        async with MemoryClient(host, connection=Connection(transport="memory", endpoint=endpoint)) as client:
            result = await client.call_tool("search_tools", {"query": "whoami", "limit": 3})
            found[endpoint] = [tool["name"] for tool in result["structuredContent"]["tools"]]
    assert "shout" in favourite.told  # the ranker was told of the catalog
    assert "whoami" in found["find"] and "shout" in found["find"]  # lexical hit and the ranker's, fused
    assert "shout" not in found["narrow"]  # the ranker only ranks what the caller's view accepts


class EverySettings(mcphost.PluginSettings):
    motd: str = ""


class EveryHook:
    """Implements every hook in hookspecs.py; registered alone, everything still works together."""

    def __init__(self) -> None:
        self.__name__ = "every"
        self.events: list[str] = []
        self.backend = MemoryBackend()  # its own instance, not the built-in default

    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        @mcphost.tool
        def fail() -> str:
            raise RuntimeError("every tool fails once")

        return [shout, whoami, fail]

    @mcphost.hookimpl
    def mcphost_resources(self, host: Any) -> list[mcphost.Resource]:
        motd = host.settings(EverySettings).motd

        @mcphost.resource("every://motd", name="motd")
        def read_motd() -> str:
            return motd

        return [read_motd]

    @mcphost.hookimpl
    def mcphost_resource_templates(self, host: Any) -> list[mcphost.ResourceTemplate]:
        return [item]

    @mcphost.hookimpl
    def mcphost_prompts(self, host: Any) -> list[mcphost.Prompt]:
        return [hello_prompt]

    @mcphost.hookimpl
    async def mcphost_connect(self, session: Session, request: Connection) -> None:
        session.assigns["user"] = "every"
        self.events.append("connect")

    @mcphost.hookimpl
    def mcphost_disconnect(self, session: Session, reason: str) -> None:
        self.events.append(f"disconnect {reason}")

    @mcphost.hookimpl
    async def mcphost_terminate(self, session: Session, reason: str) -> None:
        self.events.append(f"terminate {reason}")

    @mcphost.hookimpl
    def mcphost_exception(self, request: RequestInfo, exception: BaseException) -> None:
        self.events.append(f"exception {request.name} {type(exception).__name__}")

    @mcphost.hookimpl
    def mcphost_authenticate(self, request: Connection) -> Principal | None:
        return Principal("every") if request.headers.get("x-user") == "every" else None

    @mcphost.hookimpl
    def mcphost_protected_resource_metadata(self, host: Any) -> dict[str, Any]:
        return {"resource": "https://every.example/mcp"}

    @mcphost.hookimpl
    def mcphost_middleware(self, host: Any) -> list[mcphost.Middleware]:
        async def count(request: RequestInfo, call_next: Any) -> dict[str, Any]:
            self.events.append(f"request {request.method}")
            return await call_next(request)
        return [mcphost.middleware(count)]

    @mcphost.hookimpl
    def mcphost_backend(self, host: Any) -> Any:
        return self.backend

    @mcphost.hookimpl
    def mcphost_search_rankers(self, host: Any) -> list[Any]:
        return [Favourite("shout")]

    @mcphost.hookimpl
    def mcphost_routes(self, app: Any) -> None:
        app.route("/every")(lambda: "every")

    @mcphost.hookimpl
    def mcphost_register_commands(self, cli: click.Group) -> None:
        cli.add_command(click.Command("every", callback=lambda: click.echo("every command")))

    @mcphost.hookimpl
    def mcphost_config_schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": {"motd": {"type": "string"}}, "additionalProperties": False}

    @mcphost.hookimpl
    def mcphost_settings(self) -> type[EverySettings]:
        return EverySettings  # wins over the schema above

    @mcphost.hookimpl
    def mcphost_unconfigured(self, host: Any) -> str | None:
        return None if host.settings(EverySettings).motd else "[plugins.every] motd"

    @mcphost.hookimpl
    def mcphost_startup(self, host: Any) -> None:
        self.events.append("startup")

    @mcphost.hookimpl
    async def mcphost_shutdown(self, host: Any) -> None:
        self.events.append("shutdown")

    @mcphost.hookimpl
    def mcphost_status(self, host: Any) -> dict[str, Any]:
        return {"events": len(self.events)}

    @mcphost.hookimpl
    def mcphost_problems(self, host: Any) -> list[dict[str, str]]:
        return [{"kind": "every", "severity": "warning", "title": "every hook at once",
                 "detail": f"{len(self.events)} events", "link": "#plugin-every"}]

    @mcphost.hookimpl
    def mcphost_readiness(self, host: Any) -> list[mcphost.Unready]:
        return []


def hook_names() -> list[str]:
    return sorted(name for name, obj in vars(hookspecs).items()
                  if name.startswith("mcphost_") and inspect.isfunction(obj))


async def test_one_plugin_implementing_every_hook() -> None:
    plugin = EveryHook()
    host = make_host(plugin, config={"plugins": {"every": {"motd": "all hooks at once"}}})
    info = host.plugin_infos["every"]
    assert info.hooks == hook_names()

    async with MemoryClient(host) as client:
        assert [t["name"] for t in await client.list_tools()] == ["shout", "whoami", "fail"]
        assert (await client.call_tool("whoami"))["content"][0]["text"] == "every"
        assert (await client.call_tool("fail"))["isError"] is True
        assert (await client.read_resource("every://motd"))["contents"][0]["text"] == "all hooks at once"
        assert (await client.read_resource("test://items/7"))["contents"][0]["text"] == "item 7"
        assert [p["name"] for p in await client.list_prompts()] == ["hello_prompt"]

    assert host.backend is plugin.backend
    assert info.status == "active"
    assert info.provides == {"prompts": ["hello_prompt"], "resourceTemplates": ["test://items/{item_id}"],
                             "resources": ["every://motd"], "tools": ["shout", "whoami", "fail"],
                             "middleware": ["count"], "search_rankers": ["Favourite"]}
    assert plugin.events == [
        "startup", "connect", "request initialize", "request tools/list", "request tools/call",
        "request tools/call", "exception fail RuntimeError", "request resources/read", "request resources/read",
        "request prompts/list",
        "disconnect eof", "terminate eof", "shutdown"]

    assert host.pm.hook.mcphost_authenticate(request=Connection("http", headers={"x-user": "every"})) == [
        Principal("every")]
    assert host.pm.hook.mcphost_protected_resource_metadata(host=host) == [
        {"resource": "https://every.example/mcp"}]
    app = FakeApp()
    host.pm.hook.mcphost_routes(app=app)
    assert app.routes["/every"]() == "every"

    @click.group()
    def fresh() -> None:
        """A stand-in for the mcphost command line."""

    host.pm.hook.mcphost_register_commands(cli=fresh)
    assert CliRunner().invoke(fresh, ["every"]).output == "every command\n"
    assert introspect.status_reports(host) == {"every": {"events": 13}}
    assert await introspect.problems(host) == [{"kind": "every", "severity": "warning", "title": "every hook at once",
                                                "detail": "13 events", "link": "#plugin-every"}]

    bad = make_host(EveryHook(), config={"plugins": {"every": {"motd": 1}}})
    with pytest.raises(ConfigError, match=r"plugins\.every\.motd"):
        bad.prepare()


def test_mcphost_status_reports_live_state_on_demand_and_contains_failures() -> None:
    class Queue:
        def __init__(self) -> None:
            self.depth = 0

        @mcphost.hookimpl
        def mcphost_status(self, host: Any) -> dict[str, Any]:
            return {"depth": self.depth}

    class Silent:
        @mcphost.hookimpl
        def mcphost_status(self, host: Any) -> None:
            return None

    class Broken:
        @mcphost.hookimpl
        def mcphost_status(self, host: Any) -> dict[str, Any]:
            raise KeyError("depth")

    queue = Queue()
    host = make_host(("queue", queue), ("silent", Silent()), ("broken", Broken()))
    host.prepare()
    assert introspect.status_reports(host) == {"queue": {"depth": 0},
                                               "broken": {"error": "mcphost_status raised KeyError: 'depth'"}}
    queue.depth = 5  # asked again, it says what is true now
    assert introspect.status_reports(host)["queue"] == {"depth": 5}
    assert {p["name"]: p["report"] for p in introspect.plugins(host)}["silent"] is None


async def test_mcphost_problems_are_gathered_with_the_hosts_own_errors_first_and_redacted() -> None:
    class Pins:
        def __init__(self) -> None:
            self.held = ["vendor_lookup"]

        @mcphost.hookimpl
        def mcphost_problems(self, host: Any) -> list[dict[str, str]]:
            return [{"kind": "held", "severity": "warning", "title": f"Tool {name} awaits approval",
                     "detail": "fetched from https://bot:hunter2@vendor.example/mcp", "link": "#catalog"}
                    for name in self.held]

    class Odd:
        @mcphost.hookimpl
        def mcphost_problems(self, host: Any) -> list[Any]:
            return ["the disk is nearly full", {"severity": "fatal"}]

    class Broken:
        @mcphost.hookimpl
        def mcphost_problems(self, host: Any) -> None:
            raise KeyError("held")

    class Failing:
        @mcphost.hookimpl
        def mcphost_tools(self, host: Any) -> list[Any]:
            raise RuntimeError("no database")

    pins = Pins()
    host = make_host(("pins", pins), ("odd", Odd()), ("broken", Broken()), ("failing", Failing()))
    host.prepare()
    found = await introspect.problems(host)
    assert [(p["kind"], p["severity"], p["title"]) for p in found] == [
        ("plugin", "error", "Plugin failing failed"),
        ("plugin", "error", "Plugin broken could not report its problems"),
        ("held", "warning", "Tool vendor_lookup awaits approval"),
        ("plugin", "warning", "Plugin odd reported a problem"),
        ("odd", "warning", "Plugin odd reported a problem")]  # an unknown severity is a warning
    assert found[2]["detail"] == "fetched from https://bot:[redacted]@vendor.example/mcp"
    assert found[3]["detail"] == "the disk is nearly full" and found[4]["link"] == "#plugin-odd"
    assert "KeyError" in found[1]["detail"] and found[0]["link"] == "#plugin-failing"
    pins.held = []  # asked again, it says what is true now
    assert [p["kind"] for p in await introspect.problems(host)] == ["plugin", "plugin", "plugin", "odd"]


async def test_mcphost_readiness_makes_readyz_degraded_or_not_ready_and_contains_failures(
        caplog: pytest.LogCaptureFixture) -> None:
    class Links:
        def __init__(self) -> None:
            self.down: list[mcphost.Unready] = []

        @mcphost.hookimpl
        def mcphost_readiness(self, host: Any) -> list[mcphost.Unready]:
            return self.down

    class Broken:
        broken = False

        @mcphost.hookimpl
        def mcphost_readiness(self, host: Any) -> list[mcphost.Unready] | None:
            if self.broken:
                raise KeyError("links")
            return None

    links, broken = Links(), Broken()
    async with app_client(make_host(("links", links), ("broken", broken))) as http:
        ready = await http.get("/readyz")
        assert (ready.status_code, ready.json()) == (200, {"status": "ready", "backend": "memory"})
        links.down = [mcphost.Unready("files", "restarting")]  # asked again, it says what is true now
        degraded = await http.get("/readyz")
        assert (degraded.status_code, degraded.json()) == (200, {
            "status": "degraded", "backend": "memory",
            "down": [{"plugin": "links", "name": "files", "state": "restarting", "required": False}]})
        links.down.append(mcphost.Unready("tickets", "failed", required=True))
        down = await http.get("/readyz")
        assert down.status_code == 503
        assert down.json()["status"] == "unavailable"
        assert [(d["name"], d["required"]) for d in down.json()["down"]] == [("files", False), ("tickets", True)]
        links.down = []
        broken.broken = True
        for _ in range(2):  # a hook that raises: degraded, named by its plugin, logged in full once
            answer = await http.get("/readyz")
            assert (answer.status_code, answer.json()["status"]) == (200, "degraded")
            assert answer.json()["down"] == [{"plugin": "broken", "name": "broken", "required": False,
                                              "state": "mcphost_readiness raised KeyError"}]
    assert len([r for r in caplog.records
                if r.levelno >= logging.ERROR and "mcphost_readiness raised" in r.getMessage()]) == 1


def test_every_hookspec_has_a_test_here() -> None:
    names = hook_names()
    # The introspection finds exactly the hooks pluggy knows from the spec module.
    pm = make_plugin_manager()
    assert names == sorted(name for name in vars(pm.hook) if name.startswith("mcphost_"))
    source = Path(__file__).read_text(encoding="utf-8")
    module = sys.modules[__name__]
    tests = [name for name, obj in vars(module).items() if name.startswith("test_") and callable(obj)]
    untested = [name for name in names if not any(test.startswith(f"test_{name}_") for test in tests)]
    assert untested == [], f"hooks without a test_<hook>_... test in {Path(__file__).name}: {untested}"
    not_implemented = [name for name in names if f"def {name}(" not in inspect.getsource(EveryHook)]
    assert not_implemented == [], f"EveryHook does not implement: {not_implemented}"
    assert all(name in source for name in names)
