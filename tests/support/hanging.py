"""``hanger``: a plugin whose connect hook never lets the client in on its own, tracing each hook.

``MCPHOST_HANG_MODE`` picks how: ``sleep`` (sleeps for ever), ``cancel`` (raises CancelledError),
``stubborn`` (sleeps for ever and ignores cancellation;
an in-process test ends it with :func:`release`). The trace file is named by
``MCPHOST_HANG_TRACE``; each hook appends one line as ``tests/support/refusing.py`` does. Used by
``tests/interaction/test_hook_deadlines.py`` in ``mcphost serve`` subprocesses (stdio and HTTP).
"""

from __future__ import annotations

import asyncio
import os
import threading

import mcphost
from tests.support.refusing import trace_to

TRACE_ENV = "MCPHOST_HANG_TRACE"
MODE_ENV = "MCPHOST_HANG_MODE"


def _trace(line: str) -> None:
    trace_to(TRACE_ENV, line)


@mcphost.hookimpl
async def mcphost_connect(session, request):
    _trace(f"connect {session.id} {request.transport}")
    mode = os.environ.get(MODE_ENV, "sleep")
    if mode == "cancel":
        raise asyncio.CancelledError
    while not _released.is_set():
        try:
            await asyncio.sleep(0.05 if mode == "stubborn" else 3600)
        except asyncio.CancelledError:
            if mode != "stubborn":
                raise


#: Set by :func:`release` so the stubborn hooks an in-process test abandoned end with it.
_released = threading.Event()


def release() -> None:
    """End the stubborn hooks still running in this process (a test's cleanup)."""
    _released.set()


def rearm() -> None:
    """Let the next stubborn hook hang again."""
    _released.clear()


@mcphost.hookimpl
def mcphost_disconnect(session, reason):
    _trace(f"disconnect {session.id} {reason}")


@mcphost.hookimpl
def mcphost_terminate(session, reason):
    _trace(f"terminate {session.id} {reason}")
