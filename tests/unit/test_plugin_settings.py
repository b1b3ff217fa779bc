"""Typed plugin settings: a plugin declares its section once as a model (``mcphost_settings``); the
host derives the schema, checks every section at once, fills defaults, replaces ``${VAR}`` and hands
the plugin its instance (``host.settings(Model)``)."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Annotated

import pytest
from click.testing import CliRunner
from pydantic import BaseModel, Field, field_validator

import mcphost
from mcphost.cli import cli
from mcphost.config import ConfigErrors
from mcphost.errors import PluginError
from mcphost.settings import bind_settings, expand_env
from mcphost.testing import MemoryClient, make_host


class Upstream(BaseModel):
    model_config = {"extra": "forbid", "frozen": True}

    url: str
    timeout: float = 10.0


class GreeterSettings(mcphost.PluginSettings):
    """The greeter's section."""

    greeting: Annotated[str, Field(description="What to say first")] = "hello"
    repeat: Annotated[int, Field(ge=1, le=5)] = 1
    token: mcphost.EnvStr | None = None
    upstreams: dict[str, Upstream] = Field(default_factory=dict)


def greeter(model: type[BaseModel] = GreeterSettings) -> types.ModuleType:
    module = types.ModuleType("greeter")

    @mcphost.hookimpl
    def mcphost_settings() -> type[BaseModel]:
        return model

    @mcphost.hookimpl
    def mcphost_tools(host: mcphost.Host) -> list[mcphost.Tool]:
        settings = host.settings(GreeterSettings)

        @mcphost.tool
        def greet(name: str) -> str:
            return " ".join([settings.greeting] * settings.repeat) + f" {name} {settings.token or ''}".rstrip()

        return [greet]

    module.mcphost_settings = mcphost_settings  # type: ignore[attr-defined]
    module.mcphost_tools = mcphost_tools  # type: ignore[attr-defined]
    return module


async def test_the_plugin_gets_its_checked_instance_with_defaults_filled() -> None:
    host = make_host(("greeter", greeter()), config={"plugins": {"greeter": {"repeat": 2}}})
    async with MemoryClient(host) as client:
        result = await client.call_tool("greet", {"name": "ada"})
    assert result["content"] == [{"type": "text", "text": "hello hello ada"}]
    settings = host.settings(GreeterSettings)
    assert (settings.greeting, settings.repeat, settings.token, settings.upstreams) == ("hello", 2, None, {})
    with pytest.raises(ValueError, match="frozen"):
        settings.repeat = 3  # type: ignore[misc]


def test_an_absent_section_is_all_defaults_and_asked_before_prepare_is_checked_then() -> None:
    host = make_host(("greeter", greeter()))
    assert host.settings(GreeterSettings) == GreeterSettings()
    broken = make_host(("greeter", greeter()), config={"plugins": {"greeter": {"repeat": 9}}})
    with pytest.raises(ConfigErrors, match=r"\[plugins\.greeter\.repeat\] Input should be less than or equal to 5"):
        broken.settings(GreeterSettings)


def test_every_mistake_is_reported_at_once_with_the_plugin_and_key_path() -> None:
    section = {"greting": "hi", "repeat": "2", "upstreams": {"a": {"url": "http://x", "timout": 3}},
               "token": 5}
    host = make_host(("greeter", greeter()), config={"plugins": {"greeter": section}})
    with pytest.raises(ConfigErrors) as caught:
        host.prepare()
    problems = caught.value.problems
    assert len(problems) == 4, problems
    assert "configuration: [plugins.greeter] unknown key 'greting' (did you mean 'greeting'?)" in problems
    assert "configuration: [plugins.greeter.upstreams.a] unknown key 'timout' (did you mean 'timeout'?)" in problems
    # TOML types are kept: a string is not cast to a number
    assert "configuration: [plugins.greeter.repeat] Input should be a valid integer, not '2'" in problems
    assert any(p.startswith("configuration: [plugins.greeter.token] ") for p in problems)


def test_every_plugins_sections_are_checked_together() -> None:
    other = types.ModuleType("other")

    class OtherSettings(mcphost.PluginSettings):
        port: int = 80

    other.mcphost_settings = mcphost.hookimpl(lambda: OtherSettings)  # type: ignore[attr-defined]
    host = make_host(("greeter", greeter()), ("other", other),
                     config={"plugins": {"greeter": {"repaet": 2}, "other": {"prot": 1}}})
    with pytest.raises(ConfigErrors) as caught:
        host.prepare()
    assert caught.value.problems == [
        "configuration: [plugins.greeter] unknown key 'repaet' (did you mean 'repeat'?)",
        "configuration: [plugins.other] unknown key 'prot' (did you mean 'port'?)",
    ]


