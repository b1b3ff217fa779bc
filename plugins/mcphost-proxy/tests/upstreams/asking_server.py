"""A session-era MCP server over stdio, written without an SDK, whose tool ``ask`` asks its client a
question (elicitation) and ignores ``notifications/cancelled``: a question it asked stays pending
until it is answered, as with servers that do not withdraw their questions when a call is cancelled.

Each answer it gets is appended to the file ``ASK_ANSWERS`` names (``<action> <content>``; an error
answer is ``error null``), and the call answers ``answered <action> <content>``. Any number of calls
may be in flight. With ``ASK_LATE`` (seconds) it asks that long after the call arrives, carrying the
call's ``_meta.traceparent`` back as the official Python SDK server does.
"""

from __future__ import annotations

import json
import os
import sys
import threading

ANSWERS = os.environ["ASK_ANSWERS"]
LATE = float(os.environ.get("ASK_LATE", "0"))
out = sys.stdout
_lock = threading.Lock()


def send(message: dict) -> None:
    with _lock:
        out.write(json.dumps(message) + "\n")
        out.flush()


asked: dict[str, object] = {}  # question id -> the id of the call that asked it
serial = 0
for line in sys.stdin:
    message = json.loads(line)
    method, message_id = message.get("method"), message.get("id")
    if method is None and message_id in asked:  # an answer to one of our questions
        result = message.get("result") or {"action": "error"}
        text = f"{result.get('action')} {json.dumps(result.get('content'))}"
        with open(ANSWERS, "a", encoding="utf-8") as file:
            file.write(text + "\n")
        send({"jsonrpc": "2.0", "id": asked.pop(message_id),
              "result": {"content": [{"type": "text", "text": f"answered {text}"}]}})
        continue
    if message_id is None:
        continue  # notifications, notifications/cancelled included: ignored
    params = message.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": message_id, "result": {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"), "capabilities": {"tools": {}},
            "serverInfo": {"name": "asking", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": message_id, "result": {"tools": [
            {"name": "ask", "inputSchema": {"type": "object", "properties": {}}}]}})
    elif method == "tools/call":
        serial += 1
        question = f"q{serial}"
        asked[question] = message_id
        ask = {"jsonrpc": "2.0", "id": question, "method": "elicitation/create", "params": {
            "mode": "form", "message": "What is your name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}
        if LATE:
            trace = (params.get("_meta") or {}).get("traceparent")
            if trace:
                ask["params"]["_meta"] = {"traceparent": trace}
            threading.Timer(LATE, send, (ask,)).start()
        else:
            send(ask)
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": message_id, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": message_id, "error": {"code": -32601, "message": f"no {method}"}})
