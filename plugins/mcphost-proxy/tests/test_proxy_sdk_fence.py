"""The SDK fence: the proxy's uses of private parts of ``mcp`` are all in mcphost_proxy/sdk.py, all present."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import mcphost_proxy
from mcphost_proxy import sdk
from packaging.specifiers import SpecifierSet
from packaging.version import Version

PACKAGE = Path(mcphost_proxy.__file__).resolve().parent


def test_every_private_part_the_proxy_uses_is_present():
    gone = sdk.missing()
    assert gone == [], (f"mcp {importlib.metadata.version('mcp')} lacks private parts mcphost_proxy/sdk.py uses "
                        f"(checked against {sdk.CHECKED}): {gone}; adapt sdk.py before widening the pin")


def test_a_part_that_disappears_is_named(monkeypatch):
    from mcp.client.streamable_http import StreamableHTTPTransport

    monkeypatch.delattr(StreamableHTTPTransport, "_handle_sse_event")
    assert sdk.missing() == ["mcp.client.streamable_http.StreamableHTTPTransport._handle_sse_event"]


def test_the_pin_allows_only_the_minor_version_checked():
    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]
    pin = next(SpecifierSet(dep[3:].split(";")[0]) for dep in project["dependencies"] if dep.startswith("mcp>"))
    checked = Version(sdk.CHECKED)
    assert checked in pin
    assert Version(f"{checked.major}.{checked.minor + 1}") not in pin and Version(f"{checked.major + 1}") not in pin
    installed = Version(importlib.metadata.version("mcp"))
    assert (installed.major, installed.minor) == (checked.major, checked.minor)


def test_no_other_module_of_the_proxy_touches_a_private_part():
    names = {path.rsplit(".", 1)[-1] for _, path in sdk.PRIVATE_PARTS} | {"_context_streams"}
    alternatives = "|".join(names)
    pattern = re.compile(rf"(?<!sdk)\.({alternatives})\b|[\"']({alternatives})[\"']")
    offenders = []
    for module in sorted(PACKAGE.glob("*.py")):
        if module.name == "sdk.py":
            continue
        for number, line in enumerate(module.read_text().splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{module.name}:{number}: {line.strip()}")
    assert offenders == []
