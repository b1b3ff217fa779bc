"""Typed plugin settings: the model a plugin declares for its ``[plugins.<name>]`` section, and the
checks that turn a section into its instance (every problem at once, each naming the key path, an
unknown key with a did-you-mean). Kept apart from :mod:`mcphost.config` (the file, the ``[server]``
settings, JSON Schema checks), so that ``import mcphost`` stays light for plugin authors.
"""

from __future__ import annotations

import difflib
import os
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any

import pydantic


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'redis'?)`` when ``name`` is close to one of ``known``, else an empty string."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class PluginSettings(pydantic.BaseModel):
    """Base of a plugin's settings model: its ``[plugins.<name>]`` section, declared once.

    Declare fields with their types, defaults and constraints (``Annotated[float, Field(gt=0,
    description=...)]``); return the class from ``mcphost_settings``. The host derives the JSON Schema
    from it (``mcphost config schema``, the configuration reference), checks every plugin's section at
    once before anything starts (an unknown key gets a did-you-mean), and hands the plugin the checked,
    frozen instance: ``host.settings(MySettings)``. Values keep the TOML types (``port = "80"`` is
    refused, not cast); an :data:`EnvStr` field has its ``${VAR}`` references replaced. A field can
    name what users may call it instead, for the did-you-mean of an unknown key:
    ``Field(json_schema_extra={"x-aliases": ["upstreams"]})``.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, strict=True)


#: ``${NAME}``: the value of the environment variable NAME.
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(value: str, env: Mapping[str, str] | None = None) -> str:
    """``value`` with each ``${VAR}`` replaced from the environment; ValueError naming an unset variable."""
    env = os.environ if env is None else env

    def replace(match: re.Match[str]) -> str:
        if match.group(1) not in env:
            raise ValueError(f"environment variable {match.group(1)} is not set")
        return env[match.group(1)]

    return ENV_REFERENCE.sub(replace, value)


#: A string setting whose ``${VAR}`` references are replaced from the environment when the section is
#: checked (a secret kept out of the file: ``token = "${GITHUB_TOKEN}"``); an unset variable is a
#: configuration error naming the key.
EnvStr = Annotated[str, pydantic.AfterValidator(expand_env)]

SettingsModel = type[pydantic.BaseModel]


def settings_schema(model: SettingsModel) -> dict[str, Any]:
    """The JSON Schema of a settings model (what ``mcphost config schema`` prints)."""
    schema = model.model_json_schema()
    for node in [schema, *schema.get("$defs", {}).values()]:
        for name, prop in node.get("properties", {}).items():
            # TOML has no null: an optional key is one left out, so ``X | None`` is shown as X
            members = [m for m in prop.get("anyOf", []) if m.get("type") != "null"]
            if len(members) == 1 and len(prop["anyOf"]) == 2:
                node["properties"][name] = prop = {**{k: v for k, v in prop.items() if k != "anyOf"}, **members[0]}
            if "default" in prop and prop["default"] is None:
                del prop["default"]
    schema.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
    return schema


def _unwrap(node: Any) -> Any:
    """``node`` without ``Annotated`` and ``| None``."""
    while True:
        origin = typing.get_origin(node)
        if origin is Annotated:
            node = typing.get_args(node)[0]
            continue
        members = [a for a in typing.get_args(node) if a is not type(None)]
        if origin in (typing.Union, types.UnionType) and len(members) == 1:
            node = members[0]
            continue
        return node


def _field_type(node: Any, part: str | int) -> Any:
    """The type one step down ``node`` (a model, a container, a union) along an error's location."""
    node = _unwrap(node)
    if isinstance(node, type) and issubclass(node, pydantic.BaseModel):
        for name, info in node.model_fields.items():
            if part in (name, info.alias):
                return info.annotation
        return None
    args = [a for a in typing.get_args(node) if a is not Ellipsis]
    if typing.get_origin(node) in (typing.Union, types.UnionType):
        # pydantic names the union member it tried: step into it
        return next((a for a in args if getattr(a, "__name__", None) == part), None)
    return args[-1] if args else None  # list[X], tuple[X, ...], dict[str, X]: the item type


def _known_keys(model: SettingsModel, path: Sequence[str | int]) -> dict[str, list[str]]:
    """The keys of the table at ``path``, each with the other names it is known by (``x-aliases``)."""
    node: Any = model
    for part in path:
        node = _field_type(node, part)
    node = _unwrap(node)
    if not (isinstance(node, type) and issubclass(node, pydantic.BaseModel)):
        return {}
    known = {}
    for name, info in node.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        aliases = extra.get("x-aliases", [])
        known[info.alias or name] = [str(a) for a in aliases] if isinstance(aliases, list) else []
    return known


def _suggestion(key: str, known: Mapping[str, list[str]]) -> str:
    """A did-you-mean for an unknown key: the key another name stands for (``upstreams``: ``servers``),
    else the nearest spelling."""
    for name, aliases in known.items():
        if key.lower() in (alias.lower() for alias in aliases):
            return f" (did you mean {name!r}?)"
    return did_you_mean(key, known)


def bind_settings(model: SettingsModel, section: Mapping[str, Any], name: str,
                  source: str = "configuration") -> tuple[pydantic.BaseModel | None, list[str]]:
    """The checked instance of ``model`` for ``[plugins.<name>]`` and every problem, one message each
    (the plugin, the key path; unknown keys with a did-you-mean). The instance is None with problems."""
    try:
        return model.model_validate(dict(section)), []
    except Exception as exc:
        if not isinstance(exc, pydantic.ValidationError):  # a validator of the plugin's that broke
            return None, [f"{source}: [plugins.{name}] the plugin's settings check raised {exc!r}"]
        problems = []
        errors = exc.errors(include_url=False)
        deeper = {error["loc"][:n] for error in errors for n in range(len(error["loc"]))}
        for error in errors:
            loc = list(error["loc"])
            if error["type"] in ("too_short", "too_long") and error["loc"] in deeper:
                continue  # a list's bad items said it already: its length after dropping them is noise
            if error["type"] == "extra_forbidden" and loc:
                key = str(loc.pop())
                where = ".".join(["plugins", name, *(str(p) for p in loc)])
                problems.append(f"{source}: [{where}] unknown key {key!r}{_suggestion(key, _known_keys(model, loc))}")
                continue
            where = ".".join(["plugins", name, *(str(p) for p in loc)])
            message = error["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
            value = error.get("input")
            if error["type"] not in ("value_error", "too_short", "too_long") and isinstance(value, str | int | float) \
                    and len(repr(value)) <= 80:
                message += f", not {value!r}"
            problems.append(f"{source}: [{where}] {message}")
        return None, problems
