"""The tasks extension over stdio: the same tool API and the same tasks/* methods as over HTTP.

A 2026-07-28 client on a ``mcphost serve --stdio`` pipe: a task is created, parks in
``input_required``, is answered with ``tasks/update`` and completes; another is cancelled.
"""

from __future__ import annotations

import time
from typing import Any

from tests.support.stdio_support import RawServer, server_env

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {},
                                                       "extensions": {"io.modelcontextprotocol/tasks": {}}}}


def ask(server: RawServer, method: str, params: dict[str, Any]) -> dict[str, Any]:
    request_id = server.send_request(method, {**params, "_meta": META})
    while True:
        message = server.recv()
        if message.get("id") == request_id:
            assert "result" in message, message
            return message["result"]


def wait_for(server: RawServer, task_id: str, statuses: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        task = ask(server, "tasks/get", {"taskId": task_id})
        if task["status"] in statuses:
            return task
        assert time.monotonic() < deadline, task
        time.sleep(0.05)


def test_tasks_over_stdio(tmp_path):
    server = RawServer(server_env(tmp_path, extra={"MCPHOST_PLUGINS": "demo,conformance"}))
    try:
        created = ask(server, "tools/call", {"name": "confirm_delete", "arguments": {"filename": "pipe.txt"}})
        assert created["resultType"] == "task"
        (key,) = wait_for(server, created["taskId"], {"input_required"})["inputRequests"]
        ack = ask(server, "tasks/update", {"taskId": created["taskId"],
                                           "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}})
        assert ack["resultType"] == "complete"
        done = wait_for(server, created["taskId"], {"completed"})
        assert done["result"]["content"][0]["text"] == "Deleted pipe.txt"
        slow = ask(server, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}})
        ask(server, "tasks/cancel", {"taskId": slow["taskId"]})
        assert wait_for(server, slow["taskId"], {"cancelled", "completed", "failed"})["status"] == "cancelled"
    finally:
        server.close()
