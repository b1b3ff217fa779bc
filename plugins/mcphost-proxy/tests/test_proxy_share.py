"""A per-caller share of ``per_session`` upstream instances: no caller holds more than half of
``max_instances`` while another waits, and an instance nobody used for a while gives way too.

The interaction test: one address (127.0.0.1) holds 16 sessions, each with its own upstream
process (the official Python SDK server over stdio), which fills the pool; a caller from another
address (127.0.0.2) still gets an instance at once, and the first address gets no 17th.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import httpx
from mcphost_proxy import ABANDONED_AFTER, instance_to_yield
from proxy_support import Side, front, sdk_upstream

from tests.support.http_support import ACCEPT_BOTH, INITIALIZE, sse_messages


def key(n: int) -> tuple[str, str]:
    return ("py", f"s{n}")


def test_the_greediest_callers_least_recently_used_idle_instance_gives_way() -> None:
    counts = {"a": 12, "b": 4}
    idle = {"a": [(5.0, key(1)), (3.0, key(2))], "b": [(1.0, key(3))]}
    assert instance_to_yield(16, counts, idle, "c", now=10.0) == key(2)
    # A newcomer already at half takes nothing, nor does the greedy caller itself.
    assert instance_to_yield(16, {**counts, "c": 8}, idle, "c", now=10.0) is None
    assert instance_to_yield(16, counts, idle, "a", now=10.0) is None
    # Nobody above half: only an abandoned instance gives way.
    even = {"a": 8, "b": 8}
    assert instance_to_yield(16, even, idle, "c", now=10.0) is None
    assert instance_to_yield(16, even, idle, "c", now=1.0 + ABANDONED_AFTER + 1) == key(3)
    # The greedy caller's instances all busy: none of them gives way.
    assert instance_to_yield(16, counts, {"b": [(1.0, key(3))]}, "c", now=10.0) is None


async def initialize(client: httpx.AsyncClient, url: str) -> str:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE}
    answer = await client.post(url, json=init, headers={"accept": ACCEPT_BOTH})
    assert answer.status_code == 200, answer.text
    session = answer.headers["mcp-session-id"]
    await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                      headers={"accept": ACCEPT_BOTH, "mcp-session-id": session})
    return session


async def call_pid(client: httpx.AsyncClient, url: str, session: str) -> dict:
    answer = await client.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                          "params": {"name": "py_pid", "arguments": {}}},
                               headers={"accept": ACCEPT_BOTH, "mcp-session-id": session,
                                        "mcp-protocol-version": INITIALIZE["protocolVersion"]})
    assert answer.status_code == 200, answer.text
    if answer.headers["content-type"].startswith("text/event-stream"):
        [reply] = [m for m in sse_messages(answer.text) if "id" in m]
    else:
        reply = json.loads(answer.text)
    return reply["result"]  # type: ignore[no-any-return]


async def test_an_address_holding_every_instance_gives_one_to_another_caller_at_once() -> None:
    server = sdk_upstream(per_session=True, max_instances=16)
    async with front({"py": server}) as live, contextlib.AsyncExitStack() as stack:
        greedy = [await stack.enter_async_context(Side().client(live.url)) for _ in range(16)]
        results = [await client.call_tool("py_pid", {}) for client in greedy]
        assert not any(r.is_error for r in results)
        assert len(live.plugin.bound) == 16  # the pool is full, all of it one address's

        other = httpx.AsyncClient(timeout=60, transport=httpx.AsyncHTTPTransport(local_address="127.0.0.2"))
        async with other:
            session = await initialize(other, live.url)
            started = time.monotonic()
            call = asyncio.ensure_future(call_pid(other, live.url, session))
            while "a:127.0.0.2" not in live.plugin._owners.values() and not call.done():
                await asyncio.sleep(0.01)
            began = time.monotonic() - started  # its own upstream instance is starting
            result = await call
            took = time.monotonic() - started
        assert not result.get("isError"), result
        print(f"\nthe other caller's call started in {began:.2f} s, answered in {took:.2f} s "
              "(its upstream process started for it)")
        assert began < 5.0
        owners = list(live.plugin._owners.values())
        assert owners.count("a:127.0.0.2") == 1 and owners.count("a:127.0.0.1") == 15

        # The first address, above half of the pool, gets no 17th instance while the pool is full.
        async with Side().client(live.url) as one_more:
            refused = await one_more.call_tool("py_pid", {})
        assert refused.is_error and "max_instances (16)" in "".join(getattr(b, "text", "") for b in refused.content)
