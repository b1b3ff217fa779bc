"""Running the official MCP conformance suite (``scripts/conformance``) against a server, and
reading its scores: shared by tests/interop/test_http_conformance.py and the redis plugin's
balancer tests.

``scripts/conformance`` installs what it needs through npm into ``$CONFORMANCE_CACHE`` (default:
``<tmp>/conformance-cache``, kept between runs).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.http_support import HttpServer

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = REPO_ROOT / "scripts" / "conformance"
ALPHA = "0.2.0-alpha.12"
RUN_TIMEOUT = 600  # CONFORMANCE_TIMEOUT: the suite itself
# On top of the run: up to two `npm install`s (Node 22, the suite) on a cold cache, 300 s each.
SUBPROCESS_TIMEOUT = RUN_TIMEOUT + 2 * 300 + 120
LOG_TAIL_LINES = 150
#: Scenarios in the alpha suite's ``--suite all`` run (2026-07-28).
ALPHA_SUITE_ALL_SCENARIOS = 65


def _cache_dir() -> str:
    return os.environ.get("CONFORMANCE_CACHE") or str(Path(tempfile.gettempdir()) / "conformance-cache")


def _tail(path: str | None, lines: int = LOG_TAIL_LINES) -> str:
    if not path:
        return "(no log file named)"
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(cannot read {path}: {exc})"
    return "\n".join(text.splitlines()[-lines:])


def run_suite(server: HttpServer, record_property: Any, *args: str) -> tuple[list[str], str]:
    """Run scripts/conformance against ``server``; return its stdout lines and its log's text.

    Any failure (exit status, timeout) is raised with the FAIL line, the tail of the log file
    the script names and the tail of the server's log.
    """
    url = f"http://localhost:{server.port}/mcp"
    env = {**os.environ, "CONFORMANCE_CACHE": _cache_dir(), "CONFORMANCE_TIMEOUT": str(RUN_TIMEOUT),
           "NO_COLOR": "1"}
    command = [sys.executable, str(CONFORMANCE), url, *args]
    started = time.monotonic()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=SUBPROCESS_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{command} did not finish within {SUBPROCESS_TIMEOUT}s\n"
                             f"server log:\n{server.log()[-4000:]}") from None
    wall = time.monotonic() - started
    record_property("conformance_wall_seconds", round(wall, 2))
    print(f"\n{' '.join(args) or '(defaults)'}: {proc.stdout.strip()} [{wall:.1f}s]")
    match = re.search(r"log: (\S+?\.log)", proc.stderr)
    log_path = match.group(1) if match else None
    lines = proc.stdout.splitlines()
    if proc.returncode != 0:  # stdout has the PASS and FAIL lines; stderr an ERROR naming the log
        raise AssertionError(
            f"scripts/conformance {' '.join(args)} exited {proc.returncode} after {wall:.1f}s\n"
            f"stdout:\n{proc.stdout}stderr:\n{proc.stderr[-3000:]}\n"
            f"--- tail of {log_path} ---\n{_tail(log_path)}\n"
            f"--- tail of the server log ---\n{server.log()[-3000:]}")
    return lines, (Path(log_path).read_text(encoding="utf-8", errors="replace") if log_path else "")


def scenarios(log: str) -> dict[str, bool]:
    """Scenario name -> passed, from the log's ``=== SUMMARY ===`` block."""
    block = log.split("=== SUMMARY ===", 1)[-1]
    return {m.group(2): m.group(1) == "✓" for m in re.finditer(r"^(✓|✗) ([^ :]+):", block, re.MULTILINE)}


def expect_pass(lines: list[str], log: str, expected: str) -> None:
    detail = "\n".join(lines) + "\n--- tail of the log ---\n" + "\n".join(log.splitlines()[-LOG_TAIL_LINES:])
    assert not [line for line in lines if line.startswith("FAIL:")], detail
    assert expected in [line.split(" (", 1)[0] for line in lines], f"expected {expected!r}\n{detail}"
