"""mcphost-codemode: the ``execute`` tool of ``[endpoints.NAME] discovery = "code"`` endpoints.

A code endpoint lists ``search_tools`` (the core's) and ``execute``: the model writes a short Python
program that calls the endpoint's tools with ``await call_tool(name, arguments)`` and gets back
only what the program returns and prints, instead of every intermediate result passing through
its context. The program runs in the Monty sandbox (:mod:`mcphost_codemode.sandbox`), in a worker
process, never in the host; each tool call it makes is a real call of the caller on that endpoint
(``ctx.call_tool``: the same scopes, selection, validation, middleware, questions and counters).

Settings: ``[plugins.codemode]`` holds the defaults of ``time_limit``, ``memory_limit_mb``,
``max_calls`` and ``max_output_bytes``, plus the pool's ``workers`` and ``runs_per_principal``;
``[endpoints.NAME.code]`` overrides the four limits for one endpoint. The plugin is dormant until
some endpoint says ``discovery = "code"``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

import mcphost
from mcphost import Context
from mcphost.endpoints import CODE_META, CODE_TOOL
from mcphost_codemode.limits import Limits

if TYPE_CHECKING:  # Monty is imported when the first program runs, not when the plugin is loaded
    from mcphost_codemode.sandbox import Sandbox

__all__ = ["CodeModePlugin", "CodeModeSettings", "Limits"]

class CodeModeSettings(mcphost.PluginSettings):
    """``[plugins.codemode]``: the limits of programs on every code endpoint (``[endpoints.NAME.code]``
    overrides the first four for one endpoint) and the sandbox pool."""

    time_limit: Annotated[float, Field(gt=0, description="seconds a program may compute")] = 30.0
    memory_limit_mb: Annotated[int, Field(ge=1, description="heap a program may use, in MB")] = 100
    max_calls: Annotated[int, Field(ge=0, description="tool calls one program may make")] = 50
    max_output_bytes: Annotated[int, Field(ge=1, description=(
        "bytes of printed output kept (more is cut, with a note; 16 times as much, at least 1 MiB, stops the "
        "program)"))] = 64 * 1024
    workers: Annotated[int, Field(ge=1, le=256, description=(
        "sandbox worker processes at most (programs running at once, in this process)"))] = 4
    runs_per_principal: Annotated[int, Field(ge=1, description=(
        "programs one principal may run at once (more are refused)"))] = 2


_DEFAULTS = CodeModeSettings()

_DESCRIPTION = """Run a short Python program that calls this server's tools, and get back only its result.

Use it to chain several tool calls, or to filter and combine their results, in one step. Find the
tools and their inputSchema with search_tools first. In the program:
- `await call_tool("name", {"arg": value})` calls a tool and returns its structured result (a dict),
  or its text when it has none; a tool that fails raises RuntimeError (you may catch it), an unknown
  tool ValueError, a tool you lack the scopes for PermissionError.
