"""``mcphost new plugin NAME``: write a ready plugin package to start from.

The package is what a plugin author needs on day one and nothing more: a ``pyproject.toml`` with
the ``mcphost`` entry point, a module with one tool, one resource and one prompt, a README, and
tests that use the bundled pytest fixtures (``mcphost.testing``) and pass as generated::

    mcphost new plugin weather
    pip install -e 'mcphost-weather[test]'
    pytest mcphost-weather
    mcphost serve --reload          # edit mcphost_weather/__init__.py and see it served
"""

from __future__ import annotations

import importlib.metadata as md
import json
import re
from pathlib import Path
from typing import Any

NAME = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")
#: Plugin names mcphost and its shipped plugins use (entry points and the built-in backend).
SHIPPED = frozenset({"conformance", "demo", "jwt", "otel", "proxy", "redis", "memory", "builtin"})


class ScaffoldError(Exception):
    """The package cannot be written (a bad name, or the folder exists)."""


def new_plugin(name: str, parent: Path) -> Path:
    """Write the package ``mcphost-NAME`` under ``parent``; return its folder."""
    if name.startswith("mcphost-") or name.startswith("mcphost_"):
        name = name[len("mcphost-"):]
    if not NAME.match(name) or len(name) > 60:
        raise ScaffoldError(f"plugin name {name!r}: use lowercase letters, digits and single - or _ between "
                            "them, starting with a letter (e.g. weather or github-issues)")
    entry = name.replace("-", "_")
    taken = _taken_names()
    if entry in SHIPPED or entry in taken:
        owner = taken.get(entry) or "mcphost"
        raise ScaffoldError(f"plugin name {entry!r} is already used by {owner}: its [plugins.{entry}] section and "
                            "--disable-plugin would mean both; choose another name")
    module = f"mcphost_{entry}"
    root = parent / f"mcphost-{name}"
    if root.exists():
        raise ScaffoldError(f"{root} already exists; choose another name or remove it")
    scheme = name.replace("_", "-")  # a URI scheme has no underscore
    dependencies = f'dependencies = ["{mcphost_requirement()}"]'
    fields = {"name": name, "entry": entry, "module": module, "scheme": scheme, "dependencies": dependencies}
    files = {
        "pyproject.toml": _PYPROJECT.format(**fields),
        "README.md": _README.format(**fields),
        f"{module}/__init__.py": _MODULE.format(**fields),
        f"{module}/py.typed": "",
        "tests/test_plugin.py": _TESTS.format(**fields),
    }
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _taken_names() -> dict[str, str]:
    """Entry-point names of the plugins installed here, with the distribution of each."""
    return {ep.name: ep.dist.name if ep.dist is not None else "an installed package"
            for ep in md.entry_points(group="mcphost")}


def _direct_url() -> dict[str, Any] | None:
    """pip's record of where mcphost was installed from (the first installed copy that has one: a
    build's ``mcphost.egg-info`` in a checkout on ``sys.path`` has none)."""
    for dist in md.distributions(name="mcphost"):
        text = dist.read_text("direct_url.json")
        if text:
            try:
                record = json.loads(text)
            except ValueError:
                continue
            if isinstance(record, dict):
                return record
    return None


def mcphost_is_editable() -> bool:
    """Whether this mcphost is an editable install (a development checkout, ``make setup``)."""
    record = _direct_url()
    dir_info = record.get("dir_info") if record else None
    return isinstance(dir_info, dict) and bool(dir_info.get("editable"))


def mcphost_requirement() -> str:
    """A plain ``mcphost`` requirement with the version range of this mcphost's API (``>=0.1,<0.2``).

    Never a ``file://`` or URL pin: beside an editable mcphost (a checkout, ``make serve``) such a pin
    asks pip to install the checkout a second time, and a scaffold under ``plugins/`` failed with
    ResolutionImpossible. The range is satisfied by the mcphost already installed, which pip keeps;
    it never fetches one (the package index's ``mcphost`` is an unrelated project).
    """
    from mcphost import __version__
    major, minor = (int(part) for part in re.findall(r"\d+", __version__)[:2])
    upper = f"{major}.{minor + 1}" if major == 0 else f"{major + 1}"
    return f"mcphost>={major}.{minor},<{upper}"


_PYPROJECT = '''\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "mcphost-{name}"
version = "0.1.0"
description = "An mcphost plugin: {name}"
readme = "README.md"
requires-python = ">=3.11"
# The mcphost API this plugin was written against. Install mcphost first, from its checkout (the
# package index's "mcphost" is an unrelated project); pip then keeps that one, editable or not.
{dependencies}

[project.optional-dependencies]
test = ["pytest>=8", "pytest-asyncio>=0.23"]

# mcphost finds plugins through this entry point group; "{entry}" is the plugin's name in
# `mcphost plugins`, in --disable-plugin / MCPHOST_PLUGINS and in [plugins.{entry}] config sections.
[project.entry-points.mcphost]
{entry} = "{module}"

[tool.setuptools.packages.find]
include = ["{module}*"]

[tool.setuptools.package-data]
{module} = ["py.typed"]

[tool.pytest.ini_options]
testpaths = ["tests"]
asyncio_mode = "auto"
'''

