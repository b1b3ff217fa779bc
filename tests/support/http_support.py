"""Run a real ``mcphost serve`` (HTTP) as a subprocess on a free loopback port, for tests.

``HttpServer`` starts the console script with an isolated environment (no user config, only
the plugins asked for), waits until the port accepts connections, and stops the process by
its pid (SIGTERM, then SIGKILL) at the end. ``post``/``get``/``delete`` are small raw-HTTP
helpers over httpx for tests that need exact control of headers and bodies.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from mcphost.testing import free_port, listens_on
from tests.support.fixtures.distributions import make_distribution

MCPHOST = Path(sys.executable).parent / "mcphost"
ACCEPT_BOTH = "application/json, text/event-stream"
INIT_PARAMS = {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "mcphost-tests", "version": "0"}}
REPO_ROOT = Path(__file__).resolve().parents[2]
MODERN = "2026-07-28"
SESSION_ERA = "2025-11-25"
#: Capabilities a 2026-07-28 request declares in its ``_meta`` (see :func:`meta`).
CAPABILITIES = {"elicitation": {}, "sampling": {}, "roots": {}}
#: ``_meta`` of a 2026-07-28 request that declares no client capabilities.
MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
#: ``initialize`` params of a session-era client with no capabilities.
INITIALIZE = {"protocolVersion": SESSION_ERA, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}




class _PortTaken(RuntimeError):
    """The server could not bind its port: another program took it after :func:`free_port` probed it."""


class HttpServer:
    """One ``mcphost serve`` process. ``url`` is the MCP endpoint."""

    def __init__(self, tmp_path: Path, *, plugins: str = "demo", env: Mapping[str, str] | None = None,
                 args: list[str] | None = None, config: str = "", port: int | None = None,
                 cwd: Path | None = None) -> None:
        for attempt in range(3):
            self.port = port or free_port()
            self.url = f"http://127.0.0.1:{self.port}/mcp"
            config_file = tmp_path / f"mcphost-{self.port}.toml"
            config_file.write_text(config, encoding="utf-8")
            self.log_path = tmp_path / f"server-{self.port}.log"
            full_env = {k: v for k, v in os.environ.items() if not k.startswith("MCPHOST_")}
            full_env.update({"MCPHOST_CONFIG": str(config_file), "MCPHOST_PLUGINS": plugins})
            full_env.update(env or {})
            self._log = open(self.log_path, "wb")  # closed in stop()
            self.process = subprocess.Popen([str(MCPHOST), "serve", "--port", str(self.port), *(args or [])],
                                            env=full_env, stdout=self._log, stderr=subprocess.STDOUT, cwd=cwd)
            try:
                self._wait_ready()
                return
            except _PortTaken:
                # Another program bound the free port first: a fresh one (unless it was asked for).
                if port is not None or attempt == 2:
                    raise

    def _wait_ready(self, timeout: float = 60.0) -> None:
        # Generous: on a busy machine (the suite's parallel workers on two cores) a start can take
        # tens of seconds; a healthy one returns as soon as the port accepts.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._log.close()
                text = self.log()
                error = _PortTaken if "already in use" in text.lower() else RuntimeError
                raise error(f"mcphost serve exited with {self.process.returncode}:\n{text}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    pass
                # Accepting is not enough: another test run may have taken the port between the
                # probe and this server's bind (this one then exits: "address already in use").
                if listens_on(self.process.pid, self.port):
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"mcphost serve did not start within {timeout}s:\n{self.log()}")

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        """Stop the process by its pid; return its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._log.close()
        return self.process.returncode

    # -- raw HTTP helpers ---------------------------------------------------------------------

    def headers(self, session_id: str | None = None, **extra: str) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": ACCEPT_BOTH}
        if session_id:
            headers["mcp-session-id"] = session_id
        headers.update({k.replace("_", "-"): v for k, v in extra.items()})
        return headers

    def initialize(self, client: httpx.Client, params: dict[str, Any] | None = None) -> str:
        """Initialize a session over raw HTTP; return its id (initialized notification sent too)."""
        response = client.post(self.url, headers=self.headers(), json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params or INIT_PARAMS})
        response.raise_for_status()
        session_id = response.headers["mcp-session-id"]
        client.post(self.url, headers=self.headers(session_id),
                    json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        return session_id


class ServerGroup:
    """``mcphost serve`` processes started alike (the same plugins, environment and config), all
    stopped by :meth:`stop`: the nodes of one cluster, say."""

    def __init__(self, tmp_path: Path, *, plugins: str, env: Mapping[str, str] | None = None,
                 config: str = "") -> None:
        self.tmp_path = tmp_path
        self.plugins = plugins
        self.env = dict(env or {})
        self.config = config
        self.servers: list[HttpServer] = []

    def start(self, port: int | None = None, plugins: str | None = None) -> HttpServer:
        server = HttpServer(self.tmp_path, plugins=plugins or self.plugins, env=self.env, config=self.config,
                            port=port)
        self.servers.append(server)
        return server

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


def session_headers(session_id: str | None = None, **extra: str) -> dict[str, str]:
    """The headers of a session-era (2025-11-25) POST, with the session's id once it has one."""
    sent = {"content-type": "application/json", "accept": ACCEPT_BOTH, "mcp-protocol-version": "2025-11-25"}
    if session_id:
        sent["mcp-session-id"] = session_id
    sent.update(extra)
    return sent


def stream_headers(session_id: str) -> dict[str, str]:
    """The headers of a session's GET stream."""
    return {"accept": "text/event-stream", "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}


def _url(server: HttpServer | str) -> str:
    return server if isinstance(server, str) else server.url


async def open_session(client: httpx.AsyncClient, server: HttpServer | str,
                       capabilities: dict[str, Any] | None = None) -> str:
    """``initialize`` and ``notifications/initialized`` over HTTP; the new session's id."""
    params = {**INIT_PARAMS, "capabilities": capabilities or {}}
    response = await client.post(_url(server), headers=session_headers(), json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    assert response.status_code == 200, response.text
    session_id = response.headers["mcp-session-id"]
    done = await client.post(_url(server), headers=session_headers(session_id),
                             json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert done.status_code == 202, done.text
    return session_id


async def session_call(client: httpx.AsyncClient, server: HttpServer | str, session_id: str, method: str,
                       params: dict[str, Any] | None = None, request_id: Any = 2) -> dict[str, Any]:
    """One request on a session; its reply, read from the SSE response."""
    response = await client.post(_url(server), headers=session_headers(session_id), json={
        "jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}})
    assert response.status_code == 200, f"{response.status_code} {response.text}"
    [reply] = [m for m in sse_messages(response.text) if m.get("id") == request_id]
    return reply


def sse_messages(text: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages in an SSE body (events with data), in order."""
    import json
    messages = []
    for block in text.split("\n\n"):
        data = [line[5:].lstrip() for line in block.split("\n") if line.startswith("data:")]
        if data and any(data):
            messages.append(json.loads("\n".join(data)))
    return messages


def sse_events(text: str) -> list[dict[str, str]]:
    """Every SSE event as a dict of its fields (id, event, data, retry), comments skipped."""
    events = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value
        if fields:
            events.append(fields)
    return events


def serve(tmp_path: Path, **options: Any) -> Iterator[HttpServer]:
    server = HttpServer(tmp_path, **options)
    try:
        yield server
    finally:
        server.stop()


# -- 2026-07-28 requests ---------------------------------------------------------------------------

def meta(**extra: Any) -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": CAPABILITIES, **extra}


def modern(method: str, params: dict[str, Any] | None = None, *, request_id: Any = 1,
           name: str | None = None, headers: dict[str, str | None] | None = None,
           meta_extra: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """A modern request (``request_id=None``: a notification) and its conformant headers.

    ``headers`` overrides them; a ``None`` value drops that header.
    """
    params = dict(params or {})
    params["_meta"] = {**meta(), **(meta_extra or {})}
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if request_id is not None:
        message["id"] = request_id
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    target = name if name is not None else params.get("name", params.get("uri"))
    if isinstance(target, str):
        sent["Mcp-Name"] = target
    for key, value in (headers or {}).items():
        for existing in [k for k in sent if k.lower() == key.lower()]:
            del sent[existing]
        if value is not None:
            sent[key] = value
    return message, sent


def messages_of(response: httpx.Response) -> list[dict[str, Any]]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return sse_messages(response.text)
    return [response.json()] if response.content else []


def reply(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC reply in a JSON or SSE response body."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        [message] = [m for m in sse_messages(response.text) if "id" in m]
        return message
    return response.json()  # type: ignore[no-any-return]


def modern_call(server: HttpServer, client: httpx.Client, message: dict[str, Any], **headers: str
                ) -> httpx.Response:
    params = message.get("params") or {}
    payload, sent = modern(message["method"], params, request_id=message["id"])
    sent.update({k.replace("_", "-"): v for k, v in headers.items()})
    return client.post(server.url, headers=sent, json=payload)


# -- plugins for a server subprocess ----------------------------------------------------------------

def quota_env(root: Path) -> dict[str, str]:
    """Make the ``httpquota`` plugin importable by a server subprocess (a fake dist-info)."""
    site = root / "quota-site"
    if not site.is_dir():
        make_distribution(site, "mcphost-http-quota", "0.0.1", {"httpquota": "tests.support.http_plugins.quota"}, {})
    paths = [str(site), str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(paths)}
