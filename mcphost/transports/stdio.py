"""The stdio transport: newline-delimited JSON-RPC on stdin/stdout, logs on stderr.

One process serves one session. Lines are bounded (``server.max_body_bytes``): an
over-long line is discarded up to its newline and answered with one -32600 error, so the
stream resynchronizes instead of growing without bound. ``print`` from plugins goes to
stderr, because stdout carries only MCP messages. On EOF, in-flight requests are cancelled
and the disconnect and terminate hooks run with reason ``eof``. Every message goes to the
kernel's one entry (``Kernel.serve``); a 2026-07-28 request runs its whole lifecycle there,
disconnect and terminate included. On SIGTERM or SIGINT the session ends as on EOF, with
reason ``shutdown`` (then the shutdown hooks run), instead of the process dying.

What waits for a client that stops reading stdout is bounded: while ``server.max_inflight``
replies are finished but not yet written, no more input is read (the client's writes then
block on the full pipe), and 2026-07-28 requests beyond that many at once get -32000.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import stat
import sys
import threading
from collections import deque
from typing import Any, BinaryIO

from mcphost.deadline import abandoned, exit_if_abandoned, settle_abandoned
from mcphost.errors import Refused
from mcphost.host import Host
from mcphost.kernel.driver import SessionDriver
from mcphost.protocol import jsonrpc
from mcphost.protocol.era import Era
from mcphost.protocol.errors import INVALID_REQUEST, SERVER_BUSY, McpError
from mcphost.protocol.versions import allows_batches
from mcphost.sessions.session import Connection, Session

log = logging.getLogger("mcphost.stdio")

CHUNK = 64 * 1024
REFUSED = -32001
#: Seconds in-flight requests may still finish after stdin reaches EOF.
EOF_GRACE = 2.0
#: Seconds a stdio process may take to end after EOF or SIGTERM/SIGINT, whatever its plugins' hooks
#: do: past them, the hook calls still running are abandoned (logged with their plugins' names) and
#: the process exits (see :func:`serve_stdio`).
STOP_LIMIT = 4.5
#: Bytes of input read ahead while the connect hooks run (to notice EOF meanwhile).
READ_AHEAD = 4 * CHUNK


class OrderedWriter:
    """The one writer of a stdio connection: every message to the client, replies and
    notifications alike, is queued the moment it is produced and written by one task in that
    order, so a notification never overtakes the reply it follows (nor the other way round).

    ``pending`` counts the messages queued but not yet written (a client that stops reading
    makes it grow; the server then stops reading input, see ``max_waiting``).
    """

    __slots__ = ("_closed", "_queue", "_room", "_task", "_wake", "_writer", "pending")

    def __init__(self, writer: asyncio.StreamWriter | Any, room: asyncio.Event) -> None:
        self._writer = writer
        self._queue: deque[tuple[bytes, asyncio.Future[None] | None]] = deque()
        self._wake = asyncio.Event()
        self._room = room
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.pending = 0

    def put(self, message: Any, *, wait: bool = False) -> asyncio.Future[None] | None:
        """Queue ``message`` now; with ``wait``, a future done once it is written."""
        done: asyncio.Future[None] | None = asyncio.get_running_loop().create_future() if wait else None
        if self._closed:
            if done is not None:
                done.set_exception(BrokenPipeError("stdout is closed"))
            return done
        self._queue.append((jsonrpc.encode(message) + b"\n", done))
        self.pending += 1
        self._wake.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        return done

    async def send(self, message: Any) -> None:
        """Queue ``message`` and return once it is written (what a handler's notification awaits)."""
        done = self.put(message, wait=True)
        assert done is not None
        await done

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                batch = [self._queue.popleft() for _ in range(len(self._queue))]
                try:
                    self._writer.write(b"".join(data for data, _ in batch))
                    await self._writer.drain()
                except (OSError, RuntimeError) as exc:  # the client closed stdout (or the transport is closing)
                    self._fail(batch, exc)
                    return
                self.pending -= len(batch)
                self._room.set()
                for _, done in batch:
                    if done is not None and not done.done():
                        done.set_result(None)

    def _fail(self, batch: list[tuple[bytes, asyncio.Future[None] | None]], exc: BaseException) -> None:
        self._closed = True
        for _, done in [*batch, *self._queue]:
            if done is not None and not done.done():
                done.set_exception(BrokenPipeError(str(exc)))
        self._queue.clear()
        self.pending = 0
        self._room.set()

    async def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (within ``timeout`` seconds), then stop."""
        task = self._task
        if task is not None and not task.done() and self.pending:
            flushed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._queue.append((b"", flushed))  # done once everything before it is written
            self._wake.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(flushed), timeout)
        self._closed = True
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


class StdioServer:
    """Serve one session over a pair of byte streams."""

    def __init__(self, host: Host, reader: asyncio.StreamReader | Any, writer: asyncio.StreamWriter | Any,
                 *, freeze_gc: bool = False) -> None:
        self.host = host
        self.freeze_gc = freeze_gc
        self.reader = reader
        self.writer = writer
        self.max_line = host.config.server.max_body_bytes
        self._replies: set[asyncio.Future[Any]] = set()
        #: Messages queued for stdout; at ``max_waiting`` no more input is read.
        self.max_waiting = host.config.server.max_inflight
        self._room = asyncio.Event()
        self._room.set()
        #: Every message to the client goes through this one writer, in order.
        self.out = OrderedWriter(writer, self._room)
        #: Set by SIGTERM/SIGINT (see serve_stdio): stop reading, end the session, run the hooks.
        self.stopping = asyncio.Event()
        #: 2026-07-28 requests whose lifecycle is running (at most ``max_waiting`` at once).
        self._modern_running: set[asyncio.Future[Any]] = set()
        self._refusal: Refused | None = None
        #: Input read while the connect hooks ran (to notice EOF), and a read still under way.
        self._stash: deque[bytes] = deque()
        self._stashed = 0
        self._peek: asyncio.Future[bytes] | None = None
        #: Called once when the process starts to end (EOF or a signal): serve_stdio's watchdog.
        self.on_ending: Any = None
        #: Running 2026-07-28 requests by id: their reply futures (stdio cancels with notifications/cancelled).
        self._modern: dict[Any, asyncio.Future[Any]] = {}
        self.session: Session | None = None
        self.driver: SessionDriver
        #: stdio connects once: one Connection for the lifecycle hooks and every request's middleware.
        self.connection = Connection(transport="stdio", remote="stdio")

    async def write(self, message: Any) -> None:
        """Queue ``message`` on the connection's one writer; return once it is written."""
        try:
            await self.out.send(message)
        except BrokenPipeError:
            raise ConnectionError("stdout is closed") from None

    async def serve(self) -> None:
        host = self.host
        await host.start(freeze_gc=self.freeze_gc)
        assert host.kernel is not None

        async def outlet(message: jsonrpc.Message, related: Any) -> None:
            await self.write(message)

        # One connection, one session, driven by the kernel; replies and notifications go
        # through the one ordered writer.
        driver = self.driver = SessionDriver(host.kernel, self.connection, outlet, trusted=True,
                                             deliver=self.out.put)
        session = self.session = driver.session
        # The connect hooks run while stdin is watched for its end, so EOF (and a signal) end the
        # process however long a hook takes.
        opening = asyncio.ensure_future(self._open(driver))
        reading = asyncio.ensure_future(self._read_all(session, opening))
        stopping = asyncio.ensure_future(self.stopping.wait())
        reason = "eof"
        try:
            await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if reading.done():
                reason = reading.result()
            else:
                log.info("signalled: ending the session")
                reason = "shutdown"
                reading.cancel()
        finally:
            stopping.cancel()
            self._ending()
            if not opening.done():  # a connect hook still runs: the client is gone, stop it
                opening.cancel()
                await asyncio.wait({opening}, timeout=0.5)  # the hook is cancelled, not waited for
                stubborn = await settle_abandoned(0.5)
                if stubborn or not opening.done():
                    log.error("abandoned %s: it ignores cancellation",
                              ", ".join(stubborn or host.lifecycle.running.names()) or "a connect hook")
            # The client closed stdin: answer what is already running if it is quick (a final
            # request without a trailing newline, say), then cancel the rest.
            if session.inflight:
                await asyncio.wait(list(session.inflight.values()), timeout=EOF_GRACE)
            for task in [*session.inflight.values(), *self._modern.values()]:
                task.cancel()
            if self._replies:
                await asyncio.wait(list(self._replies), timeout=5)
            for task in self._modern_running:  # still running (a connect hook, say): the watchdog's to end
                task.cancel()
            await self.out.close()
            await driver.close(reason, end="shutdown" if reason == "shutdown" else "eof")
            await host.stop()

    async def _open(self, driver: SessionDriver) -> None:
        try:
            await driver.open()  # a refusal fires disconnect and terminate ("refused") now
        except Refused as refusal:
            log.warning("client refused by a connect hook: %s", refusal.message)
            self._refusal = refusal

    async def _opened(self, opening: asyncio.Future[None]) -> bool:
        """Wait for the connect hooks, reading ahead (up to READ_AHEAD bytes) to notice EOF; False
        when stdin ended and the hooks did not finish within EOF_GRACE after it."""
        while not opening.done():
            if self._peek is None and self._stashed < READ_AHEAD:
                self._peek = asyncio.ensure_future(self.reader.read(CHUNK))
            waits: set[asyncio.Future[Any]] = {opening} if self._peek is None else {opening, self._peek}
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if self._peek is not None and self._peek.done():
                chunk = self._peek.result()
                self._peek = None
                self._stash.append(chunk)
                self._stashed += len(chunk)
                if not chunk:
                    self._ending()
                    await asyncio.wait({opening}, timeout=EOF_GRACE)
                    return opening.done()
        return True

    def _ending(self) -> None:
        """The process starts to end (EOF seen, or a signal): tell serve_stdio's watchdog, once."""
        ending, self.on_ending = self.on_ending, None
        if ending is not None:
            ending()

    async def _read(self) -> bytes:
        """The next chunk of input: what was read ahead first."""
        if self._stash:
            chunk = self._stash.popleft()
            self._stashed -= len(chunk)
            return chunk
        if self._peek is not None:
            peek, self._peek = self._peek, None
            chunk = await peek
        else:
            chunk = await self.reader.read(CHUNK)
        if not chunk:
            self._ending()
        return chunk

    async def _read_all(self, session: Session, opening: asyncio.Future[None]) -> str:
        """Handle input lines until EOF (once the connect hooks ran); the disconnect reason."""
        try:
            if not await self._opened(opening):
                return "eof"
            async for line in self._lines():
                await self._handle_line(session, line)
                while self.out.pending >= self.max_waiting:
                    # The client is not reading what it asked for: stop reading what it asks next.
                    self._room.clear()
                    await self._room.wait()
        except (ConnectionError, BrokenPipeError):
            return "dropped"
        return "eof"

    async def _lines(self) -> Any:
        """Yield complete lines; an over-long one yields ``None`` once, after it has been skipped."""
        buffer = bytearray()
        discarding = False
        while True:
            chunk = await self._read()
            if not chunk:
                if buffer.strip() and not discarding:
                    yield bytes(buffer)
                return
            start = 0
            while True:
                newline = chunk.find(b"\n", start)
                if newline < 0:
                    if not discarding:
                        buffer += chunk[start:]
                        if len(buffer) > self.max_line:
                            buffer.clear()
                            discarding = True
                    break
                if discarding:
                    discarding = False
                    yield None
                else:
                    buffer += chunk[start:newline]
                    if len(buffer) > self.max_line:
                        yield None
                    elif buffer.strip():
                        yield bytes(buffer)
                    buffer.clear()
                start = newline + 1

    async def _handle_line(self, session: Session, line: bytes | None) -> None:
        if line is None:
            await self.write(jsonrpc.error(None, McpError(
                INVALID_REQUEST, f"Message too large: lines are limited to {self.max_line} bytes")))
            return
        try:
            message = jsonrpc.parse(line)
        except McpError as exc:
            await self.write(jsonrpc.error(None, exc))
            return
        if self._refusal is not None:
            if isinstance(message, dict) and jsonrpc.valid_id(message.get("id")) and "method" in message:
                await self.write(jsonrpc.error(message["id"], McpError(REFUSED, self._refusal.message)))
            return
        if isinstance(message, list):
            await self._handle_batch(session, message)
            return
        if isinstance(message, dict) and session.protocol_version is None and self._cancel_modern(message):
            return
        exchange = _Line(self, message)
        if len(self._modern_running) >= self.max_waiting and self.driver.rule_era(message, exchange) == "modern":
            # 2026-07-28 requests beyond max_waiting at once are refused before anything runs.
            if isinstance(message, dict) and "id" in message:
                await self.write(jsonrpc.error(message["id"], McpError(
                    SERVER_BUSY, "Too many requests in flight; retry later")))
            return
        work = self.driver.serve(message, exchange)
        if work is None:  # session era: this process's session answers it
            self.legacy(message)
            return
        # A 2026-07-28 request: its lifecycle runs as the task that writes its reply.
        task = asyncio.ensure_future(self._modern_request(work, message))
        self._replies.add(task)
        self._modern_running.add(task)
        task.add_done_callback(self._replies.discard)
        task.add_done_callback(self._modern_running.discard)

    def legacy(self, message: Any) -> None:
        """A session-era message: the kernel answers it for this process's session."""
        # The request's task hands its reply to the writer as it ends (before anything else runs).
        reply = self.driver.receive(message)
        if reply is not None:
            self._replies.add(reply)
            reply.add_done_callback(self._replies.discard)

    async def _modern_request(self, work: Any, message: dict[str, Any]) -> None:
        """Run one 2026-07-28 request's lifecycle (``Kernel.serve``); word what refuses it."""
        try:
            await work
        except McpError as exc:  # invalid (a ModernError): nothing ran
            if "id" in message:
                await self.write(jsonrpc.error(jsonrpc.readable_id(message), exc))
        except Refused as refusal:
            if "id" in message:
                await self.write(jsonrpc.error(message["id"], McpError(REFUSED, refusal.message)))

    async def reply(self, request_id: Any, reply: asyncio.Future[Any] | None) -> str:
        """Write the reply of a 2026-07-28 request when it is ready; a cancelled one gets none."""
        if reply is None:
            return "complete"
        self._modern[request_id] = reply
        try:
            out = await reply
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            return "complete"  # cancelled before it started: no reply
        finally:
            if self._modern.get(request_id) is reply:
                del self._modern[request_id]
        if out is not None:
            await self.write(out)
        return "complete"

    def _cancel_modern(self, message: dict[str, Any]) -> bool:
        """notifications/cancelled for a running 2026-07-28 request (stdio's way to cancel)."""
        if message.get("method") != "notifications/cancelled":
            return False
        params = message.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        reply = self._modern.get(request_id) if jsonrpc.valid_id(request_id) else None
        if reply is None:
            return False
        reply.cancel()
        return True

    async def _handle_batch(self, session: Session, batch: list[Any]) -> None:
        if not allows_batches(session.protocol_version or "") or not batch or any(
                isinstance(m, dict) and m.get("method") == "initialize" for m in batch):
            await self.write(jsonrpc.error(None, McpError(
                INVALID_REQUEST, "Batches are not accepted (only on 2025-03-26 sessions, never with initialize)")))
            return
        replies = self.driver.batch(batch)
        if replies:
            self._track(asyncio.gather(*replies), self._send_batch)

    def _track(self, reply: asyncio.Future[Any], then: Any) -> None:
        self._replies.add(reply)
        reply.add_done_callback(lambda f: self._finish(f, then))

    def _finish(self, reply: asyncio.Future[Any], then: Any) -> None:
        self._replies.discard(reply)
        if not reply.cancelled():
            then(reply.result())

    def _send_batch(self, messages: list[Any]) -> None:
        messages = [m for m in messages if m is not None]
        if messages:
            self.out.put(messages)


class _Line:
    """One message read from stdin, as the kernel's exchange (see ``mcphost.kernel.services``)."""

    __slots__ = ("id", "server")

    headers = None
    trusted = True  # whoever started this process is its user: no network credentials here

    def __init__(self, server: StdioServer, message: Any) -> None:
        self.server = server
        self.id = message.get("id") if isinstance(message, dict) else None

    @property
    def connection(self) -> Connection:
        return self.server.connection

    session_id = None

    @property
    def era(self) -> Era | None:
        return self.server.driver.era

    async def send(self, message: Any, related: Any) -> None:
        await self.server.write(message)

    async def reply(self, reply: asyncio.Future[Any] | None) -> str:
        return await self.server.reply(self.id, reply)


def _watchable(fd: int) -> bool:
    """Whether the event loop can wait on ``fd``: pipes, sockets and terminals.

    Regular files and ``/dev/null`` cannot be registered with epoll (connecting them as pipes
    raises, or never reports EOF), but reading or writing them never blocks for long either.
    """
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


class _FileReader:
    """``read`` for a stdin the loop cannot watch (a regular file, /dev/null), in a worker thread."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def read(self, n: int = -1) -> bytes:
        return await asyncio.to_thread(os.read, self._fd, n if n > 0 else CHUNK)


class _FileWriter:
    """``write``/``drain``/``close`` for a stdout the loop cannot watch; such writes do not block."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._file.fileno(), view):]

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        self._file.close()


_protocol_fd: int | None = None


def protect_stdout() -> int:
    """Reserve the real stdout for protocol bytes; return its descriptor (idempotent).

    Descriptor 1 is pointed at stderr, so nothing else (print, logging, C extensions, a plugin
    printing while it is imported) can corrupt the stream. Call it before plugins load.
    """
    global _protocol_fd
    if _protocol_fd is None:
        sys.stdout.flush()
        _protocol_fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    return _protocol_fd


async def open_stdio(stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
                     ) -> tuple[asyncio.StreamReader | Any, asyncio.StreamWriter | Any]:
    """Async streams over the process's stdin and stdout file descriptors."""
    loop = asyncio.get_running_loop()
    source = stdin or sys.stdin.buffer
    reader: asyncio.StreamReader | _FileReader
    if _watchable(source.fileno()):
        reader = asyncio.StreamReader(limit=CHUNK * 2)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), source)  # type: ignore[arg-type]  # the StreamReader just made
    else:
        reader = _FileReader(source.fileno())
    if stdout is None:
        stdout = os.fdopen(protect_stdout(), "wb", buffering=0)
    out = stdout
    if not _watchable(out.fileno()):
        return reader, _FileWriter(out)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, out)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


