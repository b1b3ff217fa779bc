"""The host's browser cookie (binding.py): signed with a key derived from the vault's, refused when
altered, expired or signed with another key; the host login's settings are checked."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from mcphost_proxy.binding import open_cookie, set_cookie, sign_cookie
from mcphost_proxy.oauth import Vault
from mcphost_proxy.settings import ProxyConfig

from mcphost.builtin.memory import MemoryBackend


def vault(key: str | None = None) -> Vault:
    return Vault(SimpleNamespace(backend=MemoryBackend()), key)


async def test_a_cookie_opens_only_as_signed_and_unexpired() -> None:
    mine = vault("k" * 40)
    claims = {"iss": "https://idp.example.com", "sub": "alice", "exp": time.time() + 60}
    cookie = await sign_cookie(mine, claims)
    assert await open_cookie(mine, cookie) == claims
    body, _, mac = cookie.partition(".")
    forged = await sign_cookie(mine, {**claims, "sub": "bob"})
    assert await open_cookie(mine, forged.partition(".")[0] + "." + mac) is None  # bob's claims, alice's mac
    assert await open_cookie(vault("o" * 40), cookie) is None  # another host's key
    assert await open_cookie(mine, await sign_cookie(mine, {**claims, "exp": time.time() - 1})) is None
    for junk in (None, "", "abc", "a.b.c", body + "."):
        assert await open_cookie(mine, junk) is None


async def test_with_the_backend_key_ring_every_process_on_it_accepts_the_cookie() -> None:
    backend = MemoryBackend()
    one, two = Vault(SimpleNamespace(backend=backend)), Vault(SimpleNamespace(backend=backend))
    cookie = await sign_cookie(one, {"sub": "alice", "exp": time.time() + 60})
    assert (await open_cookie(two, cookie) or {}).get("sub") == "alice"


def test_cookie_attributes() -> None:
    made = set_cookie("mcphost_login", "v", 900, secure=True)
    assert made == "mcphost_login=v; Path=/oauth; Max-Age=900; HttpOnly; SameSite=Lax; Secure"
    assert "Secure" not in set_cookie("mcphost_login", "v", 900, secure=False)


def test_browser_login_settings_are_checked() -> None:
    config = ProxyConfig.model_validate({"browser_login": {"issuer": "https://idp.example.com",
                                                           "client_id": "gw"}})
    assert config.browser_login is not None and config.browser_login.cookie_lifetime == 900
    with pytest.raises(Exception, match="client_id"):
        ProxyConfig.model_validate({"browser_login": {"issuer": "https://idp.example.com"}})
    with pytest.raises(Exception, match="issuer"):
        ProxyConfig.model_validate({"browser_login": {"issuer": "idp", "client_id": "gw"}})
