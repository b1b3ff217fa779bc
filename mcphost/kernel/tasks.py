"""The tasks extension of 2026-07-28 (``io.modelcontextprotocol/tasks``): tool calls that outlive their request.

A tool declares ``task="optional"`` or ``task="required"``. When a client that declared the
extension calls it, the handler starts like any other call: questions it asks first are
ordinary input-required rounds, answered synchronously. The call *becomes a task* at the first
of: the handler calling ``ctx.start_task()``, the handler still running after ``task_after``
seconds, or (for ``required`` tools) the handler finishing. From then on the request answers
with a ``CreateTaskResult`` (only after the task record is durable in the backend's task store)
and the handler goes on in the background: its questions park the task in ``input_required``
until ``tasks/update`` brings answers, ``tasks/cancel`` cancels it, and its outcome is kept for
``tasks/get`` until the task's ttl runs out.

Answers and cancellations reach the process running the task through the backend's broker
(channel ``task:<id>``), so with a shared backend any worker can take a ``tasks/*`` request.
Task records are bound to the principal that created them; a foreign or unknown id gets the
same -32602.

A 2025-11-25 session has tasks in its core protocol instead (the ``tasks`` capability, the tool's
``execution.taskSupport``): a ``tools/call`` with a ``task`` parameter becomes a task at once and
answers ``{"task": Task}``; ``tasks/get`` answers the Task, ``tasks/result`` waits for the outcome
and answers what the call would have, and ``tasks/cancel`` answers the Task, cancelled. The same
records and store serve both eras (:func:`legacy_view` shows a record as a 2025-11-25 Task). Such a
task's questions (:class:`LegacyTaskScope`) park it in ``input_required`` as a 2026-07-28 task's
do; the client's ``tasks/result`` request, which 2025-11-25 says carries them, sends each as a
server-to-client request on its own stream (tagged with the related-task ``_meta``) and hands the
answer to the task, wherever it runs (:meth:`TaskManager.result`).
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from mcphost.errors import ClientRequestError
from mcphost.kernel.modern import ModernScope, principal_key
from mcphost.kernel.scope import RequestScope, answered, question_bytes
from mcphost.protocol.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    REQUEST_CANCELLED,
    REQUEST_TIMEOUT,
    SERVER_BUSY,
    McpError,
)
from mcphost.protocol.versions import at_least
from mcphost.sessions.session import Session
from mcphost.stats import BUDGET

if TYPE_CHECKING:
    from mcphost.kernel.services import ScopeKernel as Kernel

log = logging.getLogger("mcphost.tasks")

EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
#: Fields of a stored record that go on the wire (the rest is bookkeeping: owner, expiry).
_TASK_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")
_TASK_FIELDS = ("taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs")


def declares_tasks(session: Session) -> bool:
    """Whether this request's client declared the tasks extension."""
    extensions = session.client_capabilities.get("extensions")
    return isinstance(extensions, dict) and EXTENSION in extensions


def legacy_tasks(session: Session) -> bool:
    """Whether this is a session-era client whose revision has tasks in its core (2025-11-25)."""
    return session.era != "modern" and at_least(session.protocol_version or "", "2025-11-25")


def missing_extension(what: str) -> McpError:
    return McpError(MISSING_CLIENT_CAPABILITY, f"{what} needs the client extension {EXTENSION!r}",
                    {"requiredCapabilities": {"extensions": {EXTENSION: {}}}})


def channel(task_id: str) -> str:
    return f"task:{task_id}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def task_view(record: dict[str, Any]) -> dict[str, Any]:
    """The Task fields of a record (what CreateTaskResult and notifications carry)."""
    return {name: record[name] for name in _TASK_FIELDS if name in record}


def detailed_view(record: dict[str, Any]) -> dict[str, Any]:
    """A DetailedTask: the Task plus outstanding questions, the result or the error, by status."""
    view = task_view(record)
    status = record["status"]
    if status == "input_required":
        view["inputRequests"] = dict(record.get("inputRequests") or {})
    elif status == "completed":
        view["result"] = record["result"]
    elif status == "failed":
        view["error"] = record["error"]
    return view


RELATED_TASK = "io.modelcontextprotocol/related-task"


