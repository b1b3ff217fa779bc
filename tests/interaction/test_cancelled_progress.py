"""After a client cancels a request, nothing more of that request reaches it (issue #35).

A session-era client reads the first progress event of a slow call, leaves its stream (in this era
leaving is no cancel: the call runs on, its progress stored for a resume), then cancels the call
with ``notifications/cancelled`` and resumes the stream with its Last-Event-ID. The progress stored
meanwhile is the cancelled request's: a client that forgot its token reports each as "a progress
notification for an unknown token" (the TypeScript SDK does), so the resume writes none of it and,
with no reply to come, is answered 204. Real ``mcphost serve`` over loopback HTTP.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx

from tests.support.http_support import HttpServer, sse_events


def test_a_resume_after_a_cancel_replays_none_of_the_cancelled_calls_progress(
        http_server: Callable[..., HttpServer]) -> None:
    server = http_server(plugins="demo")
    with httpx.Client(timeout=30) as client:
        session_id = server.initialize(client)
        headers = server.headers(session_id, mcp_protocol_version="2025-11-25")
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "progress", "arguments": {"steps": 40, "delay_ms": 50},
                           "_meta": {"progressToken": "slow"}}}
        first = None
        with client.stream("POST", server.url, headers=headers, content=json.dumps(call)) as response:
            assert response.status_code == 200
            block: list[str] = []
            for line in response.iter_lines():
                if line:
                    block.append(line)
                    continue
                event = sse_events("\n".join(block) + "\n\n")
                block = []
                if event and "progress" in event[0].get("data", ""):
                    first = event[0]["id"]
                    break
        assert first is not None
        time.sleep(0.6)  # the call runs on: about ten more progress events are stored, unread
        cancelled = client.post(server.url, headers=headers, content=json.dumps({
            "jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}))
        assert cancelled.status_code == 202, cancelled.text
        time.sleep(0.3)  # the call has ended (no reply: it was cancelled)
        resumed = client.get(server.url, headers={**headers, "accept": "text/event-stream",
                                                  "last-event-id": first})
        messages = [json.loads(e["data"]) for e in sse_events(resumed.text) if e.get("data")]
        print(f"\nresume after the cancel: {resumed.status_code}, {len(messages)} messages")
        assert [m for m in messages if m.get("method") == "notifications/progress"] == [], messages
        assert resumed.status_code == 204, resumed.text
        # The session serves on.
        ping = client.post(server.url, headers=headers, json={"jsonrpc": "2.0", "id": 8, "method": "ping"})
        assert ping.status_code == 200 and '"result"' in ping.text
