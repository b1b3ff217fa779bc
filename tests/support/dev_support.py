"""``mcphost dev TARGET`` as a subprocess on a free port, for the dev command's tests
(tests/interop/test_dev.py) and the tests that serve a module through it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from mcphost.testing import free_port

MCPHOST = Path(sys.executable).parent / "mcphost"


def dev(tmp_path: Path, target: str, *args: str) -> Iterator[tuple[str, Path]]:
    """``mcphost dev TARGET`` on a free port; yields its URL and log once /readyz answers; stops it by pid."""
    port = free_port()
    log = tmp_path / f"dev-{port}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPHOST_", "OTEL_"))}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    with open(log, "wb") as out:
        process = subprocess.Popen([str(MCPHOST), "dev", target, "--port", str(port), *args], stdout=out,
                                   stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", log
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
