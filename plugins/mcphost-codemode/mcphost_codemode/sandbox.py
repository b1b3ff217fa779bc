"""Running one program in the Monty sandbox, and turning what happens into answers a model can act on.

Monty (``pydantic-monty``) is a Python interpreter written in Rust that runs each program in a
pool of ``monty`` worker processes: the host's event loop only waits on a pipe, a crash or a
runaway program costs a worker (killed and replaced), never the host. The sandbox has no
filesystem, network, environment or subprocess access: ``os`` and ``pathlib`` are inert
stand-ins whose every such call is refused, ``subprocess`` and ``socket`` do not exist; an import of
a module that reaches files, the environment or processes (:data:`REFUSED_MODULES`) is refused before
the program runs, naming its line and column, so a model learns at once what the sandbox is. Its own
limits stop a program that computes too long (execution time, which does not run while a tool
call is awaited), uses too much memory or recurses too deep; this module adds the cap on printed
output. ``call_tool`` is the one way out, a host function that runs a real tool call.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import orjson
import pydantic_monty as monty

from mcphost_codemode.limits import Limits

#: Modules whose import is refused before the program runs: in Python they reach files, the
#: environment, processes or the network (Monty has none of it; ``os`` and ``pathlib`` would import as
#: inert stand-ins, and an import that succeeds tells a model the wrong thing).
REFUSED_MODULES = frozenset({
    "os", "pathlib", "sys", "io", "shutil", "tempfile", "glob", "subprocess", "socket", "ssl", "signal",
    "ctypes", "multiprocessing", "threading", "importlib", "builtins", "urllib", "http", "requests", "httpx",
})
#: Frames a program may nest (Monty's own default is 1000; a model's program needs far fewer).
MAX_RECURSION = 200
#: The workers' niceness (``nice``): below the host's priority, so the host's event loop wins a contended core.
WORKER_NICENESS = 10
_MB = 1024 * 1024
#: A program that prints more than this many times ``max_output_bytes`` (and at least FLOOD_MIN) is stopped.
FLOOD_FACTOR = 16
FLOOD_MIN = 1024 * 1024


class Caller(Protocol):
    """What a program's ``call_tool`` reaches, and how its calls are stopped."""

    calls: int

    async def call_tool(self, name: Any, arguments: Any = None) -> Any: ...

    def cancel(self) -> None: ...


@dataclass
class Outcome:
    """How a run ended: its value (``jsonable``: it is JSON, so it goes out structured) or an error."""

    output: str
    calls: int
    result: Any = None
    jsonable: bool = False
    result_text: str = ""
    error: str | None = None


class Output:
    """The program's printed output, kept up to ``limit`` bytes (the rest is counted and dropped).

    Output crosses from the worker to the host process: a program printing in a loop would keep
    the host busy reading it. Past ``FLOOD_FACTOR`` times the limit ``on_flood`` stops the program.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0
        self.flooded = False
        self.on_flood: Callable[[], Any] | None = None

    def __call__(self, stream: Literal["stdout", "stderr"], text: str) -> None:
        if self.flooded:
            return
        size = len(text.encode())
        if self.size + self.dropped + size > max(FLOOD_FACTOR * self.limit, FLOOD_MIN):
            self.flooded = True
            if self.on_flood is not None:
                self.on_flood()
        room = self.limit - self.size
        if size <= room:
            self.parts.append(text)
            self.size += size
            return
        if room > 0:
            kept = text.encode()[:room].decode(errors="ignore")
            self.parts.append(kept)
            self.size += len(kept.encode())
        self.dropped += size - max(room, 0)

    def text(self) -> str:
        joined = "".join(self.parts)
        if self.dropped:
            joined += f"\n[{self.dropped} more bytes of output cut: max_output_bytes = {self.limit}]"
        return joined


class Sandbox:
    """A pool of Monty workers (at most ``workers`` programs at once), started on first use."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: monty.AsyncMonty | None = None
        self._starting = asyncio.Lock()

    async def _started(self) -> monty.AsyncMonty:
        async with self._starting:
            if self._pool is None:
                pool = monty.AsyncMonty(min_processes=1, max_processes=self.workers)
                await pool.__aenter__()
                self._pool = pool
            return self._pool

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.__aexit__(None, None, None)

    async def run(self, code: str, limits: Limits, caller: Caller) -> Outcome:
        """Run ``code`` within ``limits``; its ``call_tool`` is ``caller.call_tool``.

        Cancelling the run kills its worker (the pool replaces it) and cancels the tool call it
        was waiting on.
        """
        refused = await asyncio.to_thread(refused_import, code)  # parsing grows with the program: off the loop
        if refused is not None:
            return Outcome(output="", calls=0, error=refused)
        output = Output(limits.max_output_bytes)
        pool = await self._started()
        feed = asyncio.ensure_future(self._feed(pool, code, limits, caller, output))
        loop = asyncio.get_running_loop()
        output.on_flood = lambda: loop.call_soon_threadsafe(feed.cancel)  # printing may be reported off the loop
        try:
            value = await feed
        except asyncio.CancelledError:
            caller.cancel()
            task = asyncio.current_task()
            if output.flooded and (task is None or not task.cancelling()):
                return Outcome(output=output.text(), calls=caller.calls,
                               error=f"Limit reached: the program printed more than "
                                     f"{max(FLOOD_FACTOR * limits.max_output_bytes, FLOOD_MIN)} bytes "
                                     f"(max_output_bytes = {limits.max_output_bytes}: output past it is cut, "
                                     f"and a program printing {FLOOD_FACTOR} times as much is stopped)")
            raise
        except monty.MontyError as exc:
            caller.cancel()
            return Outcome(output=output.text(), calls=caller.calls, error=describe(exc, limits))
        return finish(value, output.text(), caller.calls)

    async def _feed(self, pool: monty.AsyncMonty, code: str, limits: Limits, caller: Caller,
                    output: Output) -> Any:
        """Check a worker out, run ``code`` in it, and give the worker back (killed when cancelled)."""
        sandbox_limits: monty.ResourceLimits = {
            "max_feed_duration_secs": limits.time_limit,
            "max_memory": limits.memory_limit_mb * _MB,
            "max_recursion_depth": MAX_RECURSION,
            # A backstop only: max_calls is counted (and named) by the caller, and each call also
            # costs the name lookup and the future's resolution.
            "max_suspensions": 4 * limits.max_calls + 64,
        }
        lookup = {"call_tool": caller.call_tool}
        async with pool.checkout(limits=sandbox_limits, print_flush_interval=0.05) as session:
            _yield_to_host(session.worker_pid)
            value = await session.feed_run(code, external_lookup=lookup, print_callback=output)
            if value is None:  # no last expression: the program's `result` variable, if it set one
                with contextlib.suppress(monty.MontyRuntimeError):
                    value = await session.feed_run("result", print_callback=output)
        return value


