"""The 2026-07-28 tasks extension (``io.modelcontextprotocol/tasks``) in every cell of the matrix.

The conformance plugin's task fixtures (greet, slow_compute, failing_job, protocol_error_job,
confirm_delete, multi_input, test_tool_with_task) on every transport: the same tool API and the
same tasks/* methods in memory, over stdio and over HTTP. 2025-11-25 has tasks in its core
protocol (a ``task`` parameter, tasks/get, tasks/result, tasks/cancel): the session-era tests at
the end. What needs several principals, a listen stream or
other server settings is over HTTP only, in ``test_http_tasks.py``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.support.matrix import MODERN, SESSION_ERA, TASKS, Client

TASK_FIELDS = {"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}
modern_only = pytest.mark.cells(eras=[MODERN], reason="tasks are a 2026-07-28 extension")
#: Seconds to wait for a task to reach a status: generous, for a loaded CI machine (4 xdist workers on
#: 2 busy cores); the waits end as soon as the status is reached.
WAIT = 60.0


async def start_task(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> str:
    created = await client.call_tool(tool, arguments)
    assert created["resultType"] == "task", created
    return created["taskId"]  # type: ignore[no-any-return]


async def wait_for(client: Client, task_id: str, statuses: set[str], *, timeout: float = WAIT) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        task = await client.result("tasks/get", {"taskId": task_id})
        if task["status"] in statuses:
            return task
        assert time.monotonic() < deadline, f"task stuck in {task['status']}: {task}"
        await asyncio.sleep(0.05)


def assert_status(client: Client, http_status: int) -> None:
    """HTTP words a reply with a status too; the other transports have none."""
    assert client.status == (http_status if client.cell.transport == "http" else None), client.status


# -- negotiation ------------------------------------------------------------------------------------------

@modern_only
async def test_discover_advertises_the_extension_and_no_core_tasks_capability(connect):
    async with connect() as client:
        capabilities = (await client.result("server/discover"))["capabilities"]
    assert capabilities["extensions"] == {TASKS: {}}
    assert "tasks" not in capabilities


@modern_only
async def test_without_the_extension_tasks_methods_get_32021_and_optional_tools_run_synchronously(connect):
    async with connect(tasks=False) as client:
        for method, params in (("tasks/get", {"taskId": "x"}),
                               ("tasks/update", {"taskId": "x", "inputResponses": {}}),
                               ("tasks/cancel", {"taskId": "x"})):
            err = await client.error(method, params)
            assert_status(client, 400)
            assert err["code"] == -32021
            assert err["data"]["requiredCapabilities"] == {"extensions": {TASKS: {}}}
        plain = await client.call_tool("slow_compute", {"seconds": 0.5, "label": "sync"})
        assert plain["resultType"] == "complete" and "taskId" not in plain
        assert plain["content"][0]["text"] == "sync: computed after 0.5s"
        err = await client.error("tools/call", {"name": "failing_job", "arguments": {}})
        assert_status(client, 400)
        assert err["code"] == -32021 and err["data"]["requiredCapabilities"]["extensions"] == {TASKS: {}}


@modern_only
async def test_listen_for_tasks_without_the_extension_is_32021(connect):
    async with connect(tasks=False) as client:
        err = await client.error("subscriptions/listen", {"notifications": {"taskIds": ["x"]}})
        assert_status(client, 400)
    assert err["code"] == -32021


@modern_only
async def test_removed_methods_are_404_method_not_found(connect):
    async with connect() as client:
        for method in ("tasks/result", "tasks/list"):
            assert (await client.error(method, {"taskId": "x"}))["code"] == -32601
            assert_status(client, 404)


# -- lifecycle ------------------------------------------------------------------------------------------------

@modern_only
async def test_a_task_is_durable_when_created_and_completes_with_the_inlined_result(connect):
    async with connect() as client:
        created = await client.call_tool("slow_compute", {"seconds": 1, "label": "life"})
        assert created["resultType"] == "task"
        assert TASK_FIELDS <= set(created) and not {"result", "error", "inputRequests", "requestState"} & set(created)
        assert created["status"] == "working" and created["ttlMs"] == 3_600_000 and created["pollIntervalMs"] == 500
        task = await client.result("tasks/get", {"taskId": created["taskId"]})  # at once: durable before the reply
        assert task["status"] == "working" and task["resultType"] == "complete" and "result" not in task
        done = await wait_for(client, created["taskId"], {"completed"})
    assert done["result"]["content"][0]["text"] == "life: computed after 1s"
    assert "io.modelcontextprotocol/related-task" not in (done["result"].get("_meta") or {})
    assert done["lastUpdatedAt"] >= done["createdAt"]


@modern_only
async def test_a_quick_call_of_an_optional_tool_stays_synchronous(connect):
    async with connect() as client:
        quick = await client.call_tool("slow_compute", {"seconds": 0, "label": "now"})
    assert quick["resultType"] == "complete" and quick["content"][0]["text"] == "now: computed after 0s"


@modern_only
async def test_a_protocol_error_fails_the_task_and_a_tool_error_completes_it(connect):
    async with connect() as client:
        failed = await wait_for(client, await start_task(client, "protocol_error_job"), {"failed"})
        assert failed["error"]["code"] == -32603 and "result" not in failed
        errored = await wait_for(client, await start_task(client, "failing_job"), {"completed"})
    assert errored["result"]["isError"] is True


@modern_only
async def test_cancel_settles_to_cancelled_and_is_idempotent(connect):
    async with connect() as client:
        task_id = await start_task(client, "slow_compute", {"seconds": 60})
        ack = await client.result("tasks/cancel", {"taskId": task_id})
        assert ack["resultType"] == "complete" and set(ack) == {"resultType", "_meta"}
        cancelled = await wait_for(client, task_id, {"cancelled", "completed", "failed"}, timeout=30)
        assert cancelled["status"] == "cancelled"
        again = await client.result("tasks/cancel", {"taskId": task_id})
    assert again["resultType"] == "complete" and "status" not in again


@modern_only
async def test_unknown_task_ids_are_32602(connect):
    async with connect() as client:
        for task_id in ("nope", "x" * 5000):
            err = await client.error("tasks/get", {"taskId": task_id})
            assert_status(client, 200)
            assert err["code"] == -32602 and err["message"] == "Unknown task"


# -- questions inside a task -----------------------------------------------------------------------------------

@modern_only
async def test_an_unusable_answer_is_asked_again_under_a_fresh_key(connect):
    async with connect() as client:
        task_id = await start_task(client, "confirm_delete", {"filename": "a.txt"})
        asked = await wait_for(client, task_id, {"input_required"})
        (key, question), = asked["inputRequests"].items()
        assert question["method"] == "elicitation/create"
        assert question["params"]["requestedSchema"]["properties"]["confirm"]["type"] == "boolean"
        wrong = {"action": "accept", "content": {"confirm": "yes"}}  # a string where the schema wants a boolean
        await client.result("tasks/update", {"taskId": task_id, "inputResponses": {key: wrong}})
        again = await wait_for(client, task_id, {"input_required"})
        assert list(again["inputRequests"]) != [key] and len(again["inputRequests"]) == 1  # keys are never reused
        (retry_key,) = again["inputRequests"]
        ack = await client.result("tasks/update", {"taskId": task_id, "inputResponses": {
            retry_key: {"action": "accept", "content": {"confirm": True}}, "unknown-key": {"ignored": True}}})
        assert ack["resultType"] == "complete" and "status" not in ack
        done = await wait_for(client, task_id, {"completed"})
    assert done["result"]["content"][0]["text"] == "Deleted a.txt"


@modern_only
async def test_a_partial_update_leaves_only_the_unanswered_question(connect):
    async with connect() as client:
        task_id = await start_task(client, "multi_input")
        deadline = time.monotonic() + WAIT
        while len((asked := await client.result("tasks/get", {"taskId": task_id})).get("inputRequests") or {}) < 2:
            assert time.monotonic() < deadline, asked
            await asyncio.sleep(0.05)
        first, second = sorted(asked["inputRequests"])
        answer = {"action": "accept", "content": {"name": "Ada", "confirm": True}}
        await client.result("tasks/update", {"taskId": task_id, "inputResponses": {first: answer}})
        partial = await client.result("tasks/get", {"taskId": task_id})
        assert partial["status"] == "input_required" and list(partial["inputRequests"]) == [second]
        await client.result("tasks/update", {"taskId": task_id, "inputResponses": {first: answer}})  # answered
        assert list((await client.result("tasks/get", {"taskId": task_id}))["inputRequests"]) == [second]
        await client.result("tasks/update", {"taskId": task_id, "inputResponses": {second: answer}})
        done = await wait_for(client, task_id, {"completed"})
    assert done["result"]["content"][0]["text"] == "name=Ada confirm=True"


@modern_only
async def test_input_rounds_before_the_task_are_answered_synchronously(connect):
    async with connect() as client:
        first = await client.call_tool("test_tool_with_task")
        assert first["resultType"] == "input_required" and "taskId" not in first
        assert list(first["inputRequests"]) == ["user_name"]
        alice = {"action": "accept", "content": {"name": "Alice"}}
        second = await client.call_tool("test_tool_with_task", requestState=first["requestState"],
                                        inputResponses={"user_name": alice})
        assert second["resultType"] == "task" and "requestState" not in second
        done = await wait_for(client, second["taskId"], {"completed"})
    assert "Alice" in done["result"]["content"][0]["text"]


# -- the session era ----------------------------------------------------------------------------------------------

session_era = pytest.mark.cells(eras=[SESSION_ERA], reason="2025-11-25 has tasks in its core protocol")
LEGACY_TASK_FIELDS = {"taskId", "status", "createdAt", "lastUpdatedAt", "ttl", "pollInterval"}


@session_era
async def test_the_session_era_declares_each_tools_task_support(connect):
    async with connect() as client:
        tools = {tool["name"]: tool for tool in (await client.result("tools/list"))["tools"]}
    assert tools["slow_compute"]["execution"] == {"taskSupport": "optional"}
    assert tools["failing_job"]["execution"] == {"taskSupport": "required"}
    assert "execution" not in tools["echo"]


@session_era
async def test_a_session_era_task_call_is_a_task_at_once_polled_and_its_result_fetched(connect):
    async with connect() as client:
        created = await client.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0.3},
                                                     "task": {"ttl": 60000}})
        task = created["task"]
        assert set(task) == LEGACY_TASK_FIELDS and task["status"] == "working"
        # tasks/result waits for the end and answers what the call would have.
        result = await client.result("tasks/result", {"taskId": task["taskId"]})
        assert result["content"][0]["text"] == "compute: computed after 0.3s"
        assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
        assert (await client.result("tasks/get", {"taskId": task["taskId"]}))["status"] == "completed"
        # Without the task parameter the same tool answers synchronously.
        plain = await client.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}})
        assert "task" not in plain and plain["content"][0]["text"] == "compute: computed after 0s"


@session_era
async def test_a_session_era_task_ending_in_a_tool_error_is_failed_and_its_result_is_the_error_result(connect):
    async with connect() as client:
        created = await client.result("tools/call", {"name": "failing_job", "arguments": {}, "task": {}})
        failed = await wait_for(client, created["task"]["taskId"], {"failed", "completed"})
        assert failed["status"] == "failed"
        result = await client.result("tasks/result", {"taskId": created["task"]["taskId"]})
        assert result["isError"] is True and "failed on purpose" in result["content"][0]["text"]


@session_era
async def test_a_session_era_cancel_answers_the_cancelled_task_and_a_terminal_one_is_32602(connect):
    async with connect() as client:
        created = await client.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60},
                                                     "task": {}})
        task_id = created["task"]["taskId"]
        cancelled = await client.result("tasks/cancel", {"taskId": task_id})
        assert cancelled["status"] == "cancelled" and cancelled["taskId"] == task_id
        assert (await wait_for(client, task_id, {"cancelled", "completed", "failed"}))["status"] == "cancelled"
        assert (await client.error("tasks/cancel", {"taskId": task_id}))["code"] == -32602
        assert (await client.error("tasks/result", {"taskId": task_id}))["code"] == -32800
        assert (await client.error("tasks/get", {"taskId": "no-such-task"}))["code"] == -32602
        assert (await client.error("tasks/update", {"taskId": task_id, "inputResponses": {}}))["code"] == -32601
