"""A real install: mcphost and mcphost-demo built and pip-installed (not editable) into a fresh venv.

This catches what the editable development install hides: missing package data, a broken
``mcphost`` console script, a plugin entry point that does not register. It needs pip to reach
an index for the dependencies and takes about a minute, so ``MCPHOST_SKIP_INSTALL_TEST=1``
skips it locally; CI runs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.stdio_support import REPO_ROOT

pytestmark = pytest.mark.skipif(os.environ.get("MCPHOST_SKIP_INSTALL_TEST") == "1",
                                reason="MCPHOST_SKIP_INSTALL_TEST=1")

_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist", ".venv", "tests")


def _copy_sources(destination: Path) -> tuple[Path, Path]:
    """The two projects' sources, copied so the build leaves nothing behind in the checkout."""
    host = destination / "mcphost-src"
    host.mkdir()
    shutil.copytree(REPO_ROOT / "mcphost", host / "mcphost", ignore=_IGNORE)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO_ROOT / name).is_file():
            shutil.copy2(REPO_ROOT / name, host / name)
    demo = destination / "mcphost-demo-src"
    shutil.copytree(REPO_ROOT / "plugins" / "mcphost-demo", demo, ignore=_IGNORE)
    return host, demo


def _run(argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float, stdin: bytes | None = None
         ) -> subprocess.CompletedProcess[bytes]:
    # cwd outside the checkout: `python -c` would import mcphost from the current directory first.
    proc = subprocess.run(argv, input=stdin, capture_output=True, env=env, cwd=cwd, timeout=timeout)
    assert proc.returncode == 0, (f"{' '.join(argv)} exited {proc.returncode}\nstdout:\n"
                                  f"{proc.stdout.decode()[-4000:]}\nstderr:\n{proc.stderr.decode()[-6000:]}")
    return proc


def test_pip_install_into_a_fresh_venv_gives_a_working_mcphost_with_the_demo(tmp_path):
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("MCPHOST_", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"))}
    config = tmp_path / "empty.toml"
    config.write_text("", encoding="utf-8")
    env["MCPHOST_CONFIG"] = str(config)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], env=env, cwd=tmp_path, timeout=120)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bin_dir / "python"
    host_src, demo_src = _copy_sources(tmp_path)
    _run([str(python), "-m", "pip", "install", "-q", str(host_src), str(demo_src)], env=env, cwd=tmp_path, timeout=600)

    # The installed copies, not the checkout, are what runs.
    where = _run([str(python), "-c", "import mcphost, mcphost_demo; print(mcphost.__file__); "
                                     "print(mcphost_demo.__file__)"], env=env, cwd=tmp_path, timeout=60)
    assert all(str(venv) in line for line in where.stdout.decode().split()), where.stdout

    mcphost = str(bin_dir / "mcphost")
    plugins = json.loads(_run([mcphost, "plugins", "--json"], env=env, cwd=tmp_path, timeout=60).stdout)
    [demo] = [p for p in plugins if p["name"] == "demo"]
    assert demo["status"] == "active" and demo["error"] is None
    assert demo["distribution"] == "mcphost-demo" and demo["version"] == "0.1.0"
    assert {"echo", "progress"} <= set(demo["provides"]["tools"])
    assert demo["provides"]["resourceTemplates"] == ["demo://files/{+path}"]

    # Serve one stdio session with the installed console script; the bundled data files came along.
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "i", "version": "0"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "ok"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "demo://files/hello.txt"}},
        {"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": "demo://readme"}},
    ]
    served = _run([mcphost, "serve", "--stdio"], env=env, cwd=tmp_path, timeout=60,
                  stdin=b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    replies = {reply["id"]: reply for reply in map(json.loads, served.stdout.splitlines())}
    assert replies[1]["result"]["serverInfo"]["name"] == "mcphost"
    assert replies[2]["result"]["content"] == [{"type": "text", "text": "ok"}]
    assert replies[3]["result"]["contents"][0]["text"] == "hello from a demo file\n"
    assert replies[4]["result"]["contents"][0]["text"].startswith("# mcphost demo")
