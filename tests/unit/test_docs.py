"""The docs stay true: every hook has a reference section, README examples are the tested files."""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path

import pytest

import mcphost
from mcphost import hookspecs
from mcphost.sessions.session import Connection
from mcphost.testing import MemoryClient, make_host

ROOT = Path(__file__).resolve().parents[2]
HOOKS = [name for name, fn in vars(hookspecs).items() if name.startswith("mcphost_") and callable(fn)]


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_are_hooks_to_document():
    assert len(HOOKS) >= 16


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_has_a_reference_section_with_its_signature(hook):
    text = (ROOT / "docs" / "hooks.md").read_text()
    assert f"### `{hook}`" in text, f"docs/hooks.md has no section for {hook}"
    signature = str(inspect.signature(getattr(hookspecs, hook))).replace("'", "")
    assert f"def {hook}{signature}" in text, f"docs/hooks.md shows an outdated signature for {hook}"


def test_every_documented_hook_exists():
    documented = re.findall(r"^### `(mcphost_\w+)`", (ROOT / "docs" / "hooks.md").read_text(), re.M)
    assert sorted(documented) == sorted(HOOKS)


@pytest.mark.parametrize("example", ["hello_plugin", "token_auth_plugin"])
def test_readme_shows_the_tested_example_verbatim(example):
    assert (ROOT / "examples" / f"{example}.py").read_text() in (ROOT / "README.md").read_text()


async def test_hello_plugin_example_works():
    host = make_host(load_example("hello_plugin"))
    async with MemoryClient(host) as client:
        [tool] = await client.list_tools()
        result = await client.call_tool("shout", {"text": "hi", "times": 2}, progress_token="p")
    assert tool["name"] == "shout" and tool["description"] == "Repeat the text in capitals."
    assert tool["inputSchema"]["required"] == ["text"]
    assert result["content"] == [{"type": "text", "text": "HI HI"}]
    assert [n["params"]["progress"] for n in client.notifications] == [1]


async def test_token_auth_example_authenticates_and_narrows():
    host = make_host(load_example("token_auth_plugin"), load_example("hello_plugin"))
    host.prepare()
    assert host.auth_required
    assert await host.authenticate(Connection(transport="http", headers={})) is None  # then the host says 401
    with pytest.raises(mcphost.Unauthorized) as refused:
        await host.authenticate(Connection(transport="http", headers={"authorization": "Bearer wrong"}))
    assert refused.value.status == 401
    assert refused.value.headers["WWW-Authenticate"] == (
        'Bearer error="invalid_token", error_description="Unknown token"')
    principal = await host.authenticate(Connection(transport="http", headers={"authorization": "bearer s3cret"}))
    assert principal is not None and principal.subject == "alice" and principal.scopes == {"notes:read"}
    async with MemoryClient(host, connection=Connection(transport="http", principal=principal)) as client:
        assert client.session.allowed_tools == {"echo", "shout"}
        assert [t["name"] for t in await client.list_tools()] == ["shout"]
    async with MemoryClient(host, connection=Connection(transport="stdio")) as client:
        assert client.session.allowed_tools is None
