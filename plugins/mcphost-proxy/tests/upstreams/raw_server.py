"""A minimal session-era MCP server over stdio written without an SDK, so it can misbehave on purpose.

``RAW_TOOLS`` names a JSON file with the tools it lists (any names, sizes). Its tools answer
``called NAME``, except ``big`` (argument ``mib``), whose result line is that many MiB long, and
``flood`` (argument ``count``), which first sends that many log notifications, and ``later``, which
sends one log notification 0.3 s after its reply (outside any call), and ``announce``, which sends
``notifications/tools/list_changed`` after its reply. The ``RAW_TOOLS`` file is read again at each
tools/list (a test rewrites it, then calls ``announce``: a "rug pull"). ``RAW_PAGES=N`` lists N pages
of 1 000 generated tools instead (each page asked for is recorded in ``RAW_PAGE_LOG``, a file).
"""

from __future__ import annotations

import json
import os
import sys
import threading

TOOLS = json.loads(open(os.environ["RAW_TOOLS"], encoding="utf-8").read()) if os.environ.get("RAW_TOOLS") else [
    {"name": "echo", "inputSchema": {"type": "object", "properties": {}}}]
out = sys.stdout.buffer
#: With RAW_SUBSCRIBES (a file name): it serves the resource raw://status, whose subscriptions it
#: records in that file, and sends an update 0.2 s after each subscribe.
SUBSCRIBES = os.environ.get("RAW_SUBSCRIBES")
#: With RAW_ROOTS (a file name): once initialized, it asks its client for roots (as many servers do
#: at start, outside any call) and writes the answer it got into that file.
ROOTS = os.environ.get("RAW_ROOTS")
#: With RAW_CAPABILITIES (JSON): declared at initialize beside its own (tasks, extensions, ...).
EXTRA_CAPABILITIES = json.loads(os.environ.get("RAW_CAPABILITIES") or "{}")


_lock = threading.Lock()


def send(message: dict) -> None:
    with _lock:
        out.write(json.dumps(message).encode() + b"\n")
        out.flush()


def reply(request_id, result: dict) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


for line in sys.stdin.buffer:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if method is None:  # a response: to the roots/list asked at start
        if ROOTS and request_id == "roots-at-start":
            with open(ROOTS, "w", encoding="utf-8") as file:
                file.write(json.dumps(message))
        continue
    if method == "notifications/initialized" and ROOTS:
        send({"jsonrpc": "2.0", "id": "roots-at-start", "method": "roots/list"})
    if request_id is None:
        continue  # notifications
    params = message.get("params") or {}
    if method == "initialize":
        capabilities: dict = {"tools": {"listChanged": True}, "logging": {}}
        if SUBSCRIBES:
            capabilities["resources"] = {"subscribe": True}
        capabilities.update(EXTRA_CAPABILITIES)
        reply(request_id, {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                           "capabilities": capabilities, "serverInfo": {"name": "raw", "version": "1"}})
    elif method == "resources/list":
        reply(request_id, {"resources": [{"uri": "raw://status", "name": "status"}]})
    elif method == "resources/templates/list":
        reply(request_id, {"resourceTemplates": []})
    elif method == "resources/read":
        reply(request_id, {"contents": [{"uri": params.get("uri"), "text": "ok"}]})
    elif method in ("resources/subscribe", "resources/unsubscribe"):
        with open(SUBSCRIBES, "a", encoding="utf-8") as file:
            file.write(f"{method} {params.get('uri')}\n")
        reply(request_id, {})
        if method == "resources/subscribe":  # an update soon after
            update = {"jsonrpc": "2.0", "method": "notifications/resources/updated",
                      "params": {"uri": params.get("uri")}}
            threading.Timer(0.2, send, (update,)).start()
    elif method == "tools/list" and os.environ.get("RAW_PAGES"):
        page = int(params.get("cursor") or "0")
        if os.environ.get("RAW_PAGE_LOG"):
            with open(os.environ["RAW_PAGE_LOG"], "a", encoding="utf-8") as file:
                file.write(f"{page}\n")
        tools = [{"name": f"p{page}_t{i}", "description": f"generated tool {i} of page {page}",
                  "inputSchema": {"type": "object", "properties": {}}} for i in range(1000)]
        more = {"nextCursor": str(page + 1)} if page + 1 < int(os.environ["RAW_PAGES"]) else {}
        reply(request_id, {"tools": tools, **more})
    elif method == "tools/list":
        if os.environ.get("RAW_TOOLS"):
            TOOLS = json.loads(open(os.environ["RAW_TOOLS"], encoding="utf-8").read())
        reply(request_id, {"tools": TOOLS})
    elif method == "tools/call":
        name = params.get("name")
        arguments = params.get("arguments") or {}
        if name == "big":
            size = int(float(arguments.get("mib", 1)) * 1024 * 1024)
            head = json.dumps({"jsonrpc": "2.0", "id": request_id,
                               "result": {"content": [{"type": "text", "text": ""}]}}).encode()
            cut = head.index(b'"text": ""') + len(b'"text": "')
            chunk = b"x" * (1024 * 1024)
            out.write(head[:cut])
            while size > 0:
                out.write(chunk[:size])
                size -= len(chunk)
            out.write(head[cut:] + b"\n")
            out.flush()
            continue
        if name == "announce":  # the tools changed (the test rewrote RAW_TOOLS): say so after the reply
            note = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
            threading.Timer(0.05, send, (note,)).start()
        if name == "later":  # a log message 0.3 s after the reply: outside any call
            note = {"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "warning", "logger": "later", "data": "after the call"}}
            threading.Timer(0.3, send, (note,)).start()
        if name == "flood":
            note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                               "params": {"level": "info", "logger": "flood", "data": "x" * 64}}).encode() + b"\n"
            out.write(note * int(arguments.get("count", 1)))
            out.flush()
        reply(request_id, {"content": [{"type": "text", "text": f"called {name}"}]})
    elif method == "logging/setLevel" or method == "ping":
        reply(request_id, {})
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no {method}"}})
