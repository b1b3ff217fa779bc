"""The first ten minutes, as a newcomer meets them: the real ``mcphost`` script in a subprocess, every
shipped plugin installed (the test environment has them all) and no configuration.

Dormant plugins stay quiet, the quick commands load no plugin, configuration mistakes are all
reported at once before anything binds, and a busy port is one line, not a traceback.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

MCPHOST = Path(sys.executable).parent / "mcphost"
SHIPPED = ("mcphost_jwt", "mcphost_otel", "mcphost_redis", "mcphost_proxy", "mcphost_demo", "mcphost_conformance",
           "mcphost_console")


def environment(tmp_path: Path) -> dict[str, str]:
    """No MCPHOST_* or OTEL_* variables and an empty config home: what a newcomer has."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPHOST_", "OTEL_"))}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    return env


def mcphost(tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MCPHOST), *args], env=environment(tmp_path), capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port something else is listening on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


@pytest.mark.parametrize("args", [["--version"], ["version"], ["--help"], ["serve", "--help"]])
def test_quick_commands_load_no_plugin(tmp_path: Path, args: list[str]) -> None:
    probe = ("import sys\nsys.argv = ['mcphost', *sys.argv[1:]]\nfrom mcphost.cli import main\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             f"{SHIPPED!r} or m in ('mcphost.host', 'mcphost.kernel')), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe, *args], env=environment(tmp_path), capture_output=True,
                          text=True, timeout=60)
    assert done.stderr.strip() == "[]", done.stderr
    assert "mcphost" in done.stdout


@pytest.mark.parametrize("args", [["plugins"], ["tools"], ["config", "check"]])
def test_listing_commands_import_no_dormant_plugins_heavy_modules(tmp_path: Path, args: list[str]) -> None:
    """Every shipped plugin installed, none configured: redis.asyncio, PyJWT and httpx (jwt) and Quart
    (the console's pages) stay unimported: a dormant plugin costs nothing. Nor do the OpenTelemetry API
    (otel), Monty (codemode) and the conformance fixtures load, and listing needs no kernel."""
    heavy = ('redis', 'jwt', 'httpx', 'quart', 'hypercorn', 'opentelemetry', 'pydantic_monty',
             'mcphost_conformance.fixtures', 'mcphost.kernel')
    probe = ("import sys\nsys.argv = ['mcphost', *sys.argv[1:]]\nfrom mcphost.cli import main\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             f"print(sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe, *args], env=environment(tmp_path), capture_output=True,
                          text=True, timeout=60)
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr


def test_version_flag(tmp_path: Path) -> None:
    import mcphost as package
    assert mcphost(tmp_path, "--version").stdout == f"mcphost {package.__version__}\n"


def test_call_with_every_plugin_installed_and_no_config_answers_with_nothing_on_stderr(tmp_path: Path) -> None:
    done = mcphost(tmp_path, "call", "echo", "--arg", "text=hi")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"content": [{"type": "text", "text": "hi"}]}
    assert done.stderr == ""


def test_plugins_lists_the_dormant_ones_with_what_wakes_them(tmp_path: Path) -> None:
    data = {info["name"]: info for info in json.loads(mcphost(tmp_path, "plugins", "--json").stdout)}
    assert (data["jwt"]["status"], data["jwt"]["wake"]) == ("not configured", "[plugins.jwt] issuer")
    assert (data["redis"]["status"], data["redis"]["wake"]) == ("not configured", "[plugins.redis] url")
    assert (data["otel"]["status"], data["otel"]["wake"]) == ("not configured", "OTEL_EXPORTER_OTLP_ENDPOINT")
    assert (data["conformance"]["status"], data["conformance"]["wake"]) == (
        "not configured", "[plugins.conformance] enabled = true")
    assert data["demo"]["status"] == "active"


