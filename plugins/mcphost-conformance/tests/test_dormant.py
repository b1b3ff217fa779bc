"""The conformance fixtures are served only where asked for: a first `mcphost serve` shows none."""

from __future__ import annotations

from mcphost_conformance import ConformancePlugin

from mcphost.config import config_from_dict
from mcphost.host import Host
from mcphost.plugins import PluginSelection


def _host(config: dict | None = None, allow: frozenset[str] | None = None) -> Host:
    host = Host(config_from_dict(config or {}), plugins=[("conformance", ConformancePlugin())],
                selection=PluginSelection(allow=allow), entry_points=False)
    host.prepare()
    return host


def test_dormant_without_configuration():
    host = _host()
    assert not any(name.startswith("test_") for name in host.catalog.tools)
    info = host.plugin_infos["conformance"]
    assert (info.status, info.wake) == ("not configured", "[plugins.conformance] enabled = true")


def test_enabled_or_any_setting_wakes_it():
    for section in ({"enabled": True}, {"watched_interval_seconds": 1}):
        host = _host({"plugins": {"conformance": section}})
        assert "test_simple_text" in host.catalog.tools


def test_named_in_the_allow_list_wakes_it_and_enabled_false_keeps_it_dormant():
    assert "test_simple_text" in _host(allow=frozenset({"conformance"})).catalog.tools
    host = _host({"plugins": {"conformance": {"enabled": False}}}, allow=frozenset({"conformance"}))
    assert "test_simple_text" not in host.catalog.tools
