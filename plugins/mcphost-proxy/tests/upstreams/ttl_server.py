"""A minimal 2026-07-28 MCP server over stdio (no SDK) whose tool list changes without telling.

Each ``tools/list`` answers one tool, ``v1``, ``v2``, ... (the count of lists so far), with
``ttlMs`` = ``TTL_MS``: a client that honours the hint lists again when it lapses; nothing else would
show it the new tool (it sends no list_changed, and has no ``subscriptions/listen``).
"""

from __future__ import annotations

import json
import os
import sys

TTL_MS = int(os.environ.get("TTL_MS", "1000"))
INFO = {"io.modelcontextprotocol/serverInfo": {"name": "ttl", "version": "1"}}
listed = 0


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if method is None or request_id is None:
        continue
    result: dict | None = None
    if method == "server/discover":
        result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "resultType": "complete",
                  "ttlMs": 0, "cacheScope": "public", "_meta": INFO}
    elif method == "tools/list":
        listed += 1
        result = {"tools": [{"name": f"v{listed}", "inputSchema": {"type": "object"}}], "resultType": "complete",
                  "ttlMs": TTL_MS, "cacheScope": "public", "_meta": INFO}
    if result is None:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"Method not found: {method}"}})
    else:
        send({"jsonrpc": "2.0", "id": request_id, "result": result})
