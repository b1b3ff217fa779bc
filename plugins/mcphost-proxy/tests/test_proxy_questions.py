"""Questions (elicitation) from a stdio upstream reach the call that caused them, and a question whose
client is gone is withdrawn from the upstream at once.

Real components throughout: the official Python SDK server over stdio as the upstream, the official
SDK client as the downstream client in both eras (``legacy``: session era; ``auto``: 2026-07-28),
the host served over loopback HTTP. ``OTEL_PROPAGATORS=none`` makes the SDK server drop the trace
context (as servers written with other SDKs do), so the routing that does not rely on it is tested too.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import time

import pytest
from mcp import Client
from mcphost_proxy.settings import load_settings
from proxy_support import EVERYTHING, HERE, Side, front, sdk_upstream

from mcphost import ConfigError
from tests.support.js.run import ensure_ts_client, node_executable

#: An SDK server that does not echo the caller's trace context in its questions.
NO_ECHO = {"env": {"OTEL_PROPAGATORS": "none"}}
ASKING_SERVER = HERE / "upstreams" / "asking_server.py"


def _text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


class Silent(Side):
    """A client that is asked and never answers."""

    async def elicit(self, context, params):
        self.elicitations.append(params)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def _asked(side: Side, count: int = 1) -> None:
    for _ in range(400):
        if len(side.elicitations) >= count:
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"{count} question(s) expected, {len(side.elicitations)} asked")


async def _concurrently(live, ada: Side, bob: Side, rounds: int = 3) -> None:
    """A session-era client (Ada) and a 2026-07-28 client (Bob) call the eliciting tool at once."""
    async with ada.client(live.url, "legacy") as old, bob.client(live.url, "auto") as new:
        for _ in range(rounds):
            first, second = await asyncio.gather(old.call_tool("sdk_ask_name", {}),
                                                 new.call_tool("sdk_ask_name", {}))
            assert (_text(first), _text(second)) == ("Hello, Ada!", "Hello, Bob!")
    assert len(ada.elicitations) == rounds and len(bob.elicitations) == rounds


async def test_concurrent_questions_over_one_shared_stdio_process_reach_their_own_calls():
    """One shared upstream process; the SDK server echoes each call's trace context in its question. At
    the default ``questions = "auto"`` the first concurrent round may lease one pooled process (the echo
    is not known yet); once a question came back with its trace id, every call stays on the shared one."""
    ada, bob = Side("Ada"), Side("Bob")
    async with front({"sdk": sdk_upstream()}) as live:
        await _concurrently(live, ada, bob)
        assert live.plugin.bound == {}
        shared = live.plugin.upstreams["sdk"]
        assert shared.pool is not None and len(shared.pool.instances) <= 1
        assert shared.echoes or shared.pool.echoes


async def test_many_calls_in_flight_on_one_shared_stdio_process_each_get_their_own_question():
    """Four clients (two of each era), three calls each, all twelve in flight at once on one process
    (a first call showed that the upstream echoes the trace id, so ``questions = "auto"`` leases none)."""
    sides = [Side(name) for name in ("Ada", "Bob", "Cy", "Di")]
    async with front({"sdk": sdk_upstream()}) as live, contextlib.AsyncExitStack() as stack:
        async with Side("Eve").client(live.url) as first:
            assert _text(await first.call_tool("sdk_ask_name", {})) == "Hello, Eve!"
        shared = live.plugin.upstreams["sdk"]
        assert shared.echoes and shared.pool is not None and shared.pool.instances == []
        clients = [await stack.enter_async_context(side.client(live.url, "legacy" if i % 2 else "auto"))
                   for i, side in enumerate(sides)]
        calls = [client.call_tool("sdk_ask_name", {}) for client in clients for _ in range(3)]
        results = await asyncio.gather(*calls)
        assert [_text(result) for result in results] == [f"Hello, {side.name}!" for side in sides for _ in range(3)]
        assert [len(side.elicitations) for side in sides] == [3, 3, 3, 3]
        assert shared.pool.instances == []


async def test_without_the_trace_context_concurrent_questions_on_a_shared_process_are_refused():
    """The same upstream without the echo, ``questions = "shared"``: the two questions cannot be told
    apart, so neither is shown to a client (never to the wrong one); each call gets an error result."""
    ada, bob = Side("Ada"), Side("Bob")
    async with front({"sdk": sdk_upstream(questions="shared", **NO_ECHO)}) as live, \
            ada.client(live.url, "legacy") as old, bob.client(live.url, "auto") as new:
        results = await asyncio.gather(old.call_tool("sdk_ask_name", {}), new.call_tool("sdk_ask_name", {}),
                                       return_exceptions=True)
        texts = [str(result) if isinstance(result, BaseException) else _text(result) for result in results]
        assert "Bob" not in texts[0] and "Ada" not in texts[1], texts
        assert any(isinstance(result, BaseException) or result.is_error for result in results), texts
        assert "several calls are in flight" in " ".join(texts), texts


async def test_questions_own_process_leases_a_process_per_asking_call():
    """``questions = "own_process"``: each call that may ask holds a pooled process of its own, so the
    one call in flight on it owns its question, with no help from the wire. A client that cannot
    answer questions is served by the shared process; idle pooled processes are stopped."""
    ada, bob = Side("Ada"), Side("Bob")
    # idle_timeout: long enough that no process is reaped between two rounds on a loaded machine (at
    # 0.5 s one was, and the count below read 1), short enough to see them stopped at the end.
    table = sdk_upstream(questions="own_process", max_instances=2, idle_timeout=5, **NO_ECHO)
    async with front({"sdk": table}) as live:
        await _concurrently(live, ada, bob)
        pool = live.plugin.upstreams["sdk"].pool
        # Reused across the three rounds: no process beyond the second was started. (How many are up
        # is not asserted: on a loaded machine one call may end before the other takes a process.)
        assert pool is not None and pool.instances
        assert {instance.label for instance in pool.instances} <= {"sdk#1", "sdk#2"}
        async with Client(live.url, mode="legacy") as mute, ada.client(live.url, "legacy") as asking:
            shared_pid = _text(await mute.call_tool("sdk_pid", {}))
            leased_pid = _text(await asking.call_tool("sdk_pid", {}))
        assert shared_pid != leased_pid
        deadline = time.monotonic() + 60
        while pool.instances and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert pool.instances == []


@pytest.mark.parametrize(("table", "message"), [
    ({"command": "a", "questions": "always"}, "Input should be 'auto', 'shared' or 'own_process'"),
    ({"url": "http://b", "questions": "own_process"}, "'own_process' is for stdio servers"),
    ({"command": "a", "per_session": True, "questions": "own_process"}, "without per_session"),
    ({"command": "a", "max_queued": -1}, "[plugins.proxy.servers.x.max_queued] Input should be greater than or equal"),
])
def test_questions_settings_are_checked(table, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_settings({"servers": {"x": table}})


async def test_own_process_queues_when_every_instance_is_leased():
    ada, bob = Side("Ada"), Side("Bob")
    async with front({"sdk": sdk_upstream(questions="own_process", max_instances=1, **NO_ECHO)}) as live:
        await _concurrently(live, ada, bob, rounds=2)
        assert len(live.plugin.upstreams["sdk"].pool.instances) == 1


async def test_own_process_refuses_a_call_past_max_queued():
    silent, ada = Silent(), Side("Ada")
    table = sdk_upstream(questions="own_process", max_instances=1, max_queued=0, **NO_ECHO)
    async with front({"sdk": table}) as live, silent.client(live.url, "legacy") as holder, \
            ada.client(live.url, "legacy") as other:
        held = asyncio.ensure_future(holder.call_tool("sdk_ask_name", {}))
        await _asked(silent)
        refused = await asyncio.wait_for(other.call_tool("sdk_ask_name", {}), 10)
        assert refused.is_error and "max_queued (0)" in _text(refused), _text(refused)
        assert ada.elicitations == []
        held.cancel()
        await asyncio.gather(held, return_exceptions=True)


async def _cancel_the_call(live, silent: Silent) -> None:
    """A session-era client cancels its call (the SDK client sends notifications/cancelled)."""
    async with silent.client(live.url, "legacy") as client:
        call = asyncio.ensure_future(client.call_tool("ask_ask", {}))
        await _asked(silent)
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)


async def _end_the_session(live, silent: Silent) -> None:
    """A session-era client's session ends while its question is out (as DELETE or expiry ends it)."""
    async with silent.client(live.url, "legacy") as client:
        call = asyncio.ensure_future(client.call_tool("ask_ask", {}))
        await _asked(silent)
        manager = live.host.kernel.sessions
        for session in list(manager.sessions.values()):
            await manager.end(session, "deleted")
        await asyncio.gather(call, return_exceptions=True)


