"""Configuration: mcpServers files, bad input, header values from the environment, no token
passthrough, per-session upstreams, and list_changed from an upstream reaching clients."""

from __future__ import annotations

import asyncio
import json
import re
import sys

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcphost_proxy import ProxyPlugin
from mcphost_proxy.settings import load_settings
from proxy_support import SDK_SERVER, Side, front, sdk_upstream

import mcphost
from mcphost import ConfigError
from mcphost.testing import make_host, serve_http


def _text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def test_mcp_servers_file_is_mounted(side, tmp_path):
    servers = tmp_path / "claude_desktop_config.json"
    servers.write_text(json.dumps({"mcpServers": {
        "py": {"command": sys.executable, "args": [str(SDK_SERVER)]},
        "off": {"command": "/nonexistent", "disabled": True},
    }}))
    async with front({}, proxy={"mcp_servers_file": str(servers)}) as live, side.client(live.url) as client:
        assert _text(await client.call_tool("py_add", {"a": 1, "b": 2})) == "3"
        assert set(live.plugin.upstreams) == {"py"}


@pytest.mark.parametrize(("section", "message"), [
    ({"servers": {"x": {}}}, "give either command (stdio) or url"),
    ({"servers": {"x": {"command": "a", "url": "http://b"}}}, "give either command (stdio) or url"),
    ({"servers": {"x": {"url": "ftp://b"}}}, "[plugins.proxy.servers.x.url] String should match pattern '^https?://'"),
    ({"servers": {"x": {"command": "a", "headers": {"A": "b"}}}}, "headers apply to url servers only"),
    ({"servers": {"x y": {"command": "a"}}}, "[plugins.proxy.servers.x y.[key]] String should match pattern"),
    ({"servers": {"x": {"command": "a", "era": "modern"}}}, "[plugins.proxy.servers.x.era] Input should be 'session'"),
    ({"mcp_servers_file": "/nonexistent/servers.json"}, "cannot read it"),
    ({"servers": {"x": {"command": "a", "auth": {"mode": "oauth"}}}}, "auth mode 'oauth' is for url servers only"),
    ({"servers": {"x": {"url": "https://b/mcp", "per_session": True, "auth": {"mode": "oauth"}}}},
     "already keeps one connection per principal"),
    ({"servers": {"x": {"url": "https://b/mcp", "auth": {"mode": "token-exchange"}}}},
     "auth mode 'token-exchange' needs client_id"),
    ({"servers": {"x": {"url": "http://mcp.example.com/mcp", "auth": {"mode": "oauth"}}}},
     "allow_insecure_http = true permits http"),
    ({"servers": {"x": {"url": "https://b/mcp", "auth": {"mode": "oauth", "scope": ["a"]}}}},
     "[plugins.proxy.servers.x.auth] unknown key 'scope'"),
])
def test_bad_configuration_names_the_problem(section, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_settings(section)


def test_bad_mcp_servers_file(tmp_path):
    bad = tmp_path / "servers.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_settings({"mcp_servers_file": str(bad)})
    bad.write_text(json.dumps({"mcpServers": {"s": {"type": "sse", "url": "http://x"}}}))
    with pytest.raises(ConfigError, match="not supported"):
        load_settings({"mcp_servers_file": str(bad)})


def test_schema_refuses_unknown_keys_before_start():
    host = make_host(("proxy", ProxyPlugin()), config={"plugins": {"proxy": {"servers": {"x": {"commandd": "a"}}}}})
    with pytest.raises(ConfigError, match=re.escape("[plugins.proxy.servers.x] unknown key 'commandd' (did you "
                                                    "mean 'command'?)")):
        host.prepare()


def test_every_mistake_in_the_section_is_reported_at_once_with_a_did_you_mean():
    """Issue 36: ``upstreams`` for ``servers`` got no did-you-mean; every problem comes at once."""
    section = {"upstreams": {}, "restart_backof": 1, "servers": {"a": {"url": "http://x", "timeot": 5},
                                                                 "b": {"command": "c", "max_queued": -1}}}
    host = make_host(("proxy", ProxyPlugin()), config={"plugins": {"proxy": section}})
    with pytest.raises(ConfigError) as caught:
        host.prepare()
    assert sorted(caught.value.problems) == sorted([
        "configuration: [plugins.proxy] unknown key 'upstreams' (did you mean 'servers'?)",
        "configuration: [plugins.proxy] unknown key 'restart_backof' (did you mean 'restart_backoff'?)",
        "configuration: [plugins.proxy.servers.a] unknown key 'timeot' (did you mean 'timeout'?)",
        "configuration: [plugins.proxy.servers.b.max_queued] Input should be greater than or equal to 0, not -1",
    ])


def test_defaults_are_the_models_and_a_file_entry_is_checked_like_a_table(tmp_path):
    settings = load_settings({"servers": {"s": {"command": "x"}}})
    [server] = settings.servers
    assert (server.prefix, server.timeout, server.max_queued, server.idle_timeout) == ("s_", 60.0, 64, 300.0)
    section = settings.config
    assert (section.restart_backoff, section.startup_wait, section.max_starting) == (0.5, 0.0, None)
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"f": {"command": "x", "args": "not a list"}}}))
    with pytest.raises(ConfigError, match=re.escape("[plugins.proxy.servers.f.args] Input should be a valid tuple")):
        load_settings({"mcp_servers_file": str(servers)})