def legacy_view(record: dict[str, Any]) -> dict[str, Any]:
    """A record as a 2025-11-25 Task (``ttl`` and ``pollInterval``; a tool result with isError is ``failed``)."""
    status = record["status"]
    if status == "completed" and (record.get("result") or {}).get("isError") is True:
        status = "failed"
    view = {"taskId": record["taskId"], "status": status, "createdAt": record["createdAt"],
            "lastUpdatedAt": record["lastUpdatedAt"], "ttl": record.get("ttlMs")}
    if "statusMessage" in record:
        view["statusMessage"] = record["statusMessage"]
    if record.get("pollIntervalMs") is not None:
        view["pollInterval"] = record["pollIntervalMs"]
    return view


def legacy_outcome(record: dict[str, Any]) -> dict[str, Any]:
    """What ``tasks/result`` answers for a task that ended: the call's own result, or its error."""
    related = {RELATED_TASK: {"taskId": record["taskId"]}}
    if record["status"] == "completed":
        result = dict(record["result"])
        result["_meta"] = {**(result.get("_meta") or {}), **related}
        return result
    if record["status"] == "failed":
        error = record.get("error") or {}
        raise McpError(int(error.get("code", INTERNAL_ERROR)), str(error.get("message", "The task failed")),
                       {**(error.get("data") or {}), "taskId": record["taskId"]})
    raise McpError(REQUEST_CANCELLED, "The task was cancelled", {"taskId": record["taskId"]})


