"""The 2026-07-28 (stateless) side of the kernel: input-required rounds and per-request sessions.

A modern request carries everything about its client in ``_meta``; the kernel builds a
short-lived :class:`Session` for it and runs the same handlers as the session era. What
differs is how a handler's questions reach the client: there are no server-to-client
requests. ``ctx.elicit`` / ``sample`` / ``list_roots`` look for an answer among the request's
``inputResponses`` (and the answers sealed into ``requestState`` by earlier rounds); when one
is missing the question is recorded and :class:`InputRequired` ends the handler. The request
then answers with an ``InputRequiredResult`` listing every question asked so far in this run,
and a ``requestState`` sealing the answers gathered, so the retry runs the handler again and
each question gets its answer by key. Handlers must be safe to re-run up to their last question.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol, cast

from mcphost.context import ElicitResult
from mcphost.errors import ClientRequestError, HostSignal
from mcphost.kernel.scope import RequestScope
from mcphost.kernel.visibility import Visibility
from mcphost.protocol.errors import INVALID_PARAMS, MISSING_CLIENT_CAPABILITY, McpError
from mcphost.protocol.sealed import StateRejected, params_digest
from mcphost.request import RequestInfo

if TYPE_CHECKING:
    from mcphost.catalog import Catalog
    from mcphost.config import ServerSettings
    from mcphost.kernel.services import Services
    from mcphost.protocol.jsonrpc import RequestId
    from mcphost.protocol.sealed import StateSealer
    from mcphost.sessions.session import Connection, Session

SERVER_INFO = "io.modelcontextprotocol/serverInfo"
CACHEABLE = frozenset({"server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list",
                       "resources/read"})
#: Methods whose result may be an InputRequiredResult.
MRTR_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
#: The client capability each question needs; also the prefix of its default key.
_CAPABILITY = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}


def principal_key(session: Any) -> str | None:
    """The caller's identity as sealed request states and task records are bound to it (None: anonymous)."""
    return None if session.principal is None else repr(session.principal.key)


class InputRequired(HostSignal):
    """Raised inside a handler when an answer is missing; the request ends with InputRequiredResult.

    A BaseException, like CancelledError, so that a handler's ``except Exception`` around
    ``ctx.elicit`` cannot swallow it.
    """


class Round:
    """One run of a handler: the answers available and the questions still open."""

    __slots__ = ("answers", "asked", "counters", "used")

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.asked: dict[str, dict[str, Any]] = {}
        self.counters: dict[str, int] = {}
        self.used: set[str] = set()  # keys whose answers the handler took

    def key(self, method: str, given: str | None) -> str:
        if given is not None:
            return given
        kind = _CAPABILITY[method]
        self.counters[kind] = number = self.counters.get(kind, 0) + 1
        return f"{kind}-{number}"

    def ask(self, key: str, method: str, params: dict[str, Any]) -> InputRequired:
        self.asked[key] = {"method": method, "params": params}
        return InputRequired(key)


def _well_formed(method: str, answer: Any) -> bool:
    """Whether an answer has the shape of the result it stands for (else the question is asked again)."""
    if not isinstance(answer, dict):
        return False
    if method == "roots/list":
        roots = answer.get("roots")
        return isinstance(roots, list) and all(isinstance(r, dict) and isinstance(r.get("uri"), str) for r in roots)
    if method == "sampling/createMessage":
        return isinstance(answer.get("content"), dict | list) and isinstance(answer.get("role"), str)
    return True


class ModernScope(RequestScope):
    """The scope behind ``ctx`` for a 2026-07-28 request."""

    __slots__ = ("round",)

    def __init__(self, *args: Any, round: Round) -> None:
        super().__init__(*args)
        self.round = round

    def _require(self, method: str, capability: str, minimum: str | None = None) -> None:
        if capability not in self.session.client_capabilities:
            raise ClientRequestError(
                MISSING_CLIENT_CAPABILITY,
                f"This request needs the client capability {capability!r} for {method}",
                {"requiredCapabilities": {capability: {}}})

    async def client_request(self, method: str, params: dict[str, Any], timeout: float | None,
                             key: str | None = None) -> dict[str, Any]:
        capability = _CAPABILITY.get(method)
        if capability is not None and method != "elicitation/create":
            self._require(method, capability)
        name = self.round.key(method, key)
        while True:
            answer = self.round.answers.get(name)
            if _well_formed(method, answer):
                self.round.used.add(name)
                return cast("dict[str, Any]", answer)
            name = await self._missing(name, method, params)  # missing or malformed: ask (again)

    async def elicit(self, params: dict[str, Any], timeout: float | None, key: str | None = None) -> ElicitResult:
        try:
            wire = self._elicit_wire(params)
        except ClientRequestError as exc:
            if exc.code != MISSING_CLIENT_CAPABILITY:  # a mode the client did not declare
                mode = params.get("mode", "form")
                raise ClientRequestError(MISSING_CLIENT_CAPABILITY, exc.message,
                                         {"requiredCapabilities": {"elicitation": {mode: {}}}}) from None
            raise
        wire.pop("elicitationId", None)  # gone in 2026-07-28: the retry itself completes the flow
        name = self.round.key("elicitation/create", key)
        while True:
            answer = self.round.answers.get(name)
            if isinstance(answer, dict):
                try:
                    result = self._elicit_result(params, answer)
                    self.round.used.add(name)
                    return result
                except ClientRequestError:
                    pass  # a malformed answer is asked again rather than failing the call
            name = await self._missing(name, "elicitation/create", wire)

    async def _missing(self, key: str, method: str, params: dict[str, Any]) -> str:
        """No usable answer under ``key``: end this run with the question (tasks wait for it instead).

        Returns the key under which an answer has since arrived.
        """
        raise self.round.ask(key, method, params)

    async def close_stream(self, retry_ms: int | None) -> bool:
        return False  # nothing to resume in this revision


