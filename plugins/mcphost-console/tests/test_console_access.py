"""Who may see the console and act from it, over real HTTP on loopback (the host in this process):
foreign Host and cross-origin requests are refused, actions need the console's header and this
server's Origin, clients off loopback are refused unless allowed, and ending a session fires
``mcphost_terminate`` once, as the client's DELETE would."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from mcphost_console import ConsolePlugin

import mcphost
from mcphost.app import create_app
from mcphost.records import Provenance, Tool
from mcphost.testing import make_host, serve_http

ACCEPT = "application/json, text/event-stream"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}


class Recorder:
    """Records every terminate (session id, reason)."""

    def __init__(self) -> None:
        self.terminated: list[tuple[str, str]] = []

    @mcphost.hookimpl
    def mcphost_terminate(self, session: Any, reason: str) -> None:
        self.terminated.append((session.id, reason))


@mcphost.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@mcphost.tool
def broken() -> str:
    """Always fails."""
    raise RuntimeError("boom")


class Tools:
    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[Any]:
        return [add, broken]


async def _open_session(client: httpx.AsyncClient, url: str) -> str:
    response = await client.post(url, json=INIT, headers={"accept": ACCEPT})
    assert response.status_code == 200, response.text
    session_id = response.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    response = await client.post(url, json=note, headers={"accept": ACCEPT, "mcp-session-id": session_id,
                                                          "mcp-protocol-version": "2025-11-25"})
    assert response.status_code == 202
    return session_id


async def _call(client: httpx.AsyncClient, url: str, session_id: str, name: str, arguments: dict[str, Any]
                ) -> httpx.Response:
    message = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    return await client.post(url, json=message, headers={"accept": ACCEPT, "mcp-session-id": session_id,
                                                         "mcp-protocol-version": "2025-11-25"})


async def test_ending_a_session_fires_terminate_once_and_the_client_gets_404() -> None:
    recorder = Recorder()
    host = make_host(("console", ConsolePlugin()), ("recorder", recorder), ("tools", Tools()))
    async with serve_http(host) as live, httpx.AsyncClient(timeout=10) as client:
        session_id = await _open_session(client, live.url)
        state = (await client.get(live.base + "/console/api/state")).json()
        [listed] = state["sessions"]
        assert listed["id"] == session_id and listed["client"] == {"name": "raw", "version": "1", "title": None}
        assert listed["era"] == "legacy" and listed["transport"] == "http" and listed["principal"] is None

        action = {"x-mcphost-console": "1", "origin": live.base}
        end = await client.post(f"{live.base}/console/api/sessions/{session_id}/end", headers=action)
        assert end.status_code == 200, end.text
        assert recorder.terminated == [(session_id, "deleted")]
        again = await client.post(f"{live.base}/console/api/sessions/{session_id}/end", headers=action)
        assert again.status_code == 404
        assert (await _call(client, live.url, session_id, "add", {"a": 1, "b": 2})).status_code == 404
        deleted = await client.delete(live.url, headers={"mcp-session-id": session_id,
                                                         "mcp-protocol-version": "2025-11-25"})
        assert deleted.status_code == 404
        assert recorder.terminated == [(session_id, "deleted")]  # still once
        assert (await client.get(live.base + "/console/api/state")).json()["sessions"] == []


async def test_tool_counters_count_calls_errors_and_latency() -> None:
    host = make_host(("console", ConsolePlugin()), ("tools", Tools()))
    async with serve_http(host) as live, httpx.AsyncClient(timeout=10) as client:
        session_id = await _open_session(client, live.url)
        for a in range(4):
            assert (await _call(client, live.url, session_id, "add", {"a": a, "b": 1})).status_code == 200
        assert (await _call(client, live.url, session_id, "broken", {})).status_code == 200  # an isError result
        traffic = (await client.get(live.base + "/console/api/state")).json()["traffic"]
        assert (traffic["add"]["calls"], traffic["add"]["errors"]) == (4, 0)
        assert (traffic["broken"]["calls"], traffic["broken"]["errors"]) == (1, 1)
        recent = traffic["add"]["recent"]
        assert recent["calls"] == 4 and 0 < recent["p50"] <= recent["p99"] < 5
        assert sum(traffic["add"]["buckets"]["calls"]) == 4
        assert sum(traffic["broken"]["buckets"]["errors"]) == 1


async def test_foreign_host_and_cross_origin_requests_are_refused() -> None:
    host = make_host(("console", ConsolePlugin()), ("tools", Tools()))
    async with serve_http(host) as live, httpx.AsyncClient(timeout=10) as client:
        session_id = await _open_session(client, live.url)
        end = f"{live.base}/console/api/sessions/{session_id}/end"
        # DNS rebinding: a page on another name that resolves to 127.0.0.1.
        for path in ("/console", "/console/api/state", "/console/static/console.js"):
            response = await client.get(live.base + path, headers={"host": "evil.example"})
            assert response.status_code == 421, (path, response.status_code)
        # The rebinding page's own POST: its Origin is refused first (403), before its Host (421).
        assert (await client.post(end, headers={"host": "evil.example", "x-mcphost-console": "1",
                                                "origin": "http://evil.example"})).status_code == 403
        # A cross-origin POST: another site, another local port, no Origin, no console header.
        for headers in ({"origin": "http://evil.example", "x-mcphost-console": "1"},
                        {"origin": "http://127.0.0.1:1", "x-mcphost-console": "1"},
                        {"origin": "null", "x-mcphost-console": "1"},
                        {"x-mcphost-console": "1"},
                        {"origin": live.base},
                        {"origin": live.base, "x-mcphost-console": "1", "sec-fetch-site": "cross-site"}):
            response = await client.post(end, headers=headers)
            assert response.status_code == 403, (headers, response.status_code, response.text)
        assert (await client.get(end)).status_code == 405  # actions are POST only
        assert len((await client.get(live.base + "/console/api/state")).json()["sessions"]) == 1  # still there
        # The page's own answers forbid framing and anything but its own scripts.
        page = await client.get(live.base + "/console")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert page.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert (await client.get(live.base + "/console/static/other.js")).status_code == 404


@pytest.mark.parametrize(("allow_remote", "status"), [(False, 403), (True, 200)])
async def test_clients_off_loopback_are_refused_unless_allowed(allow_remote: bool, status: int,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    host = make_host(("console", ConsolePlugin()), config={"plugins": {"console": {"allow_remote": allow_remote}},
                                                           "server": {"allowed_hosts": ["console.test"]}})
    app = create_app(host)
    with caplog.at_level(logging.INFO, logger="mcphost.console"):
        await host.start()
    warned = [r for r in caplog.records if r.name == "mcphost.console" and r.levelno == logging.WARNING]
    assert bool(warned) == allow_remote  # open to the network without an auth plugin: said loudly
    try:
        relayed = {"x-forwarded-for": "203.0.113.9"}
        for address, headers, expected in (("10.1.2.3", {}, status), ("127.0.0.1", {}, 200), ("::1", {}, 200),
                                           # a reverse proxy on this machine relays a client of the network
                                           ("127.0.0.1", relayed, status),
                                           ("127.0.0.1", {"forwarded": "for=203.0.113.9"}, status)):
            transport = httpx.ASGITransport(app=app, client=(address, 40000))  # type: ignore[arg-type]
            async with httpx.AsyncClient(transport=transport, base_url="http://console.test") as client:
                response = await client.get("/console/api/state", headers=headers)
                assert response.status_code == expected, (address, headers, response.text)
    finally:
        await host.stop()


async def test_a_trusted_proxy_relaying_a_loopback_client_is_local_and_only_then() -> None:
    """The console's loopback check is the host's rule (mcphost.forwarded): Forwarded first, then
    X-Forwarded-For, believed only from forwarded_allow_ips."""
    host = make_host(("console", ConsolePlugin()), config={"server": {
        "allowed_hosts": ["console.test"], "forwarded_allow_ips": ["10.0.0.0/8"]}})
    app = create_app(host)
    await host.start()
    try:
        for address, headers, expected in (
                ("10.1.2.3", {"forwarded": "for=127.0.0.1"}, 200),  # trusted proxy, loopback client
                ("10.1.2.3", {"forwarded": "for=203.0.113.9", "x-forwarded-for": "127.0.0.1"}, 403),  # Forwarded first
                ("10.1.2.3", {"x-forwarded-for": "127.0.0.1"}, 200),
                ("10.1.2.3", {"x-forwarded-host": "console.test"}, 403),  # relayed, for no one said
                ("127.0.0.1", {"forwarded": "for=127.0.0.1"}, 403),  # a proxy here that is not trusted
                ("10.1.2.3", {}, 403)):
            transport = httpx.ASGITransport(app=app, client=(address, 40000))  # type: ignore[arg-type]
            async with httpx.AsyncClient(transport=transport, base_url="http://console.test") as client:
                response = await client.get("/console/api/state", headers=headers)
                assert response.status_code == expected, (address, headers, response.text)
    finally:
        await host.stop()


async def test_config_is_shown_with_secrets_redacted() -> None:
    config = {"server": {"state_keys": ["k" * 32]},
              "plugins": {"console": {}, "redis": {"url": "redis://app:hunter2@cache.internal:6379/0"},
                          "jwt": {"client_secret": "s3cret", "issuer": "https://id.example"}}}
    host = make_host(("console", ConsolePlugin()), config=config)
    async with serve_http(host) as live, httpx.AsyncClient(timeout=10) as client:
        health = (await client.get(live.base + "/console/api/state")).json()["health"]
        text = json.dumps(health)
        assert "hunter2" not in text and "s3cret" not in text and "k" * 32 not in text
        shown = health["config"]
        assert shown["plugins"]["redis"]["url"] == "redis://app:[redacted]@cache.internal:6379/0"
        assert shown["plugins"]["jwt"] == {"client_secret": "[redacted]", "issuer": "https://id.example"}
        assert shown["server"]["state_keys"] == "[redacted]"
        assert health["ready"] is True and health["backend"]["name"] == "memory"


async def test_a_large_catalog_stays_out_of_every_poll() -> None:
    """A gateway's thousands of tools: the state the page polls names a few per plugin and only the
    tools called; the catalog comes a page at a time, searched on the server."""
    many = [mcphost.tool(name=f"t{i}")(lambda: "x") for i in range(2000)]

    class Gateway:
        @mcphost.hookimpl
        def mcphost_tools(self, host: Any) -> list[Any]:
            return many

    host = make_host(("console", ConsolePlugin()), ("gateway", Gateway()))
    async with serve_http(host) as live, httpx.AsyncClient(timeout=10) as client:
        session_id = await _open_session(client, live.url)
        assert (await _call(client, live.url, session_id, "t7", {})).status_code == 200
        state = (await client.get(live.base + "/console/api/state")).json()
        gateway = next(p for p in state["plugins"] if p["name"] == "gateway")
        assert gateway["provides_total"] == {"tools": 2000} and len(gateway["provides"]["tools"]) == 20
        assert list(state["traffic"]) == ["t7"]
        catalog = (await client.get(live.base + "/console/api/catalog")).json()
        assert catalog["total"] == 2000 and catalog["digest"] == state["catalog_digest"]
        assert [r["name"] for r in catalog["records"]] == [f"t{i}" for i in range(100)]
        assert catalog["records"][0]["kind"] == "tools" and catalog["records"][0]["plugin"] == "gateway"
        later = (await client.get(live.base + "/console/api/catalog?offset=1950&limit=500")).json()
        assert [r["name"] for r in later["records"]] == [f"t{i}" for i in range(1950, 2000)]
        # t19, t190-t199, t1900-t1999; the second page of 100 has the last 11
        found = (await client.get(live.base + "/console/api/catalog?q=T19&offset=100")).json()
        assert found["matched"] == 111 and found["more"] is False and found["query"] == "t19"
        assert [r["name"] for r in found["records"]] == [f"t{i}" for i in range(1989, 2000)]
        wrong = await client.get(live.base + "/console/api/catalog?kind=widgets")
        assert wrong.status_code == 400


async def test_no_answer_grows_with_the_catalog_or_the_callers() -> None:
    """20 000 tools mounted from an upstream, 5 000 callers refused, a hundred tools called: every
    answer the page asks for stays small (benchmarks/bench_console.py measures 200 000)."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    origin = Provenance(plugin="many", origin="vendor")
    many = [Tool(name=f"vendor_tool_{i}", fn=lambda q="": q, input_schema=schema, provenance=origin,
                 description=f"Look up vendor record {i}") for i in range(20_000)]

    class Many:
        @mcphost.hookimpl
        def mcphost_tools(self, host: Any) -> list[Any]:
            return many

    host = make_host(("console", ConsolePlugin()), ("many", Many()))
    async with serve_http(host) as live, httpx.AsyncClient(timeout=30) as client:
        for i in range(5000):
            host.manager.budgets.count_refusal(f"a:10.0.{i // 256}.{i % 256}", "requests")
        session_id = await _open_session(client, live.url)
        for i in range(100):
            assert (await _call(client, live.url, session_id, f"vendor_tool_{i}", {})).status_code == 200
        answers = {path: await client.get(live.base + path) for path in (
            "/console/api/state", "/console/api/catalog?limit=500", "/console/api/catalog?offset=19900",
            "/console/api/catalog?q=vendor&limit=500", "/console/api/budgets?limit=500")}
        sizes = {path: len(answer.content) for path, answer in answers.items()}
        assert all(answer.status_code == 200 for answer in answers.values())
        assert max(sizes.values()) < 1_000_000, sizes
        state = answers["/console/api/state"].json()
        assert len(state["traffic"]) == 24 and state["traffic_tools"] == 100
        assert len(state["budgets"]["callers"]) == 50
        assert state["budgets"]["callers_total"] > 1000  # the ledger remembers 1000 refused callers
        searched = answers["/console/api/catalog?q=vendor&limit=500"].json()
        assert len(searched["records"]) == 500 and searched["matched"] == 10_000 and searched["more"] is True
        assert searched["records"][0]["origin"] == "vendor"
        last = answers["/console/api/catalog?offset=19900"].json()
        assert last["records"][-1]["name"] == "vendor_tool_19999" and last["total"] == 20_000


