"""Three real upstreams mounted together: the official Python SDK server and the official TypeScript
SDK server over stdio, and an mcphost serving the conformance plugin over Streamable HTTP."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Iterator

import pytest
from proxy_support import TS_SERVER, Side, front, sdk_upstream

from tests.support.http_support import HttpServer


def _text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


@pytest.fixture(scope="module")
def conformance_upstream(tmp_path_factory) -> Iterator[HttpServer]:
    server = HttpServer(tmp_path_factory.mktemp("upstream"), plugins="conformance")
    yield server
    server.stop()


def _three(node: str, conformance: HttpServer) -> dict:
    return {"py": sdk_upstream(), "ts": {"command": node, "args": [str(TS_SERVER)]},
            "conf": {"url": conformance.url, "exclude": ["test_reconnection"]}}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_three_upstreams_mounted_together(side, node, conformance_upstream, mode):
    async with front(_three(node, conformance_upstream)) as live, side.client(live.url, mode) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"py_add", "ts_shout", "ts_pixel", "conf_test_simple_text", "conf_test_elicitation"} <= names
        assert "conf_test_reconnection" not in names  # exclude
        catalog = live.host.catalog.tools
        assert catalog["ts_shout"].record.provenance.origin == "ts"
        assert catalog["conf_test_simple_text"].record.provenance.plugin == "proxy"
        assert _text(await client.call_tool("py_add", {"a": 20, "b": 22})) == "42"
        assert _text(await client.call_tool("ts_shout", {"text": "hi"})) == "HI"
        pixel = await client.call_tool("ts_pixel", {})
        image, link = pixel.content
        assert image.type == "image" and image.mime_type == "image/png"
        assert base64.b64decode(image.data).startswith(b"\x89PNG")
        assert link.type == "resource_link" and str(link.uri) == "ts://readme"
        failed = await client.call_tool("ts_fail", {})
        assert failed.is_error and _text(failed) == "it broke"
        assert "error" in _text(await client.call_tool("conf_test_error_handling", {})).lower()
        # An HTTP upstream that elicits mid-call.
        answer = await client.call_tool("conf_test_elicitation", {"message": "Your name?"})
        assert "Ada" in _text(answer), _text(answer)
        assert side.elicitations and side.elicitations[-1].message == "Your name?"
        # Resources: text, binary and a template, from the HTTP upstream.
        text = await client.read_resource("test://static-text")
        assert text.contents[0].text
        blob = await client.read_resource("test://static-binary")
        assert base64.b64decode(blob.contents[0].blob).startswith(b"\x89PNG")
        data = await client.read_resource("test://template/7/data")
        assert '"7"' in data.contents[0].text or "7" in data.contents[0].text
        prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
        assert {"py_greet", "conf_test_simple_prompt"} <= prompts
        got = await client.get_prompt("conf_test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        assert got.messages


async def test_upstream_progress_forwarded_from_http(side, node, conformance_upstream):
    async with front(_three(node, conformance_upstream)) as live, side.client(live.url) as client:
        seen = []

        async def progress(value, total, message):
            seen.append(value)

        result = await client.call_tool("conf_test_tool_with_progress", {}, progress_callback=progress)
        assert _text(result) == "Progress test completed"
        assert seen == [0, 50, 100]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_2026_upstream_questions_and_logs_belong_to_their_own_call(conformance_upstream, mode):
    """era = auto: the upstream speaks 2026-07-28; each call has its own upstream stream, so two calls
    in flight at once each get their own question, answer and log messages."""
    servers = {"conf": {"url": conformance_upstream.url, "era": "auto"}}
    async with front(servers) as live:
        assert live.plugin.upstreams["conf"]._session.discover_result is not None
        first, second = Side("Ada"), Side("Grace")
        async with first.client(live.url, mode) as one, second.client(live.url, mode) as two:
            answers = await asyncio.gather(
                one.call_tool("conf_test_elicitation", {"message": "Who are you?"}),
                two.call_tool("conf_test_elicitation", {"message": "Who are you?"}))
            assert "Ada" in _text(answers[0]) and "Grace" in _text(answers[1])
            assert len(first.elicitations) == len(second.elicitations) == 1
            logged = await one.call_tool("conf_test_tool_with_logging", {})
            assert _text(logged) == "Logging test completed"
            if mode == "legacy":  # 2026-07-28 clients get logs only when they ask for a level
                assert any(type(n).__name__ == "LoggingMessageNotification" for n in first.notifications)


async def test_an_upstream_task_becomes_the_hosts_task(conformance_upstream):
    """Tasks extension: the upstream runs slow_compute as a task; so does the host in front of it."""
    import httpx

    from tests.support.http_support import modern

    tasks = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    async with front({"conf": {"url": conformance_upstream.url, "era": "auto", "prefix": ""}}) as live, \
            httpx.AsyncClient(timeout=30) as http:
        async def post(method: str, params: dict, meta: dict | None = None, name: str | None = None) -> dict:
            payload, headers = modern(method, params, meta_extra=meta, name=name)
            return (await http.post(live.url, json=payload, headers=headers)).json()

        created = (await post("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0.5}}, tasks))["result"]
        assert created["resultType"] == "task" and created["status"] == "working"
        deadline = time.monotonic() + 60  # a generous wait on a loaded machine
        while True:
            task = (await post("tasks/get", {"taskId": created["taskId"]}, tasks, name=created["taskId"]))["result"]
            if task["status"] != "working" or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        assert task["status"] == "completed", task
        assert task["result"]["content"][0]["text"] == "compute: computed after 0.5s"
        # Without the extension the upstream refuses a tool that only runs as a task (-32021); the host
        # bridges it (bridge_tasks): it runs the upstream task and answers the call, here its tool error.
        bridged = (await post("tools/call", {"name": "failing_job", "arguments": {}}))["result"]
        assert bridged["resultType"] == "complete" and bridged["isError"] is True, bridged
        assert "failed on purpose" in bridged["content"][0]["text"]
