"""mcphost-jwt: bearer-token authentication for mcphost's HTTP transport.

Install it and configure ``[plugins.jwt]`` (at least ``issuer``, and ``audience`` unless
``[server] resource_url`` is set): every HTTP request must then carry ``Authorization: Bearer``
with an access token from that issuer, issued for this server. JWTs are verified against the
issuer's published keys; opaque tokens are introspected (RFC 7662) when an introspection
endpoint is configured. See ``docs/auth-jwt.md``.

The entry point ``jwt`` names :class:`JwtPlugin`, which mcphost instantiates once per Host; the
verifier is built at startup, so a configuration problem stops the host before it serves.
"""

from __future__ import annotations

from typing import Any

import mcphost
from mcphost import Connection, Principal, Session, Unauthorized
from mcphost_jwt.fetch import MAX_RESPONSE_BYTES, GuardedFetcher, IdentityProviderUnavailable, UnsafeTarget
from mcphost_jwt.jwks import JwksUnavailable, KeySet
from mcphost_jwt.settings import PLUGIN_NAME, Settings, config_schema, load_settings
from mcphost_jwt.verify import Authenticator, bearer_token, header_safe

__all__ = [
    "MAX_RESPONSE_BYTES",
    "PLUGIN_NAME",
    "Authenticator",
    "GuardedFetcher",
    "IdentityProviderUnavailable",
    "JwksUnavailable",
    "JwtPlugin",
    "KeySet",
    "Settings",
    "UnsafeTarget",
    "bearer_token",
    "build_authenticator",
    "config_schema",
    "load_settings",
]


def build_authenticator(settings: Settings, *, fetcher: GuardedFetcher | None = None) -> Authenticator:
    """An Authenticator for ``settings`` with its own fetcher and key cache."""
    fetcher = fetcher or GuardedFetcher(allow_insecure=settings.allow_insecure, timeout=settings.timeout,
                                        ca_file=settings.ca_file)
    keys = KeySet(fetcher, issuer=settings.issuer, jwks_uri=settings.jwks_uri,
                  cache_seconds=settings.jwks_cache_seconds, min_refresh_seconds=settings.jwks_min_refresh_seconds)
    return Authenticator(settings, fetcher, keys)


class JwtPlugin:
    """The ``jwt`` plugin: one per Host, holding that host's verifier and key cache."""

    def __init__(self) -> None:
        self.settings: Settings | None = None
        self.authenticator: Authenticator | None = None

    def configure(self, host: Any) -> Authenticator:
        """Check ``[plugins.jwt]`` against the host and build the verifier (raises ConfigError)."""
        config = host.config
        self.settings = load_settings(host.plugin_config(PLUGIN_NAME),
                                      resource_url=getattr(config.server, "resource_url", None),
                                      source=str(config.path) if config.path else "configuration")
        self.authenticator = build_authenticator(self.settings)
        return self.authenticator

    @mcphost.hookimpl
    def mcphost_config_schema(self) -> dict[str, Any]:
        return config_schema()

    @mcphost.hookimpl
    def mcphost_startup(self, host: Any) -> None:
        self.configure(host)

    @mcphost.hookimpl
    async def mcphost_shutdown(self, host: Any) -> None:
        if self.authenticator is not None:
            await self.authenticator.fetcher.aclose()

    @mcphost.hookimpl
    async def mcphost_authenticate(self, request: Connection) -> Principal | None:
        authenticator = self.authenticator
        if authenticator is None:  # never started: refuse (503), never let a request through unchecked
            raise RuntimeError("mcphost-jwt was not started")
        return await authenticator.authenticate(request.headers)

    @mcphost.hookimpl
    def mcphost_connect(self, session: Session, request: Connection) -> None:
        # Fail closed: an HTTP request that no auth plugin vouched for is refused here, whatever the
        # host does with anonymous requests. stdio clients are local processes and carry no tokens.
        if request.transport == "http" and request.principal is None:
            challenge = "Bearer"
            if self.settings is not None and self.settings.required_scopes:
                challenge += f' scope="{header_safe(" ".join(sorted(self.settings.required_scopes)))}"'
            raise Unauthorized("a bearer token is required", challenge=challenge)

    @mcphost.hookimpl
    def mcphost_protected_resource_metadata(self, host: Any) -> dict[str, Any]:
        settings = self.settings
        if settings is not None:
            issuer, scopes = settings.issuer, settings.required_scopes
        else:
            section = host.plugin_config(PLUGIN_NAME)
            issuer, scopes = section.get("issuer"), frozenset(section.get("required_scopes", ()))
        return {"authorization_servers": [issuer] if issuer else [], "scopes_supported": sorted(scopes),
                "bearer_methods_supported": ["header"]}
