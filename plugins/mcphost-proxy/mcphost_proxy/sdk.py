"""The proxy's one door into private parts of the official ``mcp`` SDK (the fence).

Everything the proxy uses of the SDK that is not its public API is reached through this module and
nowhere else, each part named in :data:`PRIVATE_PARTS`; :func:`missing` lists those an installed
``mcp`` lacks, and the proxy's tests fail loudly on any (test_proxy_sdk_fence.py). The parts were
checked against ``mcp`` :data:`CHECKED` (the proxy's pin allows only the minor versions checked):
before widening the pin, run that test against the new version and read each use below again.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import StreamableHTTPTransport
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from mcphost_proxy.framing import THREAD_PARSE_BYTES, _parse
from mcphost_proxy.work import offload

#: The ``mcp`` version every private part below was checked against.
CHECKED = "2.3.0"

#: (module, attribute path): the private parts of the SDK the proxy relies on.
PRIVATE_PARTS: tuple[tuple[str, str], ...] = (
    ("mcp.shared._context_streams", "create_context_streams"),
    ("mcp.shared._context_streams", "ContextReceiveStream.last_context"),
    ("mcp.client.session", "ClientSession._stamp"),
    ("mcp.client.session", "ClientSession._dispatcher"),
    ("mcp.client.session", "ClientSession._session_read_timeout_seconds"),
    ("mcp.client.session", "ClientSession._x_mcp_header_maps"),
    ("mcp.client.session", "ClientSession._absorb_tool_listing"),
    ("mcp.client.streamable_http", "StreamableHTTPTransport._handle_json_response"),
    ("mcp.client.streamable_http", "StreamableHTTPTransport._handle_sse_event"),
    ("mcp.client.streamable_http", "StreamableHTTPTransport.session_id"),
)

#: Attributes set on each instance (not found on the class): checked on a fresh instance.
_INSTANCE_ATTRIBUTES = {"ClientSession._stamp", "ClientSession._dispatcher",
                        "ClientSession._session_read_timeout_seconds", "ClientSession._x_mcp_header_maps",
                        "StreamableHTTPTransport.session_id", "ContextReceiveStream.last_context"}

__all__ = ["CHECKED", "PRIVATE_PARTS", "create_context_streams", "http_transport", "missing"]


def _instance(owner: str) -> Any:
    if owner == "ClientSession":
        send, receive = create_context_streams[Any](1)
        return ClientSession(receive, send)
    if owner == "StreamableHTTPTransport":
        return StreamableHTTPTransport("http://127.0.0.1:1/mcp")
    send, receive = create_context_streams[Any](1)
    return receive


def missing() -> list[str]:
    """The private parts of :data:`PRIVATE_PARTS` the installed ``mcp`` lacks (empty: all present)."""
    gone: list[str] = []
    for module_name, path in PRIVATE_PARTS:
        try:
            target: Any = importlib.import_module(module_name)
        except ImportError:
            gone.append(f"{module_name} (the module)")
            continue
        owner, _, attribute = path.partition(".")
        if not hasattr(target, owner):
            gone.append(f"{module_name}.{owner}")
            continue
        if attribute:
            holder = _instance(owner) if path in _INSTANCE_ATTRIBUTES else getattr(target, owner)
            if not hasattr(holder, attribute):
                gone.append(f"{module_name}.{path}")
    return gone


# -- the uses ---------------------------------------------------------------------------------------

def last_context(read: Any) -> contextvars.Context | None:
    """The context of the task that sent the request whose stream carried the last message read."""
    return getattr(read, "last_context", None)


def stamp(session: ClientSession, data: dict[str, Any], opts: dict[str, Any]) -> None:
    """Stamp an outgoing request as ``session`` would (``_meta`` of 2026-07-28 requests, the MCP headers,
    Mcp-Param-* headers a listed tool declared) into ``data`` and ``opts["headers"]``."""
    session._stamp(data, opts)  # type: ignore[arg-type]  # CallOptions: a TypedDict of the same keys


def wrap_stamp(session: ClientSession, wrap: Callable[[Callable[..., None]], Callable[..., None]]) -> None:
    """Replace ``session``'s stamp by ``wrap(its stamp)`` (no per-request override exists)."""
    original = getattr(session, "_stamp", None)
    if original is not None:
        session._stamp = wrap(original)


def copy_header_maps(shared: ClientSession, own: ClientSession) -> None:
    """Teach ``own`` the Mcp-Param-* header maps ``shared`` learned from the tool listing."""
    maps = getattr(shared, "_x_mcp_header_maps", None)
    if maps is not None and hasattr(own, "_x_mcp_header_maps"):
        own._x_mcp_header_maps = maps


