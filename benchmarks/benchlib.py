"""Shared pieces of the benchmark scripts: start/stop servers by pid, talk MCP, read /proc, fit slopes.

Not part of mcphost; imported by bench_http.py and bench_sessions.py (run from any directory:
Python puts the script's own directory first on sys.path).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PROTOCOL_VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


#: A directory holding another copy of the ``mcphost`` package (a commit exported with ``git archive``,
#: a prototype) to measure instead of the installed one, in the servers and in-process alike. Plugin
#: packages beside it (``mcphost_demo/``) replace the installed ones too.
SOURCE_ENV = "MCPHOST_BENCH_SOURCE"
#: The plugins ``mcphost_server`` serves (default: only demo); e.g. ``demo,console`` to measure with
#: the console installed.
PLUGINS_ENV = "MCPHOST_BENCH_PLUGINS"

_FROM_SOURCE = """
import os, sys
source = sys.argv.pop(1)
def shadowed(finder):
    mapping = getattr(sys.modules.get(getattr(finder, '__module__', '')), 'MAPPING', {})
    return any(os.path.isdir(os.path.join(source, name)) for name in mapping)
sys.meta_path[:] = [f for f in sys.meta_path if not shadowed(f)]
sys.path.insert(0, source)
import mcphost
assert mcphost.__file__.startswith(sys.path[0]), mcphost.__file__
from mcphost.cli import main
sys.argv[0] = 'mcphost'
main()
"""


def use_source_in_process() -> None:
    """Import ``mcphost`` from $MCPHOST_BENCH_SOURCE in this process, when it is set."""
    source = os.environ.get(SOURCE_ENV)
    if not source:
        return
    if "mcphost" in sys.modules:
        raise RuntimeError("mcphost was imported before use_source_in_process()")
    sys.meta_path[:] = [f for f in sys.meta_path if not _shadowed(f, Path(source))]
    sys.path.insert(0, source)


def _shadowed(finder: Any, source: Path) -> bool:
    """Whether ``finder`` is an editable install's finder for a package the ``source`` copy also holds.

    ``source`` always holds ``mcphost``; it may hold plugin packages too (``mcphost_demo`` exported
    beside it), so that a past commit is measured with the plugins of that commit.
    """
    mapping = getattr(sys.modules.get(getattr(finder, "__module__", "")), "MAPPING", {})
    return any((source / name).is_dir() for name in mapping)


def pinned(argv: list[str], core: str) -> list[str]:
    """``argv`` run on CPU ``core`` with ``taskset`` (unchanged when taskset is missing)."""
    taskset = shutil.which("taskset")
    return [taskset, "-c", core, *argv] if taskset else argv


def pin_self(core: str) -> bool:
    """Move this process to CPU ``core``; False where that is not possible (no such core, no API)."""
    try:
        os.sched_setaffinity(0, {int(core)})
    except (OSError, AttributeError, ValueError):
        return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def mcphost_executable() -> str:
    """The ``mcphost`` console script of the running interpreter's environment."""
    beside = Path(sys.executable).parent / "mcphost"
    if beside.exists():
        return str(beside)
    found = shutil.which("mcphost")
    if found is None:
        raise SystemExit("the mcphost command is not installed in this environment (pip install -e .)")
    return found


def rss_bytes(pid: int) -> int:
    """VmRSS of ``pid`` from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time ``pid`` has used so far."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14 and 15)


def preemptions(pid: int) -> int:
    """How often ``pid``'s main thread lost its CPU involuntarily (nonvoluntary_ctxt_switches)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("nonvoluntary_ctxt_switches:"):
            return int(line.split()[1])
    return 0


def machine_busy_seconds() -> float:
    """CPU seconds all cores have spent busy since boot (/proc/stat), to tell what else ran meanwhile."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


class Server:
    """A server process started by us, in its own process group, stopped by its pid."""

    def __init__(self, name: str, argv: list[str], port: int, env: dict[str, str], logdir: Path) -> None:
        self.name = name
        self.argv = argv
        self.port = port
        self.env = env
        self.log_path = logdir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self, timeout: float = 30.0) -> None:
        log = self.log_path.open("wb")
        # A new session: Ctrl-C in the terminal reaches only this script, which then stops the server.
        self.proc = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, cwd=ROOT)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} at startup:\n{self.log_tail()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not listen on port {self.port} within {timeout} s:\n{self.log_tail()}")

    def stop(self, timeout: float = 15.0) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(5)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@contextlib.contextmanager
def running(server: Server) -> Iterator[Server]:
    try:
        server.start()
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM like Ctrl-C so the ``finally`` blocks stop the servers."""
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def workdir() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="mcphost-bench-")


