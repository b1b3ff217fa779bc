"""Helpers for the mcphost-jwt tests: real keys and signed tokens, an identity-provider stub served over
real HTTP on loopback, and a real ``mcphost serve`` subprocess (see conftest.py for the fixtures)."""

from __future__ import annotations

import json
import ssl
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from mcphost.testing import ServeProcess, free_port  # noqa: F401  (free_port: the tests import it from here)

AUDIENCE = "https://mcp.example.test/mcp"
MCPHOST = Path(sys.executable).parent / "mcphost"


# -- keys and tokens ----------------------------------------------------------------------------------

@dataclass
class Key:
    """A private key, its kid and algorithm, and its public JWK."""

    private: Any
    kid: str
    alg: str

    @property
    def jwk(self) -> dict[str, Any]:
        public = self.private.public_key()
        if self.alg.startswith(("RS", "PS")):
            data = RSAAlgorithm.to_jwk(public, as_dict=True)
        elif self.alg.startswith("ES"):
            data = ECAlgorithm.to_jwk(public, as_dict=True)
        else:
            data = OKPAlgorithm.to_jwk(public, as_dict=True)
        return {**data, "kid": self.kid, "use": "sig", "alg": self.alg}

    def sign(self, claims: dict[str, Any], **header: Any) -> str:
        headers = {"kid": self.kid, **header}
        if headers.get("kid") is None:
            headers.pop("kid")
        return jwt.encode(claims, self.private, algorithm=self.alg, headers=headers)






def claims_for(issuer: str, audience: str = AUDIENCE, **overrides: Any) -> dict[str, Any]:
    """Claims of a valid access token; ``overrides`` replace (None removes) members."""
    now = int(time.time())
    claims: dict[str, Any] = {"iss": issuer, "sub": "user-42", "aud": audience, "client_id": "client-7",
                              "scope": "mcp:tools mcp:read", "iat": now, "exp": now + 300,
                              "jti": uuid.uuid4().hex}
    for name, value in overrides.items():
        if value is None:
            claims.pop(name, None)
        else:
            claims[name] = value
    return claims


# -- the identity provider stub ------------------------------------------------------------------------

Route = Callable[["Seen"], tuple[int, dict[str, str], bytes]]


@dataclass
class Seen:
    """One request the stub received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Idp:
    """The stub: ``routes`` maps a path to a handler; ``seen`` lists the requests received."""

    url: str
    routes: dict[str, Route] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    delay: float = 0.0

    @property
    def issuer(self) -> str:
        return self.url

    def requests_to(self, path: str) -> int:
        return sum(1 for s in self.seen if s.path == path)

    def serve_json(self, path: str, document: Any, status: int = 200) -> None:
        body = json.dumps(document).encode()
        self.routes[path] = lambda seen: (status, {"content-type": "application/json"}, body)

    def serve_jwks(self, *keys: Key, path: str = "/jwks") -> None:
        self.serve_json(path, {"keys": [k.jwk for k in keys]})

    def serve_discovery(self, jwks_path: str = "/jwks", issuer: str | None = None,
                        path: str = "/.well-known/openid-configuration", **extra: Any) -> None:
        self.serve_json(path, {"issuer": issuer or self.issuer, "jwks_uri": self.url + jwks_path, **extra})


def _handler(idp: Idp) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _handle(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            seen = Seen(self.command, self.path.split("?")[0], {k.lower(): v for k, v in self.headers.items()}, body)
            idp.seen.append(seen)
            if idp.delay:
                time.sleep(idp.delay)
            route = idp.routes.get(seen.path)
            status, headers, payload = route(seen) if route else (404, {"content-type": "text/plain"}, b"not found")
            try:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                if not {"content-length", "transfer-encoding"} & {k.lower() for k in headers}:
                    self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass

        do_GET = do_POST = _handle

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # a client that hung up (the refusal and timeout tests do): nothing to report
        super().handle_error(request, client_address)  # type: ignore[arg-type]


def start_idp(ssl_context: ssl.SSLContext | None = None, host: str = "127.0.0.1") -> tuple[Idp, _Server]:
    server = _Server((host, 0), _handler(Idp("")))
    port = server.server_address[1]
    scheme = "https" if ssl_context else "http"
    idp = Idp(f"{scheme}://{host}:{port}")
    server.RequestHandlerClass = _handler(idp)
    if ssl_context is not None:
        server.socket = ssl_context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return idp, server



# -- a real mcphost serve -----------------------------------------------------------------------------

class McphostServer(ServeProcess):
    """``mcphost serve`` on a free loopback port with the given plugins and config file text."""

    def __init__(self, tmp_path: Path, config: str, *, plugins: str = "demo,jwt", path: str = "/mcp") -> None:
        super().__init__(tmp_path, config, plugins=plugins, path=path)


def toml_section(values: dict[str, Any]) -> str:
    """``[plugins.jwt]`` as TOML text (values are strings, numbers, booleans or lists of strings)."""
    lines = ["[plugins.jwt]"]
    for key, value in values.items():
        lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


# -- talking to a server over raw HTTP ------------------------------------------------------------------

ACCEPT = "application/json, text/event-stream"
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "jwt-tests", "version": "0"}}


def post(server: McphostServer, message: dict[str, Any], token: str | None = None, session: str | None = None,
         **headers: str) -> httpx.Response:
    sent = {"content-type": "application/json", "accept": ACCEPT, **headers}
    if token is not None:
        sent["authorization"] = f"Bearer {token}"
    if session is not None:
        sent["mcp-session-id"] = session
    with httpx.Client(timeout=10) as client:
        return client.post(server.url, headers=sent, content=json.dumps(message))


def result(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, (response.status_code, response.text)
    text = response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
        text = data[-1]
    message = json.loads(text)
    assert "result" in message, message
    return message["result"]


def initialize(server: McphostServer, token: str) -> str:
    response = post(server, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, token)
    result(response)
    session = response.headers["mcp-session-id"]
    assert post(server, {"jsonrpc": "2.0", "method": "notifications/initialized"}, token, session).status_code == 202
    return session
