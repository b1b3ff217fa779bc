"""A throwaway ``redis-server`` for tests: a free loopback port, a private directory, stopped by pid.

It never touches a Redis the machine already runs (6379 or any other port): the port is
picked free, the data directory is the one given, and only the process started here is
signalled. ``restart()`` brings it back on the same port and directory, which is how the fault
tests simulate an outage.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from .backend import RedisSettings


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redis_server_path() -> str | None:
    return shutil.which("redis-server")


_prefixes = itertools.count()


def redis_settings(url: str, **overrides: Any) -> RedisSettings:
    """Settings for a test backend: short TTLs and a fresh key prefix, so backends sharing one
    server never see each other's keys."""
    options: dict[str, Any] = {"prefix": f"t{next(_prefixes)}:", "session_ttl": 60.0, "stream_max_events": 1000,
                               "stream_max_age": 60.0}
    options.update(overrides)
    return RedisSettings(url=url, **options)


class RedisServer:
    """One redis-server process. ``persistence`` is ``"none"`` or an ``appendfsync`` mode
    (``"always"``, ``"everysec"``) for an append-only file."""

    def __init__(self, directory: Path, *, port: int | None = None, persistence: str = "none",
                 extra: list[str] | None = None) -> None:
        binary = redis_server_path()
        if binary is None:
            raise RuntimeError("redis-server is not installed (scripts/ensure-tools installs it)")
        self.binary = binary
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.persistence = persistence
        self.extra = list(extra or [])
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.directory / f"redis-{self.port}.log"
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def argv(self) -> list[str]:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
                "--save", "", "--daemonize", "no", "--protected-mode", "yes", "--logfile", str(self.log_path)]
        if self.persistence == "none":
            args += ["--appendonly", "no"]
        else:
            args += ["--appendonly", "yes", "--appendfsync", self.persistence]
        return args + self.extra

    def start(self, timeout: float = 10.0) -> None:
        self.process = subprocess.Popen(self.argv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}: {self.log()}")
            if self.ping():
                return
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not answer PING within {timeout}s: {self.log()}")

    def ping(self, timeout: float = 0.5) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def command(self, *args: str, timeout: float = 2.0) -> bytes:
        """Send one command (inline protocol) and return the raw first reply."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            parts = [f"${len(a.encode())}\r\n{a}\r\n" for a in args]
            sock.sendall(f"*{len(args)}\r\n{''.join(parts)}".encode())
            return sock.recv(65536)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the process started here (by its pid) and wait for it to exit."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        os.kill(process.pid, sig)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(5)

    def restart(self) -> None:
        self.kill()
        self.start()

    def stop(self) -> None:
        self.kill(signal.SIGTERM)


__all__ = ["RedisServer", "free_port", "redis_server_path", "redis_settings"]