def mcphost_server(name: str, logdir: Path, *, extra_env: dict[str, str] | None = None) -> Server:
    """``mcphost serve`` with one worker and only the demo plugin (``MCPHOST_BENCH_PLUGINS``), on a free
    loopback port."""
    config = logdir / "empty.toml"
    config.write_text("")
    port = free_port()
    env = dict(os.environ)
    env.update({"MCPHOST_PLUGINS": os.environ.get(PLUGINS_ENV, "demo"), "MCPHOST_CONFIG": str(config),
                "MCPHOST_LOG_LEVEL": "warning",
                "MCPHOST_WORKERS": "1"})
    env.update(extra_env or {})
    source = os.environ.get(SOURCE_ENV)
    command = [sys.executable, "-c", _FROM_SOURCE, source] if source else [mcphost_executable()]
    argv = [*command, "serve", "--host", "127.0.0.1", "--port", str(port)]
    return Server(name, argv, port, env, logdir)


# -- MCP over HTTP ----------------------------------------------------------------------------------

def headers(session_id: str | None = None) -> dict[str, str]:
    out = {"content-type": "application/json", "accept": ACCEPT, "mcp-protocol-version": PROTOCOL_VERSION}
    if session_id is not None:
        out["mcp-session-id"] = session_id
    return out


def messages_of(response: httpx.Response) -> list[Any]:
    """The JSON-RPC messages in a response: one JSON body, or the data of each SSE event."""
    kind = response.headers.get("content-type", "").split(";")[0].strip()
    if kind == "application/json":
        return [orjson.loads(response.content)]
    if kind == "text/event-stream":
        out = []
        for event in response.text.split("\n\n"):
            data = "\n".join(line[5:].lstrip(" ") for line in event.split("\n") if line.startswith("data:"))
            if data.strip():
                out.append(orjson.loads(data))
        return out
    raise AssertionError(f"unexpected content-type {kind!r} (status {response.status_code}): {response.text[:200]}")


INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                         "clientInfo": {"name": "mcphost-bench", "version": "1"}}}
INITIALIZED = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
INITIALIZE_BODY = orjson.dumps(INITIALIZE)


def check_initialize(response: httpx.Response) -> str:
    if response.status_code != 200:
        raise AssertionError(f"initialize: HTTP {response.status_code}: {response.text[:300]}")
    replies = messages_of(response)
    if not replies or replies[-1].get("result", {}).get("protocolVersion") != PROTOCOL_VERSION:
        raise AssertionError(f"initialize: unexpected reply {replies!r:.300}")
    session_id = response.headers.get("mcp-session-id")
    if not session_id:
        raise AssertionError("initialize: no Mcp-Session-Id header")
    return session_id


def open_session(client: httpx.Client, url: str) -> str:
    """initialize + notifications/initialized; returns the session id."""
    session_id = check_initialize(client.post(url, content=INITIALIZE_BODY, headers=headers()))
    done = client.post(url, content=INITIALIZED, headers=headers(session_id))
    if done.status_code != 202:
        raise AssertionError(f"notifications/initialized: HTTP {done.status_code}: {done.text[:200]}")
    return session_id


def echo_call(request_id: Any, text: str = "hello") -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                         "params": {"name": "echo", "arguments": {"text": text}}})


def check_echo(response: httpx.Response, request_id: Any, text: str = "hello",
               content_type: str | None = None) -> None:
    """Raise unless ``response`` is the echo tool's result for ``request_id``."""
    if response.status_code != 200:
        raise AssertionError(f"tools/call: HTTP {response.status_code}: {response.text[:300]}")
    kind = response.headers.get("content-type", "").split(";")[0].strip()
    if content_type is not None and kind != content_type:
        raise AssertionError(f"tools/call: content-type {kind!r}, expected {content_type!r}")
    replies = [m for m in messages_of(response) if isinstance(m, dict) and m.get("id") == request_id]
    expected = {"content": [{"type": "text", "text": text}]}
    if len(replies) != 1 or replies[0].get("result") != expected:
        raise AssertionError(f"tools/call: expected result {expected!r}, got {messages_of(response)!r:.300}")


