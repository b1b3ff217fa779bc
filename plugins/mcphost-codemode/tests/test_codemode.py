"""Code mode through the official Python SDK client, over real HTTP, in both eras."""

from __future__ import annotations

import asyncio
import textwrap
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from codemode_support import ERAS, Recorder, memory_server, serving, text_of, time_server
from mcphost_codemode import CodeModePlugin
from mcphost_proxy import ProxyPlugin

from mcphost.testing import make_host, serve_http
from tests.support.js.run import ensure_ts_client

CHAIN = textwrap.dedent("""
    tokyo = await call_tool("get_current_time", {"timezone": "Asia/Tokyo"})
    hhmm = tokyo["datetime"][11:16]
    london = await call_tool("convert_time", {"source_timezone": "Asia/Tokyo", "time": hhmm,
                                              "target_timezone": "Europe/London"})
    stored = await call_tool("create_entities", {"entities": [{
        "name": "meeting", "entityType": "event",
        "observations": ["Tokyo " + hhmm + " is London " + london["target"]["datetime"][11:16]]}]})
    print("stored", len(stored["entities"]), "entity")
    result = {"tokyo": tokyo["datetime"], "london": london["target"]["datetime"],
              "stored": stored["entities"][0]["observations"][0]}
""")


@pytest.mark.parametrize("era", ERAS)
async def test_a_program_chains_three_real_tools_with_progress_per_call(era, tmp_path):
    status = await asyncio.to_thread(ensure_ts_client)
    memory = memory_server(tmp_path / "memory.jsonl")
    if not status or memory is None:
        pytest.skip(f"the npm memory server cannot run here: {status.reason or 'node missing'}")
    proxy = ProxyPlugin()
    config = {"plugins": {"proxy": {"servers": {"time": time_server(), "memory": memory}}},
              "endpoints": {"code": {"discovery": "code"}}}
    host = make_host(("proxy", proxy), ("codemode", CodeModePlugin()), config=config)
    async with serve_http(host) as live:
        await proxy.wait_mounted(60)
        side = Recorder()
        async with side.client(live.url + "/code", era) as client:
            listed = await client.list_tools()
            assert [tool.name for tool in listed.tools] == ["search_tools", "execute"]
            result = await client.call_tool("execute", {"code": CHAIN}, progress_callback=side.on_progress)
            assert not result.is_error, text_of(result)
            value = result.structured_content["result"]
            # The right answer: London's wall clock for Tokyo's current minute, by the tz database.
            tokyo = datetime.fromisoformat(value["tokyo"]).replace(second=0)
            expected = tokyo.astimezone(ZoneInfo("Europe/London"))
            london = datetime.fromisoformat(value["london"])
            assert (london.hour, london.minute) == (expected.hour, expected.minute)
            assert value["stored"] == f"Tokyo {tokyo:%H:%M} is London {expected:%H:%M}"
            assert result.structured_content["output"] == "stored 1 entity\n"
            assert result.structured_content["calls"] == 3
            # One progress notification of execute per inner call, in order.
            assert [message for _, _, message in side.progress] == [
                "call 1: get_current_time", "call 2: convert_time", "call 3: create_entities"]
            # The memory server really stored it: read it back with a direct call.
            graph = await client.call_tool("read_graph", {})
            assert graph.structured_content["entities"][0]["observations"] == [value["stored"]]
    assert host.endpoint_stats()["code"]["executions"] == 1


@pytest.mark.parametrize("era", ERAS)
async def test_questions_of_inner_tools_reach_the_client_through_execute(era):
    async with serving() as live:
        side = Recorder(name="Grace")
        async with side.client(live.code_url, era) as client:
            code = textwrap.dedent("""
                greeting = await call_tool("ask_name", {})
                summary = await call_tool("summarize", {"text": "a long text"})
                "asked: " + greeting + "; " + summary
            """)
            result = await client.call_tool("execute", {"code": code})
            assert not result.is_error, text_of(result)
            # An elicitation, then a sampling request, each answered by the client, in either era.
            assert result.structured_content["result"] == "asked: hello Grace; Grace's summary"
            assert len(side.asked) == 2


