"""Helpers for the tests that drive a real ``mcphost serve --stdio`` process.

- :func:`mcphost_argv` / :func:`tee_argv`: the server command line, optionally wrapped in
  ``tests/support/stdio_tee.py`` so both directions of the traffic are recorded;
- :func:`server_env`: an environment that isolates the server from the user's configuration
  and can install the probe plugin (``tests/support/probe.py``) through a fake dist-info;
- :func:`paired_server_messages` and :func:`validate_wire`: parse a recorded session and check
  every message the server sent against the official schema of the negotiated revision;
- :class:`RawServer`: a subprocess spoken to with raw JSON lines over pipes, with timeouts.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.support.fixtures.distributions import make_distribution
from tests.support.wire import WireValidator

REPO_ROOT = Path(__file__).resolve().parents[2]
TEE_SCRIPT = REPO_ROOT / "tests" / "support" / "stdio_tee.py"
SERVE = ("serve", "--stdio")
LATEST = "2025-11-25"
LEGACY_REVISIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
PROBE_SECRET = "hunter2-probe-secret-7f3a9c"


def mcphost_argv(*args: str) -> list[str]:
    """The installed ``mcphost`` console script of this interpreter's environment, with ``args``."""
    script = Path(sys.executable).parent / "mcphost"
    if script.is_file():
        return [str(script), *args]
    return [sys.executable, "-c", "import sys; from mcphost.cli import main; sys.argv[0] = 'mcphost'; main()",
            *args]


def tee_argv(server_out: Path, client_in: Path, server: list[str] | None = None) -> list[str]:
    """A command that runs ``server`` (default: mcphost serve --stdio) and records its traffic."""
    return [sys.executable, str(TEE_SCRIPT), str(server_out), str(client_in), "--",
            *(server or mcphost_argv(*SERVE))]


def install_probe(root: Path) -> Path:
    """Write a fake installed distribution whose ``mcphost`` entry point is the probe plugin.

    Returns the directory to put on PYTHONPATH (the plugin module itself is imported from the
    repository as ``tests.support.probe``).
    """
    site = root / "probe-site"
    if not site.is_dir():
        make_distribution(site, "mcphost-stdio-probe", "0.0.1", {"probe": "tests.support.probe"}, {})
    return site