async def test_budgets_show_what_each_caller_holds_and_its_429s() -> None:
    host = make_host(("console", ConsolePlugin()), ("tools", Tools()),
                     config={"server": {"max_sessions_per_principal": 1}})
    async with serve_http(host) as live, httpx.AsyncClient(timeout=10) as client:
        await _open_session(client, live.url)
        refused = await client.post(live.url, json=INIT, headers={"accept": ACCEPT})
        assert refused.status_code == 429
        budgets = (await client.get(live.base + "/console/api/state")).json()["budgets"]
        assert budgets["limits"]["sessions"] == 1
        # Every budget of the ledger, with its per-principal limit and the setting that moves it.
        listed = {b["name"]: b for b in budgets["budgets"]}
        assert list(listed) == ["sessions", "requests", "tasks", "parked calls", "parked bytes", "question bytes",
                                "retained bytes", "subscriptions", "sync pool"]
        assert listed["sessions"]["perPrincipal"] == 1 and listed["sessions"]["held"] == 1
        assert listed["requests"]["setting"] == "max_requests_per_principal"
        assert budgets["shared"] is False  # the memory backend: this process's own limits
        [row] = budgets["callers"]
        assert {k: row[k] for k in ("caller", "sessions", "requests", "tasks", "parked", "refused")} == {
            "caller": "a:127.0.0.1", "sessions": 1, "requests": 0, "tasks": 0, "parked": 0, "refused": 1}
        assert row["held"] == {name: int(name == "sessions") for name in listed}
        assert row["refusals"] == {"sessions": 1}  # the 429 above, by the budget that answered it
