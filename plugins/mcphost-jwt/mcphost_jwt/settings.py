"""The ``[plugins.jwt]`` section, declared once (:class:`JwtSettings`), and the settings the verifier uses.

The model holds every key's type, default and limit, and the checks that span keys (a section with
any key needs an issuer; an introspection endpoint needs client credentials; URLs must be HTTPS unless
``allow_insecure``; ``ca_file`` must exist): the host makes them all before it starts, each problem
naming the key. :func:`load_settings` adds what needs the host (the audience falls back to ``[server]
resource_url``) and hands the verifier :class:`Settings`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, model_validator

import mcphost
from mcphost import ConfigError

#: The entry-point name, and so the config section ``[plugins.jwt]``.
PLUGIN_NAME = "jwt"

#: Signature algorithms a configuration may allow: asymmetric only. ``none`` and the HMAC family
#: (HS256...) are never accepted: a verifier holding only public keys must not treat one as a secret.
SUPPORTED_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
Algorithm = Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
DEFAULT_ALGORITHMS: tuple[Algorithm, ...] = ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")

MAX_LEEWAY = 60.0

# RFC 6749 scope-token: printable ASCII without space, double quote or backslash.
_SCOPE_TOKEN = r"^[\x21\x23-\x5B\x5D-\x7E]+$"

Url = Annotated[str, Field(min_length=1, pattern="^[Hh][Tt][Tt][Pp][Ss]?://")]


class JwtSettings(mcphost.PluginSettings):
    """Bearer-token authentication: JWT access tokens verified against the issuer's keys (JWKS), opaque
    tokens through RFC 7662 introspection."""

    issuer: Annotated[Url | None, Field(description=(
        "The authorization server's issuer identifier; tokens must carry exactly this `iss`. Its discovery "
        "document gives the JWKS URL."))] = None
    audience: Annotated[Url | None, Field(description=(
        "The canonical URL of this MCP server (RFC 8707 resource); tokens must name it in `aud`. Default: "
        "[server] resource_url."))] = None
    jwks_uri: Annotated[Url | None, Field(description=(
        "Where the issuer publishes its signing keys. Default: discovered from the issuer's metadata."))] = None
    algorithms: Annotated[tuple[Algorithm, ...], Field(min_length=1, strict=False, description=(
        "Signature algorithms accepted (asymmetric only; never none or HS*)."))] = DEFAULT_ALGORITHMS
    leeway: Annotated[float, Field(ge=0, le=MAX_LEEWAY, description=(
        "Seconds of clock skew allowed on exp/nbf/iat."))] = 30.0
    required_scopes: Annotated[frozenset[Annotated[str, Field(pattern=_SCOPE_TOKEN)]], Field(
        strict=False, description="Scopes every token must carry; a token without them gets 403.")] = frozenset()
    introspection_endpoint: Annotated[Url | None, Field(description=(
        "RFC 7662 endpoint for opaque (non-JWT) tokens."))] = None
    client_id: Annotated[str | None, Field(min_length=1, description=(
        "This server's client id at the introspection endpoint."))] = None
    client_secret: Annotated[mcphost.EnvStr | None, Field(min_length=1, description=(
        "This server's client secret at the introspection endpoint (\"${VAR}\" reads it from the "
        "environment)."))] = None
    allow_insecure: Annotated[bool, Field(description=(
        "Development only: allow plain http and loopback/private addresses for discovery, JWKS and "
        "introspection."))] = False
    ca_file: Annotated[str | None, Field(min_length=1, description=(
        "PEM file of the certificate authorities trusted for the identity provider's HTTPS (default: the "
        "system's)."))] = None
    timeout: Annotated[float, Field(gt=0, le=60, description=(
        "Seconds one discovery, JWKS or introspection request may take."))] = 5.0
    jwks_cache_seconds: Annotated[float, Field(ge=1, description=(
        "Seconds fetched keys are used before they are fetched again."))] = 600.0
    max_jwks_keys: Annotated[int, Field(ge=1, le=10000, description=(
        "Keys read from the JWKS at most; a JWKS with more is logged as an error naming this setting."))] = 100
    jwks_min_refresh_seconds: Annotated[float, Field(ge=0, description=(
        "Least seconds between two JWKS fetches caused by unknown key ids or failures."))] = 10.0
    keep_subject_token: Annotated[bool, Field(description=(
        "Keep the caller's validated token on its principal (Principal.token) for plugins that exchange it "
        "(mcphost-proxy auth mode 'token-exchange', RFC 8693); never forwarded as such. Off by default."))] = False

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        # An absent (or empty) section passes: the plugin is then dormant ("not configured"). A section
        # with any key is meant to be used, so it must be usable.
        if not self.model_fields_set:
            return self
        if not self.issuer:
            raise ValueError("issuer is required: the authorization server whose tokens this server accepts")
        if self.introspection_endpoint and not (self.client_id and self.client_secret):
            raise ValueError("introspection_endpoint needs client_id and client_secret")
        if self.audience:
            _check_url("audience", self.audience, require_https=False)
        for key in ("issuer", "jwks_uri", "introspection_endpoint"):
            value = getattr(self, key)
            if value:
                _check_url(key, value, require_https=not self.allow_insecure)
        if self.ca_file is not None and not Path(self.ca_file).is_file():
            raise ValueError(f"ca_file: {self.ca_file} is not a readable file")
        return self

    @property
    def configured(self) -> bool:
        """Whether the section has any key (without one the plugin is dormant)."""
        return bool(self.model_fields_set)


class Settings(JwtSettings):
    """The section as the verifier uses it: the issuer present, the audience settled and canonical."""

    issuer: str
    audience: str


def canonical_resource(url: str) -> str:
    """The form audiences are compared in: scheme and host lower-cased, no fragment, no trailing ``/``.

    RFC 8707 resources are compared as URLs: ``HTTPS://MCP.Example.com/mcp/`` names the same server as
    ``https://mcp.example.com/mcp``. Path and query stay case-sensitive.
    """
    parts = urlsplit(url.strip())
    path = parts.path[:-1] if parts.path.endswith("/") else parts.path
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def load_settings(section: JwtSettings | Mapping[str, Any], *, resource_url: str | None = None,
                  source: str = "configuration") -> Settings:
    """The verifier's :class:`Settings` from the checked section (a mapping is checked first).

    ``resource_url`` is the host's ``[server] resource_url`` (when the host has one): the audience
    when the section names none. Raises ConfigError when there is none.
    """
    if not isinstance(section, JwtSettings):
        section = JwtSettings.model_validate(dict(section))
    where = f"{source}: [plugins.{PLUGIN_NAME}]"
    if not section.issuer:
        raise ConfigError(f"{where} issuer is required: the authorization server whose tokens this server accepts")
    audience = section.audience or resource_url
    if not audience:
        raise ConfigError(f"{where} audience is required (the canonical URL of this MCP server, for example "
                          f"https://mcp.example.com/mcp): tokens are accepted only when issued for it. Set "
                          f"[plugins.{PLUGIN_NAME}] audience or [server] resource_url")
    try:
        _check_url("audience", audience, require_https=False)
    except ValueError as exc:
        raise ConfigError(f"{where} {exc}") from None
    # Checked already (the model's validators): built without checking again, so a secret read from
    # the environment is not read a second time as if it were the file's text.
    return Settings.model_construct(section.model_fields_set | {"issuer", "audience"},
                                    **{**dict(section), "issuer": section.issuer,
                                       "audience": canonical_resource(audience)})


def _check_url(key: str, value: str, *, require_https: bool) -> None:
    """ValueError naming ``key`` when ``value`` is not an absolute http(s) URL fit to call."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise ValueError(f"{key}: {value!r} is not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{key}: {value!r} must be an absolute http(s) URL")
    if parts.fragment:
        raise ValueError(f"{key}: {value!r} must not have a fragment")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{key}: {value!r} must not carry credentials")
    if require_https and scheme != "https":
        raise ValueError(f"{key}: {value!r} must use https (allow_insecure = true permits http, "
                         f"for development only)")