class Recorder:
    """An upstream's auth hook: remembers every Authorization header it is shown."""

    def __init__(self) -> None:
        self.seen: list[str | None] = []

    @mcphost.hookimpl
    def mcphost_authenticate(self, request):
        value = request.headers.get("authorization")
        self.seen.append(value)
        if value == "Bearer upstream-credential":
            return mcphost.Principal(subject="proxy")
        raise mcphost.Unauthorized("who are you?")


class FrontAuth:
    """The front's auth hook; it even hands the raw token to tools, which the proxy must not forward."""

    @mcphost.hookimpl
    def mcphost_authenticate(self, request):
        if request.headers.get("authorization") == "Bearer downstream-secret":
            return mcphost.Principal(subject="alice", token="downstream-secret")
        raise mcphost.Unauthorized("log in")


@mcphost.tool
def whoami(*, ctx: mcphost.Context) -> str:
    """Who the upstream thinks is calling."""
    return ctx.principal.subject if ctx.principal else "anonymous"


class UpstreamTools:
    @mcphost.hookimpl
    def mcphost_tools(self, host):
        return [whoami]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_no_token_passthrough_and_header_values_from_the_environment(monkeypatch, mode):
    monkeypatch.setenv("UPSTREAM_TOKEN", "upstream-credential")
    recorder = Recorder()
    upstream = make_host(("recorder", recorder), ("tools", UpstreamTools()))
    async with serve_http(upstream) as remote:
        servers = {"remote": {"url": remote.url, "headers": {"Authorization": "Bearer ${UPSTREAM_TOKEN}"}}}
        async with front(servers, ("auth", FrontAuth())) as live:
            http = httpx2.AsyncClient(headers={"Authorization": "Bearer downstream-secret"},
                                      timeout=httpx2.Timeout(30, read=60))
            async with http, Client(streamable_http_client(live.url, http_client=http), mode=mode) as client:
                assert _text(await client.call_tool("remote_whoami", {})) == "proxy"
    assert recorder.seen and set(recorder.seen) == {"Bearer upstream-credential"}
    assert not any("downstream-secret" in (value or "") for value in recorder.seen)


async def test_missing_header_variable_is_a_clear_upstream_error(monkeypatch, side):
    monkeypatch.delenv("PROXY_TEST_UNSET", raising=False)
    servers = {"remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "${PROXY_TEST_UNSET}"}},
               "py": sdk_upstream()}
    async with front(servers) as live, side.client(live.url) as client:
        assert _text(await client.call_tool("py_add", {"a": 1, "b": 1})) == "2"
        remote = live.plugin.upstreams["remote"]
        assert remote.state == "failed"  # not retried: only a restart of the host changes the environment
        assert "PROXY_TEST_UNSET is not set" in (remote.error or "")


