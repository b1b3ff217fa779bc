"""``mcphost serve --workers N`` and SIGHUP: an upgraded plugin package served without a client noticing.

The supervisor replaces its workers one at a time with fresh processes, which load the plugin
packages installed now; each replacement serves before the worker it replaces is stopped
gracefully. Under load that gives no client-visible error, and a session connected before the
upgrade hears notifications/tools/list_changed.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import httpx
from mcphost_redis.testing import RedisServer

from tests.support.fixtures.distributions import make_distribution
from tests.support.http_plugins.harness import SseReader
from tests.support.http_support import ACCEPT_BOTH, HttpServer, sse_events, sse_messages

REPO_ROOT = Path(__file__).resolve().parents[3]
LEGACY = "2025-11-25"
MODERN = "2026-07-28"

V1 = '''
import mcphost


@mcphost.tool
def plugin_version() -> str:
    """Which version of this plugin answers."""
    return "1"


@mcphost.hookimpl
def mcphost_tools(host):
    return [plugin_version]
'''

V2 = '''
import mcphost


@mcphost.tool
def plugin_version() -> str:
    """Which version of this plugin answers."""
    return "2"


@mcphost.tool
def added_in_v2() -> str:
    """A tool that only the upgraded package has."""
    return "new"


@mcphost.hookimpl
def mcphost_tools(host):
    return [plugin_version, added_in_v2]
'''

MODERN_HEADERS = {"content-type": "application/json", "accept": ACCEPT_BOTH, "mcp-protocol-version": MODERN,
                  "mcp-method": "tools/call"}
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


def legacy_headers(session_id: str | None = None) -> dict[str, str]:
    sent = {"content-type": "application/json", "accept": ACCEPT_BOTH, "mcp-protocol-version": LEGACY}
    if session_id:
        sent["mcp-session-id"] = session_id
    return sent


async def modern_call(client: httpx.AsyncClient, url: str, name: str, arguments: dict[str, Any],
                      request_id: int = 1) -> httpx.Response:
    return await client.post(url, headers={**MODERN_HEADERS, "mcp-name": name}, json={
        "jsonrpc": "2.0", "id": request_id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": META}})


async def initialize(client: httpx.AsyncClient, url: str) -> str:
    response = await client.post(url, headers=legacy_headers(), json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "hup", "version": "0"}}})
    assert response.status_code == 200, response.text
    session_id = response.headers["mcp-session-id"]
    await client.post(url, headers=legacy_headers(session_id),
                      json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return session_id


class Load:
    """Clients calling ``echo`` until ``stop`` is set: the errors they met and what was served."""

    def __init__(self, client: httpx.AsyncClient, url: str) -> None:
        self.client = client
        self.url = url
        self.stop = asyncio.Event()
        self.errors: list[str] = []
        self.served = {"modern": 0, "legacy": 0, "resumed": 0}

    async def modern(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            try:
                response = await modern_call(self.client, self.url, "echo", {"text": str(n)}, n)
                if response.status_code != 200 or response.json()["result"]["content"][0]["text"] != str(n):
                    self.errors.append(f"modern {response.status_code} {response.text[:200]}")
                self.served["modern"] += 1
            except Exception as exc:
                self.errors.append(f"modern {exc!r}")

    async def resume(self, session_id: str, text: str, request_id: int) -> list[dict[str, Any]]:
        last = [e["id"] for e in sse_events(text) if "id" in e]
        for _ in range(10):
            if not last:
                return []
            response = await self.client.get(self.url, headers={
                "accept": "text/event-stream", "mcp-session-id": session_id,
                "mcp-protocol-version": LEGACY, "last-event-id": last[-1]})
            replies = [m for m in sse_messages(response.text) if m.get("id") == request_id]
            if replies:
                return replies
            last += [e["id"] for e in sse_events(response.text) if "id" in e]
            await asyncio.sleep(0.1)
        return []

    async def legacy(self) -> None:
        session_id = await initialize(self.client, self.url)
        n = 1
        while not self.stop.is_set():
            n += 1
            try:
                response = await self.client.post(self.url, headers=legacy_headers(session_id), json={
                    "jsonrpc": "2.0", "id": n, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": str(n)}}})
                replies = [m for m in sse_messages(response.text) if m.get("id") == n]
                if response.status_code == 200 and not replies:
                    # The worker stopped mid-stream and said `retry`: resume as clients do.
                    self.served["resumed"] += 1
                    replies = await self.resume(session_id, response.text, n)
                if response.status_code != 200 or not replies or "result" not in replies[0]:
                    self.errors.append(f"legacy {response.status_code} {response.text[:300]}")
                self.served["legacy"] += 1
            except Exception as exc:
                self.errors.append(f"legacy {exc!r}")


async def until_every_worker_is_v2(client: httpx.AsyncClient, server: HttpServer) -> None:
    """Ten answers in a row from the upgraded package: every worker is a new one."""
    deadline = time.monotonic() + 60
    streak = 0
    while streak < 10:
        assert time.monotonic() < deadline, f"still old workers after 60 s:\n{server.log()[-3000:]}"
        reply = (await modern_call(client, server.url, "plugin_version", {})).json()
        streak = streak + 1 if reply.get("result", {}).get("content", [{}])[0].get("text") == "2" else 0
        await asyncio.sleep(0.05)


async def test_sighup_replaces_workers_without_errors_and_clients_hear_the_new_catalog(
        tmp_path: Path, redis_server: RedisServer):
    site = tmp_path / "site"
    v1 = make_distribution(site, "mcphost-reload-test", "1.0", {"reloadtest": "reloadtest_plugin"},
                           {"reloadtest_plugin": V1})
    config = f'[plugins.redis]\nurl = "{redis_server.url}"\nprefix = "hup{os.getpid()}:"\n'
    server = HttpServer(tmp_path, plugins="demo,redis,reloadtest", env={"PYTHONPATH": f"{site}:{REPO_ROOT}"},
                        config=config, args=["--workers", "2"])
    load: Load | None = None
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            load = Load(client, server.url)
            for _ in range(100):  # both workers up
                if (await modern_call(client, server.url, "plugin_version", {})).status_code == 200:
                    break
                await asyncio.sleep(0.1)
            watcher = await initialize(client, server.url)  # connected before the upgrade, then idle
            running = [asyncio.ensure_future(load.modern()) for _ in range(2)] + [asyncio.ensure_future(load.legacy())]
            await asyncio.sleep(1)
            # Upgrade the installed package in place, then ask the supervisor to pick it up.
            shutil.rmtree(v1)
            make_distribution(site, "mcphost-reload-test", "2.0", {"reloadtest": "reloadtest_plugin"},
                              {"reloadtest_plugin": V2})
            os.kill(server.process.pid, signal.SIGHUP)
            await until_every_worker_is_v2(client, server)
            await asyncio.sleep(4)  # the replaced workers drain and stop under load
            load.stop.set()
            await asyncio.gather(*running)
            added = (await modern_call(client, server.url, "added_in_v2", {})).json()
            assert added["result"]["content"][0]["text"] == "new", added
            # The session connected before the upgrade hears that the tool list changed.
            async with client.stream("GET", server.url, headers={
                    "accept": "text/event-stream", "mcp-session-id": watcher,
                    "mcp-protocol-version": LEGACY}) as stream:
                assert stream.status_code == 200
                reader = SseReader(stream)
                await reader.until(lambda r: any("tools/list_changed" in e.get("data", "") for e in r.events),
                                   timeout=10)
            notes = [json.loads(e["data"])["method"] for e in reader.events if e.get("data", "").strip()]
            assert notes.count("notifications/tools/list_changed") == 1, notes
    finally:
        if load is not None:
            load.stop.set()
        code = server.stop(timeout=60)
    log = server.log_path.read_text(encoding="utf-8", errors="replace")
    assert log.count("replaced (pid") == 2, log[-3000:]
    # Each replaced worker stopped accepting at once (the others accept on the shared socket), so no
    # connection reached it late in its drain, to be closed before its request was read.
    assert log.count("retiring: no longer accepting connections") == 2, log[-3000:]
    assert load is not None
    print(f"\nSIGHUP under load: {load.served}, errors {len(load.errors)}")
    assert not load.errors, (load.errors[:10], load.served)
    assert load.served["modern"] > 0 and load.served["legacy"] > 0, load.served
    assert code == 0, log[-3000:]
