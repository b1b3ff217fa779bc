"""On a Redis cluster (a real redis-server, two real ``mcphost serve`` processes), each node's console
lists the whole cluster's live sessions with the node that opened each, and ends a session another
node holds as a client's DELETE to any node does: its client gets 404 and ``mcphost_terminate``
fires once, cluster-wide; B's page in a real browser (Chromium) shows a session of A and ends it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from console_support import browser
from mcphost_redis.testing import RedisServer, redis_server_path
from playwright.async_api import expect

from tests.support.fixtures.distributions import make_distribution
from tests.support.http_support import HttpServer, ServerGroup, open_session, session_call, session_headers

REPO_ROOT = Path(__file__).resolve().parents[3]
PLUGIN = '''
import os

import mcphost

LOG = os.environ["CONSOLE_TERMINATE_LOG"]


@mcphost.hookimpl
def mcphost_terminate(session, reason):
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(f"{session.id} {reason} {os.getpid()}\\n")
'''
ACTION = {"x-mcphost-console": "1"}


class Nodes(ServerGroup):
    """Nodes with the console, the demo tools and a plugin that logs every terminate to a file."""

    def __init__(self, tmp_path: Path, redis: RedisServer) -> None:
        site = tmp_path / "site"
        make_distribution(site, "mcphost-console-cluster-test", "0.0.1", {"terminatelog": "terminatelog_plugin"},
                          {"terminatelog_plugin": PLUGIN})
        self.terminated = tmp_path / "terminated.log"
        self.terminated.touch()
        super().__init__(tmp_path, plugins="demo,console,terminatelog,redis",
                         env={"PYTHONPATH": f"{site}:{REPO_ROOT}", "CONSOLE_TERMINATE_LOG": str(self.terminated)},
                         config=f'[plugins.redis]\nurl = "{redis.url}"\nprefix = "console:"\n')

    def terminations(self) -> list[list[str]]:
        return [line.split() for line in self.terminated.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[Nodes]:
    if redis_server_path() is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is required in CI (scripts/ensure-tools installs it)")
        pytest.skip("redis-server is not installed")
    redis = RedisServer(tmp_path / "redis")
    made = Nodes(tmp_path, redis)
    try:
        yield made
    finally:
        made.stop()
        redis.stop()


def base(server: HttpServer) -> str:
    return server.url.rsplit("/", 1)[0]


async def state(client: httpx.AsyncClient, server: HttpServer) -> dict[str, Any]:
    response = await client.get(base(server) + "/console/api/state")
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_each_console_lists_the_cluster_and_ends_a_session_another_node_holds(nodes: Nodes) -> None:
    a, b = nodes.start(), nodes.start()
    async with httpx.AsyncClient(timeout=10) as client:
        on_a = await open_session(client, a)
        on_b = await open_session(client, b)
        await session_call(client, a, on_a, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})

        tag_a = f"{(await state(client, a))['health']['node']}"
        tag_b = f"{(await state(client, b))['health']['node']}"
        assert tag_a.endswith(f":{a.process.pid}") and tag_b.endswith(f":{b.process.pid}")
        for server, here, there, tag_there in ((b, on_b, on_a, tag_a), (a, on_a, on_b, tag_b)):
            seen = await state(client, server)
            rows = {row["id"]: row for row in seen["sessions"]}
            assert set(rows) == {on_a, on_b}
            assert seen["sessions_listing"] == {"total": 2, "complete": True}
            assert rows[here]["held_here"] is True and rows[here]["inflight"] == 0
            other = rows[there]
            # Held by the other node: who opened it, what its record says, and what only its holder knows as None.
            assert other["node"] == tag_there and other["held_here"] is False
            assert other["client"]["name"] and other["era"] == "legacy" and other["transport"] == "http"
            assert other["inflight"] is None and other["waiting_on_client"] is None
            assert 0 <= other["idle"] <= other["age"] < 60

        # Ended from B's console: the client on A gets 404, terminate fires once (on B, as a DELETE to B would).
        end = await client.post(f"{base(b)}/console/api/sessions/{on_a}/end", headers={**ACTION, "origin": base(b)})
        assert end.status_code == 200, end.text
        gone = await client.post(a.url, headers=session_headers(on_a),
                                 json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
        assert gone.status_code == 404
        again = await client.post(f"{base(a)}/console/api/sessions/{on_a}/end", headers={**ACTION, "origin": base(a)})
        assert again.status_code == 404
        await asyncio.sleep(1.0)  # A let go of it (the end was published): no second terminate comes
        assert nodes.terminations() == [[on_a, "deleted", str(b.process.pid)]]
        for server in (a, b):
            assert [row["id"] for row in (await state(client, server))["sessions"]] == [on_b]
        # The session B holds is untouched.
        listed = await session_call(client, a, on_b, "tools/list", {}, 5)
        assert listed["result"]["tools"]


async def test_bs_page_shows_a_session_of_a_with_as_node_and_ends_it(nodes: Nodes) -> None:
    a, b = nodes.start(), nodes.start()
    async with httpx.AsyncClient(timeout=10) as client, browser(viewport={"width": 1280, "height": 900}) as context:
        on_a = await open_session(client, a)
        tag_a = (await state(client, a))["health"]["node"]
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(base(b) + "/console")
        row = page.locator(f'#sessions-table tr[data-session="{on_a}"]')
        await expect(row.locator(".session-node")).to_have_text(f"http · {tag_a}", timeout=5000)  # not "(here)"
        await row.locator(".end-session").click()
        await expect(row.locator(".end-session")).to_have_text("Confirm end", timeout=3000)
        await row.locator(".end-session").click()
        await expect(row).to_have_count(0, timeout=5000)
        gone = await client.post(a.url, headers=session_headers(on_a),
                                 json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
        assert gone.status_code == 404
        assert nodes.terminations() == [[on_a, "deleted", str(b.process.pid)]]
        assert errors == []
