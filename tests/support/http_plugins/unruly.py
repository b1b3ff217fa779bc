"""``httpunruly``: a plugin that misbehaves on demand, for the isolation tests (RELIABILITY H).

- tools ``exit_cli`` (a synchronous ``sys.exit(2)``, as an argparse CLI does on bad input),
  ``exit_async``, ``interrupt`` and ``generator_exit`` (the same BaseExceptions on the loop),
  ``block`` (a synchronous ``time.sleep``) and ``fine`` (answers ``fine``);
- the resource template ``unruly://raise/{kind}`` and the prompt ``unruly_prompt`` raise
  ``SystemExit`` (kind ``exit``) or ``KeyboardInterrupt`` (anything else);
- ``mcphost_authenticate`` reads ``X-Unruly-Auth``: ``exit`` / ``interrupt`` raise, ``bogus``
  returns a string instead of a Principal; anything else (or no header) is no opinion;
- ``mcphost_connect`` raises ``SystemExit`` on ``X-Unruly-Connect: exit`` and blocks 0.3 s on
  ``slow``; the middleware raises ``SystemExit`` on ``X-Unruly-Middleware: exit``;
- the plugin route ``GET /unruly/exit`` raises ``SystemExit``; ``GET /unruly/ok`` answers ``ok``.

Run it with ``[server] allow_anonymous = true``, so requests without the header are served.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import mcphost


@mcphost.tool
def exit_cli(code: int = 2) -> str:
    """Exit the way an argparse CLI does on bad arguments."""
    sys.exit(code)


@mcphost.tool
async def exit_async() -> str:
    raise SystemExit(3)


@mcphost.tool
async def interrupt() -> str:
    raise KeyboardInterrupt


@mcphost.tool
async def generator_exit() -> str:
    raise GeneratorExit


@mcphost.tool
def block(seconds: float = 5.0) -> str:
    """Block the calling thread, as a synchronous HTTP client or database call would."""
    time.sleep(seconds)
    return f"slept {seconds:g}"


@mcphost.tool
async def fine() -> str:
    await asyncio.sleep(0)
    return "fine"


@mcphost.resource_template("unruly://raise/{kind}", name="unruly")
async def raising_resource(kind: str) -> str:
    if kind == "exit":
        raise SystemExit(4)
    raise KeyboardInterrupt


@mcphost.prompt(name="unruly_prompt")
async def raising_prompt(kind: str = "interrupt") -> str:
    if kind == "exit":
        raise SystemExit(5)
    raise KeyboardInterrupt


def _header(connection: Any, name: str) -> str | None:
    headers = getattr(connection, "headers", None) or {}
    return headers.get(name)


@mcphost.middleware
async def unruly_middleware(request: Any, call_next: Any) -> Any:
    if request.connection is not None and _header(request.connection, "x-unruly-middleware") == "exit":
        raise SystemExit(6)
    return await call_next(request)


@mcphost.hookimpl
def mcphost_tools(host: Any) -> list[Any]:
    return [exit_cli, exit_async, interrupt, generator_exit, block, fine]


@mcphost.hookimpl
def mcphost_resource_templates(host: Any) -> list[Any]:
    return [raising_resource]


@mcphost.hookimpl
def mcphost_prompts(host: Any) -> list[Any]:
    return [raising_prompt]


@mcphost.hookimpl
def mcphost_middleware(host: Any) -> list[Any]:
    return [unruly_middleware]


@mcphost.hookimpl
def mcphost_authenticate(request: Any) -> Any:
    mode = _header(request, "x-unruly-auth")
    if mode == "exit":
        sys.exit(7)
    if mode == "interrupt":
        raise KeyboardInterrupt
    if mode == "bogus":
        return "alice"  # not a Principal: a bug in this plugin
    return None


@mcphost.hookimpl
def mcphost_connect(session: Any, request: Any) -> None:
    mode = _header(request, "x-unruly-connect")
    if mode == "exit":
        raise SystemExit(8)
    if mode == "slow":
        time.sleep(0.3)  # a synchronous hook doing blocking I/O: it holds the event loop


@mcphost.hookimpl
def mcphost_routes(app: Any) -> None:
    @app.route("/unruly/exit")
    async def unruly_exit() -> str:
        raise SystemExit(9)

    @app.route("/unruly/ok")
    async def unruly_ok() -> str:
        return "ok"
