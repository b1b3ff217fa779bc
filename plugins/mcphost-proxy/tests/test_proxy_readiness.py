"""``/readyz`` follows the upstreams, over real HTTP: a ``required`` upstream that is not running makes
the process not ready (503, so a balancer stops sending traffic); any other makes it ready but
``degraded``, named in the body. Real upstreams: one that dies and is kept down, one that never starts.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from proxy_support import SDK_SERVER, front, sdk_upstream


def _keeper(flag: Path, **extra: Any) -> dict[str, Any]:
    """The SDK upstream behind a shell that exits at once (a failed start) while ``flag`` exists."""
    script = 'test -e "$READYZ_DOWN" && exit 1; exec "$0" "$1"'
    return {"command": "/bin/sh", "args": ["-c", script, sys.executable, str(SDK_SERVER)],
            "env": {"READYZ_DOWN": str(flag)}, **extra}


async def _until(http: httpx.AsyncClient, url: str, wanted: Any, timeout: float = 60.0) -> httpx.Response:
    """Probe ``url`` until ``wanted(response)``; generous: restarts are slow on a busy machine."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        answer = await http.get(url)
        if wanted(answer):
            return answer
        assert asyncio.get_running_loop().time() < deadline, f"still {answer.status_code} {answer.text}"
        await asyncio.sleep(0.1)


async def test_a_required_upstream_that_dies_makes_readyz_503_until_it_is_back(side, tmp_path):
    flag = tmp_path / "down"
    servers = {"vital": _keeper(flag, required=True), "extra": sdk_upstream()}
    async with front(servers, proxy={"restart_backoff_max": 0.5}) as live, side.client(live.url) as client, \
            httpx.AsyncClient(timeout=30) as http:
        ready = await http.get(live.base + "/readyz")
        assert (ready.status_code, ready.json()) == (200, {"status": "ready", "backend": "memory"})
        pid = int("".join(block.text for block in (await client.call_tool("vital_pid", {})).content))
        flag.touch()  # each restart fails from now on
        os.kill(pid, signal.SIGKILL)  # the upstream process this test's host started
        down = await _until(http, live.base + "/readyz", lambda r: r.status_code == 503)
        body = down.json()
        assert body["status"] == "unavailable" and body["reason"] == "required dependency down"
        assert [(d["plugin"], d["name"], d["required"]) for d in body["down"]] == [("proxy", "vital", True)]
        assert body["down"][0]["state"] in ("restarting", "starting")
        flag.unlink()
        back = await _until(http, live.base + "/readyz", lambda r: r.status_code == 200)
        assert back.json() == {"status": "ready", "backend": "memory"}


@pytest.mark.parametrize(("default", "table", "status"), [
    (None, {}, 200),  # not required: the default
    (None, {"required": True}, 503),
    (True, {}, 503),  # [plugins.proxy] required = true is every server's default
    (True, {"required": False}, 200),
])
async def test_an_upstream_that_never_starts_is_degraded_or_not_ready(default, table, status):
    proxy: dict[str, Any] = {"startup_timeout": 2}
    if default is not None:
        proxy["required"] = default
    servers = {"gone": {"command": "/nonexistent/mcp-server", **table}, "sdk": sdk_upstream(required=False)}
    async with front(servers, proxy=proxy) as live, httpx.AsyncClient(timeout=30) as http:
        assert await live.plugin.upstreams["sdk"].wait_ready(60)
        answer = await http.get(live.base + "/readyz")
        assert answer.status_code == status, answer.text
        body = answer.json()
        assert body["status"] == ("degraded" if status == 200 else "unavailable")
        assert [(d["name"], d["required"]) for d in body["down"]] == [("gone", status == 503)]
        assert "nonexistent" not in answer.text  # the probe needs no auth: names and states only
        report = {u["name"]: u for u in _status(live.host)["upstreams"]}
        assert report["gone"]["required"] is (status == 503)


def _status(host: Any) -> dict[str, Any]:
    from mcphost import introspect

    return introspect.status_reports(host)["proxy"]
