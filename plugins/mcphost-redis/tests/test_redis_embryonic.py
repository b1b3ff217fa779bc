"""Initialize-and-leave sessions on Redis live ``server.embryonic_timeout``, not the idle timeout.

Two real ``mcphost serve`` processes on one redis-server. A caller fills its
``max_sessions_per_principal`` on one process with sessions that never send a second request; the
other process refuses it too (the store counts them), with a ``Retry-After`` the store says (when the
first of them drops out of the count), but only until the embryonic timeout: then the same caller
opens a session there. A session that did send its second request is kept (the
idle timeout), on either process.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from mcphost_redis.testing import RedisServer

from tests.support.http_support import INIT_PARAMS, HttpServer

REPO_ROOT = Path(__file__).resolve().parents[3]
EMBRYONIC = 2.0
CAP = 4


def initialize(client: httpx.Client, server: HttpServer) -> httpx.Response:
    return client.post(server.url, headers=server.headers(),
                       json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS})


def test_initialize_and_leave_sessions_expire_from_the_store_after_the_embryonic_timeout(
        tmp_path: Path, redis_server: RedisServer) -> None:
    config = (f"[server]\nmax_sessions_per_principal = {CAP}\nembryonic_timeout = {EMBRYONIC}\n\n"
              f'[plugins.redis]\nurl = "{redis_server.url}"\nprefix = "embryonic:"\n')
    servers = [HttpServer(tmp_path, plugins="demo,redis", config=config, env={"PYTHONPATH": str(REPO_ROOT)})
               for _ in range(2)]
    a, b = servers
    try:
        with httpx.Client(timeout=15) as client:
            # One ordinary session: initialize, then a second request (notifications/initialized).
            kept = initialize(client, a)
            assert kept.status_code == 200, kept.text
            kept_id = kept.headers["mcp-session-id"]
            note = client.post(a.url, headers=a.headers(kept_id),
                               json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert note.status_code == 202, note.text
            # The rest of the cap: initialize-and-leave.
            started = time.monotonic()
            for _ in range(CAP - 1):
                assert initialize(client, a).status_code == 200
            refused = initialize(client, b)  # the store counts every one of them, on the other process too
            refused_at = time.monotonic()
            assert refused.status_code == 429, refused.text
            # Its Retry-After is the store's: when the first embryonic session drops out of the count.
            retry_after = int(refused.headers["retry-after"])
            assert 1 <= retry_after <= EMBRYONIC + 1, refused.headers
            # Within the embryonic timeout (and a reaper round), the caller has room again, there.
            while time.monotonic() - started < EMBRYONIC + 5:
                opened = initialize(client, b)
                if opened.status_code == 200:
                    break
                assert opened.status_code == 429, opened.text
                time.sleep(0.25)
            waited = time.monotonic() - started
            assert opened.status_code == 200, f"still refused {waited:.1f} s later: {opened.text}"
            assert waited >= EMBRYONIC - 0.5, f"room after {waited:.1f} s, before the embryonic timeout"
            # ... and no later than its 429 said (whole seconds, rounded up; a poll's slack).
            assert time.monotonic() - refused_at <= retry_after + 0.5, (retry_after, time.monotonic() - refused_at)
            # The session that sent its second request outlived the embryonic timeout, on either process.
            for server in (b, a):
                listed = client.post(server.url, headers=server.headers(kept_id),
                                     json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
                assert listed.status_code == 200, listed.text
    finally:
        for server in servers:
            server.stop()
