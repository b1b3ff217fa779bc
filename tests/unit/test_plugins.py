"""Plugin discovery, isolation and selection, tested with fake installed distributions.

Each test writes one or more ``*.dist-info`` folders with ``mcphost`` entry points into a
directory on ``sys.path`` (see ``tests/support/fixtures/distributions.py``), so ``importlib.metadata``
finds them exactly as it finds pip-installed packages. The demo plugin from ``plugins/`` is
really installed in the test environment, so it shows up too; the last test checks it through
the ``mcphost`` console script.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcphost.cli import cli
from mcphost.config import Config, config_from_dict
from mcphost.errors import PluginError
from mcphost.host import Host
from mcphost.plugins import ENV_ALLOW, ENV_BLOCK, ENV_STRICT, PluginSelection
from mcphost.records import Provenance
from mcphost.testing import MemoryClient
from tests.support.fixtures.distributions import make_distribution, tools_module


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("MCPHOST_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))  # no user config file leaks in


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory on sys.path to install fake distributions into; their modules are unloaded after."""
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(root)):
            del sys.modules[name]
    importlib.invalidate_caches()


def install(site: Path, name: str, version: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    make_distribution(site, name, version, entry_points, modules)
    importlib.invalidate_caches()


def install_good(site: Path) -> None:
    install(site, "good-dist", "1.2.3", {"good": "good_plugin"}, {"good_plugin": tools_module("good_echo")})


async def call_text(host: Host, tool: str, text: str = "") -> str:
    async with MemoryClient(host) as client:
        result = await client.call_tool(tool, {"text": text})
    assert not result.get("isError"), result
    return result["content"][0]["text"]


async def tool_names(host: Host) -> list[str]:
    async with MemoryClient(host) as client:
        return [tool["name"] for tool in await client.list_tools()]


# -- discovery ------------------------------------------------------------------------------------


async def test_installed_plugin_is_active_with_distribution_version_and_hooks(site: Path) -> None:
    install_good(site)
    host = Host(Config())
    info = host.plugin_infos["good"]
    assert (info.distribution, info.version, info.status, info.error, info.builtin) == (
        "good-dist", "1.2.3", "active", None, False)
    assert info.hooks == ["mcphost_tools"]

    assert await call_text(host, "good_echo", "hi") == "good_echo: hi"
    assert info.provides == {"tools": ["good_echo"]}
    assert host.catalog.tools["good_echo"].record.provenance == Provenance("good", "good-dist", "1.2.3")
    assert host.plugin_infos["builtin.memory"].builtin
    assert host.plugin_infos["builtin.memory"].status == "active"


def test_entry_points_off_ignores_installed_plugins(site: Path) -> None:
    install_good(site)
    host = Host(Config(), entry_points=False)
    assert set(host.plugin_infos) == {"builtin.memory"}
    assert "good_plugin" not in sys.modules


async def test_entry_point_naming_a_class_is_instantiated(site: Path) -> None:
    source = """
        import mcphost

        @mcphost.tool
        def counted(text: str = "") -> str:
            return text

        class Plugin:
            def __init__(self):
                self.instances = 1

            @mcphost.hookimpl
            def mcphost_tools(self, host):
                return [counted]
    """
    install(site, "class-dist", "0.1", {"classy": "class_plugin:Plugin"}, {"class_plugin": source})
    host = Host(Config())
    plugin = host.pm.get_plugin("classy")
    assert type(plugin).__name__ == "Plugin" and plugin.instances == 1
    assert await call_text(host, "counted", "x") == "x"


# -- a broken plugin does not take the host down ---------------------------------------------------


BROKEN_AT_IMPORT = """
    raise ImportError("missing dependency: libfoo")
"""


async def test_plugin_failing_at_import_is_failed_and_the_rest_serve(
        site: Path, caplog: pytest.LogCaptureFixture) -> None:
    install_good(site)
    install(site, "broken-dist", "0.9", {"broken": "broken_plugin"}, {"broken_plugin": BROKEN_AT_IMPORT})
    with caplog.at_level(logging.ERROR, logger="mcphost.plugins"):
        host = Host(Config())

    broken = host.plugin_infos["broken"]
    assert (broken.status, broken.distribution, broken.version) == ("failed", "broken-dist", "0.9")
    assert broken.error == "ImportError: missing dependency: libfoo"
    assert broken.hooks == []
    for fragment in ("broken", "broken_plugin", "broken-dist", "0.9", "libfoo"):
        assert fragment in caplog.text
    assert host.plugin_infos["good"].status == "active"
    assert await call_text(host, "good_echo", "still") == "good_echo: still"


def test_strict_selection_reraises_the_import_error(site: Path) -> None:
    install_good(site)
    install(site, "broken-dist", "0.9", {"broken": "broken_plugin"}, {"broken_plugin": BROKEN_AT_IMPORT})
    with pytest.raises(ImportError, match="libfoo"):
        Host(Config(), selection=PluginSelection(strict=True))


@pytest.mark.parametrize("value", ["1", "true", "yes"])
def test_strict_env_reraises_the_import_error(site: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    install(site, "broken-dist", "0.9", {"broken": "broken_plugin"}, {"broken_plugin": BROKEN_AT_IMPORT})
    monkeypatch.setenv(ENV_STRICT, value)
    with pytest.raises(ImportError, match="libfoo"):
        Host(Config())


def test_strict_config_reraises_the_import_error(site: Path) -> None:
    install(site, "broken-dist", "0.9", {"broken": "broken_plugin"}, {"broken_plugin": BROKEN_AT_IMPORT})
    with pytest.raises(ImportError, match="libfoo"):
        Host(config_from_dict({"plugins": {"strict": True}}))


def test_strict_env_off_keeps_serving(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "broken-dist", "0.9", {"broken": "broken_plugin"}, {"broken_plugin": BROKEN_AT_IMPORT})
    monkeypatch.setenv(ENV_STRICT, "0")
    assert Host(Config()).plugin_infos["broken"].status == "failed"


RAISES_AT_COLLECTION = """
    import mcphost

    @mcphost.hookimpl
    def mcphost_tools(host):
        raise RuntimeError("cannot reach the tool registry")
"""


async def test_plugin_whose_hook_raises_is_failed_and_the_rest_serve(site: Path) -> None:
    install_good(site)
    install(site, "flaky-dist", "2.0", {"flaky": "flaky_plugin"}, {"flaky_plugin": RAISES_AT_COLLECTION})
    host = Host(Config())
    assert host.plugin_infos["flaky"].status == "active"  # it imported fine; collection is what fails
    assert await call_text(host, "good_echo", "ok") == "good_echo: ok"
    flaky = host.plugin_infos["flaky"]
    assert flaky.status == "failed"
    assert flaky.error == "RuntimeError: cannot reach the tool registry"
    assert flaky.provides == {}


def test_plugin_whose_hook_raises_in_strict_mode_stops_prepare(site: Path) -> None:
    install(site, "flaky-dist", "2.0", {"flaky": "flaky_plugin"}, {"flaky_plugin": RAISES_AT_COLLECTION})
    host = Host(Config(), selection=PluginSelection(strict=True))
    with pytest.raises(PluginError, match="plugin 'flaky': cannot reach the tool registry"):
        host.prepare()


async def test_plugin_returning_a_bare_function_is_told_to_use_the_decorator(site: Path) -> None:
    source = """
        import mcphost

        def plain(text: str) -> str:
            return text

        @mcphost.hookimpl
        def mcphost_tools(host):
            return [plain]
    """
    install_good(site)
    install(site, "plain-dist", "0.1", {"plain": "plain_plugin"}, {"plain_plugin": source})
    host = Host(Config())
    names = await tool_names(host)
    assert "good_echo" in names and "plain" not in names
    info = host.plugin_infos["plain"]
    assert info.status == "failed"
    assert info.error == "mcphost_tools returned function, expected Tool (use @mcphost.tool)"
    assert "plain" not in host.catalog.tools


@pytest.mark.parametrize(("decorator", "expected"), [
    ("@mcphost.tool(name='has space')", "tool 'has space': tool names are 1-128 characters"),
    ("@mcphost.tool(name='x' * 129)", "tool names are 1-128 characters"),
    ("@mcphost.tool(name='caf\\u00e9')", "tool 'caf\u00e9': tool names are 1-128 characters"),
    ("@mcphost.tool(input_schema={'type': 'array'})", "tool 'bad': inputSchema must have type 'object'"),
    ("@mcphost.tool(input_schema={'type': 'object', 'properties': {'n': {'type': 'integer', 'minimum': 'zero'}}})",
     "tool 'bad': invalid JSON Schema: 'zero' is not of type 'number'"),
    ("@mcphost.tool(output_schema={'type': 'string'})", "tool 'bad': outputSchema must have type 'object'"),
])
async def test_invalid_tool_records_fail_their_plugin_as_a_whole(site: Path, decorator: str, expected: str) -> None:
    source = f"""
        import mcphost

        @mcphost.tool
        def fine(text: str = "") -> str:
            return text

        {decorator}
        def bad(text: str = "") -> str:
            return text

        @mcphost.hookimpl
        def mcphost_tools(host):
            return [fine, bad]
    """
    install_good(site)
    install(site, "bad-dist", "0.1", {"bad": "bad_plugin"}, {"bad_plugin": source})
    host = Host(Config())
    names = await tool_names(host)
    info = host.plugin_infos["bad"]
    assert info.status == "failed"
    assert info.error is not None and expected in info.error
    assert "fine" not in names  # all or nothing: the valid tool of a failed plugin is not served
    assert "good_echo" in names


async def test_same_tool_name_from_two_plugins_refuses_one_naming_both(site: Path) -> None:
    install(site, "alpha-tools", "1.0", {"alpha": "alpha_plugin"},
            {"alpha_plugin": tools_module("search", "alpha_only", prefix="alpha ")})
    install(site, "beta-tools", "2.0", {"beta": "beta_plugin"},
            {"beta_plugin": tools_module("search", prefix="beta ")})
    host = Host(Config())
    host.prepare()

    # Entry points register sorted by name and collection follows registration order, so alpha
    # keeps "search"; beta is refused whole, naming both plugins and distributions.
    alpha, beta = host.plugin_infos["alpha"], host.plugin_infos["beta"]
    assert alpha.status == "active"
    assert alpha.provides == {"tools": ["search", "alpha_only"]}
    assert beta.status == "failed"
    assert beta.error == ("tool 'search' is provided by both plugin 'alpha' (alpha-tools 1.0) "
                          "and plugin 'beta' (beta-tools 2.0)")
    assert await call_text(host, "search", "q") == "alpha search: q"
    assert "alpha_only" in await tool_names(host)


def test_same_entry_point_name_in_two_distributions_keeps_the_first(site: Path) -> None:
    install(site, "first-dist", "1.0", {"twin": "twin_one"}, {"twin_one": tools_module("one")})
    install(site, "second-dist", "1.0", {"twin": "twin_two"}, {"twin_two": tools_module("two")})
    host = Host(Config())
    host.prepare()
    twins = [info for key, info in host.plugin_infos.items() if info.name == "twin"]
    assert sorted(info.status for info in twins) == ["active", "failed"]
    failed = next(info for info in twins if info.status == "failed")
    assert failed.error == "plugin name 'twin' is already taken"
    active = next(info for info in twins if info.status == "active")
    assert failed.distribution != active.distribution
    assert len([name for name in ("one", "two") if name in host.catalog.tools]) == 1


def test_entry_point_may_not_take_a_builtin_name(site: Path) -> None:
    install(site, "impostor-dist", "1.0", {"builtin.memory": "impostor"}, {"impostor": tools_module("fake")})
    host = Host(Config())
    impostor = host.plugin_infos["builtin.memory (impostor-dist)"]
    assert impostor.status == "failed" and "already taken" in (impostor.error or "")
    assert host.plugin_infos["builtin.memory"].builtin
    assert "impostor" not in sys.modules


# -- block and allow ---------------------------------------------------------------------------------


def install_blockable(site: Path) -> None:
    install_good(site)
    install(site, "blocked-dist", "3.0", {"blocked": "blocked_plugin"},
            {"blocked_plugin": tools_module("blocked_tool")})


async def assert_blocked(host: Host) -> None:
    blocked = host.plugin_infos["blocked"]
    assert (blocked.status, blocked.distribution, blocked.version) == ("disabled", "blocked-dist", "3.0")
    assert blocked.hooks == []
    assert "blocked_plugin" not in sys.modules  # a blocked plugin is never imported
    names = await tool_names(host)
    assert "blocked_tool" not in names
    assert "good_echo" in names


@pytest.mark.parametrize("blocked_name", ["blocked", "blocked-dist"])
async def test_block_by_env(site: Path, monkeypatch: pytest.MonkeyPatch, blocked_name: str) -> None:
    install_blockable(site)
    monkeypatch.setenv(ENV_BLOCK, f"someone-else, {blocked_name}")
    await assert_blocked(Host(Config()))


@pytest.mark.parametrize("blocked_name", ["blocked", "blocked-dist"])
async def test_block_by_config_file(site: Path, tmp_path: Path, blocked_name: str) -> None:
    from mcphost.config import load_config

    install_blockable(site)
    path = tmp_path / "mcphost.toml"
    path.write_text(f'[plugins]\nblock = ["{blocked_name}"]\n', encoding="utf-8")
    await assert_blocked(Host(load_config(path)))


@pytest.mark.parametrize("blocked_name", ["blocked", "blocked-dist"])
async def test_block_by_selection(site: Path, blocked_name: str) -> None:
    install_blockable(site)
    await assert_blocked(Host(Config(), selection=PluginSelection(block=frozenset({blocked_name}))))


@pytest.mark.parametrize("blocked_name", ["blocked", "blocked-dist"])
def test_block_by_cli_flag(site: Path, blocked_name: str) -> None:
    install_blockable(site)
    runner = CliRunner()
    listed = runner.invoke(cli, ["--disable-plugin", blocked_name, "plugins", "--json"])
    assert listed.exit_code == 0, listed.output
    by_name = {info["name"]: info for info in json.loads(listed.output)}
    assert by_name["blocked"]["status"] == "disabled"
    assert by_name["good"]["status"] == "active"

    tools = runner.invoke(cli, ["--disable-plugin", blocked_name, "tools", "--json"])
    assert tools.exit_code == 0, tools.output
    names = [tool["name"] for tool in json.loads(tools.output)]
    assert "blocked_tool" not in names and "good_echo" in names

    unblocked = runner.invoke(cli, ["tools", "--json"])
    assert "blocked_tool" in [tool["name"] for tool in json.loads(unblocked.output)]


async def test_allow_list_by_env_loads_only_the_named_plugins(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_blockable(site)
    monkeypatch.setenv(ENV_ALLOW, "good")
    host = Host(Config())
    statuses = {name: info.status for name, info in host.plugin_infos.items()}
    assert statuses["good"] == "active"
    assert statuses["blocked"] == "disabled"
    assert statuses["demo"] == "disabled"
    assert statuses["builtin.memory"] == "active"  # built-ins always load
    assert await tool_names(host) == ["good_echo"]


async def test_allow_list_accepts_distribution_names_and_block_beats_allow(
        site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_blockable(site)
    monkeypatch.setenv(ENV_ALLOW, "good-dist,blocked")
    monkeypatch.setenv(ENV_BLOCK, "blocked")
    host = Host(Config())
    assert host.plugin_infos["good"].status == "active"
    assert host.plugin_infos["blocked"].status == "disabled"
    assert await tool_names(host) == ["good_echo"]


def test_allow_list_by_cli_flag(site: Path) -> None:
    install_blockable(site)
    result = CliRunner().invoke(cli, ["--plugins", "blocked", "tools", "--json"])
    assert result.exit_code == 0, result.output
    assert [tool["name"] for tool in json.loads(result.output)] == ["blocked_tool"]


def test_plugins_table_shows_failures(site: Path) -> None:
    install_good(site)
    install(site, "broken-dist", "0.9", {"broken": "broken_plugin"}, {"broken_plugin": BROKEN_AT_IMPORT})
    result = CliRunner().invoke(cli, ["plugins"], env={"COLUMNS": None})  # piped: whole lines
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["NAME", "VERSION", "STATUS", "PROVIDES"]
    broken = next(line for line in lines if line.startswith("broken "))
    assert "0.9" in broken and "failed: ImportError: missing dependency: libfoo" in broken
    good = next(line for line in lines if line.startswith("good "))
    assert good.split() == ["good", "1.2.3", "active", "1", "tool"]


# -- misspelt hooks ----------------------------------------------------------------------------------

MISSPELT_HOOK = '''
import mcphost

@mcphost.tool
def typo_echo(text: str) -> str:
    """Echo."""
    return text

@mcphost.hookimpl
def mcphost_tool(host):
    return [typo_echo]
'''


def test_a_misspelt_hook_marks_its_plugin_failed_naming_the_hook_it_meant(site: Path) -> None:
    install_good(site)
    install(site, "typo-dist", "0.1", {"typo": "typo_plugin"}, {"typo_plugin": MISSPELT_HOOK})
    listed = CliRunner().invoke(cli, ["plugins", "--json"])
    assert listed.exit_code == 0, listed.output
    by_name = {info["name"]: info for info in json.loads(listed.output)}
    assert by_name["typo"]["status"] == "failed"
    assert by_name["typo"]["error"] == ("plugin 'typo': hook 'mcphost_tool' is not a known hook; "
                                        "did you mean 'mcphost_tools'?")
    assert by_name["good"]["status"] == "active"
    # The table says failed, and why, whole (piped: one line a plugin; a terminal wraps it).
    table = CliRunner().invoke(cli, ["plugins"], env={"COLUMNS": None})
    typo = next(line for line in table.output.splitlines() if line.startswith("typo "))
    assert ("failed: plugin 'typo': hook 'mcphost_tool' is not a known hook; did you mean 'mcphost_tools'?"
            in typo)
    # The host serves the others; the failed plugin contributes nothing.
    tools = CliRunner().invoke(cli, ["tools", "--json"])
    names = [tool["name"] for tool in json.loads(tools.output)]
    assert "good_echo" in names and "typo_echo" not in names


def test_a_misspelt_hook_is_an_error_in_strict_mode(site: Path) -> None:
    install(site, "typo-dist", "0.1", {"typo": "typo_plugin"}, {"typo_plugin": MISSPELT_HOOK})
    with pytest.raises(PluginError, match="did you mean 'mcphost_tools'"):
        Host(Config(), selection=PluginSelection(strict=True))
