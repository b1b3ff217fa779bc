"""What the official MCP Python SDK client, and raw HTTP, do on Streamable HTTP only, against a real
``mcphost serve``: a subscription's updates on the standalone GET stream, resumption after the server
or the client closes a stream, and the end of a session. What the SDK does on every transport is in
``test_python_sdk.py``.

The SDK sessions run over an ``httpx2`` client whose transport records every exchange, so the
session id is known and, afterwards, every JSON-RPC message the server sent (SSE events and JSON
bodies alike) is validated against the official 2025-11-25 schema (``tests/support/wire.py``). The
resumption and session-end tests use raw httpx for exact control of the connection.
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import httpx
import pytest

from tests.support.http_support import sse_events, sse_messages
from tests.support.sdk_support import ClientSide, RecordingTransport, recorded_client, text_of
from tests.support.stdio_support import LATEST, validate_wire

WATCHED = "test://watched-resource"
FAST_WATCH = "[plugins.conformance]\nwatched_interval_seconds = 0.2\n"

# logging/setLevel and ping are deprecated in 2026-07-28; these sessions are 2025-era on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")


# -- the SDK client ------------------------------------------------------------------------------------

async def test_python_sdk_over_http_resource_subscription_receives_updates(http_server):
    server = http_server(plugins="demo,conformance", config=FAST_WATCH)
    recorder, side = RecordingTransport(), ClientSide()
    http, client = recorded_client(server.url, recorder, side)
    async with http, client:
        resources = {r.uri for r in (await client.list_resources()).resources}
        assert WATCHED in resources
        before = (await client.read_resource(WATCHED, cache_mode="bypass")).contents[0].text
        await client.subscribe_resource(WATCHED)
        with anyio.fail_after(10):
            while len(side.updates()) < 3:
                await anyio.sleep(0.05)
        after = (await client.read_resource(WATCHED, cache_mode="bypass")).contents[0].text
        assert after != before  # each update is a new revision of the content
        await client.unsubscribe_resource(WATCHED)
        await anyio.sleep(1.0)  # let an update announced before the unsubscribe arrive
        settled = len(side.updates())
        await anyio.sleep(1.0)  # five more intervals
        assert len(side.updates()) == settled
    assert set(side.updates()) == {WATCHED}
    # They arrived on the standalone GET stream (they belong to no request), not on a POST's.
    [get] = [e for e in recorder.exchanges if e.method == "GET"]
    assert "last-event-id" not in get.request_headers
    on_get = [m for m in get.server_messages() if m.get("method") == "notifications/resources/updated"]
    assert len(on_get) == settled
    assert all(m["params"] == {"uri": WATCHED} for m in on_get)
    assert recorder.validate() == 6 + settled  # initialize, list, 2 reads, (un)subscribe and the updates


async def test_python_sdk_over_http_resumes_when_the_server_closes_the_call_stream(http_server):
    """``test_reconnection`` closes its POST stream mid-call (SSE polling); the SDK reconnects with
    GET + Last-Event-ID after the announced retry interval and gets the rest of the call there."""
    server = http_server(plugins="conformance", config="[plugins.conformance]\nreconnect_retry_ms = 200\n")
    recorder, side = RecordingTransport(), ClientSide()
    http, client = recorded_client(server.url, recorder, side)
    async with http, client:
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        result = await client.call_tool("test_reconnection", {}, progress_callback=on_progress)
        assert text_of(result) == "Reconnection test completed: result sent after the stream was closed."
        assert seen == [0, 1]
    [post] = [e for e in recorder.exchanges if e.method == "POST" and (e.rpc or {}).get("method") == "tools/call"]
    events = sse_events(post.body.decode())
    assert not events[0]["data"].strip() and "id" in events[0]  # priming
    assert events[-1] == {"retry": "200"}  # the close announced the handler's retry interval
    on_post = post.server_messages()
    assert [m.get("method") for m in on_post] == ["notifications/message", "notifications/progress"]
    last_id = [e["id"] for e in events if "id" in e][-1]
    resumes = [e for e in recorder.exchanges if e.method == "GET" and "last-event-id" in e.request_headers]
    assert [e.request_headers["last-event-id"] for e in resumes] == [last_id]
    assert resumes[0].status == 200
    replay = resumes[0].server_messages()
    assert [m.get("method") for m in replay] == ["notifications/progress", None]
    assert replay[-1]["id"] == post.rpc["id"] and "result" in replay[-1]
    assert recorder.validate() >= 4


# -- raw HTTP: resumption and session end ----------------------------------------------------------------

def _read_events(response: httpx.Response, until: int) -> list[dict[str, str]]:
    """Read SSE events off a streaming response until ``until`` events that carry data have arrived."""
    events: list[dict[str, str]] = []
    buffer = ""
    for chunk in response.iter_text():
        buffer += chunk
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            events.extend(sse_events(block + "\n\n"))
            if sum(1 for e in events if e.get("data", "").strip()) >= until:
                return events
    raise AssertionError(f"the stream ended after {events}")


def _seq(event_id: str) -> tuple[str, int]:
    stream, _, seq = event_id.partition(".")
    return stream, int(seq)


@pytest.mark.parametrize("resume", ["after-completion", "while-running"])
def test_raw_http_resumes_a_dropped_stream_with_last_event_id(http_server, resume):
    server = http_server(plugins="demo")
    validator_pairs: list[tuple[dict[str, Any], str | None]] = []
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "progress", "arguments": {"steps": 5, "delay_ms": 200},
                       "_meta": {"progressToken": "resume-me"}}}
    with httpx.Client(timeout=httpx.Timeout(10, read=10)) as raw:
        session = server.initialize(raw)
        headers = server.headers(session, mcp_protocol_version=LATEST)
        started = time.monotonic()
        with raw.stream("POST", server.url, headers=headers, json=call) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            first = _read_events(response, until=1)
        # Leaving the block closed the connection mid-body.
        priming, progress = first[0], [e for e in first if e.get("data", "").strip()]
        assert set(priming) >= {"id", "data"} and not priming["data"].strip(), first
        assert int(priming["retry"]) > 0
        assert len(progress) == 1
        first_message = json.loads(progress[0]["data"])
        assert first_message["method"] == "notifications/progress"
        assert first_message["params"]["progress"] == 1
        last_id = progress[-1]["id"]
        stream, last_seq = _seq(last_id)
        assert _seq(priming["id"]) == (stream, last_seq - 1)

        if resume == "after-completion":
            time.sleep(max(0.0, started + 1.6 - time.monotonic()))  # the call takes ~1 s
        replay = raw.get(server.url, headers={**server.headers(session, mcp_protocol_version=LATEST),
                                              "last-event-id": last_id})
        assert replay.status_code == 200, replay.text
        assert replay.headers["content-type"].startswith("text/event-stream")

        events = sse_events(replay.text)
        # A priming event pointing at the resume position first, then exactly what was missed.
        assert events[0]["id"] == last_id and not events[0].get("data", "").strip(), events[0]
        data_events = [e for e in events if e.get("data", "").strip()]
        ids = [_seq(e["id"]) for e in data_events]
        assert [s for s, _ in ids] == [stream] * len(ids)
        assert [n for _, n in ids] == list(range(last_seq + 1, last_seq + 1 + len(ids)))  # in order, no gaps
        messages = [json.loads(e["data"]) for e in data_events]
        assert messages == sse_messages(replay.text)
        progress_after = [m for m in messages if m.get("method") == "notifications/progress"]
        assert [p["params"]["progress"] for p in progress_after] == [2, 3, 4, 5]
        assert all(p["params"]["progressToken"] == "resume-me" for p in progress_after)
        assert messages[:-1] == progress_after  # nothing else, and no duplicate of what was seen
        final = messages[-1]
        assert final["id"] == 7 and final["result"]["content"] == [{"type": "text", "text": "completed 5 steps"}]

        # The stream is finished: resuming from its last event gives nothing more.
        again = raw.get(server.url, headers={**server.headers(session, mcp_protocol_version=LATEST),
                                             "last-event-id": data_events[-1]["id"]})
        assert again.status_code == 200 and sse_messages(again.text) == []
        validator_pairs += [(first_message, None), *[(m, None) for m in progress_after], (final, "tools/call")]
        raw.delete(server.url, headers=server.headers(session))
    assert validate_wire(LATEST, validator_pairs) == 6


def test_raw_http_delete_ends_the_session_and_its_id_gets_404(http_server):
    server = http_server(plugins="demo")
    pairs: list[tuple[dict[str, Any], str | None]] = []
    with httpx.Client(timeout=10) as raw:
        session = server.initialize(raw)
        headers = server.headers(session, mcp_protocol_version=LATEST)
        alive = raw.post(server.url, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert alive.status_code == 200
        [tools] = sse_messages(alive.text)
        pairs.append((tools, "tools/list"))
        other = server.initialize(raw)  # a second session is not affected

        deleted = raw.delete(server.url, headers=headers)
        assert deleted.status_code == 204, deleted.text
        for method in ("POST", "GET", "DELETE"):
            kwargs: dict[str, Any] = {}
            if method == "POST":
                kwargs["json"] = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
            response = raw.request(method, server.url, headers=headers, **kwargs)
            assert response.status_code == 404, (method, response.status_code, response.text)
            if response.content:
                body = response.json()
                assert body["error"]["message"] == "Session not found"
                pairs.append((body, None))
        still = raw.post(server.url, headers=server.headers(other, mcp_protocol_version=LATEST),
                         json={"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert still.status_code == 200
        [pong] = sse_messages(still.text)
        pairs.append((pong, "ping"))
        assert raw.delete(server.url, headers=server.headers(other)).status_code == 204
    # The GET and DELETE 404 bodies are transport-level errors with a null id: validate_wire checks
    # them by hand (envelope, a standard code) and counts the two results and the POST's 404, which
    # carries its request's id.
    assert len(pairs) == 5 and validate_wire(LATEST, pairs) == 3
