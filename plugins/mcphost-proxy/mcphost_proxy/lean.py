"""The per-call path of a proxied ``tools/call``, without the ``mcp`` client's per-message machinery.

The official client stays for the handshake, the listings and every rarer message; a tool call of a
downstream client that cannot be asked questions (it declared no elicitation, sampling or roots, nor
tasks) goes here instead: its request is stamped as the shared client session would stamp it (the
same ``_meta``, headers and Mcp-Param-* headers, :func:`mcphost_proxy.sdk.stamp`), encoded once with
orjson and written on a kept connection (HTTP: :class:`mcphost_proxy.wire.HttpClient`) or the
process's stdin (stdio: :class:`mcphost_proxy.framing.Switch`, whose reader hands the reply back by
id). The reply is decoded once, and the result handed to the host as the dict it arrived as. What
arrives meanwhile is handled as the client would: progress to the caller, log messages to the call,
a question put to the call (:meth:`Questions.forward`: the client that cannot answer gets its error),
``list_changed`` and resource updates to the upstream.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import mcp_types as types
import orjson
from mcp import MCPError

from mcphost_proxy import sdk
from mcphost_proxy.wire import TooLarge, WireError

if TYPE_CHECKING:
    from mcp import ClientSession

    from mcphost_proxy.questions import _Call
    from mcphost_proxy.upstream import Upstream

Progress = Callable[[float, float | None, str | None], Awaitable[None]]

_ids = itertools.count(1)
_QUESTIONS = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots/list"}


def _error(message: dict[str, Any]) -> MCPError:
    error = message.get("error")
    if not isinstance(error, dict):
        return MCPError(types.INTERNAL_ERROR, "The upstream sent an invalid JSON-RPC error")
    return MCPError(int(error.get("code", types.INTERNAL_ERROR)), str(error.get("message", "")), error.get("data"))


def _outcome(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict):
        raise MCPError(types.INTERNAL_ERROR, "The upstream sent a reply that is not a JSON-RPC message")
    if "error" in message:
        raise _error(message)
    result = message.get("result")
    if not isinstance(result, dict):
        raise MCPError(types.INTERNAL_ERROR, "The upstream's reply has no result")
    return result


def _wire(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(by_alias=True, mode="json", exclude_none=True)
    return value


class SseEvents:
    """Splits an SSE body into the data of its ``message`` events (bounded: ``limit`` bytes an event)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        buffer = self._buffer + chunk
        if b"\r" in buffer:
            if buffer.endswith(b"\r"):  # a CRLF cut in two: wait for its LF
                self._buffer = buffer
                return []
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        events = buffer.split(b"\n\n")
        self._buffer = events.pop()
        if len(self._buffer) > self.limit:
            raise TooLarge(f"an event of the upstream's reply is over this server's max_message_bytes ({self.limit}); "
                           "it was dropped")
        out: list[bytes] = []
        for event in events:
            if len(event) > self.limit:
                raise TooLarge(f"an event of the upstream's reply is over this server's max_message_bytes "
                               f"({self.limit}); it was dropped")
            kind = b"message"
            data: list[bytes] = []
            for line in event.split(b"\n"):
                if line.startswith(b"data:"):
                    data.append(line[6:] if line[5:6] == b" " else line[5:])
                elif line.startswith(b"event:"):
                    kind = line[6:].strip()
            if kind == b"message" and data and any(data):
                out.append(b"\n".join(data))
        return out


