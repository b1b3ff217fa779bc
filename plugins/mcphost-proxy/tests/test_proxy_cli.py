"""``mcphost plugins`` and ``mcphost tools`` show the upstreams: without ``--start`` each configured one
as ``stopped`` (and a note saying how to see more); with ``--start`` the real upstreams are started,
and each one's state, protocol version, declared extensions and mounted tools are shown, secrets
redacted, before they are stopped again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from proxy_support import RAW_SERVER, SDK_SERVER

MCPHOST = Path(sys.executable).parent / "mcphost"

SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
#: What the raw upstream declares besides tools: the tasks capability and the MCP Apps extension.
DECLARED = {"tasks": {"requests": {"tools": {"call": {}}}}, "extensions": {"io.modelcontextprotocol/ui": {}}}


def _config(tmp_path: Path) -> Path:
    def table(name: str, body: dict[str, Any]) -> str:
        return f"[plugins.proxy.servers.{name}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in body.items())

    config = tmp_path / "mcphost.toml"
    config.write_text(
        table("sdk", {"command": sys.executable, "args": [str(SDK_SERVER)], "required": True})
        + table("modern", {"command": sys.executable, "args": [str(SDK_SERVER)], "era": "auto", "prefix": "m_"})
        + table("raw", {"command": sys.executable, "args": [str(RAW_SERVER)]})
        + "[plugins.proxy.servers.raw.env]\n" + f"RAW_CAPABILITIES = {json.dumps(json.dumps(DECLARED))}\n"
        + table("gone", {"command": "/nonexistent/mcp-server", "args": ["--api-key", SECRET]}))
    return config


def _run(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real ``mcphost`` script (stdio upstreams inherit its stderr), piped: whole lines."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPHOST_", "OTEL_")) and k != "COLUMNS"}
    env.update({"MCPHOST_PLUGINS": "proxy", "XDG_CONFIG_HOME": str(config.parent / "xdg")})
    result = subprocess.run([str(MCPHOST), "--config", str(config), *args], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result


def _upstreams(stdout: str) -> dict[str, list[str]]:
    lines = stdout.splitlines()
    header = lines.index(next(line for line in lines if line.startswith("UPSTREAM ")))
    return {line.split()[0]: line.split() for line in lines[header + 1:] if line.strip()}


def test_without_start_the_upstreams_are_listed_stopped_with_a_note(tmp_path):
    result = _run(_config(tmp_path), "plugins")
    rows = _upstreams(result.stdout)
    assert {name: row[2] for name, row in rows.items()} == {n: "stopped" for n in ("sdk", "modern", "raw", "gone")}
    assert "4 upstream(s) not started: --start" in result.stderr
    tools = _run(_config(tmp_path), "tools")
    assert "sdk_add" not in tools.stdout and "not started" in tools.stderr


def test_plugins_start_shows_state_protocol_extensions_and_required(tmp_path):
    result = _run(_config(tmp_path), "plugins", "--start", "--wait", "120")
    rows = _upstreams(result.stdout)
    assert rows["sdk"][1:6] == ["proxy", "running", "2025-11-25", "8", "-"]
    assert rows["sdk"][6] == "yes"
    assert rows["modern"][1:4] == ["proxy", "running", "2026-07-28"]
    assert rows["raw"][2] == "running" and rows["raw"][5:7] == ["tasks", "io.modelcontextprotocol/ui"]
    assert rows["gone"][2] == "restarting" and "/nonexistent/mcp-server" in result.stdout
    assert SECRET not in result.stdout + result.stderr


def test_tools_start_lists_the_mounted_tools_with_their_upstream(tmp_path):
    result = _run(_config(tmp_path), "tools", "--start", "--wait", "120")
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert rows["sdk_add"].split()[1:3] == ["proxy", "(sdk)"]
    assert rows["m_add"].split()[1:3] == ["proxy", "(modern)"]
    assert rows["raw_echo"].split()[1:3] == ["proxy", "(raw)"]
    assert "not started" not in result.stderr


def test_a_per_user_server_without_a_listing_credential_shows_awaiting_a_sign_in(tmp_path):
    """Not started until someone signs in (docs/upstream-credentials.md, Listing the catalog): --start
    does not wait for it; one with a listing credential of the gateway's own is started as usual."""
    config = tmp_path / "mcphost.toml"
    oauth = '[plugins.proxy.servers.{0}.auth]\nmode = "oauth"\nclient_id = "gw"\nallow_insecure_http = true\n'
    config.write_text(
        '[plugins.proxy.servers.personal]\nurl = "http://127.0.0.1:9/mcp"\n' + oauth.format("personal")
        + '[plugins.proxy.servers.listed]\nurl = "http://127.0.0.1:9/mcp"\n'
        + 'headers = { Authorization = "Bearer gateway-listing-token" }\n' + oauth.format("listed"))
    result = _run(config, "plugins", "--start", "--wait", "120")
    rows = _upstreams(result.stdout)
    assert rows["personal"][1:5] == ["proxy", "awaiting", "a", "sign-in"], result.stdout
    assert rows["listed"][2] in ("starting", "restarting"), result.stdout  # it tries: nothing listens there
    assert "gateway-listing-token" not in result.stdout + result.stderr