async def _never_come_back(live, silent: Silent) -> None:
    """A 2026-07-28 client gets its InputRequiredResult and never retries (it gives up locally:
    nothing reaches the host); the parked call's window is the host's state_ttl (1 s here)."""
    async with silent.client(live.url, "auto") as client:
        call = asyncio.ensure_future(client.call_tool("ask_ask", {}))
        await _asked(silent)
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)


@pytest.mark.parametrize("leave", [_cancel_the_call, _end_the_session, _never_come_back],
                         ids=["call-cancelled", "session-ended", "2026-window-passed"])
async def test_a_question_whose_client_is_gone_is_answered_upstream_at_once(tmp_path, leave):
    """The upstream ignores notifications/cancelled, so only the proxy can free its pending question:
    it answers ``cancel`` as soon as the call is over, long before the upstream's timeout (30 s), and
    another principal's question on the same shared process is then answered."""
    answers = tmp_path / "answers"
    answers.touch()
    table = {"command": sys.executable, "args": [str(ASKING_SERVER)], "env": {"ASK_ANSWERS": str(answers)},
             "timeout": 30}
    silent, bob = Silent(), Side("Bob")
    async with front({"ask": table}, server={"state_ttl": 1}) as live:
        started = time.monotonic()
        await leave(live, silent)
        for _ in range(400):
            if answers.read_text():
                break
            await asyncio.sleep(0.025)
        took = time.monotonic() - started
        assert answers.read_text() == "cancel null\n"
        assert took < 5, took
        assert not live.plugin.upstreams["ask"].questions.callers
        async with bob.client(live.url, "legacy") as other:
            result = await asyncio.wait_for(other.call_tool("ask_ask", {}), 10)
        assert _text(result) == 'answered accept {"name": "Bob"}'


