"""The transports to an upstream: stdio with bounded, linear framing, and bounded HTTP bodies.

It replaces the ``mcp`` client's ``stdio_client`` reader, which joins each chunk to the line so far
(``buffer + chunk``: quadratic in the line's length) on the event loop, with no bound: one 300 MiB
line held the host's loop for minutes. Here the chunks of a line are kept in a list and joined
once; a line longer than ``max_message_bytes`` is not kept at all (its bytes are counted and
dropped as they arrive) and the request it answers gets an error saying so, while the upstream
keeps serving. A long line is parsed in a worker thread, so the loop never waits for it.

The process runs in a session of its own; at the end its stdin is closed, and what has not
exited after a grace period is sent SIGTERM, then SIGKILL, as a process group.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any, TextIO

import anyio
import httpx2
import mcp_types as types
import orjson
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from mcphost_proxy.work import offload

log = logging.getLogger("mcphost.proxy")

#: Lines at least this long are parsed in a worker thread.
THREAD_PARSE_BYTES = 256 * 1024
#: How much of a dropped line is kept to find the id of the request it answers.
HEAD_BYTES = 4096
#: Seconds an upstream has to exit after its stdin closes, and after SIGTERM.
GRACE = 2.0
MESSAGE_TOO_LARGE = types.INTERNAL_ERROR
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')


#: The longest an upstream process's start holds its turn (see :func:`_booting`), in seconds.
BOOT_WAIT = 5.0


async def _booting(turns: asyncio.Semaphore) -> Callable[[], None]:
    """Wait for a turn to start a process; returns the (idempotent) call that ends the turn: when the
    process first writes to stdout, exits, or after BOOT_WAIT seconds.

    Fifty upstream interpreters starting at once on a two-core machine left the host's loop thread
    waiting 40-65 ms at a time for a CPU (its own work between the waits was a few ms): /healthz p99
    344 ms. A few at a time (``max_starting``; default: the CPUs), the run queue stays short.
    """
    loop = asyncio.get_running_loop()
    await turns.acquire()
    done = False

    def release() -> None:
        nonlocal done
        if not done:
            done = True
            timer.cancel()
            turns.release()

    timer = loop.call_later(BOOT_WAIT, release)
    return release


def _parse(line: bytes | str) -> SessionMessage | Exception:
    try:
        if len(line) >= THREAD_PARSE_BYTES:
            # orjson builds the objects fastest; the message model then only checks the envelope.
            return SessionMessage(types.jsonrpc_message_adapter.validate_python(orjson.loads(line), by_name=False))
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


def too_large(label: str, head: bytes, size: int, limit: int) -> SessionMessage | None:
    """The error answering the request whose reply was dropped for its size (None: no id found)."""
    found = _ID.search(head)
    if found is None:
        log.warning("upstream %s sent a message of %d bytes, over max_message_bytes (%d); dropped", label, size,
                    limit)
        return None
    raw = found.group(1)
    request_id: Any = int(raw) if raw[:1] != b'"' else raw[1:-1].decode("utf-8", "replace")
    message = (f"The upstream's reply was {size} bytes, over this server's max_message_bytes ({limit}); "
               "it was dropped")
    log.warning("upstream %s: %s (request %r)", label, message, request_id)
    error = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=MESSAGE_TOO_LARGE,
                                                                                   message=message))
    return SessionMessage(error)


class LineReader:
    """Splits a byte stream into lines in linear time, dropping lines over ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._head = b""
        self._dropping = False

    def feed(self, chunk: bytes) -> list[tuple[bytes, int | None]]:
        """The lines ``chunk`` completes: (line, None), or (head of a dropped line, its size)."""
        out: list[tuple[bytes, int | None]] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            self._size += len(piece)
            if len(self._head) < HEAD_BYTES:
                self._head += piece[:HEAD_BYTES - len(self._head)]
            if self._size > self.limit:
                self._dropping = True
                self._parts.clear()
            elif piece:
                self._parts.append(piece)
            if end < 0:
                return out
            if self._dropping:
                out.append((self._head, self._size))
            elif self._size:
                out.append((self._parts[0] if len(self._parts) == 1 else b"".join(self._parts), None))
            self._parts, self._size, self._head, self._dropping = [], 0, b"", False
            start = end + 1