class LeanCall:
    """One downstream call's view of the upstream, for ``tools/call`` (the rest goes to ``shared``)."""

    __slots__ = ("record", "shared", "upstream")

    def __init__(self, upstream: Upstream, shared: ClientSession, record: _Call) -> None:
        self.upstream = upstream
        self.shared = shared
        self.record = record

    @property
    def discover_result(self) -> Any:
        return self.shared.discover_result

    def __getattr__(self, name: str) -> Any:  # anything else: the shared session's
        return getattr(self.shared, name)

    async def call_tool(self, name: str, arguments: dict[str, Any], *, progress_callback: Progress | None = None,
                        input_responses: dict[str, Any] | None = None, request_state: str | None = None,
                        **_more: Any) -> Any:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if input_responses:
            params["inputResponses"] = {key: _wire(value) for key, value in input_responses.items()}
        if request_state is not None:
            params["requestState"] = request_state
        request_id = f"~{next(_ids)}"
        meta: dict[str, Any] = {}
        if progress_callback is not None:
            meta["progressToken"] = request_id
        trace = self.record.trace
        if trace is not None:
            meta["traceparent"] = f"00-{trace:032x}-{(trace & 0xFFFFFFFFFFFFFFFF) or 1:016x}-00"
        if meta:
            params["_meta"] = meta
        data: dict[str, Any] = {"method": "tools/call", "params": params}
        opts: dict[str, Any] = {}
        sdk.stamp(self.shared, data, opts)
        body = orjson.dumps({"jsonrpc": "2.0", "id": request_id, **data})
        upstream = self.upstream
        try:
            async with asyncio.timeout(upstream.settings.timeout):
                if upstream.switch is not None:
                    message = await upstream.switch.exchange(request_id, body, progress_callback)
                else:
                    message = await self._post(request_id, body, opts.get("headers") or {}, progress_callback)
        except TimeoutError:
            raise MCPError(types.REQUEST_TIMEOUT, f"Timed out while waiting for response to tools/call. Waited "
                           f"{upstream.settings.timeout} seconds.") from None
        except TooLarge as exc:
            raise MCPError(types.PARSE_ERROR, f"Failed to parse JSON response: {exc}") from None
        result = _outcome(message)
        if result.get("resultType") == "input_required":
            return types.InputRequiredResult.model_validate(result)
        return result

    async def _post(self, request_id: str, body: bytes, headers: dict[str, str], progress: Progress | None) -> Any:
        upstream = self.upstream
        client = upstream.wire
        assert client is not None
        session_id = sdk.session_id(upstream.http_transport)
        if session_id is not None:
            headers = {**headers, "mcp-session-id": session_id}
        async with client.post(body, headers) as reply:
            lost = reply.status == 404 or (reply.status == 400 and b"session" in reply.body[:2000].lower())
            if lost and session_id is not None:  # the upstream forgot our session (it restarted, say)
                upstream._session_lost = True  # Upstream.request initializes a new session and sends it again
                raise MCPError(types.INVALID_REQUEST, "Session terminated")
            if reply.sse:
                return await self._events(reply, request_id, progress)
            try:
                message = orjson.loads(reply.body) if reply.body else None
            except orjson.JSONDecodeError:
                message = None
            if isinstance(message, dict) and ("result" in message or "error" in message):
                return message
            raise MCPError(types.INTERNAL_ERROR, f"The upstream answered HTTP {reply.status} without a JSON-RPC "
                           "reply")

    async def _events(self, reply: Any, request_id: str, progress: Progress | None) -> Any:
        events = SseEvents(self.upstream.settings.max_message_bytes)
        while (chunk := await reply.next_chunk()) is not None:
            for data in events.feed(chunk):
                try:
                    message = orjson.loads(data)
                except orjson.JSONDecodeError:
                    continue
                if not isinstance(message, dict):
                    continue
                if "method" not in message:
                    if message.get("id") == request_id:
                        return message
                    continue
                await self.incoming(message, request_id, progress)
        raise WireError("the upstream's stream ended without the reply")

    async def incoming(self, message: dict[str, Any], request_id: str, progress: Progress | None) -> None:
        """A notification or request the upstream sent during the call."""
        method = message["method"]
        raw = message.get("params")
        params: dict[str, Any] = raw if isinstance(raw, dict) else {}
        upstream = self.upstream
        if "id" in message:
            answer = await self._answer(method, params)
            await self._reply(message["id"], answer)
        elif method == "notifications/progress":
            if progress is not None and params.get("progressToken") == request_id:
                await progress(float(params.get("progress", 0)), params.get("total"), params.get("message"))
        elif method == "notifications/message":
            await upstream.questions.log_to(self.record, types.LoggingMessageNotificationParams.model_validate(params))
        else:
            await upstream._on_notification(method, params)

    async def _answer(self, method: str, params: dict[str, Any]) -> Any:
        from mcphost_proxy.questions import _elicit, _roots, _sample

        what = _QUESTIONS.get(method)
        if what is None:
            if method == "ping":
                return {}
            return types.ErrorData(code=types.METHOD_NOT_FOUND, message=f"Method not found: {method}")
        forward = self.upstream.questions.forward
        if what == "elicitation":
            return await forward(what, lambda ctx: _elicit(ctx, dict(params)), self.record)
        if what == "sampling":
            return await forward(what, lambda ctx: _sample(ctx, dict(params)), self.record)
        return await forward(what, lambda ctx: _roots(ctx), self.record)

    async def _reply(self, question_id: Any, answer: Any) -> None:
        if isinstance(answer, types.ErrorData):
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": question_id, "error": _wire(answer)}
        else:
            message = {"jsonrpc": "2.0", "id": question_id, "result": _wire(answer)}
        body = orjson.dumps(message)
        upstream = self.upstream
        if upstream.switch is not None:
            await upstream.switch.write(body + b"\n")
            return
        assert upstream.wire is not None
        headers: dict[str, str] = {}
        opts: dict[str, Any] = {}
        sdk.stamp(self.shared, {"method": "", "params": {}}, opts)
        headers.update({k: v for k, v in (opts.get("headers") or {}).items() if k.lower() == "mcp-protocol-version"})
        session_id = sdk.session_id(upstream.http_transport)
        if session_id is not None:
            headers["mcp-session-id"] = session_id
        async with upstream.wire.post(body, headers):
            pass
