"""The issuer's signing keys: discovered, fetched, cached, refreshed, rate-limited.

Keys are fetched on first use and kept for ``jwks_cache_seconds``. A token naming a key id the
cache does not hold causes one refresh (the issuer may have rotated its keys), but never more
than one per ``jwks_min_refresh_seconds``, so a flood of tokens with made-up key ids cannot turn
into a flood of requests to the identity provider. Concurrent requests share one fetch. When a
refresh fails the keys already held stay in use; with no keys at all every token is refused
with :class:`JwksUnavailable` (503) until a fetch succeeds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from jwt import PyJWK
from jwt.exceptions import PyJWKError

from mcphost_jwt.fetch import GuardedFetcher, IdentityProviderUnavailable

log = logging.getLogger("mcphost_jwt")

#: Keys read from one JWKS at most by default (``[plugins.jwt] max_jwks_keys``); the rest are
#: ignored, and a JWKS holding more is logged as an error naming the setting.
MAX_KEYS = 100

# Which key type (and curve) each algorithm verifies with.
_KEY_TYPES: dict[str, tuple[str, frozenset[str] | None]] = {
    **{alg: ("RSA", None) for alg in ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")},
    "ES256": ("EC", frozenset({"P-256"})),
    "ES384": ("EC", frozenset({"P-384"})),
    "ES512": ("EC", frozenset({"P-521"})),
    "EdDSA": ("OKP", frozenset({"Ed25519", "Ed448"})),
}


class JwksUnavailable(IdentityProviderUnavailable):
    """No signing keys could be had from the issuer (the host answers 503)."""


def metadata_urls(issuer: str) -> list[str]:
    """Where the issuer's metadata may be: OpenID Connect Discovery first, then RFC 8414."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    return [
        urlunsplit((parts.scheme, parts.netloc, path + "/.well-known/openid-configuration", "", "")),
        urlunsplit((parts.scheme, parts.netloc, "/.well-known/oauth-authorization-server" + path, "", "")),
    ]


async def discover_jwks_uri(fetcher: GuardedFetcher, issuer: str) -> str:
    """The ``jwks_uri`` from the issuer's metadata; the document must name exactly this issuer."""
    for url in metadata_urls(issuer):
        answer = await fetcher.request("GET", url)
        if answer.status == 404:
            continue
        if answer.status != 200:
            raise JwksUnavailable(f"issuer metadata at {url} answered HTTP {answer.status}")
        document = _json_object(answer.body, f"issuer metadata at {url}")
        if document.get("issuer") != issuer:
            raise JwksUnavailable(f"issuer metadata at {url} names another issuer; refusing its keys")
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str) or not jwks_uri:
            raise JwksUnavailable(f"issuer metadata at {url} has no jwks_uri")
        return jwks_uri
    raise JwksUnavailable(f"no metadata found for issuer {issuer} (tried {', '.join(metadata_urls(issuer))}); "
                          "set jwks_uri")


@dataclass(frozen=True)
class SigningKey:
    """One public key of the issuer, with what its JWK says about its use."""

    kid: str | None
    kty: str
    crv: str | None
    alg: str | None
    key: Any  # a cryptography public key object

    def verifies(self, alg: str) -> bool:
        """Whether this key may verify a signature made with ``alg``."""
        kty, curves = _KEY_TYPES.get(alg, ("", None))
        if self.kty != kty or (curves is not None and self.crv not in curves):
            return False
        return self.alg is None or self.alg == alg


def parse_jwks(body: bytes, where: str, max_keys: int = MAX_KEYS) -> list[SigningKey]:
    """The usable signature keys of a JWK Set (symmetric and encryption keys are skipped).

    Only the first ``max_keys`` entries are read. A set holding more is an error in the log that
    names the setting: tokens signed with the keys beyond it are refused, never silently.
    """
    document = _json_object(body, where)
    entries = document.get("keys")
    if not isinstance(entries, list):
        raise JwksUnavailable(f"{where} is not a JWK Set (no keys list)")
    if len(entries) > max_keys:
        log.error("%s holds %d keys, more than [plugins.jwt] max_jwks_keys = %d: only the first %d are used, "
                  "so tokens signed with the others are refused; raise max_jwks_keys", where, len(entries),
                  max_keys, max_keys)
    keys: list[SigningKey] = []
    for entry in entries[:max_keys]:
        if not isinstance(entry, dict) or entry.get("kty") not in ("RSA", "EC", "OKP"):
            continue
        if entry.get("use", "sig") != "sig":
            continue
        alg = entry.get("alg")
        if alg is not None and alg not in _KEY_TYPES:
            continue  # a key meant for an algorithm we never accept (HS256, none, ...)
        kid = entry.get("kid")
        public = {k: v for k, v in entry.items() if k not in ("d", "p", "q", "dp", "dq", "qi", "oth")}
        try:
            parsed = PyJWK(public).key
        except (PyJWKError, ValueError, TypeError, KeyError) as exc:
            log.warning("%s: skipping key %r: %s", where, str(kid)[:64], exc)
            continue
        keys.append(SigningKey(kid=kid if isinstance(kid, str) else None, kty=entry["kty"],
                               crv=entry.get("crv"), alg=alg, key=parsed))
    return keys