class _Lines(asyncio.Protocol):
    """The process's stdout, split into lines where it arrives (the pipe's ``data_received``).

    A reply the lean path waits for is handed to its caller there (``take``), without waking the
    reader task; every other line is queued for that task, in order: while anything is queued or
    the task is still on a line, replies queue behind it, so a call's progress still comes before
    its result. Reading pauses while more than ``_Child.BUFFER`` bytes are queued.
    """

    def __init__(self, limit: int, take: Callable[[bytes], bool] | None = None,
                 arrived: Callable[[], None] | None = None) -> None:
        self._lines = LineReader(limit)
        self._take = take
        self._arrived = arrived
        self._backlog: collections.deque[tuple[bytes, int | None]] = collections.deque()
        self._size = 0
        self._waiter: asyncio.Future[None] | None = None
        self._transport: asyncio.ReadTransport | None = None
        self._closed = False
        self._busy = False
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._arrived is not None:
            self._arrived()
            self._arrived = None
        take = self._take
        for line, dropped in self._lines.feed(data):
            if take is not None and dropped is None and not self._backlog and not self._busy and take(line):
                continue
            self._backlog.append((line, dropped))
            self._size += len(line)
        if self._backlog:
            self._wake()
            if self._size > _Child.BUFFER and not self._paused and self._transport is not None:
                self._paused = True
                self._transport.pause_reading()

    def eof_received(self) -> None:
        self._closed = True
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def next(self) -> tuple[bytes, int | None] | None:
        """The next queued line (line, None) or dropped line (head, size); None at the end."""
        self._busy = False
        while not self._backlog:
            if self._closed:
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        item = self._backlog.popleft()
        self._size -= len(item[0])
        if self._paused and self._size <= _Child.BUFFER // 2 and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        self._busy = True
        return item


class _Child:
    """An upstream process started in a thread, its pipes served by the event loop.

    asyncio starts a subprocess in the loop's thread: the fork, then a wait until the child has
    exec'd, then a thread per child that waits for its exit, whose start the loop waits for too.
    With fifty upstreams starting on a busy machine that held the loop 40-150 ms at a time. Here
    ``subprocess.Popen`` runs in a worker thread, the loop only attaches to the pipes, and the exit
    is seen through a pidfd (polled where there is none).
    """

    #: Bytes of stdout queued (:class:`_Lines`) before reading pauses.
    BUFFER = 1 << 20

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen
        self.pid = popen.pid
        self._writer: asyncio.StreamWriter | None = None

    @classmethod
    async def start(cls, argv: list[str], *, env: dict[str, str], cwd: str | None, errlog: TextIO,
                    lines: _Lines) -> _Child:
        loop = asyncio.get_running_loop()
        started = loop.run_in_executor(None, functools.partial(_popen, argv, env=env, cwd=cwd, errlog=errlog))
        try:
            popen = await asyncio.shield(started)
        except asyncio.CancelledError:  # the process may start all the same: it is killed then
            started.add_done_callback(_kill_started)
            raise
        child = cls(popen)
        try:
            await loop.connect_read_pipe(lambda: lines, popen.stdout)
            transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, popen.stdin)
            child._writer = asyncio.StreamWriter(transport, protocol, None, loop)
        except BaseException:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(popen.pid, signal.SIGKILL)
            await asyncio.to_thread(popen.wait)
            raise
        return child

    async def send(self, data: bytes) -> None:
        assert self._writer is not None
        self._writer.write(data)
        await self._writer.drain()

    def send_nowait(self, data: bytes) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(data)

    async def close_stdin(self) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()

    async def wait(self) -> int:
        """Wait for the process to exit (and reap it)."""
        if self.popen.poll() is not None:
            return self.popen.returncode
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # no pidfd here: look every 50 ms
            while self.popen.poll() is None:
                await asyncio.sleep(0.05)
            return self.popen.returncode
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not exited.done():
                exited.set_result(None)

        loop.add_reader(pidfd, readable)
        try:
            if self.popen.poll() is None:
                await exited
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)
        while self.popen.poll() is None:  # readable means exited: reaping it takes a moment at most
            await asyncio.sleep(0.001)
        return self.popen.returncode


