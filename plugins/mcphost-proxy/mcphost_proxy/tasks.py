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

A 2025-11-25 upstream has tasks in its core protocol instead: a tool whose ``execution.taskSupport``
is ``required`` is called with a ``task`` parameter (:func:`call_as_task`); its ``CreateTaskResult``
nests the task, ``tasks/get`` tells its status and ``tasks/result`` brings the outcome (the questions
a task in ``input_required`` asks arrive on that request, through the client's callbacks). Whatever
the era, a tool that runs only as a task upstream is still answered to a client that calls it
without a task: the proxy follows the task itself (:data:`TASK_ONLY` makes a 2026-07-28 request
declare the extension upstream for it; a 2026-07-28 upstream lists no taskSupport, so its -32021
tells, :func:`needs_task`), and the host declares such a tool ``optional``. With ``bridge_tasks =
false`` a 2026-07-28 client without the extension gets -32021 instead, as from the upstream itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Literal

import mcp_types as types
from mcp import ClientSession, MCPError
from mcp.client.extension import ResultClaim
from pydantic import BaseModel, ConfigDict

import mcphost
from mcphost_proxy import sdk

EXTENSION = "io.modelcontextprotocol/tasks"
#: Longest pause between two tasks/get polls, whatever pollIntervalMs says.
MAX_POLL_SECONDS = 2.0
#: The tool being forwarded runs only as a task upstream: declare the extension to a 2026-07-28
#: upstream whatever the downstream client declared, and follow the task here.
TASK_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("mcphost_proxy_task_only", default=False)


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


class _PlainRequest(types.Request):  # type: ignore[type-arg]
    """A 2025-11-25 request sent as it is (tools/call with ``task``, tasks/get, tasks/result, tasks/cancel)."""

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


async def _send_plain(session: ClientSession, method: str, params: dict[str, Any]) -> dict[str, Any]:
    # Unvalidated: the client would read the reply to tools/call as a CallToolResult, not a task.
    raw = await sdk.raw_request(session, method, params)
    if raw is not None:
        return raw
    result = await session.send_request(_PlainRequest(method=method, params=params), _Raw)
    return result.model_dump(by_alias=True)


def needs_task(error: mcphost.McpError) -> bool:
    """Whether a 2026-07-28 upstream refused a call because the tool runs only as a task (-32021)."""
    data = error.data if isinstance(error.data, dict) else {}
    required = data.get("requiredCapabilities")
    extensions = required.get("extensions") if isinstance(required, dict) else None
    return error.code == -32021 and isinstance(extensions, dict) and EXTENSION in extensions


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


async def call_as_task(session: ClientSession, ctx: mcphost.Context | None, name: str,
                       arguments: dict[str, Any]) -> types.CallToolResult:
    """Call a 2025-11-25 upstream's tool as a task and wait for its outcome (tasks/get, then tasks/result)."""
    created = await _send_plain(session, "tools/call", {"name": name, "arguments": arguments, "task": {}})
    task = created.get("task")
    if not isinstance(task, dict) or not isinstance(task.get("taskId"), str):  # it answered at once
        return types.CallToolResult.model_validate(created)
    if ctx is not None:
        await ctx.start_task()
    task_id = task["taskId"]
    try:
        while task.get("status") in ("working", None):
            interval = task.get("pollInterval")
            delay = interval / 1000 if isinstance(interval, int | float) and interval > 0 else 0.2
            await asyncio.sleep(min(delay, MAX_POLL_SECONDS))
            task = await _send_plain(session, "tasks/get", {"taskId": task_id})
        if task.get("status") == "cancelled":
            raise mcphost.ToolError("The upstream task was cancelled")
        # completed, failed or input_required: tasks/result waits for the end (and carries questions)
        result = await _send_plain(session, "tasks/result", {"taskId": task_id})
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await asyncio.shield(_send_plain(session, "tasks/cancel", {"taskId": task_id}))
        raise
    return types.CallToolResult.model_validate(result)
