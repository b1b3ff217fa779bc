"""Secrets never shown: twenty kinds of secret planted in a real config (a stdio upstream from the proxy
tests, an HTTP upstream that cannot be reached, a plugin's own setting), a real ``mcphost serve``, then
every surface an operator reads: the console's page and JSON (state, catalog, budgets, pins),
``/readyz``, ``mcphost config show``, ``mcphost plugins`` (table and JSON, with and without the
upstreams started), ``mcphost tools --json`` and the server's log. None may hold a secret."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from mcphost.redaction import REDACTED
from mcphost.testing import ServeProcess
from tests.support.fixtures.distributions import make_distribution

MCPHOST = Path(sys.executable).parent / "mcphost"
SDK_SERVER = Path(__file__).resolve().parents[2] / "mcphost-proxy" / "tests" / "upstreams" / "sdk_server.py"

#: One value per kind of secret, each distinct, each where an operator would put it.
SECRETS = {
    "url_password": "Urlpass7f3aQ",
    "url_query_token": "QueryTok9c1x",
    "header_authorization": "AuthHdr5e2opaque",
    "header_cookie": "Cookie4d8eJar",
    "header_x_auth": "Xauth-b71cVal",
    "header_x_api_key": "Xapikey-33aaVal",
    "env_github_pat": "EnvPat91f0Val",
    "env_openai_key": "EnvOpenai2c4dVal",
    "env_aws_secret": "wJalrXUtnFEMIK7MDENGbPxRfiCYzz9Q",
    "arg_api_key": "ArgKey6e1bVal",
    "arg_token_equals": "ArgTok0d9fVal",
    "arg_password": "ArgPass44c2Val",
    "sk_key": "sk-proj-Q7vL2mN8xB4cR1tY6wE0",
    "ghp_token": "ghp_R2d4F6h8J0k2L4m6N8p0Q2s4T6v8X0z2",
    "github_pat_as_url_user": "github_pat_11ABCDE0Q_x8Yz3Wq9Lm2Np5Rs7Tv0",
    "jwt": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLXZhbHVl",
    "slack": "xoxb-2048-1024-Zq8Xw7Ve6Ut5",
    "aws_access_key_id": "AKIAQ3EGUXZ7EXAMPLE2",
    "plugin_client_secret": "ClientSecret8b3fVal",
    "redis_url_password": "RedisPw5a7bVal",
    "random_string": "Zk3pQ9xL2mN8vB4cR7tY1wE6uI0oA5sDfG",
}

#: A plugin whose settings hold a secret by name and secrets by shape.
SECRETIVE = """
import mcphost

SCHEMA = {"type": "object", "properties": {"client_secret": {"type": "string"}, "note": {"type": "string"},
          "material": {"type": "string"}}, "additionalProperties": False}


class Secretive:
    @mcphost.hookimpl
    def mcphost_config_schema(self):
        return SCHEMA

    @mcphost.hookimpl
    def mcphost_tools(self):
        @mcphost.tool
        def echo_word(word: str) -> str:
            return word
        return [echo_word]


plugin = Secretive()
"""


def _config() -> str:
    s = SECRETS
    args = [str(SDK_SERVER), "--api-key", s["arg_api_key"], f"--token={s['arg_token_equals']}",
            "--db-password", s["arg_password"], "--model", s["sk_key"], s["ghp_token"], "--hint", s["jwt"],
            "--notify", s["slack"], "--cache", f"redis://:{s['redis_url_password']}@cache.invalid:6379/0"]
    return f"""
[server]
log_level = "debug"

[plugins.proxy]
restart_backoff = 0.2

[plugins.proxy.servers.sdk]
command = {json.dumps(sys.executable)}
args = {json.dumps(args)}
env = {{ GITHUB_PAT = "{s['env_github_pat']}", OPENAI_KEY = "{s['env_openai_key']}", \
AWS_SECRET_ACCESS_KEY = "{s['env_aws_secret']}" }}

[plugins.proxy.servers.remote]
url = "https://bob:{s['url_password']}@mcp.example.invalid/mcp?token={s['url_query_token']}&region=eu"
headers = {{ Authorization = "Bearer {s['header_authorization']}", Cookie = "session={s['header_cookie']}", \
"X-Auth" = "{s['header_x_auth']}", "X-Api-Key" = "{s['header_x_api_key']}" }}

