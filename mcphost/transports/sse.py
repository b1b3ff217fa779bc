"""Session-era SSE streams over the backend's event log: the writer that follows a stream, and
the per-session state the HTTP transport keeps (never serialized beyond ``durable``).

Every SSE event is appended to the event log *before* it is written to the socket, and live
writers follow the log, so a client that drops the connection resumes with ``GET`` +
``Last-Event-ID`` (event ids are ``<stream>.<seq>``), on any process of a shared backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from mcphost.deadline import deadline
from mcphost.protocol import jsonrpc
from mcphost.protocol.errors import REQUEST_CANCELLED, McpError
from mcphost.sessions.backend import BackendUnavailable, Event, EventLog, LeasedEventLog, UnknownEvent
from mcphost.sessions.session import Session
from mcphost.transports.asgi import Receive, Send, wait_disconnect

if TYPE_CHECKING:
    from mcphost.config import ServerSettings
    from mcphost.sessions.manager import SessionManager

log = logging.getLogger("mcphost.http")

STANDALONE = "0"
#: Fully written request streams kept per session for a client whose connection broke at the end
#: (at least), and the seconds each stays resumable whatever came after it (a client resumes a
#: stream after its retry delay: one whose call was cancelled, say, while it made five more), up
#: to MAX_WRITTEN_STREAMS per session.
KEEP_WRITTEN_STREAMS = 4
KEEP_WRITTEN_SECONDS = 30.0
MAX_WRITTEN_STREAMS = 64
#: Ending GET streams that update the shared backend at once (see SessionStreams._letting_go).
LETTING_GO = 8
#: Finished request streams a session may leave unread for resumption (besides the byte budget).
MAX_RETAINED_STREAMS = 64
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
               (b"x-accel-buffering", b"no")]


class _Stalled(Exception):
    """An SSE write did not complete within the write timeout."""



class HttpSessionState:
    """What the HTTP transport keeps per live session in this process (never serialized)."""

    __slots__ = ("closers", "gets", "next_stream", "quota", "request_streams", "retained", "silenced",
                 "standalone_last", "standalone_live", "standalone_sent", "written")

    def __init__(self, quota: str = "") -> None:
        #: Whose budgets the session counts against (its quota key): retained bytes per principal.
        self.quota = quota
        self.request_streams: dict[Any, str] = {}
        self.next_stream = 1
        self.standalone_live = False
        self.standalone_sent = 0  # seq of the last standalone event a GET wrote
        self.standalone_last = 0  # seq of the last standalone event appended
        # stream id -> event set to make its live writer let go of the connection
        self.closers: dict[str, tuple[asyncio.Event, list[int | None]]] = {}
        self.written: dict[str, float] = {}  # fully written request streams and when, oldest first
        self.gets = 0  # GET streams open (the standalone one and resumptions)
        # Finished request streams not yet written in full (their client left): bytes of their
        # replies, oldest first. Kept for resumption within server.max_retained_bytes.
        self.retained: dict[str, int] = {}
        # Request streams whose request the client cancelled (notifications/cancelled): what they
        # hold of it that is not written yet is not written at all (live or on a resume), by name.
        self.silenced: set[str] = set()

    def cancelled(self, request_id: Any) -> None:
        """The client cancelled ``request_id``: nothing more of its stream goes out (its own stream
        only: a batch's stream still carries the other requests' messages)."""
        stream = self.request_streams.get(request_id)
        if stream is not None and sum(1 for other in self.request_streams.values() if other == stream) == 1:
            self.silenced.add(stream)


class Outlet:
    """The session's outlet: server messages go to the event log of the stream they belong to."""

    __slots__ = ("_events", "_session_id", "state")

    def __init__(self, events: EventLog, session: Session, state: HttpSessionState) -> None:
        self._events = events
        self._session_id = session.id
        self.state = state

    async def __call__(self, message: dict[str, Any], related: Any) -> None:
        stream = self.state.request_streams.get(related, STANDALONE) if related is not None else STANDALONE
        try:
            seq = await self._events.append(self._session_id, stream, message)
        except BackendUnavailable:
            if "id" in message:
                raise  # a question the client must see: its asker gets the error
            # A notification (progress, a log line) the log cannot take while the backend is away is
            # dropped, as a lost datagram would be; the call that sent it goes on.
            log.warning("dropped a %s notification: the event log is unavailable", message.get("method"))
            return
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



