"""The 2026-07-28 tasks extension (``io.modelcontextprotocol/tasks``): what needs HTTP or a host of its own.

What tasks do on every transport (negotiation, lifecycle, cancel, questions inside a task, the
session era) is written once in ``test_tasks.py`` and runs in every cell of the interaction matrix.
Here: a real ``mcphost serve`` with the conformance plugin's task fixtures and the ``httpauth``
test plugin, so tasks can be tried across principals (binding to the principal, listen streams
with ``taskIds``), expiry after ``ttlMs`` (a server with its own setting), and in-process hosts
for graceful shutdown and the task cap. The conformance suite scores the happy paths
(tests/interop/test_http_conformance.py).
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
from tests.support.http_plugins.harness import probe_env
from tests.support.http_support import HttpServer, messages_of, modern
from tests.support.modern_support import modern_call

TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS = {"elicitation": {}, "sampling": {}, "extensions": {TASKS: {}}}
WITHOUT_TASKS = {"elicitation": {}, "sampling": {}}
PLUGINS = "demo,conformance,httpauth"
#: httpauth authenticates X-Test-User; requests without it stay anonymous (not 401).
ANONYMOUS_TOO = {"MCPHOST_ALLOW_ANONYMOUS": "true"}


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


# -- expiry, shutdown --------------------------------------------------------------------------------

def test_a_task_is_kept_for_its_ttl_and_then_forgotten(tmp_path: Path):
    env = probe_env(tmp_path, {**ANONYMOUS_TOO, "MCPHOST_TASK_TTL": "2.5"})
    server = HttpServer(tmp_path, plugins=PLUGINS, env=env)
    try:
        with httpx.Client(timeout=15) as client:
            created = call(client, server, "slow_compute", {"seconds": 0.5})
            replied = time.monotonic()  # the ttl counts from creation, which came before this reply
            assert created["ttlMs"] == 2500
            assert wait_for(client, server, created["taskId"], {"completed"})["status"] == "completed"
            time.sleep(max(0.0, replied + 2.5 + 0.3 - time.monotonic()))
            assert error(client, server, "tasks/get", {"taskId": created["taskId"]}, status=200)["code"] == -32602
    finally:
        server.stop()


async def _call_in_process(host: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One 2026-07-28 tools/call from a client with the tasks extension, straight through the kernel."""
    return await modern_call(host, "tools/call", {"name": tool, "arguments": arguments},
                             meta_extra={"io.modelcontextprotocol/clientCapabilities": WITH_TASKS})


async def _started_host(**server: Any) -> Any:
    from mcphost_conformance import ConformancePlugin

    host = make_host(("conformance", ConformancePlugin()), config={"plugins": {"conformance": {"enabled": True}},
                                                                        "server": {"task_after": 0.05, **server}})
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
    assert second["error"]["code"] == -32000 and "tasks budget (server.max_tasks = 1)" in second["error"]["message"]
    assert second["error"]["data"] == {"budget": "tasks", "perPrincipal": False, "retryAfter": 1}
    assert running == 1
