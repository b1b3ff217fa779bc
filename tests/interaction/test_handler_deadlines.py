"""Tool and resource handlers that swallow their cancellation do not hold their request (issue #35).

A handler past ``server.max_tool_seconds`` / ``server.max_handler_seconds`` is cancelled; one that
catches the CancelledError and sleeps on is left behind a short grace later (abandoned, named in the
log) and the request gets its timeout answer: over HTTP in both eras, and over stdio, where the
process still ends within 5 s of EOF or SIGTERM while such a tool runs. A client's cancel of such a
call is not held either.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mcphost.deadline import abandoned, settle_abandoned
from mcphost.protocol.errors import McpError
from mcphost.testing import MemoryClient, app_client, make_host
from tests.support import stubborn_tools
from tests.support.fixtures.distributions import make_distribution
from tests.support.http_support import REPO_ROOT, modern, open_session, reply, session_call
from tests.support.stdio_support import RawServer, server_env

#: The handler deadline these tests set (seconds).
DEADLINE = 1.0
TOOL = "tool 'hang' (plugin stubborn)"


@pytest.fixture
async def released() -> AsyncIterator[None]:
    """The handlers a test abandons end when it does (they would outlive its event loop)."""
    stubborn_tools.rearm()
    yield
    stubborn_tools.release()
    assert await settle_abandoned(10) == []


def _host(**server: object) -> object:
    return make_host(("stubborn", stubborn_tools), config={"server": {
        "max_tool_seconds": DEADLINE, "max_handler_seconds": DEADLINE, "log_level": "warning", **server}})


async def _named_in_log(caplog: pytest.LogCaptureFixture, name: str) -> None:
    for _ in range(100):
        if f"{name} ignored its cancellation" in caplog.text:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(caplog.text[-3000:])


@pytest.mark.parametrize("era", ["session", "modern"])
async def test_a_tool_and_a_resource_that_swallow_cancellation_get_their_timeout_over_http(
        era: str, released: None, caplog: pytest.LogCaptureFixture) -> None:
    host = _host()
    async with app_client(host, timeout=60) as client:
        started = time.monotonic()
        if era == "session":
            session_id = await open_session(client, "/mcp")
            tool = await session_call(client, "/mcp", session_id, "tools/call", {"name": "hang", "arguments": {}})
            tool_took = time.monotonic() - started
            assert tool["error"]["code"] == -32001 and "timed out" in tool["error"]["message"], tool
        else:
            message, headers = modern("tools/call", {"name": "hang", "arguments": {}})
            tool = reply(await client.post("/mcp", headers=headers, content=json.dumps(message)))
            tool_took = time.monotonic() - started
            assert tool["result"]["isError"] is True, tool
            assert "timed out" in tool["result"]["content"][0]["text"]
        assert DEADLINE * 0.9 <= tool_took < DEADLINE + 10
        assert abandoned() == [TOOL]
        await _named_in_log(caplog, TOOL)

        started = time.monotonic()
        if era == "session":
            read = await session_call(client, "/mcp", session_id, "resources/read", {"uri": "stubborn://forever"},
                                      request_id=3)
        else:
            message, headers = modern("resources/read", {"uri": "stubborn://forever"}, request_id=2)
            read = reply(await client.post("/mcp", headers=headers, content=json.dumps(message)))
        read_took = time.monotonic() - started
        assert read["error"]["code"] == -32001 and "server.max_handler_seconds" in read["error"]["message"], read
        assert DEADLINE * 0.9 <= read_took < DEADLINE + 10
        print(f"\n{era} era: swallowing tool answered in {tool_took:.2f} s, resource in {read_took:.2f} s "
              f"(limits {DEADLINE:g} s); abandoned {abandoned()}")
        assert len(abandoned()) == 2
        # The host serves on.
        if era == "session":
            assert (await session_call(client, "/mcp", session_id, "ping", request_id=4))["result"] == {}
        assert (await client.get("/healthz")).status_code == 200


async def test_a_client_cancel_of_a_swallowing_tool_does_not_hold_the_request(released: None) -> None:
    """No host deadline (0): the client's cancel is what ends the call; the request's task ends
    a grace after it, instead of waiting on the tool for ever."""
    host = _host(max_tool_seconds=0)
    async with MemoryClient(host) as client:
        call = asyncio.ensure_future(client.request("tools/call", {"name": "hang", "arguments": {}}))
        for _ in range(200):
            if client.driver.session.inflight:  # type: ignore[attr-defined]
                break
            await asyncio.sleep(0.02)
        [task] = client.driver.session.inflight.values()  # type: ignore[attr-defined]
        since = time.monotonic()
        task.cancel()  # as notifications/cancelled does
        await asyncio.wait([task], timeout=15)
        assert task.done(), "the request still waits on its tool"
        assert time.monotonic() - since < 10
        assert abandoned() == [TOOL]
        call.cancel()
        assert await client.request("ping") == {}


async def test_a_handler_that_ends_within_the_grace_is_not_abandoned(released: None) -> None:
    """A handler that swallows one cancellation but then ends promptly gives its own answer."""
    host = _host()
    async with MemoryClient(host) as client:
        read = asyncio.ensure_future(client.read_resource("stubborn://forever"))
        await asyncio.sleep(DEADLINE + 0.02)  # past the deadline: cancelled once; released in its grace
        stubborn_tools.release()
        try:
            result = await asyncio.wait_for(read, 30)
            assert result["contents"][0]["text"] == "released"
        except McpError as exc:  # a busy machine: the grace passed before the release
            assert exc.code == -32001
        assert await settle_abandoned(10) == []


def _stdio_env(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "stubborn-site"
    make_distribution(site, "mcphost-stubborn", "0.0.1", {"stubborn": "tests.support.stubborn_tools"}, {})
    paths = [str(site), str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return server_env(tmp_path, extra={
        "PYTHONPATH": os.pathsep.join(paths), "MCPHOST_PLUGINS": "demo,stubborn",
        "MCPHOST_MAX_TOOL_SECONDS": str(DEADLINE), stubborn_tools.TRACE_ENV: str(tmp_path / "trace.txt")})


def _wait_started(path: Path) -> None:
    for _ in range(300):
        if path.exists() and "start tool" in path.read_text():
            return
        time.sleep(0.1)
    raise AssertionError("the tool never started")


def test_stdio_answers_a_swallowing_tool_at_its_deadline(tmp_path: Path) -> None:
    server = RawServer(_stdio_env(tmp_path))
    try:
        server.initialize()
        started = time.monotonic()
        answer = server.request("tools/call", {"name": "hang", "arguments": {}}, timeout=DEADLINE + 20)
        took = time.monotonic() - started
        assert answer["error"]["code"] == -32001, answer
        assert took < DEADLINE + 15
        assert server.wait_stderr(f"{TOOL} ignored its cancellation", timeout=10), server.stderr[-3000:]
        assert server.result("ping") == {}
        print(f"\nstdio: swallowing tool answered in {took:.2f} s (max_tool_seconds {DEADLINE:g} s)")
    finally:
        server.kill()


@pytest.mark.parametrize("end", ["eof", "sigterm"])
def test_stdio_ends_within_5_s_while_a_swallowing_tool_runs(end: str, tmp_path: Path) -> None:
    env = _stdio_env(tmp_path)
    env["MCPHOST_MAX_TOOL_SECONDS"] = "0"  # no deadline: only the end of the process stops it
    server = RawServer(env)
    try:
        server.initialize()
        server.send({"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "hang", "arguments": {}}})
        _wait_started(tmp_path / "trace.txt")
        since = time.monotonic()
        if end == "eof":
            server.proc.stdin.close()  # type: ignore[union-attr]
        else:
            server.proc.send_signal(signal.SIGTERM)
        try:
            code = server.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running after {end}; stderr:\n{server.stderr[-3000:]}") from None
        took = time.monotonic() - since
        print(f"\nstdio, swallowing tool running: exited {took:.2f} s after {end}, status {code}")
        assert took < 5, server.stderr[-3000:]
        assert code == 0, server.stderr[-3000:]  # ended as asked, not by the watchdog
        assert "hang" in server.stderr  # the abandoned tool is named
    finally:
        server.kill()


def test_stdio_a_swallowing_tool_left_behind_sends_no_more_progress(tmp_path: Path) -> None:
    """Its progress stops with its answer: nothing for a request the client has its answer to."""
    server = RawServer(_stdio_env(tmp_path))
    try:
        server.initialize()
        answer = server.request("tools/call", {"name": "hang_reporting", "arguments": {},
                                               "_meta": {"progressToken": "p"}}, timeout=DEADLINE + 20)
        assert answer["error"]["code"] == -32001, answer
        sent = len(server.notifications)
        assert sent >= 1  # it reported while it ran
        server.expect_silence(1.0)  # it still runs (abandoned) and reports, but nothing goes out
        assert len(server.notifications) == sent, server.notifications[sent:]
        assert server.result("ping") == {}
        print(f"\nstdio: {sent} progress notifications before the answer, none after")
    finally:
        server.kill()
