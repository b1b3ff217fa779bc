"""The tasks extension (``io.modelcontextprotocol/tasks``) towards a 2026-07-28 upstream.

When the downstream client declared the extension, the proxy declares it to the upstream too, so
the upstream decides as it would for that client: a tool that requires a task refuses a client
without the extension (-32021), and one that runs as a task answers a ``CreateTaskResult``. The
proxy then makes the host's own call a task as well (``ctx.start_task()``), and follows the upstream
task: it polls ``tasks/get``, forwards the questions a task in ``input_required`` asks (they reach
the client under the upstream's keys) and answers them with ``tasks/update``, and returns the
task's result (``completed``) or error (``failed``). Cancelling the host's call cancels the
upstream task. The ``mcp`` client has no tasks support of its own; its extension interface lets
it accept the ``CreateTaskResult`` shape (a result claim), and the tasks/* requests are sent as
plain requests.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Literal

import mcp_types as types
from mcp import ClientSession, MCPError
from mcp.client.extension import ResultClaim
from pydantic import BaseModel, ConfigDict

import mcphost

EXTENSION = "io.modelcontextprotocol/tasks"
#: Longest pause between two tasks/get polls, whatever pollIntervalMs says.
MAX_POLL_SECONDS = 2.0


class TaskCreated(types.Result):
    """A ``CreateTaskResult``: the call became a task upstream."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"]
    task_id: str
    status: str
    poll_interval_ms: int | None = None


class _TaskRequest(types.Request):  # type: ignore[type-arg]
    """A tasks/* request, sent as it is."""

    name_param: ClassVar[str | None] = "taskId"  # the Mcp-Name header of tasks/* requests
    method: str
    params: dict[str, Any] | None = None


class _Raw(BaseModel):
    model_config = ConfigDict(extra="allow")


async def _never(created: Any, context: Any) -> types.CallToolResult:
    raise RuntimeError("the proxy resolves tasks itself")


CLAIMS = {EXTENSION: [ResultClaim(result_type="task", model=TaskCreated, resolve=_never)]}


async def _send(session: ClientSession, method: str, params: dict[str, Any]) -> dict[str, Any]:
    raw = await session.send_request(_TaskRequest(method=method, params=params), _Raw)
    return raw.model_dump(by_alias=True)


def typed_inputs(requests: dict[str, Any]) -> dict[str, Any]:
    """A task's ``inputRequests`` (wire dicts) as the typed requests the question forwarding takes."""
    typed: dict[str, Any] = {}
    for key, request in requests.items():
        method = request.get("method") if isinstance(request, dict) else None
        models: dict[str, type[BaseModel]] = {
            "elicitation/create": types.ElicitRequest, "sampling/createMessage": types.CreateMessageRequest,
            "roots/list": types.ListRootsRequest}
        model = models.get(str(method))
        if model is None:
            raise mcphost.ToolError(f"The upstream task asked {method!r}, which the proxy cannot forward")
        typed[key] = model.model_validate(request)
    return typed


async def follow(session: ClientSession, ctx: mcphost.Context | None, created: TaskCreated,
                 answer: Callable[[mcphost.Context | None, dict[str, Any]], Awaitable[dict[str, Any]]]) -> Any:
    """Wait for an upstream task to end; its CallToolResult, or the MCPError it failed with."""
    if ctx is not None:
        await ctx.start_task()
    task_id = created.task_id
    delay = (created.poll_interval_ms or 200) / 1000
    try:
        while True:
            task = await _send(session, "tasks/get", {"taskId": task_id})
            status = task.get("status")
            if status == "completed":
                return types.CallToolResult.model_validate(task.get("result") or {"content": []})
            if status == "failed":
                error = task.get("error") or {}
                raise MCPError(code=int(error.get("code", types.INTERNAL_ERROR)),
                               message=str(error.get("message", "The upstream task failed")), data=error.get("data"))
            if status == "cancelled":
                raise mcphost.ToolError("The upstream task was cancelled")
            if status == "input_required" and task.get("inputRequests"):
                responses = await answer(ctx, typed_inputs(dict(task["inputRequests"])))
                await _send(session, "tasks/update", {"taskId": task_id, "inputResponses": {
                    key: value.model_dump(by_alias=True, mode="json", exclude_none=True)
                    for key, value in responses.items()}})
                continue
            interval = task.get("pollIntervalMs")
            if isinstance(interval, int | float) and interval > 0:
                delay = interval / 1000
            await asyncio.sleep(min(delay, MAX_POLL_SECONDS))
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await asyncio.shield(_send(session, "tasks/cancel", {"taskId": task_id}))
        raise
