"""Drive an MCP server with the official TypeScript SDK client from pytest.

Usage from a test::

    from tests.support.js.run import ensure_ts_client, run_ts_client, ts_client_available

    status = ensure_ts_client()
    if not status:
        pytest.skip(status.reason)
    out = run_ts_client(
        [sys.executable, "-m", "mcphost", ...],          # stdio: argv of the server
        [{"op": "listTools"}, {"op": "callTool", "name": "echo", "arguments": {"text": "hi"}}],
    )
    assert out["steps"][1]["result"]["content"][0]["text"] == "hi"

    out = run_ts_client("http://127.0.0.1:8000/mcp", [...])  # Streamable HTTP

See client.mjs for the step vocabulary and the output document. Over HTTP the document also
lists every HTTP exchange (``http``) and, for steps with ``"drop_after_events": n``, the SSE
responses the harness cut after n data events to make the SDK resume with Last-Event-ID
(``drops``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CLIENT_SCRIPT",
    "JS_DIR",
    "TsClientStatus",
    "ensure_ts_client",
    "node_executable",
    "run_ts_client",
    "ts_client_available",
]

JS_DIR = Path(__file__).resolve().parent
CLIENT_SCRIPT = JS_DIR / "client.mjs"
MIN_NODE_MAJOR = 18
_LOCK_FILE = JS_DIR / ".install.lock"
# Lives inside node_modules so `npm ci` (which wipes node_modules) invalidates it.
_MARKER = JS_DIR / "node_modules" / ".mcphost-install-ok"
_NPM_CI_TIMEOUT = 600.0


@dataclass(frozen=True)
class TsClientStatus:
    """Truthy when the TS client can run; otherwise `reason` says why not."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


_cached_status: TsClientStatus | None = None


