"""Continuations: a 2026-07-28 handler that must not re-run waits across the input-required round trip.

Normally a question without an answer ends the handler (``InputRequired``) and the client's retry
runs it again from the start (:mod:`mcphost.kernel.modern`). That is wrong for a handler whose
work before the question cannot be repeated: a forwarded call to another MCP server, a payment.
A tool declared ``resumable=True`` instead keeps running in a task of its own: its question
parks it, the request answers with an ``InputRequiredResult`` whose sealed ``requestState``
names the parked run (:data:`CONTINUATION_KEY`), and the retry hands the answers to the waiting
question and answers with whatever the handler does next (its result, or its next questions).

The parked run lives in the process that started it. On a shared backend the retry may reach
another process: it publishes the answers on the continuation's broker channel, the process that
holds the run advances it and publishes the outcome back, as deferred replies are routed.
A run nobody resumes within the state's lifetime is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson

from mcphost.catalog import count_refused
from mcphost.kernel.modern import InputRequired, ModernScope, Round
from mcphost.kernel.scope import question_bytes
from mcphost.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, SERVER_BUSY, McpError
from mcphost.protocol.sealed import params_digest
from mcphost.stats import BUDGET

if TYPE_CHECKING:
    from mcphost.kernel.services import ScopeKernel as Kernel
    from mcphost.request import RequestInfo

log = logging.getLogger("mcphost.kernel")

#: The key under which a sealed requestState names its parked run (never a question key).
CONTINUATION_KEY = "io.mcphost/continuation"
#: Seconds the retrying process waits for the holder of a run on another process to answer.
REMOTE_TIMEOUT = 30.0
_CHANNEL = "c:"


class _Asked:
    """The outcome of a round that ended in questions."""

    __slots__ = ("asked",)

    def __init__(self, asked: dict[str, Any]) -> None:
        self.asked = asked


class Continuation:
    """One parked handler run."""

    __slots__ = ("digest", "expiry", "held", "held_bytes", "id", "outcome", "principal", "round", "scope",
                 "subscription", "task", "waiters")

    def __init__(self, principal: str, digest: str) -> None:
        self.id = secrets.token_urlsafe(18)
        #: Whose run it is: the principal, or for an anonymous caller its address (the quota key);
        #: only the same caller may resume it, whoever else holds its requestState.
        self.principal = principal
        #: Whether it still holds one of its caller's parked-calls budget.
        self.held = False
        #: Bytes of its caller's parked-bytes budget it holds (its arguments and answers, as JSON).
        self.held_bytes = 0
        self.digest = digest
        self.round = Round({})
        self.waiters: dict[str, asyncio.Future[None]] = {}
        self.outcome: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.task: asyncio.Task[Any] | None = None
        self.scope: ContinuationScope | None = None
        self.expiry: asyncio.TimerHandle | None = None
        self.subscription: Any = None

    def asked_now(self) -> None:
        """A question is waiting: end the current round once every question asked together is in."""
        loop = asyncio.get_running_loop()
        # Three turns of the loop let questions asked with asyncio.gather join the same round.
        loop.call_soon(loop.call_soon, loop.call_soon, self._end_round)

    def _end_round(self) -> None:
        if not self.outcome.done() and self.waiters:
            self.outcome.set_result(_Asked(dict(self.round.asked)))


class ContinuationScope(ModernScope):
    """The scope behind ``ctx`` for a resumable 2026-07-28 call: a question waits instead of ending the run."""

    __slots__ = ("continuation",)

    def __init__(self, *args: Any, round: Round, continuation: Continuation) -> None:
        super().__init__(*args, round=round)
        self.continuation = continuation

    async def _missing(self, key: str, method: str, params: dict[str, Any]) -> str:
        run = self.continuation
        if key in self.round.answers:  # answered, but unusable: ask again under a new key
            key = f"{key}~{len(self.round.answers)}"
        async with question_bytes(self._kernel, run.principal, method, params):
            self.round.asked[key] = {"method": method, "params": params}
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            run.waiters[key] = waiter
            run.asked_now()
            try:
                await waiter
            finally:
                run.waiters.pop(key, None)
                self.round.asked.pop(key, None)
        return key

    def follow(self, request: RequestInfo, progress_token: Any) -> None:
        """Send what the handler reports from now on to the retry's stream."""
        self.session = request.session
        self.request_id = request.id
        self.progress_token = progress_token
        self.principal = request.principal


