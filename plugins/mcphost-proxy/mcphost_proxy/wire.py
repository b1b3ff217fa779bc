"""The lean HTTP client of the per-call path: keep-alive HTTP/1.1 connections to one upstream URL.

A proxied ``tools/call`` through the ``mcp`` client's Streamable HTTP transport built an httpx request,
a task and a pair of memory streams per call, and validated every message with pydantic both ways;
the gateway spent about ten times the upstream's CPU per call. Here a call is one request written
on a connection kept open (at most ``pool_size`` per upstream; a call that finds them all busy waits
for one), its bytes encoded once by the caller, and the reply read as it arrives: a JSON body whole,
an SSE body as events (progress, logs, questions and at last the answer), each decoded once with
orjson. Nothing here knows MCP beyond SSE framing: :mod:`mcphost_proxy.lean` does.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Mapping

#: The longest response head read (status line and header fields).
MAX_HEAD_BYTES = 64 * 1024


class WireError(ConnectionError):
    """The connection failed or the reply was not HTTP/1.1 this client reads."""


class TooLarge(WireError):
    """The reply's body grew past the configured limit (the connection was closed)."""


class Reply:
    """One HTTP response: status, header fields (lower-case names), and its body, whole or streamed."""

    __slots__ = ("_done", "_given", "_pieces", "_size", "body", "headers", "sse", "status", "streaming")

    def __init__(self, status: int, headers: dict[str, str], sse: bool, streaming: bool) -> None:
        self.status = status
        self.headers = headers
        #: An SSE body; read as it arrives (``streaming``) unless its length was announced: then the
        #: upstream has written every event already, and the body is read whole.
        self.sse = sse
        self.streaming = streaming
        self.body = b""
        self._pieces: collections.deque[bytes | BaseException | None] = collections.deque()
        self._done: asyncio.Future[None] | None = None
        self._size = 0
        self._given = False

    def _feed(self, piece: bytes | BaseException | None) -> None:
        self._pieces.append(piece)
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body of a streamed reply, as it arrives (a whole reply: its body, once)."""
        while (piece := await self.next_chunk()) is not None:
            yield piece

    async def next_chunk(self) -> bytes | None:
        """The next piece of the body (a whole reply: its body, once); None at its end.

        A loop over this leaves nothing to finalize when it stops early (a reader that has its answer),
        where an abandoned async generator has the loop schedule its ``aclose`` from the garbage
        collector: a wake-up of the loop through its self-pipe and a task, per call.
        """
        if not self.streaming:
            if self._given:
                return None
            self._given = True
            return self.body or None
        while not self._pieces:
            self._done = asyncio.get_running_loop().create_future()
            await self._done
        piece = self._pieces.popleft()
        if isinstance(piece, BaseException):
            self._pieces.appendleft(piece)  # every later read fails the same way
            raise piece
        if piece is None:
            self._pieces.appendleft(None)
        return piece


class _Connection(asyncio.Protocol):
    """One keep-alive connection; reads one response at a time (no pipelining)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._buffer = bytearray()
        self._reply: Reply | None = None
        self._waiter: asyncio.Future[Reply] | None = None
        self._state = "idle"  # idle, head, length, chunked, until-close
        self._left = 0
        self._parts: list[bytes] = []
        self._close_after = False
        #: Whether any byte of the current exchange's response arrived.
        self.received = False

    # -- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.received = True
        self._buffer += data
        try:
            self._advance()
        except WireError as exc:
            self._fail(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._state == "until-close" and self._reply is not None:
            self._finish_body(b"".join(self._parts) + bytes(self._buffer))
            return
        self._fail(WireError("the upstream closed the connection" + (f": {exc}" if exc else "")))

    # -- one exchange --------------------------------------------------------------------------

    def send(self, request: bytes) -> asyncio.Future[Reply]:
        assert self.transport is not None and self._state == "idle"
        self._state = "head"
        self.received = False
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self._waiter

    @property
    def idle(self) -> bool:
        return self._state == "idle" and not self.closed and not self._close_after

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, exc: BaseException) -> None:
        self.close()
        waiter, reply = self._waiter, self._reply
        self._waiter = self._reply = None
        self._state = "closed"
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        elif reply is not None and reply.streaming:
            reply._feed(exc)

    def _advance(self) -> None:
        while self._buffer:
            state = self._state
            if state == "head":
                if not self._read_head():
                    return
            elif state == "length":
                take = min(self._left, len(self._buffer))
                self._body_piece(bytes(self._buffer[:take]))
                del self._buffer[:take]
                self._left -= take
                if self._left == 0:
                    self._end_body()
            elif state == "chunked":
                if not self._read_chunk():
                    return
            elif state == "until-close":
                self._body_piece(bytes(self._buffer))
                self._buffer.clear()
            else:
                raise WireError(f"the upstream sent {len(self._buffer)} bytes nobody asked for")

    def _read_head(self) -> bool:
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise WireError("the upstream's response head is too long")
            return False
        lines = bytes(self._buffer[:end]).decode("latin-1").split("\r\n")
        del self._buffer[:end + 4]
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise WireError(f"not an HTTP/1.1 response: {lines[0][:80]!r}")
        status = int(parts[1])
        if status < 200:  # 100 Continue and the like: the real response follows
            return True
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        self._close_after = headers.get("connection", "").lower() == "close" or parts[0] == "HTTP/1.0"
        sse = headers.get("content-type", "").lower().startswith("text/event-stream")
        length = headers.get("content-length")
        streaming = sse and (length is None or not length.isdigit() or int(length) > self.limit)
        reply = self._reply = Reply(status, headers, sse, streaming)
        self._parts = []
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._state = "chunked"
        elif length is not None:
            try:
                self._left = int(length)
            except ValueError:
                raise WireError("the upstream sent an invalid Content-Length") from None
            if self._left > self.limit and not streaming:  # a streamed SSE body: each event is bounded
                raise TooLarge(f"the upstream's reply is over this server's max_message_bytes ({self.limit}); "
                               "it was dropped")
            self._state = "length"
            if self._left == 0:
                self._end_body()
        elif status in (204, 304):
            self._end_body()
        else:
            self._state = "until-close"
            self._close_after = True
        if streaming and self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(reply)
        return True

    def _read_chunk(self) -> bool:
        line_end = self._buffer.find(b"\r\n")
        if line_end < 0:
            return False
        try:
            size = int(bytes(self._buffer[:line_end]).split(b";", 1)[0], 16)
        except ValueError:
            raise WireError("the upstream sent an invalid chunk size") from None
        if size == 0:  # the last chunk; then trailers (ignored) and an empty line
            trailer_end = self._buffer.find(b"\r\n\r\n", line_end)
            if self._buffer[line_end:line_end + 4] == b"\r\n\r\n" or trailer_end >= 0:
                del self._buffer[:(trailer_end if trailer_end >= 0 else line_end) + 4]
                self._end_body()
                return True
            return False
        if len(self._buffer) < line_end + 2 + size + 2:
            return False
        start = line_end + 2
        self._body_piece(bytes(self._buffer[start:start + size]))
        del self._buffer[:start + size + 2]
        return True

    def _body_piece(self, piece: bytes) -> None:
        reply = self._reply
        assert reply is not None
        reply._size += len(piece)
        if reply.streaming:
            reply._feed(piece)  # the reader bounds each event (sse.py)
            return
        if reply._size > self.limit:
            raise TooLarge(f"the upstream's reply is over this server's max_message_bytes ({self.limit}); "
                           "it was dropped")
        self._parts.append(piece)

    def _end_body(self) -> None:
        self._finish_body(self._parts[0] if len(self._parts) == 1 else b"".join(self._parts))

    def _finish_body(self, body: bytes) -> None:
        reply, waiter = self._reply, self._waiter
        self._reply = self._waiter = None
        self._parts = []
        self._state = "idle"
        if self._close_after:
            self.close()
        if reply is None:
            return
        if reply.streaming:
            reply._feed(None)
        else:
            reply.body = body
            if waiter is not None and not waiter.done():
                waiter.set_result(reply)


