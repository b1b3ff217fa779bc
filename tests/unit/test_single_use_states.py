"""``[server] single_use_states``: a sealed requestState is redeemed once; a replay is refused.

In-process through the kernel with the conformance plugin's input-required fixture. On a
shared backend the claim is made in the store (mcphost-redis ``claim``), so it holds across
processes; the backend contract tests pin ``claim`` itself.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcphost.protocol.sealed import REJECTION_MESSAGE
from mcphost.testing import make_host
from tests.support.modern_support import modern_call

ANSWER = {"user_name": {"action": "accept", "content": {"name": "Ada"}}}


async def call(host: Any, **extra: Any) -> dict[str, Any]:
    return await modern_call(host, "tools/call", {"name": "test_input_required_result_elicitation",
                                                  "arguments": {}, **extra})


@pytest.mark.parametrize("single_use", [True, False])
async def test_a_replayed_request_state_is_refused_only_when_states_are_single_use(single_use: bool):
    from mcphost_conformance import ConformancePlugin

    host = make_host(("conformance", ConformancePlugin()), config={
        "plugins": {"conformance": {"enabled": True}}, "server": {
        "single_use_states": single_use, "state_keys": ["k" * 32]}})
    await host.start()
    try:
        first = (await call(host))["result"]
        assert first["resultType"] == "input_required"
        state = first["requestState"]
        done = (await call(host, requestState=state, inputResponses=ANSWER))["result"]
        assert done["content"][0]["text"] == "Hello, Ada!"
        replay = await call(host, requestState=state, inputResponses=ANSWER)
        if single_use:
            assert replay["error"] == {"code": -32602, "message": REJECTION_MESSAGE}
        else:
            assert replay["result"]["content"][0]["text"] == "Hello, Ada!"
    finally:
        await host.stop()
