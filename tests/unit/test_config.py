"""Configuration: where the file is found, environment overrides, and the errors a user sees.

Every test points ``XDG_CONFIG_HOME`` (which platformdirs honours on Linux) at a temporary
directory and clears ``MCPHOST_*`` variables, so the developer's own configuration never leaks in.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mcphost.config import (
    ENV_CONFIG,
    SECTIONS,
    Config,
    ConfigErrors,
    ServerSettings,
    check_plugin_sections,
    config_from_dict,
    declare_section,
    default_path,
    load_config,
    resolve_path,
)
from mcphost.errors import ConfigError
from mcphost.host import Host
from mcphost.protocol.errors import RESOURCE_NOT_FOUND, McpError
from mcphost.testing import MemoryClient


@pytest.fixture(autouse=True)
def xdg(isolated_config: Path) -> Path:
    return isolated_config


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- defaults and where the file comes from ----------------------------------------------------------


def test_defaults_without_any_file() -> None:
    config = load_config()
    assert config == Config()
    assert config.path is None
    server = config.server
    assert (server.name, server.host, server.port, server.path) == ("mcphost", "127.0.0.1", 8000, "/mcp")
    assert (server.page_size, server.max_inflight, server.log_level) == (100, 64, "info")
    assert (config.block, config.allow, config.strict, dict(config.plugins)) == ((), None, False, {})
    assert config.plugin("demo") == {}


@pytest.mark.skipif(sys.platform != "linux", reason="XDG_CONFIG_HOME is how platformdirs is steered on Linux")
def test_default_path_is_in_the_platform_user_config_dir(xdg: Path) -> None:
    assert default_path() == xdg / "mcphost" / "mcphost.toml"
    assert resolve_path() == (xdg / "mcphost" / "mcphost.toml", False)


@pytest.mark.skipif(sys.platform != "linux", reason="XDG_CONFIG_HOME is how platformdirs is steered on Linux")
def test_default_file_is_read_when_present(xdg: Path) -> None:
    path = write(xdg / "mcphost" / "mcphost.toml", '[server]\nname = "from-default"\n')
    config = load_config()
    assert config.server.name == "from-default"
    assert config.path == path


def test_explicit_file_is_read(tmp_path: Path) -> None:
    path = write(tmp_path / "custom.toml", """
[server]
name = "files"
title = "File server"
port = 9100
client_request_timeout = 12
allowed_hosts = ["localhost", "example.com"]

[plugins]
block = ["noisy"]
allow = ["demo", "files"]

