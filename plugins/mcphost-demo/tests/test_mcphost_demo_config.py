"""The demo plugin as installed: its ``mcphost`` entry point and its ``[plugins.demo]`` config section."""

from __future__ import annotations

from typing import Any

import pytest

from mcphost.config import config_from_dict
from mcphost.errors import ConfigError
from mcphost.host import Host


def _installed_host(plugins: dict[str, Any]) -> Host:
    host = Host(config_from_dict({"plugins": plugins}))
    host.prepare()
    return host


def test_the_installed_entry_point_is_named_demo():
    host = _installed_host({})
    info = host.plugin_infos["demo"]
    assert info.status == "active" and info.distribution == "mcphost-demo"
    assert "echo" in host.catalog.tools and "demo://files/{+path}" in host.catalog.templates


@pytest.mark.parametrize("section,message", [
    ({"root": 5}, "[plugins.demo.root] Input should be a valid string, not 5"),
    ({"rooot": "/tmp"}, "[plugins.demo] unknown key 'rooot' (did you mean 'root'?)"),
])
def test_the_demo_config_section_is_validated(section, message):
    with pytest.raises(ConfigError) as caught:
        _installed_host({"demo": section})
    assert message in str(caught.value)
