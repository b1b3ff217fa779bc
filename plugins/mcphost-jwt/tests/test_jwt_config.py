"""The ``[plugins.jwt]`` section: the installed entry point, the schema, and the checks made at startup."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from mcphost_jwt import JwtPlugin, JwtSettings, NotConfigured, load_settings

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
    ({"audience": "https://mcp.example.test/mcp"}, "[plugins.jwt] issuer is required"),
    ({**GOOD, "algorithms": ["HS256"]}, "[plugins.jwt.algorithms.0] Input should be 'RS256'"),
    ({**GOOD, "algorithms": ["RS256", "none"]}, "[plugins.jwt.algorithms.1] Input should be 'RS256'"),
    ({**GOOD, "algorithms": []}, "[plugins.jwt.algorithms] Tuple should have at least 1 item"),
    ({**GOOD, "leeway": 61}, "[plugins.jwt.leeway] Input should be less than or equal to 60, not 61"),
    ({**GOOD, "leeway": -1}, "[plugins.jwt.leeway] Input should be greater than or equal to 0"),
    ({**GOOD, "introspection_endpoint": "https://idp.example.test/introspect"},
     "[plugins.jwt] introspection_endpoint needs client_id and client_secret"),
    ({**GOOD, "issuer": "idp.example.test"}, "[plugins.jwt.issuer] String should match pattern"),
    ({**GOOD, "required_scopes": ["has space"]}, "[plugins.jwt.required_scopes.0] String should match pattern"),
    ({**GOOD, "required_scopes": ['quo"te']}, "String should match pattern"),
    ({**GOOD, "timeout": 0}, "[plugins.jwt.timeout] Input should be greater than 0"),
    ({**GOOD, "jwks_url": "https://x"}, "[plugins.jwt] unknown key 'jwks_url' (did you mean 'jwks_uri'?)"),
])
def test_the_section_is_checked_before_start(section, message):
    with pytest.raises(ConfigError) as caught:
        _prepared(section)
    assert message in str(caught.value)


def test_every_mistake_in_the_section_is_reported_at_once_and_the_secret_can_come_from_the_environment(
        monkeypatch):
    with pytest.raises(ConfigError) as caught:
        _prepared({**GOOD, "leeway": 61, "timeout": 0, "algorithms": ["HS256"], "issuerr": "x"})
    assert len(caught.value.problems) == 4, caught.value.problems
    monkeypatch.setenv("JWT_TEST_SECRET", "s3cret")
    host = _prepared({**GOOD, "introspection_endpoint": "https://idp.example.test/i", "client_id": "a",
                      "client_secret": "${JWT_TEST_SECRET}"})
    assert host.settings(JwtSettings).client_secret == "s3cret"


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


