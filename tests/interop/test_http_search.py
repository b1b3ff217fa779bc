"""A search endpoint through the official MCP Python SDK client over HTTP, against a real
``mcphost serve``: the instructions made from the catalog, a found tool run with call_tool, and an
over-long query refused as a tool error while the server goes on answering."""

from __future__ import annotations

import pytest

from tests.support.sdk_support import ClientSide, RecordingTransport, recorded_client

SEARCH = '[endpoints.find]\ndiscovery = "search"\nsearch_max_query = 256\n'

pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_python_sdk_searches_runs_and_is_refused_an_over_long_query(http_server, mode):
    server = http_server(plugins="demo", config=SEARCH)
    recorder, side = RecordingTransport(), ClientSide()
    http, client = recorded_client(server.url + "/find", recorder, side, mode)
    async with http, client:
        if mode == "legacy":  # initialize's instructions (a 2026-07-28 client asks server/discover when it wants them)
            assert "search_tools" in (client.instructions or "") and "tools from" in (client.instructions or "")
        assert [t.name for t in (await client.list_tools()).tools] == ["search_tools", "call_tool"]
        found = await client.call_tool("search_tools", {"query": "echo my text back", "limit": 3})
        names = [t["name"] for t in found.structured_content["tools"]]
        assert "echo" in names
        ran = await client.call_tool("call_tool", {"name": "echo", "arguments": {"text": "hi"}})
        assert not ran.is_error and "hi" in ran.content[0].text
        refused = await client.call_tool("search_tools", {"query": "word " * 100_000})
        assert refused.is_error and "longer than 256 bytes" in refused.content[0].text
        again = await client.call_tool("search_tools", {"query": "echo", "limit": 1})
        assert not again.is_error