class KeySet:
    """The issuer's keys, fetched through ``fetcher`` (see the module docstring)."""

    def __init__(self, fetcher: GuardedFetcher, *, issuer: str, jwks_uri: str | None = None,
                 cache_seconds: float = 600.0, min_refresh_seconds: float = 10.0,
                 clock: Callable[[], float] = time.monotonic, max_keys: int = MAX_KEYS) -> None:
        self.fetcher = fetcher
        self.issuer = issuer
        self.configured_uri = jwks_uri
        self.cache_seconds = cache_seconds
        self.min_refresh_seconds = min_refresh_seconds
        self.clock = clock
        self.max_keys = max_keys
        self.keys: list[SigningKey] | None = None
        self.fetches = 0  # how many times the JWKS was requested (tests and metrics)
        self._jwks_uri = jwks_uri
        self._fetched_at = 0.0
        self._attempted_at: float | None = None
        self._generation = 0
        self._lock = asyncio.Lock()

    async def key(self, kid: str | None, alg: str) -> SigningKey | None:
        """The key for a token signed with ``alg`` naming ``kid``; None when the issuer has no such key."""
        now = self.clock()
        if self.keys is None or now - self._fetched_at >= self.cache_seconds:
            if self.keys is None or self._may_fetch(now):
                await self._refresh(self._generation)
        found = self._find(kid, alg)
        if found is None and self._may_fetch(self.clock()):
            await self._refresh(self._generation)  # maybe rotated: look once more
            found = self._find(kid, alg)
        return found

    def _may_fetch(self, now: float) -> bool:
        return self._attempted_at is None or now - self._attempted_at >= self.min_refresh_seconds

    def _find(self, kid: str | None, alg: str) -> SigningKey | None:
        candidates = [k for k in self.keys or () if k.verifies(alg)]
        if kid is not None:
            candidates = [k for k in candidates if k.kid == kid]
        # Without a kid the choice must be unambiguous.
        return candidates[0] if len(candidates) == 1 else None

    async def _refresh(self, seen: int) -> None:
        async with self._lock:
            if self._generation != seen:
                return  # another request fetched while this one waited
            now = self.clock()
            if not self._may_fetch(now):
                if self.keys is None:
                    raise JwksUnavailable("the issuer's keys could not be fetched recently; retrying later")
                return
            self._attempted_at = now
            try:
                keys = await self._fetch()
            except IdentityProviderUnavailable as exc:
                if self.configured_uri is None:
                    self._jwks_uri = None  # discover again next time
                if self.keys is None:
                    raise JwksUnavailable(str(exc)) from None
                log.warning("could not refresh the issuer's keys, keeping the %d held: %s", len(self.keys), exc)
                return
            self.keys = keys
            self._fetched_at = self.clock()
            self._generation += 1

    async def _fetch(self) -> list[SigningKey]:
        if self._jwks_uri is None:
            self._jwks_uri = await discover_jwks_uri(self.fetcher, self.issuer)
        self.fetches += 1
        answer = await self.fetcher.request("GET", self._jwks_uri)
        if answer.status != 200:
            raise JwksUnavailable(f"JWKS at {self._jwks_uri} answered HTTP {answer.status}")
        keys = parse_jwks(answer.body, f"JWKS at {self._jwks_uri}", self.max_keys)
        log.info("fetched %d signing key(s) from %s", len(keys), self._jwks_uri)
        return keys


def _json_object(body: bytes, where: str) -> dict[str, Any]:
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise JwksUnavailable(f"{where} is not JSON") from None
    if not isinstance(document, dict):
        raise JwksUnavailable(f"{where} is not a JSON object")
    return document
