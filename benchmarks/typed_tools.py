"""The benchmark tools, written once and served by mcphost, the official SDK and FastMCP alike.

``echo(text)`` and ``plan_trip``, a tool with seven typed parameters: a string, a bounded integer,
an enum, a list of strings, a nested object, an optional boolean and a float. Echo hides what
argument validation costs; ``plan_trip`` shows it. The functions are plain FastMCP-style functions
(``Annotated[..., Field(...)]``, a pydantic model for the nested object), so every server derives
its schema and validates from the same source. Both are ``async def``, as a tool that does no
blocking work is written: a plain ``def`` tool runs in mcphost's bounded thread pool (so one that
blocks never freezes the server), which the SDK does not do (it calls a ``def`` tool on its event
loop); the thread hop cost mcphost about 100 us of server CPU per call (docs/performance.md).

    python benchmarks/typed_tools.py mcphost --port 8123    # mcphost serve with these tools (plugin "typed")
    python benchmarks/typed_tools.py sdk --port 8124        # mcp 2.3.0 MCPServer, stateless, JSON replies, uvicorn
    python benchmarks/typed_tools.py sdk-session --port 8126   # the same, its default mode: sessions, SSE replies
    python benchmarks/typed_tools.py sdk-workers --port 8128 --workers 4   # sdk on uvicorn workers, TCP_NODELAY patched
    /tmp/fastmcp-venv/bin/python benchmarks/typed_tools.py fastmcp --port 8125   # FastMCP (its own venv)

FastMCP pins an ``mcp`` older than 2.3.0, so it lives in its own virtual environment:
``python3 -m venv /tmp/fastmcp-venv && /tmp/fastmcp-venv/bin/pip install fastmcp``.
"""

from __future__ import annotations

import argparse
import enum
import sys
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field


class Cabin(enum.Enum):
    ECONOMY = "economy"
    BUSINESS = "business"
    FIRST = "first"


class Traveller(BaseModel):
    name: Annotated[str, Field(min_length=1, max_length=100)]
    age: Annotated[int, Field(ge=0, le=130)]


async def echo(text: str) -> str:
    """Echo the text back."""
    return text


async def plan_trip(
    destination: Annotated[str, Field(min_length=1, max_length=100, description="Where to")],
    nights: Annotated[int, Field(ge=1, le=30, description="How many nights")],
    cabin: Cabin,
    activities: Annotated[list[str], Field(max_length=20, description="What to do there")],
    traveller: Traveller,
    insured: bool | None = None,
    budget: Annotated[float, Field(gt=0, description="Budget in euros")] = 1000.0,
) -> str:
    """Plan a trip (seven typed parameters)."""
    return (f"{traveller.name}: {nights} nights in {destination}, {cabin.value}, "
            f"{len(activities)} activities, insured={insured}, budget={budget:g}")


PLAN_TRIP_ARGUMENTS: dict[str, Any] = {
    "destination": "Lisbon", "nights": 4, "cabin": "business", "activities": ["tram", "fado", "pasteis"],
    "traveller": {"name": "Ada", "age": 36}, "insured": True, "budget": 1500.5,
}
PLAN_TRIP_TEXT = "Ada: 4 nights in Lisbon, business, 3 activities, insured=True, budget=1500.5"


# -- servers ----------------------------------------------------------------------------------------------

def serve_mcphost(host: str, port: int) -> None:
    """``mcphost serve`` with a plugin "typed" holding these tools, registered next to the installed ones."""
    import mcphost
    from mcphost import cli
    from mcphost.host import Host

    class Typed:
        @mcphost.hookimpl
        def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
            return [mcphost.tool(echo), mcphost.tool(plan_trip)]

    original = Host.__init__

    def with_typed(self: Host, config: Any = None, *, plugins: Any = (), **options: Any) -> None:
        original(self, config, plugins=[*plugins, ("typed", Typed())], **options)

    Host.__init__ = with_typed  # type: ignore[method-assign]
    sys.argv = ["mcphost", "serve", "--host", host, "--port", str(port)]
    cli.main()


def serve_sdk(host: str, port: int) -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench", log_level="WARNING")
    server.tool()(echo)
    server.tool()(plan_trip)
    server.run("streamable-http", host=host, port=port, stateless_http=True, json_response=True)


def serve_sdk_session(host: str, port: int) -> None:
    """The SDK's default streamable HTTP: sessions (initialize, Mcp-Session-Id), SSE replies."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench", log_level="WARNING")
    server.tool()(echo)
    server.tool()(plan_trip)
    server.run("streamable-http", host=host, port=port)


def _nodelay_on_accepted_sockets() -> None:
    """Set TCP_NODELAY on every connection uvicorn accepts. Its multi-worker mode hands the
    listening socket to spawned workers, and the connections they accept miss the TCP_NODELAY that
    asyncio sets on its own sockets: each reply then waits ~40 ms for the client's delayed ACK (an
    open uvicorn issue). Patched here so that the SDK's multi-worker figures are fair."""
    import socket

    from uvicorn.protocols.http import h11_impl

    protocols: list[Any] = [h11_impl.H11Protocol]
    try:
        from uvicorn.protocols.http import httptools_impl
        protocols.append(httptools_impl.HttpToolsProtocol)
    except ImportError:
        pass
    for protocol in protocols:
        made = protocol.connection_made

        def connection_made(self: Any, transport: Any, made: Any = made) -> None:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            made(self, transport)

        protocol.connection_made = connection_made


def sdk_stateless_app() -> Any:
    """The ``sdk`` server as an ASGI app factory for uvicorn's workers (TCP_NODELAY patched in)."""
    from mcp.server.mcpserver import MCPServer

    _nodelay_on_accepted_sockets()
    server = MCPServer("bench", log_level="WARNING")
    server.tool()(echo)
    server.tool()(plan_trip)
    return server.streamable_http_app(stateless_http=True, json_response=True)


def serve_sdk_workers(host: str, port: int, workers: int) -> None:
    """``sdk`` on ``workers`` uvicorn worker processes, TCP_NODELAY patched (see above)."""
    import uvicorn

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # the workers import this module by name
    uvicorn.run("typed_tools:sdk_stateless_app", factory=True, host=host, port=port, workers=workers,
                log_level="warning")


def serve_fastmcp(host: str, port: int) -> None:
    from fastmcp import FastMCP  # type: ignore[import-not-found]

    server = FastMCP("bench")
    server.tool(echo)
    server.tool(plan_trip)
    server.run(transport="http", host=host, port=port, stateless_http=True, json_response=True,
               log_level="warning", show_banner=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("server", choices=["mcphost", "sdk", "sdk-session", "sdk-workers", "fastmcp"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1, help="sdk-workers: uvicorn worker processes")
    args = parser.parse_args()
    if args.server == "sdk-workers":
        serve_sdk_workers(args.host, args.port, args.workers)
        return
    serve = {"mcphost": serve_mcphost, "sdk": serve_sdk, "sdk-session": serve_sdk_session, "fastmcp": serve_fastmcp}
    serve[args.server](args.host, args.port)


if __name__ == "__main__":
    main()