class RoundKernel(Protocol):
    """What the rounds read of the kernel (the Kernel satisfies it)."""

    settings: ServerSettings
    services: Services
    sealer: StateSealer
    catalog: Catalog

    def server_info(self, session: Session) -> dict[str, Any]: ...

    async def redispatch(self, request: RequestInfo) -> dict[str, Any]: ...


class Rounds:
    """The 2026-07-28 side of running a request: a :class:`Round` opened from the answers sealed
    by earlier rounds and given with this one, the handler run through the kernel's middleware,
    and a complete (stamped) result or an InputRequiredResult sealing the answers used."""

    def __init__(self, kernel: RoundKernel) -> None:
        self.kernel = kernel

    async def answer(self, session: Session, request_id: RequestId, method: str,
                     params: dict[str, Any], connection: Connection | None) -> dict[str, Any]:
        """Run a 2026-07-28 request: a complete (stamped) result, or an InputRequiredResult."""
        kernel = self.kernel
        round = await self.open(session, method, params) if method in MRTR_METHODS else None
        try:
            result = await kernel.redispatch(RequestInfo(session, request_id, method, params, round, session.principal,
                                                  connection=connection, catalog=kernel.catalog))
            if round is not None and round.asked:
                raise InputRequired  # the handler swallowed the signal; its questions still stand
        except InputRequired:
            assert round is not None
            try:
                return self.input_required(session, method, params, round)
            except ValueError:  # the answers gathered are too large to seal
                raise McpError(INVALID_PARAMS, "The answers given are too large to carry in requestState") from None
        return self.stamp(session, method, params, result)

    async def open(self, session: Session, method: str, params: dict[str, Any]) -> Round:
        """Answers for this run: those sealed by earlier rounds plus this request's inputResponses."""
        answers: dict[str, Any] = {}
        state = params.get("requestState")
        if state is not None:
            sealed = self.kernel.sealer.open(state, principal=principal_key(session), method=method,
                                      params_digest=params_digest(method, params))
            if self.kernel.settings.single_use_states:
                # Each state is redeemed once (by any process of a shared backend) while it is valid.
                valid_for = max(1.0, self.kernel.sealer.ttl - (time.time() - sealed.issued_at))
                if not await self.kernel.services.backend.claim(f"state:{sealed.nonce}", valid_for):
                    raise StateRejected("replayed")
            answers.update(sealed.answers)
        responses = params.get("inputResponses")
        if isinstance(responses, dict):
            answers.update(responses)
        return Round(answers)

    def input_required(self, session: Session, method: str, params: dict[str, Any], round: Round
                        ) -> dict[str, Any]:
        # Seal only the answers this run actually used, so unknown extra keys are dropped.
        used = {key: round.answers[key] for key in round.used}
        state = self.kernel.sealer.seal(answers=used, principal=principal_key(session), method=method,
                                 params_digest=params_digest(method, params))
        return {"resultType": "input_required", "inputRequests": round.asked, "requestState": state,
                "_meta": {SERVER_INFO: self.kernel.server_info(session)}}

    def stamp(self, session: Session, method: str, params: dict[str, Any], result: dict[str, Any]
               ) -> dict[str, Any]:
        """What every 2026-07-28 result carries: resultType, serverInfo and, where listed, cache hints.

        A ``tools/call`` result is built for this call alone (kernel/results.py) and is stamped as
        it is; other results may be shared (a listing), so they are stamped on a copy. The
        ``_meta`` a tool gave is its own: it is copied either way."""
        if method != "tools/call":
            result = dict(result)
        result.setdefault("resultType", "complete")
        meta = dict(result.get("_meta") or {})
        meta[SERVER_INFO] = self.kernel.server_info(session)
        result["_meta"] = meta
        if method in CACHEABLE and result["resultType"] == "complete":
            retried = params.get("requestState") is not None or params.get("inputResponses") is not None
            personal = retried or Visibility.differs_per_caller(session, self.kernel.catalog)
            private = personal or result.get("cacheScope") == "private"
            result["ttlMs"] = 0 if retried else result.get("ttlMs", self.kernel.settings.cache_ttl_ms)
            result["cacheScope"] = "private" if private else "public"
        return result
