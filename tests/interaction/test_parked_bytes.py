"""J2: parked calls are budgeted in bytes, not only in count.

50 resumable 2026-07-28 calls of 3.8 MB from one address (real HTTP over loopback, the server in
this process): the calls past ``max_parked_bytes_per_principal`` are refused with -32000 saying
"bytes" and naming the setting, the count budget alone (50) would have taken them all, and the
process's resident memory grows by less than 100 MB.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

import httpx

from mcphost.testing import make_host, serve_http
from tests.interaction.test_http_modern import modern
from tests.interaction.test_isolation import reply
from tests.support.http_plugins import parking

CALLS = 50
SIZE = 3_800_000


def rss() -> int:
    """This process's resident set size, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


async def test_fifty_parked_calls_of_3_8_mb_are_refused_past_the_byte_budget() -> None:
    # The count budget alone would take every call: only the byte budget (its default) refuses.
    settings = {"log_level": "warning", "max_parked_per_principal": CALLS}
    host = make_host(("parking", parking), config={"server": settings})
    payload = "x" * SIZE
    async with serve_http(host) as server, httpx.AsyncClient(timeout=60) as client:
        gc.collect()
        before = rss()
        replies = []
        for n in range(CALLS):
            body, headers = modern("tools/call", {"name": "park", "arguments": {"payload": payload}}, request_id=n)
            response = await client.post(server.url, headers=headers, content=json.dumps(body))
            assert response.status_code in (200, 429), response.text[:300]
            replies.append(reply(response))
        gc.collect()
        grown = rss() - before
        parked = [r for r in replies if r.get("result", {}).get("resultType") == "input_required"]
        refused = [r["error"] for r in replies if "error" in r]
        limit = host.config.server.max_parked_bytes_per_principal
        assert len(parked) == limit // (SIZE + 100) and len(parked) + len(refused) == CALLS, replies[-1]
        assert all(e["code"] == -32000 and e["data"]["budget"] == "parked bytes" for e in refused), refused[0]
        assert "bytes" in refused[0]["message"] and "max_parked_bytes_per_principal" in refused[0]["message"]
        assert host.kernel is not None and host.manager.budgets.held(next(iter(
            host.manager.budgets.by_principal("parked bytes"))), "parked bytes") <= limit
        assert grown < 100 * 1024 * 1024, f"RSS grew by {grown / 2**20:.0f} MiB"
