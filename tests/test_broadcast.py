"""List changes, resource updates and task statuses travel through the backend's broker.

Whatever another process publishes on the broadcast channel reaches this process's listen
streams, as if it had happened here (issue: listen fan-out "through the backend broker so
another process can publish"). With the in-memory broker the other process is simulated by
publishing straight onto the broker.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcphost.kernel.dispatcher import BROADCAST, SUBSCRIPTION_ID
from mcphost.protocol.modern import validate_modern
from mcphost.testing import make_host
from tests.test_http_modern import modern


async def test_a_list_change_published_by_another_process_reaches_a_listen_stream() -> None:
    from mcphost_conformance import ConformancePlugin

    host = make_host(("conformance", ConformancePlugin()))
    await host.start()
    try:
        payload, headers = modern("subscriptions/listen", {"notifications": {
            "toolsListChanged": True, "resourceSubscriptions": ["test://watched-resource"]}}, request_id=9)
        request = validate_modern(payload, {k.lower(): v for k, v in headers.items()},
                                  tool_header_params=host.catalog.tool_header_params)
        received: list[dict[str, Any]] = []
        arrived = asyncio.Event()

        async def outlet(message: dict[str, Any], related: Any) -> None:
            received.append(message)
            arrived.set()

        session = host.kernel.modern_session(request, None, outlet)
        reply = host.kernel.receive_modern(session, payload)
        await asyncio.wait_for(arrived.wait(), 5)  # the acknowledgement
        await host.backend.broker.publish(BROADCAST, {"type": "list_changed", "kind": "tools"})
        await host.backend.broker.publish(BROADCAST, {"type": "list_changed", "kind": "prompts"})  # not asked for
        await host.backend.broker.publish(BROADCAST, {"type": "resource_updated", "uri": "test://watched-resource"})
        methods = [m["method"] for m in received]
        assert methods == ["notifications/subscriptions/acknowledged", "notifications/tools/list_changed",
                           "notifications/resources/updated"]
        assert all(m["params"]["_meta"][SUBSCRIPTION_ID] == 9 for m in received)
        assert received[-1]["params"]["uri"] == "test://watched-resource"
    finally:
        await host.stop()
    final = await asyncio.wait_for(reply, 5)  # shutdown ends the stream with its final result
    assert final["result"]["_meta"][SUBSCRIPTION_ID] == 9
