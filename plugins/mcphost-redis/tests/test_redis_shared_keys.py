"""One requestState key for the whole cluster, agreed through Redis with nothing to configure.

Without ``[server] state_keys`` every process seals 2026-07-28 ``requestState`` with the key ring
kept in the backend: an input-required retry that lands on another process opens there. A
rotation goes through the same ring. ``state_keys``, when set, still win; a process that cannot
reach the backend at startup says so and does not start with a private key.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcphost_redis import RedisBackend
from mcphost_redis.testing import RedisServer, free_port, redis_settings

from mcphost.config import config_from_dict
from mcphost.host import Host
from mcphost.protocol.sealed import StateRejected
from mcphost.sessions import cluster as cluster_module
from mcphost.sessions.backend import BackendUnavailable
from mcphost.sessions.cluster import KEY_ACTIVATION, STATE_RING, sealing_keys
from tests.support.http_support import ACCEPT_BOTH, HttpServer

MODERN = "2026-07-28"
MCPHOST = Path(sys.executable).parent / "mcphost"


def _host(url: str, prefix: str, server: dict[str, Any] | None = None) -> Host:
    host = Host(config_from_dict({"server": server or {}, "plugins": {"redis": {"url": url, "prefix": prefix}}}))
    host.prepare()
    return host


def _seal(host: Host) -> str:
    assert host.kernel is not None
    return host.kernel.sealer.seal(answers={"a": 1}, principal=None, method="tools/call", params_digest="d")


def _open(host: Host, token: str) -> Any:
    assert host.kernel is not None
    return host.kernel.sealer.open(token, principal=None, method="tools/call", params_digest="d")


async def test_many_backends_asking_at_once_agree_on_one_key(redis_server: RedisServer):
    settings = redis_settings(redis_server.url)
    backends = [RedisBackend(settings) for _ in range(8)]
    try:
        rings = await asyncio.gather(*(b.keyring(STATE_RING) for b in backends))
        assert all(ring == rings[0] for ring in rings) and len(rings[0]) == 1
        assert len(rings[0][0].secret) == 32 and rings[0][0].active_from <= time.time()
        assert await backends[0].keyring("other") != rings[0]  # rings are named
    finally:
        for backend in backends:
            await backend.close()


async def test_a_rotation_verifies_at_once_signs_later_and_drops_keys_past_keep(redis_server: RedisServer):
    backend = RedisBackend(redis_settings(redis_server.url))
    try:
        first = await backend.keyring(STATE_RING)
        rotated = await backend.rotate_keyring(STATE_RING, activate_in=60, keep=3600)
        assert rotated[1:] == first and rotated[0].secret != first[0].secret
        now = time.time()
        # Until the new key is active, the old one signs and the new one only verifies.
        assert sealing_keys(rotated, now) == [first[0].secret, rotated[0].secret]
        assert sealing_keys(rotated, now + 61) == [rotated[0].secret, first[0].secret]
        assert await backend.keyring(STATE_RING) == rotated  # everyone reads the rotated ring
        # Rotating with keep=0 forgets every key superseded before now (the pending one stays).
        again = await backend.rotate_keyring(STATE_RING, activate_in=0, keep=0)
        assert [k.secret for k in again] == [again[0].secret, rotated[0].secret, first[0].secret]
        await asyncio.sleep(0.01)
        last = await backend.rotate_keyring(STATE_RING, activate_in=0, keep=0)
        assert len(last) == 2 and last[1] == again[0]
    finally:
        await backend.close()


async def test_memory_backend_keyring_has_the_same_contract():
    from mcphost.builtin.memory import MemoryBackend
    backend = MemoryBackend()
    ring = await backend.keyring(STATE_RING)
    assert ring == await backend.keyring(STATE_RING) and len(ring) == 1
    rotated = await backend.rotate_keyring(STATE_RING, activate_in=60, keep=3600)
    assert rotated[1:] == ring and rotated[0].active_from > time.time() + 59


async def test_hosts_without_state_keys_open_each_others_states(redis_server: RedisServer):
    prefix = f"k{os.getpid()}a:"
    a, b = _host(redis_server.url, prefix), _host(redis_server.url, prefix)
    await a.start()
    await b.start()
    try:
        token = _seal(a)
        assert _open(b, token).answers == {"a": 1}
        assert _open(a, _seal(b)).answers == {"a": 1}
    finally:
        await a.stop()
        await b.stop()
    # Another deployment (another prefix) on the same Redis has its own key.
    c = _host(redis_server.url, f"k{os.getpid()}other:")
    await c.start()
    try:
        with pytest.raises(StateRejected):
            _open(c, token)
    finally:
        await c.stop()


async def test_configured_state_keys_still_win(redis_server: RedisServer):
    prefix = f"k{os.getpid()}b:"
    keyed = _host(redis_server.url, prefix, {"state_keys": ["x" * 32]})
    shared = _host(redis_server.url, prefix)
    await keyed.start()
    await shared.start()
    try:
        with pytest.raises(StateRejected):
            _open(shared, _seal(keyed))
        alone = Host(config_from_dict({"server": {"state_keys": ["x" * 32]}}))
        alone.prepare()
        assert _open(alone, _seal(keyed)).answers == {"a": 1}  # sealed with the configured key
    finally:
        await keyed.stop()
        await shared.stop()


async def test_a_rotation_reaches_every_process(redis_server: RedisServer, monkeypatch):
    monkeypatch.setattr(cluster_module, "KEY_REFRESH", 0.1)
    prefix = f"k{os.getpid()}c:"
    a, b = _host(redis_server.url, prefix), _host(redis_server.url, prefix)
    await a.start()
    await b.start()
    try:
        old = _seal(a)
        await a.backend.rotate_keyring(STATE_RING, activate_in=0, keep=3600)
        await asyncio.sleep(0.5)
        new = _seal(b)
        assert new.split(".")[1] != old.split(".")[1]  # b signs with the new key
        assert _open(a, new).answers == {"a": 1} and _open(b, old).answers == {"a": 1}
    finally:
        await a.stop()
        await b.stop()


async def test_a_host_that_cannot_reach_the_backend_does_not_start(monkeypatch):
    monkeypatch.setattr(cluster_module, "KEY_STARTUP_WAIT", 0.5)
    host = _host(f"redis://127.0.0.1:{free_port()}/0", "dead:")
    with pytest.raises(BackendUnavailable) as caught:
        await host.start()
    assert "not serving with a private key" in str(caught.value)
    assert not host.started


def test_serve_refuses_to_start_without_the_backend_and_says_why(tmp_path: Path):
    config = tmp_path / "mcphost.toml"
    config.write_text(f'[plugins.redis]\nurl = "redis://127.0.0.1:{free_port()}/0"\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPHOST_")}
    env.update({"MCPHOST_CONFIG": str(config), "MCPHOST_PLUGINS": "demo,redis"})
    proc = subprocess.run([str(MCPHOST), "serve", "--port", str(free_port())], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode != 0, proc.stderr[-2000:]
    assert "not serving with a private key" in proc.stderr, proc.stderr[-3000:]


async def test_an_input_required_retry_on_another_process_succeeds(tmp_path: Path, redis_server: RedisServer):
    """The issue's symptom over real HTTP: greet_user asks on A, the retry with the answer lands on B."""
    config = f'[plugins.redis]\nurl = "{redis_server.url}"\nprefix = "k{os.getpid()}d:"\n'
    a = HttpServer(tmp_path, plugins="demo,redis", config=config)
    b = HttpServer(tmp_path, plugins="demo,redis", config=config)
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
    sent = {"content-type": "application/json", "accept": ACCEPT_BOTH, "mcp-protocol-version": MODERN,
            "mcp-method": "tools/call", "mcp-name": "greet_user"}
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            first = (await client.post(a.url, headers=sent, json={
                "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "greet_user", "arguments": {}, "_meta": meta}})).json()["result"]
            assert first["resultType"] == "input_required", first
            (key,) = first["inputRequests"]
            retry = {"name": "greet_user", "arguments": {}, "_meta": meta, "requestState": first["requestState"],
                     "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}}}
            second = (await client.post(b.url, headers=sent, json={
                "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": retry})).json()
            assert second["result"]["content"][0]["text"] == "Hello, Ada!", second
    finally:
        a.stop()
        b.stop()


def test_rotate_state_key_command(tmp_path: Path, redis_server: RedisServer):
    prefix = f"k{os.getpid()}e:"
    config = tmp_path / "mcphost.toml"
    config.write_text(f'[plugins.redis]\nurl = "{redis_server.url}"\nprefix = "{prefix}"\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPHOST_")}
    env.update({"MCPHOST_CONFIG": str(config), "MCPHOST_PLUGINS": "redis"})
    for expected in (1, 2):
        proc = subprocess.run([str(MCPHOST), "rotate-state-key"], env=env, capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
        # An empty ring gets its first key, active at once; the next rotation keeps it.
        assert f"{expected} key(s) in the ring" in proc.stdout and f"{KEY_ACTIVATION:.0f}s" in proc.stdout


# -- a ring deleted or damaged under a running cluster (issue 24, item 7) --------------------------------

async def test_a_deleted_ring_is_an_error_on_readiness_and_in_the_log_never_a_silent_rekey(
        redis_server: RedisServer, monkeypatch, caplog):
    from mcphost.app import create_app

    monkeypatch.setattr(cluster_module, "KEY_REFRESH", 0.1)
    prefix = f"k{os.getpid()}f:"
    host = _host(redis_server.url, prefix)
    app = create_app(host)
    await host.start()
    try:
        assert (await app.readiness())[0]
        sealed = _seal(host)
        ring_key = host.backend.key("k:", STATE_RING)
        await host.backend.redis.delete(ring_key)
        await asyncio.sleep(0.5)
        ready, body = await app.readiness()
        assert not ready and body["reason"] == "state key ring" and "missing" in body["detail"], body
        assert await host.backend.redis.get(ring_key) is None  # not re-created behind the operator's back
        assert _open(host, sealed).answers == {"a": 1}  # outstanding states still open
        errors = [r for r in caplog.records if r.levelname == "ERROR" and "key ring is missing" in r.getMessage()]
        assert len(errors) == 1  # once, not every round

        await host.backend.redis.set(ring_key, b"garbage")
        await asyncio.sleep(0.5)
        ready, body = await app.readiness()
        assert not ready and "unreadable" in body["detail"], body
        assert await host.backend.redis.get(ring_key) == b"garbage"
        assert _open(host, sealed).answers == {"a": 1}

        await host.backend.redis.delete(ring_key)
        await host.backend.rotate_keyring(STATE_RING, activate_in=0, keep=3600)  # what the operator runs
        await asyncio.sleep(0.5)
        assert (await app.readiness())[0]
    finally:
        await host.stop()


def test_rotate_state_key_explains_a_damaged_ring_in_one_line(tmp_path: Path, redis_server: RedisServer):
    import redis as redis_sync

    prefix = f"k{os.getpid()}g:"
    redis_sync.Redis.from_url(redis_server.url).set(f"{prefix}k:{STATE_RING}", b"{not json")
    config = tmp_path / "mcphost.toml"
    config.write_text(f'[plugins.redis]\nurl = "{redis_server.url}"\nprefix = "{prefix}"\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPHOST_")}
    env.update({"MCPHOST_CONFIG": str(config), "MCPHOST_PLUGINS": "redis"})
    proc = subprocess.run([str(MCPHOST), "rotate-state-key"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "key ring in Redis" in lines[0] and "unreadable" in lines[0] and "delete that key" in lines[0]
    assert redis_sync.Redis.from_url(redis_server.url).get(f"{prefix}k:{STATE_RING}") == b"{not json"
