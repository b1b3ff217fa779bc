"""Tasks through the proxy, in either era on either side.

Two task tools behind mcphost: server-everything's ``simulate-research-query`` (TypeScript SDK,
2025-11-25 over stdio, ``execution.taskSupport = "required"``: it runs only as a task, about 4 s)
and the conformance plugin's ``slow_compute`` on an mcphost upstream speaking 2026-07-28 (the
tasks extension; it runs as long as it is told). A 2025-11-25 client (``task`` parameter,
tasks/get, tasks/result, tasks/cancel) and a 2026-07-28 client (the extension: tasks/get,
tasks/cancel) each start, poll and cancel a task of each; a client that does not use tasks (the
official SDK client, in either era) gets the plain result of each (the host bridges: it runs the
upstream task and answers the call); with ``bridge_tasks = false`` a 2026-07-28 one without the
extension gets -32021 for the task-only tools, as from the upstream; on two nodes sharing Redis a
task started on one node is polled, fetched and cancelled on the other. A question an upstream task
asks while it runs (server-everything's research on an ambiguous topic; the conformance plugin's
``test_tool_with_task`` on the same mcphost upstream mounted in the session era, ``old_``) reaches
each kind of client in its own terms, and the answer goes back to the upstream task.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client, MCPError
from proxy_support import EVERYTHING, front

from tests.support.http_support import HttpServer, ServerGroup, modern, open_session, session_headers, sse_messages

TASKS = "io.modelcontextprotocol/tasks"
RELATED = "io.modelcontextprotocol/related-task"
#: server-everything asks each client for its roots: these clients answer (a question the client
#: cannot answer failing its 2026-07-28 call is another part of issue #38).
DECLARES_TASKS = {"io.modelcontextprotocol/clientCapabilities": {"roots": {}, "extensions": {TASKS: {}}}}
ROOTS = {"roots": [{"uri": "file:///home/ada", "name": "Ada"}]}
RESEARCH = "every_simulate-research-query"
#: Each tool, its arguments for a task that ends soon and for one that runs until cancelled, and
#: what its result says.
TOOLS = {
    "everything": (RESEARCH, {"topic": "tides"}, {"topic": "cancelled tides"}, "# Research Report: tides"),
    "slow_compute": ("conf_slow_compute", {"seconds": 1}, {"seconds": 60}, "compute: computed after 1s"),
}
TERMINAL = {"completed", "failed", "cancelled"}
DEADLINE = 60.0  # seconds a task may take to settle on a loaded machine


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


@pytest.fixture(scope="module")
def conformance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    server = HttpServer(tmp_path_factory.mktemp("conformance"), plugins="conformance")
    yield server
    server.stop()


def _servers(node: str, conformance: HttpServer, **extra: Any) -> dict[str, Any]:
    """server-everything (2025-11-25, stdio), the conformance plugin in 2026-07-28 (``conf_``) and the
    same server in the session era (``old_``: a 2025-11-25 mcphost upstream)."""
    return {"every": {"command": node, "args": [str(EVERYTHING)], "prefix": "every_", **extra},
            "conf": {"url": conformance.url, "era": "auto", "prefix": "conf_", **extra},
            "old": {"url": conformance.url, "prefix": "old_", **extra}}


@pytest.fixture
async def live(node: str, conformance: HttpServer) -> AsyncIterator[Any]:
    async with front(_servers(node, conformance)) as served:
        yield served


class LegacyTasks:
    """A 2025-11-25 client over HTTP that uses tasks: the ``task`` parameter, tasks/get, tasks/result."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url = http, url
        self.session_id = ""
        self.ids = iter(range(2, 10_000))

    async def open(self, url: str | None = None, capabilities: dict[str, Any] | None = None) -> LegacyTasks:
        self.session_id = await open_session(self.http, url or self.url, capabilities)
        return self

    async def request(self, method: str, params: dict[str, Any], url: str | None = None) -> dict[str, Any]:
        request_id = next(self.ids)
        response = await self.http.post(url or self.url, headers=session_headers(self.session_id), json={
            "jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        assert response.status_code == 200, response.text
        [reply] = [m for m in sse_messages(response.text) if m.get("id") == request_id]
        return reply

    async def result(self, method: str, params: dict[str, Any], url: str | None = None) -> dict[str, Any]:
        reply = await self.request(method, params, url)
        assert "result" in reply, reply
        return reply["result"]  # type: ignore[no-any-return]

    async def start(self, tool: str, arguments: dict[str, Any], url: str | None = None) -> str:
        created = await self.result("tools/call", {"name": tool, "arguments": arguments, "task": {}}, url)
        assert created["task"]["status"] == "working", created
        return created["task"]["taskId"]  # type: ignore[no-any-return]

    async def poll(self, task_id: str, statuses: set[str], url: str | None = None) -> dict[str, Any]:
        return await _poll(lambda: self.result("tasks/get", {"taskId": task_id}, url), statuses)

    async def outcome(self, task_id: str, url: str | None = None) -> str:
        """The task's result, fetched with tasks/result once tasks/get says it completed."""
        assert (await self.poll(task_id, TERMINAL, url))["status"] == "completed"
        result = await self.result("tasks/result", {"taskId": task_id}, url)
        assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
        return result["content"][0]["text"]  # type: ignore[no-any-return]

    async def cancel(self, task_id: str, url: str | None = None) -> None:
        cancelled = await self.result("tasks/cancel", {"taskId": task_id}, url)
        assert cancelled["status"] == "cancelled"

    async def answered(self, task_id: str, answer: Any, url: str | None = None) -> str:
        """The task's result from tasks/result, answering each question that arrives on its stream
        (2025-11-25: a task in input_required asks over tasks/result; the answer is POSTed)."""
        request_id = next(self.ids)
        headers = session_headers(self.session_id)
        url = url or self.url
        asked = 0
        async with self.http.stream("POST", url, headers=headers, json={
                "jsonrpc": "2.0", "id": request_id, "method": "tasks/result", "params": {"taskId": task_id}}) as stream:
            assert stream.status_code == 200
            async for line in stream.aiter_lines():
                if not line.startswith("data:") or not line[5:].strip():
                    continue
                message = json.loads(line[5:])
                if "method" in message and "id" in message:  # a question of the task
                    assert message["params"]["_meta"][RELATED] == {"taskId": task_id}, message
                    asked += 1
                    posted = await self.http.post(url, headers=headers, json={
                        "jsonrpc": "2.0", "id": message["id"], "result": answer(message)})
                    assert posted.status_code == 202, posted.text
                elif message.get("id") == request_id:
                    assert "result" in message and asked, message
                    assert message["result"]["_meta"][RELATED] == {"taskId": task_id}
                    return message["result"]["content"][0]["text"]  # type: ignore[no-any-return]
        raise AssertionError("tasks/result ended without its reply")


class ModernTasks:
    """A 2026-07-28 client that declared the tasks extension: tasks/get and tasks/cancel."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url = http, url
        self.meta = DECLARES_TASKS

    async def open(self, url: str | None = None, capabilities: dict[str, Any] | None = None) -> ModernTasks:
        declared = DECLARES_TASKS["io.modelcontextprotocol/clientCapabilities"]
        self.meta = {"io.modelcontextprotocol/clientCapabilities": {**declared, **(capabilities or {})}}
        return self

    async def result(self, method: str, params: dict[str, Any], url: str | None = None) -> dict[str, Any]:
        name = params.get("taskId") if method.startswith("tasks/") else None
        payload, headers = modern(method, params, meta_extra=self.meta, name=name)
        response = await self.http.post(url or self.url, json=payload, headers=headers)
        assert response.status_code == 200, response.text
        return response.json()["result"]  # type: ignore[no-any-return]

    async def start(self, tool: str, arguments: dict[str, Any], url: str | None = None) -> str:
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        created = await self.result("tools/call", params, url)
        while created["resultType"] == "input_required":  # a question before the task: answer, call again
            params = {**params, "inputResponses": _answers(created["inputRequests"]),
                      "requestState": created.get("requestState")}
            created = await self.result("tools/call", params, url)
        assert created["resultType"] == "task" and created["status"] == "working", created
        return created["taskId"]  # type: ignore[no-any-return]

    async def poll(self, task_id: str, statuses: set[str], url: str | None = None) -> dict[str, Any]:
        async def get() -> dict[str, Any]:
            task = await self.result("tasks/get", {"taskId": task_id}, url)
            if task["status"] == "input_required" and "input_required" not in statuses:
                await self.result("tasks/update", {"taskId": task_id,
                                                   "inputResponses": _answers(task["inputRequests"])}, url)
            return task

        return await _poll(get, statuses)

    async def outcome(self, task_id: str, url: str | None = None) -> str:
        task = await self.poll(task_id, TERMINAL, url)
        assert task["status"] == "completed", task
        return task["result"]["content"][0]["text"]  # type: ignore[no-any-return]

    async def cancel(self, task_id: str, url: str | None = None) -> None:
        assert (await self.result("tasks/cancel", {"taskId": task_id}, url))["resultType"] == "complete"

    async def answered(self, task_id: str, answer: Any, url: str | None = None) -> str:
        """The task's result, answering its questions (input_required: inputRequests, tasks/update)
        each time it asks, until it ends."""
        answered: set[str] = set()
        while True:
            task = await self.poll(task_id, {"input_required", *TERMINAL}, url)
            if task["status"] != "input_required":
                break
            answers = {key: answer(request) for key, request in task["inputRequests"].items()
                       if key not in answered}
            if answers:
                updated = await self.result("tasks/update", {"taskId": task_id, "inputResponses": answers}, url)
                assert updated["resultType"] == "complete"
                answered.update(answers)
            else:  # answered already; the task has not moved on yet
                await asyncio.sleep(0.1)
        assert answered, "the task asked nothing"
        assert task["status"] == "completed", task
        return task["result"]["content"][0]["text"]  # type: ignore[no-any-return]


def _answers(requests: dict[str, Any]) -> dict[str, Any]:
    """Answers to the questions of a round or a task: only roots/list is asked here."""
    assert all(request["method"] == "roots/list" for request in requests.values()), requests
    return {key: ROOTS for key in requests}


async def _poll(get: Any, statuses: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE
    while True:
        task = await get()
        if task["status"] in statuses:
            return task  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, f"the task is still {task['status']}: {task}"
        await asyncio.sleep(0.1)


CLIENTS = {"2025-11-25": LegacyTasks, "2026-07-28": ModernTasks}


@pytest.mark.parametrize("era", sorted(CLIENTS))
@pytest.mark.parametrize("which", sorted(TOOLS))
async def test_a_task_through_the_proxy_is_started_polled_and_cancelled(live, era, which):
    tool, quick, long, says = TOOLS[which]
    async with httpx.AsyncClient(timeout=60) as http:
        client = await CLIENTS[era](http, live.url).open()
        task_id = await client.start(tool, quick)
        assert says in await client.outcome(task_id)
        running = await client.start(tool, long)
        assert (await client.poll(running, {"working", *TERMINAL}))["status"] == "working"
        await client.cancel(running)
        assert (await client.poll(running, TERMINAL))["status"] == "cancelled"
    # The host stopped following the upstream task: nothing of it is in flight any more.
    await _poll(lambda: _in_flight(live), {"idle"})


async def _in_flight(live: Any) -> dict[str, Any]:
    busy = sum(upstream.in_flight for upstream in live.plugin.upstreams.values())
    return {"status": "idle" if busy == 0 else "busy"}


async def _roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///home/ada", name="Ada")])


async def test_a_session_era_client_without_tasks_gets_the_plain_result_of_a_task_only_tool(live):
    """The SDK client in the session era (no tasks): the host runs the upstream task and answers the
    call. It answers roots/list, which server-everything asks of every client."""
    async with Client(live.url, mode="legacy", list_roots_callback=_roots, read_timeout_seconds=60) as client:
        research = await client.call_tool(RESEARCH, {"topic": "tides"})
        assert not research.is_error and "# Research Report: tides" in _text(research)
        computed = await client.call_tool("conf_slow_compute", {"seconds": 0.5})
        assert _text(computed) == "compute: computed after 0.5s"
        # A 2026-07-28 upstream's task-only tool too (it lists no taskSupport; it fails on purpose).
        failed = await client.call_tool("conf_failing_job", {})
        assert failed.is_error and "failed on purpose" in _text(failed)


async def test_a_2026_client_without_the_extension_gets_the_plain_result_of_a_task_only_tool(live):
    """The SDK client in 2026-07-28, without the tasks extension: the host runs the upstream task
    (a 2025-11-25 one with the task parameter, a 2026-07-28 one declaring the extension upstream)
    and answers the call when it ends; the failing task's tool error comes back as one."""
    async with Client(live.url, mode="auto", list_roots_callback=_roots, read_timeout_seconds=60) as client:
        assert client.protocol_version == "2026-07-28"
        research = await client.call_tool(RESEARCH, {"topic": "tides"})
        assert not research.is_error and "# Research Report: tides" in _text(research)
        failed = await client.call_tool("conf_failing_job", {})
        assert failed.is_error and "failed on purpose" in _text(failed)
        computed = await client.call_tool("conf_slow_compute", {"seconds": 0.5})
        assert _text(computed) == "compute: computed after 0.5s"


async def _listed_2025(url: str) -> dict[str, Any]:
    """The tools/list a 2025-11-25 client gets, by name, after checking the tasks capability."""
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(url, headers=session_headers(), json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
        [initialized] = sse_messages(response.text) if "data:" in response.text else [response.json()]
        capabilities = initialized["result"]["capabilities"]
        assert capabilities["tasks"] == {"cancel": {}, "requests": {"tools": {"call": {}}}}
        client = LegacyTasks(http, url)
        client.session_id = response.headers["mcp-session-id"]
        return {tool["name"]: tool for tool in (await client.result("tools/list", {}))["tools"]}


async def test_the_host_declares_tasks_and_each_tools_task_support_to_a_2025_11_25_client(live):
    tools = await _listed_2025(live.url)
    # server-everything declares it "required"; the host answers it without a task too, so says "optional"
    assert tools[RESEARCH]["execution"] == {"taskSupport": "optional"}
    assert tools["conf_slow_compute"]["execution"] == {"taskSupport": "optional"}
    assert "execution" not in tools["every_echo"]


async def test_without_the_bridge_a_task_only_tool_is_refused_to_a_2026_client_without_the_extension(
        node, conformance):
    """``bridge_tasks = false``: the upstream's word stands. A 2026-07-28 client that could declare
    the extension gets -32021 naming it (what the conformance suite's tasks-required-task-error
    expects of a server's own task-only tool), from either era's upstream; a 2025-11-25 client sees
    ``taskSupport = "required"``; other task tools still answer plainly."""
    async with front(_servers(node, conformance, bridge_tasks=False)) as served:
        async with Client(served.url, mode="auto", list_roots_callback=_roots, read_timeout_seconds=60) as client:
            for tool in (RESEARCH, "conf_failing_job"):
                with pytest.raises(MCPError) as refused:
                    await client.call_tool(tool, {"topic": "tides"} if tool == RESEARCH else {})
                assert refused.value.error.code == -32021
                assert refused.value.error.data["requiredCapabilities"] == {"extensions": {TASKS: {}}}
            computed = await client.call_tool("conf_slow_compute", {"seconds": 0.5})
            assert _text(computed) == "compute: computed after 0.5s"
        assert (await _listed_2025(served.url))[RESEARCH]["execution"] == {"taskSupport": "required"}


def _clarify(request: dict[str, Any]) -> dict[str, Any]:
    """server-everything's question about an ambiguous topic, answered: the snake. (It may also ask
    for the client's roots, when a process of its own starts for the call: answered too.)"""
    if request["method"] == "roots/list":
        return ROOTS
    assert request["method"] == "elicitation/create", request
    assert "interpretation" in request["params"]["requestedSchema"]["properties"], request
    return {"action": "accept", "content": {"interpretation": "snake"}}


@pytest.mark.parametrize("era", sorted(CLIENTS))
async def test_a_question_an_upstream_task_asks_reaches_the_client_and_the_answer_goes_back(live, era):
    """server-everything's research task on an ambiguous topic asks for a clarification while it runs
    (2025-11-25: input_required, the question delivered over the proxy's tasks/result upstream).
    The host's task goes input_required too: a 2025-11-25 client gets the question on its own
    tasks/result stream, a 2026-07-28 one in the task's inputRequests (answered with tasks/update);
    the answer reaches the upstream task, whose report names it."""
    async with httpx.AsyncClient(timeout=60) as http:
        client = await CLIENTS[era](http, live.url).open(capabilities={"elicitation": {}})
        task_id = await client.start(RESEARCH, {"topic": "python", "ambiguous": True})
        assert (await client.poll(task_id, {"input_required", *TERMINAL}))["status"] == "input_required"
        assert "# Research Report: python (snake)" in await client.answered(task_id, _clarify)
    await _poll(lambda: _in_flight(live), {"idle"})


def _named(request: dict[str, Any]) -> dict[str, Any]:
    """The conformance plugin's question (its name schema), answered: Ada."""
    assert request["method"] == "elicitation/create", request
    assert request["params"]["requestedSchema"]["required"] == ["name"], request
    return {"action": "accept", "content": {"name": "Ada"}}


@pytest.mark.parametrize("era", sorted(CLIENTS))
async def test_a_question_of_a_2025_11_25_mcphost_upstream_task_reaches_the_client(live, era):
    """A 2025-11-25 mcphost upstream's task-only tool asks its question inside the task: the upstream
    parks it in input_required and carries the question on the proxy's tasks/result, which hands it
    to the downstream client's task as above."""
    async with httpx.AsyncClient(timeout=60) as http:
        client = await CLIENTS[era](http, live.url).open(capabilities={"elicitation": {}})
        task_id = await client.start("old_test_tool_with_task", {})
        assert "Hello, Ada! (answered from a task)" in await client.answered(task_id, _named)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_client_without_tasks_is_asked_an_upstream_tasks_question_on_its_call(live, mode):
    """The same question for a client calling without a task (the SDK client, either era): it comes
    as any mid-call question does (on the call's stream; an input-required round in 2026-07-28),
    and the plain result carries the answer."""
    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(**_clarify({"method": "elicitation/create", "params": params.model_dump(
            by_alias=True)}))

    async with Client(live.url, mode=mode, list_roots_callback=_roots, elicitation_callback=elicit,
                      read_timeout_seconds=60) as client:
        research = await client.call_tool(RESEARCH, {"topic": "python", "ambiguous": True})
        assert "# Research Report: python (snake)" in _text(research)


# -- two nodes sharing Redis ---------------------------------------------------------------------------------

@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    from mcphost_redis.testing import RedisServer, redis_server_path

    if redis_server_path() is None:
        pytest.skip("redis-server is not installed")
    server = RedisServer(tmp_path / "redis")
    yield server.url
    server.stop()


def _node_config(redis_url: str, node: str, conformance: HttpServer) -> str:
    return (f'[server]\ntask_lease = 2\n\n[plugins.redis]\nurl = "{redis_url}"\nprefix = "ptasks:"\n\n'
            '[plugins.proxy]\nrestart_backoff = 0.2\n\n'
            f'[plugins.proxy.servers.every]\ncommand = "{node}"\nargs = ["{EVERYTHING}"]\nprefix = "every_"\n\n'
            f'[plugins.proxy.servers.conf]\nurl = "{conformance.url}"\nera = "auto"\nprefix = "conf_"\n')


async def _mounted(http: httpx.AsyncClient, url: str, tools: set[str]) -> None:
    async def listed() -> dict[str, Any]:
        payload, headers = modern("tools/list", {})
        listing = (await http.post(url, json=payload, headers=headers)).json()["result"]
        names = {tool["name"] for tool in listing["tools"]}
        return {"status": "mounted" if tools <= names else "waiting"}

    await _poll(listed, {"mounted"})


@pytest.mark.parametrize("era", sorted(CLIENTS))
async def test_a_task_started_on_one_node_is_polled_fetched_and_cancelled_on_the_other(
        tmp_path, redis_url, node, conformance, era):
    group = ServerGroup(tmp_path, plugins="proxy,redis", config=_node_config(redis_url, node, conformance))
    try:
        a, b = group.start(), group.start()
        async with httpx.AsyncClient(timeout=60) as http:
            for server in (a, b):
                await _mounted(http, server.url, {RESEARCH, "conf_slow_compute"})
            client = await CLIENTS[era](http, a.url).open()
            for tool, quick, long, says in TOOLS.values():
                task_id = await client.start(tool, quick)  # on A
                assert says in await client.outcome(task_id, url=b.url)  # polled and fetched on B
                running = await client.start(tool, long)  # on A
                assert (await client.poll(running, {"working", *TERMINAL}, url=b.url))["status"] == "working"
                await client.cancel(running, url=b.url)  # cancelled on B: A stops it
                assert (await client.poll(running, TERMINAL, url=a.url))["status"] == "cancelled"
    finally:
        group.stop()


@pytest.mark.parametrize("era", sorted(CLIENTS))
async def test_a_question_of_a_task_started_on_one_node_is_answered_on_the_other(
        tmp_path, redis_url, node, conformance, era):
    """The research task asks while it runs on A; the client polls and answers on B (a 2025-11-25
    client on B's tasks/result stream, a 2026-07-28 one with tasks/update there): the answer goes
    through the shared backend to A, which follows the upstream task."""
    group = ServerGroup(tmp_path, plugins="proxy,redis", config=_node_config(redis_url, node, conformance))
    try:
        a, b = group.start(), group.start()
        async with httpx.AsyncClient(timeout=60) as http:
            for server in (a, b):
                await _mounted(http, server.url, {RESEARCH})
            client = await CLIENTS[era](http, a.url).open(capabilities={"elicitation": {}})
            task_id = await client.start(RESEARCH, {"topic": "python", "ambiguous": True})  # on A
            assert (await client.poll(task_id, {"input_required", *TERMINAL}, url=b.url))["status"] == \
                "input_required"
            assert "# Research Report: python (snake)" in await client.answered(task_id, _clarify, url=b.url)
    finally:
        group.stop()