[plugins.proxy.servers.git]
url = "https://{s['github_pat_as_url_user']}@api.example.invalid/mcp"

[plugins.secretive]
client_secret = "{s['plugin_client_secret']}"
note = "rotate {s['aws_access_key_id']} soon"
material = "{s['random_string']}"
"""


def _leaks(text: str) -> list[str]:
    return [kind for kind, value in SECRETS.items() if value in text]


def _cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([str(MCPHOST), *args], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_no_secret_on_any_surface(tmp_path: Path) -> None:
    assert len(SECRETS) >= 20 and len(set(SECRETS.values())) == len(SECRETS)
    extra = tmp_path / "dist"
    make_distribution(extra, "mcphost-secretive", "1.0.0", {"secretive": "secretive_plugin:plugin"},
                      {"secretive_plugin": SECRETIVE})
    plugins = "proxy,console,secretive"
    server = ServeProcess(tmp_path, _config(), plugins=plugins, extra_path=extra)
    surfaces: dict[str, str] = {}
    try:
        with httpx.Client(base_url=server.base, timeout=30) as client:
            deadline = time.monotonic() + 60
            while True:  # the stdio upstream running and the unreachable one having failed at least once
                state = client.get("/console/api/state").json()
                by_name = {u["name"]: u for u in state["upstreams"]}
                if (by_name.get("sdk", {}).get("state") == "running" and by_name.get("remote", {}).get("error")
                        and by_name.get("git", {}).get("error")):
                    break
                assert time.monotonic() < deadline, state["upstreams"]
                time.sleep(0.2)
            surfaces["console page"] = client.get("/console").text
            surfaces["console state"] = client.get("/console/api/state").text
            surfaces["console catalog"] = client.get("/console/api/catalog").text
            surfaces["console budgets"] = client.get("/console/api/budgets").text
            surfaces["console pins"] = client.get("/console/api/pins").text
            surfaces["readyz"] = client.get("/readyz").text
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCPHOST_")}
        env.update({"MCPHOST_CONFIG": str(next(tmp_path.glob("mcphost-*.toml"))), "MCPHOST_PLUGINS": plugins,
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(extra), os.environ.get("PYTHONPATH")]))})
        surfaces["config show"] = _cli(env, "config", "show")
        surfaces["plugins"] = _cli(env, "plugins")
        surfaces["plugins --json"] = _cli(env, "plugins", "--json")
        surfaces["tools --json"] = _cli(env, "tools", "--json")
        # With the upstreams started: their table (targets, last errors) and the mounted tools.
        surfaces["plugins --start"] = _cli(env, "plugins", "--start", "--wait", "15")
        surfaces["tools --start --json"] = _cli(env, "tools", "--start", "--wait", "15", "--json")
    finally:
        server.stop()
    surfaces["server log"] = server.log()

    assert "running" in surfaces["plugins --start"] and "sdk_add" in surfaces["tools --start --json"]
    leaks = {name: _leaks(text) for name, text in surfaces.items() if _leaks(text)}
    assert not leaks, leaks
    # Each secret-bearing surface shows the marker where a secret was, and is not empty.
    for name in ("console state", "config show", "server log"):
        assert REDACTED in surfaces[name], name
    state = json.loads(surfaces["console state"])
    upstreams = {u["name"]: u for u in state["upstreams"]}
    assert upstreams["sdk"]["target"].startswith(sys.executable) and "--api-key [redacted]" in \
        upstreams["sdk"]["target"]  # the command is still shown, with its secrets redacted
    assert upstreams["remote"]["target"] == \
        "https://bob:[redacted]@mcp.example.invalid/mcp?token=[redacted]&region=[redacted]"
    shown = json.loads(surfaces["config show"])
    assert shown["plugins"]["secretive"]["client_secret"] == REDACTED
    assert shown["plugins"]["proxy"]["servers"]["sdk"]["env"]["GITHUB_PAT"] == REDACTED
    assert "sdk_add" in surfaces["tools --json"] or "add" in surfaces["tools --json"]  # ordinary names stay
