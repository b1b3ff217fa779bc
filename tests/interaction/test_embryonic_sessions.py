"""J3: initialize-and-leave. Sessions that never send a second request expire after
``server.embryonic_timeout``, so a flood of them from one address locks it out only that long,
and its 429s carry a ``Retry-After`` no shorter than the real wait: the address opens a real
session as soon as it has waited what it was told (the real ASGI app in process, its reaper
running: :func:`mcphost.testing.app_client`; no socket is needed to count sessions)."""

from __future__ import annotations

import asyncio
import collections
import json
import time

from mcphost.testing import app_client
from tests.support.http_support import ACCEPT_BOTH, INITIALIZE

#: Seconds an embryonic session lives here, and the flood: 500 initialize-and-leave requests
#: (in process the flood takes about a second; sessions that expire during a slower one are
#: replaced by more requests below, as an attacker's would be).
EMBRYONIC = 6
FLOOD = 500

HEADERS = {"content-type": "application/json", "accept": ACCEPT_BOTH}
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE})


async def test_an_initialize_flood_locks_its_address_out_only_for_the_embryonic_timeout() -> None:
    config = {"server": {"embryonic_timeout": EMBRYONIC, "max_sessions_per_principal": FLOOD, "log_level": "warning"},
              "plugins": {"allow": ["demo"]}}
    url = "/mcp"
    async with app_client(config, timeout=30) as client:  # every request from one address
        # One ordinary session first (it sends its second request): the flood's expiry spares it.
        real = (await client.post(url, headers=HEADERS, content=INIT)).headers["mcp-session-id"]
        initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert (await client.post(url, headers={**HEADERS, "mcp-session-id": real},
                                  content=initialized)).status_code == 202

        statuses = [r.status_code for r in await asyncio.gather(
            *(client.post(url, headers=HEADERS, content=INIT) for _ in range(FLOOD)))]
        assert set(statuses) <= {200, 429}, statuses
        # Until the address is at its cap (the flood's first sessions may have expired already
        # on a slow machine: then more initialize-and-leave requests follow, as an attacker's would).
        refused = None
        for _ in range(FLOOD):
            answer = await client.post(url, headers=HEADERS, content=INIT)
            if answer.status_code == 429:
                refused = answer
                break
            assert answer.status_code == 200, answer.text
        assert refused is not None, "the address never reached its cap"
        told_at = time.monotonic()
        retry_after = int(refused.headers["retry-after"])
        error = refused.json()["error"]["message"]
        assert "max_sessions_per_principal" in error and "expire" in error, error
        # Locked out at most for the embryonic timeout, not for the 30-minute idle timeout.
        assert 1 <= retry_after <= EMBRYONIC, retry_after

        # Waiting what it was told is enough: the address opens a real session then.
        await asyncio.sleep(max(0.0, told_at + retry_after - time.monotonic()))
        again = await client.post(url, headers=HEADERS, content=INIT)
        assert again.status_code == 200, again.text
        assert time.monotonic() - told_at < EMBRYONIC + 5
        print(f"\n{FLOOD} initialize-and-leave: statuses {dict(collections.Counter(statuses))}; the 429 said "
              f"Retry-After: {retry_after} (embryonic_timeout {EMBRYONIC} s); a real session opened "
              f"{time.monotonic() - told_at:.2f} s after it")
        # The ordinary session lived through it all.
        listed = await client.post(url, headers={**HEADERS, "mcp-session-id": real},
                                   content=json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        assert listed.status_code == 200 and "result" in listed.text, listed.text