async def test_a_late_question_of_a_call_that_is_over_never_reaches_another_call(tmp_path):
    """Call A is cancelled before its upstream asks; the upstream (which ignores the cancellation) asks
    later, while call B is the one call in flight. The question carries A's trace id, so it is refused,
    not shown to B's user; B gets only its own question."""
    answers = tmp_path / "answers"
    answers.touch()
    table = {"command": sys.executable, "args": [str(ASKING_SERVER)], "timeout": 30,
             "env": {"ASK_ANSWERS": str(answers), "ASK_LATE": "1"}}
    silent, bob = Silent(), Side("Bob")
    async with front({"ask": table}) as live:
        async with silent.client(live.url, "legacy") as client:
            call = asyncio.ensure_future(client.call_tool("ask_ask", {}))
            await asyncio.sleep(0.3)
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)
        async with bob.client(live.url, "legacy") as other:
            result = await asyncio.wait_for(other.call_tool("ask_ask", {}), 10)
        assert _text(result) == 'answered accept {"name": "Bob"}'
        assert len(bob.elicitations) == 1 and silent.elicitations == []
        assert answers.read_text().splitlines() == ["error null", 'accept {"name": "Bob"}']


async def test_own_process_does_not_lend_a_cut_short_calls_process_to_another_call():
    """A call cancelled on its own process may still run (and ask) upstream: that process is stopped,
    not handed to the next call."""
    silent = Silent()
    async with front({"sdk": sdk_upstream(questions="own_process", **NO_ECHO)}) as live:
        pool = live.plugin.upstreams["sdk"].pool
        async with silent.client(live.url, "legacy") as client:
            call = asyncio.ensure_future(client.call_tool("sdk_ask_name", {}))
            await _asked(silent)
            assert len(pool.instances) == 1
            leased = pool.instances[0]
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)
        for _ in range(200):
            if leased.state == "stopped":
                break
            await asyncio.sleep(0.05)
        assert leased.state == "stopped" and pool.instances == []


