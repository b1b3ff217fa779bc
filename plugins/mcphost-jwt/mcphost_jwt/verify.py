"""From an ``Authorization`` header to a :class:`mcphost.Principal`, or a refusal that says why.

JWT access tokens are verified locally: an allowed asymmetric algorithm, a signature by one of
the issuer's keys, ``iss`` exactly the issuer, ``aud`` naming this server, ``exp`` present and in
the future, ``nbf``/``iat`` not in the future (within the leeway). Opaque tokens go to the RFC 7662
introspection endpoint when one is configured; its answer is held to the same issuer, audience
and time rules. Refusal descriptions are fixed texts: nothing from the token reaches a header.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote_plus

import jwt
from jwt import exceptions as jwt_errors

from mcphost import Forbidden, Principal, Refused, Unauthorized
from mcphost_jwt.fetch import GuardedFetcher, IdentityProviderUnavailable
from mcphost_jwt.jwks import KeySet
from mcphost_jwt.settings import Settings, canonical_resource

log = logging.getLogger("mcphost_jwt")

#: Longest bearer token looked at; longer ones are refused before any parsing.
MAX_TOKEN_CHARS = 16 * 1024
#: A verified JWT is remembered this many seconds (never past its ``exp``), so a client's next requests
#: skip parsing and the signature check; at most this many are remembered.
VERIFIED_CACHE_SECONDS = 60.0
VERIFIED_CACHE_SIZE = 4096

# RFC 6750 b64token.
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_UNSAFE_IN_HEADER = re.compile(r'[^\x20-\x7e]|["\\]')


def header_safe(text: str) -> str:
    """``text`` fit for a quoted WWW-Authenticate parameter: no quotes, backslashes, CR, LF or controls."""
    return _UNSAFE_IN_HEADER.sub("", text)[:200]


def invalid_token(description: str) -> Unauthorized:
    """401 with an RFC 6750 ``invalid_token`` challenge."""
    safe = header_safe(description)
    return Unauthorized(safe, challenge=f'Bearer error="invalid_token", error_description="{safe}"')


def insufficient_scope(needed: frozenset[str] | set[str]) -> Forbidden:
    """403 with an RFC 6750 ``insufficient_scope`` challenge listing every scope needed."""
    scopes = header_safe(" ".join(sorted(needed)))
    return Forbidden("insufficient scope", headers={
        "WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{scopes}", '
                            f'error_description="the token lacks a required scope"'})


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The bearer token of a request, None when it sends none (no header, or another scheme).

    The scheme is case-insensitive. A header holding several credentials joined by commas (as a
    proxy merging duplicate headers would send) is refused with 400: which one was meant cannot
    be known. Query parameters (``?access_token=``) are never read.
    """
    value = headers.get("authorization")
    if value is None:
        return None
    parts = [part.strip() for part in value.split(",")]
    schemes = [part.split(" ", 1)[0].lower() for part in parts if part]
    if "bearer" not in schemes:
        return None
    if len(parts) > 1:
        raise Refused("several credentials in one Authorization header", status=400, headers={
            "WWW-Authenticate": 'Bearer error="invalid_request", '
                                'error_description="send exactly one Authorization credential"'})
    _scheme, _, token = value.strip().partition(" ")
    token = token.strip(" ")
    if not token or len(token) > MAX_TOKEN_CHARS or not _TOKEN.fullmatch(token):
        raise invalid_token("malformed bearer token")
    return token


def scopes_of(claims: Mapping[str, Any]) -> frozenset[str]:
    """Scopes granted by a token: ``scope`` (space-separated, RFC 9068/7662) or ``scp`` (list or string)."""
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            return frozenset(value.split())
        if isinstance(value, list):
            return frozenset(item for item in value if isinstance(item, str))
    return frozenset()


