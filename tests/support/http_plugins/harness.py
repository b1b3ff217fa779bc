"""Helpers for the HTTP reliability and hook tests.

- :func:`install` / :func:`probe_env`: install the probe (``tests/support/probe.py``, as
  ``httpprobe``) and the ``httpauth`` plugins of this package into a ``mcphost serve`` subprocess
  (a fake dist-info on PYTHONPATH) and point the probe at a trace file; :class:`Trace` reads that
  file, waiting for lines to appear;
- :func:`rpc`, :func:`check_wire`: build requests, validate what the server sent against the
  official 2025-11-25 schema;
- :class:`SseReader`: read an httpx SSE response incrementally, with deadlines;
- :func:`raw_exchange`: one HTTP exchange over a raw socket, for requests httpx cannot make
  (lying lengths, 1-byte chunks); :func:`rss_kib`: a process's resident memory.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.fixtures.distributions import make_distribution
from tests.support.http_support import sse_events
from tests.support.wire import WireValidator

REPO_ROOT = Path(__file__).resolve().parents[3]
SECRET = "s3cr3t-http-probe-4b1d"
PROBE_PLUGINS = "demo,conformance,httpprobe"
VALIDATOR = WireValidator("2025-11-25")
SSE_ACCEPT = {"accept": "text/event-stream"}


# -- installing the plugins into a server subprocess ------------------------------------------------

def install(root: Path) -> Path:
    """Write a fake installed distribution whose ``mcphost`` entry points are this package's plugins.

    Returns the directory to put on PYTHONPATH (the modules are imported from the repository).
    """
    site = root / "http-probe-site"
    if not site.is_dir():
        make_distribution(site, "mcphost-http-probe", "0.0.1", {"httpprobe": "tests.support.probe",
                                                                 "httpauth": "tests.support.http_plugins.auth",
                                                                 "httpbearer": "tests.support.http_plugins.bearer",
                                                                 "httpunruly": "tests.support.http_plugins.unruly"}, {})
    return site


def probe_env(root: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment additions for ``HttpServer(env=...)`` that make the probe plugins importable.

    The trace file is ``root / "trace.txt"``.
    """
    paths = [str(install(root)), str(REPO_ROOT)]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    env = {"PYTHONPATH": os.pathsep.join(paths), "MCPHOST_PROBE_TRACE": str(root / "trace.txt"),
           "MCPHOST_PROBE_SECRET": SECRET}
    env.update(extra or {})
    return env


