"""Fixtures for the mcphost-jwt tests; the helpers they use live in jwt_support.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt_support import Idp, Key, McphostServer, start_idp


@pytest.fixture(scope="session")
def rsa_key() -> Key:
    return Key(rsa.generate_private_key(public_exponent=65537, key_size=2048), "rsa-1", "RS256")

@pytest.fixture(scope="session")
def other_rsa_key() -> Key:
    return Key(rsa.generate_private_key(public_exponent=65537, key_size=2048), "rsa-2", "RS256")

@pytest.fixture(scope="session")
def ec_key() -> Key:
    return Key(ec.generate_private_key(ec.SECP256R1()), "ec-1", "ES256")

@pytest.fixture(scope="session")
def ed_key() -> Key:
    return Key(ed25519.Ed25519PrivateKey.generate(), "ed-1", "EdDSA")

@pytest.fixture
def idp() -> Iterator[Idp]:
    """A running identity-provider stub on plain http over loopback (use allow_insecure)."""
    stub, server = start_idp()
    yield stub
    server.shutdown()
    server.server_close()

@pytest.fixture
def mcphost_server(tmp_path: Path) -> Iterator[Callable[..., McphostServer]]:
    """Factory: ``mcphost_server(config_text, plugins=..., path=...)``; ``{url}`` in the text is the
    server's own MCP URL. Every server started is stopped by its pid at teardown."""
    started: list[McphostServer] = []

    def start(config: str, **options: Any) -> McphostServer:
        server = McphostServer(tmp_path, config, **options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
