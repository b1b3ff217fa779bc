"""The ``mcphost`` console script as its own process: what ``mcphost plugins`` lists of the plugins
installed in this environment, and a blocked plugin that is never imported. (The in-process CLI
tests are in tests/unit/test_cli.py and tests/unit/test_plugins.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fixtures.distributions import make_distribution
from tests.support.stdio_support import mcphost_argv

DEMO_TOOLS = ["echo", "progress", "greet_user", "summarize", "list_roots"]


def test_installed_demo_plugin_via_console_script(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "mcphost"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPHOST_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    done = subprocess.run([str(script), "plugins", "--json"], capture_output=True, text=True, env=env,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    plugins = json.loads(done.stdout)
    demo = next(p for p in plugins if p["name"] == "demo")
    assert (demo["distribution"], demo["status"], demo["error"], demo["builtin"]) == (
        "mcphost-demo", "active", None, False)
    assert demo["version"]
    assert demo["provides"]["tools"] == DEMO_TOOLS
    assert demo["provides"]["resources"] == ["demo://readme"]
    assert demo["provides"]["resourceTemplates"] == ["demo://files/{+path}"]
    assert demo["provides"]["prompts"] == ["review_code"]
    assert "mcphost_tools" in demo["hooks"] and "mcphost_settings" in demo["hooks"]
    assert all(not p["builtin"] for p in plugins)  # built-ins only with --all


# -- one plugin manager per command (RELIABILITY H10) ---------------------------------------------------

def _marker_site(tmp_path: Path) -> tuple[Path, Path]:
    """A fake installed distribution ``marker-dist`` whose plugin module writes a file when imported."""
    site = tmp_path / "site"
    marker = tmp_path / "imported"
    make_distribution(site, "marker-dist", "1.0", {"marker": "marker_plugin"},
                      {"marker_plugin": f"from pathlib import Path\nPath({str(marker)!r}).write_text('yes')\n"})
    return site, marker


@pytest.mark.parametrize("how", ["flag", "config"])
def test_a_blocked_plugin_is_never_imported_and_is_listed_disabled(tmp_path: Path, how: str) -> None:
    site, marker = _marker_site(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPHOST_")}
    env.update(PYTHONPATH=os.pathsep.join([str(site), str(Path(__file__).resolve().parents[2])]),
               XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    if how == "flag":
        args = ["--disable-plugin", "marker"]
    else:
        config = tmp_path / "mcphost.toml"
        config.write_text('[plugins]\nblock = ["marker"]\n', encoding="utf-8")
        args = ["--config", str(config)]
    done = subprocess.run(mcphost_argv(*args, "plugins", "--json"), env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    listed = {p["name"]: p for p in json.loads(done.stdout)}
    assert listed["marker"]["status"] == "disabled"
    assert not marker.exists(), "a blocked plugin was imported"
    call = subprocess.run(mcphost_argv(*args, "--plugins", "demo", "call", "echo", "--arg", "text=hi"), env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert call.returncode == 0, call.stderr
    assert json.loads(call.stdout)["content"][0]["text"] == "hi"
    assert not marker.exists()
