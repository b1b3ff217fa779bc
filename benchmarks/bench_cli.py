"""Wall time of the listing commands (``mcphost plugins``, ``mcphost tools``, ...) with every shipped
plugin installed and dormant: no configuration file (an empty config home) and no ``MCPHOST_*`` or
``OTEL_*`` variable, as a newcomer runs them.

Several ``mcphost`` scripts (``--mcphost PATH``, repeatable: e.g. a checkout of main and this tree,
each with its own virtual environment) are run in turn, round after round, so a busy machine
slows them alike; each command's median, min and max wall time over ``--runs`` runs are printed per
script, with the median CPU time (user + system, of the process and its children): on a machine
busy with other work the wall time mostly measures the wait for a CPU, the CPU time much less so.

    python benchmarks/bench_cli.py --mcphost /work/main/.venv/bin/mcphost --mcphost .venv/bin/mcphost
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = (("plugins",), ("tools",), ("config", "check"), ("version",))


def environment(home: str) -> dict[str, str]:
    """No MCPHOST_* or OTEL_* variable, an empty config home, and compiled modules cached as an
    installed package has them (under a prefix of the run's own, so no source tree is written to):
    with PYTHONDONTWRITEBYTECODE every run would compile each module again."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MCPHOST_", "OTEL_")) and k != "PYTHONDONTWRITEBYTECODE"}
    env["XDG_CONFIG_HOME"] = home
    env["PYTHONPYCACHEPREFIX"] = os.path.join(home, "pycache")
    return env


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run of ``command``."""
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"{' '.join(command)} exited with {process.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mcphost", action="append", help="an mcphost script (default: this interpreter's)")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    scripts = args.mcphost or [str(Path(sys.executable).parent / "mcphost")]
    times: dict[tuple[str, tuple[str, ...]], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as home:
        env = environment(home)
        for script in scripts:  # once each before timing: the page cache and .pyc files are warm
            for command in COMMANDS:
                subprocess.run([script, *command], env=env, capture_output=True, check=True)
        for _ in range(args.runs):
            for command in COMMANDS:
                for script in scripts:
                    times.setdefault((script, command), []).append(timed([script, *command], env))
    print(f"{args.runs} runs each, load average {os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} CPUs")
    for command in COMMANDS:
        for script in scripts:
            walls = [wall for wall, _ in times[(script, command)]]
            cpu = statistics.median(cpu for _, cpu in times[(script, command)])
            print(f"  mcphost {' '.join(command):13} wall {statistics.median(walls):6.3f} s median "
                  f"(min {min(walls):.3f}, max {max(walls):.3f}), CPU {cpu:.3f} s median  {script}")


if __name__ == "__main__":
    main()
