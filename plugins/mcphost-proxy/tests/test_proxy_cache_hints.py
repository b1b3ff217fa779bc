"""SEP-2549 cache hints through the proxy: an upstream's list ``ttlMs`` is honoured (the lists are read
again when it lapses), and a list the host filters per caller is never marked public.

Real components: tests/upstreams/ttl_server.py speaks 2026-07-28 over stdio and changes its tool list
without telling anyone; the host serves over loopback HTTP; the official SDK client lists.
"""

from __future__ import annotations

import asyncio
import sys

from mcp import Client
from proxy_support import HERE, front

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