class Trace:
    """The probe's trace file: its ``connect|disconnect|terminate <session id> <detail>`` lines
    (the others, ``startup`` and the like, are skipped)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def lines(self, session_id: str | None = None, kind: str | None = None) -> list[str]:
        if not self.path.exists():
            return []
        found = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            parts = line.split(" ")
            if len(parts) != 3:
                continue
            if (session_id is None or parts[1] == session_id) and (kind is None or parts[0] == kind):
                found.append(line)
        return found

    def details(self, session_id: str, kind: str) -> list[str]:
        """The third field of ``kind`` lines for one session, in order."""
        return [line.split(" ")[2] for line in self.lines(session_id, kind)]

    def wait(self, predicate: Callable[[Trace], bool], timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if time.monotonic() > deadline:
                raise AssertionError(f"trace condition not met within {timeout}s; trace:\n"
                                     + "\n".join(self.lines()))
            time.sleep(0.02)


# -- JSON-RPC and schema checks ------------------------------------------------------------------

def rpc(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def call(request_id: Any, tool: str, arguments: dict[str, Any] | None = None, *,
         progress: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments or {}}
    if progress is not None:
        params["_meta"] = {"progressToken": progress}
    return rpc(request_id, "tools/call", params)


def check_wire(messages: Iterable[Any], request_method: str | None = None) -> int:
    """Validate server messages against the 2025-11-25 schema; return how many were checked.

    Errors with ``id: null`` are skipped: the official schemas give error responses a required
    string-or-integer id, so they cannot express them.
    """
    checked = 0
    for message in messages:
        if isinstance(message, dict) and "id" in message and message["id"] is None:
            continue
        VALIDATOR.check(message, request_method=request_method if isinstance(message, dict)
                        and ("result" in message) else None)
        checked += 1
    return checked


def json_body(response: httpx.Response) -> dict[str, Any]:
    """A JSON error/response body, schema-checked when it carries an id."""
    body = response.json()
    check_wire([body])
    return body


# -- SSE -------------------------------------------------------------------------------------------

@dataclass
class SseReader:
    """Reads an SSE body as it arrives. ``raw`` keeps every byte (comments and all)."""

    response: httpx.Response
    raw: str = ""
    events: list[dict[str, str]] = field(default_factory=list)
    ended: bool = False
    _pending: str = ""
    _iterator: Any = None

    async def _more(self, timeout: float) -> bool:
        if self._iterator is None:
            self._iterator = self.response.aiter_text()
        try:
            chunk = await asyncio.wait_for(self._iterator.__anext__(), timeout)
        except StopAsyncIteration:
            self.ended = True
            return False
        except (httpx.ReadError, httpx.RemoteProtocolError):
            self.ended = True
            return False
        self.raw += chunk
        self._pending += chunk
        *blocks, self._pending = self._pending.split("\n\n")
        for block in blocks:
            self.events.extend(sse_events(block + "\n\n"))
        return True

    async def until(self, predicate: Callable[[SseReader], bool], timeout: float = 5.0) -> None:
        """Read until ``predicate(self)`` holds; AssertionError on timeout or end of stream first."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            left = deadline - time.monotonic()
            if left <= 0 or self.ended:
                raise AssertionError(f"SSE condition not met ({'stream ended' if self.ended else 'timeout'}); "
                                     f"read so far:\n{self.raw[-2000:]}")
            try:
                await self._more(left)
            except TimeoutError:
                continue

    async def to_end(self, timeout: float = 5.0) -> None:
        """Read until the server ends the stream."""
        await self.until(lambda r: r.ended, timeout)

    def messages(self) -> list[dict[str, Any]]:
        import json
        return [json.loads(e["data"]) for e in self.events if e.get("data")]

    def message_events(self) -> list[dict[str, str]]:
        return [e for e in self.events if e.get("data")]

    def response_to(self, request_id: Any) -> dict[str, Any] | None:
        for message in self.messages():
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return message
        return None


def has_response(request_id: Any) -> Callable[[SseReader], bool]:
    return lambda reader: reader.response_to(request_id) is not None


# -- raw sockets --------------------------------------------------------------------------------------

@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes
    elapsed: float


def raw_exchange(port: int, head: bytes, body_chunks: Iterable[bytes] = (), *, timeout: float = 10.0,
                 read_body: bool = True) -> RawResponse:
    """Send ``head`` (request line and headers, CRLF-terminated) and the body chunks from a thread
    while reading the response here; return the first response. Send errors are ignored (the
    server may answer and close before the body is sent)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    started = time.monotonic()

    def sender() -> None:
        try:
            sock.sendall(head)
            for chunk in body_chunks:
                sock.sendall(chunk)
        except OSError:
            pass

    thread = threading.Thread(target=sender, daemon=True)
    thread.start()
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            piece = sock.recv(65536)
            if not piece:
                break
            data += piece
        elapsed = time.monotonic() - started
        head_part, _, rest = data.partition(b"\r\n\r\n")
        lines = head_part.decode("latin-1").split("\r\n")
        if not lines or not lines[0].startswith("HTTP/1.1 "):
            raise AssertionError(f"no HTTP response: {data[:200]!r}")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while read_body and len(rest) < length:
            try:
                piece = sock.recv(65536)
            except OSError:
                break
            if not piece:
                break
            rest += piece
        return RawResponse(status, headers, rest[:length] if length else rest, elapsed)
    finally:
        sock.close()
        thread.join(timeout)


def request_head(method: str, port: int, path: str = "/mcp", headers: Mapping[str, str] | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def chunked(data: bytes, size: int) -> Iterable[bytes]:
    """``data`` as HTTP/1.1 chunks of ``size`` bytes (grouped into larger writes), then the last chunk."""
    batch: list[bytes] = []
    for start in range(0, len(data), size):
        piece = data[start:start + size]
        batch.append(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        if len(batch) >= 4096:
            yield b"".join(batch)
            batch = []
    batch.append(b"0\r\n\r\n")
    yield b"".join(batch)


def rss_kib(pid: int) -> int:
    """Resident set size of a process, in KiB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")
