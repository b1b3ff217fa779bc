"""The baseline for bench_http.py: a bare Quart route on Hypercorn that parses and answers the JSON-RPC body.

One route, ``POST /mcp``: decode the JSON-RPC request, take ``params.arguments.text`` and answer
the same CallToolResult mcphost's demo ``echo`` tool gives, as one JSON body. No sessions, no
validation, no SSE: it is the floor of what Quart on Hypercorn costs per request, which is what
the "Performance budget" in ARCHITECTURE.md compares mcphost against.

Served like ``mcphost serve`` serves (mcphost/serve.py ``hypercorn_config``): one worker, the
asyncio loop, no access log, no Server header, keep-alive timeout 5 s. JSON is handled by orjson,
as in mcphost, so the comparison is about the framework work and not the encoder;
``--stdlib-json`` uses Quart's own ``get_json``/dict return instead.

    python benchmarks/raw_quart_app.py --port 8001 [--host 127.0.0.1] [--stdlib-json]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from typing import Any

import orjson
from hypercorn.asyncio import serve
from hypercorn.config import Config
from quart import Quart, Response, request


def create_app(stdlib_json: bool = False) -> Quart:
    app = Quart("raw_quart_app")

    if stdlib_json:
        @app.post("/mcp")
        async def mcp_stdlib() -> Any:
            message = await request.get_json(force=True)
            text = message["params"]["arguments"]["text"]
            return {"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": text}]}}
    else:
        @app.post("/mcp")
        async def mcp() -> Response:
            message = orjson.loads(await request.get_data())
            text = message["params"]["arguments"]["text"]
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": text}]}}
            return Response(orjson.dumps(reply), content_type="application/json")

    return app


def hypercorn_config(host: str, port: int) -> Config:
    """The settings mcphost.serve.hypercorn_config uses, repeated here so the baseline does not import mcphost."""
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.include_server_header = False
    config.graceful_timeout = 30.0
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.keep_alive_timeout = 5
    return config


async def main_async(host: str, port: int, stdlib_json: bool) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await serve(create_app(stdlib_json), hypercorn_config(host, port), shutdown_trigger=stop.wait)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--stdlib-json", action="store_true", help="Quart's get_json and dict return instead of orjson")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main_async(args.host, args.port, args.stdlib_json))


if __name__ == "__main__":
    main()