_README = '''\
# mcphost-{name}

An mcphost plugin with one tool (`{entry}_hello`), one resource (`{scheme}://about`) and one
prompt (`{entry}_review`), in `{module}/__init__.py`. Their names start with the plugin's, so they
never collide with another plugin's.

Install mcphost first, from its checkout (`make serve` there, or `pip install -e /path/to/mcphost`):
this package asks only for a version range of it, which the installed mcphost satisfies, so pip
keeps it as it is (an editable checkout stays editable).

```sh
pip install -e '.[test]'     # installs the plugin: its entry point is "{entry}"
pytest                       # mcphost's pytest fixtures, and a check next to every installed plugin
mcphost plugins              # lists {entry} with what it provides
mcphost call {entry}_hello --arg name=Ada
mcphost serve --reload       # serve it; edits to the source restart the server on the same port
```

Parameters are described by their annotations, the way FastMCP and the official MCP SDK read them:
`Annotated[str, Field(min_length=1, description=...)]`, pydantic models, dataclasses, enums,
`Literal`, dates and so on. See mcphost's docs/plugins.md for the whole authoring API.
'''

_MODULE = '''\
"""mcphost-{name}: one tool, one resource and one prompt, handed to mcphost by the hooks below.

Names start with the plugin's ({entry}_...), so they never collide with another plugin's.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

import mcphost


@mcphost.tool(name="{entry}_hello", annotations={{"readOnlyHint": True}})
def hello(
    name: Annotated[str, Field(min_length=1, max_length=100, description="Who to greet")],
    excited: bool = False,
) -> str:
    """Greet someone by name."""
    return f"Hello, {{name}}{{'!' if excited else '.'}}"


@mcphost.resource("{scheme}://about", mime_type="text/plain")
def about() -> str:
    """What this plugin is."""
    return "mcphost-{name}: a plugin generated by `mcphost new plugin`."


@mcphost.prompt(name="{entry}_review")
def review(code: str, focus: str = "clarity") -> str:
    """Ask for a review of some code."""
    return f"Please review this code for {{focus}}:\\n\\n{{code}}"


@mcphost.hookimpl
def mcphost_tools(host: Any) -> list[mcphost.Tool]:
    return [hello]


@mcphost.hookimpl
def mcphost_resources(host: Any) -> list[mcphost.Resource]:
    return [about]


@mcphost.hookimpl
def mcphost_prompts(host: Any) -> list[mcphost.Prompt]:
    return [review]
'''

_TESTS = '''\
"""Tests for mcphost-{name}, with mcphost's pytest fixtures (mcphost.testing is a pytest plugin)."""

from importlib.metadata import entry_points

from mcphost.host import Host

import {module}


async def test_hello(mcphost_host, mcphost_client):
    async with mcphost_client(mcphost_host({module})) as client:
        [tool] = [t for t in await client.list_tools() if t["name"] == "{entry}_hello"]
        assert tool["inputSchema"]["properties"]["name"]["minLength"] == 1
        result = await client.call_tool("{entry}_hello", {{"name": "Ada", "excited": True}})
        assert result["content"] == [{{"type": "text", "text": "Hello, Ada!"}}]
        refused = await client.call_tool("{entry}_hello", {{"name": ""}})
        assert refused["isError"] is True
        assert "argument 'name'" in refused["content"][0]["text"]


async def test_about(mcphost_host, mcphost_client):
    async with mcphost_client(mcphost_host({module})) as client:
        result = await client.read_resource("{scheme}://about")
        assert result["contents"][0]["text"].startswith("mcphost-{name}")


async def test_review(mcphost_host, mcphost_client):
    async with mcphost_client(mcphost_host({module})) as client:
        result = await client.get_prompt("{entry}_review", {{"code": "x = 1"}})
        assert "x = 1" in result["messages"][0]["content"]["text"]


def test_installed_as_an_mcphost_plugin():
    assert "{entry}" in {{ep.name for ep in entry_points(group="mcphost")}}


def test_active_next_to_every_installed_plugin():
    """As `mcphost serve` loads it: with every installed plugin, none of its names taken by another."""
    host = Host()
    host.prepare()
    info = host.plugin_infos["{entry}"]
    assert info.status == "active", info.error
    assert host.catalog.tools["{entry}_hello"].record.provenance.plugin == "{entry}"
'''