class TaskRun:
    """One call of a task-capable tool: synchronous until it escalates, then a task."""

    def __init__(self, manager: TaskManager, session: Session, tool: str, required: bool,
                 legacy: bool = False) -> None:
        self.manager = manager
        self.session = session
        self.tool = tool
        self.required = required
        #: A 2025-11-25 task call: a task from the start, answered {"task": Task}.
        self.legacy = legacy
        self.state = "sync"  # sync -> escalating -> task
        self.record: dict[str, Any] = {}
        self.created: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.handler: asyncio.Task[dict[str, Any]] | None = None
        self.waiters: dict[str, asyncio.Future[Any]] = {}
        self.retries = 0
        self.stopping: str | None = None  # why the host cancelled the handler (shutdown)
        #: Set when the task asks a question (a 2025-11-25 tasks/result waiting here relays it).
        self.asked = asyncio.Event()
        self._unsubscribe: Callable[[], Any] | None = None

    @property
    def task_id(self) -> str | None:
        return self.record.get("taskId")

    # -- the request's side ---------------------------------------------------------------

    async def execute(self, invoke: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """The request's answer: the tool result if it finished in time, else a CreateTaskResult."""
        self.handler = asyncio.get_running_loop().create_task(self._body(invoke))
        if self.legacy:  # the client asked for a task: one at once
            try:
                await self.escalate()
            except BaseException:
                self.handler.cancel()
                raise
            return {"task": legacy_view(self.record)}
        try:
            await asyncio.wait((self.handler, self.created), timeout=self.manager.after,
                               return_when=asyncio.FIRST_COMPLETED)
            if self.state == "sync" and not self.handler.done():
                await self.escalate()  # ran past task_after: the rest runs as a task
            elif self.state == "escalating":
                await asyncio.shield(self.created)
        except BaseException:
            if self.state == "sync":
                self.handler.cancel()  # the client left, or the task could not be created
            raise
        if self.state == "task":
            return {"resultType": "task", **task_view(self.record)}
        result = self.handler.result()  # the handler finished synchronously (or raised)
        if self.required:  # the tool must answer as a task: one that is already complete
            await self.escalate(status="completed", result=result)
            return {"resultType": "task", **task_view(self.record)}
        return result

    async def escalate(self, status: str = "working", result: dict[str, Any] | None = None) -> bool:
        """Turn the call into a task: create the durable record first. True once it is a task."""
        if self.state != "sync":
            await asyncio.shield(self.created)
            return True
        self.state = "escalating"
        manager = self.manager
        budgets = manager.kernel.sessions.budgets
        held = False
        try:
            # The tasks budget: max_tasks_per_principal for the caller, max_tasks for everyone.
            refused = await budgets.take(self.session.quota, "tasks")
            if refused is not None:
                manager.kernel.sessions.admission.refused(self.session.quota)
                entry = manager.kernel.catalog.tools.get(self.tool)
                if entry is not None:
                    entry.stats.refuse(BUDGET)
                raise McpError(SERVER_BUSY, refused.message, refused.data)
            held = True
            now = _now()
            record: dict[str, Any] = {
                "taskId": secrets.token_urlsafe(24), "status": status, "createdAt": now, "lastUpdatedAt": now,
                "ttlMs": int(manager.settings.task_ttl * 1000),
                "pollIntervalMs": manager.settings.task_poll_interval_ms,
                "owner": principal_key(self.session), "tool": self.tool,
                "expires": time.time() + manager.settings.task_ttl, "beat": time.time(),
            }
            if result is not None:
                record["result"] = result
            await manager.store.create(record["taskId"], dict(record), manager.settings.task_ttl)
        except BaseException as exc:
            if held:
                budgets.release(self.session.quota, "tasks")
            # Back to a synchronous call; whoever waited for this attempt hears why it failed.
            self.state = "sync"
            failed, self.created = self.created, asyncio.get_running_loop().create_future()
            failed.set_exception(exc if isinstance(exc, McpError) else
                                 McpError(INTERNAL_ERROR, "The task could not be created"))
            failed.exception()  # marked as retrieved: nobody may be waiting
            raise
        self.record = record
        self.state = "task"
        if status in TERMINAL:
            budgets.release(self.session.quota, "tasks")
        else:
            manager.running[record["taskId"]] = self
            self._unsubscribe = manager.broker.subscribe(channel(record["taskId"]), self.on_message)
            manager.keep_beating()
        self.created.set_result(None)
        return True

    # -- the handler's side ---------------------------------------------------------------

    async def _body(self, invoke: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        try:
            result = await invoke()
        except asyncio.CancelledError:
            if self.state == "sync":
                raise
            _uncancel()
            await self._settle_after_error(asyncio.CancelledError())
            return {}
        except BaseException as exc:
            if self.state == "sync":
                raise  # a synchronous call: the request reports it as usual
            await self._settle_after_error(exc)
            return {}
        if self.state != "sync":
            current = asyncio.current_task()
            if current is not None and current.cancelling():  # cancelled, and it came out as a result
                _uncancel()
                await self._settle_after_error(asyncio.CancelledError())
                return {}
            await asyncio.shield(self.created)
            await self._finish(status="completed", result=result)
        return result

    async def _settle_after_error(self, exc: BaseException) -> None:
        await asyncio.shield(self.created)
        if isinstance(exc, asyncio.CancelledError):
            if self.stopping is not None:
                await self._finish(status="failed", error={"code": INTERNAL_ERROR, "message": self.stopping})
            else:
                await self._finish(status="cancelled", statusMessage="Cancelled at the client's request")
        elif isinstance(exc, McpError):
            await self._finish(status="failed", error=exc.to_error())
        else:
            log.error("task %s (tool %s) failed", self.task_id, self.tool, exc_info=exc)
            await self._finish(status="failed", error={"code": INTERNAL_ERROR, "message": "Internal error"})

    async def _finish(self, **fields: Any) -> None:
        for waiter in self.waiters.values():
            waiter.cancel()
        self.record.pop("inputRequests", None)
        await self._update(**fields)
        task_id = self.record["taskId"]
        if self.manager.running.pop(task_id, None) is not None:
            self.manager.kernel.sessions.budgets.release(self.session.quota, "tasks")
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    async def _update(self, **fields: Any) -> None:
        """Change the record, store it (a fresh copy, keeping the original expiry) and tell listeners."""
        record = dict(self.record)
        record.update(fields)
        record["lastUpdatedAt"] = _now()
        record["beat"] = time.time()
        if "statusMessage" not in fields and fields.get("status") in TERMINAL:
            record.pop("statusMessage", None)
        self.record = record
        try:
            await self.manager.save(record)
        except Exception:
            log.exception("task %s: could not store its new state", record["taskId"])
        await self.manager.kernel.notify_task(record)

    async def ask(self, key: str, method: str, params: dict[str, Any]) -> Any:
        """Park the task in input_required until ``tasks/update`` answers ``key``."""
        await asyncio.shield(self.created)  # the task may still be being created
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiters[key] = future
        requests = dict(self.record.get("inputRequests") or {})
        requests[key] = {"method": method, "params": params}
        try:
            await self._update(status="input_required", inputRequests=requests)
            self.asked.set()
            return await future
        finally:
            self.waiters.pop(key, None)

    async def on_message(self, message: dict[str, Any]) -> None:
        """A tasks/update or tasks/cancel routed here by the broker."""
        if message.get("type") == "cancel":
            if self.handler is not None and not self.handler.done():
                self.handler.cancel()
            return
        answers = message.get("inputResponses")
        if not isinstance(answers, dict) or self.record.get("status") in TERMINAL:
            return
        requests = dict(self.record.get("inputRequests") or {})
        taken = [key for key in answers if key in requests and key in self.waiters]
        if not taken:
            return
        for key in taken:
            del requests[key]
        fields: dict[str, Any] = {"inputRequests": requests}
        if not requests:
            fields["status"] = "working"
        await self._update(**fields)
        for key in taken:
            waiter = self.waiters.get(key)
            if waiter is not None and not waiter.done():
                waiter.set_result(answers[key])

    def next_key(self, key: str) -> str:
        """A fresh key for asking again: keys are never reused over a task's lifetime."""
        self.retries += 1
        return f"{key}.{self.retries}"


class LegacyTaskScope(RequestScope):
    """The scope behind ``ctx`` for a 2025-11-25 task: its request has ended, so a question parks the
    task in ``input_required`` until the client's ``tasks/result`` relays it and brings the answer."""

    __slots__ = ("run",)

    def __init__(self, *args: Any, run: TaskRun) -> None:
        super().__init__(*args)
        self.run = run

    async def start_task(self) -> bool:
        return True  # a task from the start

    async def client_request(self, method: str, params: dict[str, Any], timeout: float | None,
                             key: str | None = None) -> dict[str, Any]:
        self._may_ask(method)
        key = self.run.next_key("question")
        async with question_bytes(self._kernel, self.session.quota, method, params):
            try:
                answer = await asyncio.wait_for(self.run.ask(key, method, params), timeout)
            except TimeoutError:
                raise ClientRequestError(REQUEST_TIMEOUT, f"Request '{method}' timed out") from None
        if not isinstance(answer, dict):
            raise ClientRequestError(INVALID_PARAMS, f"The client answered {method} with a non-object result")
        return answered(method, answer)


class TaskScope(ModernScope):
    """The scope behind ``ctx`` for a call that may become a task."""

    __slots__ = ("run",)

    def __init__(self, *args: Any, round: Any, run: TaskRun) -> None:
        super().__init__(*args, round=round)
        self.run = run

    async def start_task(self) -> bool:
        return await self.run.escalate()

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self.run.state == "sync":
            await super().progress(progress, total, message)
        # A task has no response stream; the extension does not carry progress for tasks.

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        if self.run.state == "sync":
            await super().log(level, data, logger)

    async def _missing(self, key: str, method: str, params: dict[str, Any]) -> str:
        if self.run.state == "sync":
            return await super()._missing(key, method, params)
        if key in self.round.answers:  # answered, but unusable: ask again under a new key
            key = self.run.next_key(key)
        async with question_bytes(self._kernel, self.session.quota, method, params):
            self.round.answers[key] = await self.run.ask(key, method, params)
        return key


def _relayed(relay: asyncio.Future[None]) -> None:
    if not relay.cancelled() and relay.exception() is not None:
        log.error("a question of a 2025-11-25 task could not be relayed", exc_info=relay.exception())


def _uncancel() -> None:
    task = asyncio.current_task()
    if task is not None:
        while task.cancelling():
            task.uncancel()


class TaskManager:
    """The tasks this process runs, and the tasks/* methods over the backend's task store."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.settings = kernel.settings
        self.after = kernel.settings.task_after
        self.running: dict[str, TaskRun] = {}
        self._beating: asyncio.Task[None] | None = None

    @property
    def store(self) -> Any:
        return self.kernel.services.backend.tasks

    @property
    def broker(self) -> Any:
        return self.kernel.services.backend.broker

    def begin(self, session: Session, tool: str, support: str, params: dict[str, Any]) -> TaskRun | None:
        """A TaskRun when this call may become a task, None for an ordinary call (-32021 if it cannot be one).

        A 2025-11-25 call is a task when it asks for one (``params.task``) of a tool that may run as one."""
        if support == "forbidden":
            return None
        if session.era != "modern":
            wanted = isinstance(params.get("task"), dict) and legacy_tasks(session)
            return TaskRun(self, session, tool, required=False, legacy=True) if wanted else None
        if not declares_tasks(session):
            if support == "required":
                raise missing_extension(f"Tool {tool!r} runs only as a task; it")
            return None
        return TaskRun(self, session, tool, required=support == "required")

    @property
    def lease(self) -> float:
        return self.settings.task_lease

    def keep_beating(self) -> None:
        """On a shared backend, restamp running tasks every third of a lease: proof that a process runs them."""
        if self.kernel.services.backend.shared and (self._beating is None or self._beating.done()):
            self._beating = asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self) -> None:
        while self.running:
            await asyncio.sleep(self.lease / 3)
            for run in list(self.running.values()):
                if run.state == "task" and run.record.get("status") not in TERMINAL:
                    run.record = {**run.record, "beat": time.time()}
                    try:
                        await self.save(run.record)
                    except Exception:
                        log.warning("task %s: heartbeat not stored", run.task_id, exc_info=True)

    async def _orphaned(self, record: dict[str, Any]) -> dict[str, Any]:
        """A running task nobody has restamped for a lease (its process died): failed, and stored so."""
        record = {**record, "status": "failed", "lastUpdatedAt": _now(),
                  "error": {"code": INTERNAL_ERROR, "message": "The process running this task stopped"}}
        record.pop("inputRequests", None)
        record.pop("statusMessage", None)
        try:
            await self.save(record)
        except Exception:
            log.warning("task %s: could not store it as failed", record["taskId"], exc_info=True)
        await self.kernel.notify_task(record)
        return record

    async def save(self, record: dict[str, Any]) -> None:
        remaining = max(record["expires"] - time.time(), 0.001)
        await self.store.save(record["taskId"], record, remaining)

    async def load(self, session: Session, params: dict[str, Any]) -> dict[str, Any]:
        """The caller's task named in ``params``; unknown, expired and foreign ids look the same."""
        if session.era != "modern":
            if not legacy_tasks(session):
                raise McpError(METHOD_NOT_FOUND, "Method not found")
        elif not declares_tasks(session):
            raise missing_extension("The tasks/* methods")
        task_id = params.get("taskId")
        if not isinstance(task_id, str):
            raise McpError(INVALID_PARAMS, 'Invalid params: "taskId" must be a string')
        # Only ids this host mints (token_urlsafe) reach the store, whatever backend it is.
        record = await self.store.load(task_id) if _TASK_ID.fullmatch(task_id) else None
        if record is None or record.get("owner") != principal_key(session):
            raise McpError(INVALID_PARAMS, "Unknown task", {"taskId": task_id[:200]})
        if (record["status"] not in TERMINAL and task_id not in self.running
                and time.time() - record.get("beat", time.time()) > self.lease):
            record = await self._orphaned(record)
        return record

    async def get(self, session: Session, params: dict[str, Any]) -> dict[str, Any]:
        record = await self.load(session, params)
        return detailed_view(record) if session.era == "modern" else legacy_view(record)

    async def result(self, session: Session, params: dict[str, Any],
                     scope: RequestScope | None = None) -> dict[str, Any]:
        """2025-11-25 ``tasks/result``: wait until the task ends, then answer what its call would have.

        Meanwhile each question the task asks is sent to the client on this request's stream
        (through ``scope``), and its answer handed to the task (:meth:`_relay`)."""
        if session.era == "modern":
            raise McpError(METHOD_NOT_FOUND, "Method not found")
        record = await self.load(session, params)
        relays: dict[str, asyncio.Future[None]] = {}
        try:
            while record["status"] not in TERMINAL:
                run = self.running.get(record["taskId"])
                if run is not None:
                    run.asked.clear()  # set again by a question asked from now on
                    record = await self.load(session, params)
                if scope is not None and record["status"] == "input_required":
                    for key, question in (record.get("inputRequests") or {}).items():
                        if key not in relays:
                            relays[key] = asyncio.ensure_future(self._relay(scope, record["taskId"], key, question))
                            relays[key].add_done_callback(_relayed)
                if run is not None and run.handler is not None:  # runs here: wait for its end or a question
                    asked = asyncio.ensure_future(run.asked.wait())
                    waits: list[asyncio.Future[Any]] = [run.handler, asked]
                    waits.extend(relay for relay in relays.values() if not relay.done())
                    try:
                        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        asked.cancel()
                else:  # runs in another process: look again at its poll interval
                    await asyncio.sleep(max(self.settings.task_poll_interval_ms, 50) / 1000)
                record = await self.load(session, params)
        finally:
            for relay in relays.values():
                relay.cancel()
        return legacy_outcome(record)

    async def _relay(self, scope: RequestScope, task_id: str, key: str, question: dict[str, Any]) -> None:
        """Ask the client one question of a 2025-11-25 task, on ``tasks/result``'s stream; give the task
        the answer (or the client's error) as a JSON-RPC response, as a tasks/update would."""
        method = str(question.get("method"))
        params = dict(question.get("params") or {})
        params["_meta"] = {**(params.get("_meta") or {}), RELATED_TASK: {"taskId": task_id}}
        try:
            answer: dict[str, Any] = {"result": await scope.client_request(method, params, None)}
        except ClientRequestError as exc:
            error = {"code": exc.code, "message": exc.message}
            answer = {"error": error if exc.data is None else {**error, "data": exc.data}}
        record = await self.store.load(task_id)
        if record is not None:
            await self._answer(record, {key: answer})

    async def update(self, session: Session, params: dict[str, Any]) -> dict[str, Any]:
        record = await self.load(session, params)
        answers = params.get("inputResponses")
        if not isinstance(answers, dict):
            raise McpError(INVALID_PARAMS, 'Invalid params: "inputResponses" must be an object')
        await self._answer(record, answers)
        return {}  # unknown or already-answered keys are ignored

    async def _answer(self, record: dict[str, Any], answers: dict[str, Any]) -> None:
        """Hand answers to the task's outstanding questions, wherever the task runs."""
        outstanding = record.get("inputRequests") or {}
        taken = {key: value for key, value in answers.items() if key in outstanding}
        if taken and record["status"] not in TERMINAL:
            # Reflect the answers in the record at once, so a tasks/get right after this ack
            # sees them taken; then wake the handler wherever it runs.
            left = {key: value for key, value in outstanding.items() if key not in taken}
            record = {**record, "inputRequests": left, "lastUpdatedAt": _now()}
            if not left:
                record["status"] = "working"
            message = {"type": "update", "inputResponses": taken}
            run = self.running.get(record["taskId"])
            if run is not None:
                await run.on_message(message)
            else:  # another process runs it
                await self.save(record)
                await self.broker.publish(channel(record["taskId"]), message)

    async def cancel(self, session: Session, params: dict[str, Any]) -> dict[str, Any]:
        record = await self.load(session, params)
        if session.era != "modern":
            return await self._cancel_legacy(record)
        if record["status"] not in TERMINAL:
            run = self.running.get(record["taskId"])
            if run is not None:
                await run.on_message({"type": "cancel"})
            else:
                await self.broker.publish(channel(record["taskId"]), {"type": "cancel"})
        return {}  # an acknowledgement; the status settles to cancelled (tasks/get tells)

    async def _cancel_legacy(self, record: dict[str, Any]) -> dict[str, Any]:
        """2025-11-25: the task is ``cancelled`` before the reply (a terminal one: -32602), then stopped."""
        if record["status"] in TERMINAL:
            raise McpError(INVALID_PARAMS, f"The task is already {record['status']}", {"taskId": record["taskId"]})
        record = {**record, "status": "cancelled", "lastUpdatedAt": _now(),
                  "statusMessage": "Cancelled at the client's request"}
        record.pop("inputRequests", None)
        await self.save(record)  # whoever looks next sees it cancelled; its process then stops it
        run = self.running.get(record["taskId"])
        if run is not None:
            await run.on_message({"type": "cancel"})
        else:
            await self.broker.publish(channel(record["taskId"]), {"type": "cancel"})
        return legacy_view(record)

    async def stop(self, reason: str = "The server stopped before the task finished") -> None:
        """Fail every task this process runs (shutdown), so no client waits on a task nobody runs."""
        if self._beating is not None:
            self._beating.cancel()
        runs = [run for run in self.running.values() if run.handler is not None and not run.handler.done()]
        for run in runs:
            run.stopping = reason
            run.handler.cancel()  # type: ignore[union-attr]  # runs holds only runs with a handler
        if runs:
            await asyncio.gather(*(run.handler for run in runs), return_exceptions=True)  # type: ignore[arg-type]  # as above


__all__ = ["EXTENSION", "LegacyTaskScope", "TaskManager", "TaskRun", "TaskScope", "declares_tasks"]