def refused_import(code: str) -> str | None:
    """The error for the first import of a :data:`REFUSED_MODULES` module in ``code``; None when there
    is none (or when Python cannot parse it: Monty then reports the syntax error itself)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".", 1)[0]
            if top in REFUSED_MODULES:
                return (f"ImportError at line {node.lineno}, column {node.col_offset + 1}: the sandbox refuses "
                        f"'import {name}' (no files, environment, processes or network; call tools with "
                        "call_tool instead)")
    return None


def _yield_to_host(pid: int | None) -> None:
    """Run the worker at a lower CPU priority than the host: a program computing on a busy machine
    must not take the core the host's event loop needs (its /healthz, its other callers)."""
    if pid is None or not hasattr(os, "setpriority"):
        return
    try:
        if os.getpriority(os.PRIO_PROCESS, pid) < WORKER_NICENESS:
            os.setpriority(os.PRIO_PROCESS, pid, WORKER_NICENESS)
    except OSError:  # the worker ended meanwhile, or the platform says no: it runs at the host's priority
        pass


def finish(value: Any, output: str, calls: int) -> Outcome:
    """The outcome of a program that returned ``value``."""
    try:
        text = orjson.dumps(value).decode()
        jsonable = not _non_finite(value)
    except TypeError:
        text, jsonable = repr(value), False
    if isinstance(value, str):
        text = value
    return Outcome(output=output, calls=calls, result=value if jsonable else None, jsonable=jsonable,
                   result_text=text if value is not None else "(no result: the program set no `result` "
                                                                "and did not end with an expression)")


def _non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, Mapping):
        return any(_non_finite(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_non_finite(item) for item in value)
    return False


def describe(exc: monty.MontyError, limits: Limits) -> str:
    """What went wrong, for the model: where (line, column), what, and which limit when one stopped it."""
    if isinstance(exc, monty.MontySyntaxError):
        frames = exc.traceback()
        where = f" at line {frames[-1].line}, column {frames[-1].column}" if frames else ""
        return f"SyntaxError{where}: {exc.display('msg')}"
    if isinstance(exc, monty.MontyCrashedError):
        if exc.timed_out:
            return _time_limit(limits)
        return "The sandbox stopped the program (its worker ended); run it again, maybe with smaller data"
    if isinstance(exc, monty.MontyRuntimeError):
        inner = exc.exception()
        message = exc.display("type-msg")
        if isinstance(inner, TimeoutError) and "time limit exceeded" in message:
            return _time_limit(limits)
        if isinstance(inner, MemoryError) and "memory limit exceeded" in message:
            return (f"Limit reached: the program used more than {limits.memory_limit_mb} MB of memory "
                    "(memory_limit_mb)")
        if isinstance(inner, RecursionError):
            return f"Limit reached: recursion deeper than {MAX_RECURSION} calls ({message})"
        if "suspension" in message.lower():
            return f"Limit reached: a program may make {limits.max_calls} tool calls (max_calls)"
        frames = exc.traceback()
        where = f" (line {frames[-1].line}, column {frames[-1].column})" if frames else ""
        return f"{message}{where}" + (f"\n{exc.display('traceback')}" if len(frames) > 1 else "")
    return f"{type(exc).__name__}: {exc}"


def _time_limit(limits: Limits) -> str:
    return (f"Limit reached: the program computed for more than {limits.time_limit:g} s (time_limit); "
            "time spent waiting on tool calls does not count")
