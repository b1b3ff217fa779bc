"""Streamable HTTP for the session era, as a lean ASGI handler for the MCP endpoint.

It only moves bytes and maps outcomes to HTTP: the kernel decides every protocol rule.

- POST carries one message (or, on 2025-03-26 sessions, a batch). Notifications and responses
  get 202, a single message that is not JSON-RPC 400. A request gets an SSE stream (or one JSON
  body with ``server.json_response``).
- Every SSE event is appended to the backend's event log *before* it is written to the
  socket, and live writers follow the log. A request runs in a task owned by the session, not
  by the HTTP exchange: a client that drops the connection loses nothing, and resumes with
  ``GET`` + ``Last-Event-ID`` (event ids are ``<stream>.<seq>``). A writer that falls further
  behind than the log retains (its client stopped reading) ends its stream; a resume gets 400.
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
import contextlib
import ipaddress
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from mcphost.errors import Refused, Unauthorized
from mcphost.host import Host
from mcphost.protocol import jsonrpc
from mcphost.protocol.auth import bearer_challenge, bearer_token
from mcphost.protocol.era import era_of, request_meta
from mcphost.protocol.errors import INVALID_REQUEST, PARSE_ERROR, REQUEST_CANCELLED, SERVER_BUSY, McpError
from mcphost.protocol.modern import ModernError
from mcphost.protocol.versions import LEGACY_VERSIONS, allows_batches, is_modern
from mcphost.sessions.backend import BackendUnavailable, UnknownEvent
from mcphost.sessions.session import Connection, Principal, Session
from mcphost.transports.http_modern import post_modern
from mcphost.transports.http_modern import wait_disconnect as _wait_disconnect

log = logging.getLogger("mcphost.http")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

STANDALONE = "0"
#: Fully written request streams kept per session for a client whose connection broke at the end.
KEEP_WRITTEN_STREAMS = 4
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})

_JSON = (b"content-type", b"application/json")
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no")]


class _Stalled(Exception):
    """An SSE write did not complete within the write timeout."""


class _RefusedRequest(Exception):
    """A refusal of a request whose JSON-RPC id is known (the error body then carries it)."""

    def __init__(self, refused: Refused, request_id: Any) -> None:
        super().__init__(refused.message)
        self.refused = refused
        self.request_id = request_id


class HttpError(Exception):
    """An outcome decided before the kernel is involved: status, JSON-RPC error, extra headers."""

    def __init__(self, status: int, message: str, *, code: int = INVALID_REQUEST, request_id: Any = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = jsonrpc.error(request_id, McpError(code, message))
        self.headers = headers or {}


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class HttpSessionState:
    """What the HTTP transport keeps per live session in this process (never serialized)."""

    __slots__ = ("closers", "next_stream", "request_streams", "saved", "standalone_last", "standalone_live",
                 "standalone_sent", "touched", "written")

    def __init__(self) -> None:
        self.request_streams: dict[Any, str] = {}
        self.next_stream = 1
        self.standalone_live = False
        self.standalone_sent = 0  # seq of the last standalone event a GET wrote
        self.standalone_last = 0  # seq of the last standalone event appended
        # stream id -> event set to make its live writer let go of the connection
        self.closers: dict[str, tuple[asyncio.Event, list[int | None]]] = {}
        self.written: deque[str] = deque()  # fully written request streams, oldest first
        # Shared backend only: the state last saved to the store, and when it was last touched.
        self.saved: dict[str, Any] | None = None
        self.touched = 0.0


class Outlet:
    """The session's outlet: server messages go to the event log of the stream they belong to."""

    __slots__ = ("_events", "_session_id", "state")

    def __init__(self, transport: HttpTransport, session: Session, state: HttpSessionState) -> None:
        self._events = transport.events
        self._session_id = session.id
        self.state = state

    async def __call__(self, message: dict[str, Any], related: Any) -> None:
        stream = self.state.request_streams.get(related, STANDALONE) if related is not None else STANDALONE
        seq = await self._events.append(self._session_id, stream, message)
        if stream == STANDALONE:
            self.state.standalone_last = max(self.state.standalone_last, seq)
        # Let the stream's writer run: a handler that emits without awaiting anything else would
        # otherwise fill the log past its retention before the writer read a single event.
        await asyncio.sleep(0)

    async def close_stream(self, request_id: Any, retry_ms: int | None) -> bool:
        stream = self.state.request_streams.get(request_id)
        if stream is None:
            return False
        closer = self.state.closers.get(stream)
        if closer is not None:
            closer[1][0] = retry_ms
            closer[0].set()
        return True