# -- MCP over HTTP, 2026-07-28 (stateless: no session, per-request _meta) ---------------------------

MODERN_VERSION = "2026-07-28"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
               "io.modelcontextprotocol/clientCapabilities": {}}


def modern_headers(method: str = "tools/call", name: str | None = "echo") -> dict[str, str]:
    out = {"content-type": "application/json", "accept": ACCEPT, "mcp-protocol-version": MODERN_VERSION,
           "mcp-method": method}
    if name is not None:
        out["mcp-name"] = name
    return out


def modern_echo_call(request_id: Any, text: str = "hello") -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                         "params": {"name": "echo", "arguments": {"text": text}, "_meta": MODERN_META}})


def check_modern_echo(response: httpx.Response, request_id: Any, text: str = "hello") -> None:
    """Raise unless ``response`` is one plain JSON body with the echo result, ``resultType`` "complete"."""
    if response.status_code != 200:
        raise AssertionError(f"tools/call (2026-07-28): HTTP {response.status_code}: {response.text[:300]}")
    kind = response.headers.get("content-type", "").split(";")[0].strip()
    if kind != "application/json":
        raise AssertionError(f"tools/call (2026-07-28): content-type {kind!r}, expected 'application/json'")
    if response.headers.get("mcp-session-id"):
        raise AssertionError("tools/call (2026-07-28): the stateless reply carries an Mcp-Session-Id")
    reply = orjson.loads(response.content)
    result = reply.get("result") if isinstance(reply, dict) and reply.get("id") == request_id else None
    if not isinstance(result, dict) or result.get("resultType") != "complete" \
            or result.get("content") != [{"type": "text", "text": text}]:
        raise AssertionError("tools/call (2026-07-28): expected the echo with resultType 'complete', "
                             f"got {reply!r:.300}")


# -- facts about the run ----------------------------------------------------------------------------

def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def source_state() -> dict[str, Any]:
    """Which mcphost code was measured: the git commit, files changed since, and the importable path.

    With $MCPHOST_BENCH_SOURCE set, that copy is what was measured: ``source``/``module_path`` say so.
    """
    state: dict[str, Any] = {}
    if os.environ.get(SOURCE_ENV):
        state["source"] = os.environ[SOURCE_ENV]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        if os.environ.get(SOURCE_ENV):
            raise OSError  # the work tree's git state says nothing about that copy
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=10)
        state["commit"] = head.stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "mcphost"], cwd=ROOT, capture_output=True,
                               text=True, timeout=10)
        state["uncommitted"] = [line[3:] for line in dirty.stdout.splitlines()]
    with contextlib.suppress(Exception):
        source = os.environ.get(SOURCE_ENV)
        root = Path(source) / "mcphost" if source else None
        if root is None:
            out = subprocess.run([sys.executable, "-c", "import mcphost, pathlib; "
                                  "print(pathlib.Path(mcphost.__file__).parent)"],
                                 capture_output=True, text=True, timeout=20, cwd="/")
            if out.returncode != 0 or not out.stdout.strip():
                state["import_error"] = (out.stderr.strip().splitlines() or ["?"])[-1]
                return state
            root = Path(out.stdout.strip())
        state["module_path"] = str(root)
        digest = hashlib.sha1()
        for file in sorted(root.rglob("*.py")):
            digest.update(file.relative_to(root).as_posix().encode() + b"\0" + file.read_bytes())
        state["package_sha1"] = digest.hexdigest()[:12]  # of every .py file in the package measured
    return state


def describe_source(state: dict[str, Any]) -> str:
    """One line for the text reports."""
    if "source" in state:
        where = f"copy at {state['source']}"
    else:
        dirty = state.get("uncommitted") or []
        where = f"commit {state.get('commit', '?')}" + (f" + uncommitted {', '.join(dirty)}" if dirty else "")
    return f"mcphost measured: {where} (package sha1 {state.get('package_sha1', '?')})"


def machine_facts() -> dict[str, Any]:
    facts: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "nproc": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": {name: _version(name) for name in
                     ("mcphost", "mcphost-demo", "quart", "hypercorn", "h11", "orjson", "httpx", "pluggy",
                      "jsonschema")},
    }
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                facts["cpu"] = line.split(":", 1)[1].strip()
                break
    facts["mcphost_source"] = source_state()
    wrk = shutil.which("wrk")
    if wrk:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([wrk, "--version"], capture_output=True, text=True, timeout=5)
            facts["wrk"] = (out.stdout or out.stderr).splitlines()[0].strip()
    return facts


