"""Per-user credentials for HTTP upstreams (``[plugins.proxy.servers.NAME.auth] mode = "oauth"``).

Each principal signs in to each upstream once, in band: a call that needs an upstream the caller has
not authorized asks the caller's client for a URL-mode elicitation pointing at this host's own start
URL (``/oauth/start``), which redirects to the upstream's authorization server with state and PKCE;
the authorization server sends the browser back to the one callback (``/oauth/callback``), which
redeems the code and keeps the tokens in the :class:`Vault` (the host's backend, encrypted). The
authorization server is discovered the way MCP clients discover it: the upstream's 401 and its
``WWW-Authenticate`` (RFC 9728 protected resource metadata), then RFC 8414 / OpenID discovery; the
resource indicator (RFC 8707) is the upstream's URL. See docs/upstream-credentials.md.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import httpx2

import mcphost
from mcphost_proxy.settings import AuthConfig, ServerSettings

log = logging.getLogger("mcphost.proxy.oauth")

#: Where the vault's records and the pending sign-ins live in the backend (``put_value`` keys).
CREDENTIAL_PREFIX = "proxy-cred:"
STATE_PREFIX = "proxy-signin:"
#: The key ring the tokens are encrypted with when ``credentials_key`` is not set.
CREDENTIALS_RING = "credentials"
START_PATH = "/oauth/start"
CALLBACK_PATH = "/oauth/callback"
_PARAM = re.compile(r'([A-Za-z_]+)="([^"]*)"')


class SignInRequired(mcphost.ToolError):
    """The caller has no usable token for the upstream and could not be asked in band."""


class OAuthFailure(mcphost.ToolError):
    """Discovery, registration, a code redemption or a refresh failed (the message says which)."""


def principal_of(ctx: mcphost.Context) -> str:
    """The principal as the host keys it (the auth plugin's principal; anonymous callers by address)."""
    quota = getattr(ctx.session, "quota", None)
    if quota:
        return str(quota)
    principal = ctx.principal
    return "p:" + repr(principal.key) if principal is not None else "a:"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# -- the vault ----------------------------------------------------------------------------------------

class Vault:
    """Tokens per (principal, upstream) in the host's backend, sealed with AES-GCM.

    The key is ``[plugins.proxy] credentials_key`` when set, else the backend's key ring
    ``credentials`` (shared by every process on a shared backend). A record's key in the backend names
    the upstream and the principal (base64url); its value is ``nonce || ciphertext`` whose associated
    data is that key, so a record moved to another principal does not open.
    """

    def __init__(self, host: Any, key: str | None = None) -> None:
        self.host = host  # its backend is read when used (it is chosen as the host starts)
        self._key = hashlib.sha256(key.encode()).digest() if key else None

    @property
    def backend(self) -> Any:
        return self.host.backend

    async def _keys(self) -> list[bytes]:
        if self._key is not None:
            return [self._key]
        ring = await self.backend.keyring(CREDENTIALS_RING)
        now = time.time()
        active = [k.secret for k in ring if k.active_from <= now] or [ring[-1].secret]
        return active + [k.secret for k in ring if k.secret not in active]

    async def keys(self) -> list[bytes]:
        """The keys in use, newest first (the host's browser cookies are signed with keys derived from them)."""
        return await self._keys()

    @staticmethod
    def name(principal: str, upstream: str) -> str:
        return f"{CREDENTIAL_PREFIX}{upstream}:{_b64(principal.encode())}"

    async def seal(self, name: str, record: dict[str, Any]) -> bytes:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = secrets.token_bytes(12)
        key = (await self._keys())[0]
        return nonce + AESGCM(key).encrypt(nonce, json.dumps(record).encode(), name.encode())

    async def open(self, name: str, sealed: bytes) -> dict[str, Any] | None:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        for key in await self._keys():
            try:
                plain = AESGCM(key).decrypt(sealed[:12], sealed[12:], name.encode())
            except (InvalidTag, ValueError):
                continue
            value = json.loads(plain)
            return value if isinstance(value, dict) else None
        log.warning("a stored upstream credential (%s) does not open with the current key; it is ignored",
                    name.split(":")[1])
        return None

    async def put(self, principal: str, upstream: str, record: dict[str, Any]) -> None:
        name = self.name(principal, upstream)
        await self.backend.put_value(name, await self.seal(name, record))

    async def get(self, principal: str, upstream: str) -> dict[str, Any] | None:
        name = self.name(principal, upstream)
        sealed = await self.backend.get_value(name)
        return None if sealed is None else await self.open(name, sealed)

    async def delete(self, principal: str, upstream: str) -> bool:
        return bool(await self.backend.delete_value(self.name(principal, upstream)))

    async def entries(self) -> list[dict[str, Any]]:
        """Who is connected to what: principal, upstream, expiry (never a token)."""
        found = []
        for name in await self.backend.value_keys(CREDENTIAL_PREFIX):
            upstream, _, encoded = name[len(CREDENTIAL_PREFIX):].partition(":")
            sealed = await self.backend.get_value(name)
            record = None if sealed is None else await self.open(name, sealed)
            if record is None:
                continue
            found.append({"principal": _unb64(encoded).decode(errors="replace"), "upstream": upstream,
                          "expires_at": record.get("expires_at"), "refreshable": bool(record.get("refresh_token"))})
        return found


# -- discovery ----------------------------------------------------------------------------------------

@dataclass
class Metadata:
    """What discovery found for one upstream."""

    resource: str
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None
    revocation_endpoint: str | None
    scopes: tuple[str, ...]


def _well_known(base: str, name: str) -> list[str]:
    """RFC 8414 / RFC 9728 well-known URLs for ``base`` (path inserted after the well-known part), then
    the OpenID form (appended)."""
    parts = urlsplit(base)
    path = parts.path.rstrip("/")
    inserted = urlunsplit((parts.scheme, parts.netloc, f"/.well-known/{name}{path}", "", ""))
    return [inserted] if not path else [inserted, urlunsplit((parts.scheme, parts.netloc, f"{path}/.well-known/{name}",
                                                             "", ""))]


def challenge_metadata_url(header: str) -> str | None:
    """``resource_metadata`` of a ``WWW-Authenticate: Bearer`` challenge (RFC 9728 section 5.1)."""
    if not header.lower().startswith("bearer"):
        return None
    return dict(_PARAM.findall(header)).get("resource_metadata")


class Client:
    """The HTTP side of one oauth upstream: discovery, registration, code redemption, refresh."""

    def __init__(self, server: ServerSettings, redirect_uri: str) -> None:
        self.server = server
        self.auth: AuthConfig = server.auth
        self.redirect_uri = redirect_uri
        self.metadata: Metadata | None = None
        self.client_id = self.auth.client_id or self.auth.client_metadata_url
        self.client_secret = self.auth.client_secret
        self._lock = asyncio.Lock()

    def _check(self, url: str, what: str) -> str:
        parts = urlsplit(url)
        if parts.scheme == "https" or (parts.scheme == "http" and self.auth.allow_insecure_http):
            return url
        raise OAuthFailure(f"Upstream {self.server.name!r}: the {what} {url!r} is not https (allow_insecure_http "
                           f"= true permits http, for development only)")

    def _http(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(timeout=httpx2.Timeout(self.server.timeout), follow_redirects=False)

    async def _json(self, http: httpx2.AsyncClient, url: str) -> dict[str, Any] | None:
        response = await http.get(self._check(url, "metadata URL"), headers={"accept": "application/json"})
        if response.status_code != 200:
            return None
        value = response.json()
        return value if isinstance(value, dict) else None

    async def discover(self) -> Metadata:
        """The upstream's 401 -> its protected resource metadata -> its authorization server's metadata."""
        async with self._lock:
            if self.metadata is not None:
                return self.metadata
            url = self.server.url or ""
            async with self._http() as http:
                probe = await http.post(self._check(url, "upstream URL"), json={
                    "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                        "protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": {"name": "mcphost-proxy", "version": "0"}}},
                    headers={"accept": "application/json, text/event-stream"})
                pointed = challenge_metadata_url(probe.headers.get("www-authenticate", ""))
                if probe.status_code != 401:
                    log.info("upstream %s answered %d without a token; looking for its metadata anyway",
                             self.server.name, probe.status_code)
                candidates = [pointed] if pointed else _well_known(url, "oauth-protected-resource")
                prm = None
                for candidate in candidates:
                    prm = await self._json(http, candidate)
                    if prm is not None:
                        break
                servers = (prm or {}).get("authorization_servers") or []
                if not servers or not isinstance(servers[0], str):
                    raise OAuthFailure(f"Upstream {self.server.name!r} publishes no protected resource metadata "
                                       f"naming an authorization server (RFC 9728)")
                issuer = servers[0]
                as_meta = None
                for candidate in [*_well_known(issuer, "oauth-authorization-server"),
                                  *_well_known(issuer, "openid-configuration")]:
                    as_meta = await self._json(http, candidate)
                    if as_meta is not None and as_meta.get("authorization_endpoint"):
                        break
                if not as_meta or not as_meta.get("token_endpoint"):
                    raise OAuthFailure(f"Upstream {self.server.name!r}: authorization server {issuer} publishes "
                                       f"no metadata (RFC 8414 or OpenID discovery)")
            scopes = self.auth.scopes or tuple(str(s) for s in (prm or {}).get("scopes_supported") or ())
            self.metadata = Metadata(
                resource=str((prm or {}).get("resource") or url), issuer=issuer,
                authorization_endpoint=self._check(str(as_meta["authorization_endpoint"]), "authorization endpoint"),
                token_endpoint=self._check(str(as_meta["token_endpoint"]), "token endpoint"),
                registration_endpoint=as_meta.get("registration_endpoint"),
                revocation_endpoint=as_meta.get("revocation_endpoint"), scopes=scopes)
            return self.metadata

    async def client(self) -> str:
        """This host's client id there: configured, a metadata document URL, or registered (RFC 7591)."""
        metadata = await self.discover()
        if self.client_id:
            return self.client_id
        if not metadata.registration_endpoint:
            raise OAuthFailure(f"Upstream {self.server.name!r}: set [plugins.proxy.servers.{self.server.name}.auth] "
                               f"client_id (its authorization server offers no dynamic registration)")
        async with self._http() as http:
            response = await http.post(self._check(metadata.registration_endpoint, "registration endpoint"), json={
                "client_name": "mcphost", "redirect_uris": [self.redirect_uri],
                "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
                "token_endpoint_auth_method": "none"})
        if response.status_code not in (200, 201):
            raise OAuthFailure(f"Upstream {self.server.name!r}: dynamic registration refused ({response.status_code})")
        registered = response.json()
        self.client_id, self.client_secret = str(registered["client_id"]), registered.get("client_secret")
        return self.client_id

    def authorize_url(self, metadata: Metadata, client_id: str, state: str, verifier: str) -> str:
        challenge = _b64(hashlib.sha256(verifier.encode()).digest())
        query = {"response_type": "code", "client_id": client_id, "redirect_uri": self.redirect_uri, "state": state,
                 "code_challenge": challenge, "code_challenge_method": "S256", "resource": metadata.resource}
        if metadata.scopes:
            query["scope"] = " ".join(metadata.scopes)
        joiner = "&" if "?" in metadata.authorization_endpoint else "?"
        return metadata.authorization_endpoint + joiner + urlencode(query)

    async def grant(self, form: dict[str, str]) -> dict[str, Any]:
        """POST ``form`` to the token endpoint (client authentication added); the token record to keep."""
        metadata = await self.discover()
        client_id = await self.client()
        auth = None
        if self.client_secret:
            auth = httpx2.BasicAuth(client_id, self.client_secret)
        else:
            form = {**form, "client_id": client_id}
        async with self._http() as http:
            response = await http.post(metadata.token_endpoint, data={**form, "resource": metadata.resource},
                                       auth=auth or httpx2.USE_CLIENT_DEFAULT, headers={"accept": "application/json"})
        if response.status_code != 200:
            try:
                error = response.json().get("error", "")
            except ValueError:
                error = ""
            raise OAuthFailure(f"Upstream {self.server.name!r}: the authorization server refused the "
                               f"{form.get('grant_type')} grant ({response.status_code} {error})".rstrip())
        body = response.json()
        expires_in = body.get("expires_in")
        now = time.time()
        return {"access_token": str(body["access_token"]), "refresh_token": body.get("refresh_token"),
                "obtained_at": now,
                "expires_at": now + float(expires_in) if isinstance(expires_in, int | float) else None,
                "scope": body.get("scope")}


    async def revoke(self, record: dict[str, Any]) -> None:
        """Revoke the record's tokens at the authorization server (RFC 7009), when it offers that."""
        metadata = await self.discover()
        if not metadata.revocation_endpoint:
            return
        client_id = await self.client()
        auth = httpx2.BasicAuth(client_id, self.client_secret) if self.client_secret else None
        async with self._http() as http:
            for kind in ("refresh_token", "access_token"):
                token = record.get(kind)
                if token:
                    form = {"token": str(token), "token_type_hint": kind}
                    if auth is None:
                        form["client_id"] = client_id
                    await http.post(self._check(metadata.revocation_endpoint, "revocation endpoint"), data=form,
                                    auth=auth or httpx2.USE_CLIENT_DEFAULT)


def page(title: str, text: str, status: int = 200) -> tuple[str, int, dict[str, str]]:
    """The small HTML page the start and callback routes answer with."""
    import html

    body = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
            f"<body><h1>{html.escape(title)}</h1><p id='message'>{html.escape(text)}</p></body></html>")
    return body, status, {"content-type": "text/html; charset=utf-8", "cache-control": "no-store",
                          "referrer-policy": "no-referrer"}