class HttpTransport:
    """The ASGI application for the MCP endpoint of one host."""

    def __init__(self, host: Host) -> None:
        self.host = host
        settings = host.config.server
        self.settings = settings
        self.max_body = settings.max_body_bytes
        self.body_timeout = settings.body_timeout
        self.keepalive = settings.sse_keepalive
        self.retry_ms = settings.sse_retry_ms
        self.write_timeout = settings.sse_write_timeout
        self.loopback = is_loopback(settings.host)
        self.allowed_hosts = {h.lower() for h in settings.allowed_hosts}
        self.allowed_origins = {o.lower().rstrip("/") for o in settings.allowed_origins}
        self.closing = asyncio.Event()
        self._background: set[asyncio.Task[Any]] = set()
        self._reaper: asyncio.Task[None] | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        self._stream_numbers = itertools.count(1)
        backend = host.backend
        #: Sessions live in a store shared with other processes (any of them serves any session).
        self.shared = bool(getattr(backend, "shared", False))
        #: Seconds a request stream's lease lasts; 0 when the backend has no leases (one process).
        self.lease = float(getattr(backend, "lease", 0) or 0) if hasattr(backend.events, "settle") else 0.0

    @property
    def events(self) -> Any:
        return self.host.backend.events

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._reaper = loop.create_task(self._reap())
        if self.shared and self.host.cluster is not None:
            self.host.cluster.session_handlers["end"] = lambda session, _m: self.host.release(session)
        if self.lease:
            self._heartbeat = loop.create_task(self._beat())

    async def stop(self) -> None:
        """Let SSE clients go (with a retry hint), give requests time to finish, then end sessions."""
        self.closing.set()
        if self._reaper is not None:
            self._reaper.cancel()
        inflight = [t for s in self.host.sessions.values() for t in s.inflight.values()]
        if inflight:
            await asyncio.wait(inflight, timeout=self.settings.graceful_timeout)
        if self._background:
            await asyncio.wait(list(self._background), timeout=5)
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        for session in list(self.host.sessions.values()):
            if self.shared:
                self.host.release(session)  # the store keeps it: its client goes on with another process
            else:
                await self._end(session, "shutdown")

    async def _reap(self) -> None:
        """End sessions that were idle too long or lived too long."""
        settings = self.settings
        limits = [settings.session_idle_timeout]
        if settings.session_max_lifetime:
            limits.append(settings.session_max_lifetime)
        period = max(0.05, min(30.0, *(limit / 4 for limit in limits)))
        while True:
            await asyncio.sleep(period)
            if self.shared:
                await self._reap_expired()
            now = time.time()
            for session in list(self.host.sessions.values()):
                state = _state(session)
                busy = session.inflight or (state is not None and (state.standalone_live or state.closers))
                try:
                    if settings.session_max_lifetime and now - session.created_at > settings.session_max_lifetime:
                        await self._end(session, "lifetime")
                    elif not busy and now - session.last_active > settings.session_idle_timeout:
                        if self.shared:
                            # Idle here, maybe busy elsewhere: the store expires it (its TTL is the
                            # idle timeout, restarted by every request on any process).
                            self.host.release(session)
                        else:
                            await self._end(session, "expired")
                except Exception:  # a backend hiccup must not stop the reaper for good
                    log.exception("could not end session %s…", session.id[:8])

    async def _reap_expired(self) -> None:
        """Shared backend: end the sessions whose idle time ran out in the store, wherever they were
        last used. The store hands each one to exactly one process (its expiry index), so the
        terminate hook fires once across the cluster. (SessionManager: its idle reaping.)"""
        expired = getattr(self.host.backend.sessions, "expired", None)
        if expired is None:
            return
        try:
            for session_id, data in await expired():
                session = self.host.sessions.get(session_id)
                if session is None and data is not None:
                    session = Session.from_state(data)
                if session is not None:
                    await self.host.terminate(session, "expired")
                await self.events.drop(session_id)
                if self.host.cluster is not None:
                    await self.host.cluster.publish(f"s:{session_id}", {"t": "end"})  # other holders let go
        except BackendUnavailable as exc:
            log.warning("could not reap expired sessions: %s", exc)
        except Exception:
            log.exception("reaping expired sessions failed")

    async def _end(self, session: Session, reason: str) -> None:
        await self.host.terminate(session, reason)
        await self.events.drop(session.id)
        await self.host.backend.sessions.delete(session.id)
        if self.shared and self.host.cluster is not None:
            await self.host.cluster.publish(f"s:{session.id}", {"t": "end"})  # other holders let go

    # -- shared backend: sessions in the store, leases on request streams ----------------------

    async def _load(self, session_id: str) -> Session | None:
        """A session another process (or an earlier run of this one) created, from the store."""
        data = await self.host.backend.sessions.load(session_id)
        if data is None:
            return None
        held = self.host.sessions.get(session_id)
        if held is not None:  # a concurrent request loaded it meanwhile
            return held
        session = Session.from_state(data)
        state = HttpSessionState()
        state.standalone_sent = int((data.get("http") or {}).get("standalone_sent", 0))
        state.saved = _snapshot(session, state)
        state.touched = time.monotonic()
        session.outlet = Outlet(self, session, state)
        self.host.sessions[session_id] = session
        if self.host.cluster is not None:
            self.host.cluster.attach(session)
        await self.events.open(session_id, STANDALONE)
        return session

    async def _still_there(self, session: Session) -> bool:
        """Restart the session's TTL in the store (at most once a second); False when it is gone."""
        state = _state(session)
        now = time.monotonic()
        if state is None or now - state.touched < 1.0:
            return True
        state.touched = now
        if not await self.host.backend.sessions.touch(session.id):
            self.host.release(session)  # ended elsewhere (or expired): gone here too
            return False
        await self.events.open(session.id, STANDALONE)  # keeps the log's keys alive with the session
        return True

    async def _persist(self, session: Session) -> None:
        """Save the session's durable state when it changed (shared backend only)."""
        state = _state(session)
        if not self.shared or state is None or session.closed:
            return
        snapshot = _snapshot(session, state)
        if snapshot != state.saved:
            await self.host.backend.sessions.save({**snapshot, "last_active": session.last_active})
            state.saved = snapshot
            state.touched = time.monotonic()

    async def _beat(self) -> None:
        """Renew the leases of the request streams this process is writing, three times a lease."""
        while True:
            await asyncio.sleep(self.lease / 3)
            streams: dict[tuple[str, str], list[Any]] = {}
            for session in list(self.host.sessions.values()):
                state = _state(session)
                if state is None:
                    continue
                for request_id, stream in list(state.request_streams.items()):
                    streams.setdefault((session.id, stream), []).append(request_id)
            try:
                await self.events.lease([(sid, stream, ids) for (sid, stream), ids in streams.items()], self.lease)
            except BackendUnavailable as exc:
                log.warning("could not renew %d request leases: %s", len(streams), exc)
            except Exception:
                log.exception("renewing request leases failed")
            # A session with an open GET stream or a running call is not idle, whoever holds it;
            # and its one standalone GET stream stays its own (SessionManager: touch and holds).
            for session in list(self.host.sessions.values()):
                state = _state(session)
                if state is None or not (session.inflight or state.standalone_live or state.closers):
                    continue
                try:
                    await self.host.backend.sessions.touch(session.id)
                    if state.standalone_live:
                        await self._hold_standalone(session)
                except BackendUnavailable as exc:
                    log.warning("could not keep session %s… alive: %s", session.id[:8], exc)
                except Exception:
                    log.exception("keeping session %s… alive failed", session.id[:8])

    async def _hold_standalone(self, session: Session) -> bool:
        """Take (or renew) the session's one standalone GET stream cluster-wide; False when a
        stream on another process has it. Lapses within a lease if that process dies."""
        assert self.host.cluster is not None
        return bool(await self.host.backend.hold(f"get:{session.id}", self.host.cluster.worker, self.lease))

    async def _settle(self, session: Session, stream: str) -> bool:
        """End a request stream whose process died with an error reply for each of its requests."""
        request_ids = await self.events.orphaned(session.id, stream)
        if not request_ids:
            return False
        error = McpError(REQUEST_CANCELLED, "Request ended without a response: the server process handling it "
                                            "stopped; send it again")
        settled = await self.events.settle(session.id, stream, [jsonrpc.error(i, error) for i in request_ids])
        if settled:
            log.warning("request stream %s of session %s… lost its process; ended it with an error",
                        stream, session.id[:8])
        return bool(settled)

    # -- ASGI entry ---------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        # A request refused before its body was read: the server drops the connection once the
        # answer is out (the rest of the body would be read as the next request), so say so.
        unread = "transfer-encoding" in headers or headers.get("content-length", "0") not in ("", "0")

        async def tracked_receive() -> dict[str, Any]:
            nonlocal unread
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body"):
                unread = False
            return message

        try:
            self._check_host_and_origin(headers)
            # Who is calling is settled first, for every method, before any session is looked up.
            connection = await self._authenticate(scope, headers)
            method = scope["method"]
            if method != "POST" and not headers.get("mcp-session-id") and is_modern(
                    headers.get("mcp-protocol-version", "")):
                raise HttpError(405, "Method not allowed: 2026-07-28 uses POST only", headers={"allow": "POST"})
            if method == "POST":
                await self._post(scope, headers, connection, tracked_receive, send)
            elif method == "GET":
                await self._get(headers, connection, tracked_receive, send)
            elif method == "DELETE":
                await self._delete(headers, connection, tracked_receive, send)
            else:
                raise HttpError(405, "Method not allowed", headers={"allow": "GET, POST, DELETE"})
        except (Refused, _RefusedRequest) as exc:
            refused, request_id = (exc.refused, exc.request_id) if isinstance(exc, _RefusedRequest) else (exc, None)
            error = self._refusal(refused, scope, headers, request_id)
            await respond_unread(receive, send, error.status, jsonrpc.encode(error.body),
                                 _closing(error.headers, unread), unread)
        except HttpError as exc:
            await respond_unread(receive, send, exc.status, jsonrpc.encode(exc.body), _closing(exc.headers, unread),
                                 unread)
        except BackendUnavailable as exc:
            log.warning("answering 503: %s", exc)
            body = jsonrpc.encode(jsonrpc.error(None, McpError(
                SERVER_BUSY, "Service unavailable: session state cannot be reached; retry later")))
            headers = {"retry-after": str(max(1, int(exc.retry_after)))}
            await respond_unread(receive, send, 503, body, _closing(headers, unread), unread)

    def _refusal(self, exc: Refused, scope: Scope, headers: dict[str, str], request_id: Any) -> HttpError:
        """A plugin's (or the host's) refusal as an HTTP answer; challenges are composed in one place."""
        extra = self.host.resource_server.response_headers(exc, scope.get("scheme", "http"), headers.get("host", ""))
        return HttpError(exc.status, exc.message, request_id=request_id, headers=extra)

    # -- authentication -----------------------------------------------------------------------

    async def _authenticate(self, scope: Scope, headers: dict[str, str]) -> Connection:
        """The request's Connection, with its principal; Refused when the caller may not proceed.

        Only ``mcphost_authenticate`` sees the credentials: the Connection handed on (to the
        connect hooks, and so to anything a tool can reach) carries no ``Authorization`` header.
        """
        client = scope.get("client")
        remote = f"{client[0]}:{client[1]}" if client else None
        method, path, scheme = scope["method"], scope["path"], scope.get("scheme", "http")
        host = self.host
        if not host.has_auth:
            return Connection(transport="http", headers=_without_credentials(headers), remote=remote,
                              method=method, path=path, scheme=scheme)
        credentials = headers.get("authorization")
        if credentials is not None:
            _check_credentials(scope, headers, credentials)
        principal = await host.authenticate(Connection(transport="http", headers=headers, remote=remote,
                                                       method=method, path=path, scheme=scheme))
        if principal is None and host.auth_required:
            if bearer_token(credentials) is not None:  # a token, but no plugin accepted it
                raise Unauthorized("Invalid or unknown access token", error="invalid_token")
            raise Unauthorized("Authentication required")
        return Connection(transport="http", headers=_without_credentials(headers), remote=remote, method=method,
                          path=path, principal=principal, scheme=scheme)

    # -- checks -------------------------------------------------------------------------------

    def _check_host_and_origin(self, headers: dict[str, str]) -> None:
        origin = headers.get("origin")
        if origin is not None and not self._origin_allowed(origin, headers.get("host", "")):
            raise HttpError(403, "Forbidden: invalid Origin header")
        host = headers.get("host", "").lower()
        if self.allowed_hosts:
            if host not in self.allowed_hosts and _hostname(host) not in self.allowed_hosts:
                raise HttpError(421, "Misdirected request: invalid Host header")
        elif self.loopback and _hostname(host) not in LOOPBACK_NAMES:
            raise HttpError(421, "Misdirected request: invalid Host header")

    def _origin_allowed(self, origin: str, host: str) -> bool:
        origin = origin.strip().lower().rstrip("/")
        try:
            parts = urlsplit(origin)
            hostname = parts.hostname
            port = parts.port  # ValueError when out of range
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not hostname or parts.path or parts.query or parts.fragment:
            return False
        # A browser's Origin is exactly scheme://host[:port]: anything around the host (user info,
        # text after an IPv6 literal, an odd port spelling) is no Origin a browser sends; deny it.
        shown = f"[{hostname}]" if ":" in hostname else hostname
        if parts.netloc != (shown if port is None else f"{shown}:{port}"):
            return False
        if self.allowed_origins:
            return origin in self.allowed_origins
        if self.loopback:
            return hostname in LOOPBACK_NAMES or hostname == "::1"
        return parts.netloc == host.lower()  # same origin

    async def _read_body(self, headers: dict[str, str], receive: Receive) -> bytes:
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                raise HttpError(400, "Invalid Content-Length")
            if int(length) > self.max_body:
                raise HttpError(413, f"Request body larger than {self.max_body} bytes")
        body = bytearray()

        async def read() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise HttpError(400, "Client disconnected")
                body.extend(message.get("body", b""))
                if len(body) > self.max_body:
                    raise HttpError(413, f"Request body larger than {self.max_body} bytes")
                if not message.get("more_body"):
                    return

        try:
            async with asyncio.timeout(self.body_timeout):
                await read()
        except TimeoutError:
            raise HttpError(408, "Timed out reading the request body") from None
        return bytes(body)

    async def _session(self, headers: dict[str, str], connection: Connection) -> Session:
        session_id = headers.get("mcp-session-id")
        if not session_id:
            raise HttpError(400, "Bad request: Mcp-Session-Id header is required")
        session = self.host.sessions.get(session_id)
        if self.shared:
            if session is None:
                session = await self._load(session_id) if len(session_id) <= 128 else None
            elif not session.closed and not await self._still_there(session):
                session = None
        # A foreign principal gets exactly the unknown-session answer: no existence oracle.
        if session is None or session.closed or _key(session.principal) != _key(connection.principal):
            raise HttpError(404, "Session not found")
        return session

    # -- POST ---------------------------------------------------------------------------------

    async def _post(self, scope: Scope, headers: dict[str, str], connection: Connection, receive: Receive,
                    send: Send) -> None:
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
        version = headers.get("mcp-protocol-version")
        if isinstance(payload, dict) and _era(payload, headers) == "modern":
            try:
                await post_modern(self, connection, headers, payload, receive, send, _respond)
            except ModernError as exc:
                await _respond(send, exc.status, jsonrpc.encode(jsonrpc.error(jsonrpc.readable_id(payload), exc)), {})
            except Refused as exc:
                raise _RefusedRequest(exc, jsonrpc.readable_id(payload)) from None
            return
        if version is not None and version not in LEGACY_VERSIONS:
            raise HttpError(400, f"Bad request: Unsupported protocol version: {version[:40]} "
                                 f"(supported: {', '.join(LEGACY_VERSIONS)})")
        batch = isinstance(payload, list)
        messages = payload if batch else [payload]
        kinds = [_kind(m) for m in messages]
        if not batch and kinds[0] is None:
            # One message that is not JSON-RPC at all: nothing to run, no session to touch.
            try:
                jsonrpc.classify(payload)
            except McpError as exc:
                raise HttpError(400, exc.message, request_id=jsonrpc.readable_id(payload)) from None
        # Only well-formed requests run (and get a stream); the kernel answers the rest with errors.
        requests = [m for m, kind in zip(messages, kinds, strict=True) if kind is jsonrpc.Kind.REQUEST]
        is_initialize = any(m["method"] == "initialize" for m in requests)
        if is_initialize:
            if batch:
                raise HttpError(400, "Invalid request: initialize must not be part of a batch")
            if headers.get("mcp-session-id"):
                raise HttpError(400, "Invalid request: this session is already initialized",
                                request_id=jsonrpc.readable_id(payload))
            session = await self._create_session(connection)
        else:
            session = await self._session(headers, connection)
            if batch and (not payload or not allows_batches(session.protocol_version or "")):
                raise HttpError(400, "Invalid request: batches are accepted only on 2025-03-26 sessions")
            # A record the caller's token does not cover is refused before anything is answered:
            # 403 with an insufficient_scope challenge (an SSE response could only carry an error).
            for message in requests:
                try:
                    self.host.kernel.authorize(message, connection.principal)
                except Refused as exc:
                    raise _RefusedRequest(exc, None if batch else message["id"]) from None
        await self._connect(session, connection, discard=is_initialize)
        pumping = False
        try:
            state = _state(session)
            assert state is not None
            for message in requests:
                # A request id is taken from the moment its stream is assigned until its reply is stored.
                if message["id"] in session.inflight or message["id"] in state.request_streams:
                    raise HttpError(409, f"Request id {message['id']!r} is already in flight on this session",
                                    request_id=message["id"])
            extra = {"mcp-session-id": session.id} if is_initialize else {}
            principal = connection.principal
            if not requests:
                replies = [r for r in (self.host.kernel.receive(session, m, connection, principal) for m in messages)
                           if r is not None]
                if self.shared:
                    await self._persist(session)  # notifications/initialized, say
                if replies:  # invalid messages get their error replies
                    done = [await r for r in replies]
                    await _respond(send, 400, jsonrpc.encode(done if batch else done[0]), extra)
                else:
                    await _respond(send, 202, b"", extra)
                return
            if self.settings.json_response:
                await self._reply_json(session, connection, messages, batch, send, extra, principal)
                return
            stream = str(state.next_stream)
            state.next_stream += 1
            if self.shared and self.host.cluster is not None:
                # Unique among the processes, and numbered per process, not per session: a session
                # released here and loaded again later must not reuse a stream id it had.
                stream = f"{next(self._stream_numbers)}-{self.host.cluster.worker}"
            # Reserve the ids before the first await, so a concurrent POST reusing one gets 409.
            for message in requests:
                state.request_streams[message["id"]] = stream
            try:
                # Open the stream, take its lease (before anything runs: a process that dies from
                # here on is noticed) and store the priming event first: one round trip.
                await self.events.begin(session.id, stream, [m["id"] for m in requests], self.lease)
            except BaseException:
                for message in requests:
                    if state.request_streams.get(message["id"]) == stream:
                        del state.request_streams[message["id"]]
                raise
            replies = [self.host.kernel.receive(session, m, connection, principal) for m in messages]
            finisher = asyncio.get_running_loop().create_task(
                self._finish_stream(session, state, stream, [r for r in replies if r is not None],
                                    [m["id"] for m in requests]))
            self._background.add(finisher)
            finisher.add_done_callback(self._background.discard)
            pumping = True
            if self.shared:
                # The priming event (seq 1) is stored; write it as is, so the client holds a
                # resumable id even if the shared log cannot be read a moment later.
                await self._pump(session, stream, 1, receive, send, extra,
                                 priming=_frame(stream, 1, None, self.retry_ms))
            else:  # read from the log with the reply, when it is ready, in one write
                await self._pump(session, stream, 0, receive, send, extra)
        finally:
            if not pumping:  # the pump reports its own disconnect
                await self.host.disconnect(session, "complete")

    async def _connect(self, session: Session, connection: Connection, *, discard: bool = False) -> None:
        """Run the connect hooks; a refusal is reported to the disconnect hooks too (and a session
        minted by this very request is forgotten without a trace)."""
        try:
            await self.host.connect(session, connection)
        except Refused:
            if discard:
                self.host.release(session)
                await self.events.drop(session.id)
            await self.host.disconnect(session, "refused")
            raise
        if session.closed:  # ended (DELETE, expiry) while an async connect hook ran
            await self.host.disconnect(session, "complete")
            raise HttpError(404, "Session not found")
        session.last_active = time.time()  # any request counts as activity, a GET too

    async def _create_session(self, connection: Connection) -> Session:
        held = await self.host.backend.sessions.count() if self.shared else len(self.host.sessions)
        if held >= self.settings.max_sessions:
            raise HttpError(503, "Too many sessions; retry later", code=-32000, headers={"retry-after": "5"})
        session = self.host.new_session(connection.principal)
        state = HttpSessionState()
        session.outlet = Outlet(self, session, state)
        if self.shared and self.host.cluster is not None:
            self.host.cluster.attach(session)
        await self.events.open(session.id, STANDALONE)
        return session

    async def _finish_stream(self, session: Session, state: HttpSessionState, stream: str,
                             replies: list[asyncio.Future[Any]], request_ids: list[Any]) -> None:
        """Append each reply as it completes; then mark the stream done. Owned by the session."""
        try:
            # The usual case is one request: await it directly, without as_completed's machinery.
            # Its reply ends the stream in the same step (final), saving a round trip.
            single = len(replies) == 1
            finished = False
            for reply in replies if single else asyncio.as_completed(replies):
                try:
                    message = await reply
                except asyncio.CancelledError:
                    continue  # cancelled: no reply, the stream just ends
                if not self.shared:
                    if message is not None:
                        await self.events.append(session.id, stream, message, final=single)
                        finished = single
                    continue
                # What the request changed (initialize, setLevel, subscribe) is saved before its
                # reply is out, so the client's next request finds it on any process; a short
                # store outage delays the reply instead of losing it.
                await _patiently(lambda: self._persist(session))
                if message is not None:
                    await _patiently(lambda m=message: self.events.append(session.id, stream, m, final=single))
                    finished = single
            if finished:
                pass
            elif self.shared:
                await _patiently(lambda: self.events.finish(session.id, stream))
            else:
                await self.events.finish(session.id, stream)
        except UnknownEvent:
            pass  # the session ended meanwhile and its streams were dropped
        except BackendUnavailable as exc:
            log.error("the reply of stream %s of session %s… could not be stored: %s", stream, session.id[:8], exc)
        finally:
            for request_id in request_ids:
                if state.request_streams.get(request_id) == stream:
                    del state.request_streams[request_id]

    async def _reply_json(self, session: Session, connection: Connection, messages: list[Any], batch: bool,
                          send: Send, extra: dict[str, str], principal: Principal | None) -> None:
        replies = [r for r in (self.host.kernel.receive(session, m, connection, principal) for m in messages)
                   if r is not None]
        results = [m for m in [await r for r in replies] if m is not None]
        if not results:
            await _respond(send, 202, b"", extra)
            return
        await _respond(send, 200, jsonrpc.encode(results if batch else results[0]), extra)

    # -- GET ----------------------------------------------------------------------------------

    async def _get(self, headers: dict[str, str], connection: Connection, receive: Receive, send: Send) -> None:
        if "text/event-stream" not in headers.get("accept", "") and "*/*" not in headers.get("accept", ""):
            raise HttpError(406, "Not acceptable: Accept must list text/event-stream")
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in LEGACY_VERSIONS:
            raise HttpError(400, f"Bad request: Unsupported protocol version: {version[:40]}")
        session = await self._session(headers, connection)
        await self._connect(session, connection)
        pumping = False
        try:
            state = _state(session)
            assert state is not None
            last_event = headers.get("last-event-id")
            if last_event is not None:
                stream, after = _parse_event_id(last_event)
                if stream is None or not await self.events.exists(session.id, stream):
                    raise HttpError(400, "Unknown or expired Last-Event-ID")
            else:
                stream, after = STANDALONE, -1
            if stream == STANDALONE and state.standalone_live:
                raise HttpError(409, "Conflict: only one standalone SSE stream is allowed per session")
            if after < 0:
                # No Last-Event-ID: what earlier GETs did not get is delivered now, as far as it is
                # still retained (the client did not ask for a replay, so a trimmed start is no error).
                after = await self._standalone_start(session, state)
            try:
                # Check the position before sending headers, so an expired id is a clear 400.
                await self.events.read(session.id, stream, after, 0)
            except UnknownEvent:
                raise HttpError(400, "Unknown or expired Last-Event-ID") from None
            if stream == STANDALONE and self.lease and self.host.cluster is not None:
                # The same rule across processes: the stream is held in the backend (released when it ends).
                if not await self._hold_standalone(session):
                    raise HttpError(409, "Conflict: only one standalone SSE stream is allowed per session")
            # Priming: an id pointing at the current position, so even an idle stream can be resumed.
            pumping = True
            await self._pump(session, stream, after, receive, send, {},
                             priming=_frame(stream, after, None, self.retry_ms))
        finally:
            if not pumping:
                await self.host.disconnect(session, "complete")

    async def _standalone_start(self, session: Session, state: HttpSessionState) -> int:
        oldest_kept = state.standalone_last - self.settings.stream_max_events
        for after in (state.standalone_sent, max(state.standalone_sent, oldest_kept), state.standalone_last):
            try:
                await self.events.read(session.id, STANDALONE, after, 0)
            except UnknownEvent:
                continue
            return after
        return state.standalone_sent

    # -- DELETE -------------------------------------------------------------------------------

    async def _delete(self, headers: dict[str, str], connection: Connection, receive: Receive, send: Send) -> None:
        session = await self._session(headers, connection)
        await self._connect(session, connection)
        await self.host.disconnect(session, "complete")
        await self._end(session, "deleted")
        body = "transfer-encoding" in headers or headers.get("content-length", "0") not in ("", "0")
        await respond_unread(receive, send, 204, b"", _closing({}, body), body)  # a body is never read

    # -- SSE writer ---------------------------------------------------------------------------

    async def _pump(self, session: Session, stream: str, after: int, receive: Receive, send: Send,
                    extra: dict[str, str], priming: bytes = b"") -> None:
        """Follow ``stream`` from ``after`` and write it as SSE until it ends or the client leaves."""
        state = _state(session)
        assert state is not None
        standalone = stream == STANDALONE
        if standalone:
            state.standalone_live = True
        closer: tuple[asyncio.Event, list[int | None]] = (asyncio.Event(), [None])
        state.closers[stream] = closer
        headers = list(_SSE_HEADERS)
        headers.extend((k.encode(), v.encode()) for k, v in extra.items())
        reason = "complete"
        # Three ways to stop following the stream, besides its end: the client leaves, the
        # handler asks to close the connection (polling), the server shuts down.
        disconnected = asyncio.ensure_future(_wait_disconnect(receive))
        stoppers = {disconnected, asyncio.ensure_future(closer[0].wait()), asyncio.ensure_future(self.closing.wait())}
        read_task: asyncio.Future[Any] | None = None
        # A request stream on a shared backend is checked for a lost writer twice a lease.
        leased = bool(self.lease) and not standalone
        wait = min(self.keepalive, self.lease / 2) if leased else self.keepalive
        quiet = 0.0
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            if priming:
                await self._write(send, priming)
            while True:
                read_task = asyncio.ensure_future(self.events.read(session.id, stream, after, wait))
                done, _ = await asyncio.wait({read_task, *stoppers}, return_when=asyncio.FIRST_COMPLETED)
                if read_task not in done:
                    read_task.cancel()
                    reason = "dropped"
                    if disconnected not in done:
                        retry = closer[1][0] if closer[0].is_set() and closer[1][0] is not None else self.retry_ms
                        await self._write(send, f"retry: {retry}\n\n".encode())
                    return
                try:
                    result = read_task.result()
                except UnknownEvent:
                    # The session ended, or this writer fell more than the retention behind (a
                    # client that stopped reading): end the stream; a resume then gets 400.
                    if await self.events.exists(session.id, stream):
                        log.warning("SSE stream %s of session %s… fell behind the event log's retention; "
                                    "closing it", stream, session.id[:8])
                    return
                if not result.events and not result.done:
                    if leased and await self._settle(session, stream):
                        continue  # its process died: the error replies are there to read now
                    quiet += wait
                    if quiet >= self.keepalive or not leased:
                        quiet = 0.0
                        await self._write(send, b": keep-alive\n\n")
                    continue
                chunk = bytearray()
                for event in result.events:
                    chunk += _frame(stream, event.seq, event.message, self.retry_ms)
                    after = event.seq
                if chunk:
                    await self._write(send, bytes(chunk))
                    if standalone:
                        state.standalone_sent = after
                # A read says done only when it returned every event up to the end: nothing is left.
                if result.done:
                    if not standalone:
                        await self._retire(session.id, state, stream)
                    return
        except BackendUnavailable as exc:
            reason = "dropped"  # the client resumes once the store is back (here or elsewhere)
            log.warning("SSE stream %s of session %s… lost the state backend: %s", stream, session.id[:8], exc)
            with contextlib.suppress(Exception):
                await self._write(send, f"retry: {max(1, exc.retry_after) * 1000}\n\n".encode())
        except _Stalled:
            reason = "dropped"  # the events stay in the log: the client can resume elsewhere
            log.info("SSE stream %s of session %s… stalled: the client read nothing for %ss; closing it",
                     stream, session.id[:8], self.write_timeout)
        except (OSError, asyncio.CancelledError):
            reason = "dropped"
            raise
        finally:
            # Idle time counts from the end of a stream, not from the request that opened it: a
            # session is not reaped the moment its long call or listening stream is over.
            session.last_active = time.time()
            for future in (*stoppers, read_task):
                if future is not None:
                    future.cancel()
            if state.closers.get(stream) is closer:
                del state.closers[stream]
            if standalone:
                state.standalone_live = False
                if self.shared:  # where the next GET, on any process, picks up
                    with contextlib.suppress(BackendUnavailable):
                        await self._persist(session)
                    if self.lease and self.host.cluster is not None:
                        with contextlib.suppress(BackendUnavailable):
                            await self.host.backend.unhold(f"get:{session.id}", self.host.cluster.worker)
            try:
                async with asyncio.timeout(1 if reason == "dropped" else self.write_timeout):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
            except Exception:  # the client is gone (or stalled); nothing more to say
                pass
            await self.host.disconnect(session, reason)

    async def _write(self, send: Send, data: bytes) -> None:
        """One SSE write; a client that reads nothing for ``sse_write_timeout`` seconds is let go."""
        try:
            async with asyncio.timeout(self.write_timeout):
                await send({"type": "http.response.body", "body": data, "more_body": True})
        except TimeoutError:
            raise _Stalled from None

    async def _retire(self, session_id: str, state: HttpSessionState, stream: str) -> None:
        """A stream was written in full. Written is not received (the bytes may sit in a socket
        buffer of a connection about to break), so the last few stay resumable; older ones go."""
        state.written.append(stream)
        while len(state.written) > KEEP_WRITTEN_STREAMS:
            await self.events.discard(session_id, state.written.popleft())


