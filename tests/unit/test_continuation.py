"""Continuations: a resumable 2026-07-28 tool waits across input-required rounds instead of re-running.

In-process through the kernel (tests.support.modern_support): each round is a separate request, as a
stateless client sends them; only the sealed requestState links them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import mcphost
from mcphost.testing import make_host
from tests.support.modern_support import modern_call

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


class Counting:
    """Two tools asking the same two questions; one resumable, one re-run on each retry."""

    def __init__(self) -> None:
        self.runs = {"resumable": 0, "rerun": 0}
        self.cancelled = asyncio.Event()

    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        plugin = self

        async def body(kind: str, ctx: mcphost.Context) -> str:
            plugin.runs[kind] += 1
            try:
                first = await ctx.elicit("First name?", NAME, key="first")
                second = await ctx.elicit("Last name?", NAME, key="second")
            except asyncio.CancelledError:
                plugin.cancelled.set()
                raise
            return f"{first.content['name']} {second.content['name']}"

        @mcphost.tool(resumable=True)
        async def resumable(*, ctx: mcphost.Context) -> str:
            """Must not run twice."""
            return await body("resumable", ctx)

        @mcphost.tool
        async def rerun(*, ctx: mcphost.Context) -> str:
            """Runs again on each retry (the default)."""
            return await body("rerun", ctx)

        @mcphost.tool(resumable=True)
        async def together(*, ctx: mcphost.Context) -> str:
            """Two questions asked at once travel in one round."""
            one, two = await asyncio.gather(ctx.elicit("A?", NAME, key="a"), ctx.elicit("B?", NAME, key="b"))
            return one.content["name"] + two.content["name"]

        return [resumable, rerun, together]


def _answer(name: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": name}}


async def _rounds(host: Any, tool: str) -> list[dict[str, Any]]:
    replies = [(await modern_call(host, "tools/call", {"name": tool, "arguments": {}}))["result"]]
    answers = {"first": _answer("Ada"), "second": _answer("Lovelace")}
    while replies[-1].get("resultType") == "input_required":
        asked = replies[-1]["inputRequests"]
        replies.append((await modern_call(host, "tools/call", {
            "name": tool, "arguments": {}, "requestState": replies[-1]["requestState"],
            "inputResponses": {key: answers[key] for key in asked}}))["result"])
    return replies


async def test_a_resumable_tool_runs_once_across_rounds():
    plugin = Counting()
    host = make_host(("counting", plugin))
    await host.start()
    try:
        replies = await _rounds(host, "resumable")
        assert [list(r.get("inputRequests", {})) for r in replies] == [["first"], ["second"], []]
        assert replies[-1]["content"][0]["text"] == "Ada Lovelace"
        assert plugin.runs["resumable"] == 1
        assert not host.kernel.continuations.runs  # nothing left parked
        # The default for comparison: the handler runs again on every retry.
        replies = await _rounds(host, "rerun")
        assert replies[-1]["content"][0]["text"] == "Ada Lovelace"
        assert plugin.runs["rerun"] == 3
    finally:
        await host.stop()


async def test_questions_asked_together_travel_in_one_round():
    host = make_host(("counting", Counting()))
    await host.start()
    try:
        first = (await modern_call(host, "tools/call", {"name": "together", "arguments": {}}))["result"]
        assert sorted(first["inputRequests"]) == ["a", "b"]
        done = (await modern_call(host, "tools/call", {
            "name": "together", "arguments": {}, "requestState": first["requestState"],
            "inputResponses": {"a": _answer("x"), "b": _answer("y")}}))["result"]
        assert done["content"][0]["text"] == "xy"
    finally:
        await host.stop()


async def test_a_retry_with_other_arguments_cannot_resume_the_run():
    host = make_host(("counting", Counting()))
    await host.start()
    try:
        first = (await modern_call(host, "tools/call", {"name": "resumable", "arguments": {}}))["result"]
        other = await modern_call(host, "tools/call", {"name": "rerun", "arguments": {},
                                                      "requestState": first["requestState"],
                                                      "inputResponses": {"first": _answer("Ada")}})
        assert "error" in other  # the sealed state is bound to the tool and its arguments
    finally:
        await host.stop()


async def test_a_run_nobody_resumes_is_cancelled_when_its_state_expires():
    plugin = Counting()
    host = make_host(("counting", plugin), config={"server": {"state_ttl": 1}})
    await host.start()
    try:
        first = (await modern_call(host, "tools/call", {"name": "resumable", "arguments": {}}))["result"]
        assert first["resultType"] == "input_required"
        assert len(host.kernel.continuations.runs) == 1
        await asyncio.wait_for(plugin.cancelled.wait(), 10)
        assert not host.kernel.continuations.runs
        late = await modern_call(host, "tools/call", {"name": "resumable", "arguments": {},
                                                     "requestState": first["requestState"],
                                                     "inputResponses": {"first": _answer("Ada")}})
        assert "error" in late
    finally:
        await host.stop()


async def test_a_forged_continuation_in_input_responses_resumes_nothing():
    plugin = Counting()
    host = make_host(("counting", plugin))
    await host.start()
    try:
        first = (await modern_call(host, "tools/call", {"name": "resumable", "arguments": {}}))["result"]
        run_id = next(iter(host.kernel.continuations.runs))
        forged = await modern_call(host, "tools/call", {
            "name": "resumable", "arguments": {},
            "inputResponses": {"io.mcphost/continuation": run_id, "first": _answer("Eve")}})
        # Only the sealed state may name a run: a client-supplied one is refused, and the run stays parked.
        assert forged["error"]["code"] == -32602
        assert run_id in host.kernel.continuations.runs
        assert plugin.runs["resumable"] == 1
        assert first["resultType"] == "input_required"
    finally:
        await host.stop()


async def test_the_retry_resumes_a_run_parked_on_another_process(tmp_path):
    """Two hosts sharing a Redis backend, as two workers would: round one reaches the first, the
    retries reach the second, which hands the answers over through the broker; one run in all."""
    import pytest

    redis_testing = pytest.importorskip("mcphost_redis.testing")
    import mcphost_redis

    if redis_testing.redis_server_path() is None:
        pytest.skip("redis-server is not installed")
    server = redis_testing.RedisServer(tmp_path / "redis")
    plugin = Counting()
    config = {"server": {"state_keys": ["k" * 32]}, "plugins": {"redis": {"url": server.url}}}
    first_host = make_host(("counting", plugin), ("redis", mcphost_redis), config=config)
    second_host = make_host(("counting", plugin), ("redis", mcphost_redis), config=config)
    await first_host.start()
    await second_host.start()
    try:
        first = (await modern_call(first_host, "tools/call", {"name": "resumable", "arguments": {}}))["result"]
        assert list(first["inputRequests"]) == ["first"]
        second = (await modern_call(second_host, "tools/call", {
            "name": "resumable", "arguments": {}, "requestState": first["requestState"],
            "inputResponses": {"first": _answer("Ada")}}))["result"]
        assert list(second["inputRequests"]) == ["second"]
        done = (await modern_call(second_host, "tools/call", {
            "name": "resumable", "arguments": {}, "requestState": second["requestState"],
            "inputResponses": {"second": _answer("Lovelace")}}))["result"]
        assert done["content"][0]["text"] == "Ada Lovelace"
        assert plugin.runs["resumable"] == 1
        assert not second_host.kernel.continuations.runs
    finally:
        await second_host.stop()
        await first_host.stop()
        server.stop()


# -- parked calls are bound to their caller and budgeted per caller (issue 24, item 8) ------------------

async def test_an_anonymous_parked_call_resumes_only_from_its_address():
    plugin = Counting()
    host = make_host(("counting", plugin))
    await host.start()
    try:
        first = (await modern_call(host, "tools/call", {"name": "resumable", "arguments": {}},
                                   remote="10.0.0.1:4000"))["result"]
        retry = {"name": "resumable", "arguments": {}, "requestState": first["requestState"],
                 "inputResponses": {"first": _answer("Ada")}}
        stolen = await modern_call(host, "tools/call", retry, remote="10.0.0.2:4000")
        assert stolen["error"]["code"] == -32602 and "can no longer be resumed" in stolen["error"]["message"]
        assert len(host.kernel.continuations.runs) == 1  # the run is still parked for its owner
        own = await modern_call(host, "tools/call", retry, remote="10.0.0.1:5000")  # another port, same address
        assert own["result"]["inputRequests"].keys() == {"second"}
        assert plugin.runs["resumable"] == 1
    finally:
        await host.stop()


async def test_parked_calls_are_a_per_principal_budget():
    host = make_host(("counting", Counting()), config={"server": {"max_parked_per_principal": 1}})
    await host.start()
    try:
        first = (await modern_call(host, "tools/call", {"name": "resumable", "arguments": {}},
                                   remote="10.0.0.1:1"))["result"]
        assert first["resultType"] == "input_required"
        refused = await modern_call(host, "tools/call", {"name": "resumable", "arguments": {}}, remote="10.0.0.1:2")
        error = refused["error"]
        assert error["code"] == -32000 and "parked calls" in error["message"], error
        assert "max_parked_per_principal" in error["message"] and error["data"]["budget"] == "parked calls"
        other = (await modern_call(host, "tools/call", {"name": "resumable", "arguments": {}},
                                   remote="10.0.0.2:1"))["result"]
        assert other["resultType"] == "input_required"  # another address is unaffected
        # Finishing the parked call gives the slot back.
        answers = {"first": _answer("Ada"), "second": _answer("Lovelace")}
        reply = first
        while reply.get("resultType") == "input_required":
            retry = {"name": "resumable", "arguments": {}, "requestState": reply["requestState"],
                     "inputResponses": {key: answers[key] for key in reply["inputRequests"]}}
            reply = (await modern_call(host, "tools/call", retry, remote="10.0.0.1:3"))["result"]
        assert reply["content"][0]["text"] == "Ada Lovelace"
        again = (await modern_call(host, "tools/call", {"name": "resumable", "arguments": {}},
                                   remote="10.0.0.1:4"))["result"]
        assert again["resultType"] == "input_required"
    finally:
        await host.stop()


# -- a caller that cannot be asked cannot park: its resumable call runs as any other (issue 37) ------------

NO_QUESTIONS = {"io.modelcontextprotocol/clientCapabilities": {}}


async def test_a_caller_without_question_capabilities_runs_a_resumable_tool_without_a_parked_run():
    seen: list[Any] = []

    class Plain:
        @mcphost.hookimpl
        def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
            @mcphost.tool(resumable=True)
            async def forwarded(text: str, *, ctx: mcphost.Context) -> str:
                """Waits (as a proxied call waits on its upstream), then answers."""
                seen.append(len(host.kernel.continuations.runs))
                await asyncio.sleep(0.01)
                return text.upper()

            @mcphost.tool(resumable=True)
            async def asks(*, ctx: mcphost.Context) -> str:
                """Asks anyway: the client declared no elicitation."""
                answer = await ctx.elicit("Name?", NAME)
                return str(answer.content)

            return [forwarded, asks]

    # One parked call allowed per caller: three at once would be refused two if each took a parked run.
    host = make_host(("plain", Plain()), config={"server": {"max_parked_per_principal": 1}})
    await host.start()
    try:
        replies = await asyncio.gather(*(modern_call(host, "tools/call", {"name": "forwarded", "arguments": {
            "text": f"call {n}"}}, meta_extra=NO_QUESTIONS, remote="10.0.0.1:1") for n in range(3)))
        assert [r["result"]["content"][0]["text"] for r in replies] == ["CALL 0", "CALL 1", "CALL 2"], replies
        assert seen == [0, 0, 0] and not host.kernel.continuations.runs
        asked = await modern_call(host, "tools/call", {"name": "asks", "arguments": {}}, meta_extra=NO_QUESTIONS)
        assert asked["error"]["code"] == -32021, asked  # missing capability, never an input_required round
        # A client that can be asked still gets a parked run (and the budget refuses the second).
        first = (await modern_call(host, "tools/call", {"name": "asks", "arguments": {}},
                                   remote="10.0.0.2:1"))["result"]
        assert first["resultType"] == "input_required" and len(host.kernel.continuations.runs) == 1
        refused = await modern_call(host, "tools/call", {"name": "asks", "arguments": {}}, remote="10.0.0.2:2")
        assert refused["error"]["code"] == -32000 and refused["error"]["data"]["budget"] == "parked calls"
    finally:
        await host.stop()
