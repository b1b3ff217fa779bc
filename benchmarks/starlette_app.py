"""The ceiling for compare.py: a bare Starlette route on Hypercorn that parses the body and answers.

One route, ``POST /mcp``: decode the JSON-RPC request with orjson and answer the echo tool's
CallToolResult (``params.arguments.text``, ``resultType: "complete"``) as one JSON body. No MCP
work at all (no validation, no sessions, no headers checked), so no MCP server on this stack can
be faster: it is the "bare Starlette route on the same Hypercorn" of the performance budget.
With ``--raw`` the same answer comes from a bare ASGI callable with no framework at all: the
floor of the stack, Hypercorn's own work per request (compare.py's ``asgi`` target).

Served with the settings ``raw_quart_app.py`` uses (those of ``mcphost serve``: one worker, the
asyncio loop, no access log, no Server header).

    python benchmarks/starlette_app.py --port 8002 [--host 127.0.0.1] [--raw]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import orjson
from hypercorn.asyncio import serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parent))

from raw_quart_app import hypercorn_config


async def mcp(request: Request) -> Response:
    message = orjson.loads(await request.body())
    text = message["params"]["arguments"]["text"]
    reply = {"jsonrpc": "2.0", "id": message["id"],
             "result": {"content": [{"type": "text", "text": text}], "resultType": "complete"}}
    return Response(orjson.dumps(reply), media_type="application/json")


def create_app() -> Starlette:
    return Starlette(routes=[Route("/mcp", mcp, methods=["POST"])])


async def raw_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The same answer from a bare ASGI callable (no framework at all): the floor of the stack."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    request = orjson.loads(body)
    text = request["params"]["arguments"]["text"]
    reply = orjson.dumps({"jsonrpc": "2.0", "id": request["id"],
                          "result": {"content": [{"type": "text", "text": text}], "resultType": "complete"}})
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(reply)).encode())]})
    await send({"type": "http.response.body", "body": reply})


async def main_async(host: str, port: int, raw: bool = False) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await serve(raw_app if raw else create_app(), hypercorn_config(host, port), shutdown_trigger=stop.wait)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8002)
    parser.add_argument("--raw", action="store_true", help="serve the bare ASGI callable instead of Starlette")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main_async(args.host, args.port, args.raw))


if __name__ == "__main__":
    main()
