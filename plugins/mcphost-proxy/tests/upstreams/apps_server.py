"""A minimal session-era MCP server over stdio (no SDK) offering an MCP App (SEP-1865), as two real
servers might: the same ``ui://dashboard/view.html`` path whatever ``APPS_NAME`` it is started with.

``show`` opens the app (``_meta.ui.resourceUri``; ``show_legacy`` names it with the legacy flat
``ui/resourceUri`` key), ``refresh`` is for the app alone (``visibility: ["app"]``), and the resource
carries CSP metadata on its listing and on its contents. Its page and its tools' replies name
``APPS_NAME``, so a test can tell which upstream answered.
"""

from __future__ import annotations

import json
import os
import sys

NAME = os.environ.get("APPS_NAME", "apps")
VIEW = "ui://dashboard/view.html"
CSP = {"connectDomains": [f"https://api.{NAME}.example"], "resourceDomains": ["https://cdn.example"]}
TOOLS = [
    {"name": "show", "description": f"Show the {NAME} dashboard", "inputSchema": {"type": "object"},
     "_meta": {"ui": {"resourceUri": VIEW}}},
    {"name": "show_legacy", "description": f"Show the {NAME} dashboard (legacy key)",
     "inputSchema": {"type": "object"}, "_meta": {"ui/resourceUri": VIEW}},
    {"name": "refresh", "description": f"Refresh the {NAME} dashboard's data", "inputSchema": {"type": "object"},
     "_meta": {"ui": {"resourceUri": VIEW, "visibility": ["app"]}}},
]
RESOURCE = {"uri": VIEW, "name": "dashboard", "mimeType": "text/html;profile=mcp-app",
            "_meta": {"ui": {"csp": CSP, "prefersBorder": True}}}


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if method is None or request_id is None:
        continue
    params = message.get("params") or {}
    result: dict | None = None
    if method == "initialize":
        result = {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {}, "resources": {}, "extensions": {"io.modelcontextprotocol/ui": {}}},
                  "serverInfo": {"name": NAME, "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": f"{NAME}: {params.get('name')}"}]}
    elif method == "resources/list":
        result = {"resources": [RESOURCE]}
    elif method == "resources/templates/list":
        result = {"resourceTemplates": []}
    elif method == "resources/read" and params.get("uri") == VIEW:
        result = {"contents": [{"uri": VIEW, "mimeType": "text/html;profile=mcp-app",
                                "text": f"<html><body>{NAME}</body></html>", "_meta": {"ui": {"csp": CSP}}}]}
    elif method in ("ping", "logging/setLevel"):
        result = {}
    if result is None:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": f"no {method} {params}"}})
    else:
        send({"jsonrpc": "2.0", "id": request_id, "result": result})