def _kind(message: Any) -> jsonrpc.Kind | None:
    try:
        return jsonrpc.classify(message)
    except McpError:
        return None


def _parse_event_id(value: str) -> tuple[str | None, int]:
    """``<stream>.<seq>`` as (stream, seq); (None, -1) when it cannot be one of ours."""
    stream, _, seq = value.strip().partition(".")
    if not stream or not seq.isascii() or not seq.isdigit() or len(seq) > 18:
        return None, -1
    return stream, int(seq)


def _frame(stream: str, seq: int, message: dict[str, Any] | None, retry_ms: int) -> bytes:
    if message is None:
        # The priming event: an id the client can resume from, no data.
        return f"id: {stream}.{seq}\nretry: {retry_ms}\ndata: \n\n".encode()
    return b"id: " + f"{stream}.{seq}".encode() + b"\nevent: message\ndata: " + jsonrpc.encode(message) + b"\n\n"


async def respond_unread(receive: Receive, send: Send, status: int, body: bytes, headers: dict[str, str],
                         unread: bool) -> None:
    """Answer a request whose body may still be arriving, discarding it meanwhile.

    Hypercorn hands body chunks to the app through a small queue, and finishing a response
    waits for room in it: with nobody reading, a client sending many small chunks would leave
    the response (and the server's shutdown) hanging for good.
    """
    if not unread:
        await _respond(send, status, body, headers)
        return
    drain = asyncio.ensure_future(_discard_body(receive))
    try:
        await _respond(send, status, body, headers)
    finally:
        drain.cancel()