async def test_per_session_upstreams(side):
    async with front({"py": sdk_upstream(per_session=True)}) as live:
        async with side.client(live.url) as first, Side().client(live.url) as second:
            one = _text(await first.call_tool("py_pid", {}))
            assert _text(await first.call_tool("py_pid", {})) == one  # the same connection for a session
            two = _text(await second.call_tool("py_pid", {}))
            assert one != two
            assert len(live.plugin.bound) == 2
        for _ in range(100):  # the sessions ended (DELETE): their upstreams stop
            if not live.plugin.bound:
                break
            await asyncio.sleep(0.05)
        assert not live.plugin.bound


class Growing:
    """An upstream whose tool list grows when its ``grow`` tool is called."""

    def __init__(self) -> None:
        self.extra: list[mcphost.Tool] = []

    @mcphost.hookimpl
    def mcphost_tools(self, host):
        plugin = self

        @mcphost.tool
        async def grow(*, ctx: mcphost.Context) -> str:
            """Add a tool and tell clients."""
            @mcphost.tool(name="grown")
            def grown() -> str:
                return "new"
            plugin.extra = [grown]
            await ctx.host.reload()
            return "grown"

        return [grow, *self.extra]


@pytest.mark.parametrize("era", ["session", "auto"])
async def test_upstream_list_changed_reaches_clients(era):
    changed = asyncio.Event()

    class Watch(Side):
        async def on_message(self, message):
            await super().on_message(message)
            if isinstance(message, types.ToolListChangedNotification):
                changed.set()

    upstream = make_host(("growing", Growing()))
    async with serve_http(upstream) as remote, front({"up": {"url": remote.url, "era": era}}) as live:
        async with Watch().client(live.url) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "up_grown" not in names
            assert _text(await client.call_tool("up_grow", {})) == "grown"
            await asyncio.wait_for(changed.wait(), 20)
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "up_grown" in names
            assert _text(await client.call_tool("up_grown", {})) == "new"


def test_a_table_overrides_the_file_entry_of_the_same_name(tmp_path, monkeypatch):
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {
        "web": {"type": "http", "url": "https://file.example/mcp", "headers": {"X-Key": "${WEB_KEY}"}},
        "local": {"command": "uvx", "args": ["some-server"], "env": {"LEVEL": "debug"}},
    }}))
    settings = load_settings({"mcp_servers_file": [str(servers)],
                              "servers": {"web": {"url": "https://table.example/mcp", "prefix": ""}}})
    by_name = {server.name: server for server in settings.servers}
    assert by_name["web"].url == "https://table.example/mcp" and by_name["web"].headers == {}
    assert by_name["web"].prefix == ""
    local = by_name["local"]
    assert (local.transport, local.command, local.args, local.prefix) == ("stdio", "uvx", ("some-server",), "local_")
    monkeypatch.setenv("WEB_KEY", "k1")
    file_only = load_settings({"mcp_servers_file": str(servers)})
    web = next(server for server in file_only.servers if server.name == "web")
    assert web.resolved_headers() == {"X-Key": "k1"}
    assert "k1" not in web.describe()  # header values (secrets) never appear in status lines


def test_include_and_exclude_patterns():
    settings = load_settings({"servers": {"s": {"command": "x", "include": ["read_*", "list_*"],
                                                "exclude": ["read_secret*"]}}})
    server = settings.servers[0]
    assert server.mounts("read_file") and server.mounts("list_dir")
    assert not server.mounts("read_secret_key") and not server.mounts("write_file")


def test_importing_the_plugin_does_not_load_the_mcp_client():
    """Every CLI command that loads plugins imports the proxy: the mcp client (half a second) waits
    until a server is configured."""
    import subprocess

    code = ("import sys, mcphost_proxy; from mcphost_proxy import ProxyPlugin; ProxyPlugin(); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'mcp_types', 'httpx2', 'jsonschema'}))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]", loaded
