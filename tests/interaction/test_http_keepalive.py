"""Idle keep-alive connections: kept longer than clients keep theirs, and no obstacle to shutdown.

``[server] keep_alive_timeout`` (10 s) is above httpx's 5 s, so the client closes an idle
connection, never the server: otherwise a request written just as the server closes is lost (a
ReadError on the client). A SIGTERM still ends the server promptly with such a connection open.
"""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path

from tests.support.http_support import HttpServer

INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "keepalive", "version": "0"}}})


def request(port: int) -> bytes:
    return (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: {len(INIT)}\r\n\r\n{INIT}").encode()


def read_response(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        if not piece:
            return data
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length"))
    while len(body) < length:
        body += sock.recv(65536)
    return head


def test_an_idle_connection_outlives_a_client_pool_and_shutdown_is_still_prompt(tmp_path: Path):
    server = HttpServer(tmp_path, config="[server]\njson_response = true\n")
    try:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(request(server.port))
        assert read_response(sock).startswith(b"HTTP/1.1 200")
        time.sleep(6.5)  # past httpx's keep-alive expiry (5 s) and the old server-side 5 s
        sock.sendall(request(server.port))
        assert read_response(sock).startswith(b"HTTP/1.1 200"), "the idle connection was closed"
        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(15)
        assert time.monotonic() - started < 5, "shutdown waited on an idle keep-alive connection"
        assert server.process.returncode == 0, server.log()[-2000:]
        sock.close()
    finally:
        server.stop()