@pytest.mark.parametrize("era", ERAS)
async def test_tool_errors_limits_and_mistakes_come_back_as_answers_a_model_can_act_on(era):
    async with serving() as live:
        side = Recorder()
        async with side.client(live.code_url, era) as client:
            async def run(code: str) -> tuple[bool, str, dict | None]:
                result = await client.call_tool("execute", {"code": textwrap.dedent(code)})
                return bool(result.is_error), text_of(result), result.structured_content

            # search_tools finds the tools execute calls, never execute itself.
            found = await client.call_tool("search_tools", {"query": "run a python program that calls tools"})
            names = [tool["name"] for tool in found.structured_content["tools"]]
            assert "execute" not in names and "hidden_tool" not in names and names
            found = await client.call_tool("search_tools", {"query": "add two integers"})
            assert found.structured_content["tools"][0]["name"] == "add"

            failed, text, _ = await run("x = 1\ny = x + * 2\nprint(y)\n")
            assert failed and text.startswith("SyntaxError at line 2, column 9: "), text
            failed, text, structured = await run("""
                try:
                    await call_tool("fail", {"reason": "no disk"})
                except RuntimeError as exc:
                    print("caught:", exc)
                await call_tool("add", {"a": 2, "b": 3})
            """)
            assert not failed and structured["result"] == {"sum": 5}
            assert structured["output"] == "caught: Tool 'fail' failed: cannot do it: no disk\n"
            failed, text, _ = await run('await call_tool("add", {"a": "two", "b": 3})')
            assert failed and "Invalid arguments for tool 'add'" in text
            failed, text, _ = await run('await call_tool("hidden_tool", {})')  # outside the endpoint
            assert failed and text.startswith("ValueError: Unknown tool: hidden_tool (line 1")
            failed, text, _ = await run('await call_tool("execute", {"code": "1"})')
            assert failed and "cannot run another program" in text
            failed, text, structured = await run("for i in range(10):\n    await call_tool('shout', {'text': 'a'})")
            assert failed and "Limit reached: a program may make 6 tool calls (max_calls)" in text
            failed, text, structured = await run("for i in range(100):\n    print('line', i)\n'done'")
            assert not failed and structured["result"] == "done"
            assert structured["output"].endswith("more bytes of output cut: max_output_bytes = 120]")
            failed, text, structured = await run("while True:\n    print('x' * 1000)")  # an output flood
            assert failed and text.startswith("Limit reached: the program printed more than 1048576 bytes "
                                              "(max_output_bytes = 120")
            failed, text, _ = await run("def f(n):\n    return f(n + 1)\nf(0)")
            assert failed and text.startswith("Limit reached: recursion deeper than")
            failed, text, structured = await run("1/0")
            assert failed and text.startswith("ZeroDivisionError")
            failed, text, structured = await run("x = 3")
            assert not failed and structured.get("result") is None and "no result" in text


@pytest.mark.parametrize("era", ERAS)
async def test_cancelling_execute_stops_the_program_and_cancels_its_inner_call(era):
    async with serving() as live:
        side = Recorder()
        async with side.client(live.code_url, era) as client:
            call = asyncio.create_task(client.call_tool("execute", {"code": 'await call_tool("wait_forever", {})'}))
            await asyncio.wait_for(live.tools.waiting.wait(), 60)
            call.cancel()  # the SDK sends notifications/cancelled
            await asyncio.wait_for(live.tools.cancelled.wait(), 60)
            with pytest.raises(asyncio.CancelledError):
                await call
            # The host goes on serving programs.
            after = await client.call_tool("execute", {"code": "6 * 7"})
            assert after.structured_content["result"] == 42
