"""Throwaway servers for tests: ``redis-server`` and a ``haproxy`` in front of several nodes.

Each runs on free loopback ports with a private directory and is stopped by its pid. It never
touches a Redis the machine already runs (6379 or any other port), and only the process started
here is signalled. ``RedisServer.restart()`` brings Redis back on the same port and directory,
which is how the fault tests simulate an outage. ``Haproxy`` runs the configuration shipped in
``deploy/haproxy.cfg`` with only its addresses replaced.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import mcphost
from mcphost.testing import free_port, listens_on

from .backend import RedisSettings
from .settings import RedisConfig


def redis_server_path() -> str | None:
    return shutil.which("redis-server")


_prefixes = itertools.count()


def redis_settings(url: str, **overrides: Any) -> RedisSettings:
    """Settings for a test backend: short TTLs and a fresh key prefix, so backends sharing one
    server never see each other's keys."""
    options: dict[str, Any] = {"prefix": f"t{next(_prefixes)}:", "session_ttl": 60.0, "stream_max_events": 1000,
                               "stream_max_age": 60.0}
    options.update(overrides)
    settings = RedisConfig(url=url, **options).resolve(mcphost.ServerSettings())
    assert settings is not None
    return settings


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
        """Start redis-server (the constructor does); a second call while it runs does nothing."""
        if self.process is not None and self.process.poll() is None:
            return
        self.process = subprocess.Popen(self.argv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}: {self.log()}")
            # Its own PONG: not one from a server another test run started on the port meanwhile.
            if self.ping() and listens_on(self.process.pid, self.port):
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


def haproxy_path() -> str | None:
    return shutil.which("haproxy") or next(
        (path for path in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy") if os.access(path, os.X_OK)), None)


class Haproxy:
    """haproxy on a free loopback port, balancing over ``backends`` (loopback ports).

    ``template`` is a configuration such as ``deploy/haproxy.cfg``: its ``bind`` line and its
    ``server`` lines are replaced; every other option is used as written.
    """

    def __init__(self, directory: Path, template: str, backends: list[int], *, port: int | None = None) -> None:
        binary = haproxy_path()
        if binary is None:
            raise RuntimeError("haproxy is not installed (scripts/ensure-tools installs it)")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.backends = list(backends)
        lines: list[str] = []
        servers_written = False
        for line in template.splitlines():
            stripped = line.strip()
            if stripped.startswith("bind "):
                line = f"    bind 127.0.0.1:{self.port}"
            elif stripped.startswith("server "):
                if servers_written:
                    continue
                servers_written = True
                lines.extend(f"    server node{n + 1} 127.0.0.1:{p}" for n, p in enumerate(self.backends))
                continue
            lines.append(line)
        if not servers_written:
            raise ValueError("the haproxy template has no server line")
        # No daemon, no chroot or user switch: a plain child process of the test.
        text = re.sub(r"^\s*(daemon|chroot|user|group|stats socket)\b.*$", "", "\n".join(lines), flags=re.M)
        self.config_path = self.directory / f"haproxy-{self.port}.cfg"
        self.config_path.write_text(text + "\n", encoding="utf-8")
        self.log_path = self.directory / f"haproxy-{self.port}.log"
        check = subprocess.run([binary, "-c", "-f", str(self.config_path)], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"haproxy refused the configuration:\n{check.stdout}{check.stderr}")
        self._log = open(self.log_path, "wb")  # closed in stop()
        self.process = subprocess.Popen([binary, "-db", "-f", str(self.config_path)], stdout=self._log,
                                        stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"haproxy exited with {self.process.returncode}: {self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    pass
                if listens_on(self.process.pid, self.port):
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"haproxy did not listen within 10s: {self.log()}")

    @property
    def url(self) -> str:
        # localhost, not 127.0.0.1: the conformance suite's dns-rebinding scenario needs the name.
        return f"http://localhost:{self.port}/mcp"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        self._log.close()


__all__ = ["Haproxy", "RedisServer", "free_port", "haproxy_path", "redis_server_path", "redis_settings"]