# -- the reliability benchmarks (bench_limits, bench_load, bench_churn, bench_slow, bench_cancel) ----

def diag_server(name: str, logdir: Path, *, extra_env: dict[str, str] | None = None) -> Server:
    """Like :func:`mcphost_server`, plus the benchmark-only diagnostic plugin (benchdiag.py)."""
    server = mcphost_server(name, logdir, extra_env={"MCPHOST_PLUGINS": "demo,benchdiag", **(extra_env or {})})
    if os.environ.get(SOURCE_ENV):
        raise SystemExit(f"{SOURCE_ENV} is not supported by the reliability benchmarks")
    server.argv = [sys.executable, str(HERE / "benchdiag.py"), *server.argv[1:]]
    return server


def modern_call(request_id: Any, tool: str, arguments: dict[str, Any], *, capabilities: dict[str, Any] | None = None,
                progress_token: Any = None, **params: Any) -> tuple[bytes, dict[str, str]]:
    """A stateless 2026-07-28 ``tools/call``: body and headers."""
    meta: dict[str, Any] = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": capabilities or {}}
    if progress_token is not None:
        meta["progressToken"] = progress_token
    body = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                         "params": {"name": tool, "arguments": arguments, "_meta": meta, **params}})
    return body, modern_headers("tools/call", tool)


def session_call(request_id: Any, tool: str, arguments: dict[str, Any], progress_token: Any = None) -> bytes:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if progress_token is not None:
        params["_meta"] = {"progressToken": progress_token}
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})


def diag_stats(url: str) -> dict[str, Any]:
    """The server's own counts (sessions, asyncio tasks, fds, RSS) from the diagnostic plugin."""
    body, sent = modern_call("stats", "diag_stats", {})
    response = httpx.post(url, content=body, headers=sent, timeout=30)
    reply = orjson.loads(response.content)
    result = reply.get("result") or {}
    structured = result.get("structuredContent")
    if isinstance(structured, dict) and "sessions" in structured:
        return structured
    return orjson.loads(result["content"][0]["text"])


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def slope_per_minute(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) samples, per minute."""
    if len(samples) < 2:
        return float("nan")
    n = len(samples)
    mean_t = sum(t for t, _ in samples) / n
    mean_v = sum(v for _, v in samples) / n
    var = sum((t - mean_t) ** 2 for t, _ in samples)
    cov = sum((t - mean_t) * (v - mean_v) for t, v in samples)
    return cov / var * 60 if var else float("nan")


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def new_report(args: Any = None) -> dict[str, Any]:
    """The start of a reliability benchmark's report: machine facts, arguments, load average now."""
    report: dict[str, Any] = {"facts": machine_facts(), "load_average_before": load_average()}
    if args is not None:
        report["args"] = vars(args)
    return report


def finish_report(path: str | None, report: dict[str, Any]) -> None:
    """Print each target as met or MISS, then save the report."""
    for name, met in report["targets"].items():
        print(f"  {'met ' if met else 'MISS'}  {name}")
    save_report(path, report)


def save_report(path: str | None, report: dict[str, Any]) -> None:
    """Write ``report`` as JSON to ``path`` (when given)."""
    if path:
        Path(path).write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))

async def best_cpu_per_call(one: Callable[[int], Awaitable[None]], requests: int, rounds: int) -> float:
    """The least process CPU per call over ``rounds`` rounds of ``requests`` calls of ``one(number)``
    (after a round 0 that warms every cache), in microseconds."""
    best = float("inf")
    for round_number in range(rounds + 1):
        gc.collect()
        start = time.process_time()
        for number in range(requests):
            await one(number)
        spent = (time.process_time() - start) / requests
        if round_number:
            best = min(best, spent)
    return best * 1e6


def asgi_exchange(method: str, body: bytes, headers: dict[str, str]) -> tuple[dict[str, Any], Any, asyncio.Event]:
    """One request as Hypercorn hands it to the ASGI app: its scope, its ``receive`` (the body, then a
    client that stays connected until the returned event is set) and that event."""
    raw = [(b"host", b"127.0.0.1:8000"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers.items()]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "",
             "headers": raw, "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}
    delivered = False
    stay = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await stay.wait()
        return {"type": "http.disconnect"}

    return scope, receive, stay