class _Watchdog:
    """Ends the process :data:`STOP_LIMIT` seconds after it started to end (EOF or a signal),
    whatever a plugin's hook does meanwhile, naming the hook calls it abandons."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self._timer: threading.Timer | None = None

    def start(self) -> None:
        if self._timer is None:
            self._timer = threading.Timer(STOP_LIMIT, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        try:
            running = ", ".join([*self._host.lifecycle.running.names(), *abandoned()])
        except RuntimeError:  # changed while read from this thread
            running = ""
        log.error("stopping took longer than %g s; abandoning %s and exiting", STOP_LIMIT,
                  running or "the plugin code still running (startup or shutdown hooks, handlers)")
        for handler in logging.getLogger().handlers:
            with contextlib.suppress(Exception):
                handler.flush()
        os._exit(1)


async def serve_stdio(host: Host) -> None:
    """Serve ``host`` on this process's stdin/stdout until EOF."""
    reader, writer = await open_stdio()
    server = StdioServer(host, reader, writer, freeze_gc=True)
    loop = asyncio.get_running_loop()
    watchdog = _Watchdog(host)
    server.on_ending = watchdog.start

    def signalled(signum: int, frame: Any) -> None:
        # A plain signal handler (not loop.add_signal_handler): it runs even while a plugin's
        # synchronous hook holds the event loop, and the watchdog then ends the process anyway.
        watchdog.start()
        loop.call_soon_threadsafe(server.stopping.set)

    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            signal.signal(sig, signalled)
        except (ValueError, OSError):  # not the main thread
            pass
    try:
        await server.serve()
    finally:
        writer.close()
    await exit_if_abandoned(0.2)  # a hook that ignores its cancellation must not keep the process
