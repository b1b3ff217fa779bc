"""Redis round trips and server CPU per request on the Redis backend, against the memory backend
in the same run (docs/performance.md).

Starts a private redis-server and two ``mcphost serve`` on loopback, one on the memory backend
(demo) and one on Redis (demo + redis), each with a small plugin that counts, inside the server
process, every write of a command batch to Redis (``send_packed_command``: one per command, one
per pipeline, one per script call, i.e. one per round trip) and reports it with the process's CPU
time on ``/_trips``. Then, in alternating rounds, it sends N requests of each kind one after
another to each server and prints the medians of round trips and server CPU (ms) per request
(``round_trips``: every write to Redis; ``per_call_round_trips``: only those of the commands sent
for at least half the requests, leaving out lease renewals, script loads, new pool connections
and other writes that come with the passing time rather than with each call):

- ``session``: 2025-11-25 ``tools/call`` echo on an initialized session, answered over SSE;
- ``stateless``: 2026-07-28 ``tools/call`` echo (no session);

and ``session_cpu_ratio``, the Redis server's CPU per session-era call over the memory one's
(goal: at most 2), with each round's ratio.

``--code DIR`` runs the servers from another checkout (for before/after figures), e.g.
``git archive <commit> | tar -x -C /tmp/before`` and ``--code /tmp/before``.

    .venv/bin/python benchmarks/bench_redis_trips.py [-n 500] [--rounds 3] [--code DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
#: Writes by what they start with (the command, and for EVALSHA the script's SHA).
KINDS = {}
_send = connection.AbstractConnection.send_packed_command


async def counted(self, command, check_health=True):
    SENT[0] += 1
    head = bytes(command[0] if isinstance(command, list) else command)[:64].decode(errors="replace")
    KINDS[head] = KINDS.get(head, 0) + 1
    return await _send(self, command, check_health)


connection.AbstractConnection.send_packed_command = counted


@mcphost.hookimpl
def mcphost_routes(app):
    @app.route("/_trips")
    async def trips():
        return {"sent": SENT[0], "cpu": time.process_time(), "kinds": KINDS}
'''

ACCEPT = "application/json, text/event-stream"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}}


def measure(client: httpx.Client, base: str, send: object, n: int) -> tuple[float, float, float]:
    """Round trips per request (all, and those of the commands sent for most requests: the
    per-call ones, without the periodic and one-off ones such as lease renewals, script loads
    and new pool connections) and server CPU (ms) per request."""
    before = client.get(f"{base}/_trips").json()
    for i in range(n):
        send(i)  # type: ignore[operator]
    after = client.get(f"{base}/_trips").json()
    # The /_trips requests themselves make no Redis command.
    counts = [count - before["kinds"].get(kind, 0) for kind, count in after["kinds"].items()]
    per_call = sum(count for count in counts if count >= n / 2)
    return (after["sent"] - before["sent"]) / n, per_call / n, (after["cpu"] - before["cpu"]) * 1000 / n


class Server:
    """One ``mcphost serve`` with the trips plugin, and an initialized session on it."""

    def __init__(self, root: Path, code: Path, site: Path, name: str, plugins: str, config: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        (root / f"{name}.toml").write_text(config, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCPHOST_")}
        env.update({"MCPHOST_CONFIG": str(root / f"{name}.toml"), "MCPHOST_PLUGINS": plugins,
                    "PYTHONPATH": os.pathsep.join([str(site), str(code), str(code / "plugins" / "mcphost-redis"),
                                                   str(code / "plugins" / "mcphost-demo")])})
        self.process = subprocess.Popen([sys.executable, "-c", "from mcphost.cli import main; main()", "serve",
                                         "--port", str(self.port)], env=env, cwd=root, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self.next_id = 10

    def ready(self, client: httpx.Client) -> None:
        for _ in range(400):
            try:
                if client.get(f"{self.base}/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        legacy = {"content-type": "application/json", "accept": ACCEPT, "mcp-protocol-version": "2025-11-25"}
        response = client.post(f"{self.base}/mcp", headers=legacy, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "trips", "version": "0"}}})
        self.session = {**legacy, "mcp-session-id": response.headers["mcp-session-id"]}
        client.post(f"{self.base}/mcp", headers=self.session, json={"jsonrpc": "2.0",
                                                                     "method": "notifications/initialized"})

    def senders(self, client: httpx.Client) -> dict[str, object]:
        def session_call(i: int) -> None:
            self.next_id += 1
            reply = client.post(f"{self.base}/mcp", headers=self.session, json={
                "jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "x"}}})
            assert reply.status_code == 200 and '"result"' in reply.text, reply.text

        modern = {"content-type": "application/json", "accept": ACCEPT, "mcp-protocol-version": "2026-07-28",
                  "mcp-method": "tools/call", "mcp-name": "echo"}

        def stateless_call(i: int) -> None:
            reply = client.post(f"{self.base}/mcp", headers=modern, json={
                "jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": MODERN_META}})
            assert reply.status_code == 200, reply.text

        return {"session": session_call, "stateless": stateless_call}

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--code", type=Path, default=REPO, help="checkout whose mcphost the servers run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        redis = RedisServer(root / "redis")
        site = root / "site"
        make_distribution(site, "mcphost-trips", "0", {"trips": "trips_plugin"}, {"trips_plugin": PLUGIN})
        code = args.code.resolve()
        servers = {"memory": Server(root, code, site, "memory", "demo,trips", ""),
                   "redis": Server(root, code, site, "redis", "demo,redis,trips",
                                   f'[plugins.redis]\nurl = "{redis.url}"\n')}
        try:
            with httpx.Client(timeout=30) as client:
                for server in servers.values():
                    server.ready(client)
                samples: dict[str, dict[str, list[tuple[float, float, float]]]] = {
                    backend: {"session": [], "stateless": []} for backend in servers}
                for _ in range(args.rounds):
                    for backend, server in servers.items():
                        for kind, send in server.senders(client).items():
                            measure(client, server.base, send, 50)  # warm up
                            samples[backend][kind].append(measure(client, server.base, send, args.n))
                figures: dict[str, object] = {"code": str(code), "n": args.n, "rounds": args.rounds}
                for backend, kinds in samples.items():
                    figures[backend] = {kind: {"round_trips": round(statistics.median(g[0] for g in got), 2),
                                               "per_call_round_trips": round(statistics.median(g[1] for g in got), 2),
                                               "server_cpu_ms": round(statistics.median(g[2] for g in got), 3)}
                                        for kind, got in kinds.items()}
                pairs = zip(samples["redis"]["session"], samples["memory"]["session"], strict=True)
                ratios = [on_redis[2] / in_memory[2] for on_redis, in_memory in pairs]
                figures["session_cpu_ratio"] = round(statistics.median(ratios), 2)
                figures["session_cpu_ratio_per_round"] = [round(r, 2) for r in ratios]
                print(json.dumps(figures))
        finally:
            for server in servers.values():
                server.stop()
            redis.stop()


if __name__ == "__main__":
    main()
