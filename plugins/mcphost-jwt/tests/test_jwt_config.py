"""The ``[plugins.jwt]`` section: the installed entry point, the schema, and the checks made at startup."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from mcphost_jwt import JwtPlugin, NotConfigured, load_settings

from mcphost import ConfigError, Connection
from mcphost.config import Config, ServerSettings, config_from_dict
from mcphost.host import Host
from mcphost.testing import make_host

GOOD = {"issuer": "https://idp.example.test", "audience": "https://mcp.example.test/mcp"}


def test_the_installed_entry_point_is_named_jwt_and_without_a_section_it_is_dormant():
    """Installed, not configured: listed with the setting that wakes it, and none of its hooks run."""
    host = Host(config_from_dict({"plugins": {}}))
    host.prepare()
    info = host.plugin_infos["jwt"]
    assert info.status == "not configured" and info.distribution == "mcphost-jwt"
    assert info.wake == "[plugins.jwt] issuer"
    assert "mcphost_authenticate" in info.hooks and not host.has_auth
    assert host.pm.get_plugin("jwt") is None
    configured = Host(config_from_dict({"plugins": {"jwt": GOOD}}))
    configured.prepare()
    assert configured.plugin_infos["jwt"].status == "active" and configured.has_auth


def _prepared(section: dict[str, Any]) -> Host:
    host = make_host(("jwt", JwtPlugin()), config={"plugins": {"jwt": section}})
    host.prepare()
    return host


@pytest.mark.parametrize("section,message", [
    ({"audience": "https://mcp.example.test/mcp"}, "'issuer' is a required property"),
    ({**GOOD, "algorithms": ["HS256"]}, "'HS256' is not one of"),
    ({**GOOD, "algorithms": ["RS256", "none"]}, "'none' is not one of"),
    ({**GOOD, "algorithms": []}, "should be non-empty"),
    ({**GOOD, "leeway": 61}, "61 is greater than the maximum of 60"),
    ({**GOOD, "leeway": -1}, "less than the minimum"),
    ({**GOOD, "introspection_endpoint": "https://idp.example.test/introspect"}, "'client_id' is a dependency"),
    ({**GOOD, "issuer": "idp.example.test"}, "does not match"),
    ({**GOOD, "required_scopes": ["has space"]}, "does not match"),
    ({**GOOD, "required_scopes": ['quo"te']}, "does not match"),
    ({**GOOD, "timeout": 0}, "less than or equal to the minimum"),
    ({**GOOD, "jwks_url": "https://x"}, "unknown key 'jwks_url' (did you mean 'jwks_uri'?)"),
])
def test_the_section_is_checked_before_start(section, message):
    with pytest.raises(ConfigError) as caught:
        _prepared(section)
    assert "plugins.jwt" in str(caught.value) and message in str(caught.value)


async def _started(section: dict[str, Any], config: Config | None = None) -> Host:
    plugin = JwtPlugin()
    if config is None:
        host = make_host(("jwt", plugin), config={"plugins": {"jwt": section}})
    else:
        host = Host(config, plugins=[("jwt", plugin)], entry_points=False)
    await host.start()
    return host


@pytest.mark.parametrize("section,message", [
    ({"issuer": "https://idp.example.test"}, "audience is required"),
    ({**GOOD, "issuer": "http://idp.example.test"}, "must use https"),
    ({**GOOD, "jwks_uri": "http://idp.example.test/jwks"}, "must use https"),
    ({**GOOD, "introspection_endpoint": "http://idp.example.test/i", "client_id": "a", "client_secret": "b"},
     "must use https"),
    ({**GOOD, "audience": "https://mcp.example.test/mcp#frag"}, "fragment"),
    ({**GOOD, "jwks_uri": "https://user:pw@idp.example.test/jwks"}, "credentials"),
    ({**GOOD, "ca_file": "/nonexistent/ca.pem"}, "not a readable file"),
])
async def test_a_host_with_an_unusable_section_refuses_to_start(section, message):
    with pytest.raises(ConfigError, match=message):
        await _started(section)


async def test_the_audience_defaults_to_the_servers_resource_url():
    @dataclass(frozen=True)
    class WithResource(ServerSettings):  # the field another part of mcphost adds to [server]
        resource_url: str | None = None

    config = Config(server=WithResource(resource_url="https://MCP.example.test/mcp/"),
                    plugins={"jwt": {"issuer": GOOD["issuer"]}})
    host = await _started({}, config)
    plugin = host.pm.get_plugin("jwt")
    assert plugin.settings.audience == "https://mcp.example.test/mcp"
    await host.stop()


async def test_allow_insecure_permits_http_and_defaults_are_safe():
    host = await _started({**GOOD, "issuer": "http://127.0.0.1:9/", "allow_insecure": True})
    settings = host.pm.get_plugin("jwt").settings
    assert settings.allow_insecure and settings.leeway == 30
    assert "none" not in settings.algorithms and not any(a.startswith("HS") for a in settings.algorithms)
    await host.stop()
    defaults = load_settings(GOOD)
    assert defaults.allow_insecure is False and defaults.required_scopes == frozenset()
    assert defaults.algorithms == ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")


async def test_protected_resource_metadata_names_the_issuer_and_the_scopes():
    host = await _started({**GOOD, "required_scopes": ["mcp:write", "mcp:read"]})
    [document] = host.pm.hook.mcphost_protected_resource_metadata(host=host)
    assert document["authorization_servers"] == ["https://idp.example.test"]
    assert document["scopes_supported"] == ["mcp:read", "mcp:write"]
    await host.stop()
    # Asked before startup, the section is read as it is; unconfigured, the plugin contributes nothing.
    early = make_host(("jwt", JwtPlugin()), config={"plugins": {"jwt": GOOD}})
    assert early.pm.hook.mcphost_protected_resource_metadata(host=early)[0]["authorization_servers"] == [
        GOOD["issuer"]]
    bare = make_host(("jwt", JwtPlugin()))
    assert bare.pm.hook.mcphost_protected_resource_metadata(host=bare) == []


async def test_a_plugin_that_was_never_started_refuses_every_request():
    plugin = JwtPlugin()
    with pytest.raises(NotConfigured):
        await plugin.mcphost_authenticate(Connection(transport="http", headers={"authorization": "Bearer x"}))


async def test_installed_without_a_section_the_host_starts_with_no_auth_and_logs_nothing(caplog):
    """Dormant: no 503s, no error in the log; the host simply has no auth plugin (loopback only)."""
    host = await _started({})
    assert caplog.text == ""
    assert not host.has_auth
    assert await host.authenticate(Connection(transport="http", headers={"authorization": "Bearer x"})) is None
    await host.stop()


