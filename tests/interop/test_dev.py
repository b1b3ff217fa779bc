"""``mcphost dev FILE``: a module served as it is, called by the official Python SDK client over HTTP.

``examples/fastmcp_style.py`` is written for the SDK's ``MCPServer`` and knows nothing of mcphost;
``examples/hello_plugin.py`` is an mcphost plugin module. Neither is packaged or installed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcphost.dev import DevError, resolve
from tests.support.dev_support import dev

REPO_ROOT = Path(__file__).resolve().parents[2]
MCPHOST = Path(sys.executable).parent / "mcphost"

pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")


@pytest.fixture
def fastmcp_served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    yield from dev(tmp_path, str(REPO_ROOT / "examples" / "fastmcp_style.py"), "--no-reload")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_fastmcp_module_serves_its_tool_resources_and_prompt(fastmcp_served: tuple[str, Path],
                                                                     mode: str) -> None:
    url, log = fastmcp_served
    async with Client(url, mode=mode, read_timeout_seconds=30) as client:
        [tool] = (await client.list_tools()).tools
        assert tool.name == "forecast" and tool.description == "Forecast the weather for a city."
        assert tool.input_schema["properties"]["city"] == {"type": "string", "minLength": 1,
                                                            "description": "City name"}
        assert "ctx" not in tool.input_schema["properties"]
        called = await client.call_tool("forecast", {"city": "Paris", "days": 2})
        assert called.content[0].text == "Paris: sunny, 21°C for 2 day(s)"

        [resource] = (await client.list_resources()).resources
        assert (str(resource.uri), resource.mime_type) == ("weather://cities", "text/plain")
        read = await client.read_resource("weather://cities")
        assert read.contents[0].text == "oslo\nparis"
        [template] = (await client.list_resource_templates()).resource_templates
        assert template.uri_template == "weather://city/{name}"
        assert (await client.read_resource("weather://city/oslo")).contents[0].text == "rain, 9°C"

        [prompt] = (await client.list_prompts()).prompts
        assert prompt.name == "plan_trip" and prompt.description == "Ask for a trip plan that fits the weather."
        got = await client.get_prompt("plan_trip", {"city": "Oslo"})
        assert got.messages[0].content.text == "Plan a 3-day trip to Oslo; check weather://city/Oslo first."
    text = log.read_text()
    # The host's own log format: building the module's MCPServer did not switch it to Rich.
    assert "INFO mcphost.serve: serving MCP on" in text
    assert "Serving fastmcp_style (FastMCP-style: 1 tool, 1 resource, 1 template, 1 prompt)" in text
    assert "npx @modelcontextprotocol/inspector" in text


def test_an_mcphost_plugin_module_is_served_too(tmp_path: Path) -> None:
    served = dev(tmp_path, str(REPO_ROOT / "examples" / "hello_plugin.py"), "--no-reload")
    url, log = next(served)
    try:
        async def shout() -> str:
            async with Client(url, mode="legacy", read_timeout_seconds=10) as client:
                return str((await client.call_tool("shout", {"text": "hi", "times": 2})).content[0].text)

        assert asyncio.run(shout()) == "HI HI"
        assert "Serving hello_plugin (mcphost-style: 1 tool)" in log.read_text()
    finally:
        served.close()


def test_importing_a_module_leaves_the_hosts_logging_alone() -> None:
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    found = resolve(str(REPO_ROOT / "examples" / "fastmcp_style.py"))
    assert found.style == "FastMCP"
    assert (list(root.handlers), root.level) == before


def test_a_module_with_nothing_to_serve_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "nothing_here.py"
    empty.write_text("x = 1\n")
    with pytest.raises(DevError, match="nothing to serve: no mcphost hook"):
        resolve(str(empty))
    done = subprocess.run([str(MCPHOST), "dev", str(tmp_path / "missing.py")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and done.stderr.strip().endswith("missing.py: no such file or folder")


def test_reload_restarts_on_an_edit(tmp_path: Path) -> None:
    """An edit that keeps the file's size within the same second is served too (no stale bytecode)."""
    module = tmp_path / "live_tools.py"
    module.write_text("import mcphost\n\n@mcphost.tool\ndef version() -> str:\n    return 'one'\n\n"
                      "@mcphost.hookimpl\ndef mcphost_tools(host):\n    return [version]\n")
    served = dev(tmp_path, str(module))
    url, log = next(served)
    try:
        def call() -> str:
            async def ask() -> str:
                async with Client(url, mode="legacy", read_timeout_seconds=10) as client:
                    return str((await client.call_tool("version", {})).content[0].text)
            return asyncio.run(ask())

        assert call() == "one"
        module.write_text(module.read_text().replace("'one'", "'two'"))
        deadline = time.monotonic() + 30
        while True:
            try:
                if call() == "two":
                    break
            except Exception:  # restarting: the connection is refused for a moment
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.3)
    finally:
        served.close()