class SessionStreams:
    """The HTTP transport's session-era streams: the SessionManager's driver for HTTP sessions.

    It gives each session created or loaded here its outlet and per-session stream state, opens
    request streams in the event log, stores replies as their requests finish, and writes streams
    as SSE (following the log, so a client resumes anywhere). The ASGI app
    (:class:`~mcphost.transports.http.HttpTransport`) only parses requests and answers them; it
    reaches sessions, the event log and what other processes hold through the manager only.
    """

    def __init__(self, manager: SessionManager, settings: ServerSettings) -> None:
        self.manager = manager
        self.settings = settings
        self.keepalive = settings.sse_keepalive
        self.retry_ms = settings.sse_retry_ms
        self.write_timeout = settings.sse_write_timeout
        #: Set when the server shuts down: SSE clients are let go with a retry hint.
        self.closing = asyncio.Event()
        #: Tasks storing replies (owned by sessions, not by HTTP exchanges).
        self.background: set[asyncio.Task[Any]] = set()
        #: Request stream numbers on a shared backend: per process, never reused by a session.
        self._stream_numbers = itertools.count(1)
        #: Per quota key: the unread finished streams of that principal's sessions here, oldest first
        #: ((session id, stream) -> (session, bytes)), counted in the ledger's "retained bytes".
        self._retained_by: dict[str, dict[tuple[str, str], tuple[Session, int]]] = {}
        #: GET streams ending at once tell the shared backend a few at a time, so they share its
        #: pooled connections instead of opening one each (200 streams closed together: 200).
        self._letting_go = asyncio.Semaphore(LETTING_GO)

    @property
    def events(self) -> EventLog:
        return self.manager.events

    @property
    def lease(self) -> float:
        return self.manager.lease

    @property
    def shared(self) -> bool:
        """Sessions live in a store shared with other processes."""
        return self.manager.shared

    async def stop(self) -> None:
        """Let SSE clients go (with a retry hint) and give requests time to finish."""
        self.closing.set()
        await self.manager.drain(self.settings.graceful_timeout)
        if self.background:
            await asyncio.wait(list(self.background), timeout=5)

    # -- what the SessionManager asks of its driver ------------------------------------------------

    async def attach(self, session: Session, stored: Mapping[str, Any] | None) -> None:
        state = HttpSessionState(session.quota)
        if stored is not None:
            state.standalone_sent = int((stored.get("http") or {}).get("standalone_sent", 0))
        session.outlet = Outlet(self.events, session, state)
        await self.events.open(session.id, STANDALONE)

    async def keep(self, session: Session) -> None:
        await self.events.open(session.id, STANDALONE)  # keeps the log's keys alive with the session

    def durable(self, session: Session) -> dict[str, Any]:
        state = state_of(session)
        return {"http": {"standalone_sent": state.standalone_sent if state is not None else 0}}

    def busy(self, session: Session) -> bool:
        state = state_of(session)
        return state is not None and (state.standalone_live or bool(state.closers))

    def leased(self, session: Session) -> Iterable[tuple[str, list[Any]]]:
        state = state_of(session)
        streams: dict[str, list[Any]] = {}
        if state is not None:
            for request_id, stream in list(state.request_streams.items()):
                streams.setdefault(stream, []).append(request_id)
        return streams.items()

    # -- request streams ---------------------------------------------------------------------------

    async def open_request_stream(self, session: Session, state: HttpSessionState, request_ids: list[Any]) -> str:
        """A new request stream for ``request_ids``: opened, leased and primed in the log (one step)."""
        stream = str(state.next_stream)
        state.next_stream += 1
        worker = self.manager.worker
        if self.shared and worker is not None:
            # Unique among the processes, and numbered per process, not per session: a session
            # released here and loaded again later must not reuse a stream id it had.
            stream = f"{next(self._stream_numbers)}-{worker}"
        # Reserve the ids before the first await, so a concurrent POST reusing one gets 409.
        for request_id in request_ids:
            state.request_streams[request_id] = stream
        try:
            # Take the lease before anything runs (a process that dies from here on is noticed)
            # and store the priming event first: one round trip.
            await self.events.begin(session.id, stream, request_ids, self.lease)
        except BaseException:
            for request_id in request_ids:
                if state.request_streams.get(request_id) == stream:
                    del state.request_streams[request_id]
            raise
        return stream

    async def ended_unanswered(self, session: Session, stream: str) -> bool:
        """Whether a finished request stream holds no reply at all (its calls were cancelled)."""
        try:
            result = await self.events.read(session.id, stream, 0, 0)
        except UnknownEvent:
            return False
        return result.done and not any(
            event.message is not None and "method" not in event.message for event in result.events)

    async def answer(self, session: Session, state: HttpSessionState, stream: str,
                     replies: list[asyncio.Future[Any]], request_ids: list[Any], receive: Receive, send: Send,
                     extra: dict[str, str]) -> None:
        """Store the replies of a request stream as they come and write the stream as SSE.

        A handler that waits on nothing has its reply after one turn of the loop: its stream is
        then complete in the log and goes out as one body (:meth:`write_stored`); otherwise it is
        followed as it grows (:meth:`pump`). Either way the replies are stored first, by the
        session, so a client that leaves loses nothing and can resume. Ends with the disconnect
        hooks (``manager.close``) in every case.
        """
        # On a shared backend the priming event (seq 1) is written as stored, before the log is
        # read again, so the client holds a resumable id even if the log cannot be read a moment later.
        priming, after = (frame(stream, 1, None, self.retry_ms), 1) if self.shared else (b"", 0)
        storing = False
        closer: tuple[asyncio.Event, list[int | None]] | None = None
        unread: int | None = None  # replies stored here but not yet counted as retained (bytes)
        encoded: dict[int, bytes] = {}  # those replies as encoded for the log, by sequence number
        try:
            try:
                await asyncio.sleep(0)
                ready = all(reply.done() for reply in replies)
                storing = True
                if not ready:
                    self._store_replies(session, state, stream, replies, request_ids)
                else:
                    # This request writes the stream next: a live writer, so no retention budget
                    # drops it as unread while it is stored.
                    closer = state.closers[stream] = (asyncio.Event(), [None])
                    if self.shared:
                        # Storing takes a round trip: the session's task does it, so a client
                        # leaving meanwhile cannot cut it short; this one only waits for it.
                        await asyncio.shield(self._store_replies(session, state, stream, replies, request_ids))
                    else:  # nothing this backend does waits: stored here, in this task
                        # Written next, in this task: counted as retained only if that fails.
                        unread = await self._finish_stream(session, state, stream, replies, request_ids,
                                                           retain=False, encoded=encoded)
            except BaseException:
                if not storing:  # cancelled (the connection broke): the session still stores the replies
                    self._store_replies(session, state, stream, replies, request_ids)
                await self.manager.close(session, "dropped")
                raise
            written = ready and await self.write_stored(session, state, stream, send, extra, after, priming,
                                                        unread=unread, encoded=encoded)
            if not written and unread is not None and stream not in state.written:
                await self._retain(session, state, stream, unread)  # the pump below follows it
        finally:
            if closer is not None and state.closers.get(stream) is closer:
                del state.closers[stream]
        if not written:
            await self.pump(session, stream, after, receive, send, extra, priming=priming)

    def _store_replies(self, session: Session, state: HttpSessionState, stream: str,
                       replies: list[asyncio.Future[Any]], request_ids: list[Any]) -> asyncio.Task[int]:
        """Store each reply in the stream as it completes, in a task the session owns."""
        finisher = asyncio.get_running_loop().create_task(
            self._finish_stream(session, state, stream, replies, request_ids))
        self.background.add(finisher)
        finisher.add_done_callback(self.background.discard)
        return finisher

    async def _settle(self, session: Session, stream: str) -> bool:
        """End a request stream whose process died with an error reply for each of its requests.

        A stream this process still writes is never settled, whatever its lease says: a
        renewal that failed (Redis slow or briefly away) must not tell the client to send again
        a request that is still running here. Nor is one another process writes whose lease
        lapsed only because Redis refused writes for a while: the backend settles a stream only
        once its lease has stayed lapsed for a grace period while it took writes, and the owner
        takes its lease back within that grace (see ``manager.Upkeep.beat``). False meanwhile.
        """
        state = state_of(session)
        if state is not None and stream in state.request_streams.values():  # until its replies are stored
            return False
        events = cast(LeasedEventLog, self.events)  # only a backend with leases settles streams
        request_ids = await events.orphaned(session.id, stream)
        if not request_ids:
            return False
        error = McpError(REQUEST_CANCELLED, "Request ended without a response: the server process handling it "
                                            "stopped; send it again")
        settled = await events.settle(session.id, stream, [jsonrpc.error(i, error) for i in request_ids])
        if settled:
            log.warning("request stream %s of session %s… lost its process; ended it with an error",
                        stream, session.id[:8])
        return bool(settled)

    async def renew(self, session: Session) -> None:
        """The SessionManager's Driver: renew the cluster-wide hold of an open standalone GET stream."""
        state = state_of(session)
        if state is not None and state.standalone_live:
            await self.hold_standalone(session)

    async def hold_standalone(self, session: Session) -> bool:
        """Take (or renew) the session's one standalone GET stream cluster-wide; False when a
        stream on another process has it. Lapses within a lease if that process dies."""
        return await self.manager.hold(f"get:{session.id}")

    async def standalone_start(self, session: Session, state: HttpSessionState) -> int:
        oldest_kept = state.standalone_last - self.settings.stream_max_events
        for after in (state.standalone_sent, max(state.standalone_sent, oldest_kept), state.standalone_last):
            try:
                await self.events.read(session.id, STANDALONE, after, 0)
            except UnknownEvent:
                continue
            return after
        return state.standalone_sent

    # -- writing streams as SSE --------------------------------------------------------------------

    async def pump(self, session: Session, stream: str, after: int, receive: Receive, send: Send,
                    extra: dict[str, str], priming: bytes = b"", until: float | None = None) -> None:
        """Follow ``stream`` from ``after`` and write it as SSE until it ends or the client leaves
        (or, ``until`` seconds given, until they have passed: then it ends with a retry hint)."""
        state = state_of(session)
        assert state is not None
        standalone = stream == STANDALONE
        if standalone:
            state.standalone_live = True
        closer: tuple[asyncio.Event, list[int | None]] = (asyncio.Event(), [None])
        state.closers[stream] = closer
        headers = list(SSE_HEADERS)
        headers.extend((k.encode(), v.encode()) for k, v in extra.items())
        reason = "complete"
        # Three ways to stop following the stream, besides its end: the client leaves, the
        # handler asks to close the connection (polling), the server shuts down.
        disconnected = asyncio.ensure_future(wait_disconnect(receive))
        stoppers = {disconnected, asyncio.ensure_future(closer[0].wait()), asyncio.ensure_future(self.closing.wait())}
        if until is not None:  # the credentials expire, or max_stream_seconds pass
            stoppers.add(asyncio.ensure_future(asyncio.sleep(until)))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            if priming:
                await self._write(send, priming)
            reason = await self._follow(session, state, stream, after, send, stoppers, disconnected, closer)
        except BackendUnavailable as exc:
            reason = "dropped"  # the client resumes once the store is back (here or elsewhere)
            log.warning("SSE stream %s of session %s… lost the state backend: %s", stream, session.id[:8], exc)
            with contextlib.suppress(Exception):
                await self._write(send, f"retry: {max(1, exc.retry_after) * 1000}\n\n".encode())
        except _Stalled:
            reason = "dropped"  # the events stay in the log: the client can resume elsewhere
            _log_stalled(session, stream, self.write_timeout)
        except (OSError, asyncio.CancelledError):
            reason = "dropped"
            raise
        finally:
            for future in stoppers:
                future.cancel()
            await self._end_stream(session, state, stream, closer, send, reason)

    async def _follow(self, session: Session, state: HttpSessionState, stream: str, after: int, send: Send,
                      stoppers: set[asyncio.Task[Any]], disconnected: asyncio.Task[Any],
                      closer: tuple[asyncio.Event, list[int | None]]) -> str:
        """Write the events of ``stream`` after ``after`` as they come, until it ends (``complete``)
        or one of ``stoppers`` fires (``dropped``; a retry hint first unless the client left)."""
        standalone = stream == STANDALONE
        # A request stream on a shared backend is checked for a lost writer twice a lease.
        leased = bool(self.lease) and not standalone
        wait = min(self.keepalive, self.lease / 2) if leased else self.keepalive
        quiet = 0.0
        while True:
            read_task = asyncio.ensure_future(self.events.read(session.id, stream, after, wait))
            try:
                done, _ = await asyncio.wait({read_task, *stoppers}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not read_task.done():
                    read_task.cancel()
            if read_task not in done:
                if disconnected not in done:  # not the client leaving: tell it when to come back
                    await self._write(send, f"retry: {_retry_after(closer, self.retry_ms)}\n\n".encode())
                return "dropped"
            try:
                result = read_task.result()
            except UnknownEvent:
                # The session ended, or this writer fell more than the retention behind (a
                # client that stopped reading): end the stream; a resume then gets 400.
                if await self.events.exists(session.id, stream):
                    log.warning("SSE stream %s of session %s… fell behind the event log's retention; "
                                "closing it", stream, session.id[:8])
                return "complete"
            if not result.events and not result.done:
                if leased and await self._settle(session, stream):
                    continue  # its process died: the error replies are there to read now
                quiet += wait
                if quiet >= self.keepalive or not leased:
                    quiet = 0.0
                    await self._write(send, b": keep-alive\n\n")
                continue
            if result.events:
                after = await self._write_events(send, state, stream, result.events)
            # A read says done only when it returned every event up to the end: nothing is left.
            if result.done:
                if not standalone:
                    await self._retire(session.id, state, stream)
                return "complete"

    async def _write_events(self, send: Send, state: HttpSessionState, stream: str, events: list[Event]) -> int:
        """Write ``events`` of ``stream`` in one write; the sequence number of the last one. A
        stream whose request the client cancelled writes none of its notifications (progress the
        client could only report as for an unknown token)."""
        after = events[-1].seq
        if stream in state.silenced:
            events = [e for e in events if e.message is None or "method" not in e.message or "id" in e.message]
            if not events:
                return after
        await self._write(send, b"".join([frame(stream, event.seq, event.message, self.retry_ms, event.data)
                                          for event in events]))
        if stream == STANDALONE:
            state.standalone_sent = after
        return after

    async def _end_stream(self, session: Session, state: HttpSessionState, stream: str,
                          closer: tuple[asyncio.Event, list[int | None]], send: Send, reason: str) -> None:
        """What ends every followed stream: its body closed and the disconnect hooks run (``reason``)."""
        # Idle time counts from the end of a stream, not from the request that opened it: a
        # session is not reaped the moment its long call or listening stream is over.
        session.last_active = time.time()
        if state.closers.get(stream) is closer:
            del state.closers[stream]
        if stream == STANDALONE:
            state.standalone_live = False
            if self.manager.shared:  # where the next GET, on any process, picks up
                async with self._letting_go:
                    with contextlib.suppress(BackendUnavailable):
                        await self.manager.persist(session)
                    with contextlib.suppress(BackendUnavailable):  # the cluster-wide GET hold
                        await self.manager.unhold(f"get:{session.id}")
        try:
            with deadline(1 if reason == "dropped" else self.write_timeout):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except Exception:  # the client is gone (or stalled); nothing more to say
            pass
        await self.manager.close(session, reason)

    async def write_stored(self, session: Session, state: HttpSessionState, stream: str, send: Send,
                           extra: dict[str, str], after: int, priming: bytes, unread: int | None = None,
                           encoded: Mapping[int, bytes] | None = None) -> bool:
        """Write a request stream that is already complete in the log as one response.

        What :meth:`pump` would write for it (from ``after``, ``priming`` first), byte for byte,
        without its watcher tasks: the events were stored first (so the stream stays resumable
        like any other), and nothing more can come. False, having written nothing, when the
        stream is not complete after all. ``unread``: the bytes of replies stored but not yet
        counted as retained (the caller skipped that, this write coming next); they are counted
        when the write fails, so the stream stays resumable within the retention budgets.
        ``encoded``: replies already encoded by the caller, by sequence number (a log that keeps
        no encoded copy would otherwise have them encoded a second time here).
        """
        try:
            result = await self.events.read(session.id, stream, after, 0)
        except (UnknownEvent, BackendUnavailable):  # the pump says what there is to say
            return False
        if not result.done or not result.events:
            return False
        known = encoded or {}
        body = priming + b"".join([frame(stream, event.seq, event.message, self.retry_ms,
                                         event.data if event.data is not None else known.get(event.seq))
                                   for event in result.events])
        # The whole stream is known: it goes out with a Content-Length, so the server frames it
        # as one body (no chunked encoding, one write less); clients read SSE to its end either way.
        headers = [*SSE_HEADERS, (b"content-length", str(len(body)).encode())]
        if extra:
            headers.extend((k.encode(), v.encode()) for k, v in extra.items())
        reason = "complete"
        try:
            with deadline(self.write_timeout):
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": body, "more_body": False})
            await self._retire(session.id, state, stream)
        except TimeoutError:
            reason = "dropped"  # the events stay in the log: the client can resume elsewhere
            _log_stalled(session, stream, self.write_timeout)
        except (OSError, asyncio.CancelledError):
            reason = "dropped"
            raise
        finally:
            session.last_active = time.time()
            if reason == "dropped" and unread is not None and stream not in state.written:
                await self._retain(session, state, stream, unread)
            await self.manager.close(session, reason)
        return True

    async def _write(self, send: Send, data: bytes) -> None:
        """One SSE write; a client that reads nothing for ``sse_write_timeout`` seconds is let go."""
        try:
            with deadline(self.write_timeout):
                await send({"type": "http.response.body", "body": data, "more_body": True})
        except TimeoutError:
            raise _Stalled from None

    async def _retire(self, session_id: str, state: HttpSessionState, stream: str) -> None:
        """A stream was written in full. Written is not received (the bytes may sit in a socket
        buffer of a connection about to break), so the last few stay resumable; older ones go."""
        self._unretain(session_id, state, stream)
        state.written[stream] = now = time.monotonic()
        while len(state.written) > KEEP_WRITTEN_STREAMS:
            oldest, written_at = next(iter(state.written.items()))
            if now - written_at < KEEP_WRITTEN_SECONDS and len(state.written) <= MAX_WRITTEN_STREAMS:
                break  # still within the time a client may take to resume it
            del state.written[oldest]
            state.silenced.discard(oldest)
            await self.events.discard(session_id, oldest)

    async def _finish_stream(self, session: Session, state: HttpSessionState, stream: str,
                             replies: list[asyncio.Future[Any]], request_ids: list[Any], *,
                             retain: bool = True, encoded: dict[int, bytes] | None = None) -> int:
        """Append each reply as it completes; then mark the stream done. Owned by the session.

        The stream is then retained for resumption (counted in the retention budgets) unless
        ``retain`` is False (its writer, about to write it, retains it if that fails). Returns
        the bytes of its replies; ``encoded`` collects them as encoded, by sequence number.
        """
        size = 0  # bytes of the replies, counted against the session's retention budget
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
                # Encoded once: the bytes count against the retention budget, are stored and are
                # what the writer sends.
                data = None if message is None else jsonrpc.encode(message)
                if data is not None:
                    size += len(data)
                if not self.shared:
                    if message is not None:
                        seq = await self.events.append(session.id, stream, message, final=single, data=data)
                        if encoded is not None and data is not None:
                            encoded[seq] = data
                        finished = single
                    continue
                # What the request changed (initialize, setLevel, subscribe) is saved before its
                # reply is out, so the client's next request finds it on any process; a short
                # store outage delays the reply instead of losing it.
                await patiently(lambda: self.manager.persist(session))
                if message is not None:
                    await patiently(lambda m=message, d=data: self.events.append(  # type: ignore[misc]  # mypy infers no lambda with a default
                        session.id, stream, m, final=single, data=d))
                    finished = single
            if not finished:  # a batch, or no reply: mark the stream done
                await (patiently(lambda: self.events.finish(session.id, stream)) if self.shared
                       else self.events.finish(session.id, stream))
            if retain and stream not in state.written:
                await self._retain(session, state, stream, size)
        except UnknownEvent:
            pass  # the session ended meanwhile and its streams were dropped
        except BackendUnavailable as exc:
            log.error("the reply of stream %s of session %s… could not be stored: %s", stream, session.id[:8], exc)
        finally:
            for request_id in request_ids:
                if state.request_streams.get(request_id) == stream:
                    del state.request_streams[request_id]
        return size

    async def _retain(self, session: Session, state: HttpSessionState, stream: str, size: int) -> None:
        """A request stream finished with ``size`` bytes of replies: keep it for resumption within
        the session's budget (``server.max_retained_bytes``, :data:`MAX_RETAINED_STREAMS`) and its
        principal's over all its sessions (``max_retained_bytes_per_principal``, and everyone's
        ``max_retained_bytes_total``), dropping the oldest unread ones that no live writer follows."""
        state.retained[stream] = size
        budgets = self.manager.budgets
        mine = self._retained_by.setdefault(state.quota, {})
        mine[(session.id, stream)] = (session, size)
        budgets.force(state.quota, "retained bytes", size)
        await budgets.cover(state.quota, "retained bytes")  # across the cluster on a shared backend
        budget = self.settings.max_retained_bytes
        while len(state.retained) > MAX_RETAINED_STREAMS or sum(state.retained.values()) > budget:
            victim = next((name for name in state.retained if name not in state.closers), None)
            if victim is None:
                break
            await self._drop_retained(session, state, victim, "its session's")
        while budgets.over(state.quota, "retained bytes"):
            oldest = next(((other, name) for (_, name), (other, _) in mine.items()
                           if (held := state_of(other)) is not None and name not in held.closers), None)
            if oldest is None:
                break
            other, name = oldest
            other_state = state_of(other)
            assert other_state is not None
            await self._drop_retained(other, other_state, name, "its principal's")

    async def _drop_retained(self, session: Session, state: HttpSessionState, stream: str, whose: str) -> None:
        log.info("dropping unread stream %s of session %s…: over %s retention budget", stream, session.id[:8], whose)
        self._unretain(session.id, state, stream)
        state.silenced.discard(stream)
        await self.events.discard(session.id, stream)

    def _unretain(self, session_id: str, state: HttpSessionState, stream: str) -> None:
        """``stream`` is no longer kept unread (written, dropped, or its session let go here)."""
        size = state.retained.pop(stream, None)
        if size is None:
            return
        mine = self._retained_by.get(state.quota)
        if mine is not None:
            mine.pop((session_id, stream), None)
            if not mine:
                del self._retained_by[state.quota]
        self.manager.budgets.release(state.quota, "retained bytes", size)

    def forget(self, session: Session) -> None:
        """The session is let go here: what it kept unread no longer counts against its principal."""
        state = state_of(session)
        if state is not None:
            for stream in list(state.retained):
                self._unretain(session.id, state, stream)


def parse_event_id(value: str) -> tuple[str | None, int]:
    """``<stream>.<seq>`` as (stream, seq); (None, -1) when it cannot be one of ours.

    Stream ids are what this transport mints (``<n>``, or ``<n>-<worker>`` on a shared backend)
    and nothing else: a client-chosen id never reaches a backend, where it could name one of
    its internal keys or fields.
    """
    stream, _, seq = value.strip().partition(".")
    if not _STREAM_ID.fullmatch(stream) or not seq.isascii() or not seq.isdigit() or len(seq) > 18:
        return None, -1
    return stream, int(seq)


#: A stream id this transport mints: a number, then on a shared backend the worker's hex tag.
_STREAM_ID = re.compile(r"[0-9]{1,18}(?:-[0-9a-f]{1,32})?")


def frame(stream: str, seq: int, message: dict[str, Any] | None, retry_ms: int, data: bytes | None = None) -> bytes:
    """One SSE event; ``data`` is the message already encoded (as the event log stored it)."""
    if message is None:
        # The priming event: an id the client can resume from, no data.
        return f"id: {stream}.{seq}\nretry: {retry_ms}\ndata: \n\n".encode()
    return (b"id: " + f"{stream}.{seq}".encode() + b"\nevent: message\ndata: "
            + (jsonrpc.encode(message) if data is None else data) + b"\n\n")



async def patiently(operation: Callable[[], Awaitable[Any]], limit: float = 30.0) -> Any:
    """Run a store operation that must not be lost (a reply), retrying through a short outage."""
    give_up = time.monotonic() + limit
    delay = 0.1
    while True:
        try:
            return await operation()
        except BackendUnavailable:
            if time.monotonic() + delay > give_up:
                raise
            await asyncio.sleep(delay)
            delay = min(1.0, delay * 2)


def state_of(session: Session) -> HttpSessionState | None:
    outlet = session.outlet
    return outlet.state if isinstance(outlet, Outlet) else None


def _retry_after(closer: tuple[asyncio.Event, list[int | None]], configured: int) -> int:
    """The retry hint of a stream ended by the server: the handler's (when it closed the stream
    to have the client poll), else the configured one."""
    asked = closer[1][0]
    return asked if closer[0].is_set() and asked is not None else configured


def _log_stalled(session: Session, stream: str, write_timeout: float) -> None:
    log.info("SSE stream %s of session %s… stalled: the client read nothing for %ss; closing it",
             stream, session.id[:8], write_timeout)