async def test_server_everything_over_stdio_with_own_process():
    """The npm server-everything (TypeScript SDK) over stdio does not echo the trace context; with
    ``questions = "own_process"`` a session-era and a 2026-07-28 client asked by it at once each get
    their own question and their own answer back."""
    status = await asyncio.to_thread(ensure_ts_client)
    if not status:
        pytest.skip(status.reason)
    ada, bob = Side("Ada"), Side("Bob")
    table = {"command": node_executable(), "args": [str(EVERYTHING)], "questions": "own_process",
             "max_instances": 2, "prefix": "every_"}
    async with front({"every": table}) as live, \
            ada.client(live.url, "legacy") as old, bob.client(live.url, "auto") as new:
        for _ in range(2):
            first, second = await asyncio.gather(
                old.call_tool("every_trigger-elicitation-request", {}),
                new.call_tool("every_trigger-elicitation-request", {}))
            assert "Ada" in _text(first) and "Bob" not in _text(first), _text(first)
            assert "Bob" in _text(second) and "Ada" not in _text(second), _text(second)
        assert len(ada.elicitations) == 2 and len(bob.elicitations) == 2


async def test_without_the_trace_context_concurrent_questions_reach_their_own_calls_by_default():
    """The SDK server without the echo, at the default ``questions = "auto"``: while one asking call is
    in flight on the shared process another leases a pooled process, so each question has one call."""
    ada, bob = Side("Ada"), Side("Bob")
    async with front({"sdk": sdk_upstream(**NO_ECHO)}) as live:
        await _concurrently(live, ada, bob)
        shared = live.plugin.upstreams["sdk"]
        assert not shared.echoes and shared.pool is not None and 1 <= len(shared.pool.instances) <= 2


@pytest.mark.parametrize("rounds", [3])
async def test_server_everything_over_stdio_at_default_settings(rounds):
    """The npm server-everything over stdio (it does not echo the trace id, and asks roots/list of a
    client that never declared roots, 350 ms after each process starts), default settings: a
    session-era and a 2026-07-28 client answering elicitations at once, three rounds: every question
    reaches its own call, and the roots/list nobody can answer fails no call."""
    status = await asyncio.to_thread(ensure_ts_client)
    if not status:
        pytest.skip(status.reason)
    ada, bob = Side("Ada"), Side("Bob")
    table = {"command": node_executable(), "args": [str(EVERYTHING)], "prefix": "every_"}
    async with front({"every": table}) as live, \
            ada.client(live.url, "legacy") as old, bob.client(live.url, "auto") as new:
        for _ in range(rounds):
            first, second = await asyncio.gather(
                old.call_tool("every_trigger-elicitation-request", {}),
                new.call_tool("every_trigger-elicitation-request", {}))
            assert not first.is_error and not second.is_error, (_text(first), _text(second))
            assert "Ada" in _text(first) and "Bob" not in _text(first), _text(first)
            assert "Bob" in _text(second) and "Ada" not in _text(second), _text(second)
        assert len(ada.elicitations) == rounds and len(bob.elicitations) == rounds
