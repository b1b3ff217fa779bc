"""Redis round trips and server CPU per request on the Redis backend (docs/performance.md).

Starts a private redis-server and one ``mcphost serve`` (demo + redis) on loopback, with a small
plugin that counts, inside the server process, every write of a command batch to Redis
(``send_packed_command``: one per command, one per pipeline, one per script call, i.e. one per
round trip) and reports it with the process's CPU time on ``/_trips``. Then it sends N requests
of each kind one after another and prints round trips and server CPU (ms) per request:

- ``session``: 2025-11-25 ``tools/call`` echo on an initialized session, answered over SSE;
- ``stateless``: 2026-07-28 ``tools/call`` echo (no session).

``--code DIR`` runs the server from another checkout (for before/after figures), e.g.
``git archive <commit> | tar -x -C /tmp/before`` and ``--code /tmp/before``.

    .venv/bin/python benchmarks/bench_redis_trips.py [-n 500] [--code DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "plugins" / "mcphost-redis")]

from mcphost_redis.testing import RedisServer, free_port  # noqa: E402

from tests.support.fixtures.distributions import make_distribution  # noqa: E402

PLUGIN = '''
import time

import mcphost
from redis.asyncio import connection

SENT = [0]
_send = connection.AbstractConnection.send_packed_command


async def counted(self, command, check_health=True):
    SENT[0] += 1
    return await _send(self, command, check_health)


connection.AbstractConnection.send_packed_command = counted


@mcphost.hookimpl
def mcphost_routes(app):
    @app.route("/_trips")
    async def trips():
        return {"sent": SENT[0], "cpu": time.process_time()}
'''

ACCEPT = "application/json, text/event-stream"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}}


def measure(client: httpx.Client, base: str, send: object, n: int) -> tuple[float, float]:
    before = client.get(f"{base}/_trips").json()
    for i in range(n):
        send(i)  # type: ignore[operator]
    after = client.get(f"{base}/_trips").json()
    # The /_trips requests themselves make no Redis command.
    return (after["sent"] - before["sent"]) / n, (after["cpu"] - before["cpu"]) * 1000 / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=500)
    parser.add_argument("--code", type=Path, default=REPO, help="checkout whose mcphost the server runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        redis = RedisServer(root / "redis")
        site = root / "site"
        make_distribution(site, "mcphost-trips", "0", {"trips": "trips_plugin"}, {"trips_plugin": PLUGIN})
        code = args.code.resolve()
        port = free_port()
        (root / "mcphost.toml").write_text(f'[plugins.redis]\nurl = "{redis.url}"\n', encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCPHOST_")}
        env.update({"MCPHOST_CONFIG": str(root / "mcphost.toml"), "MCPHOST_PLUGINS": "demo,redis,trips",
                    "PYTHONPATH": os.pathsep.join([str(site), str(code), str(code / "plugins" / "mcphost-redis"),
                                                   str(code / "plugins" / "mcphost-demo")])})
        server = subprocess.Popen([sys.executable, "-c", "from mcphost.cli import main; main()", "serve",
                                   "--port", str(port)], env=env, cwd=tmp, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            with httpx.Client(timeout=30) as client:
                for _ in range(200):
                    try:
                        if client.get(f"{base}/readyz").status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    time.sleep(0.05)
                legacy = {"content-type": "application/json", "accept": ACCEPT, "mcp-protocol-version": "2025-11-25"}
                response = client.post(f"{base}/mcp", headers=legacy, json={
                    "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                        "protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": {"name": "trips", "version": "0"}}})
                session = {**legacy, "mcp-session-id": response.headers["mcp-session-id"]}
                client.post(f"{base}/mcp", headers=session, json={"jsonrpc": "2.0",
                                                                  "method": "notifications/initialized"})

                def session_call(i: int) -> None:
                    reply = client.post(f"{base}/mcp", headers=session, json={
                        "jsonrpc": "2.0", "id": i + 10, "method": "tools/call",
                        "params": {"name": "echo", "arguments": {"text": "x"}}})
                    assert reply.status_code == 200 and '"result"' in reply.text, reply.text

                modern = {"content-type": "application/json", "accept": ACCEPT, "mcp-protocol-version": "2026-07-28",
                          "mcp-method": "tools/call", "mcp-name": "echo"}

                def stateless_call(i: int) -> None:
                    reply = client.post(f"{base}/mcp", headers=modern, json={
                        "jsonrpc": "2.0", "id": i, "method": "tools/call",
                        "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": MODERN_META}})
                    assert reply.status_code == 200, reply.text

                figures = {}
                for name, send in (("session", session_call), ("stateless", stateless_call)):
                    measure(client, base, send, 50)  # warm up
                    trips, cpu = measure(client, base, send, args.n)
                    figures[name] = {"round_trips": round(trips, 2), "server_cpu_ms": round(cpu, 3)}
                print(json.dumps({"code": str(code), "n": args.n, **figures}))
        finally:
            server.terminate()
            server.wait(30)
            redis.stop()


if __name__ == "__main__":
    main()