async def _discard_body(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body"):
            return


async def _respond(send: Send, status: int, body: bytes, headers: dict[str, str]) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    if body:
        raw.append(_JSON)
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def _era(message: dict[str, Any], headers: dict[str, str]) -> str:
    params = message.get("params")
    return era_of(method=message.get("method"), meta=request_meta(params),
                  header_version=headers.get("mcp-protocol-version"), session_id=headers.get("mcp-session-id"))


def _closing(headers: dict[str, str], close: bool) -> dict[str, str]:
    return {**headers, "connection": "close"} if close else headers


def _snapshot(session: Session, state: HttpSessionState) -> dict[str, Any]:
    """What a shared store keeps of a session (activity time aside, which is in the TTL)."""
    snapshot = session.to_state()
    del snapshot["last_active"]
    snapshot["http"] = {"standalone_sent": state.standalone_sent}
    return snapshot


async def _patiently(operation: Callable[[], Awaitable[Any]], limit: float = 30.0) -> Any:
    """Run a store operation that must not be lost (a reply), retrying through a short outage."""
    deadline = time.monotonic() + limit
    delay = 0.1
    while True:
        try:
            return await operation()
        except BackendUnavailable:
            if time.monotonic() + delay > deadline:
                raise
            await asyncio.sleep(delay)
            delay = min(1.0, delay * 2)


def _state(session: Session) -> HttpSessionState | None:
    outlet = session.outlet
    return outlet.state if isinstance(outlet, Outlet) else None


def _hostname(host: str) -> str:
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _key(principal: Any) -> Any:
    return None if principal is None else principal.key


#: Request headers that carry credentials: for ``mcphost_authenticate`` only, never handed on.
CREDENTIAL_HEADERS = ("authorization", "proxy-authorization")


def _without_credentials(headers: dict[str, str]) -> dict[str, str]:
    if "authorization" not in headers and "proxy-authorization" not in headers:
        return headers
    return {name: value for name, value in headers.items() if name not in CREDENTIAL_HEADERS}


def _check_credentials(scope: Scope, headers: dict[str, str], credentials: str) -> None:
    """400 ``invalid_request`` for credentials no plugin should have to guess at.

    Two Authorization header lines, or a Bearer value that is not exactly one token (proxies
    join duplicate headers with commas), are refused rather than read one way or another.
    Other schemes are left to the plugins.
    """
    raw = scope["headers"]
    # Repeated header names are rare: only then count (``headers`` kept the last of each name).
    if len(raw) != len(headers) and sum(1 for name, _ in raw if name.lower() == b"authorization") > 1:
        problem = "more than one Authorization header"
    elif credentials.strip().partition(" ")[0].lower() == "bearer" and bearer_token(credentials) is None:
        problem = "malformed Bearer credentials (exactly one token expected)"
    else:
        return
    raise Refused(f"Bad request: {problem}", status=400,
                  headers={"WWW-Authenticate": bearer_challenge(error="invalid_request", description=problem)})
