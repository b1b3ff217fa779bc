"""``max_sessions_per_principal`` across processes: two real ``mcphost serve`` on one Redis.

The session store counts each caller's sessions (``count_of``), so a principal that holds its
cap on one process is refused on the other, and gets room again when it ends one anywhere.
"""

from __future__ import annotations

from pathlib import Path

import httpx
from mcphost_redis.testing import RedisServer

from mcphost.sessions.session import Principal, Session
from tests.support.http_support import INIT_PARAMS, HttpServer

REPO_ROOT = Path(__file__).resolve().parents[3]


def initialize(client: httpx.Client, server: HttpServer) -> httpx.Response:
    return client.post(server.url, headers=server.headers(),
                       json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS})


def test_the_session_cap_of_a_principal_holds_across_processes(tmp_path: Path, redis_server: RedisServer):
    config = (f'[server]\nmax_sessions_per_principal = 2\n\n[plugins.redis]\nurl = "{redis_server.url}"\n'
              f'prefix = "caps:"\n')
    servers = [HttpServer(tmp_path, plugins="demo,redis", config=config, env={"PYTHONPATH": str(REPO_ROOT)})
               for _ in range(2)]
    a, b = servers
    try:
        with httpx.Client(timeout=15) as client:
            first = initialize(client, a)
            assert first.status_code == 200, first.text
            assert initialize(client, b).status_code == 200  # one on each process: its cap
            refused = initialize(client, a)
            assert refused.status_code == 429 and refused.headers["retry-after"], refused.text
            assert initialize(client, b).status_code == 429
            # Ending one on the other process gives room again.
            session_id = first.headers["mcp-session-id"]
            assert client.delete(b.url, headers=b.headers(session_id)).status_code == 204
            assert initialize(client, a).status_code == 200
    finally:
        for server in servers:
            server.stop()


async def test_sessions_are_counted_per_caller(backend):
    alice = Principal("alice", issuer="https://idp")
    for n, principal in enumerate([alice, alice, None]):
        session = Session(f"q-{n}", principal=principal)
        await backend.sessions.save(session.to_state())
    alice_key = Session("x", principal=alice).quota
    assert await backend.sessions.count_of(alice_key) == 2
    await backend.sessions.delete("q-0")
    assert await backend.sessions.count_of(alice_key) == 1
    assert await backend.sessions.count_of("p:nobody") == 0
