"""SEP-2549 cache hints and SEP-2243 routing headers through the proxy: an upstream's list ``ttlMs`` is
honoured (the lists are read again when it lapses), and the upstream hop carries the headers of the
upstream's era.

Real components: tests/upstreams/ttl_server.py speaks 2026-07-28 over stdio and changes its tool list
without telling anyone; a second mcphost over loopback HTTP records the headers each hop carried; the
official SDK client calls.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from mcp import Client
from proxy_support import HERE, front

import mcphost
from mcphost.testing import make_host, serve_http

TTL_SERVER = HERE / "upstreams" / "ttl_server.py"


async def test_an_upstreams_list_ttl_is_honoured_when_it_lapses():
    table = {"command": sys.executable, "args": [str(TTL_SERVER)], "env": {"TTL_MS": "1000"}, "era": "auto",
             "prefix": "ttl_"}
    async with front({"ttl": table}) as live, Client(live.url, mode="auto") as client:
        upstream = live.plugin.upstreams["ttl"]
        assert upstream.listing.ttl_ms == 1000
        first = [tool.name for tool in (await client.list_tools()).tools]
        assert first == ["ttl_v1"]
        names = first
        for _ in range(600):  # the upstream says nothing: only its ttlMs makes the host list it again
            names = [tool.name for tool in (await client.list_tools()).tools]
            if names != first:
                break
            await asyncio.sleep(0.05)
        assert len(names) == 1 and names[0].startswith("ttl_v") and names != first, names


async def test_without_a_ttl_a_list_is_not_polled():
    table = {"command": sys.executable, "args": [str(TTL_SERVER)], "env": {"TTL_MS": "0"}, "era": "auto",
             "prefix": "ttl_"}
    async with front({"ttl": table}) as live, Client(live.url, mode="auto") as client:
        assert live.plugin.upstreams["ttl"].listing.ttl_ms == 0
        await asyncio.sleep(1.5)  # not a timing assertion: nothing may change, however long it waits
        assert [tool.name for tool in (await client.list_tools()).tools] == ["ttl_v1"]


class Recorder:
    """An upstream mcphost's plugin: a tool and a resource, and what each request's HTTP hop carried."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, str | None, str | None]] = []

    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        @mcphost.tool(name="greet")
        def greet(who: str = "you") -> str:
            return f"hello {who}"

        return [greet]

    @mcphost.hookimpl
    def mcphost_resources(self, host: Any) -> list[mcphost.Resource]:
        @mcphost.resource("rec://note")
        def note() -> str:
            return "a note"

        return [note]

    @mcphost.hookimpl
    def mcphost_middleware(self, host: Any) -> list[Any]:
        @mcphost.middleware(name="record-hop")
        async def record(request: Any, call_next: Any) -> Any:
            headers = request.connection.headers if request.connection is not None else {}
            self.seen.append((request.method, headers.get("mcp-method"), headers.get("mcp-name"),
                              headers.get("mcp-protocol-version")))
            return await call_next(request)

        return [record]


@pytest.mark.parametrize("era", ["auto", "session"])
async def test_the_upstream_hop_carries_the_routing_headers_of_the_upstreams_era(era, side):
    """SEP-2243: to a 2026-07-28 upstream every request carries Mcp-Method (and Mcp-Name where the
    method names a target), whichever path the call takes (a client that can be asked goes through
    the SDK client, one that cannot through the lean path); to a session-era upstream the hop carries
    that era's protocol version header and none of 2026-07-28's routing headers."""
    recorder = Recorder()
    upstream = make_host(("rec", recorder))
    async with serve_http(upstream) as origin, \
            front({"rec": {"url": origin.url, "era": era, "prefix": "rec_"}}) as live, \
            Client(live.url, mode="auto") as mute, side.client(live.url, "legacy") as asking:
        for client in (mute, asking):
            assert (await client.call_tool("rec_greet", {"who": "x"})).content[0].text == "hello x"
            assert (await client.read_resource("rec://note")).contents[0].text == "a note"
    calls = [seen for seen in recorder.seen if seen[0] in ("tools/call", "resources/read")]
    assert len(calls) == 4, recorder.seen
    if era == "auto":
        assert all(method == header for method, header, _, _ in recorder.seen), recorder.seen
        assert sorted((method, name) for method, _, name, _ in calls) == [
            ("resources/read", "rec://note")] * 2 + [("tools/call", "greet")] * 2
        assert {version for *_, version in calls} == {"2026-07-28"}
    else:
        assert [(header, name) for _, header, name, _ in calls] == [(None, None)] * 4, calls
        assert {version for *_, version in calls} == {"2025-11-25"}, calls
