"""J1: a connect hook that never finishes, or raises CancelledError, is a refusal within its deadline.

Over HTTP (both eras, real loopback HTTP in this process) each request is refused within
``server.connect_timeout`` with a clear error and no session id, ``mcphost_disconnect`` and
``mcphost_terminate`` fire once with ``"refused"``, and no session is kept. Over stdio (a real
``mcphost serve --stdio``) the initialize is refused the same way, and the process ends within 5 s
of EOF or SIGTERM whatever the hook does, even one that ignores cancellation.
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

import httpx
import pytest

import mcphost
from mcphost.deadline import abandoned, settle_abandoned
from mcphost.protocol.errors import McpError
from mcphost.testing import MemoryClient, app_client, make_host
from tests.support import hanging
from tests.support.fixtures.distributions import make_distribution
from tests.support.http_support import ACCEPT_BOTH, INITIALIZE, MODERN_META, REPO_ROOT, HttpServer
from tests.support.matrix import modern_headers
from tests.support.refusing import Trace
from tests.support.stdio_support import RawServer, server_env

#: The connect deadline these tests set (seconds): short, so they run quickly; long enough for a busy CI.
DEADLINE = 1.0


def assert_each_refused_once(lines: list[tuple[str, str, str]], sessions: int, transport: str) -> None:
    """``sessions`` sessions, each with connect, disconnect("refused"), terminate("refused") once."""
    by_session: dict[str, list[tuple[str, str]]] = {}
    for hook, session, detail in lines:
        by_session.setdefault(session, []).append((hook, detail))
    assert len(by_session) == sessions, lines
    for events in by_session.values():
        assert events == [("connect", transport), ("disconnect", "refused"), ("terminate", "refused")], lines


@pytest.fixture
async def stubborn_released() -> AsyncIterator[None]:
    """Stubborn hooks this test abandons end when it does (they would outlive its event loop)."""
    hanging.rearm()
    yield
    hanging.release()
    assert await settle_abandoned(10) == []


@pytest.mark.parametrize("mode", ["sleep", "cancel", "stubborn"])
@pytest.mark.parametrize("era", ["session", "modern"])
async def test_a_hanging_or_cancelling_connect_hook_refuses_over_http(
        mode: str, era: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stubborn_released: None,
        caplog: pytest.LogCaptureFixture) -> None:
    """``stubborn``: the hook swallows its cancellation and sleeps on; it is abandoned, not awaited."""
    trace = Trace(tmp_path / "trace.txt")
    monkeypatch.setenv(hanging.TRACE_ENV, str(trace.path))
    monkeypatch.setenv(hanging.MODE_ENV, mode)
    host = make_host(("hanger", hanging), config={"server": {"connect_timeout": DEADLINE, "log_level": "warning"}})
    async with app_client(host, timeout=30) as client:
        async def one(i: int) -> httpx.Response:
            if era == "modern":
                params = {"_meta": MODERN_META}
                return await client.post("/mcp", headers=modern_headers("tools/list", params),
                                         content=json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/list",
                                                             "params": params}))
            return await client.post("/mcp", headers={"content-type": "application/json", "accept": ACCEPT_BOTH},
                                     content=json.dumps({"jsonrpc": "2.0", "id": i, "method": "initialize",
                                                         "params": INITIALIZE}))

        started = time.monotonic()
        responses = await asyncio.gather(*(one(i) for i in range(5)))
        took = time.monotonic() - started
        print(f"\n{era} era, {mode} connect hook: 5 initializes refused in {took:.2f} s "
              f"(connect_timeout {DEADLINE:g} s), statuses {sorted({r.status_code for r in responses})}")
        for response in responses:
            assert "mcp-session-id" not in response.headers
            error = response.json()["error"]
            if mode != "cancel":
                assert response.status_code == 503, response.text
                assert "server.connect_timeout" in error["message"]
                assert int(response.headers["retry-after"]) >= 1
            else:
                assert response.status_code == 500, response.text
                assert "cancelled" in error["message"]
        # Refused at the deadline (not at once: the hook really ran), long before any idle timeout.
        assert took < DEADLINE + 10
        if mode != "cancel":
            assert took >= DEADLINE * 0.8  # cancelled a tenth before its deadline
        assert_each_refused_once(trace.lines(), 5, "http")
        if mode == "stubborn":  # still running, abandoned, and named in the log
            assert abandoned() == ["hanger: mcphost_connect"]
            for _ in range(100):
                if "hanger: mcphost_connect ignored its cancellation" in caplog.text:
                    break
                await asyncio.sleep(0.1)
            assert "hanger: mcphost_connect ignored its cancellation" in caplog.text
        assert host.manager.sessions == {} and not host.manager.held_by
        print(f"hooks per session: {trace.lines()[:3]}...; live sessions after: {len(host.manager.sessions)}")
        assert host.manager.budgets.total("requests") == 0
        assert host.lifecycle.running.names() == []
        # The host still serves: a health check answers.
        assert (await client.get("/healthz")).status_code == 200


@pytest.mark.parametrize("mode", ["sleep", "cancel", "stubborn"])
async def test_an_authenticate_hook_that_hangs_or_cancels_is_refused_in_time(mode: str) -> None:
    """An identity provider that never answers: mcphost_authenticate is held to server.connect_timeout
    too, and the request is refused with 503 (no challenge, no session) while the host serves on."""
    released = asyncio.Event()

    class StuckAuth:
        @mcphost.hookimpl
        async def mcphost_authenticate(self, request: object) -> mcphost.Principal | None:
            if mode == "cancel":
                raise asyncio.CancelledError
            while not released.is_set():
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    if mode != "stubborn":
                        raise
            return None

    host = make_host(("stuck", StuckAuth()), config={"server": {"connect_timeout": DEADLINE,
                                                                 "log_level": "warning"}})
    async with app_client(host, timeout=30) as client:
        started = time.monotonic()
        response = await client.post("/mcp", headers={"content-type": "application/json", "accept": ACCEPT_BOTH},
                                     content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                         "params": INITIALIZE}))
        took = time.monotonic() - started
        assert response.status_code == 503, response.text
        assert "server.connect_timeout" in response.json()["error"]["message"]
        assert "mcp-session-id" not in response.headers and "www-authenticate" not in response.headers
        assert int(response.headers["retry-after"]) >= 1
        assert took < DEADLINE + 10
        if mode != "cancel":
            assert took >= DEADLINE * 0.8  # cancelled a tenth before its deadline
        assert host.manager.sessions == {}
        assert (await client.get("/healthz")).status_code == 200
        assert abandoned() == (["stuck: mcphost_authenticate"] if mode == "stubborn" else [])
        released.set()


@pytest.mark.parametrize("mode", ["sleep", "stubborn"])
async def test_a_shutdown_hook_that_hangs_is_abandoned_at_hook_timeout(mode: str,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    ended: list[str] = []
    released = asyncio.Event()

    class StuckShutdown:
        @mcphost.hookimpl
        async def mcphost_shutdown(self, host: object) -> None:
            while not released.is_set():
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    if mode != "stubborn":
                        raise

    class After:
        @mcphost.hookimpl
        def mcphost_shutdown(self, host: object) -> None:
            ended.append("after")

    host = make_host(("stuck", StuckShutdown()), ("after", After()),
                     config={"server": {"hook_timeout": DEADLINE}})
    await host.start()
    started = time.monotonic()
    await host.stop()
    assert DEADLINE * 0.8 <= time.monotonic() - started < DEADLINE + 10
    assert ended == ["after"]  # the next plugin's shutdown still ran
    assert "stuck: mcphost_shutdown ran past its deadline" in caplog.text
    assert abandoned() == (["stuck: mcphost_shutdown"] if mode == "stubborn" else [])
    released.set()


def stdio_env(tmp_path: Path, mode: str) -> dict[str, str]:
    site = tmp_path / "hanger-site"
    make_distribution(site, "mcphost-hanger", "0.0.1", {"hanger": "tests.support.hanging"}, {})
    paths = [str(site), str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return server_env(tmp_path, extra={
        "PYTHONPATH": os.pathsep.join(paths), "MCPHOST_PLUGINS": "demo,hanger",
        "MCPHOST_CONNECT_TIMEOUT": str(DEADLINE), hanging.TRACE_ENV: str(tmp_path / "trace.txt"),
        hanging.MODE_ENV: mode})


def wait_exit(server: RawServer, since: float, limit: float = 5.0) -> int:
    try:
        code = server.proc.wait(timeout=limit + 5)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running long after the end; stderr:\n{server.stderr[-3000:]}") from None
    assert time.monotonic() - since < limit, server.stderr[-3000:]
    return code


@pytest.mark.parametrize("mode", ["sleep", "cancel", "stubborn"])
def test_stdio_refuses_a_hanging_connect_hook_and_ends_on_eof(mode: str, tmp_path: Path) -> None:
    trace = Trace(tmp_path / "trace.txt")
    server = RawServer(stdio_env(tmp_path, mode))
    try:
        started = time.monotonic()
        reply = server.request("initialize", INITIALIZE, request_id=1, timeout=DEADLINE + 20)
        refused_in = time.monotonic() - started
        assert refused_in < DEADLINE + 15
        assert "error" in reply, reply
        assert ("server.connect_timeout" if mode != "cancel" else "cancelled") in reply["error"]["message"]
        assert_each_refused_once(trace.wait(3), 1, "stdio")
        assert server.proc.poll() is None  # refused, still here until EOF
        server.proc.stdin.close()  # type: ignore[union-attr]
        eof = time.monotonic()
        code = wait_exit(server, eof)
        print(f"\nstdio, {mode} connect hook: refused in {refused_in:.2f} s (connect_timeout {DEADLINE:g} s); "
              f"exited {time.monotonic() - eof:.2f} s after EOF, status {code}")
        assert code == 0, server.stderr[-3000:]  # ended as asked, not by the watchdog
    finally:
        server.kill()
    assert_each_refused_once(trace.lines(), 1, "stdio")  # EOF fires nothing more


@pytest.mark.parametrize("end", ["eof", "sigterm"])
def test_stdio_ends_within_5_s_while_a_stubborn_connect_hook_still_runs(end: str, tmp_path: Path) -> None:
    """The hook ignores cancellation and the client leaves before the deadline: the process ends anyway."""
    trace = Trace(tmp_path / "trace.txt")
    env = stdio_env(tmp_path, "stubborn")
    env["MCPHOST_CONNECT_TIMEOUT"] = "30"
    server = RawServer(env)
    try:
        server.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE})
        assert trace.wait(1, timeout=30)[0][0] == "connect"  # the hook is running
        since = time.monotonic()
        if end == "eof":
            server.proc.stdin.close()  # type: ignore[union-attr]
        else:
            server.proc.send_signal(signal.SIGTERM)
        code = wait_exit(server, since)
        print(f"\nstdio, stubborn connect hook still running: exited {time.monotonic() - since:.2f} s after {end}, "
              f"status {code}")
        assert "hanger: mcphost_connect" in server.stderr  # the abandoned hook is named
    finally:
        server.kill()


def test_a_real_http_server_refuses_a_stubborn_connect_hook_in_time_and_still_ends_on_sigterm(tmp_path: Path) -> None:
    """``mcphost serve`` over loopback HTTP: a connect hook that swallows its cancellation is
    abandoned at its deadline (the initialize refused, hooks once, the plugin named), and SIGTERM
    still ends the process promptly (``asyncio.run`` would otherwise wait for the hook for ever)."""
    env = stdio_env(tmp_path, "stubborn")
    env = {k: v for k, v in env.items() if not k.startswith("MCPHOST_")} | {
        hanging.TRACE_ENV: env[hanging.TRACE_ENV], hanging.MODE_ENV: "stubborn"}
    trace = Trace(Path(env[hanging.TRACE_ENV]))
    server = HttpServer(tmp_path, plugins="demo,hanger", env=env,
                        config=f"[server]\nconnect_timeout = {DEADLINE}\ngraceful_timeout = 3\n")
    try:
        with httpx.Client(timeout=60) as client:
            started = time.monotonic()
            answer = client.post(server.url, headers=server.headers(),
                                 content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                     "params": INITIALIZE}))
            took = time.monotonic() - started
        assert answer.status_code == 503 and "mcp-session-id" not in answer.headers, answer.text
        assert took < DEADLINE + 15
        assert_each_refused_once(trace.wait(3), 1, "http")
        since = time.monotonic()
        code = server.stop(timeout=30)
        ended = time.monotonic() - since
        print(f"\nmcphost serve (HTTP), stubborn connect hook: refused in {took:.2f} s; "
              f"exited {ended:.2f} s after SIGTERM, status {code}")
        assert code == 0 and ended < 15, server.log()[-3000:]
        assert "hanger: mcphost_connect" in server.log()  # the abandoned hook is named
    finally:
        server.stop()


def test_connect_timeout_is_positive_and_at_most_30_seconds() -> None:
    from mcphost.config import ConfigErrors, config_from_dict

    assert config_from_dict({"server": {"connect_timeout": 30}}, env={}).server.connect_timeout == 30
    for wrong in (0, 31):
        with pytest.raises(ConfigErrors, match=r"server\.connect_timeout"):
            config_from_dict({"server": {"connect_timeout": wrong}}, env={})


class Stuck:
    """A resource, a prompt and a completion whose handlers never finish."""

    @staticmethod
    async def _forever(value: str = "", context: object = None) -> list[str]:
        await asyncio.sleep(3600)
        return []

    @mcphost.hookimpl
    def mcphost_resources(self, host: object) -> list[object]:
        @mcphost.resource("stuck://forever", name="forever")
        async def forever() -> str:
            await asyncio.sleep(3600)
            return "never"
        return [forever]

    @mcphost.hookimpl
    def mcphost_prompts(self, host: object) -> list[object]:
        @mcphost.prompt(completions={"topic": Stuck._forever})
        async def ponder(topic: str) -> str:
            await asyncio.sleep(3600)
            return topic
        return [ponder]


async def test_resource_prompt_and_completion_handlers_that_never_finish_get_minus_32001() -> None:
    """Handlers with no deadline of their own run at most server.max_handler_seconds."""
    host = make_host(("stuck", Stuck()), config={"server": {"max_handler_seconds": DEADLINE}})
    async with MemoryClient(host) as client:
        calls = [client.read_resource("stuck://forever"), client.get_prompt("ponder", {"topic": "x"}),
                 client.complete({"type": "ref/prompt", "name": "ponder"}, "topic", "x")]
        for call in calls:
            started = time.monotonic()
            with pytest.raises(McpError) as raised:
                await call
            assert raised.value.code == -32001 and "server.max_handler_seconds" in raised.value.message
            assert time.monotonic() - started < DEADLINE + 10
        assert await client.request("ping") == {}  # the session still serves