async def raw_request(session: ClientSession, method: str, params: dict[str, Any] | None) -> dict[str, Any] | None:
    """Send a request through ``session``'s dispatcher and return its result unvalidated (None: the parts
    needed are gone; the caller then uses the public ``send_request``)."""
    stamper = getattr(session, "_stamp", None)
    dispatcher = getattr(session, "_dispatcher", None)
    if stamper is None or not hasattr(dispatcher, "send_raw_request"):
        return None
    timeout = getattr(session, "_session_read_timeout_seconds", None)
    data: dict[str, Any] = {"method": method, **({"params": params} if params else {})}
    opts: dict[str, Any] = {"timeout": timeout} if timeout is not None else {}
    stamper(data, opts)
    raw = await dispatcher.send_raw_request(method, data.get("params"), opts)  # type: ignore[union-attr]
    return dict(raw) if isinstance(raw, dict) else {}


def absorb_tool_listing(session: ClientSession, result: Any) -> bool:
    """Teach ``session``'s tool cache a complete listing (False: it cannot be taught)."""
    absorb = getattr(session, "_absorb_tool_listing", None)
    if absorb is None:
        return False
    absorb(result, complete=True)
    return True


def session_id(transport: StreamableHTTPTransport | None) -> str | None:
    """The Mcp-Session-Id the SDK's HTTP transport holds (None: stateless, or none yet)."""
    return getattr(transport, "session_id", None) if transport is not None else None


class _HttpTransport(StreamableHTTPTransport):
    """The ``mcp`` client's Streamable HTTP transport, with long messages parsed in the worker thread.

    It parses every JSON body and SSE event on the event loop with pydantic, several times slower
    than orjson: one 2 000-tool listing held the loop 48 ms, one of 20 000 tools 300-630 ms. A message
    of THREAD_PARSE_BYTES or more is parsed as long stdio lines are (:func:`_parse`, in the worker
    thread); shorter ones, and every error path, are the client's own. Private methods of mcp 2.3's
    transport: checked when mcp is upgraded.
    """

    async def _handle_json_response(self, response: httpx2.Response, read_stream_writer: Any, *,
                                    request_id: Any) -> None:
        try:
            content = await response.aread()
        except httpx2.StreamError as exc:  # over max_message_bytes (_BoundedBody): as the client words it
            error = types.ErrorData(code=types.PARSE_ERROR, message=f"Failed to parse JSON response: {exc}")
            await read_stream_writer.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id,
                                                                            error=error)))
            return
        parsed = await offload(_parse, content) if len(content) >= THREAD_PARSE_BYTES else None
        if isinstance(parsed, SessionMessage):
            await read_stream_writer.send(parsed)
        else:  # short, or not valid: the client parses it (the content is cached on the response)
            await super()._handle_json_response(response, read_stream_writer, request_id=request_id)

    async def _handle_sse_event(self, sse: Any, read_stream_writer: Any, original_request_id: Any = None,
                                resumption_callback: Any = None) -> bool:
        if sse.event == "message" and len(sse.data) >= THREAD_PARSE_BYTES:
            parsed = await offload(_parse, sse.data)
            if isinstance(parsed, SessionMessage):
                message = parsed.message
                done = isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
                if original_request_id is not None and isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                    message.id = original_request_id
                await read_stream_writer.send(parsed)
                if sse.id and resumption_callback:
                    await resumption_callback(sse.id)
                return done
        return await super()._handle_sse_event(sse, read_stream_writer, original_request_id, resumption_callback)


@contextlib.asynccontextmanager
async def http_transport(url: str, *, http_client: httpx2.AsyncClient, max_sse_event_size: int | None,
                         terminate_on_close: bool = True, on_transport: Callable[[Any], None] | None = None
                         ) -> AsyncIterator[tuple[Any, Any]]:
    """(read stream, write stream) to a Streamable HTTP upstream: ``mcp``'s ``streamable_http_client``
    with :class:`_HttpTransport` (the same plumbing, for a client the caller owns)."""
    transport = _HttpTransport(url, max_sse_event_size=max_sse_event_size)
    if on_transport is not None:
        on_transport(transport)
    read_writer, read = create_context_streams[SessionMessage | Exception](0)
    write, write_reader = create_context_streams[SessionMessage](0)
    async with read_writer, read, write, write_reader, anyio.create_task_group() as group:

        def start_get_stream() -> None:
            group.start_soon(transport.handle_get_stream, http_client, read_writer)

        group.start_soon(transport.post_writer, http_client, write_reader, read_writer, write, start_get_stream, group)
        try:
            yield read, write
        finally:
            if transport.session_id and terminate_on_close:
                await transport.terminate_session(http_client)
            group.cancel_scope.cancel()
