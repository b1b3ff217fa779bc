"""Nothing reaches the wire that cannot be encoded: a fault is that call's -32603 error, in both eras,
over HTTP and stdio, and the connection goes on serving. The official Python SDK client calls a module
served by ``mcphost dev``; ``ctx.elicit(message=..., schema=Model)`` works as in the SDK."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters

from tests.support.dev_support import dev

MODULE = Path(__file__).resolve().parents[1] / "support" / "http_plugins" / "encoder_faults.py"
MCPHOST = Path(sys.executable).parent / "mcphost"

pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")


async def _answer(context: Any, params: Any) -> types.ElicitResult:
    assert params.requested_schema["properties"]["name"]["type"] == "string"
    return types.ElicitResult(action="accept", content={"name": "Ada"})


@contextlib.asynccontextmanager
async def _client(transport: str, mode: str, tmp_path: Path) -> AsyncIterator[Client]:
    if transport == "http":
        served = dev(tmp_path, str(MODULE), "--no-reload")
        url, _log = next(served)
        try:
            async with Client(url, mode=mode, elicitation_callback=_answer, read_timeout_seconds=30) as client:
                yield client
        finally:
            served.close()
    else:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPHOST_", "OTEL_"))}
        env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
        params = StdioServerParameters(command=str(MCPHOST), args=["dev", str(MODULE), "--stdio"], env=env,
                                       cwd=str(tmp_path))
        async with Client(params, mode=mode, elicitation_callback=_answer, read_timeout_seconds=30) as client:
            yield client


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.parametrize("transport", ["http", "stdio"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_faults_are_the_calls_errors_and_elicit_takes_a_model(tmp_path, transport, mode):
    async with _client(transport, mode, tmp_path) as client:
        assert _text(await client.call_tool("greet", {})) == "Hello, Ada!"
        for name in ("odd_meta", "odd_log"):
            with pytest.raises(MCPError) as caught:
                await client.call_tool(name, {})
            assert caught.value.error.code == -32603
            assert "cannot be encoded as JSON" in caught.value.error.message
            assert _text(await client.call_tool("fine", {})) == "fine"  # the connection still serves