class Authenticator:
    """Checks bearer tokens for one host (see the module docstring)."""

    def __init__(self, settings: Settings, fetcher: GuardedFetcher, keys: KeySet, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.fetcher = fetcher
        self.keys = keys
        self.clock = clock
        # sha256(token) -> (remember until, principal); insertion order is age order.
        self._verified: dict[bytes, tuple[float, Principal]] = {}

    async def authenticate(self, headers: Mapping[str, str]) -> Principal | None:
        """A principal for a valid token, None without one; Unauthorized/Forbidden/Refused otherwise.

        Raises IdentityProviderUnavailable when the keys or the introspection endpoint cannot be
        reached (the host answers 503).
        """
        token = bearer_token(headers)
        if token is None:
            return None
        principal = await self.verify(token)
        missing = self.settings.required_scopes - principal.scopes
        if missing:
            raise insufficient_scope(self.settings.required_scopes)
        if self.settings.keep_subject_token:  # for a token exchange by a plugin; the host never forwards it
            principal = dataclasses.replace(principal, token=token)
        return principal

    async def verify(self, token: str) -> Principal:
        """The principal ``token`` stands for; raises Unauthorized when it is not valid here."""
        remembered = self._recall(token)
        if remembered is not None:
            return remembered
        try:
            header: dict[str, Any] | None = jwt.get_unverified_header(token)
        except jwt_errors.DecodeError:
            header = None
        except jwt_errors.InvalidTokenError:  # PyJWT refuses critical header extensions it does not know
            raise invalid_token("token has critical header parameters this server does not understand") from None
        except (ValueError, TypeError, KeyError):
            raise invalid_token("malformed token") from None
        if header is None:
            if self.settings.introspection_endpoint:
                return await self.introspect(token)
            raise invalid_token("malformed token: not a JWT")
        claims = await self._verify_jwt(token, header)
        principal = self._principal(claims)
        self._remember(token, principal, claims["exp"])
        return principal

    def _recall(self, token: str) -> Principal | None:
        digest = hashlib.sha256(token.encode()).digest()
        entry = self._verified.get(digest)
        if entry is None:
            return None
        if entry[0] <= self.clock():
            del self._verified[digest]
            return None
        return entry[1]

    def _remember(self, token: str, principal: Principal, exp: float) -> None:
        until = min(float(exp), self.clock() + VERIFIED_CACHE_SECONDS)
        if len(self._verified) >= VERIFIED_CACHE_SIZE:
            del self._verified[next(iter(self._verified))]
        self._verified[hashlib.sha256(token.encode()).digest()] = (until, principal)

    async def _verify_jwt(self, token: str, header: Mapping[str, Any]) -> dict[str, Any]:
        settings = self.settings
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in settings.algorithms:
            raise invalid_token("token signature algorithm not allowed")
        if "crit" in header:
            raise invalid_token("token has critical header parameters this server does not understand")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise invalid_token("malformed token: kid is not a string")
        key = await self.keys.key(kid, alg)
        if key is None:
            raise invalid_token("token signed with a key the issuer does not publish")
        try:
            claims = jwt.decode(token, key.key, algorithms=[alg], issuer=settings.issuer, leeway=settings.leeway,
                                options={"require": ["exp", "iss"], "verify_aud": False})
        except jwt_errors.ExpiredSignatureError:
            raise invalid_token("token expired") from None
        except jwt_errors.ImmatureSignatureError:
            raise invalid_token("token not yet valid") from None
        except jwt_errors.MissingRequiredClaimError as exc:
            raise invalid_token(f"token has no {exc.claim} claim") from None
        except jwt_errors.InvalidIssuerError:
            raise invalid_token("token issued by another issuer") from None
        except jwt_errors.InvalidSignatureError:
            raise invalid_token("token signature does not verify") from None
        except jwt_errors.InvalidAlgorithmError:
            raise invalid_token("token signature algorithm not allowed") from None
        except jwt_errors.DecodeError:
            raise invalid_token("malformed token") from None
        except (jwt_errors.InvalidTokenError, ValueError, TypeError, KeyError):
            raise invalid_token("invalid token") from None
        self._check_audience(claims)
        if "cnf" in claims:
            raise invalid_token("token is bound to a key (DPoP or mTLS), which this server does not check")
        return claims

    def _check_audience(self, claims: Mapping[str, Any]) -> None:
        aud = claims.get("aud")
        audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else None
        if not audiences:
            raise invalid_token("token has no audience")
        if not any(isinstance(a, str) and canonical_resource(a) == self.settings.audience for a in audiences):
            raise invalid_token("token was issued for another resource (audience mismatch)")

    def _principal(self, claims: dict[str, Any]) -> Principal:
        client_id = claims.get("client_id", claims.get("azp"))
        client_id = client_id if isinstance(client_id, str) and client_id else None
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            subject = client_id
        if subject is None:
            raise invalid_token("token names no subject")
        exp = claims.get("exp")
        expires_at = float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None
        return Principal(subject=subject, issuer=self.settings.issuer, client_id=client_id,
                         scopes=scopes_of(claims), claims=claims, expires_at=expires_at)

    # -- RFC 7662 --------------------------------------------------------------------------

    async def introspect(self, token: str) -> Principal:
        """Ask the introspection endpoint about an opaque token."""
        settings = self.settings
        assert settings.introspection_endpoint and settings.client_id and settings.client_secret
        # RFC 6749 section 2.3.1: form-encode id and secret, then HTTP Basic.
        pair = f"{quote_plus(settings.client_id)}:{quote_plus(settings.client_secret)}".encode()
        answer = await self.fetcher.request(
            "POST", settings.introspection_endpoint,
            headers={"authorization": "Basic " + base64.b64encode(pair).decode("ascii")},
            data={"token": token, "token_type_hint": "access_token"})
        if answer.status != 200:
            raise IdentityProviderUnavailable(f"introspection endpoint answered HTTP {answer.status}")
        try:
            claims = json.loads(answer.body)
        except (ValueError, UnicodeDecodeError):
            raise IdentityProviderUnavailable("introspection endpoint answered something that is not JSON") from None
        if not isinstance(claims, dict) or not isinstance(claims.get("active"), bool):
            raise IdentityProviderUnavailable("introspection answer has no boolean active member")
        if claims["active"] is not True:
            raise invalid_token("token is not active")
        token_type = claims.get("token_type")
        if token_type is not None and str(token_type).lower() != "bearer":
            raise invalid_token("token is not a bearer access token")
        if "iss" in claims and claims["iss"] != settings.issuer:
            raise invalid_token("token issued by another issuer")
        now = self.clock()
        exp, nbf = claims.get("exp"), claims.get("nbf")
        if exp is not None and (not _number(exp) or exp + settings.leeway <= now):
            raise invalid_token("token expired")
        if nbf is not None and (not _number(nbf) or nbf - settings.leeway > now):
            raise invalid_token("token not yet valid")
        self._check_audience(claims)
        if "cnf" in claims:
            raise invalid_token("token is bound to a key (DPoP or mTLS), which this server does not check")
        claims.setdefault("iss", settings.issuer)
        return self._principal(claims)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