class HttpClient:
    """Up to ``pool_size`` keep-alive connections to the host of ``url``; POSTs JSON to its path."""

    def __init__(self, url: str, headers: Mapping[str, str], *, pool_size: int, limit: int) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.host = parsed.hostname
        self.port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self.ssl: ssl.SSLContext | None = ssl.create_default_context() if parsed.scheme == "https" else None
        path = parsed.path or "/"
        if parsed.query:
            path += "?" + parsed.query
        authority = parsed.netloc.rpartition("@")[2]
        fixed = {"host": authority, "accept": "application/json, text/event-stream",
                 "content-type": "application/json", **{k.lower(): v for k, v in headers.items()}}
        self._start = f"POST {path} HTTP/1.1\r\n".encode() + "".join(
            f"{name}: {value}\r\n" for name, value in fixed.items()).encode("latin-1")
        self.limit = limit
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(max(1, pool_size))
        self._open: set[_Connection] = set()
        self._closed = False

    async def _connection(self) -> _Connection:
        while self._idle:
            connection = self._idle.pop()
            if connection.idle:
                return connection
            self._open.discard(connection)
        return await self._fresh()

    def _release(self, connection: _Connection) -> None:
        if connection.idle and not self._closed:
            self._idle.append(connection)
        else:
            connection.close()
            self._open.discard(connection)

    @contextlib.asynccontextmanager
    async def post(self, body: bytes, headers: Mapping[str, str]) -> AsyncIterator[Reply]:
        """POST ``body`` with ``headers`` besides the fixed ones; the reply, its body read (JSON) or being read
        (SSE: :meth:`Reply.chunks`). A connection whose reply was not read to its end is closed."""
        if self._closed:
            raise WireError("the upstream client is closed")
        extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items()).encode("latin-1")
        request = b"".join((self._start, extra, b"content-length: %d\r\n\r\n" % len(body), body))
        async with self._slots:
            reused = bool(self._idle)
            connection = await self._connection()
            try:
                try:
                    reply = await connection.send(request)
                except WireError:
                    # A kept connection the upstream closed as the request went out (nothing came back):
                    # once more on a new one.
                    if not reused or connection.received or self._closed:
                        raise
                    self._open.discard(connection)
                    connection = await self._fresh()
                    reply = await connection.send(request)
                yield reply
            except BaseException:
                connection.close()
                raise
            finally:
                self._release(connection)

    async def _fresh(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(lambda: _Connection(self.limit), self.host, self.port,
                                                     ssl=self.ssl)
        self._open.add(connection)
        return connection

    def close(self) -> None:
        self._closed = True
        for connection in list(self._open):
            connection.close()
        self._open.clear()
        self._idle.clear()
