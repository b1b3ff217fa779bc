"""The ``[plugins.jwt]`` section: its JSON Schema and the checked settings built from it.

The schema catches what it can before the host starts (a missing issuer, an HMAC algorithm, a
leeway above a minute); :func:`load_settings` adds the checks that need the host (the audience
falls back to ``[server] resource_url``) or more than a schema says (URLs that must be HTTPS).
Every problem is a :class:`mcphost.ConfigError` naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from mcphost import ConfigError

#: The entry-point name, and so the config section ``[plugins.jwt]``.
PLUGIN_NAME = "jwt"

#: Signature algorithms a configuration may allow: asymmetric only. ``none`` and the HMAC family
#: (HS256...) are never accepted: a verifier holding only public keys must not treat one as a secret.
SUPPORTED_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
DEFAULT_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")

DEFAULT_LEEWAY = 30.0
MAX_LEEWAY = 60.0
DEFAULT_TIMEOUT = 5.0
DEFAULT_JWKS_CACHE_SECONDS = 600.0
DEFAULT_JWKS_MIN_REFRESH_SECONDS = 10.0
DEFAULT_MAX_JWKS_KEYS = 100

# RFC 6749 scope-token: printable ASCII without space, double quote or backslash.
_SCOPE_TOKEN = r"^[\x21\x23-\x5B\x5D-\x7E]+$"


def config_schema() -> dict[str, Any]:
    """The JSON Schema of ``[plugins.jwt]``."""
    url = {"type": "string", "minLength": 1, "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://"}
    return {
        "type": "object",
        "title": "mcphost-jwt",
        "description": "Bearer-token authentication: JWT access tokens verified against the issuer's keys "
                       "(JWKS), opaque tokens through RFC 7662 introspection.",
        "properties": {
            "issuer": {**url, "description": "The authorization server's issuer identifier; tokens must carry "
                                             "exactly this `iss`. Its discovery document gives the JWKS URL."},
            "audience": {**url, "description": "The canonical URL of this MCP server (RFC 8707 resource); tokens "
                                               "must name it in `aud`. Default: [server] resource_url."},
            "jwks_uri": {**url, "description": "Where the issuer publishes its signing keys. Default: discovered "
                                               "from the issuer's metadata."},
            "algorithms": {
                "type": "array", "minItems": 1, "uniqueItems": True,
                "items": {"enum": list(SUPPORTED_ALGORITHMS)},
                "description": "Signature algorithms accepted (asymmetric only; never none or HS*). Default: "
                               + ", ".join(DEFAULT_ALGORITHMS) + ".",
            },
            "leeway": {"type": "number", "minimum": 0, "maximum": MAX_LEEWAY,
                       "description": f"Seconds of clock skew allowed on exp/nbf/iat (default {DEFAULT_LEEWAY:g})."},
            "required_scopes": {"type": "array", "uniqueItems": True,
                                "items": {"type": "string", "pattern": _SCOPE_TOKEN},
                                "description": "Scopes every token must carry; a token without them gets 403."},
            "introspection_endpoint": {**url, "description": "RFC 7662 endpoint for opaque (non-JWT) tokens."},
            "client_id": {"type": "string", "minLength": 1,
                          "description": "This server's client id at the introspection endpoint."},
            "client_secret": {"type": "string", "minLength": 1,
                              "description": "This server's client secret at the introspection endpoint."},
            "allow_insecure": {"type": "boolean",
                               "description": "Development only: allow plain http and loopback/private addresses "
                                              "for discovery, JWKS and introspection."},
            "ca_file": {"type": "string", "minLength": 1,
                        "description": "PEM file of the certificate authorities trusted for the identity "
                                       "provider's HTTPS (default: the system's)."},
            "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 60,
                        "description": f"Seconds one discovery, JWKS or introspection request may take "
                                       f"(default {DEFAULT_TIMEOUT:g})."},
            "jwks_cache_seconds": {"type": "number", "minimum": 1,
                                   "description": "Seconds fetched keys are used before they are fetched again "
                                                  f"(default {DEFAULT_JWKS_CACHE_SECONDS:g})."},
            "max_jwks_keys": {"type": "integer", "minimum": 1, "maximum": 10000,
                              "description": "Keys read from the JWKS at most; a JWKS with more is logged as an "
                                             f"error naming this setting (default {DEFAULT_MAX_JWKS_KEYS})."},
            "jwks_min_refresh_seconds": {
                "type": "number", "minimum": 0,
                "description": "Least seconds between two JWKS fetches caused by unknown key ids or failures "
                               f"(default {DEFAULT_JWKS_MIN_REFRESH_SECONDS:g}).",
            },
        },
        # An absent section passes, so hosts with the plugin installed but unconfigured still start
        # (they refuse every HTTP request, see JwtPlugin.configure); a section without issuer does not.
        "if": {"minProperties": 1},
        "then": {"required": ["issuer"]},
        "additionalProperties": False,
        "dependentRequired": {
            "introspection_endpoint": ["client_id", "client_secret"],
        },
    }


@dataclass(frozen=True)
class Settings:
    """The checked ``[plugins.jwt]`` section."""

    issuer: str
    audience: str
    jwks_uri: str | None = None
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    leeway: float = DEFAULT_LEEWAY
    required_scopes: frozenset[str] = frozenset()
    introspection_endpoint: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    allow_insecure: bool = False
    ca_file: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    jwks_cache_seconds: float = DEFAULT_JWKS_CACHE_SECONDS
    jwks_min_refresh_seconds: float = DEFAULT_JWKS_MIN_REFRESH_SECONDS
    max_jwks_keys: int = DEFAULT_MAX_JWKS_KEYS


def canonical_resource(url: str) -> str:
    """The form audiences are compared in: scheme and host lower-cased, no fragment, no trailing ``/``.

    RFC 8707 resources are compared as URLs: ``HTTPS://MCP.Example.com/mcp/`` names the same server as
    ``https://mcp.example.com/mcp``. Path and query stay case-sensitive.
    """
    parts = urlsplit(url.strip())
    path = parts.path[:-1] if parts.path.endswith("/") else parts.path
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def load_settings(section: Mapping[str, Any], *, resource_url: str | None = None,
                  source: str = "configuration") -> Settings:
    """Build :class:`Settings` from a section already checked against :func:`config_schema`.

    ``resource_url`` is the host's ``[server] resource_url`` (when the host has one): the audience
    when the section names none. Raises ConfigError for anything unusable.
    """
    where = f"{source}: [plugins.{PLUGIN_NAME}]"
    issuer = section.get("issuer")
    if not isinstance(issuer, str) or not issuer:
        raise ConfigError(f"{where} issuer is required: the authorization server whose tokens this server accepts")
    algorithms = tuple(section.get("algorithms", DEFAULT_ALGORITHMS))
    refused = [alg for alg in algorithms if alg not in SUPPORTED_ALGORITHMS]
    if refused:
        raise ConfigError(f"{where} algorithms: {', '.join(map(str, refused))} not allowed; only asymmetric "
                          f"signatures ({', '.join(SUPPORTED_ALGORITHMS)}) are accepted")
    if not algorithms:
        raise ConfigError(f"{where} algorithms must name at least one algorithm")
    leeway = float(section.get("leeway", DEFAULT_LEEWAY))
    if not 0 <= leeway <= MAX_LEEWAY:
        raise ConfigError(f"{where} leeway must be between 0 and {MAX_LEEWAY:g} seconds")
    audience = section.get("audience") or resource_url
    if not audience:
        raise ConfigError(f"{where} audience is required (the canonical URL of this MCP server, for example "
                          f"https://mcp.example.com/mcp): tokens are accepted only when issued for it. Set "
                          f"[plugins.{PLUGIN_NAME}] audience or [server] resource_url")
    allow_insecure = bool(section.get("allow_insecure", False))
    _check_url(where, "audience", audience, require_https=False)
    _check_url(where, "issuer", issuer, require_https=not allow_insecure)
    for key in ("jwks_uri", "introspection_endpoint"):
        if section.get(key):
            _check_url(where, key, section[key], require_https=not allow_insecure)
    introspection = section.get("introspection_endpoint")
    if introspection and not (section.get("client_id") and section.get("client_secret")):
        raise ConfigError(f"{where} introspection_endpoint needs client_id and client_secret")
    ca_file = section.get("ca_file")
    if ca_file is not None and not Path(ca_file).is_file():
        raise ConfigError(f"{where} ca_file: {ca_file} is not a readable file")
    timeout = float(section.get("timeout", DEFAULT_TIMEOUT))
    if not 0 < timeout <= 60:
        raise ConfigError(f"{where} timeout must be above 0 and at most 60 seconds")
    return Settings(
        issuer=issuer,
        audience=canonical_resource(audience),
        jwks_uri=section.get("jwks_uri"),
        algorithms=algorithms,
        leeway=leeway,
        required_scopes=frozenset(section.get("required_scopes", ())),
        introspection_endpoint=introspection,
        client_id=section.get("client_id"),
        client_secret=section.get("client_secret"),
        allow_insecure=allow_insecure,
        ca_file=ca_file,
        timeout=timeout,
        jwks_cache_seconds=float(section.get("jwks_cache_seconds", DEFAULT_JWKS_CACHE_SECONDS)),
        jwks_min_refresh_seconds=float(section.get("jwks_min_refresh_seconds", DEFAULT_JWKS_MIN_REFRESH_SECONDS)),
        max_jwks_keys=int(section.get("max_jwks_keys", DEFAULT_MAX_JWKS_KEYS)),
    )


def _check_url(where: str, key: str, value: str, *, require_https: bool) -> None:
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise ConfigError(f"{where} {key}: {value!r} is not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where} {key}: {value!r} must be an absolute http(s) URL")
    if parts.fragment:
        raise ConfigError(f"{where} {key}: {value!r} must not have a fragment")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(f"{where} {key}: {value!r} must not carry credentials")
    if require_https and scheme != "https":
        raise ConfigError(f"{where} {key}: {value!r} must use https (allow_insecure = true permits http, "
                          f"for development only)")
