"""The 2026-07-28 tasks extension (``io.modelcontextprotocol/tasks``) over real HTTP.

A real ``mcphost serve`` with the conformance plugin's task fixtures (greet, slow_compute,
failing_job, protocol_error_job, confirm_delete, multi_input, test_tool_with_task) and the
``httpauth`` test plugin, so tasks can be tried across principals. The conformance suite scores
the happy paths (tests/interop/test_http_conformance.py); these tests pin the rest: binding to the
principal, re-asking a malformed in-task answer under a fresh key, partial updates, listen
streams with ``taskIds``, expiry after ``ttlMs``, the session era and graceful shutdown.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcphost.testing import make_host
from tests.interaction.test_http_modern import messages_of, modern
from tests.support.http_plugins.harness import probe_env
from tests.support.http_support import HttpServer
from tests.support.modern_support import modern_call

TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS = {"elicitation": {}, "sampling": {}, "extensions": {TASKS: {}}}
WITHOUT_TASKS = {"elicitation": {}, "sampling": {}}
PLUGINS = "demo,conformance,httpauth"
#: httpauth authenticates X-Test-User; requests without it stay anonymous (not 401).
ANONYMOUS_TOO = {"MCPHOST_ALLOW_ANONYMOUS": "true"}
TASK_FIELDS = {"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}


def request(method: str, params: dict[str, Any] | None = None, *, tasks: bool = True,
            user: str | None = None, request_id: int = 1) -> tuple[dict[str, Any], dict[str, str]]:
    params = dict(params or {})
    message, headers = modern(method, params, request_id=request_id,
                              name=params.get("taskId") if method.startswith("tasks/") else None,
                              meta_extra={"io.modelcontextprotocol/clientCapabilities":
                                          WITH_TASKS if tasks else WITHOUT_TASKS})
    if user is not None:
        headers["X-Test-User"] = user
    return message, headers


def post(client: httpx.Client, server: HttpServer, sent: tuple[dict[str, Any], dict[str, str]]
         ) -> tuple[httpx.Response, dict[str, Any]]:
    message, headers = sent
    response = client.post(server.url, headers=headers, content=json.dumps(message))
    found = messages_of(response)
    assert found, (response.status_code, response.text)
    return response, found[-1]


def result(client: httpx.Client, server: HttpServer, method: str, params: dict[str, Any] | None = None,
           **options: Any) -> dict[str, Any]:
    response, reply = post(client, server, request(method, params, **options))
    assert response.status_code == 200 and "result" in reply, (response.status_code, reply)
    return reply["result"]


def error(client: httpx.Client, server: HttpServer, method: str, params: dict[str, Any] | None = None, *,
          status: int, **options: Any) -> dict[str, Any]:
    response, reply = post(client, server, request(method, params, **options))
    assert response.status_code == status and "error" in reply, (response.status_code, reply)
    return reply["error"]


def call(client: httpx.Client, server: HttpServer, tool: str, arguments: dict[str, Any] | None = None,
         **options: Any) -> dict[str, Any]:
    return result(client, server, "tools/call", {"name": tool, "arguments": arguments or {}}, **options)


def start_task(client: httpx.Client, server: HttpServer, tool: str, arguments: dict[str, Any] | None = None,
               **options: Any) -> str:
    created = call(client, server, tool, arguments, **options)
    assert created["resultType"] == "task", created
    return created["taskId"]


def wait_for(client: httpx.Client, server: HttpServer, task_id: str, statuses: set[str], *,
             timeout: float = 10.0, **options: Any) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        task = result(client, server, "tasks/get", {"taskId": task_id}, **options)
        if task["status"] in statuses:
            return task
        assert time.monotonic() < deadline, f"task stuck in {task['status']}: {task}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    root = tmp_path_factory.mktemp("http-tasks")
    server = HttpServer(root, plugins=PLUGINS, env=probe_env(root, ANONYMOUS_TOO))
    yield server
    server.stop()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=15) as client:
        yield client


# -- negotiation ------------------------------------------------------------------------------------------

def test_discover_advertises_the_extension_and_no_core_tasks_capability(server, client):
    capabilities = result(client, server, "server/discover")["capabilities"]
    assert capabilities["extensions"] == {TASKS: {}}
    assert "tasks" not in capabilities


def test_a_host_without_task_capable_tools_does_not_advertise_it():
    host = make_host(("plain", _Plain()))
    host.prepare()
    assert host.extensions() == {}


class _Plain:
    import mcphost as _m

    @_m.hookimpl
    def mcphost_tools(self, host: Any) -> list[Any]:
        import mcphost

        @mcphost.tool
        def hello() -> str:
            """Say hello."""
            return "hello"

        return [hello]


def test_without_the_extension_tasks_methods_get_32021_and_optional_tools_run_synchronously(server, client):
    for method, params in (("tasks/get", {"taskId": "x"}), ("tasks/update", {"taskId": "x", "inputResponses": {}}),
                           ("tasks/cancel", {"taskId": "x"})):
        err = error(client, server, method, params, status=400, tasks=False)
        assert err["code"] == -32021
        assert err["data"]["requiredCapabilities"] == {"extensions": {TASKS: {}}}
    plain = call(client, server, "slow_compute", {"seconds": 0.5, "label": "sync"}, tasks=False)
    assert plain["resultType"] == "complete" and "taskId" not in plain
    assert plain["content"][0]["text"] == "sync: computed after 0.5s"
    err = error(client, server, "tools/call", {"name": "failing_job", "arguments": {}}, status=400, tasks=False)
    assert err["code"] == -32021 and err["data"]["requiredCapabilities"]["extensions"] == {TASKS: {}}


def test_removed_methods_are_404_method_not_found(server, client):
    for method in ("tasks/result", "tasks/list"):
        assert error(client, server, method, {"taskId": "x"}, status=404)["code"] == -32601


# -- lifecycle ------------------------------------------------------------------------------------------------

def test_a_task_is_durable_when_created_and_completes_with_the_inlined_result(server, client):
    created = call(client, server, "slow_compute", {"seconds": 1, "label": "life"})
    assert created["resultType"] == "task"
    assert TASK_FIELDS <= set(created) and not {"result", "error", "inputRequests", "requestState"} & set(created)
    assert created["status"] == "working" and created["ttlMs"] == 3_600_000 and created["pollIntervalMs"] == 500
    task = result(client, server, "tasks/get", {"taskId": created["taskId"]})  # at once: durable before the reply
    assert task["status"] == "working" and task["resultType"] == "complete" and "result" not in task
    done = wait_for(client, server, created["taskId"], {"completed"})
    assert done["result"]["content"][0]["text"] == "life: computed after 1s"
    assert "io.modelcontextprotocol/related-task" not in (done["result"].get("_meta") or {})
    assert done["lastUpdatedAt"] >= done["createdAt"]


def test_a_quick_call_of_an_optional_tool_stays_synchronous(server, client):
    quick = call(client, server, "slow_compute", {"seconds": 0, "label": "now"})
    assert quick["resultType"] == "complete" and quick["content"][0]["text"] == "now: computed after 0s"


def test_a_protocol_error_fails_the_task_and_a_tool_error_completes_it(server, client):
    failed = wait_for(client, server, start_task(client, server, "protocol_error_job"), {"failed"})
    assert failed["error"]["code"] == -32603 and "result" not in failed
    errored = wait_for(client, server, start_task(client, server, "failing_job"), {"completed"})
    assert errored["result"]["isError"] is True


def test_cancel_settles_to_cancelled_and_is_idempotent(server, client):
    task_id = start_task(client, server, "slow_compute", {"seconds": 60})
    ack = result(client, server, "tasks/cancel", {"taskId": task_id})
    assert ack["resultType"] == "complete" and set(ack) == {"resultType", "_meta"}
    cancelled = wait_for(client, server, task_id, {"cancelled", "completed", "failed"}, timeout=3)
    assert cancelled["status"] == "cancelled"
    again = result(client, server, "tasks/cancel", {"taskId": task_id})
    assert again["resultType"] == "complete" and "status" not in again


def test_unknown_task_ids_are_32602(server, client):
    for task_id in ("nope", "x" * 5000):
        err = error(client, server, "tasks/get", {"taskId": task_id}, status=200)
        assert err["code"] == -32602 and err["message"] == "Unknown task"


# -- binding to the principal ---------------------------------------------------------------------------------

def test_a_task_is_invisible_to_another_principal_and_to_anonymous_callers(server, client):
    task_id = start_task(client, server, "slow_compute", {"seconds": 30}, user="alice")
    mine = result(client, server, "tasks/get", {"taskId": task_id}, user="alice")
    assert mine["status"] == "working"
    foreign = error(client, server, "tasks/get", {"taskId": task_id}, status=200, user="bob")
    unknown = error(client, server, "tasks/get", {"taskId": "no-such-task"}, status=200, user="bob")
    assert foreign["code"] == unknown["code"] == -32602 and foreign["message"] == unknown["message"]
    assert error(client, server, "tasks/get", {"taskId": task_id}, status=200)["code"] == -32602
    assert error(client, server, "tasks/cancel", {"taskId": task_id}, status=200, user="bob")["code"] == -32602
    assert result(client, server, "tasks/get", {"taskId": task_id}, user="alice")["status"] == "working"
    result(client, server, "tasks/cancel", {"taskId": task_id}, user="alice")
    assert wait_for(client, server, task_id, {"cancelled"}, user="alice")["status"] == "cancelled"


# -- questions inside a task -----------------------------------------------------------------------------------

def test_an_unusable_answer_is_asked_again_under_a_fresh_key(server, client):
    task_id = start_task(client, server, "confirm_delete", {"filename": "a.txt"})
    asked = wait_for(client, server, task_id, {"input_required"})
    (key, question), = asked["inputRequests"].items()
    assert question["method"] == "elicitation/create"
    assert question["params"]["requestedSchema"]["properties"]["confirm"]["type"] == "boolean"
    wrong = {"action": "accept", "content": {"confirm": "yes"}}  # a string where the schema wants a boolean
    result(client, server, "tasks/update", {"taskId": task_id, "inputResponses": {key: wrong}})
    again = wait_for(client, server, task_id, {"input_required"})
    assert list(again["inputRequests"]) != [key] and len(again["inputRequests"]) == 1  # keys are never reused
    (retry_key,) = again["inputRequests"]
    ack = result(client, server, "tasks/update", {"taskId": task_id, "inputResponses": {
        retry_key: {"action": "accept", "content": {"confirm": True}}, "unknown-key": {"ignored": True}}})
    assert ack["resultType"] == "complete" and "status" not in ack
    done = wait_for(client, server, task_id, {"completed"})
    assert done["result"]["content"][0]["text"] == "Deleted a.txt"


def test_a_partial_update_leaves_only_the_unanswered_question(server, client):
    task_id = start_task(client, server, "multi_input")
    deadline = time.monotonic() + 5
    while len((asked := result(client, server, "tasks/get", {"taskId": task_id})).get("inputRequests") or {}) < 2:
        assert time.monotonic() < deadline, asked
        time.sleep(0.05)
    first, second = sorted(asked["inputRequests"])
    answer = {"action": "accept", "content": {"name": "Ada", "confirm": True}}
    result(client, server, "tasks/update", {"taskId": task_id, "inputResponses": {first: answer}})
    partial = result(client, server, "tasks/get", {"taskId": task_id})
    assert partial["status"] == "input_required" and list(partial["inputRequests"]) == [second]
    result(client, server, "tasks/update", {"taskId": task_id, "inputResponses": {first: answer}})  # already answered
    assert list(result(client, server, "tasks/get", {"taskId": task_id})["inputRequests"]) == [second]
    result(client, server, "tasks/update", {"taskId": task_id, "inputResponses": {second: answer}})
    done = wait_for(client, server, task_id, {"completed"})
    assert done["result"]["content"][0]["text"] == "name=Ada confirm=True"


def test_input_rounds_before_the_task_are_answered_synchronously(server, client):
    first = call(client, server, "test_tool_with_task")
    assert first["resultType"] == "input_required" and "taskId" not in first
    assert list(first["inputRequests"]) == ["user_name"]
    alice = {"action": "accept", "content": {"name": "Alice"}}
    second = result(client, server, "tools/call", {"name": "test_tool_with_task", "arguments": {},
                                                   "requestState": first["requestState"],
                                                   "inputResponses": {"user_name": alice}})
    assert second["resultType"] == "task" and "requestState" not in second
    done = wait_for(client, server, second["taskId"], {"completed"})
    assert "Alice" in done["result"]["content"][0]["text"]


# -- listen streams ---------------------------------------------------------------------------------------------

def test_listen_delivers_status_notifications_for_the_callers_own_tasks(server, client):
    mine = start_task(client, server, "confirm_delete", {"filename": "b.txt"}, user="alice")
    theirs = start_task(client, server, "slow_compute", {"seconds": 30}, user="bob")
    message, headers = request("subscriptions/listen", {"notifications": {"taskIds": [mine, theirs, "nope"]}},
                               user="alice", request_id=7)
    received: list[dict[str, Any]] = []
    acknowledged = threading.Event()

    def listen() -> None:
        with httpx.Client(timeout=15) as listener, listener.stream("POST", server.url, headers=headers,
                                                                   content=json.dumps(message)) as response:
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue
                received.append(json.loads(line[5:]))
                if received[-1]["method"] == "notifications/subscriptions/acknowledged":
                    acknowledged.set()
                if received[-1].get("params", {}).get("status") == "completed":
                    return

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    assert acknowledged.wait(10), received
    assert received[0]["params"]["notifications"] == {"taskIds": [mine]}  # bob's and unknown ids refused
    key = next(iter(wait_for(client, server, mine, {"input_required"}, user="alice")["inputRequests"]))
    result(client, server, "tasks/update", {"taskId": mine, "inputResponses": {
        key: {"action": "accept", "content": {"confirm": True}}}}, user="alice")
    thread.join(10)
    assert not thread.is_alive(), received
    updates = [m for m in received if m["method"] == "notifications/tasks"]
    assert updates and all(m["params"]["taskId"] == mine for m in updates)
    assert all(m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 7 for m in updates)
    assert updates[-1]["params"]["status"] == "completed"
    assert updates[-1]["params"]["result"]["content"][0]["text"] == "Deleted b.txt"
    result(client, server, "tasks/cancel", {"taskId": theirs}, user="bob")


def test_listen_for_tasks_without_the_extension_is_32021(server, client):
    err = error(client, server, "subscriptions/listen", {"notifications": {"taskIds": ["x"]}}, status=400, tasks=False)
    assert err["code"] == -32021


# -- expiry, session era, shutdown --------------------------------------------------------------------------------

def test_a_task_is_kept_for_its_ttl_and_then_forgotten(tmp_path: Path):
    env = probe_env(tmp_path, {**ANONYMOUS_TOO, "MCPHOST_TASK_TTL": "1.5"})
    server = HttpServer(tmp_path, plugins=PLUGINS, env=env)
    try:
        with httpx.Client(timeout=15) as client:
            created = call(client, server, "slow_compute", {"seconds": 0.5})
            assert created["ttlMs"] == 1500
            assert wait_for(client, server, created["taskId"], {"completed"})["status"] == "completed"
            time.sleep(1.2)
            assert error(client, server, "tasks/get", {"taskId": created["taskId"]}, status=200)["code"] == -32602
    finally:
        server.stop()


def test_the_session_era_runs_task_tools_synchronously_and_has_no_tasks_methods(server, client):
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    response = client.post(server.url, headers=headers, content=json.dumps(init))
    session_headers = {**headers, "mcp-session-id": response.headers["mcp-session-id"],
                       "mcp-protocol-version": "2025-11-25"}
    call_message = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "failing_job", "arguments": {}, "task": {"ttl": 1000}}}
    reply = messages_of(client.post(server.url, headers=session_headers, content=json.dumps(call_message)))[-1]
    assert reply["result"]["isError"] is True and "taskId" not in reply["result"]
    get = {"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": "x"}}
    assert messages_of(client.post(server.url, headers=session_headers,
                                   content=json.dumps(get)))[-1]["error"]["code"] == -32601


async def _call_in_process(host: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One 2026-07-28 tools/call from a client with the tasks extension, straight through the kernel."""
    return await modern_call(host, "tools/call", {"name": tool, "arguments": arguments},
                             meta_extra={"io.modelcontextprotocol/clientCapabilities": WITH_TASKS})


