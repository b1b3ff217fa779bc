"""A generated upstream for bench_gateway.py: N tools, each with its own input schema, over stdio.

``python gateway_upstream.py sdk N``: the official Python SDK's ``MCPServer`` with N generated tools.
``python gateway_upstream.py raw N``: the same list spoken by a few lines of JSON-RPC (no SDK
import, so 50 of them start in a moment on a small machine).
``python gateway_upstream.py raw-http N PORT``: the raw one over Streamable HTTP with JSON bodies.
Both have a ``bump`` tool that adds one tool and sends ``notifications/tools/list_changed``; the raw
one also answers a call of ``big`` (argument ``mib``, not listed) with one reply line that long, and
of ``flood`` (argument ``count``) with that many log notifications before its reply.
"""

# No ``from __future__ import annotations``: the SDK reads the generated tools' annotations at runtime.
import json
import sys


def schema(i: int) -> dict:
    return {"type": "object", "properties": {f"x{i}": {"type": "integer", "description": f"argument of t{i}"},
                                             "note": {"type": "string", "maxLength": 100 + i}},
            "required": [f"x{i}"]}


def run_sdk(count: int) -> None:
    from mcp.server.mcpserver import Context, MCPServer

    server = MCPServer("gateway-upstream")
    namespace: dict = {}
    for i in range(count):
        exec(f"def t{i}(x{i}: int, note: str = '') -> int:\n    '''Tool {i} of the generated upstream.'''\n"
             f"    return x{i}\n", namespace)
        server.add_tool(namespace[f"t{i}"], name=f"t{i}")
    bumps = [0]

    @server.tool()
    async def bump(ctx: Context) -> str:
        """Add one tool and announce the change."""
        bumps[0] += 1
        server.add_tool(lambda: "new", name=f"added{bumps[0]}")
        await ctx.session.send_tool_list_changed()
        return f"bumped {bumps[0]}"

    server.run("stdio")


def listing(count: int) -> list:
    tools = [{"name": f"t{i}", "description": f"Tool {i} of the generated upstream.", "inputSchema": schema(i)}
             for i in range(count)]
    tools.append({"name": "bump", "description": "Add one tool and announce the change.",
                  "inputSchema": {"type": "object", "properties": {}}})
    return tools


def answer(tools: list, method: str | None, params: dict) -> dict | None:
    """What both raw upstreams answer to ``method``: initialize, the listing, ``bump`` (one tool
    more) and an echo for any other tool; None for a method neither serves."""
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "gateway-upstream", "version": "1"}}
    if method == "tools/list":
        return {"tools": tools}
    if method == "tools/call" and params.get("name") == "bump":
        tools.append({"name": f"added{len(tools)}", "inputSchema": {"type": "object", "properties": {}}})
        return {"content": [{"type": "text", "text": "bumped"}]}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": json.dumps(params.get("arguments"))}]}
    return None


def run_raw_http(count: int, port: int) -> None:
    """The raw upstream over Streamable HTTP (session era, every reply a JSON body): tools/list is one
    body of all ``count`` tools; ``bump`` adds a tool (no notification: the caller lists again)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    tools = listing(count)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # no standalone stream
            self.send_response(405)
            self.send_header("content-length", "0")
            self.end_headers()

        do_DELETE = do_GET

        def do_POST(self) -> None:
            message = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            request_id, method = message.get("id"), message.get("method")
            if request_id is None:
                self.send_response(202)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            result = answer(tools, method, message.get("params") or {})
            if result is None:
                body = json.dumps({"jsonrpc": "2.0", "id": request_id,
                                   "error": {"code": -32601, "message": "Method not found"}}).encode()
                self._reply(body)
                return
            self._reply(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode())

        def _reply(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("mcp-session-id", "s1")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def run_raw(count: int) -> None:
    tools = listing(count)
    out = sys.stdout

    def send(message: dict) -> None:
        out.write(json.dumps(message) + "\n")
        out.flush()

    for line in sys.stdin:
        message = json.loads(line)
        request_id, method = message.get("id"), message.get("method")
        if request_id is None:
            continue
        params = message.get("params") or {}
        name = params.get("name") if method == "tools/call" else None
        if name == "bump":
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        if name == "big":
            # One reply line of ``mib`` MiB, written a MiB at a time.
            size = int(float((params.get("arguments") or {}).get("mib", 1)) * 1024 * 1024)
            out.write(f'{{"jsonrpc": "2.0", "id": {json.dumps(request_id)}, "result": {{"content": '
                      '[{"type": "text", "text": "')
            chunk = "x" * (1024 * 1024)
            while size > 0:
                out.write(chunk[:size])
                size -= len(chunk)
            out.write('"}]}}\n')
            out.flush()
            continue
        if name == "flood":
            # ``count`` log notifications, then the reply.
            note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                               "params": {"level": "info", "logger": "flood", "data": "x" * 64}}) + "\n"
            out.write(note * int((params.get("arguments") or {}).get("count", 1)))
            result: dict | None = {"content": [{"type": "text", "text": "flooded"}]}
        else:
            result = answer(tools, method, params)
        send({"jsonrpc": "2.0", "id": request_id, "result": result if result is not None else {}})


if __name__ == "__main__":
    if sys.argv[1] == "raw-http":
        run_raw_http(int(sys.argv[2]), int(sys.argv[3]))
    else:
        (run_sdk if sys.argv[1] == "sdk" else run_raw)(int(sys.argv[2]))