def _popen(argv: list[str], *, env: dict[str, str], cwd: str | None, errlog: TextIO) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, env=env, cwd=cwd,
                            start_new_session=True, bufsize=0)


def _kill_started(started: asyncio.Future[subprocess.Popen[bytes]]) -> None:
    if not started.cancelled() and started.exception() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(started.result().pid, signal.SIGKILL)


class Switch:
    """The lean path's side of one stdio upstream: requests written straight to its stdin, their replies
    taken by id from the reader before the ``mcp`` client sees them (:mod:`mcphost_proxy.lean`)."""

    def __init__(self) -> None:
        self._pending: dict[str, tuple[asyncio.Future[Any], Any]] = {}
        self._process: _Child | None = None
        self._gone: BaseException | None = None

    async def exchange(self, request_id: str, body: bytes, progress: Any) -> Any:
        """Send ``body`` (request ``request_id``) and wait for its reply, as the JSON-RPC dict it is."""
        process = self._process
        if process is None or self._gone is not None:
            raise ConnectionError("the upstream process is not running")
        reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (reply, progress)
        try:
            await process.send(body + b"\n")
            return await reply
        except asyncio.CancelledError:
            if reply.cancelled():  # no reply came: the upstream may stop its work (as the mcp client tells it)
                process.send_nowait(orjson.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                                  "params": {"requestId": request_id}}) + b"\n")
            raise
        finally:
            self._pending.pop(request_id, None)

    async def write(self, data: bytes) -> None:
        if self._process is None:
            raise ConnectionError("the upstream process is not running")
        await self._process.send(data)

    @property
    def waiting(self) -> bool:
        return bool(self._pending)

    def take(self, line: bytes) -> tuple[bool, Any]:
        """(True, progress call or None) when ``line`` is the lean path's; else (False, the parsed line)."""
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            return False, exc
        return self.take_parsed(data)

    def reply(self, line: bytes, admit: Callable[[bytes], bool] | None = None) -> bool:
        """Whether ``line`` was the reply to a request waiting here (then its caller has it now).

        For the pipe's ``data_received``: a line that may be anything else (a request, a
        notification, text that is not JSON) is left alone for the reader task. ``admit`` is asked
        as the reader asks it, once, for a line taken here (one it refuses is dropped)."""
        if not self._pending or b'"method"' in line or len(line) >= THREAD_PARSE_BYTES:
            return False
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError:
            return False
        if not isinstance(data, dict) or "method" in data:
            return False
        waiter = self._pending.get(data.get("id"))  # type: ignore[arg-type]
        if waiter is None:
            return False
        if (admit is None or admit(line)) and not waiter[0].done():
            waiter[0].set_result(data)
        return True

    def take_parsed(self, data: Any) -> tuple[bool, Any]:
        """:meth:`take` for a line already parsed."""
        if isinstance(data, dict):
            if "method" not in data:
                waiter = self._pending.get(data.get("id"))  # type: ignore[arg-type]
                if waiter is not None:
                    if not waiter[0].done():
                        waiter[0].set_result(data)
                    return True, None
            elif data["method"] == "notifications/progress" and isinstance(data.get("params"), dict):
                token = data["params"].get("progressToken")
                waiter = self._pending.get(token) if isinstance(token, str) else None
                if waiter is not None:
                    params = data["params"]
                    progress = waiter[1]
                    if progress is None:
                        return True, None
                    return True, progress(float(params.get("progress", 0)), params.get("total"), params.get("message"))
        return False, data

    def attach(self, process: _Child | None, gone: BaseException | None = None) -> None:
        self._process = process
        self._gone = gone
        if gone is not None:
            for reply, _ in self._pending.values():
                if not reply.done():
                    reply.set_exception(gone)


def _loads(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return exc


def _parsed(data: Any) -> SessionMessage | Exception:
    if isinstance(data, Exception):
        return data
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(data, by_name=False))
    except ValueError as exc:
        return exc