def server_env(tmp_path: Path, *, probe: bool = False, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a server subprocess.

    ``MCPHOST_*`` variables of the caller are dropped and ``MCPHOST_CONFIG`` points at an empty
    file in ``tmp_path`` (unless ``extra`` names another), so the user's configuration never
    leaks in. With ``probe`` the probe plugin is installed; its trace file is
    ``tmp_path / "probe-trace.txt"`` and its secret :data:`PROBE_SECRET`.
    """
    env = {key: value for key, value in os.environ.items() if not key.startswith("MCPHOST_")}
    config = tmp_path / "mcphost-empty.toml"
    if not config.exists():
        config.write_text("", encoding="utf-8")
    env["MCPHOST_CONFIG"] = str(config)
    # Serve the demo (and the probe) only, whatever else is installed in this environment.
    env["MCPHOST_PLUGINS"] = "demo,probe"
    if probe:
        paths = [str(install_probe(tmp_path)), str(REPO_ROOT)]
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env["MCPHOST_PROBE_SECRET"] = PROBE_SECRET
        env["MCPHOST_PROBE_TRACE"] = str(tmp_path / "probe-trace.txt")
    env.update(extra or {})
    return env



def probe_trace(tmp_path: Path) -> list[str]:
    """The probe's trace lines for a server started with ``server_env(tmp_path, probe=True)``, each
    session's id left out (``connect stdio``, ``disconnect eof``...): a stdio process has one session."""
    path = tmp_path / "probe-trace.txt"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [f"{parts[0]} {parts[2]}" if len(parts) == 3 else line
            for line in lines if line for parts in [line.split(" ")]]


# -- recorded sessions ----------------------------------------------------------------------------

def read_jsonl(path: Path, *, strict: bool = True) -> list[Any]:
    """The JSON documents of a line-per-message file; ``strict=False`` skips undecodable lines."""
    documents = []
    for number, line in enumerate(path.read_bytes().split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            documents.append(json.loads(line))
        except ValueError:
            if strict:
                raise AssertionError(f"{path.name} line {number} is not JSON: {line[:200]!r}") from None
    return documents


def _flatten(documents: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for document in documents:
        out.extend(document if isinstance(document, list) else [document])
    return out


def _id_key(value: Any) -> str:
    return json.dumps(value)  # keeps 1 and "1" apart


def paired_server_messages(server_messages: Iterable[Any], client_messages: Iterable[Any]
                           ) -> list[tuple[dict[str, Any], str | None]]:
    """Each server message with the method of the client request it answers (None for others).

    A response whose id matches no client request fails the test, except id-less (null) errors.
    """
    methods: dict[str, str] = {}
    for message in _flatten(client_messages):
        if isinstance(message, dict) and isinstance(message.get("method"), str) and "id" in message:
            methods[_id_key(message["id"])] = message["method"]
    pairs: list[tuple[dict[str, Any], str | None]] = []
    for message in _flatten(server_messages):
        assert isinstance(message, dict), f"the server sent a non-object message: {message!r}"
        method = None
        if ("result" in message or "error" in message) and message.get("id") is not None:
            method = methods.get(_id_key(message["id"]))
            assert method is not None, f"the server answered an id the client never used: {message!r}"
        pairs.append((message, method))
    return pairs


def validate_wire(revision: str, pairs: Iterable[tuple[dict[str, Any], str | None]]) -> int:
    """Check every server message against ``revision``'s schema; return how many were checked.

    Errors with a null id (parse errors, unreadable requests) fail every revision's schema by
    construction, so they are checked by hand instead: envelope and a standard code.
    """
    validator = WireValidator(revision)
    checked = 0
    for message, method in pairs:
        if "error" in message and message.get("id") is None:
            assert message.get("jsonrpc") == "2.0" and set(message) == {"jsonrpc", "id", "error"}, message
            assert message["error"]["code"] in (-32700, -32600), message
            assert isinstance(message["error"]["message"], str) and message["error"]["message"], message
            continue
        validator.check(message, request_method=method)
        checked += 1
    return checked


def validate_capture(revision: str, server_out: Path, client_in: Path) -> int:
    """Validate a session recorded by ``tests/support/stdio_tee.py``; return how many messages were checked."""
    return validate_wire(revision, paired_server_messages(read_jsonl(server_out),
                                                          read_jsonl(client_in, strict=False)))


# -- a raw client over pipes ----------------------------------------------------------------------

Answer = Callable[[dict[str, Any]], dict[str, Any]]


class ServerClosed(AssertionError):
    """The server's stdout reached EOF while a message was expected."""


class RawServer:
    """``mcphost serve --stdio`` as a subprocess, spoken to with raw bytes and JSON lines.

    Everything the server writes to stdout is kept in :attr:`stdout_lines` (raw bytes, newline
    included) so a test can check that stdout carried nothing but JSON; stderr is collected
    in the background (:attr:`stderr`).
    """

    def __init__(self, env: Mapping[str, str], argv: list[str] | None = None) -> None:
        self.argv = argv or mcphost_argv(*SERVE)
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=dict(env))
        self.stdout_lines: list[bytes] = []
        self.sent: list[Any] = []
        self.received: list[Any] = []
        self.notifications: list[dict[str, Any]] = []
        self.server_requests: list[dict[str, Any]] = []
        self.unclaimed: list[dict[str, Any]] = []
        self._queue: queue.Queue[bytes | None] = queue.Queue()
        self._stderr = bytearray()
        self._stderr_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._threads = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for thread in self._threads:
            thread.start()

    # -- plumbing -----------------------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            self.stdout_lines.append(line)
            self._queue.put(line)
        self._queue.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for chunk in iter(lambda: self.proc.stderr.read1(65536), b""):  # type: ignore[union-attr]
            with self._stderr_lock:
                self._stderr += chunk

    @property
    def stderr(self) -> str:
        with self._stderr_lock:
            return self._stderr.decode("utf-8", "replace")

    def wait_stderr(self, text: str, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.stderr:
                return True
            time.sleep(0.02)
        return text in self.stderr

    def next_id(self) -> int:
        return next(self._ids)

    # -- sending ------------------------------------------------------------------------------

    def send_bytes(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.sent.append(message)
        self.send_bytes(json.dumps(message).encode() + b"\n")

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def send_request(self, method: str, params: dict[str, Any] | None = None, *,
                     request_id: Any = None) -> Any:
        request_id = self.next_id() if request_id is None else request_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return request_id

    # -- receiving ----------------------------------------------------------------------------

    def recv(self, timeout: float = 10.0) -> Any:
        """The next message the server wrote (parsed); raises on timeout or EOF."""
        try:
            line = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no message from the server within {timeout}s; stderr:\n"
                                 f"{self.stderr[-3000:]}") from None
        if line is None:
            self._queue.put(None)
            raise ServerClosed(f"the server closed stdout (exit {self.proc.poll()}); stderr:\n{self.stderr[-3000:]}")
        assert line.endswith(b"\n"), f"a server line does not end with a newline: {line[:200]!r}"
        message = json.loads(line)
        self.received.append(message)
        return message

    def expect_silence(self, seconds: float = 0.3) -> None:
        """Assert that the server writes nothing for ``seconds``."""
        try:
            line = self._queue.get(timeout=seconds)
        except queue.Empty:
            return
        raise AssertionError(f"expected no output, got {line!r}")

    def reply_to(self, request_id: Any, *, timeout: float = 10.0, answer: Answer | None = None,
                 ) -> dict[str, Any]:
        """Wait for the response to ``request_id``.

        Notifications are collected in :attr:`notifications`; server-to-client requests are
        answered with ``answer(request)`` (a result dict) or, without one, a -32601 error;
        responses to other ids go to :attr:`unclaimed`.
        """
        for claimed in list(self.unclaimed):
            if claimed.get("id") == request_id:
                self.unclaimed.remove(claimed)
                return claimed
        deadline = time.monotonic() + timeout
        while True:
            message = self.recv(timeout=max(0.01, deadline - time.monotonic()))
            if isinstance(message, list):
                self.unclaimed.append({"batch": message})
                continue
            if "method" in message and "id" in message:
                self.server_requests.append(message)
                if answer is None:
                    self.send({"jsonrpc": "2.0", "id": message["id"],
                               "error": {"code": -32601, "message": "Method not found"}})
                else:
                    self.send({"jsonrpc": "2.0", "id": message["id"], "result": answer(message)})
                continue
            if "method" in message:
                self.notifications.append(message)
                continue
            if message.get("id") == request_id and type(message.get("id")) is type(request_id):
                return message
            self.unclaimed.append(message)

    def request(self, method: str, params: dict[str, Any] | None = None, *, request_id: Any = None,
                timeout: float = 10.0, answer: Answer | None = None) -> dict[str, Any]:
        """Send a request and return the whole response message (result or error)."""
        sent_id = self.send_request(method, params, request_id=request_id)
        return self.reply_to(sent_id, timeout=timeout, answer=answer)

    def result(self, method: str, params: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
        """Send a request and return its result; fail on an error response."""
        reply = self.request(method, params, **kwargs)
        assert "result" in reply, f"{method} failed: {reply}"
        return reply["result"]

    def initialize(self, version: str = LATEST, capabilities: dict[str, Any] | None = None, *,
                   timeout: float = 30.0) -> dict[str, Any]:
        # The first reply waits for the interpreter to start and import the host and its plugins:
        # a second here, over 10 on two cores shared with four test workers and other work.
        result = self.result("initialize", {"protocolVersion": version, "capabilities": capabilities or {},
                                            "clientInfo": {"name": "raw-pipe-test", "version": "0"}},
                             timeout=timeout)
        self.notify("notifications/initialized")
        return result

    def assert_serving(self) -> None:
        """The process is up and answers a fresh request."""
        assert self.proc.poll() is None, f"the server exited ({self.proc.returncode}); stderr:\n{self.stderr}"
        assert self.result("ping") == {}

    # -- ending -------------------------------------------------------------------------------

    def close(self, timeout: float = 10.0) -> int:
        """Close stdin (EOF) and wait for the exit code."""
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the server did not exit within {timeout}s of EOF; stderr:\n"
                                 f"{self.stderr[-3000:]}") from None

    def kill(self) -> None:
        """Kill the process if it still runs, then release the pipes."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for thread in self._threads:
            thread.join(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.close()  # type: ignore[union-attr]
