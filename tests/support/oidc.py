"""A real OAuth 2.1 / OpenID Connect authorization server for end-to-end tests: panva's ``oidc-provider``
(pinned in plugins/mcphost-jwt/tests/oidc/package-lock.json) run with node on loopback.

Two scripts live beside the lock file: ``server.mjs`` (client credentials, introspection; the
mcphost-jwt tests) and ``authcode.mjs`` (authorization code + PKCE with development login pages,
refresh tokens; the mcphost-proxy per-user credential tests). The node modules are installed on first
use with ``npm ci`` (cached in oidc/node_modules, checked against the lock file). Without node, npm or
the npm registry these tests fail: they never skip.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mcphost.testing import free_port

OIDC_DIR = Path(__file__).resolve().parents[2] / "plugins" / "mcphost-jwt" / "tests" / "oidc"
_MARKER = OIDC_DIR / "node_modules" / ".mcphost-install-ok"  # npm ci wipes node_modules, and this with it


def _lock_digest() -> str:
    return hashlib.sha256((OIDC_DIR / "package-lock.json").read_bytes()).hexdigest()


@contextlib.contextmanager
def _install_lock() -> Iterator[None]:
    with open(OIDC_DIR / ".install.lock", "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def ensure_oidc_provider() -> str:
    """The node executable, with oidc/node_modules installed from the lock file; fails the test otherwise."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("node and npm are needed for the oidc-provider end-to-end tests (scripts/ensure-tools "
                    "installs them)")
    with _install_lock():
        if _MARKER.is_file() and _MARKER.read_text().strip() == _lock_digest():
            return node
        try:
            proc = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=OIDC_DIR,
                                  capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            pytest.fail(f"npm ci in {OIDC_DIR} failed (is the npm registry reachable?): {exc}")
        if proc.returncode != 0:
            pytest.fail(f"npm ci in {OIDC_DIR} exited {proc.returncode} (is the npm registry reachable?):\n"
                        f"{(proc.stderr or proc.stdout)[-3000:]}")
        _MARKER.write_text(_lock_digest() + "\n")
    return node


class AuthorizationServer:
    """``node oidc/SCRIPT PORT [ARGS...]`` on 127.0.0.1, stopped by its pid."""

    def __init__(self, node: str, script: str = "server.mjs", *args: str) -> None:
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen([node, str(OIDC_DIR / script), str(self.port), *args], cwd=OIDC_DIR,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.process.stdout is not None
        seen: list[str] = []
        for line in self.process.stdout:  # ends when the process exits
            seen.append(line)
            if line.strip() == "ready":
                break
        else:
            self.stop()
            pytest.fail("oidc-provider did not start:\n" + "".join(seen))
        # Keep draining its output so it never blocks on a full pipe.
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def token(self, resource: str, scope: str = "mcp:tools",
              client: tuple[str, str] = ("mcp-client", "mcp-client-secret")) -> str:
        """A client-credentials access token for ``resource``."""
        with httpx.Client(timeout=10) as http:
            response = http.post(self.issuer + "/token", auth=client, data={
                "grant_type": "client_credentials", "resource": resource, "scope": scope})
        assert response.status_code == 200, response.text
        return str(response.json()["access_token"])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
