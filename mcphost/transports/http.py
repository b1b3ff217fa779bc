"""Streamable HTTP for both eras, as a lean ASGI handler for the MCP endpoint.

It only moves bytes and maps outcomes to HTTP: the kernel decides every protocol rule (and which
era a message belongs to), the SessionManager owns the sessions.

- POST carries one message (or, on 2025-03-26 sessions, a batch). Notifications and responses
  get 202, a single message that is not JSON-RPC 400. A request gets an SSE stream (or one JSON
  body with ``server.json_response``). A 2026-07-28 POST is answered by ``http_modern``.
- Session-era SSE streams follow the backend's event log (see ``sse``): a request runs in a task
  owned by the session, not by the HTTP exchange, so a client that drops the connection loses
  nothing and resumes with ``GET`` + ``Last-Event-ID``. A writer that falls further behind than
  the log retains (its client stopped reading) ends its stream; a resume gets 400.
- GET opens the session's one standalone stream (409 for a second), which carries what is not
  related to a request (resource updates, list changes); its events wait for the next GET.
- DELETE ends the session. Unknown, ended or foreign sessions get the same 404.
- Origin and Host are checked before anything else; bodies are bounded before they are read.
  A request answered before its body was read gets ``Connection: close`` (the rest of the body
  is discarded meanwhile, so the server never waits on it).
- Every request that ran the connect hooks runs the disconnect hooks once: ``complete``,
  ``dropped`` (the client left an SSE stream) or ``refused``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from mcphost.budgets import OverBudget
from mcphost.catalog import count_refused
from mcphost.deadline import deadline
from mcphost.errors import InsufficientScope, Refused, Unauthorized
from mcphost.host import Host
from mcphost.protocol import jsonrpc
from mcphost.protocol.auth import bearer_token, grant_of, permits
from mcphost.protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR, SERVER_BUSY, McpError
from mcphost.protocol.modern import ModernError
from mcphost.protocol.opening import check_initialize
from mcphost.protocol.versions import LEGACY_VERSIONS, allows_batches, is_modern
from mcphost.sessions.backend import BackendUnavailable, UnknownEvent
from mcphost.sessions.manager import Link, TooManySessions
from mcphost.sessions.session import Connection, Principal, Session, quota_key, stream_seconds
from mcphost.stats import BUDGET
from mcphost.transports import http_modern
from mcphost.transports.asgi import (
    ClientAddress,
    HttpError,
    Receive,
    RequestGuard,
    Scope,
    Send,
    check_credentials,
    closing,
    is_loopback,
    request_headers,
    respond,
    respond_unread,
    without_credentials,
)
from mcphost.transports.cors import Cors
from mcphost.transports.sse import STANDALONE, HttpSessionState, SessionStreams, frame, parse_event_id, state_of

log = logging.getLogger("mcphost.http")

__all__ = ["HttpError", "HttpTransport", "Receive", "Scope", "Send", "is_loopback", "respond_unread"]


class _Call:
    """One request as its answer sees it: the Mcp-Session-Id it names (read once, here), whether
    its body is still unread, and the JSON-RPC id a refusal echoes (once the request is known)."""

    __slots__ = ("headers", "refusal_id", "session_id", "unread")

    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers
        self.session_id = headers.get("mcp-session-id")
        # A request refused before its body was read: the server drops the connection once the
        # answer is out (the rest of the body would be read as the next request), so say so.
        self.unread = "transfer-encoding" in headers or headers.get("content-length", "0") not in ("", "0")
        self.refusal_id: Any = None


class _Exchange:
    """One POST as the kernel sees it (see :class:`mcphost.kernel.services.Exchange`)."""

    __slots__ = ("_notified", "connection", "headers", "queue", "receive", "respond_to", "session_id", "transport")

    trusted = False  # a network client is never vouched for
    era = None  # every POST is ruled on its own

    def __init__(self, transport: HttpTransport, call: _Call, connection: Connection, receive: Receive,
                 send: Send) -> None:
        self.transport = transport
        self.connection = connection
        self.headers = call.headers
        self.session_id = call.session_id
        self.receive = receive
        self.respond_to = send
        self.queue: asyncio.Queue[Any] | None = None
        self._notified: asyncio.Future[None] | None = None

    def _queue(self) -> asyncio.Queue[Any]:
        if self.queue is None:
            self.queue = asyncio.Queue(maxsize=self.transport.settings.stream_max_events)
        return self.queue

    async def send(self, message: dict[str, Any], related: Any) -> None:
        await self._queue().put(message)
        if self._notified is not None and not self._notified.done():
            self._notified.set_result(None)

    def notified(self) -> asyncio.Future[None]:
        """A future resolved once something is in the queue (at once if it is there already)."""
        if self._notified is None:
            self._notified = asyncio.get_running_loop().create_future()
            if self._pending():
                self._notified.set_result(None)
        return self._notified

    async def reply(self, reply: asyncio.Future[Any] | None) -> str:
        if reply is None:
            await respond(self.respond_to, 202, b"", {})
            return "complete"
        return await http_modern.answer(reply, self._queue, self.receive, self.respond_to,
                                        self.transport.keepalive, pending=self._pending, notified=self.notified)

    def _pending(self) -> bool:
        return self.queue is not None and not self.queue.empty()


class HttpTransport:
    """The ASGI application for the MCP endpoint of one host: it parses requests, rules on them
    and answers them; sessions and their streams are the manager's and :class:`SessionStreams`'."""

    def __init__(self, host: Host) -> None:
        self.host = host
        settings = host.config.server
        self.settings = settings
        self.max_body = settings.max_body_bytes
        self.body_timeout = settings.body_timeout
        self.keepalive = settings.sse_keepalive
        self.retry_ms = settings.sse_retry_ms
        self.guard = RequestGuard(settings)
        #: CORS for the origins ``allowed_origins`` names (None: no list, no CORS).
        self.cors = Cors(self.guard.allowed_origins) if self.guard.allowed_origins else None
        self.client_address = ClientAddress(settings.forwarded_allow_ips)
        #: The one owner of sessions; the transport talks to it only.
        self.manager = host.manager
        #: The session-era streams of the sessions held here (the manager's driver).
        self.streams = SessionStreams(host.manager, settings)
        #: ``[endpoints.NAME]`` by path: the same machinery serves each, on its view of the catalog.
        self.endpoint_paths = {settings.path: name for name, settings in host.config.endpoints.items()}

    @property
    def closing(self) -> asyncio.Event:
        return self.streams.closing

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.manager.drive(self.streams)
        await self.manager.start()

    async def stop(self) -> None:
        """Let SSE clients go (with a retry hint) and give requests time to finish; the host then
        ends the sessions (``Host.stop``)."""
        await self.streams.stop()

    # -- ASGI entry ---------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        call = _Call(request_headers(scope))
        headers = call.headers

        async def tracked_receive() -> dict[str, Any]:
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body"):
                call.unread = False
            return message

        try:
            self.guard.check(headers, scope["headers"])
            origin = headers.get("origin")
            if origin is not None and self.cors is not None and self.cors.opens(origin):  # a page allowed
                if scope["method"] == "OPTIONS":  # its preflight: before authentication (it has no credentials)
                    await self.cors.preflight(origin, headers, tracked_receive, send, call.unread)
                    return
                send = self.cors.wrap(send, origin)
            # Who is calling is settled first, for every method, before any session is looked up.
            connection = await self._authenticate(scope, headers)
            method = scope["method"]
            if method != "POST" and not call.session_id and is_modern(headers.get("mcp-protocol-version", "")):
                raise HttpError(405, "Method not allowed: 2026-07-28 uses POST only", headers={"allow": "POST"})
            if method == "POST":
                await self._post(call, connection, tracked_receive, send)
            elif method == "GET":
                await self._get(call, connection, tracked_receive, send)
            elif method == "DELETE":
                await self._delete(call, connection, tracked_receive, send)
            else:
                raise HttpError(405, "Method not allowed", headers={"allow": "GET, POST, DELETE"})
        except ANSWERED as exc:
            await self._answer(exc, scope, call, receive, send)

    async def check_route(self, scope: Scope, receive: Receive, send: Send, *, authenticate: bool = False) -> bool:
        """The MCP endpoint's Host and Origin checks (and, with ``authenticate``, its authentication)
        for another route; False when the request was refused here (the answer is sent)."""
        call = _Call(request_headers(scope))
        try:
            self.guard.check(call.headers, scope["headers"])
            if authenticate and self.host.has_auth:
                await self._authenticate(scope, call.headers)
        except ANSWERED as exc:
            await self._answer(exc, scope, call, receive, send)
            return False
        return True

    async def _answer(self, exc: Exception, scope: Scope, call: _Call, receive: Receive, send: Send) -> None:
        """Answer a request that ended in ``exc`` (one of :data:`ANSWERED`): the handler for its
        class, or its nearest base class, in :data:`ANSWERS` words the error."""
        error = _answer_for(exc)(self, exc, scope, call)
        await respond_unread(receive, send, error.status, jsonrpc.encode(error.body),
                             closing(error.headers, call.unread), call.unread)

    def _refusal(self, exc: Refused, scope: Scope, call: _Call) -> HttpError:
        """A plugin's (or the host's) refusal as an HTTP answer; challenges are composed in one place."""
        extra = self.host.resource_server.response_headers(exc, scope.get("scheme", "http"),
                                                           call.headers.get("host", ""))
        # A 500 is the host's (or a plugin's) fault, not the request's: an internal error.
        code = INTERNAL_ERROR if exc.status == 500 else INVALID_REQUEST
        return HttpError(exc.status, exc.message, code=code, request_id=call.refusal_id, headers=extra)

    # -- authentication -----------------------------------------------------------------------

    async def _authenticate(self, scope: Scope, headers: dict[str, str]) -> Connection:
        """The request's Connection, with its principal; Refused when the caller may not proceed.

        Only ``mcphost_authenticate`` sees the credentials: the Connection handed on (to the
        connect hooks, and so to anything a tool can reach) carries no ``Authorization`` header.
        """
        remote = self.client_address(scope, headers)  # behind a trusted proxy: the client it reports
        method, path, scheme = scope["method"], scope["path"], scope.get("scheme", "http")
        endpoint = self.endpoint_paths.get(path.rstrip("/")) if self.endpoint_paths else None
        host = self.host
        if not host.has_auth:
            if endpoint is not None:
                self._admit(endpoint, None)
            return Connection(transport="http", headers=without_credentials(headers), remote=remote,
                              method=method, path=path, scheme=scheme, endpoint=endpoint)
        credentials = headers.get("authorization")
        if credentials is not None:
            check_credentials(scope, headers, credentials)
        principal = await host.authenticate(Connection(transport="http", headers=headers, remote=remote,
                                                       method=method, path=path, scheme=scheme))
        if principal is None and host.auth_required:
            if bearer_token(credentials) is not None:  # a token, but no plugin accepted it
                raise Unauthorized("Invalid or unknown access token", error="invalid_token")
            raise Unauthorized("Authentication required")
        if endpoint is not None:
            self._admit(endpoint, principal)
        return Connection(transport="http", headers=without_credentials(headers), remote=remote, method=method,
                          path=path, principal=principal, scheme=scheme, endpoint=endpoint)

    def _admit(self, endpoint: str, principal: Principal | None) -> None:
        """Refuse a caller without the scopes ``[endpoints.NAME] scopes`` requires: 401 when anonymous
        (credentials may grant them), 403 ``insufficient_scope`` when its token lacks them."""
        needed = self.host.config.endpoints[endpoint].scopes
        if permits(grant_of(principal, False), needed):
            return
        if principal is None:
            raise Unauthorized("Authentication required")
        raise InsufficientScope(needed)

    # -- checks -------------------------------------------------------------------------------

    async def _read_body(self, headers: dict[str, str], receive: Receive) -> bytes:
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                raise HttpError(400, "Invalid Content-Length")
            if int(length) > self.max_body:
                raise HttpError(413, f"Request body larger than {self.max_body} bytes")
        # The usual body arrives in one message and is kept as it came; a longer one is kept as its
        # chunks and joined once at the end: one copy of the body, where a growing buffer would
        # copy it again at each reallocation (a 3.6 MB body in 64 KiB chunks: about 8 copies).
        chunks: list[bytes] = []
        size = 0
        try:
            with deadline(self.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise HttpError(400, "Client disconnected")
                    chunk = message.get("body", b"")
                    if chunk:
                        chunks.append(chunk)
                        size += len(chunk)
                    if size > self.max_body:
                        raise HttpError(413, f"Request body larger than {self.max_body} bytes")
                    if not message.get("more_body"):
                        break
        except TimeoutError:
            raise HttpError(408, "Timed out reading the request body") from None
        if len(chunks) == 1:
            return bytes(chunks[0])  # bytes already (ASGI servers send bytes): no copy
        return b"".join(chunks)

    async def _session(self, call: _Call, connection: Connection, request_id: Any = None) -> Session:
        """The caller's session; 400 without the header, 404 when unknown (``request_id``: the
        id of the request that asked, echoed in the error)."""
        if not call.session_id:
            raise HttpError(400, "Bad request: Mcp-Session-Id header is required", request_id=request_id)
        session = await self.manager.lookup(call.session_id, connection.principal)
        if session is None or session.endpoint != connection.endpoint:  # another endpoint's: unknown here
            raise HttpError(404, "Session not found", request_id=request_id)
        return session

    @staticmethod
    def _arrived(session: Session) -> None:
        """A connection of ``session`` got through its connect hooks: it counts as activity (a GET
        too), unless the session ended (DELETE, expiry) while an async connect hook ran."""
        if session.closed:
            raise HttpError(404, "Session not found")
        session.last_active = time.time()

    # -- POST ---------------------------------------------------------------------------------

    async def _post(self, call: _Call, connection: Connection, receive: Receive, send: Send) -> None:
        headers = call.headers
        accept = headers.get("accept", "")
        wants_json = "application/json" in accept or "*/*" in accept
        wants_sse = "text/event-stream" in accept or "*/*" in accept
        if not (wants_json and wants_sse):
            raise HttpError(406, "Not acceptable: Accept must list application/json and text/event-stream")
        if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            raise HttpError(415, "Unsupported media type: Content-Type must be application/json")
        body = await self._read_body(headers, receive)
        try:
            payload = jsonrpc.parse(body)
        except McpError as exc:
            raise HttpError(400, exc.message, code=PARSE_ERROR) from None
        assert self.host.kernel is not None
        if isinstance(payload, dict) and "id" in payload and "method" in payload:
            # Only requests: answers and notifications (which may finish requests in flight) go on.
            refused = await self.manager.admission.crowding(quota_key(connection.principal, connection.remote))
            if refused is not None:
                count_refused(self.host.catalog, payload, BUDGET)
                raise over_budget(refused, jsonrpc.readable_id(payload))
        work = self.host.kernel.serve(payload, _Exchange(self, call, connection, receive, send))
        if work is None:  # the session era: run through the caller's session here
            await self._post_legacy(call, connection, payload, receive, send)
            return
        call.refusal_id = jsonrpc.readable_id(payload)  # a 2026-07-28 refusal echoes the request's id
        await work

    async def _post_legacy(self, call: _Call, connection: Connection, payload: Any, receive: Receive,
                           send: Send) -> None:
        """A session-era POST: create or find the session, run its messages, stream the replies."""
        assert self.host.kernel is not None  # the host starts it before serving
        batch = isinstance(payload, list)
        request_id = None if batch else jsonrpc.readable_id(payload)  # for errors from here on
        _check_version(call.headers.get("mcp-protocol-version"), request_id)
        messages = payload if batch else [payload]
        requests = _requests(messages, batch)
        opening = any(m["method"] == "initialize" for m in requests)
        if opening:
            session = await self._initialize(call, connection, payload, batch, request_id)
        else:
            session = await self._session(call, connection, request_id)
            self._authorize(call, session, connection, payload, requests, batch)
        async with self.manager.connected(session, connection, opening=opening) as link:
            self._arrived(session)
            state = state_of(session)
            assert state is not None
            for message in requests:
                # A request id is taken from the moment its stream is assigned until its reply is stored.
                if message["id"] in session.inflight or message["id"] in state.request_streams:
                    raise HttpError(409, f"Request id {message['id']!r} is already in flight on this session",
                                    request_id=message["id"])
            _note_cancels(state, messages)
            extra = {"mcp-session-id": session.id} if opening else {}
            if not requests:
                await self._reply_plain(session, connection, messages, batch, send, extra)
            elif self.settings.json_response:
                await self._reply_json(session, connection, messages, batch, send, extra)
            else:
                request_ids = [m["id"] for m in requests]
                stream = await self.streams.open_request_stream(session, state, request_ids)
                replies = self.host.kernel.receive_all(session, messages, connection, connection.principal)
                link.hand_off()  # the stream reports the disconnect from here on
                await self.streams.answer(session, state, stream, replies, request_ids, receive, send, extra)

    async def _initialize(self, call: _Call, connection: Connection, payload: Any, batch: bool,
                          request_id: Any) -> Session:
        """The session an ``initialize`` opens, checked before it is minted (an invalid one leaves none)."""
        if batch:
            raise HttpError(400, "Invalid request: initialize must not be part of a batch")
        if call.session_id:
            raise HttpError(400, "Invalid request: this session is already initialized", request_id=request_id)
        try:
            check_initialize(payload.get("params"))
        except McpError as exc:
            raise HttpError(400, exc.message, code=exc.code, request_id=request_id) from None
        session = await self.manager.create(connection.principal, connection.remote)
        session.endpoint = connection.endpoint
        return session

    def _authorize(self, call: _Call, session: Session, connection: Connection, payload: Any,
                   requests: list[dict[str, Any]], batch: bool) -> None:
        """Refuse a batch the session's version does not allow, and any request for a record the
        caller's token does not cover: 403 with an insufficient_scope challenge before anything
        is answered (an SSE response could only carry an error)."""
        if batch and (not payload or not allows_batches(session.protocol_version or "")):
            raise HttpError(400, "Invalid request: batches are accepted only on 2025-03-26 sessions")
        assert self.host.kernel is not None  # the host starts it before serving
        for message in requests:
            call.refusal_id = None if batch else message["id"]
            self.host.kernel.authorize(message, connection.principal, endpoint=connection.endpoint)
        call.refusal_id = None  # a refusal by the connect hooks names no request

    async def _reply_plain(self, session: Session, connection: Connection, messages: list[Any], batch: bool,
                           send: Send, extra: dict[str, str]) -> None:
        """Notifications and responses only: 202, or 400 with the errors of the invalid ones."""
        assert self.host.kernel is not None  # the host starts it before serving
        replies = self.host.kernel.receive_all(session, messages, connection, connection.principal)
        if self.manager.shared:
            await self.manager.persist(session)  # notifications/initialized, say
        if replies:  # invalid messages get their error replies
            done = [await r for r in replies]
            await respond(send, 400, jsonrpc.encode(done if batch else done[0]), extra)
        else:
            await respond(send, 202, b"", extra)

    async def _reply_json(self, session: Session, connection: Connection, messages: list[Any], batch: bool,
                          send: Send, extra: dict[str, str]) -> None:
        assert self.host.kernel is not None  # the host starts it before serving
        replies = self.host.kernel.receive_all(session, messages, connection, connection.principal)
        results = [m for m in [await r for r in replies] if m is not None]
        if not results:
            await respond(send, 202, b"", extra)
            return
        await respond(send, 200, jsonrpc.encode(results if batch else results[0]), extra)

    # -- GET ----------------------------------------------------------------------------------

    async def _get(self, call: _Call, connection: Connection, receive: Receive, send: Send) -> None:
        headers = call.headers
        if "text/event-stream" not in headers.get("accept", "") and "*/*" not in headers.get("accept", ""):
            raise HttpError(406, "Not acceptable: Accept must list text/event-stream")
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in LEGACY_VERSIONS:
            raise HttpError(400, f"Bad request: Unsupported protocol version: {version[:40]}")
        session = await self._session(call, connection)
        async with self.manager.connected(session, connection) as link:
            self._arrived(session)
            state = state_of(session)
            assert state is not None
            if state.gets >= self.settings.max_streams_per_session:
                raise HttpError(409, f"Conflict: this session already has {state.gets} open GET streams "
                                     "(server.max_streams_per_session)")
            # A GET stream is a request in flight of its principal, whichever session it opens it on.
            refused = await self.manager.admission.take_request(session)
            if refused is not None:
                raise over_budget(refused)
            state.gets += 1
            try:
                await self._follow(call, session, state, connection, link, receive, send)
            finally:
                state.gets -= 1
                self.manager.admission.done(session)

    async def _follow(self, call: _Call, session: Session, state: HttpSessionState, connection: Connection,
                      link: Link, receive: Receive, send: Send) -> None:
        """Write the stream a GET asks for (the standalone one, or the one its Last-Event-ID names)."""
        stream, after = await self._resume_point(call, session, state)
        if stream != STANDALONE and await self._answered_in_full(session, state, stream, after):
            # A request stream the client already has in full, which ended without a reply (a
            # cancelled call: the spec says not to answer it). An empty SSE stream would make a
            # client that waits for the reply resume it again and again; 204 says there is
            # nothing more, ever.
            await respond(send, 204, b"", {})
            return
        # The same rule across processes: the stream is held in the backend (released when it ends).
        if stream == STANDALONE and not await self.streams.hold_standalone(session):
            raise HttpError(409, "Conflict: only one standalone SSE stream is allowed per session")
        link.hand_off()  # the stream reports the disconnect from here on
        # Priming: an id pointing at the current position, so even an idle stream can be resumed.
        # The stream ends when the credentials that opened it expire (or max_stream_seconds pass).
        await self.streams.pump(session, stream, after, receive, send, {},
                                priming=frame(stream, after, None, self.retry_ms),
                                until=stream_seconds(connection.principal, self.settings.max_stream_seconds))

    async def _resume_point(self, call: _Call, session: Session, state: HttpSessionState) -> tuple[str, int]:
        """The stream a GET follows and the event it follows from: its Last-Event-ID's, else the
        standalone stream from what earlier GETs did not get (400 for an unknown or expired id)."""
        last_event = call.headers.get("last-event-id")
        if last_event is not None:
            stream, after = parse_event_id(last_event)
            if stream is None or not await self.streams.events.exists(session.id, stream):
                raise HttpError(400, "Unknown or expired Last-Event-ID")
        else:
            stream, after = STANDALONE, -1
        if stream == STANDALONE and state.standalone_live:
            raise HttpError(409, "Conflict: only one standalone SSE stream is allowed per session")
        if after < 0:
            # No Last-Event-ID: what earlier GETs did not get is delivered now, as far as it is
            # still retained (the client did not ask for a replay, so a trimmed start is no error).
            after = await self.streams.standalone_start(session, state)
        return stream, after

    async def _answered_in_full(self, session: Session, state: HttpSessionState, stream: str, after: int) -> bool:
        """Whether request stream ``stream`` has nothing after ``after`` and ended without a reply
        (what is left of a request the client cancelled counts as nothing: it is not written);
        the position is checked before any header is sent, so an expired id is a clear 400."""
        try:
            position = await self.streams.events.read(session.id, stream, after, 0)
        except UnknownEvent:
            raise HttpError(400, "Unknown or expired Last-Event-ID") from None
        left = position.events
        if left and stream in state.silenced:
            left = [e for e in left if e.message is None or "method" not in e.message or "id" in e.message]
        return position.done and not left and await self.streams.ended_unanswered(session, stream)

    # -- DELETE -------------------------------------------------------------------------------

    async def _delete(self, call: _Call, connection: Connection, receive: Receive, send: Send) -> None:
        session = await self._session(call, connection)
        async with self.manager.connected(session, connection):
            self._arrived(session)
        await self.manager.end(session, "deleted")
        # A body is never read.
        await respond_unread(receive, send, 204, b"", closing({}, call.unread), call.unread)


def _check_version(version: str | None, request_id: Any) -> None:
    """400 for a session-era POST naming a version no session era has."""
    if version is not None and version not in LEGACY_VERSIONS:
        raise HttpError(400, f"Bad request: Unsupported protocol version: {version[:40]} "
                             f"(supported: {', '.join(LEGACY_VERSIONS)})", request_id=request_id)


def _requests(messages: list[Any], batch: bool) -> list[dict[str, Any]]:
    """The well-formed requests among ``messages``: only they run (and get a stream); the kernel
    answers the rest with errors. One message that is not JSON-RPC at all is a 400 at once:
    nothing to run, no session to touch."""
    kinds = [_kind(m) for m in messages]
    if not batch and kinds[0] is None:
        try:
            jsonrpc.classify(messages[0])
        except McpError as exc:
            raise HttpError(400, exc.message, request_id=jsonrpc.readable_id(messages[0])) from None
    return [m for m, kind in zip(messages, kinds, strict=True) if kind is jsonrpc.Kind.REQUEST]


def over_budget(refused: OverBudget, request_id: Any = None) -> HttpError:
    """A spent budget as an HTTP answer: 429 for the caller's own, 503 for the host's, with
    Retry-After and the budget named in the message and the error's data."""
    error = HttpError(429 if refused.per_principal else 503, refused.message, code=SERVER_BUSY,
                      request_id=request_id, headers={"retry-after": str(refused.retry_after)})
    error.body["error"]["data"] = refused.data
    return error


