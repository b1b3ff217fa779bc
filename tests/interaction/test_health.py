"""Liveness (``/healthz``) and readiness (``/readyz``) over real HTTP.

A real ``mcphost serve`` answers both with the in-memory backend; the app in process (through
``mcphost.testing.app_client``) with a backend plugin whose health the test controls shows readiness
following the backend, and the host's start and stop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import mcphost
import mcphost.host
from mcphost.app import create_app
from mcphost.builtin.memory import MemoryBackend
from mcphost.sessions.backend import Backend
from mcphost.testing import app_client, make_host
from tests.support.http_support import HttpServer


def test_a_served_process_is_live_and_ready(http_server: Callable[..., HttpServer]) -> None:
    server = http_server()
    base = f"http://127.0.0.1:{server.port}"
    with httpx.Client() as client:
        live = client.get(base + "/healthz")
        ready = client.get(base + "/readyz")
        head = client.head(base + "/healthz")
        post = client.post(base + "/readyz", content=b"{}")
        # No auth, no Host check: a probe from a load balancer addressing the pod by IP is answered.
        foreign = client.get(base + "/healthz", headers={"host": "10.0.0.7:8000", "origin": "http://evil"})
    assert (live.status_code, live.json()) == (200, {"status": "ok"})
    assert (ready.status_code, ready.json()) == (200, {"status": "ready", "backend": "memory"})
    assert live.headers["cache-control"] == "no-store"
    assert head.status_code == 200 and head.content == b""
    assert (post.status_code, post.headers["allow"]) == (405, "GET, HEAD")
    assert foreign.status_code == 200


class Switchable(MemoryBackend):
    """The memory backend with a health answer the test sets: True, False, "raise" or "hang"."""

    name = "switchable"

    def __init__(self) -> None:
        super().__init__()
        self.state: Any = True
        self.asked = 0

    async def health(self) -> bool:
        self.asked += 1
        if self.state == "raise":
            raise ConnectionError("store unreachable")
        if self.state == "hang":
            await asyncio.sleep(60)
        return bool(self.state)


async def test_readiness_follows_the_backend_and_liveness_does_not(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(mcphost.host, "HEALTH_TIMEOUT", 0.2)
    backend = Switchable()
    plugin = type("Store", (), {"mcphost_backend": mcphost.hookimpl(lambda self, host: backend)})()
    host = make_host(plugin)
    seen: list[tuple[Any, int, int, dict[str, Any]]] = []
    with caplog.at_level(logging.WARNING, logger="mcphost.host"):
        async with app_client(host) as client:
            for state in (True, False, "raise", "hang", False, True):
                backend.state = state
                ready = await client.get("/readyz")
                live = await client.get("/healthz")
                seen.append((state, ready.status_code, live.status_code, ready.json()))

    unhealthy = {"status": "unavailable", "reason": "backend unhealthy", "backend": "switchable"}
    assert seen == [
        (True, 200, 200, {"status": "ready", "backend": "switchable"}),
        (False, 503, 200, unhealthy),
        ("raise", 503, 200, unhealthy),
        ("hang", 503, 200, unhealthy),
        (False, 503, 200, unhealthy),
        (True, 200, 200, {"status": "ready", "backend": "switchable"}),
    ]
    # Transitions are logged, not every probe.
    messages = [r.getMessage() for r in caplog.records if r.name == "mcphost.host"]
    assert messages == ["backend switchable is unhealthy: health() answered False",
                        "backend switchable is healthy again"]


async def test_readiness_is_503_while_starting_and_stopping() -> None:
    host = make_host()
    app = create_app(host)
    assert await app.readiness() == (False, {"status": "unavailable", "reason": "starting"})
    await host.start()
    try:
        assert await app.readiness() == (True, {"status": "ready", "backend": "memory"})
        app.transport.closing.set()  # what `mcphost serve` does when SIGTERM arrives
        assert await app.readiness() == (False, {"status": "unavailable", "reason": "stopping"})
    finally:
        await host.stop()


async def test_a_backend_without_health_is_ready() -> None:
    class Bare(Backend):  # keeps the base class's health(): always healthy
        name = "bare"

        def __init__(self) -> None:
            memory = MemoryBackend()
            self.sessions, self.events, self.broker, self.tasks = (
                memory.sessions, memory.events, memory.broker, memory.tasks)

    plugin = type("Store", (), {"mcphost_backend": mcphost.hookimpl(lambda self, host: Bare())})()
    host = make_host(plugin)
    app = create_app(host)
    await host.start()
    try:
        assert await app.readiness() == (True, {"status": "ready", "backend": "bare"})
    finally:
        await host.stop()
