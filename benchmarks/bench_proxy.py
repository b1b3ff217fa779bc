#!/usr/bin/env python3
"""What a proxied call costs: the upstream directly vs through mcphost-proxy, in one run.

    python benchmarks/bench_proxy.py                          # 2 s warm-up + 5 s per cell
    python benchmarks/bench_proxy.py --duration 3 --warmup 1 --json out.json
    python benchmarks/bench_proxy.py --era auto               # 2026-07-28 to the upstream too

The servers, each pinned to core 0 (``taskset``), the load generator (wrk, else compare.py's Python
loader) pinned to core 1:

  upstream      ``mcphost serve`` with only the demo plugin (its ``echo``), over HTTP
  gateway-http  ``mcphost serve`` with only the proxy plugin, mounting ``upstream`` by its URL
  gateway-stdio ``mcphost serve`` with only the proxy plugin, mounting ``mcphost serve --stdio`` (the
                demo) as a stdio upstream (started by the gateway, so on core 0 too)

The cells: ``direct`` (the upstream itself), ``http`` and ``stdio`` (through the gateways), each at 1
and at 16 connections, stateless 2026-07-28 ``tools/call`` of echo, every reply checked (compare.py's
wrk script). For each: p50/p99, req/s, the gateway's CPU per call (user + system of its process) and
the upstream's CPU per call (the HTTP upstream's process; the stdio upstream's process, a child of
the gateway). The ratios printed: the gateway's CPU per proxied call over the upstream's per direct
call (goal <= 2), proxied req/s over direct at 16 connections (goal >= 0.6), added p50 at 1 connection
(goal <= 0.5 ms). Which era the proxy speaks to the upstream: ``--era`` (the proxy's ``era``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import benchlib  # noqa: E402
import compare  # noqa: E402
from benchlib import pinned  # noqa: E402

CELLS = ("direct", "http", "stdio")
#: Runs ``mcphost`` (argv[2:]) under cProfile timed by this process's CPU clock (wall time would count the
#: upstream's turns on the shared core against the gateway's syscalls); writes argv[1] when it exits.
_PROFILED = ("import cProfile, runpy, sys, time\n"
             "out, sys.argv = sys.argv[1], sys.argv[2:]\n"
             "profile = cProfile.Profile(time.process_time)\n"
             "try:\n"
             "    profile.runcall(runpy.run_path, sys.argv[0], run_name='__main__')\n"
             "except SystemExit:\n"
             "    pass\n"
             "finally:\n"
             "    profile.dump_stats(out)\n")


def _cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def _gateway(name: str, tmp: Path, table: str, profile: str | None = None) -> benchlib.Server:
    config = tmp / f"{name}.toml"
    config.write_text(table)
    server = benchlib.mcphost_server(name, tmp, extra_env={"MCPHOST_PLUGINS": "proxy", "MCPHOST_CONFIG": str(config)})
    if profile is not None:  # cProfile over the gateway's whole life, written when it stops (SIGTERM)
        Path(profile).mkdir(parents=True, exist_ok=True)
        server.argv = [sys.executable, "-c", _PROFILED, str(Path(profile) / f"{name}.prof"),
                       benchlib.mcphost_executable(), *server.argv[server.argv.index("serve"):]]
    server.argv = pinned(server.argv, compare.SERVER_CORE)
    return server


def _stdio_child(gateway: benchlib.Server) -> int:
    children = psutil.Process(gateway.pid).children(recursive=True)
    serving = [c for c in children if "--stdio" in c.cmdline()]
    if not serving:
        raise RuntimeError("the stdio upstream process was not found")
    return serving[0].pid


def measure(cell: str, server: benchlib.Server, upstream_pid: int, connections: int,
            args: argparse.Namespace, wrk: str | None) -> dict[str, Any]:
    target = compare.Target(f"{cell}-{connections}", server.name, "echo", "modern")
    prepared = compare.prepare(target, server, connections)
    load_args = argparse.Namespace(threads=1, connections=connections)

    def load(seconds: float, check: bool) -> dict[str, Any]:
        if wrk is not None:
            return compare.run_wrk(wrk, target, server, prepared, seconds, load_args, check)
        return compare.run_python(target, server, prepared, seconds, load_args, check)

    load(args.warmup, False)
    gateway_before, upstream_before = _cpu(server.pid), _cpu(upstream_pid)
    totals = load(args.duration, True)
    gateway_cpu, upstream_cpu = _cpu(server.pid) - gateway_before, _cpu(upstream_pid) - upstream_before
    if totals["bad"] or totals["socket_errors"] or totals["status_errors"]:
        raise AssertionError(f"{target.name}: {totals}")
    requests = totals["requests"]
    row = {"cell": cell, "connections": connections, "requests": requests,
           "rps": round(requests / totals["seconds"], 1), "p50_ms": round(totals["p50_ms"], 3),
           "p99_ms": round(totals["p99_ms"], 3),
           "upstream_cpu_us": round(upstream_cpu * 1e6 / requests, 1)}
    if cell != "direct":
        row["gateway_cpu_us"] = round(gateway_cpu * 1e6 / requests, 1)
    return row


def ratios(rows: list[dict[str, Any]]) -> list[str]:
    by = {(r["cell"], r["connections"]): r for r in rows}
    lines = []
    for cell in ("http", "stdio"):
        if (cell, 1) not in by or ("direct", 1) not in by:
            continue
        for conns in (1, 16):
            if (cell, conns) in by:
                lines.append(f"{cell:5} {conns:2} conn: gateway CPU per call / upstream CPU per direct call = "
                             f"{by[(cell, conns)]['gateway_cpu_us'] / by[('direct', conns)]['upstream_cpu_us']:.2f} "
                             "(goal <= 2)")
        lines.append(f"{cell:5}  1 conn: added p50 = {by[(cell, 1)]['p50_ms'] - by[('direct', 1)]['p50_ms']:.3f} ms "
                     "(goal <= 0.5)")
        if (cell, 16) in by and ("direct", 16) in by:
            lines.append(f"{cell:5} 16 conn: req/s proxied / direct = "
                         f"{by[(cell, 16)]['rps'] / by[('direct', 16)]['rps']:.2f} (goal >= 0.6)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--connections", default="1,16")
    parser.add_argument("--cells", default=",".join(CELLS))
    parser.add_argument("--era", choices=("session", "auto"), default="session")
    parser.add_argument("--loader", choices=("wrk", "python"), default="wrk")
    parser.add_argument("--json", help="write the report here")
    parser.add_argument("--profile", metavar="DIR", help="run the gateways under cProfile; DIR/gateway-*.prof "
                        "(read with pstats; the CPU figures are then the profiled ones)")
    args = parser.parse_args()
    wrk = shutil.which("wrk") if args.loader == "wrk" else None
    cells = [c for c in args.cells.split(",") if c]
    connections = [int(c) for c in args.connections.split(",")]
    report = benchlib.new_report(args)
    report["loader"] = "wrk" if wrk else "python"
    rows: list[dict[str, Any]] = []
    with benchlib.workdir() as tmpname, benchlib.sigterm_as_interrupt():
        tmp = Path(tmpname)
        upstream = benchlib.mcphost_server("upstream", tmp)
        upstream.argv = pinned(upstream.argv, compare.SERVER_CORE)
        servers: list[benchlib.Server] = [upstream]
        try:
            upstream.start()
            gateways: dict[str, benchlib.Server] = {}
            if "http" in cells:
                gateways["http"] = _gateway("gateway-http", tmp, (
                    f'[plugins.proxy.servers.up]\nurl = "{upstream.url}"\nprefix = ""\nera = "{args.era}"\n'),
                    args.profile)
            if "stdio" in cells:
                command = [c for c in benchlib.mcphost_server("x", tmp).argv if c != "--host"]
                command = [*command[:command.index("serve") + 1], "--stdio"]
                env = {"MCPHOST_PLUGINS": "demo", "MCPHOST_CONFIG": str(tmp / "empty.toml"),
                       "MCPHOST_LOG_LEVEL": "warning"}
                env_lines = "".join(f'{k} = {json.dumps(v)}\n' for k, v in env.items())
                args_toml = ", ".join(json.dumps(a) for a in command[1:])  # MCPHOST_BENCH_SOURCE's -c has newlines
                gateways["stdio"] = _gateway("gateway-stdio", tmp, (
                    f'[plugins.proxy.servers.up]\ncommand = "{command[0]}"\nargs = [{args_toml}]\nprefix = ""\n'
                    f'era = "{args.era}"\n[plugins.proxy.servers.up.env]\n{env_lines}'), args.profile)
            for gateway in gateways.values():
                servers.append(gateway)
                gateway.start()
            time.sleep(1.0)  # the upstreams are mounted (prepare() checks a call besides)
            for conns in connections:
                for cell in cells:
                    if cell == "direct":
                        row = measure(cell, upstream, upstream.pid, conns, args, wrk)
                    elif cell == "http":
                        row = measure(cell, gateways["http"], upstream.pid, conns, args, wrk)
                    else:
                        gateway = gateways["stdio"]
                        row = measure(cell, gateway, _stdio_child(gateway), conns, args, wrk)
                    rows.append(row)
                    print(row, flush=True)
        finally:
            for server in reversed(servers):
                server.stop()
    report["rows"] = rows
    report["ratios"] = ratios(rows)
    print("\n".join(report["ratios"]))
    benchlib.save_report(args.json, report)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