@contextlib.asynccontextmanager
async def stdio_transport(command: str, args: list[str], *, env: dict[str, str] | None, cwd: str | None,
                          max_message_bytes: int, label: str, errlog: TextIO = sys.stderr,
                          admit: Callable[[bytes], bool] | None = None, starting: asyncio.Semaphore | None = None,
                          switch: Switch | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """(read stream, write stream) of ``SessionMessage`` to a process speaking MCP over stdio.

    ``admit(line)``: False drops a line before it is parsed (the log gate of mcphost_proxy.logs).
    ``starting``: the turns of the processes starting at once (None: start at once).
    ``switch``: the lean path's requests and replies (:class:`Switch`), beside the client's."""
    booted = await _booting(starting) if starting is not None else (lambda: None)

    take = functools.partial(switch.reply, admit=admit) if switch is not None else None
    lines = _Lines(max_message_bytes, take, booted)  # booted: it answers, the next upstream may start
    try:
        process = await _Child.start([command, *args], env={**get_default_environment(), **(env or {})},
                                     cwd=cwd, errlog=errlog, lines=lines)
    except BaseException:
        booted()
        raise
    inbox_writer, inbox = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outbox, outbox_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def read() -> None:
        try:
            async with inbox_writer:
                while (item := await lines.next()) is not None:
                    message = await _read_line(item[0], item[1], admit=admit, switch=switch, label=label,
                                               max_message_bytes=max_message_bytes)
                    if message is not None:
                        await inbox_writer.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            pass
        finally:
            booted()
            if switch is not None:
                switch.attach(None, ConnectionError("the upstream process exited"))

    async def write() -> None:
        try:
            async with outbox_reader:
                async for item in outbox_reader:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
                    await process.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await inbox_writer.aclose()

    if switch is not None:
        switch.attach(process)
    async with anyio.create_task_group() as group:
        group.start_soon(read)
        group.start_soon(write)
        try:
            yield inbox, outbox
        finally:
            with anyio.CancelScope(shield=True):
                await outbox.aclose()
                await _stop(process)
                await inbox.aclose()
            group.cancel_scope.cancel()


async def _read_line(line: bytes, dropped: int | None, *, admit: Callable[[bytes], bool] | None,
                     switch: Switch | None, label: str, max_message_bytes: int) -> SessionMessage | Exception | None:
    """What one line the upstream wrote becomes for the client session: a message, an error (a line
    over the limit), or None (dropped by ``admit``, or a reply the lean path's ``switch`` took)."""
    if dropped is None and admit is not None and not admit(line):
        return None
    if dropped is not None:
        message = too_large(label, line, dropped, max_message_bytes)
        if switch is not None and isinstance(message, SessionMessage) and switch.waiting:
            error = message.message.model_dump(by_alias=True, mode="json", exclude_none=True)
            if switch.take_parsed(error)[0]:
                return None
        return message
    if len(line) >= THREAD_PARSE_BYTES and switch is not None and switch.waiting:
        data: Any = await offload(_loads, line)
        taken, data = switch.take_parsed(data)
        if taken:
            if data is not None:
                await data
            return None
        return await offload(_parsed, data)
    if len(line) >= THREAD_PARSE_BYTES:
        return await offload(_parse, line)
    if switch is not None and switch.waiting:
        taken, data = switch.take(line)
        if taken:
            if data is not None:
                await data
            return None
        return _parsed(data)
    return _parse(line)


async def _stop(process: _Child) -> None:
    """Close stdin; then SIGTERM and SIGKILL the process group, each after a grace period."""
    with contextlib.suppress(Exception):
        await process.close_stdin()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
        with anyio.move_on_after(GRACE):
            await process.wait()
            return


class _BoundedBody(httpx2.AsyncByteStream):
    """A JSON response body that fails once it grows past ``limit`` bytes (no more is read)."""

    def __init__(self, inner: Any, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if size > self._limit:
                raise httpx2.StreamError(f"the upstream's reply is over this server's max_message_bytes "
                                         f"({self._limit}); it was dropped")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """HTTP to an upstream with ``max_message_bytes`` on each JSON response body (SSE events are
    bounded by the ``mcp`` client's own ``max_sse_event_size``, set to the same)."""

    def __init__(self, limit: int) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if response.headers.get("content-type", "").lower().startswith("application/json"):
            response.stream = _BoundedBody(response.stream, self._limit)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