- `print(...)` output comes back too.
- The value of the program is its last expression, or the variable `result` if it sets one.
The sandbox is a subset of Python: no files, network, environment or imports beyond json, math, re,
datetime, asyncio and a few more; it has limits on time, memory and the number of tool calls."""

_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string", "minLength": 1, "description": "The Python program to run"}},
    "required": ["code"],
    "additionalProperties": False,
}
_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "result": {"description": "The program's value (its `result` variable or its last expression)"},
        "output": {"type": "string", "description": "What it printed"},
        "calls": {"type": "integer", "description": "The tool calls it made"},
    },
    "required": ["output", "calls"],
}


class CodeModePlugin:
    """The plugin object (registered as ``codemode``): settings, the sandbox pool, the ``execute`` tool."""

    def __init__(self) -> None:
        self.defaults = Limits.from_settings(_DEFAULTS.model_dump())
        self.limits: dict[str, Limits] = {}
        self.workers = _DEFAULTS.workers
        self.runs_per_principal = _DEFAULTS.runs_per_principal
        self.sandbox: Sandbox | None = None
        self._running: dict[str, int] = {}

    # -- hooks --------------------------------------------------------------------------------

    @mcphost.hookimpl
    def mcphost_settings(self) -> type[CodeModeSettings]:
        return CodeModeSettings

    @mcphost.hookimpl
    def mcphost_unconfigured(self, host: mcphost.Host) -> str | None:
        """Dormant (no ``execute`` anywhere) until an endpoint serves code mode."""
        if any(settings.discovery == "code" for settings in host.config.endpoints.values()):
            return None
        return 'discovery = "code"'  # in some [endpoints.NAME]

    @mcphost.hookimpl
    def mcphost_tools(self, host: mcphost.Host) -> list[mcphost.Tool]:
        settings = host.settings(CodeModeSettings)
        section = settings.model_dump()
        self.defaults = Limits.from_settings(section)
        self.workers = settings.workers
        self.runs_per_principal = settings.runs_per_principal
        self.limits = {endpoint: Limits.from_settings({**section, **served.table.get("code", {})})
                       for endpoint, served in host.config.endpoints.items() if served.discovery == "code"}
        return [self._tool()]

    @mcphost.hookimpl
    async def mcphost_shutdown(self, host: mcphost.Host) -> None:
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            await sandbox.close()

    # -- the tool -----------------------------------------------------------------------------

    def _tool(self) -> mcphost.Tool:
        plugin = self

        @mcphost.tool(name=CODE_TOOL, title="Run a program that calls tools", description=_DESCRIPTION,
                      input_schema=_INPUT_SCHEMA, output_schema=_OUTPUT_SCHEMA, resumable=True,
                      meta={CODE_META: True},
                      annotations={"openWorldHint": True})
        async def execute(code: str, ctx: Context) -> mcphost.ToolResult:
            return await plugin.execute(code, ctx)

        return execute

    def limits_for(self, endpoint: str | None) -> Limits:
        """The limits of programs run on ``endpoint`` (None: ``/mcp``, the plugin's defaults)."""
        return self.limits.get(endpoint, self.defaults) if endpoint is not None else self.defaults

    async def execute(self, code: str, ctx: Context) -> mcphost.ToolResult:
        """Run ``code`` for the caller behind ``ctx`` (one run; its inner calls are ctx's calls)."""
        who = _principal_key(ctx)
        if self._running.get(who, 0) >= self.runs_per_principal:
            return _error(f"Limit reached: {self.runs_per_principal} programs of yours are running already "
                          "([plugins.codemode] runs_per_principal); wait for one to end")
        self._running[who] = self._running.get(who, 0) + 1
        try:
            if self.sandbox is None:
                from mcphost_codemode.sandbox import Sandbox

                self.sandbox = Sandbox(self.workers)
            limits = self.limits_for(ctx.session.endpoint)
            outcome = await self.sandbox.run(code, limits, Calls(ctx, limits))
        finally:
            left = self._running[who] - 1
            if left:
                self._running[who] = left
            else:
                del self._running[who]
        structured: dict[str, Any] = {"output": outcome.output, "calls": outcome.calls}
        if outcome.error is not None:
            text = outcome.error + (f"\n\nPrinted before it stopped:\n{outcome.output}" if outcome.output else "")
            return mcphost.ToolResult(content=[_block(text)], is_error=True)
        content = [_block(outcome.result_text)]
        if outcome.output:
            content.append(_block(f"Printed:\n{outcome.output}"))
        if outcome.jsonable:
            structured["result"] = outcome.result
        return mcphost.ToolResult(content=content, structured=structured)


class Calls:
    """The tool calls one program makes: counted against ``max_calls``, each reported as progress of
    ``execute`` and run as the caller's own call (``ctx.call_tool``)."""

    def __init__(self, ctx: Context, limits: Limits) -> None:
        self.ctx = ctx
        self.limits = limits
        self.calls = 0
        self.running: set[asyncio.Task[Any]] = set()

    async def call_tool(self, name: Any, arguments: Any = None) -> Any:
        if not isinstance(name, str) or not name:
            raise TypeError("call_tool(name, arguments): name must be a tool's name (a string)")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise TypeError(f"call_tool({name!r}, arguments): arguments must be a dict")
        if name == CODE_TOOL:
            raise ValueError(f"Unknown tool: {name} (a program cannot run another program)")
        if self.calls >= self.limits.max_calls:
            raise RuntimeError(f"Limit reached: a program may make {self.limits.max_calls} tool calls (max_calls)")
        self.calls += 1
        await self.ctx.progress(self.calls, None, f"call {self.calls}: {name}")
        task = asyncio.ensure_future(self.ctx.call_tool(name, dict(arguments)))
        self.running.add(task)
        try:
            result = await asyncio.shield(task)  # cancelled with the program below, not by the sandbox
        except mcphost.McpError as exc:  # an unknown tool (outside the endpoint or the caller's view)
            raise ValueError(exc.message) from None
        except mcphost.Refused as exc:  # a tool the caller sees but lacks the scopes for
            raise PermissionError(str(exc)) from None
        finally:
            self.running.discard(task)
        if result.get("isError"):
            raise RuntimeError(f"Tool {name!r} failed: {_text(result) or 'no details'}")
        structured = result.get("structuredContent")
        return structured if structured is not None else _text(result)

    def cancel(self) -> None:
        """The program was stopped: stop the calls it is waiting on."""
        for task in self.running:
            task.cancel()


def _text(result: Mapping[str, Any]) -> str:
    return "\n".join(block.get("text", "") for block in result.get("content") or ()
                     if isinstance(block, Mapping) and block.get("type") == "text")


def _principal_key(ctx: Context) -> str:
    """Whose allowance a run takes: the principal's; anonymous callers share one."""
    principal = ctx.principal
    return "" if principal is None else f"{principal.issuer or ''} {principal.subject}"


def _error(message: str) -> mcphost.ToolResult:
    return mcphost.ToolResult(content=[_block(message)], is_error=True)



def _block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}