def test_env_references_are_replaced_and_an_unset_one_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREETER_TOKEN", "s3cret")
    monkeypatch.delenv("GREETER_MISSING", raising=False)
    host = make_host(("greeter", greeter()), config={"plugins": {"greeter": {"token": "Bearer ${GREETER_TOKEN}"}}})
    host.prepare()
    assert host.settings(GreeterSettings).token == "Bearer s3cret"
    assert host.config.plugin("greeter")["token"] == "Bearer ${GREETER_TOKEN}"  # the file's text is kept
    broken = make_host(("greeter", greeter()), config={"plugins": {"greeter": {"token": "${GREETER_MISSING}"}}})
    with pytest.raises(ConfigErrors) as caught:
        broken.prepare()
    assert caught.value.problems == [
        "configuration: [plugins.greeter.token] environment variable GREETER_MISSING is not set"]
    assert expand_env("a ${X} b $X ${Y}", {"X": "1", "Y": "2"}) == "a 1 b $X 2"


def test_the_schema_is_derived_from_the_model() -> None:
    host = make_host(("greeter", greeter()))
    schema = host.config_schemas()["greeter"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["greeting"] == {"default": "hello", "description": "What to say first",
                                                "title": "Greeting", "type": "string"}
    assert schema["properties"]["repeat"]["maximum"] == 5


def test_a_model_no_plugin_declares_and_a_hook_returning_no_model_are_errors() -> None:
    host = make_host(("greeter", greeter()))

    class Stray(mcphost.PluginSettings):
        pass

    with pytest.raises(PluginError, match="no plugin declares the settings model Stray"):
        host.settings(Stray)
    wrong = make_host(("greeter", greeter(model=dict)))  # type: ignore[arg-type]
    with pytest.raises(ConfigErrors, match="plugin 'greeter': mcphost_settings returned <class 'dict'>"):
        wrong.prepare()


def test_a_plain_pydantic_model_allowing_extra_keys_binds_without_did_you_mean() -> None:
    class Loose(BaseModel):
        a: int = 1

    instance, problems = bind_settings(Loose, {"a": 2, "b": 3}, "loose")
    assert problems == [] and instance == Loose(a=2)



#: One mistyped key in the section of every first-party plugin, and the key it stands for.
TYPOS = {"conformance": ("watched_interval", "watched_interval_seconds"), "console": ("pth", "path"),
         "demo": ("rot", "root"), "jwt": ("isuer", "issuer"), "otel": ("prometheus_pth", "prometheus_path"),
         "proxy": ("upstreams", "servers"), "redis": ("urll", "url")}


def test_config_check_names_every_plugins_mistyped_key_at_once_with_a_did_you_mean(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "mcphost.toml"
    path.write_text("".join(f'[plugins.{plugin}]\n{typo} = "x"\n\n' for plugin, (typo, _) in TYPOS.items()),
                    encoding="utf-8")
    monkeypatch.setenv("MCPHOST_CONFIG", str(path))
    result = CliRunner().invoke(cli, ["config", "check"])
    assert result.exit_code == 1
    lines = [line.strip() for line in result.output.splitlines()]
    assert lines[0] == f"Error: {len(TYPOS)} problems in the configuration:"
    assert sorted(lines[1:]) == sorted(f"{path}: [plugins.{plugin}] unknown key {typo!r} (did you mean {key!r}?)"
                                       for plugin, (typo, key) in TYPOS.items())
    schemas = json.loads(CliRunner().invoke(cli, ["config", "schema"]).output)
    for plugin, (_, key) in TYPOS.items():  # each schema derived from the plugin's model
        assert key in schemas[plugin]["properties"] and schemas[plugin]["additionalProperties"] is False


def test_a_validator_that_breaks_is_a_problem_naming_the_plugin_not_a_crash() -> None:
    class Broken(mcphost.PluginSettings):
        limit: int = 1

        @field_validator("limit")
        @classmethod
        def _check(cls, value: int) -> int:
            raise KeyError("oops")

    instance, problems = bind_settings(Broken, {"limit": 2}, "broken")
    assert instance is None
    assert problems == ["configuration: [plugins.broken] the plugin's settings check raised KeyError('oops')"]
