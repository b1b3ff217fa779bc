"""Sampling and roots questions an upstream asks mid-call reach the caller whose call caused them.

The upstream is the official Python SDK server (``upstreams/sdk_server.py``): its tools ``summarize``
and ``roots`` call ``ctx.session.create_message`` and ``ctx.session.list_roots`` as the SDK's own
examples do. It is mounted over stdio and over Streamable HTTP, shared by every client. A session-era
client and a 2026-07-28 client (the official SDK client in both modes) call at the same moment; each
answers with its own name, so an answer that reached the wrong call shows in the result.
"""

from __future__ import annotations

import asyncio
import contextlib

import mcp_types as types
import pytest
from mcp import Client
from proxy_support import front, sdk_http_upstream, sdk_upstream


def _text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


class Asked:
    """A downstream client that samples and lists roots in its own name, counting the questions."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.samplings: list[types.CreateMessageRequestParams] = []
        self.roots_asked = 0

    async def sample(self, context, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.samplings.append(params)
        await asyncio.sleep(0.05)  # both questions are out at once
        return types.CreateMessageResult(role="assistant", model=f"model-of-{self.name}",
                                         content=types.TextContent(type="text", text=f"{self.name} says hi"))

    async def roots(self, context) -> types.ListRootsResult:
        self.roots_asked += 1
        await asyncio.sleep(0.05)
        return types.ListRootsResult(roots=[types.Root(uri=f"file:///home/{self.name.lower()}", name=self.name)])

    def client(self, url: str, mode: str) -> Client:
        return Client(url, mode=mode, sampling_callback=self.sample, list_roots_callback=self.roots,
                      read_timeout_seconds=60)


@contextlib.asynccontextmanager
async def _mounted(transport: str):
    if transport == "stdio":
        async with front({"sdk": sdk_upstream()}) as live:
            yield live
    else:
        async with sdk_http_upstream() as url, front({"sdk": {"url": url}}) as live:
            yield live


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_sampling_questions_reach_their_own_callers(transport):
    ada, bob = Asked("Ada"), Asked("Bob")
    async with _mounted(transport) as live, ada.client(live.url, "legacy") as old, \
            bob.client(live.url, "auto") as new:
        for _ in range(2):
            first, second = await asyncio.gather(old.call_tool("sdk_summarize", {"text": "hello"}),
                                                 new.call_tool("sdk_summarize", {"text": "hello"}))
            assert (_text(first), _text(second)) == ("sampled: Ada says hi", "sampled: Bob says hi")
        assert len(ada.samplings) == 2 and len(bob.samplings) == 2
        assert ada.samplings[0].messages[0].content.text == "hello"  # the upstream's question, whole


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_roots_questions_reach_their_own_callers(transport):
    ada, bob = Asked("Ada"), Asked("Bob")
    async with _mounted(transport) as live, ada.client(live.url, "legacy") as old, \
            bob.client(live.url, "auto") as new:
        for _ in range(2):
            first, second = await asyncio.gather(old.call_tool("sdk_roots", {}), new.call_tool("sdk_roots", {}))
            assert (_text(first), _text(second)) == ("file:///home/ada", "file:///home/bob")
        assert (ada.roots_asked, bob.roots_asked) == (2, 2)