def test_an_entry_point_may_name_a_fastmcp_server_object(tmp_path: Path) -> None:
    """Packaged without an adapter: the entry point names the module's server object
    (``weather = "fastmcp_style:mcp"``); installing it does not switch the host's log to Rich."""
    from tests.support.fixtures.distributions import make_distribution

    site = tmp_path / "site"
    source = (REPO_ROOT / "examples" / "fastmcp_style.py").read_text()
    make_distribution(site, "mcphost-weather-fastmcp", "1.0", {"weather": "weather_fastmcp:mcp"},
                      {"weather_fastmcp": source})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPHOST_", "OTEL_"))}
    env.update({"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "PYTHONPATH": f"{site}:{REPO_ROOT}",
                "MCPHOST_PLUGINS": "weather"})
    listed = subprocess.run([str(MCPHOST), "plugins", "--json"], env=env, capture_output=True, text=True,
                            timeout=60)
    assert listed.returncode == 0, listed.stderr
    [weather] = [p for p in json.loads(listed.stdout) if p["name"] == "weather"]
    assert weather["status"] == "active"
    assert weather["provides"] == {"prompts": ["plan_trip"], "resourceTemplates": ["weather://city/{name}"],
                                   "resources": ["weather://cities"], "tools": ["forecast"]}
    called = subprocess.run([str(MCPHOST), "call", "forecast", "--arg", "city=Oslo"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(called.stdout)["content"][0]["text"] == "Oslo: rain, 9°C for 1 day(s)"
    assert "INFO" not in called.stderr  # no Rich handler printing the tool's ctx.info at the root logger


def test_reload_survives_replacing_saves_and_a_syntax_error(tmp_path: Path) -> None:
    """``sed -i`` (a new file renamed over the old), a normal save, an editor-style atomic save with
    a syntax error (the server stops), then a fix: four reloads, the last serving the fixed code."""
    module = tmp_path / "live_tools.py"
    source = ("import mcphost\n\n@mcphost.tool\ndef version() -> str:\n    return 'one'\n\n"
              "@mcphost.hookimpl\ndef mcphost_tools(host):\n    return [version]\n")
    module.write_text(source)
    served = dev(tmp_path, str(module))
    url, log = next(served)

    def call() -> str:
        async def ask() -> str:
            async with Client(url, mode="legacy", read_timeout_seconds=10) as client:
                return str((await client.call_tool("version", {})).content[0].text)
        return asyncio.run(ask())

    def until(check: Any) -> None:
        deadline = time.monotonic() + 60
        while True:
            try:
                if check():
                    return
            except Exception:  # restarting: the connection is refused for a moment
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.3)

    def restarts() -> int:
        return log.read_text().count("changed; restarting")

    try:
        assert call() == "one"
        subprocess.run(["sed", "-i", "s/'one'/'two'/", str(module)], check=True)
        until(lambda: call() == "two")
        module.write_text(source.replace("'one'", "'three'"))
        until(lambda: call() == "three")
        broken = tmp_path / ".live_tools.py.swp"  # an editor's atomic save: write beside, rename over
        broken.write_text(source.replace("'one'", "'four'").replace("def version()", "def version(:"))
        os.replace(broken, module)
        until(lambda: restarts() == 3 and "the server exited with status" in log.read_text())
        module.write_text(source.replace("'one'", "'four'"))
        until(lambda: call() == "four")
        assert restarts() == 4, log.read_text()
    finally:
        served.close()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_fastmcp_4_module_served_as_it_is(tmp_path: Path, mode: str) -> None:
    """A module written for the ``fastmcp`` package (4.x): tools, a resource, a template, a prompt,
    logging, progress and ``ctx.elicit(response_type=Model)``, used by the official SDK client."""
    pytest.importorskip("fastmcp", minversion="3")
    import mcp_types as types

    served = dev(tmp_path, str(REPO_ROOT / "tests" / "support" / "fastmcp_notes.py"), "--no-reload")
    url, log = next(served)
    asked: list[Any] = []
    logged: list[Any] = []

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"ok": True, "reason": "tidy"})

    async def on_log(params: Any) -> None:
        logged.append(params.data)

    async def session() -> None:
        async with Client(url, mode=mode, elicitation_callback=answer, logging_callback=on_log,
                          read_timeout_seconds=30) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"add_note", "clear_notes"} <= names
            key = (await client.call_tool("add_note", {"text": "water plants"})).content[0].text
            assert (await client.read_resource(f"notes://note/{key}")).contents[0].text == "water plants"
            listing = (await client.read_resource("notes://all")).contents[0].text
            assert "buy milk" in listing and "water plants" in listing
            prompt = await client.get_prompt("summarize", {"topic": "chores"})
            assert prompt.messages[0].content.text == "Summarize my notes about chores."
            progress: list[Any] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append((value, total, message))

            result = await client.call_tool("clear_notes", {}, progress_callback=on_progress)
            assert result.content[0].text.startswith("cleared ")
            total = int(result.content[0].text.split()[1])
            assert asked and asked[0].message == "Clear every note?"
            assert set(asked[0].requested_schema["properties"]) == {"ok", "reason"}
            if mode == "legacy":  # session era: progress and log messages arrive on the call's stream
                assert [p[0] for p in progress] == list(range(1, total + 1))
                assert "asking before clearing" in logged

    try:
        asyncio.run(session())
    finally:
        served.close()
    assert "Traceback" not in log.read_text()
