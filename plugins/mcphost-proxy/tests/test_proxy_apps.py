"""MCP Apps (the ``io.modelcontextprotocol/ui`` extension, SEP-1865) through the proxy.

Two real upstream processes (tests/upstreams/apps_server.py, over stdio) serve an app at the same
``ui://dashboard/view.html``; the official SDK client reads both through the host, in both eras,
each tool's ``_meta.ui`` pointing at its own upstream's page, the CSP metadata as the upstream
declared it, and the app-only tool kept out of tools/list and search while its app can still call it.
"""

from __future__ import annotations

import sys

import pytest
from mcp import Client
from proxy_support import APPS_SERVER, front

UI = "io.modelcontextprotocol/ui"


def _apps(name: str) -> dict:
    return {"command": sys.executable, "args": [str(APPS_SERVER)], "env": {"APPS_NAME": name}}


def _csp(name: str) -> dict:
    return {"connectDomains": [f"https://api.{name}.example"], "resourceDomains": ["https://cdn.example"]}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_two_upstreams_serving_the_same_ui_path_stay_routable(mode):
    async with front({"alpha": _apps("alpha"), "beta": _apps("beta")},
                     endpoints={"find": {"discovery": "search"}}) as live, Client(live.url, mode=mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        # Each tool's _meta.ui (and the legacy flat key) points at its own upstream's page.
        assert tools["alpha_show"].meta["ui"] == {"resourceUri": "ui://alpha/dashboard/view.html"}
        assert tools["beta_show"].meta["ui"] == {"resourceUri": "ui://beta/dashboard/view.html"}
        assert tools["beta_show_legacy"].meta["ui/resourceUri"] == "ui://beta/dashboard/view.html"
        # App-only tools are not listed to a client without the extension.
        assert "alpha_refresh" not in tools and "beta_refresh" not in tools
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert set(listed) == {"ui://alpha/dashboard/view.html", "ui://beta/dashboard/view.html"}
        for name in ("alpha", "beta"):
            uri = f"ui://{name}/dashboard/view.html"
            assert listed[uri].meta == {"ui": {"csp": _csp(name), "prefersBorder": True}}
            assert listed[uri].mime_type == "text/html;profile=mcp-app"
            page = (await client.read_resource(uri)).contents
            assert [(str(c.uri), c.text, c.meta) for c in page] == [
                (uri, f"<html><body>{name}</body></html>", {"ui": {"csp": _csp(name)}})]
        # The app can still call its tool, and each call reaches its own upstream.
        called = await client.call_tool("beta_refresh", {})
        assert not called.is_error and called.content[0].text == "beta: refresh"
    async with front({"alpha": _apps("alpha"), "beta": _apps("beta")},
                     endpoints={"find": {"discovery": "search"}}) as live, \
            Client(live.url + "/find", mode=mode) as finder:
        found = await finder.call_tool("search_tools", {"query": "refresh dashboard data", "limit": 20})
        names = [tool["name"] for tool in found.structured_content["tools"]]
        assert names and not any(name.endswith("_refresh") for name in names), names
        assert {"alpha_show", "beta_show"} <= set(names)


async def test_a_client_with_the_apps_extension_lists_app_only_tools_privately():
    """A client that declared the extension renders apps: it gets the app-only tools (its host keeps
    them from the model); the list then differs per client, so it is never marked public."""
    import httpx

    from tests.support.http_support import modern

    async with front({"alpha": _apps("alpha")}) as live, httpx.AsyncClient(timeout=30) as http:
        async def tools(extensions: dict | None) -> dict:
            meta = {"io.modelcontextprotocol/clientCapabilities": {"extensions": extensions}} if extensions else None
            payload, headers = modern("tools/list", {}, meta_extra=meta)
            return (await http.post(live.url, json=payload, headers=headers)).json()["result"]

        plain, apps = await tools(None), await tools({UI: {"mimeTypes": ["text/html;profile=mcp-app"]}})
        assert "alpha_refresh" not in {t["name"] for t in plain["tools"]}
        assert "alpha_refresh" in {t["name"] for t in apps["tools"]}
        assert plain["cacheScope"] == apps["cacheScope"] == "private"
