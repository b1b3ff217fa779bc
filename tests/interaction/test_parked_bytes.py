"""J2: parked calls are budgeted in bytes, not only in count.

50 resumable 2026-07-28 calls of 3.8 MB from one address against a real ``mcphost serve`` (loopback
HTTP): the calls past ``max_parked_bytes_per_principal`` are refused with -32000 saying "bytes" and
naming the setting, the count budget alone (50) would have taken them all, and the server's
resident memory grows by less than 100 MB (44-48 MB measured; without the byte budget: 377 MB).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx

from mcphost.config import ServerSettings
from tests.support.fixtures.distributions import make_distribution
from tests.support.http_support import REPO_ROOT, HttpServer, modern, reply

CALLS = 50
SIZE = 3_800_000


def rss(pid: int) -> int:
    """The resident set size of process ``pid``, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


def test_fifty_parked_calls_of_3_8_mb_are_refused_past_the_byte_budget(tmp_path: Path) -> None:
    site = tmp_path / "parking-site"
    make_distribution(site, "mcphost-parking", "0.0.1", {"parking": "tests.support.http_plugins.parking"}, {})
    paths = [str(site), str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    # The count budget alone would take every call: only the byte budget (its default) refuses.
    server = HttpServer(tmp_path, plugins="parking", env={"PYTHONPATH": os.pathsep.join(paths)},
                        config=f"[server]\nmax_parked_per_principal = {CALLS}\n")
    payload = "x" * SIZE
    try:
        with httpx.Client(timeout=60) as client:
            before = rss(server.process.pid)
            replies = []
            for n in range(CALLS):
                body, headers = modern("tools/call", {"name": "park", "arguments": {"payload": payload}},
                                       request_id=n)
                response = client.post(server.url, headers=headers, content=json.dumps(body))
                assert response.status_code in (200, 429), response.text[:300]
                replies.append(reply(response))
            grown = rss(server.process.pid) - before
        parked = [r for r in replies if r.get("result", {}).get("resultType") == "input_required"]
        refused = [r["error"] for r in replies if "error" in r]
        limit = ServerSettings().max_parked_bytes_per_principal
        assert len(parked) == limit // (SIZE + 100) and len(parked) + len(refused) == CALLS, replies[-1]
        assert all(e["code"] == -32000 and e["data"]["budget"] == "parked bytes" for e in refused), refused[0]
        assert "bytes" in refused[0]["message"] and "max_parked_bytes_per_principal" in refused[0]["message"]
        print(f"\n{len(parked)} parked, {len(refused)} refused; the server's RSS grew by {grown / 2**20:.0f} MiB")
        assert grown < 100 * 1024 * 1024, f"RSS grew by {grown / 2**20:.0f} MiB"
    finally:
        assert server.stop() == 0, server.log()
