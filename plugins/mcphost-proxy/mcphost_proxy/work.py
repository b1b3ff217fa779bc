"""The proxy's one worker thread, and the interpreter's switch interval while it works.

Kept apart from the transports (framing.py), which import the ``mcp`` client: the plugin's hooks
use these without loading ``mcp`` until an upstream is started.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

#: The one worker thread of the proxy's CPU work (parsing long lines, reading listings, deriving
#: records): one thread at most competes with the event loop for the interpreter, however many
#: upstreams list at once (six busy threads made the loop wait for the interpreter between them).
_WORKER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcphost-proxy")

#: The interpreter's switch interval while the proxy's threads work (s): see :func:`busy`.
BUSY_SWITCH_INTERVAL = 0.0005
_busy = 0
_switch_interval = 0.005


@contextlib.contextmanager
def busy() -> Iterator[None]:
    """While the proxy's threads work, the event loop gets the interpreter lock back sooner.

    The loop releases the lock around every system call (select, each socket write); a busy thread
    keeps it until the switch interval (5 ms by default) has passed, so every turn of the loop
    waited up to 5 ms several times over: /healthz answered in 40-60 ms during the mounts although
    the loop thread ran 2-9 ms of it. A shorter interval while the threads work bounds each wait
    (a 20 000-tool re-collection: the loop's longest stall 154-201 ms at 5 ms, 64-97 ms at 0.5 ms).
    """
    global _busy, _switch_interval
    if _busy == 0:
        _switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(_switch_interval, BUSY_SWITCH_INTERVAL))
    _busy += 1
    try:
        yield
    finally:
        _busy -= 1
        if _busy == 0:
            sys.setswitchinterval(_switch_interval)


async def offload(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` in the proxy's worker thread."""
    with busy():
        return await asyncio.get_running_loop().run_in_executor(_WORKER, fn, *args)
