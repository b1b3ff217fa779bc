"""mcphost-jwt: bearer-token authentication for mcphost's HTTP transport.

Install it and configure ``[plugins.jwt]`` (at least ``issuer``, and ``audience`` unless
``[server] resource_url`` is set): every HTTP request must then carry ``Authorization: Bearer``
with an access token from that issuer, issued for this server. JWTs are verified against the
issuer's published keys; opaque tokens are introspected (RFC 7662) when an introspection
endpoint is configured. See ``docs/auth-jwt.md``.

The entry point ``jwt`` names :class:`JwtPlugin`, which mcphost instantiates once per Host; the
verifier is built at startup, so a configuration problem stops the host before it serves. Installed
without a ``[plugins.jwt]`` section the plugin is dormant: ``mcphost plugins`` lists it as "not
configured" (woken by ``[plugins.jwt] issuer``) and none of its hooks run, so the host has no auth
plugin and, as without one, refuses to listen beyond loopback unless told otherwise.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

import mcphost
from mcphost import Connection, Principal
from mcphost_jwt.settings import PLUGIN_NAME, JwtSettings, Settings, load_settings

if TYPE_CHECKING:
    from mcphost_jwt.fetch import MAX_RESPONSE_BYTES, GuardedFetcher, IdentityProviderUnavailable, UnsafeTarget
    from mcphost_jwt.jwks import JwksUnavailable, KeySet
    from mcphost_jwt.verify import Authenticator, bearer_token

#: Where the verifier's names live, loaded on first use (httpx and PyJWT take most of a second to
#: import): a CLI command that loads the plugins, with this one dormant, does not pay for them.
_LAZY = {"MAX_RESPONSE_BYTES": "fetch", "GuardedFetcher": "fetch", "IdentityProviderUnavailable": "fetch",
         "UnsafeTarget": "fetch", "JwksUnavailable": "jwks", "KeySet": "jwks", "Authenticator": "verify",
         "bearer_token": "verify"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"mcphost_jwt.{module}"), name)

log = logging.getLogger("mcphost_jwt")

__all__ = [
    "MAX_RESPONSE_BYTES",
    "PLUGIN_NAME",
    "Authenticator",
    "GuardedFetcher",
    "IdentityProviderUnavailable",
    "JwksUnavailable",
    "JwtPlugin",
    "JwtSettings",
    "KeySet",
    "NotConfigured",
    "Settings",
    "UnsafeTarget",
    "bearer_token",
    "build_authenticator",
    "load_settings",
]


class NotConfigured(RuntimeError):
    """The plugin is installed but has no configuration; the host answers 503 (never lets a request in)."""


def build_authenticator(settings: Settings, *, fetcher: GuardedFetcher | None = None) -> Authenticator:
    """An Authenticator for ``settings`` with its own fetcher and key cache."""
    from mcphost_jwt.fetch import GuardedFetcher
    from mcphost_jwt.jwks import KeySet
    from mcphost_jwt.verify import Authenticator
    fetcher = fetcher or GuardedFetcher(allow_insecure=settings.allow_insecure, timeout=settings.timeout,
                                        ca_file=settings.ca_file)
    keys = KeySet(fetcher, issuer=settings.issuer, jwks_uri=settings.jwks_uri,
                  cache_seconds=settings.jwks_cache_seconds, min_refresh_seconds=settings.jwks_min_refresh_seconds,
                  max_keys=settings.max_jwks_keys)
    return Authenticator(settings, fetcher, keys)


class JwtPlugin:
    """The ``jwt`` plugin: one per Host, holding that host's verifier and key cache."""

    def __init__(self) -> None:
        self.settings: Settings | None = None
        self.authenticator: Authenticator | None = None

    def configure(self, host: mcphost.Host) -> Authenticator | None:
        """Build the verifier from the checked ``[plugins.jwt]`` and the host (raises ConfigError).

        Without a ``[plugins.jwt]`` section at all the plugin stays unconfigured: the host still
        starts (stdio and in-process use need no tokens), but every HTTP request is refused with 503.
        """
        config = host.config
        section = host.settings(JwtSettings)
        if not section.configured:
            self.settings = self.authenticator = None
            log.error("mcphost-jwt is installed but [plugins.%s] is not configured: every HTTP request is refused "
                      "(503) until issuer and audience are set; disable the plugin with --disable-plugin %s if "
                      "this server should not check tokens", PLUGIN_NAME, PLUGIN_NAME)
            return None
        self.settings = load_settings(section, resource_url=config.server.resource_url,
                                      source=str(config.path) if config.path else "configuration")
        self.authenticator = build_authenticator(self.settings)
        return self.authenticator

    @mcphost.hookimpl
    def mcphost_settings(self) -> type[JwtSettings]:
        return JwtSettings

    @mcphost.hookimpl
    def mcphost_unconfigured(self, host: mcphost.Host) -> str | None:
        # An empty (or absent) section: dormant. A section with any key must be usable (JwtSettings
        # checks it before the host starts), so a half-written section never serves unchecked.
        return None if host.settings(JwtSettings).configured else f"[plugins.{PLUGIN_NAME}] issuer"

    @mcphost.hookimpl
    def mcphost_startup(self, host: mcphost.Host) -> None:
        self.configure(host)

    @mcphost.hookimpl
    async def mcphost_shutdown(self, host: mcphost.Host) -> None:
        if self.authenticator is not None:
            await self.authenticator.fetcher.aclose()

    @mcphost.hookimpl
    async def mcphost_authenticate(self, request: Connection) -> Principal | None:
        authenticator = self.authenticator
        if authenticator is None:  # not configured or never started: 503, never a request let through unchecked
            raise NotConfigured(f"mcphost-jwt has no [plugins.{PLUGIN_NAME}] configuration")
        return await authenticator.authenticate(request.headers)

    @mcphost.hookimpl
    def mcphost_protected_resource_metadata(self, host: mcphost.Host) -> dict[str, Any] | None:
        # Before startup (self.settings unset) the checked section answers alike.
        settings: JwtSettings = self.settings or host.settings(JwtSettings)
        issuer, scopes = settings.issuer, settings.required_scopes
        if not issuer:
            return None  # not configured: nothing to say
        return {"authorization_servers": [issuer], "scopes_supported": sorted(scopes),
                "bearer_methods_supported": ["header"]}