[plugins.demo]
root = "/srv/files"
""")
    config = load_config(path)
    assert config.path == path
    assert (config.server.name, config.server.title, config.server.port) == ("files", "File server", 9100)
    assert config.server.client_request_timeout == 12.0
    assert isinstance(config.server.client_request_timeout, float)
    assert config.server.allowed_hosts == ("localhost", "example.com")
    assert (config.block, config.allow) == (("noisy",), ("demo", "files"))
    assert config.plugin("demo") == {"root": "/srv/files"}


def test_env_config_variable_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, xdg: Path) -> None:
    write(xdg / "mcphost" / "mcphost.toml", '[server]\nname = "from-default"\n')
    path = write(tmp_path / "env.toml", '[server]\nname = "from-env"\n')
    monkeypatch.setenv(ENV_CONFIG, str(path))
    assert load_config().server.name == "from-env"
    assert resolve_path() == (path, True)


def test_explicit_file_wins_over_env_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_CONFIG, str(write(tmp_path / "env.toml", '[server]\nname = "from-env"\n')))
    explicit = write(tmp_path / "explicit.toml", '[server]\nname = "explicit"\n')
    assert load_config(explicit).server.name == "explicit"


def test_explicit_missing_file_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as error:
        load_config(missing)
    assert str(error.value) == f"{missing}: configuration file not found"


def test_env_variable_naming_a_missing_file_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_CONFIG, str(tmp_path / "gone.toml"))
    with pytest.raises(ConfigError) as error:
        load_config()
    assert str(error.value) == f"{tmp_path / 'gone.toml'}: configuration file not found"


def test_unparsable_file_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "broken.toml", "[server\nport = 1\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value).startswith(f"{path}: cannot read the configuration:")


# -- environment overrides ---------------------------------------------------------------------------


def test_env_overrides_file_values_with_type_coercion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "c.toml", '[server]\nport = 9100\nname = "file"\n')
    monkeypatch.setenv("MCPHOST_PORT", "9200")
    monkeypatch.setenv("MCPHOST_CLIENT_REQUEST_TIMEOUT", "2.5")
    monkeypatch.setenv("MCPHOST_ALLOWED_ORIGINS", "https://a.example, https://b.example")
    monkeypatch.setenv("MCPHOST_TITLE", "From the environment")
    monkeypatch.setenv("MCPHOST_LOG_LEVEL", "DEBUG")
    server = load_config(path).server
    assert server.port == 9200 and isinstance(server.port, int)
    assert server.client_request_timeout == 2.5
    assert server.allowed_origins == ("https://a.example", "https://b.example")
    assert server.title == "From the environment"
    assert server.name == "file"  # not overridden
    assert server.log_level == "DEBUG"


def test_every_server_field_has_an_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    samples = {"int": "7", "float": "1.5", "str": "x", "str | None": "x", "tuple[str, ...]": "a,b", "bool": "true",
               "float | None": "1.5"}
    expected = {"int": 7, "float": 1.5, "str": "x", "str | None": "x", "tuple[str, ...]": ("a", "b"), "bool": True,
                "float | None": 1.5}
    env = {}
    wanted = {}
    for field in ServerSettings.__dataclass_fields__.values():
        if field.name in ("path", "log_level", "port", "state_keys", "resource_url", "forwarded_allow_ips"):
            continue  # values with their own checks, covered elsewhere
        env[f"MCPHOST_{field.name.upper()}"] = samples[str(field.type)]
        wanted[field.name] = expected[str(field.type)]
    server = config_from_dict({}, env=env).server
    assert {name: getattr(server, name) for name in wanted} == wanted


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("MCPHOST_PORT", "eighty", "$MCPHOST_PORT: server.port must be int, not 'eighty'"),
    ("MCPHOST_PORT", "80.5", "$MCPHOST_PORT: server.port must be int, not '80.5'"),
    ("MCPHOST_CLIENT_REQUEST_TIMEOUT", "soon", "$MCPHOST_CLIENT_REQUEST_TIMEOUT: server.client_request_timeout "
                                               "must be float, not 'soon'"),
    ("MCPHOST_PORT", "70000", "server.port must be 0-65535, not 70000"),
    ("MCPHOST_PAGE_SIZE", "0", "server.page_size must be at least 1"),
    ("MCPHOST_MAX_HEADER_BYTES", "0", "server.max_header_bytes must be at least 1"),
    ("MCPHOST_BODY_TIMEOUT", "0", "server.body_timeout must be positive"),
    ("MCPHOST_LOG_LEVEL", "loud", "server.log_level must be debug, info, warning, error or critical"),
    ("MCPHOST_PATH", "mcp", "server.path must start with '/', not 'mcp'"),
    ("MCPHOST_FORWARDED_ALLOW_IPS", "10.0.0.1,proxy", "server.forwarded_allow_ips: 'proxy' is not an address"),
])
def test_bad_env_values_give_clear_errors(monkeypatch: pytest.MonkeyPatch, variable: str, value: str,
                                          message: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as error:
        load_config()
    assert message in str(error.value)


# -- mistakes in the file ----------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "message"), [
    ("[sever]\nport = 1\n",
     "[sever] unknown section (did you mean 'server'?); known: [server], [plugins], [endpoints]"),
    ("[server]\nprot = 1\n", "[server] unknown key 'prot' (did you mean 'port'?)"),
    ("[server]\nport = true\n", "server.port must be int, not True"),
    ("[server]\nport = 80.5\n", "server.port must be int, not 80.5"),
    ("[server]\nport = \"19207\"\n", "server.port must be int, not '19207'"),
    ("[server]\nname = 5\n", "server.name must be str, not 5"),
    ("[server]\nallowed_hosts = [1, 2]\n", "server.allowed_hosts must be a list of strings, not [1, 2]"),
    ("[server]\nsession_idle_timeout = \"long\"\n", "server.session_idle_timeout must be float, not 'long'"),
    ("[server]\nsession_idle_timeout = \"60\"\n", "server.session_idle_timeout must be float, not '60'"),
    ("[server]\njson_response = \"true\"\n", "server.json_response must be bool, not 'true'"),
    ("server = 5\n", "[server] must be a table, not int"),
    ("plugins = \"demo\"\n", "[plugins] must be a table, not str"),
    ("[plugins]\nblock = \"demo\"\n", "[plugins.block] 'demo' is not of type 'array'"),
    ("[plugins]\nallow = [1]\n", "[plugins.allow.0] 1 is not of type 'string'"),
    ("[plugins]\nstrict = \"no\"\n", "[plugins.strict] 'no' is not of type 'boolean'"),
    ("[plugins]\ndemo = 5\n", "[plugins.demo] 5 is not of type 'object'"),
])
def test_file_mistakes_name_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "bad.toml", text)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value).startswith(f"{path}: ")
    assert message in str(error.value)


def test_integral_float_is_accepted_for_an_int_setting() -> None:
    assert config_from_dict({"server": {"port": 9000.0}}).server.port == 9000


def test_plugins_strict_true_is_kept() -> None:
    assert config_from_dict({"plugins": {"strict": True}}).strict is True


# -- plugin sections ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("section", "fragments"), [
    ("root = 5", ["[plugins.demo.root] Input should be a valid string, not 5"]),
    ('rot = "/tmp"', ["[plugins.demo] unknown key 'rot' (did you mean 'root'?)"]),
])
def test_demo_plugin_section_is_validated_against_its_schema(tmp_path: Path, section: str,
                                                             fragments: list[str]) -> None:
    path = write(tmp_path / "mcphost.toml", f"[plugins.demo]\n{section}\n")
    host = Host(load_config(path))
    assert host.plugin_infos["demo"].status == "active"
    assert "demo" in host.config_schemas()
    with pytest.raises(ConfigError) as error:
        host.prepare()
    assert str(error.value).startswith(f"{path}: ")
    for fragment in fragments:
        assert fragment in str(error.value)


async def test_demo_root_setting_changes_the_served_files(tmp_path: Path) -> None:
    root = tmp_path / "served"
    write(root / "notes" / "plan.txt", "the plan")
    write(tmp_path / "outside.txt", "not for clients")
    path = write(tmp_path / "mcphost.toml", f"[plugins.demo]\nroot = {str(root)!r}\n")

    host = Host(load_config(path))
    async with MemoryClient(host) as client:
        read = await client.read_resource("demo://files/notes/plan.txt")
        missing = []
        for uri in ("demo://files/hello.txt", "demo://files/../outside.txt"):
            with pytest.raises(McpError) as error:
                await client.read_resource(uri)
            missing.append(error.value.code)
    assert read["contents"] == [{"uri": "demo://files/notes/plan.txt", "mimeType": "text/plain",
                                 "text": "the plan"}]
    assert missing == [RESOURCE_NOT_FOUND, RESOURCE_NOT_FOUND]

    # Without the setting the demo serves its own sample files, and not the configured ones.
    default_host = Host(load_config())
    async with MemoryClient(default_host) as client:
        sample = await client.read_resource("demo://files/hello.txt")
        with pytest.raises(McpError) as error:
            await client.read_resource("demo://files/notes/plan.txt")
    assert sample["contents"][0]["text"].startswith("hello from a demo file")
    assert error.value.code == RESOURCE_NOT_FOUND


def test_every_mistake_in_a_file_is_reported_at_once(tmp_path: Path) -> None:
    path = write(tmp_path / "three.toml", '[server]\nport = "19207"\nprot = 1\n[sevrer]\nname = "x"\n')
    with pytest.raises(ConfigErrors) as error:
        load_config(path)
    problems = error.value.problems
    assert len(problems) == 3, problems
    assert all(problem.startswith(f"{path}: ") for problem in problems)
    assert any("server.port must be int, not '19207'" in p for p in problems)
    assert any("[server] unknown key 'prot' (did you mean 'port'?)" in p for p in problems)
    assert any("[sevrer] unknown section (did you mean 'server'?)" in p for p in problems)


def test_a_declared_section_is_checked_by_its_schema_without_touching_the_validator(tmp_path: Path) -> None:
    schema = {"type": "object", "additionalProperties": {"type": "object", "properties": {"url": {"type": "string"}},
                                                         "required": ["url"], "additionalProperties": False}}
    declare_section("endpoints_test", schema)
    try:
        config = config_from_dict({"endpoints_test": {"a": {"url": "http://x"}}})
        assert config.sections["endpoints_test"] == {"a": {"url": "http://x"}}
        with pytest.raises(ConfigErrors) as error:
            config_from_dict({"endpoints_test": {"a": {"ulr": "http://x"}}})
        assert "[endpoints_test.a] unknown key 'ulr' (did you mean 'url'?)" in str(error.value)
        assert "[endpoints_test.a] 'url' is a required property" in str(error.value)
    finally:
        SECTIONS.pop("endpoints_test")


def test_a_plugin_section_no_installed_plugin_owns_names_the_nearest(tmp_path: Path) -> None:
    config = config_from_dict({"plugins": {"redsi": {"url": "redis://x"}}}, path=tmp_path / "m.toml")
    [problem] = check_plugin_sections(config, {}, ["redis", "demo"])
    assert problem == (f"{tmp_path / 'm.toml'}: [plugins.redsi] no plugin named 'redsi' is installed "
                       "(did you mean 'redis'?); installed: demo, redis")