def test_a_fresh_catalog_is_the_demo_plugins_and_no_conformance_fixture(tmp_path: Path) -> None:
    tools = json.loads(mcphost(tmp_path, "tools", "--json").stdout)
    names = {tool["name"] for tool in tools}
    assert {"echo", "progress", "greet_user"} <= names
    assert not [name for name in names if name.startswith("test_") or name.startswith("json_schema")]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mcphost.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_misspelt_plugin_section_stops_serve_before_it_binds(tmp_path: Path, held_port: int) -> None:
    # The port is taken: had serve got as far as binding, it would complain about the port instead.
    path = write(tmp_path, f'[server]\nport = {held_port}\n\n[plugins.redsi]\nurl = "redis://127.0.0.1:1"\n')
    done = mcphost(tmp_path, "--config", str(path), "serve")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"Error: {path}: [plugins.redsi] no plugin named 'redsi' is installed (did you mean 'redis'?); "
        "installed: codemode, conformance, console, demo, jwt, otel, proxy, redis, semantic"]


def test_a_string_port_stops_serve_naming_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, '[server]\nport = "19207"\n')
    done = mcphost(tmp_path, "--config", str(path), "serve")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"Error: {path}: server.port must be int, not '19207'"]


def test_three_mistakes_give_three_messages_and_config_check_agrees(tmp_path: Path, held_port: int) -> None:
    path = write(tmp_path, f'[server]\nport = {held_port}\nlog_levle = "debug"\n\n[plugins.demo]\nroot = 5\n\n'
                           '[plugins.redsi]\nurl = "x"\n')
    for args in (["serve"], ["config", "check"]):
        done = mcphost(tmp_path, "--config", str(path), *args)
        assert done.returncode == 1
        lines = done.stderr.splitlines()
        assert lines[0] == "Error: 3 problems in the configuration:"
        assert sorted(line.strip() for line in lines[1:]) == sorted([
            f"{path}: [server] unknown key 'log_levle' (did you mean 'log_level'?)",
            f"{path}: [plugins.demo.root] Input should be a valid string, not 5",
            f"{path}: [plugins.redsi] no plugin named 'redsi' is installed (did you mean 'redis'?); "
            "installed: codemode, conformance, console, demo, jwt, otel, proxy, redis, semantic"])
    good = write(tmp_path, "[server]\nport = 9000\n")
    done = mcphost(tmp_path, "--config", str(good), "config", "check")
    assert (done.returncode, done.stdout) == (0, f"{good}: ok\n")


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]])
def test_a_busy_port_is_one_line_naming_it(tmp_path: Path, held_port: int, workers: list[str]) -> None:
    done = mcphost(tmp_path, "--plugins", "demo", "serve", "--port", str(held_port), *workers)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"Error: port {held_port} on 127.0.0.1 is already in use: stop the server listening there "
        f"(ss -ltnp 'sport = :{held_port}' shows it) or choose another port with --port"]


def test_an_address_this_machine_does_not_have_is_one_line(tmp_path: Path) -> None:
    done = mcphost(tmp_path, "--plugins", "demo", "serve", "--host", "192.0.2.1", "--allow-remote", "--port", "0")
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: cannot listen on 192.0.2.1:0 (") and "--host" in line


def test_serve_with_every_plugin_and_no_config_answers_and_logs_no_error(tmp_path: Path) -> None:
    """What `make serve` runs: no 503 from an unconfigured auth plugin, no exporter retrying."""
    import httpx

    from tests.support.http_support import HttpServer

    server = HttpServer(tmp_path, plugins="", env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    try:
        response = httpx.post(server.url, headers={"content-type": "application/json",
                                                   "accept": "application/json, text/event-stream"},
                              json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                               "clientInfo": {"name": "newcomer", "version": "0"}}}, timeout=10)
        assert response.status_code == 200, response.text
        log = server.log()
        assert " ERROR " not in log and " WARNING " not in log and "Traceback" not in log, log
    finally:
        server.stop()


def test_config_schema_answers_even_when_the_file_is_broken(tmp_path: Path) -> None:
    path = write(tmp_path, "[plugins.redsi]\nurl = 1\n")
    done = mcphost(tmp_path, "--config", str(path), "config", "schema")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["redis"]["properties"]["url"]["type"] == "string"
