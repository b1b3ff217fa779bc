"""Code mode's settings: [endpoints.NAME.code] over [plugins.codemode], checked; dormant without a code endpoint."""

from __future__ import annotations

import pytest
from mcphost_codemode import CodeModePlugin, Limits

from mcphost.config import config_from_dict
from mcphost.errors import ConfigError
from mcphost.testing import make_host


async def test_endpoint_limits_override_the_plugin_defaults():
    plugin = CodeModePlugin()
    host = make_host(("codemode", plugin), config={
        "plugins": {"codemode": {"time_limit": 5, "max_calls": 9}},
        "endpoints": {"small": {"discovery": "code", "code": {"max_calls": 2, "memory_limit_mb": 16}},
                      "plain": {"discovery": "code"}}})
    await host.start()
    try:
        assert "execute" in host.catalog.tools
    finally:
        await host.stop()
    assert plugin.limits_for("small") == Limits(time_limit=5, memory_limit_mb=16, max_calls=2,
                                                max_output_bytes=64 * 1024)
    assert plugin.limits_for("plain") == Limits(time_limit=5, memory_limit_mb=100, max_calls=9,
                                                max_output_bytes=64 * 1024)
    assert plugin.limits_for(None) == plugin.limits_for("plain")


@pytest.mark.parametrize(("table", "named"), [
    ({"code": {"time_limt": 3}}, "[endpoints.e.code] unknown key 'time_limt' (did you mean 'time_limit'?)"),
    ({"code": {"time_limit": 0}}, "[endpoints.e.code.time_limit]"),
    ({"code": {"max_calls": -1}}, "[endpoints.e.code.max_calls]"),
])
def test_mistakes_in_an_endpoint_code_table_are_named(table, named):
    with pytest.raises(ConfigError) as caught:
        config_from_dict({"endpoints": {"e": {"discovery": "code", **table}}})
    assert named in str(caught.value)


async def test_a_mistake_in_the_plugin_section_is_named():
    host = make_host(("codemode", CodeModePlugin()), config={"plugins": {"codemode": {"workers": 0}},
                                                             "endpoints": {"e": {"discovery": "code"}}})
    with pytest.raises(ConfigError) as caught:
        await host.start()
    assert "workers" in str(caught.value)


async def test_dormant_without_a_code_endpoint():
    host = make_host(("codemode", CodeModePlugin()), config={"endpoints": {"l": {"discovery": "list"}}})
    await host.start()
    try:
        info = host.plugin_infos["codemode"]
        assert (info.status, info.wake) == ("not configured", 'discovery = "code"')
        assert "execute" not in host.catalog.tools
    finally:
        await host.stop()
