"""Streamable HTTP for 2026-07-28: how one request's reply goes out, as JSON or as SSE.

The kernel runs the request's whole lifecycle (``Kernel.serve``); this module only chooses the
response. No session id is minted or read, nothing is stored and nothing is resumable. A request's
notifications (progress, logs it asked for) travel on its own response: the reply is plain
JSON when the handler finishes without saying anything first, otherwise an SSE stream. The
client closing that response cancels the handler (the spec's cancellation for this revision).
``subscriptions/listen`` always streams, until the client leaves or the server shuts down.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from mcphost.protocol import jsonrpc
from mcphost.protocol.errors import (
    HEADER_MISMATCH,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mcphost.transports.asgi import Receive, Send, respond, wait_disconnect

#: JSON-RPC error codes that are answered with an HTTP error status in this revision.
STATUS_OF: dict[object, int] = {METHOD_NOT_FOUND: 404, HEADER_MISMATCH: 400, MISSING_CLIENT_CAPABILITY: 400,
                               UNSUPPORTED_PROTOCOL_VERSION: 400}
_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
_CLOSED = object()
#: Seconds a 2026-07-28 reply may take before a task starts watching for the client's disconnect. A
#: client gone sooner is noticed then (its ``http.disconnect`` waits in the request's receive queue),
#: so closing the response cancels the handler at most this much later; a reply that comes sooner
#: (a proxied call, most of them) costs no task.
WATCH_AFTER = 0.02


def status_for(reply: dict[str, Any] | None) -> int:
    error = reply.get("error") if reply else None
    return STATUS_OF.get(error.get("code"), 200) if isinstance(error, dict) else 200


async def answer(reply: asyncio.Future[Any], queue: Callable[[], asyncio.Queue[Any]], receive: Receive,
                 send: Send, keepalive: float, *, pending: Callable[[], bool] = lambda: False,
                 notified: Callable[[], asyncio.Future[None]] | None = None) -> str:
    """JSON if the reply comes before any notification; otherwise SSE. Returns the disconnect reason.

    ``queue()`` is the request's queue of notifications, created on first use; ``pending()`` says
    whether anything was put in it yet; ``notified()``, where given, a future resolved when the
    first thing is put in it (then a handler that waits, a proxied call say, is waited for without
    a queue getter task).
    """
    if not reply.done():
        # Most handlers finish without waiting on anything: after one turn of the loop their reply
        # is there, and it goes out as JSON without a disconnect watcher or a queue getter task.
        await asyncio.sleep(0)
    disconnected: asyncio.Future[Any] | None = None
    if not reply.done() and not pending() and notified is not None:
        # A reply that comes within WATCH_AFTER (a proxied call, mostly) needs no watcher task: the
        # server queues the client's disconnect, so a watcher started later still sees it at once.
        first = notified()
        await _first_of(reply, first, within=WATCH_AFTER)
        if not reply.done() and not first.done():
            disconnected = asyncio.ensure_future(wait_disconnect(receive))
            try:
                await _first_of(reply, first, disconnected)
            except BaseException:
                disconnected.cancel()
                raise
            if disconnected.done():
                reply.cancel()
                return "dropped"
    if reply.done() and not pending():
        if disconnected is not None:
            disconnected.cancel()
        message = reply.result()
        await respond(send, status_for(message), jsonrpc.encode(message) if message else b"", {})
        return "complete"
    return await _wait_and_answer(reply, queue(), receive, send, keepalive, disconnected)


async def _first_of(*futures: asyncio.Future[Any], within: float | None = None) -> None:
    """Return when one of ``futures`` is done, or ``within`` seconds have passed (none is cancelled here)."""
    loop = asyncio.get_running_loop()
    woken = loop.create_future()

    def wake(_: Any) -> None:
        if not woken.done():
            woken.set_result(None)

    for future in futures:
        future.add_done_callback(wake)
    timer = loop.call_later(within, wake, None) if within is not None else None
    try:
        await woken
    finally:
        if timer is not None:
            timer.cancel()
        for future in futures:
            future.remove_done_callback(wake)


async def _wait_and_answer(reply: asyncio.Future[Any], queue: asyncio.Queue[Any], receive: Receive, send: Send,
                           keepalive: float, disconnected: asyncio.Future[Any] | None = None) -> str:
    if disconnected is None:
        disconnected = asyncio.ensure_future(wait_disconnect(receive))
    first: asyncio.Future[Any] = asyncio.ensure_future(queue.get())
    try:
        # A listen stream's first message is its acknowledgement, so a refused listen is plain JSON too.
        done, _ = await asyncio.wait({reply, first, disconnected}, return_when=asyncio.FIRST_COMPLETED)
        if disconnected in done:
            reply.cancel()
            return "dropped"
        if reply in done and first not in done:
            first.cancel()
            message = reply.result()
            await respond(send, status_for(message), jsonrpc.encode(message) if message else b"", {})
            return "complete"
        await send({"type": "http.response.start", "status": 200, "headers": list(_SSE)})
        pending: asyncio.Future[Any] | None = first
        while True:
            getter = pending or asyncio.ensure_future(queue.get())
            pending = None
            done, _ = await asyncio.wait({getter, reply, disconnected}, timeout=keepalive,
                                         return_when=asyncio.FIRST_COMPLETED)
            if disconnected in done:
                getter.cancel()
                reply.cancel()  # closing the stream is how this revision cancels
                return "dropped"
            if getter in done:
                await _event(send, getter.result())
                continue
            getter.cancel()
            if reply in done:
                while not queue.empty():
                    await _event(send, queue.get_nowait())
                message = reply.result()
                if message is not None:
                    await _event(send, message)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return "complete"
            await send({"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True})
    finally:
        disconnected.cancel()
        if not first.done():
            first.cancel()


async def _event(send: Send, message: dict[str, Any]) -> None:
    body = b"event: message\ndata: " + jsonrpc.encode(message) + b"\n\n"
    await send({"type": "http.response.body", "body": body, "more_body": True})
