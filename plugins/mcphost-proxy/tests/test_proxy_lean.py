"""The lean per-call path (lean.py, wire.py, framing.Switch): a tool call of a client that cannot be asked
questions goes over kept connections (HTTP) or straight to the process (stdio), and behaves as before."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from mcp import MCPError
from mcp.client import Client
from mcphost_proxy.framing import Switch
from mcphost_proxy.lean import SseEvents
from mcphost_proxy.wire import HttpClient, TooLarge, WireError
from proxy_support import front, sdk_upstream

from tests.support.http_support import HttpServer


def _text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


# -- SSE framing ---------------------------------------------------------------------------------------

def test_sse_events_are_split_across_chunks_and_crlf():
    events = SseEvents(limit=1000)
    body = b'id: 1\r\nretry: 1000\r\ndata: \r\n\r\nid: 2\r\nevent: message\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'
    seen = []
    for i in range(len(body)):  # one byte at a time: every cut, a CRLF's included
        seen += events.feed(body[i:i + 1])
    assert seen == [b'{"a":\n1}']  # the priming event (empty data) is no message
    assert events.feed(b"event: ping\ndata: x\n\ndata: y\n\n") == [b"y"]


def test_an_sse_event_over_the_limit_fails():
    events = SseEvents(limit=64)
    with pytest.raises(TooLarge):
        events.feed(b"data: " + b"x" * 100)


# -- the keep-alive client --------------------------------------------------------------------------------

class Raw:
    """A loopback HTTP server answering each request with the next of ``replies`` (raw bytes, each
    written in pieces of ``piece`` bytes); counts connections; ``close_after`` closes after a reply."""

    def __init__(self, replies: list[bytes], piece: int = 7, close_after: bool = False) -> None:
        self.replies = list(replies)
        self.piece = piece
        self.close_after = close_after
        self.connections = 0
        self.requests: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                self.requests.append(head + await reader.readexactly(length))
                reply = self.replies.pop(0)
                for start in range(0, len(reply), self.piece):
                    writer.write(reply[start:start + self.piece])
                    await writer.drain()
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @contextlib.asynccontextmanager
    async def serving(self):
        server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            server.close()


def _json(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)


def _chunked(pieces: list[bytes], content_type: bytes = b"text/event-stream") -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)
    return b"HTTP/1.1 200 OK\r\ncontent-type: " + content_type + b"\r\ntransfer-encoding: chunked\r\n\r\n" + body + \
        b"0\r\n\r\n"


async def test_replies_are_read_whole_or_streamed_on_one_kept_connection():
    raw = Raw([_json(b'{"n":1}'), _chunked([b"data: a\n\n", b"data: b\n\n"]),
               _chunked([b'{"n":', b"3}"], b"application/json"), _json(b'{"n":4}'),
               b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 9\r\n\r\ndata: c\n\n"])
    async with raw.serving() as url:
        client = HttpClient(url, {"authorization": "Bearer x"}, pool_size=4, limit=1000)
        try:
            async with client.post(b"{}", {"mcp-method": "tools/call"}) as reply:
                assert (reply.status, reply.body, reply.streaming) == (200, b'{"n":1}', False)
            async with client.post(b"{}", {}) as reply:
                assert reply.sse and reply.streaming
                assert b"".join([chunk async for chunk in reply.chunks()]) == b"data: a\n\ndata: b\n\n"
            async with client.post(b"{}", {}) as reply:
                assert reply.body == b'{"n":3}'
            async with client.post(b"{}", {}) as reply:
                assert reply.body == b'{"n":4}'
            async with client.post(b"{}", {}) as reply:  # SSE of a known length: read whole
                assert reply.sse and not reply.streaming
                assert [chunk async for chunk in reply.chunks()] == [b"data: c\n\n"]
        finally:
            client.close()
    assert raw.connections == 1
    first = raw.requests[0].lower()
    assert first.startswith(b"post /mcp http/1.1\r\n")
    assert b"authorization: bearer x\r\n" in first and b"mcp-method: tools/call\r\n" in first

async def test_next_chunk_gives_each_piece_then_none_for_good():
    """The lean path reads with ``next_chunk`` (no async generator to finalize when it stops at its answer)."""
    raw = Raw([_chunked([b"data: a\n\n", b"data: b\n\n"]), _json(b'{"n":2}')])
    async with raw.serving() as url:
        client = HttpClient(url, {}, pool_size=1, limit=1000)
        try:
            async with client.post(b"{}", {}) as reply:
                pieces = []
                while (piece := await reply.next_chunk()) is not None:
                    pieces.append(piece)
                assert b"".join(pieces) == b"data: a\n\ndata: b\n\n"
                assert await reply.next_chunk() is None
            async with client.post(b"{}", {}) as reply:
                assert await reply.next_chunk() == b'{"n":2}'
                assert await reply.next_chunk() is None
                assert reply.body == b'{"n":2}'
        finally:
            client.close()
    assert raw.connections == 1



async def test_a_connection_the_upstream_closed_is_replaced_and_a_large_reply_fails_alone():
    raw = Raw([_json(b'{"n":1}'), _json(b'{"n":2}'), _json(b'{"big":"' + b"x" * 2000 + b'"}'), _json(b"{}")],
              close_after=True)
    async with raw.serving() as url:
        client = HttpClient(url, {}, pool_size=2, limit=1000)
        try:
            async with client.post(b"{}", {}) as reply:
                assert reply.body == b'{"n":1}'
            await asyncio.sleep(0.05)  # the server has closed that connection meanwhile
            async with client.post(b"{}", {}) as reply:
                assert reply.body == b'{"n":2}'
            with pytest.raises(TooLarge):
                async with client.post(b"{}", {}):
                    pass
            async with client.post(b"{}", {}) as reply:
                assert reply.body == b"{}"
        finally:
            client.close()
    assert raw.connections == 4


async def test_an_upstream_that_goes_away_mid_reply_is_a_wire_error():
    raw = Raw([b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 50\r\n\r\n{\"n\":"],
              close_after=True)
    async with raw.serving() as url:
        client = HttpClient(url, {}, pool_size=1, limit=1000)
        try:
            with pytest.raises(WireError):
                async with client.post(b"{}", {}):
                    pass
        finally:
            client.close()


def test_the_switch_takes_only_its_own_replies_and_progress():
    switch = Switch()
    loop = asyncio.new_event_loop()
    try:
        reply = loop.create_future()
        switch._pending["~1"] = (reply, None)
        assert switch.take(b'{"jsonrpc":"2.0","id":"~1","result":{}}') == (True, None)
        assert reply.result() == {"jsonrpc": "2.0", "id": "~1", "result": {}}
        taken, data = switch.take(b'{"jsonrpc":"2.0","id":1,"result":{}}')  # the mcp client's
        assert not taken and data["id"] == 1
        taken, data = switch.take(b'{"jsonrpc":"2.0","method":"notifications/progress",'
                                  b'"params":{"progressToken":"~1","progress":1}}')
        assert taken and data is None  # its call asked for no progress
        taken, data = switch.take(b"not json")
        assert not taken and isinstance(data, ValueError)
    finally:
        loop.close()


# -- through the proxy -------------------------------------------------------------------------------

@pytest.mark.parametrize("era", ["session", "auto"])
async def test_calls_of_a_client_that_cannot_be_asked_go_over_kept_connections(tmp_path, era):
    upstream = await asyncio.to_thread(HttpServer, tmp_path, plugins="demo")
    try:
        async with front({"up": {"url": upstream.url, "era": era, "pool_size": 3}}) as live, \
                Client(live.url, mode="legacy", read_timeout_seconds=60) as client:
            wire = live.plugin.upstreams["up"].wire
            for n in range(5):
                assert _text(await client.call_tool("up_echo", {"text": f"call {n}"})) == f"call {n}"
            assert len(wire._open) == 1  # one after another: one kept connection
            texts = await asyncio.gather(*(client.call_tool("up_echo", {"text": f"at once {n}"}) for n in range(12)))
            assert [_text(t) for t in texts] == [f"at once {n}" for n in range(12)]
            assert 1 <= len(wire._open) <= 3  # pool_size
            seen: list[float] = []

            async def progress(value, total, message):
                seen.append(value)

            result = await client.call_tool("up_progress", {"steps": 3}, progress_callback=progress)
            assert not result.is_error and seen == [1, 2, 3]
            bad = await client.call_tool("up_echo", {"text": 5})  # the host validates against the listing
            assert bad.is_error
    finally:
        upstream.stop()


async def test_stdio_calls_of_a_client_that_cannot_be_asked_go_straight_to_the_process(tmp_path):
    async with front({"sdk": sdk_upstream()}) as live, \
            Client(live.url, mode="legacy", read_timeout_seconds=60) as client:
        upstream = live.plugin.upstreams["sdk"]
        texts = await asyncio.gather(*(client.call_tool("sdk_add", {"a": n, "b": 1}) for n in range(10)))
        assert [_text(t) for t in texts] == [str(n + 1) for n in range(10)]
        seen: list[float] = []

        async def progress(value, total, message):
            seen.append(value)

        # A long reply line is parsed in the worker thread, and still reaches its call.
        assert len(_text(await client.call_tool("sdk_big", {"mib": 0.3}))) == int(0.3 * 1024 * 1024)
        assert _text(await client.call_tool("sdk_slow", {"seconds": 0}, progress_callback=progress)) == "slept"
        assert seen == [1]
        # Its question cannot be put to this client: the call fails with the client's error, and nothing hangs.
        with contextlib.suppress(MCPError):
            result = await asyncio.wait_for(client.call_tool("sdk_ask_name", {}), 30)
            assert result.is_error or "no name" in _text(result)
        assert not upstream.switch._pending and not upstream.questions.callers


async def test_a_lean_stdio_call_cancelled_downstream_is_cancelled_upstream(tmp_path):
    cancelled, started = tmp_path / "cancelled", tmp_path / "pid"
    env = {"PROXY_TEST_CANCEL_FILE": str(cancelled), "PROXY_TEST_PID_FILE": str(started)}
    async with front({"sdk": sdk_upstream(env=env)}) as live, \
            Client(live.url, mode="legacy", read_timeout_seconds=60) as client:
        call = asyncio.ensure_future(client.call_tool("sdk_slow", {"seconds": 30}))
        for _ in range(600):
            if started.exists() and live.plugin.upstreams["sdk"].switch._pending:
                break
            await asyncio.sleep(0.05)
        call.cancel()  # the client sends notifications/cancelled; the host cancels the handler
        with contextlib.suppress(asyncio.CancelledError, MCPError):
            await call
        for _ in range(600):
            if cancelled.exists():
                break
            await asyncio.sleep(0.05)
        assert cancelled.read_text() == "cancelled"
        assert _text(await client.call_tool("sdk_add", {"a": 1, "b": 1})) == "2"
