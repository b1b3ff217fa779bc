"""``mcphost serve --reload`` for real: a plugin from a temporary folder, edited while served over HTTP."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcphost.reload import child_command, child_env, plugin_source_paths
from tests.support.fixtures.distributions import make_distribution
from tests.support.http_support import HttpServer

PLUGIN = '''
import mcphost


@mcphost.tool
def answer() -> str:
    return "{answer}"
{extra}

@mcphost.hookimpl
def mcphost_tools(host):
    return [{tools}]
'''
EXTRA_TOOL = '''

@mcphost.tool
def added(n: int) -> int:
    return n * 2
'''
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}}


def write_plugin(path: Path, answer: str, extra: bool = False) -> None:
    path.write_text(PLUGIN.format(answer=answer, extra=EXTRA_TOOL if extra else "",
                                  tools="answer, added" if extra else "answer"), encoding="utf-8")


def call(server: HttpServer, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if name:
        headers["mcp-name"] = name
    response = httpx.post(server.url, headers=headers, timeout=10, json={
        "jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": MODERN_META}})
    response.raise_for_status()
    return response.json()["result"]


def answer_of(server: HttpServer) -> str | None:
    try:
        result = call(server, "tools/call", {"name": "answer", "arguments": {}}, "answer")
    except (httpx.HTTPError, KeyError):
        return None  # restarting
    return str(result["content"][0]["text"])


def wait_for(server: HttpServer, predicate: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout}s; server log:\n{server.log()}")


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture
def plugin_env(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    source = tmp_path / "src"
    source.mkdir()
    module = source / "reloadme.py"
    write_plugin(module, "one")
    site = tmp_path / "site"
    make_distribution(site, "mcphost-reloadme", "0.0.1", {"reloadme": "reloadme"}, {})
    return module, {"PYTHONPATH": f"{site}:{source}"}


def test_editing_the_plugin_restarts_the_server_on_the_same_port(tmp_path: Path,
                                                                 plugin_env: tuple[Path, dict[str, str]]) -> None:
    module, env = plugin_env
    server = HttpServer(tmp_path, plugins="reloadme", args=["--reload"], env=env)
    try:
        assert wait_for(server, lambda: answer_of(server)) == "one"

        write_plugin(module, "two")
        assert wait_for(server, lambda: answer_of(server) == "two" and "two")

        # A new tool appears too: the catalog is collected afresh by the new process.
        write_plugin(module, "three", extra=True)
        wait_for(server, lambda: answer_of(server) == "three")
        tools = {tool["name"] for tool in call(server, "tools/list", {})["tools"]}
        assert tools == {"answer", "added"}
        result = call(server, "tools/call", {"name": "added", "arguments": {"n": 21}}, "added")
        assert result["structuredContent"] == {"result": 42}

        # A broken edit leaves no server; fixing it brings one back on the same port.
        module.write_text("this is not python(\n", encoding="utf-8")
        wait_for(server, lambda: not port_open(server.port))
        write_plugin(module, "four")
        assert wait_for(server, lambda: answer_of(server) == "four" and "four")
        assert server.process.poll() is None  # the supervisor itself never restarted
        assert "changed; restarting" in server.log()
    finally:
        assert server.stop() == 0
    assert not port_open(server.port)  # SIGTERM to the supervisor stopped the child too


def test_watched_paths_are_the_plugins_folders(plugin_env: tuple[Path, dict[str, str]],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    module, env = plugin_env
    site, source = env["PYTHONPATH"].split(":")
    monkeypatch.syspath_prepend(source)
    monkeypatch.syspath_prepend(site)
    import importlib

    importlib.invalidate_caches()
    assert module.parent in plugin_source_paths()


def test_child_command_drops_reload() -> None:
    command = child_command(["serve", "--reload", "--port", "9"])
    assert command[-3:] == ["serve", "--port", "9"] and "--reload" not in command


def test_a_folder_named_like_a_plugin_in_the_current_directory_does_not_replace_it(tmp_path: Path) -> None:
    """``serve --reload`` started where an empty folder ``mcphost_demo/`` happens to be: the child
    imports the installed plugin, not the folder (the current directory is not first on its path)."""
    workdir = tmp_path / "work"
    (workdir / "mcphost_demo").mkdir(parents=True)
    server = HttpServer(tmp_path, plugins="demo", args=["--reload"], cwd=workdir)
    try:
        def tools() -> set[str] | None:
            try:
                return {tool["name"] for tool in call(server, "tools/list", {})["tools"]}
            except (httpx.HTTPError, KeyError):
                return None

        assert "echo" in wait_for(server, tools)
    finally:
        server.stop()


def test_the_child_puts_the_watched_plugin_folders_on_its_module_path(
        plugin_env: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    module, env = plugin_env
    site, source = env["PYTHONPATH"].split(":")
    monkeypatch.syspath_prepend(source)
    monkeypatch.syspath_prepend(site)
    import importlib

    importlib.invalidate_caches()
    child = child_env({"PYTHONPATH": "/elsewhere"})
    paths = child["PYTHONPATH"].split(os.pathsep)
    assert str(module.parent) in paths and paths[-1] == "/elsewhere"
    assert "" not in paths and "." not in paths
    assert "-P" in child_command(["serve"])  # and the current directory is not prepended
