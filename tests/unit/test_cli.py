"""The ``mcphost`` command line, run in-process with click's CliRunner.

The CLI builds its Host with entry points, so the demo plugin installed in the test
environment is present (tools echo, progress, ...). ``XDG_CONFIG_HOME`` points at a temporary
directory and ``MCPHOST_*`` variables are cleared so no developer configuration leaks in.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import mcphost
from mcphost.cli import cli

DEMO_TOOLS = ["echo", "progress", "greet_user", "summarize", "list_roots"]


@pytest.fixture(autouse=True)
def xdg(isolated_config: Path) -> Path:
    return isolated_config


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env)


def ok(*args: str, env: dict[str, str] | None = None) -> Result:
    result = run(*args, env=env)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def assert_clean_error(result: Result, exit_code: int = 1) -> None:
    """A user error: the right exit code, an ``Error:`` line, and no traceback."""
    assert result.exit_code == exit_code, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Error: " in result.output
    assert "Traceback" not in result.output


# -- version and listings --------------------------------------------------------------------------


def test_version() -> None:
    assert ok("version").stdout == f"mcphost {mcphost.__version__}\n"


def test_the_distribution_version_is_mcphost_version() -> None:
    """pyproject.toml reads the version from ``mcphost.__version__``: one place to change it."""
    assert importlib.metadata.version("mcphost") == mcphost.__version__


def test_plugins_table() -> None:
    lines = ok("plugins").stdout.splitlines()
    assert lines[0].split() == ["NAME", "VERSION", "STATUS", "PROVIDES"]
    demo = next(line for line in lines if line.startswith("demo "))
    assert demo.split()[:3] == ["demo", "0.1.0", "active"]
    assert "5 tools, 1 resource, 1 template, 1 prompt" in demo
    assert not any(line.startswith("builtin.memory") for line in lines)


def test_plugins_table_fits_the_terminal_and_names_what_wakes_a_dormant_plugin() -> None:
    """Every shipped plugin is installed here; the table stays within the terminal's width."""
    for columns in ("100", "70"):
        lines = ok("plugins", env={"COLUMNS": columns, "MCPHOST_PLUGINS": None}).stdout.splitlines()
        assert max(len(line) for line in lines) <= int(columns)
        start, end = lines[0].index("STATUS"), lines[0].index("PROVIDES")
        rows: dict[str, str] = {}
        for line in lines[1:]:  # a wrapped cell goes on below, in its column
            if not line.startswith(" "):
                name = line.split()[0]
                rows[name] = ""
            rows[name] = f"{rows[name]} {line[start:end].strip()}".strip()
        assert "not configured: [plugins.jwt] issuer" in rows["jwt"]
        assert "not configured: [plugins.redis] url" in rows["redis"]
        assert "not configured: OTEL_EXPORTER_OTLP_ENDPOINT" in rows["otel"]
        assert "not configured: [plugins.conformance] enabled = true" in rows["conformance"]
        assert "…" not in "".join(lines)


def test_tables_print_whole_lines_when_piped() -> None:
    """Not a terminal and no COLUMNS: one line per row, nothing cut (grep sees every word)."""
    lines = ok("plugins", env={"COLUMNS": None, "MCPHOST_PLUGINS": None}).stdout.splitlines()
    demo = next(line for line in lines if line.startswith("demo "))
    assert demo.endswith("5 tools, 1 resource, 1 template, 1 prompt")
    assert all(not line.startswith(" ") for line in lines)
    tools = ok("tools", env={"COLUMNS": None}).stdout.splitlines()
    progress = next(line for line in tools if line.startswith("progress "))
    assert progress.endswith("then say how many steps ran.")


def test_plugins_all_includes_builtins() -> None:
    lines = ok("plugins", "--all").stdout.splitlines()
    memory = next(line for line in lines if line.startswith("builtin.memory "))
    assert memory.split()[:3] == ["builtin.memory", mcphost.__version__, "active"]


def test_plugins_json() -> None:
    data = json.loads(ok("plugins", "--json").stdout)
    demo = next(info for info in data if info["name"] == "demo")
    assert demo == {
        "name": "demo", "distribution": "mcphost-demo", "version": "0.1.0", "status": "active", "error": None,
        "where": None, "builtin": False,
        "hooks": ["mcphost_prompts", "mcphost_resource_templates", "mcphost_resources", "mcphost_settings",
                  "mcphost_tools"],
        "provides": {"prompts": ["review_code"], "resourceTemplates": ["demo://files/{+path}"],
                     "resources": ["demo://readme"], "tools": DEMO_TOOLS},
        "wake": None, "report": None,
    }


