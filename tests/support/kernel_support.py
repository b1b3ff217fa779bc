"""Kernel test helpers: an in-process plugin serving given records, a host around it, and a
MemoryClient whose received messages are each checked against the official schema of the
negotiated revision when it closes. Shared by tests/unit/test_kernel*.py.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import mcphost
from mcphost.testing import MemoryClient, make_host
from tests.support.wire import WireValidator

VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
LATEST = "2025-11-25"


# -- shared helpers ----------------------------------------------------------------------------------


class Plugin:
    """An in-process plugin serving whatever records it is given (mutable, for reload tests)."""

    def __init__(self, *records: Any, connect: Callable[..., Any] | None = None,
                 middleware: Iterable[mcphost.Middleware] = ()) -> None:
        self.records = list(records)
        self.connect = connect
        self.middleware = list(middleware)

    def _of(self, kind: type) -> list[Any]:
        return [r for r in self.records if type(r) is kind]

    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        return self._of(mcphost.Tool)

    @mcphost.hookimpl
    def mcphost_resources(self, host: Any) -> list[mcphost.Resource]:
        return self._of(mcphost.Resource)

    @mcphost.hookimpl
    def mcphost_resource_templates(self, host: Any) -> list[mcphost.ResourceTemplate]:
        return self._of(mcphost.ResourceTemplate)

    @mcphost.hookimpl
    def mcphost_prompts(self, host: Any) -> list[mcphost.Prompt]:
        return self._of(mcphost.Prompt)

    @mcphost.hookimpl
    def mcphost_middleware(self, host: Any) -> list[mcphost.Middleware]:
        return self.middleware

    @mcphost.hookimpl
    def mcphost_connect(self, session: mcphost.Session, request: mcphost.Connection) -> None:
        if self.connect is not None:
            self.connect(session)


def make(*records: Any, server: dict[str, Any] | None = None, **plugin_options: Any) -> Any:
    """A host serving ``records`` through one :class:`Plugin`, with ``[server]`` settings."""
    return make_host(Plugin(*records, **plugin_options), config={"server": server or {}})


def negotiated(client: MemoryClient) -> str:
    if client.initialize_result is not None:
        return client.initialize_result["protocolVersion"]
    return client.protocol_version


def validate(client: MemoryClient) -> int:
    """Check every message the host sent ``client``; return how many there were."""
    return WireValidator(negotiated(client)).check_all(client.sent)


@contextlib.asynccontextmanager
async def connected(host: Any, **options: Any) -> AsyncIterator[MemoryClient]:
    """``MemoryClient(host, **options)``; on a clean exit every message it received is schema-checked."""
    async with MemoryClient(host, **options) as client:
        yield client
    validate(client)


async def send(client: MemoryClient, message: dict[str, Any], method: str | None = None) -> Any:
    """Hand a raw message to the kernel; for requests await the reply and record it for the schema check."""
    future = client.send(message)
    if future is None:
        return None
    reply = await future
    if reply is not None and method is not None:
        client.sent.append((reply, method))
    return reply


def reply_error(reply: dict[str, Any] | None) -> dict[str, Any]:
    assert reply is not None, "expected an error reply, got none"
    assert "result" not in reply, reply
    return reply["error"]


async def error_of(client: MemoryClient, method: str, params: dict[str, Any] | None = None,
                   **kw: Any) -> dict[str, Any]:
    """The error object the host answers ``method`` with (fails if it answers with a result)."""
    return reply_error(await client.raw_request(method, params, **kw))


def text_of(result: dict[str, Any]) -> str:
    """The text of the only content block of a tool result."""
    [block] = result["content"]
    assert block["type"] == "text"
    return block["text"]


async def wait_for(predicate: Callable[[], Any], timeout: float = 2.0) -> None:
    """Yield to the loop until ``predicate()`` holds (fails after ``timeout`` seconds)."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.001)


def notifications(client: MemoryClient, method: str) -> list[dict[str, Any]]:
    return [n.get("params", {}) for n in client.notifications if n.get("method") == method]