def node_executable() -> str:
    """Path of `node` from PATH; raises RuntimeError if absent or older than v18."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node not found on PATH")
    try:
        proc = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"cannot run {node} --version: {exc}") from exc
    version = proc.stdout.strip()
    try:
        major = int(version.lstrip("v").split(".")[0])
    except ValueError:
        raise RuntimeError(f"unexpected `node --version` output: {version!r}") from None
    if major < MIN_NODE_MAJOR:
        raise RuntimeError(f"node {version} at {node} is too old; need >= {MIN_NODE_MAJOR}")
    return node


def _lock_digest() -> str:
    return hashlib.sha256((JS_DIR / "package-lock.json").read_bytes()).hexdigest()


def _installed() -> bool:
    try:
        return _MARKER.read_text().strip() == _lock_digest()
    except OSError:
        return False


@contextlib.contextmanager
def _install_lock() -> Iterator[None]:
    """Inter-process lock so parallel test workers don't run `npm ci` concurrently."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX: best effort, no lock
        yield
        return
    with open(_LOCK_FILE, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def ensure_ts_client() -> TsClientStatus:
    """Make sure tests/support/js/node_modules is installed (`npm ci`) and node is usable.

    Returns a TsClientStatus: truthy when ready, falsy with `.reason` when node/npm
    is missing or the install failed. Never raises for those conditions. The result
    is cached for the life of the process.
    """
    global _cached_status
    if _cached_status is not None:
        return _cached_status
    _cached_status = _ensure_uncached()
    return _cached_status


def _ensure_uncached() -> TsClientStatus:
    try:
        node_executable()
    except RuntimeError as exc:
        return TsClientStatus(False, str(exc))
    if _installed():
        return TsClientStatus(True)
    npm = shutil.which("npm")
    if npm is None:
        return TsClientStatus(False, "npm not found on PATH (needed to install tests/support/js dependencies)")
    try:
        with _install_lock():
            if _installed():  # another process finished the install while we waited
                return TsClientStatus(True)
            try:
                proc = subprocess.run(
                    [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
                    cwd=JS_DIR,
                    capture_output=True,
                    text=True,
                    timeout=_NPM_CI_TIMEOUT,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                return TsClientStatus(False, f"npm ci in {JS_DIR} failed: {exc}")
            if proc.returncode != 0:
                tail = (proc.stderr or proc.stdout)[-4000:]
                return TsClientStatus(False, f"npm ci in {JS_DIR} exited {proc.returncode}:\n{tail}")
            if not (JS_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").is_file():
                return TsClientStatus(False, "npm ci succeeded but @modelcontextprotocol/sdk is missing")
            _MARKER.write_text(_lock_digest() + "\n")
            return TsClientStatus(True)
    except OSError as exc:
        return TsClientStatus(False, f"cannot install tests/support/js dependencies: {exc}")


def ts_client_available() -> bool:
    """True if the TS client is usable (installs dependencies on first call)."""
    return bool(ensure_ts_client())


def _client_args(node: str, target: Sequence[str] | str, timeout: float, *, elicit: Any,
                 elicit_action: str | None, sample: str | None, roots: Sequence[Mapping[str, Any]] | None,
                 headers: Mapping[str, str] | None) -> list[str]:
    """The node command line of :func:`run_ts_client` (the script goes to its stdin)."""
    timeout_ms = str(max(1, int(timeout * 1000)))
    args: list[str] = [node, str(CLIENT_SCRIPT), "--timeout", timeout_ms, "--script", "-"]
    if elicit is not None or elicit_action is not None:
        args += ["--elicit", json.dumps(elicit if elicit is not None else {})]
    if elicit_action is not None:
        args += ["--elicit-action", elicit_action]
    if sample is not None:
        args += ["--sample", sample]
    if roots is not None:
        args += ["--roots", json.dumps(list(roots))]
    for name, value in (headers or {}).items():
        args += ["--header", f"{name}: {value}"]
    if isinstance(target, str):
        args += ["--http", target]
    else:
        target = list(target)
        if not target:
            raise ValueError("stdio target needs a command")
        args += ["--stdio", "--", *target]
    return args


def run_ts_client(
    target: Sequence[str] | str,
    script: Sequence[Mapping[str, Any]],
    *,
    elicit: Any = None,
    sample: str | None = None,
    roots: Sequence[Mapping[str, Any]] | None = None,
    timeout: float = 30.0,
    elicit_action: str | None = None,
    headers: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    check: bool = True,
) -> dict[str, Any]:
    """Run client.mjs against `target` and return its parsed JSON document.

    target: a list (argv of a stdio server, spawned by the TS SDK with the full
        environment of this call) or a str (Streamable HTTP URL).
    script: steps, see client.mjs (listTools, callTool, ..., sleep).
    elicit: JSON content to accept elicitation requests with (declares the
        elicitation capability); elicit_action may be "decline"/"cancel" instead.
    sample: text to answer sampling requests with (declares sampling; model
        "ts-test-model").
    roots: list of {"uri", "name"} (declares roots with listChanged).
    timeout: overall budget in seconds, enforced inside node too.
    headers: extra HTTP headers (HTTP targets only).
    env: environment for node and therefore for a stdio server (default: os.environ).
    check: when False, return the document even if node exited 3 (overall
        timeout); a connection failure (exit 2) always raises.

    Raises AssertionError (including node's stderr) if node fails, exits
    non-zero, or prints something that is not a single JSON document.
    Raises RuntimeError if node/the SDK install is unavailable.
    """
    status = ensure_ts_client()
    if not status:
        raise RuntimeError(f"TypeScript MCP client unavailable: {status.reason}")
    node = node_executable()

    args = _client_args(node, target, timeout, elicit=elicit, elicit_action=elicit_action, sample=sample,
                        roots=roots, headers=headers)

    try:
        proc = subprocess.run(
            args,
            input=json.dumps(list(script)),
            capture_output=True,
            text=True,
            timeout=timeout + 15.0,
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        raise AssertionError(
            f"TS client did not finish within {timeout + 15.0}s\nstderr:\n{stderr}"
        ) from None

    def fail(why: str) -> AssertionError:
        return AssertionError(
            f"TS client {why} (exit {proc.returncode})\n"
            f"command: {args}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-8000:]}"
        )

    if proc.returncode not in (0, 3) or (proc.returncode == 3 and check):
        raise fail("failed")
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise fail("printed invalid JSON") from None
    if not isinstance(doc, dict):
        raise fail("printed a non-object JSON document")
    doc["stderr"] = proc.stderr
    return doc


if __name__ == "__main__":  # pragma: no cover - manual smoke test
    st = ensure_ts_client()
    print("ready" if st else f"unavailable: {st.reason}", file=sys.stderr)
    sys.exit(0 if st else 1)