async def _started_host(**server: Any) -> Any:
    from mcphost_conformance import ConformancePlugin

    host = make_host(("conformance", ConformancePlugin()), config={"server": {"task_after": 0.05, **server}})
    host.prepare()
    await host.start()
    return host


def test_shutdown_fails_the_tasks_still_running():
    async def scenario() -> dict[str, Any]:
        host = await _started_host()
        reply = await _call_in_process(host, "slow_compute", {"seconds": 60})
        await host.stop()
        return await host.backend.tasks.load(reply["result"]["taskId"])

    record = asyncio.run(scenario())
    assert record["status"] == "failed"
    assert record["error"]["message"] == "The server stopped before the task finished"


def test_beyond_max_tasks_a_call_is_refused_and_its_handler_stopped():
    async def scenario() -> tuple[dict[str, Any], dict[str, Any], int]:
        host = await _started_host(max_tasks=1)
        first = await _call_in_process(host, "slow_compute", {"seconds": 60})
        second = await _call_in_process(host, "slow_compute", {"seconds": 60})
        running = len(host.kernel.tasks.running)
        await host.stop()
        return first, second, running

    first, second, running = asyncio.run(scenario())
    assert first["result"]["resultType"] == "task"
    assert second["error"]["code"] == -32000 and "Too many tasks" in second["error"]["message"]
    assert running == 1