def test_tools_table() -> None:
    lines = ok("tools", env={"COLUMNS": None}).stdout.splitlines()
    assert lines[0].split() == ["TOOL", "PLUGIN", "DESCRIPTION"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert list(rows) == DEMO_TOOLS
    assert rows["echo"].split(None, 2) == ["echo", "demo", "Return the text unchanged."]


def test_tools_json_includes_plugin_and_schema() -> None:
    data = json.loads(ok("tools", "--json").stdout)
    assert [tool["name"] for tool in data] == DEMO_TOOLS
    echo = data[0]
    assert (echo["plugin"], echo["distribution"]) == ("demo", "mcphost-demo")
    assert echo["description"] == "Return the text unchanged."
    assert echo["inputSchema"]["properties"]["text"]["type"] == "string"
    assert echo["inputSchema"]["required"] == ["text"]
    assert echo["annotations"]["readOnlyHint"] is True


# -- call ----------------------------------------------------------------------------------------------


def test_call_prints_the_result() -> None:
    result = ok("call", "echo", "--arg", "text=hi")
    assert json.loads(result.stdout) == {"content": [{"type": "text", "text": "hi"}]}


def test_call_parses_arg_values_as_json_except_for_string_parameters() -> None:
    result = ok("call", "progress", "--arg", "steps=2")
    assert json.loads(result.stdout)["content"] == [{"type": "text", "text": "completed 2 steps"}]
    # A string parameter takes the text verbatim: no JSON parsing, no quoting needed.
    number_like = ok("call", "echo", "--arg", "text=42")
    assert json.loads(number_like.stdout)["content"][0]["text"] == "42"
    quoted = ok("call", "echo", "--arg", 'text="42"')
    assert json.loads(quoted.stdout)["content"][0]["text"] == '"42"'


def test_call_with_json_args_and_arg_overriding_it() -> None:
    result = ok("call", "echo", "--json-args", '{"text": "from json"}')
    assert json.loads(result.stdout)["content"][0]["text"] == "from json"
    overridden = ok("call", "echo", "--json-args", '{"text": "from json"}', "--arg", "text=from arg")
    assert json.loads(overridden.stdout)["content"][0]["text"] == "from arg"


def test_failing_call_prints_the_error_result_and_exits_1() -> None:
    result = run("call", "echo")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["isError"] is True
    assert "argument 'text' is required" in data["content"][0]["text"]


def test_call_unknown_tool_is_a_clean_error() -> None:
    result = run("call", "no_such_tool")
    assert_clean_error(result)
    assert "Error: no_such_tool: Unknown tool: no_such_tool" in result.output


@pytest.mark.parametrize(("json_args", "message"), [
    ("{not json", "Invalid value for --json-args: not valid JSON"),
    ("[1, 2]", "Invalid value for --json-args: must be a JSON object"),
])
def test_call_bad_json_args_is_a_usage_error(json_args: str, message: str) -> None:
    result = run("call", "echo", "--json-args", json_args)
    assert_clean_error(result, exit_code=2)
    assert message in result.output


def test_call_arg_without_equals_is_a_usage_error() -> None:
    result = run("call", "echo", "--arg", "text")
    assert_clean_error(result, exit_code=2)
    assert "expected KEY=VALUE" in result.output


# -- config ------------------------------------------------------------------------------------------------


def test_config_path_default_env_and_flag(xdg: Path, tmp_path: Path) -> None:
    assert ok("config", "path").stdout == f"{xdg / 'mcphost' / 'mcphost.toml'}\n"
    env_file = tmp_path / "env.toml"
    assert ok("config", "path", env={"MCPHOST_CONFIG": str(env_file)}).stdout == f"{env_file}\n"
    flag_file = tmp_path / "flag.toml"
    assert ok("--config", str(flag_file), "config", "path",
              env={"MCPHOST_CONFIG": str(env_file)}).stdout == f"{flag_file}\n"


def test_config_show_merges_file_and_env(tmp_path: Path) -> None:
    path = tmp_path / "mcphost.toml"
    path.write_text('[server]\nname = "shown"\nport = 9100\n\n[plugins]\nblock = ["x"]\n\n'
                    '[plugins.demo]\nroot = "/srv"\n', encoding="utf-8")
    data = json.loads(ok("--config", str(path), "config", "show", env={"MCPHOST_PORT": "9300"}).stdout)
    assert data["path"] == str(path)
    assert data["server"]["name"] == "shown"
    assert data["server"]["port"] == 9300
    assert data["server"]["allowed_hosts"] == []
    assert data["plugins"] == {"demo": {"root": "/srv"}}
    assert (data["block"], data["allow"]) == (["x"], None)


def test_config_show_defaults() -> None:
    data = json.loads(ok("config", "show").stdout)
    assert data["path"] is None
    assert (data["server"]["host"], data["server"]["port"], data["server"]["path"]) == ("127.0.0.1", 8000, "/mcp")


def test_config_schema_shows_the_demo_schema() -> None:
    data = json.loads(ok("config", "schema").stdout)
    assert data["demo"]["type"] == "object"
    assert data["demo"]["additionalProperties"] is False
    assert data["demo"]["properties"]["root"]["type"] == "string"


def test_config_schema_respects_disable_plugin() -> None:
    assert json.loads(ok("--disable-plugin", "demo", "config", "schema").stdout) == {}


# -- serve, selection, errors ------------------------------------------------------------------------------


def test_serve_refuses_a_public_bind_without_auth_or_allowed_hosts() -> None:
    result = run("serve", "--host", "0.0.0.0", "--port", "0")
    assert_clean_error(result)
    assert "refusing to listen on 0.0.0.0" in result.output and "--allow-remote" in result.output


def test_serve_refuses_several_workers_on_the_in_memory_backend() -> None:
    result = run("serve", "--workers", "2", "--port", "0")
    assert_clean_error(result)
    assert "2 workers need a shared state backend" in result.output


@pytest.mark.parametrize("name", ["demo", "mcphost-demo"])
def test_disable_plugin_hides_its_tools(name: str) -> None:
    assert ok("--disable-plugin", name, "tools").stdout == "No tools.\n"
    assert json.loads(ok("--disable-plugin", name, "tools", "--json").stdout) == []
    plugins = json.loads(ok("--disable-plugin", name, "plugins", "--json").stdout)
    assert next(p for p in plugins if p["name"] == "demo")["status"] == "disabled"
    result = run("--disable-plugin", name, "call", "echo", "--arg", "text=hi")
    assert_clean_error(result)
    # With no tools at all the host does not even offer the tools capability.
    assert "Error: echo: Method not found: tools/call" in result.output


def test_disable_plugin_env() -> None:
    assert ok("tools", env={"MCPHOST_DISABLE_PLUGINS": "demo"}).stdout == "No tools.\n"


@pytest.mark.parametrize(("text", "message"), [
    ("[sever]\n", "[sever] unknown section (did you mean 'server'?)"),
    ("[server]\nport = \"high\"\n", "server.port must be int, not 'high'"),
    ("[server\n", "cannot read the configuration"),
])
@pytest.mark.parametrize("command", [["tools"], ["plugins"], ["config", "show"], ["serve", "--stdio"],
                                     ["call", "echo"]])
def test_bad_config_file_is_a_clean_error(tmp_path: Path, text: str, message: str, command: list[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    result = run("--config", str(path), *command)
    assert_clean_error(result)
    assert f"Error: {path}: " in result.output
    assert message in result.output


def test_missing_config_file_is_a_clean_error(tmp_path: Path) -> None:
    result = run("--config", str(tmp_path / "absent.toml"), "tools")
    assert_clean_error(result)
    assert f"{tmp_path / 'absent.toml'}: configuration file not found" in result.output


def test_invalid_plugin_section_is_a_clean_error(tmp_path: Path) -> None:
    path = tmp_path / "mcphost.toml"
    path.write_text("[plugins.demo]\nroot = 5\n", encoding="utf-8")
    result = run("--config", str(path), "tools")
    assert_clean_error(result)
    assert "[plugins.demo.root] Input should be a valid string, not 5" in result.output


def test_allow_list_flag_that_names_no_installed_plugin_leaves_only_builtins() -> None:
    assert ok("--plugins", "someone-else", "tools").stdout == "No tools.\n"
    plugins = json.loads(ok("--plugins", "demo", "plugins", "--json").stdout)
    assert [p["name"] for p in plugins if p["status"] == "active"] == ["demo"]
    assert {p["status"] for p in plugins if p["name"] != "demo"} <= {"disabled"}
