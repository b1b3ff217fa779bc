"""``refuser``: a plugin whose connect hook turns every client away, tracing each lifecycle hook.

The trace file is named by ``MCPHOST_REFUSE_TRACE``; each hook appends one line:
``connect <session id> <transport>``, ``disconnect <session id> <reason>``,
``terminate <session id> <reason>``. Used by ``tests/interaction/test_refusal.py`` in this
process (memory cells) and in ``mcphost serve`` subprocesses (stdio and HTTP cells); :class:`Trace`
reads the file back.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import mcphost

TRACE_ENV = "MCPHOST_REFUSE_TRACE"


def trace_to(env: str, line: str) -> None:
    """Append ``line`` to the trace file the environment variable ``env`` names (none: nothing)."""
    path = os.environ.get(env)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def _trace(line: str) -> None:
    trace_to(TRACE_ENV, line)


@mcphost.hookimpl
def mcphost_connect(session, request):
    _trace(f"connect {session.id} {request.transport}")
    raise mcphost.Forbidden("refuser says no")


@mcphost.hookimpl
def mcphost_disconnect(session, reason):
    _trace(f"disconnect {session.id} {reason}")


@mcphost.hookimpl
def mcphost_terminate(session, reason):
    _trace(f"terminate {session.id} {reason}")


class Trace:
    """The lines a refuser (or another tracing plugin) wrote to ``path``, as (hook, session, detail)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def lines(self) -> list[tuple[str, str, str]]:
        if not self.path.exists():
            return []
        return [tuple(line.split(" ", 2)) for line in self.path.read_text().splitlines()]  # type: ignore[misc]

    def wait(self, count: int, timeout: float = 5.0) -> list[tuple[str, str, str]]:
        deadline = time.monotonic() + timeout
        while len(self.lines()) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.lines()