def _too_many_sessions(exc: TooManySessions) -> HttpError:
    retry = {"retry-after": str(exc.retry_after)}  # when the first of them expires
    if exc.per_principal:  # this caller's own cap: others are unaffected
        return HttpError(429, f"{exc}; end one or retry later", code=SERVER_BUSY, headers=retry)
    return HttpError(503, f"{exc}; retry later", code=SERVER_BUSY, headers=retry)


def _backend_unavailable(exc: BackendUnavailable) -> HttpError:
    log.warning("answering 503: %s", exc)
    return HttpError(503, "Service unavailable: session state cannot be reached; retry later", code=SERVER_BUSY,
                     headers={"retry-after": str(max(1, int(exc.retry_after)))})


def _invalid_modern(exc: ModernError, call: _Call) -> HttpError:
    """A 2026-07-28 request the kernel found invalid: its status, its error (data included)."""
    error = HttpError(exc.status, exc.message)
    error.body = jsonrpc.error(call.refusal_id, exc)
    return error


_Answer = Callable[[HttpTransport, Any, Scope, _Call], HttpError]

#: The one place an exception that ends a request becomes its HTTP answer, looked up by the
#: exception's class and then its base classes (:func:`_answer_for`); anything else propagates.
ANSWERS: dict[type[Exception], _Answer] = {
    HttpError: lambda transport, exc, scope, call: exc,
    Refused: lambda transport, exc, scope, call: transport._refusal(exc, scope, call),
    ModernError: lambda transport, exc, scope, call: _invalid_modern(exc, call),
    TooManySessions: lambda transport, exc, scope, call: _too_many_sessions(exc),
    BackendUnavailable: lambda transport, exc, scope, call: _backend_unavailable(exc),
}
ANSWERED = tuple(ANSWERS)


def _answer_for(exc: Exception) -> _Answer:
    for cls in type(exc).__mro__:
        answer = ANSWERS.get(cls)
        if answer is not None:
            return answer
    raise exc  # not one of ANSWERED: never caught for an answer


def _kind(message: Any) -> jsonrpc.Kind | None:
    try:
        return jsonrpc.classify(message)
    except McpError:
        return None


def _note_cancels(state: HttpSessionState, messages: list[Any]) -> None:
    """Before the kernel cancels them: the streams of requests cancelled here write nothing more
    of them (a progress notification not yet written would reach a client that forgot its token)."""
    for message in messages:
        if isinstance(message, dict) and message.get("method") == "notifications/cancelled":
            params = message.get("params")
            if isinstance(params, dict) and jsonrpc.valid_id(params.get("requestId")):
                state.cancelled(params["requestId"])