class Continuations:
    """The parked runs of this process (one per kernel)."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.runs: dict[str, Continuation] = {}

    async def call(self, request: RequestInfo, progress_token: Any,
                   start: Callable[[ContinuationScope], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """Run a resumable handler for ``request``, or resume the run its requestState names."""
        assert request.round is not None
        responses = request.params.get("inputResponses")
        if isinstance(responses, dict) and CONTINUATION_KEY in responses:
            raise McpError(INVALID_PARAMS, f"Invalid params: {CONTINUATION_KEY!r} is not a question of this call")
        parked = request.round.answers.get(CONTINUATION_KEY)
        if parked is not None:
            return await self._resume(request, progress_token, str(parked))
        session = request.session
        budgets = self.kernel.sessions.budgets
        # What the run keeps for as long as it lives: its arguments and answers (measured once, as JSON).
        size = len(orjson.dumps(request.params))
        refused = await budgets.take(session.quota, "parked bytes", size)  # across the cluster on a shared backend
        if refused is None:
            refused = await budgets.take(session.quota, "parked calls")
            if refused is not None:
                budgets.release(session.quota, "parked bytes", size)
        if refused is not None:
            self.kernel.sessions.admission.refused(session.quota)
            count_refused(self.kernel.catalog, {"method": request.method, "params": request.params}, BUDGET)
            raise McpError(SERVER_BUSY, refused.message, refused.data)
        run = Continuation(session.quota, params_digest(request.method, request.params))
        run.held = True
        run.held_bytes = size
        run.round.answers.update(request.round.answers)
        scope = ContinuationScope(self.kernel, session, request.id, request.method, progress_token,
                                  request.principal, round=run.round, continuation=run)
        run.scope = scope
        run.task = asyncio.ensure_future(start(scope))
        run.task.add_done_callback(lambda task: self._finished(run, task))
        return await self._outcome(request, run)

    def _finished(self, run: Continuation, task: asyncio.Task[Any]) -> None:
        if not run.outcome.done():
            if task.cancelled():
                run.outcome.cancel()
            elif task.exception() is not None:
                run.outcome.set_exception(task.exception())  # type: ignore[arg-type]
            else:
                run.outcome.set_result(task.result())
        self._forget(run)

    def _forget(self, run: Continuation) -> None:
        self.runs.pop(run.id, None)
        if run.held:
            run.held = False
            self.kernel.sessions.budgets.release(run.principal, "parked calls")
            self.kernel.sessions.budgets.release(run.principal, "parked bytes", run.held_bytes)
        if run.expiry is not None:
            run.expiry.cancel()
        if run.subscription is not None:
            run.subscription()
            run.subscription = None

    async def _outcome(self, request: RequestInfo, run: Continuation) -> dict[str, Any]:
        """Wait for the run to finish or ask; a question parks it and ends this request with InputRequired."""
        try:
            outcome = await asyncio.shield(run.outcome)
        except asyncio.CancelledError:
            if not run.outcome.done() and run.task is not None:
                run.task.cancel()  # the caller went away: the call is abandoned
            raise
        if not isinstance(outcome, _Asked):
            return outcome  # type: ignore[no-any-return]
        self._park(run)
        assert request.round is not None
        request.round.asked.update(outcome.asked)
        request.round.answers[CONTINUATION_KEY] = run.id
        request.round.used.add(CONTINUATION_KEY)
        raise InputRequired

    def _park(self, run: Continuation) -> None:
        run.outcome = asyncio.get_running_loop().create_future()
        self.runs[run.id] = run
        if run.expiry is not None:
            run.expiry.cancel()
        run.expiry = asyncio.get_running_loop().call_later(self.kernel.sealer.ttl, self._expire, run)
        cluster = self.kernel.cluster
        if cluster is not None and run.subscription is None:
            run.subscription = cluster.broker.subscribe(_CHANNEL + run.id,
                                                        lambda message, run=run: self._remote_resume(run, message))

    def _expire(self, run: Continuation) -> None:
        if run.task is not None and not run.task.done():
            log.info("a parked call was not resumed within %gs and is cancelled", self.kernel.sealer.ttl)
            run.task.cancel()
        self._forget(run)

    def _advance(self, run: Continuation, answers: dict[str, Any]) -> None:
        """Hand new answers to the questions waiting for them (the rest ask again at once)."""
        if run.expiry is not None:
            run.expiry.cancel()
            run.expiry = None
        run.round.answers.update({k: v for k, v in answers.items() if k != CONTINUATION_KEY})
        answered = False
        for key, waiter in list(run.waiters.items()):
            if key in run.round.answers and not waiter.done():
                waiter.set_result(None)
                answered = True
        if not answered:
            run.asked_now()

    async def _resume(self, request: RequestInfo, progress_token: Any, run_id: str) -> dict[str, Any]:
        assert request.round is not None
        answers = {k: v for k, v in request.round.answers.items() if k != CONTINUATION_KEY}
        principal, digest = request.session.quota, params_digest(request.method, request.params)
        run = self.runs.get(run_id)
        if run is None:
            if self.kernel.cluster is not None:
                return await self._resume_elsewhere(request, run_id, answers, principal, digest)
            raise _gone()
        if run.principal != principal or run.digest != digest:
            raise _gone()
        self.runs.pop(run_id, None)
        if run.scope is not None:
            run.scope.follow(request, progress_token)
        self._advance(run, answers)
        return await self._outcome(request, run)

    # -- runs parked on another process (shared backend) -----------------------------------------

    async def _resume_elsewhere(self, request: RequestInfo, run_id: str, answers: dict[str, Any],
                                principal: str, digest: str) -> dict[str, Any]:
        cluster = self.kernel.cluster
        assert cluster is not None  # only a shared backend parks runs elsewhere
        reply_channel = f"{_CHANNEL}reply:{secrets.token_urlsafe(12)}"
        reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

        def on_reply(message: dict[str, Any]) -> None:
            if not reply.done():
                reply.set_result(message)

        subscription = cluster.broker.subscribe(reply_channel, on_reply)
        try:
            await subscription.ready()
            await cluster.broker.publish(_CHANNEL + run_id, {
                "t": "resume", "answers": answers, "principal": principal, "digest": digest, "reply": reply_channel})
            try:
                message = await asyncio.wait_for(reply, REMOTE_TIMEOUT)
            except TimeoutError:
                raise _gone() from None
        finally:
            subscription()
        if message.get("gone"):
            raise _gone()
        if "error" in message:
            error = message["error"]
            raise McpError(int(error.get("code", INTERNAL_ERROR)), str(error.get("message", "")), error.get("data"))
        assert request.round is not None
        if "asked" in message:
            request.round.asked.update(message["asked"])
            request.round.answers[CONTINUATION_KEY] = run_id
            request.round.used.add(CONTINUATION_KEY)
            raise InputRequired
        return message["result"]  # type: ignore[no-any-return]

    async def _remote_resume(self, run: Continuation, message: dict[str, Any]) -> None:
        """Another process got the retry of a run parked here: advance it and send the outcome back."""
        cluster = self.kernel.cluster
        reply = message.get("reply")
        if message.get("t") != "resume" or not isinstance(reply, str) or cluster is None:
            return
        if self.runs.get(run.id) is not run or run.principal != message.get("principal") \
                or run.digest != message.get("digest"):
            await cluster.publish(reply, {"gone": True})
            return
        self.runs.pop(run.id, None)
        answers = message.get("answers")
        self._advance(run, answers if isinstance(answers, dict) else {})
        try:
            outcome = await asyncio.shield(run.outcome)
        except McpError as exc:
            await cluster.publish(reply, {"error": exc.to_error()})
            return
        except BaseException:
            await cluster.publish(reply, {"error": {"code": INTERNAL_ERROR, "message": "Internal error"}})
            return
        if isinstance(outcome, _Asked):
            self._park(run)
            await cluster.publish(reply, {"asked": outcome.asked})
        else:
            await cluster.publish(reply, {"result": outcome})


def _gone() -> McpError:
    return McpError(INVALID_PARAMS, "This call can no longer be resumed (it expired, or its server restarted); "
                                    "call the tool again")
