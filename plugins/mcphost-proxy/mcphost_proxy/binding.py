"""Who may complete a sign-in: the browser that opens a sign-in link must belong to the principal the
link was made for (MCP 2025-11-25, URL-mode elicitation: the server makes sure the user who completes
the flow is the one it started it for). Otherwise alice's link reaching bob would let bob bind his own
upstream account to alice's calls, and an attacker's link could make a victim bind the attacker's.

With ``[plugins.proxy.browser_login]`` the start link first signs the *browser* in with the host's own
OpenID provider (authorization code + PKCE, ``openid`` scope, a nonce) and compares the ID token's
subject (and issuer) with the principal the link was made for; only then does it redirect to the
upstream's authorization page. A mismatch shows a refusal and stores nothing (the link stays usable by
the right person until it expires). The browser keeps a host-signed cookie (HttpOnly, SameSite=Lax,
Secure unless ``allow_insecure_http``, ``cookie_lifetime`` seconds), so a second upstream does not ask
the host login again.

Without it, the start page names the principal and the upstream and asks for a click (a POST with a
double-submit token, so another site cannot make a browser complete a link unseen). In both cases the
redirect to the upstream sets a per-link cookie the callback requires: the code is only redeemed in
the browser that passed the check. See docs/upstream-credentials.md.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx2

from mcphost_proxy.oauth import START_PATH, STATE_PREFIX, OAuthFailure, Vault, _b64, page
from mcphost_proxy.settings import BrowserLoginConfig

log = logging.getLogger("mcphost.proxy.oauth")

LOGIN_CALLBACK_PATH = "/oauth/login/callback"
#: A browser login in progress (``put_value`` key prefix): the sign-in state it is for, nonce, verifier.
LOGIN_PREFIX = "proxy-login:"
#: The browser's sign-in to the host (host-signed: issuer, subject, expiry).
LOGIN_COOKIE = "mcphost_login"
COOKIE_PATH = "/oauth"

Reply = tuple[str, int, list[tuple[str, str]]]


def reply(found: tuple[Any, ...], *cookies: str) -> Reply:
    """``page()``'s answer (or a redirect) with ``Set-Cookie`` headers added."""
    body, status, headers = found
    return body, status, [*headers.items(), *(("set-cookie", c) for c in cookies)]


def redirect(location: str, *cookies: str, status: int = 302) -> Reply:
    return reply(("", status, {"location": location, "cache-control": "no-store",
                               "referrer-policy": "no-referrer"}), *cookies)


def set_cookie(name: str, value: str, max_age: float, *, secure: bool) -> str:
    parts = [f"{name}={value}", f"Path={COOKIE_PATH}", f"Max-Age={max(0, int(max_age))}", "HttpOnly",
             "SameSite=Lax"]
    return "; ".join([*parts, "Secure"] if secure else parts)


def flow_cookie(state: str) -> str:
    """The name of one link's cookie (several sign-ins may run in one browser at once)."""
    return "mcphost_flow_" + hashlib.sha256(state.encode()).hexdigest()[:12]


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


async def _mac_keys(vault: Vault) -> list[bytes]:
    return [hashlib.sha256(b"mcphost-proxy browser cookie\0" + key).digest() for key in await vault.keys()]


async def sign_cookie(vault: Vault, claims: dict[str, Any]) -> str:
    body = _b64(json.dumps(claims, separators=(",", ":")).encode())
    mac = hmac.new((await _mac_keys(vault))[0], body.encode(), hashlib.sha256).digest()
    return f"{body}.{_b64(mac)}"


async def open_cookie(vault: Vault, value: str | None) -> dict[str, Any] | None:
    """The claims of a cookie this host signed (any key of the ring), unexpired; None otherwise."""
    if not value or value.count(".") != 1:
        return None
    body, _, mac = value.partition(".")
    for key in await _mac_keys(vault):
        if hmac.compare_digest(_b64(hmac.new(key, body.encode(), hashlib.sha256).digest()), mac):
            claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            if isinstance(claims, dict) and isinstance(claims.get("exp"), int | float) and claims["exp"] > time.time():
                return claims
            return None
    return None


@dataclass
class Endpoints:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str


class BrowserLogin:
    """The host's own OpenID provider, as a relying party: signs a browser in and tells who it is."""

    def __init__(self, config: BrowserLoginConfig, redirect_uri: str) -> None:
        self.config = config
        self.redirect_uri = redirect_uri
        self.endpoints: Endpoints | None = None

    def _check(self, url: str, what: str) -> str:
        scheme = urlsplit(url).scheme
        if scheme == "https" or (scheme == "http" and self.config.allow_insecure_http):
            return url
        raise OAuthFailure(f"[plugins.proxy.browser_login]: the {what} {url!r} is not https (allow_insecure_http "
                           f"= true permits http, for development only)")

    async def discover(self) -> Endpoints:
        if self.endpoints is None:
            issuer = self.config.issuer.rstrip("/")
            url = self._check(issuer + "/.well-known/openid-configuration", "discovery URL")
            async with httpx2.AsyncClient(timeout=httpx2.Timeout(30), follow_redirects=False) as http:
                response = await http.get(url, headers={"accept": "application/json"})
            meta = response.json() if response.status_code == 200 else {}
            if not isinstance(meta, dict) or str(meta.get("issuer", "")).rstrip("/") != issuer:
                raise OAuthFailure(f"[plugins.proxy.browser_login]: {issuer} publishes no OpenID configuration "
                                   f"for itself")
            self.endpoints = Endpoints(str(meta["issuer"]),
                                       self._check(str(meta["authorization_endpoint"]), "authorization endpoint"),
                                       self._check(str(meta["token_endpoint"]), "token endpoint"))
        return self.endpoints

    async def authorize_url(self, state: str, nonce: str, verifier: str, *, again: bool = False) -> str:
        endpoints = await self.discover()
        query = {"response_type": "code", "client_id": self.config.client_id, "redirect_uri": self.redirect_uri,
                 "scope": "openid", "state": state, "nonce": nonce, "code_challenge_method": "S256",
                 "code_challenge": _b64(hashlib.sha256(verifier.encode()).digest())}
        if again:
            query["prompt"] = "login"
        joiner = "&" if "?" in endpoints.authorization_endpoint else "?"
        return endpoints.authorization_endpoint + joiner + urlencode(query)

    async def identify(self, code: str, verifier: str, nonce: str) -> dict[str, Any]:
        """Redeem ``code`` and check the ID token (issuer, audience, expiry, nonce); its claims.

        The ID token comes straight from the token endpoint, over TLS and with this client's
        authentication, so (OpenID Connect Core 3.1.3.7) the connection vouches for its issuer and its
        signature is not checked again here."""
        endpoints = await self.discover()
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": self.redirect_uri,
                "code_verifier": verifier}
        auth: Any = httpx2.USE_CLIENT_DEFAULT
        if self.config.client_secret:
            auth = httpx2.BasicAuth(self.config.client_id, self.config.client_secret)
        else:
            form["client_id"] = self.config.client_id
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30), follow_redirects=False) as http:
            response = await http.post(endpoints.token_endpoint, data=form, auth=auth,
                                       headers={"accept": "application/json"})
        if response.status_code != 200:
            try:
                error = str(response.json().get("error", ""))[:100]
            except ValueError:
                error = ""
            raise OAuthFailure(f"the host's identity provider refused the login code ({response.status_code} "
                               f"{error})".replace(" )", ")"))
        token = response.json().get("id_token")
        try:
            claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
        except (AttributeError, IndexError, ValueError) as exc:
            raise OAuthFailure("the host's identity provider sent no readable ID token") from exc
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if (str(claims.get("iss", "")).rstrip("/") != endpoints.issuer.rstrip("/")
                or self.config.client_id not in audiences or not isinstance(claims.get("sub"), str)
                or not isinstance(claims.get("exp"), int | float) or claims["exp"] < time.time() - 60
                or not hmac.compare_digest(str(claims.get("nonce", "")), nonce)):
            raise OAuthFailure("the ID token from the host's identity provider is not for this login")
        return dict(claims)


def confirm_page(state: str, csrf: str, principal: str, upstream: str) -> tuple[str, int, dict[str, str]]:
    """The start page without a host login: whose link this is, for which upstream, and a button."""
    text = (f"This link signs in {principal} to the upstream server {upstream}: its calls to {upstream} will then "
            f"run with the account you sign in with there. Continue only if you asked for this link yourself.")
    body = (f"<!doctype html><html><head><meta charset='utf-8'><title>Sign in to {html.escape(upstream)}</title>"
            f"</head><body><h1>Sign in to {html.escape(upstream)}</h1><p id='confirm-text'>{html.escape(text)}</p>"
            f"<form id='confirm' method='post' action='{START_PATH}'>"
            f"<input type='hidden' name='state' value='{html.escape(state)}'>"
            f"<input type='hidden' name='csrf' value='{html.escape(csrf)}'>"
            f"<button type='submit'>Continue to {html.escape(upstream)}</button></form></body></html>")
    # same-origin, not no-referrer: under no-referrer the browser sends the form with "Origin: null",
    # which the host's own Origin check refuses (and this check too).
    return body, 200, {"content-type": "text/html; charset=utf-8", "cache-control": "no-store",
                       "referrer-policy": "same-origin", "x-frame-options": "DENY",
                       "content-security-policy": "frame-ancestors 'none'"}


def shown(record: dict[str, Any]) -> str:
    """The principal a link was made for, as its start page names it."""
    if record.get("subject"):
        issuer = record.get("issuer")
        return f"{record['subject']!r}" + (f" (of {issuer})" if issuer else "")
    return str(record["principal"])


def refused(text: str) -> tuple[str, int, dict[str, str]]:
    return page("Sign-in refused", text, 403)


async def put_state(backend: Any, state: str, record: dict[str, Any]) -> bool:
    """Write a sign-in state back (its expiry kept); False when it has expired meanwhile."""
    left = float(record.get("expires_at", 0)) - time.time()
    if left <= 0:
        return False
    await backend.put_value(STATE_PREFIX + state, json.dumps(record).encode(), ttl=left)
    return True


def new_secret() -> str:
    return secrets.token_urlsafe(24)


class SignInRoutes:
    """The host's sign-in routes: ``/oauth/start`` (GET, and POST for the click), the host login's
    ``/oauth/login/callback`` and the upstreams' ``/oauth/callback``."""

    def __init__(self, credentials: Any, login: BrowserLoginConfig | None) -> None:
        self.credentials = credentials
        self.vault: Vault = credentials.vault
        self.base: str = credentials.base
        self.login = BrowserLogin(login, self.base + LOGIN_CALLBACK_PATH) if login is not None else None
        #: Cookies are Secure unless the host login allows plain http (or, without one, the host is http).
        self.secure = (not login.allow_insecure_http) if login is not None else self.base.startswith("https://")

    async def _state(self, state: str) -> dict[str, Any] | None:
        raw = await self.credentials.host.backend.get_value(STATE_PREFIX + state) if state else None
        return None if raw is None else dict(json.loads(raw))

    @staticmethod
    def _expired() -> tuple[str, int, dict[str, str]]:
        return page("Link expired", "This sign-in link has expired or was already used. Call the tool again "
                    "to get a new one.", 400)

    def _bound(self, record: dict[str, Any]) -> bool:
        """Whether the host login can vouch for this link's principal (a subject of the login's issuer)."""
        if self.login is None or not record.get("subject"):
            return False
        issuer = record.get("issuer")
        return issuer is None or str(issuer).rstrip("/") == self.login.config.issuer.rstrip("/")

    async def start(self, args: dict[str, str], cookies: dict[str, str]) -> Reply:
        """``GET /oauth/start?state=``: the host login (or the browser's cookie from one) first, else the
        page that asks for a click."""
        state = args.get("state", "")
        record = await self._state(state)
        if record is None:
            return reply(self._expired())
        if self.login is None or (not record.get("subject") and not record.get("issuer")):
            csrf = new_secret()  # anonymous principals (by address) have nobody the host login could vouch for
            return reply(confirm_page(state, csrf, shown(record), str(record["upstream"])),
                         set_cookie("mcphost_csrf", csrf, 600, secure=self.secure))
        if self.login is None or not self._bound(record):
            return reply(refused("This link was made for a principal the host's login provider does not know; "
                                 "it cannot be completed in a browser."))
        again = args.get("login") == "again"
        who = None if again else await open_cookie(self.vault, cookies.get(LOGIN_COOKIE))
        if who is not None:
            return await self._decide(state, record, who)
        flow, nonce, verifier = new_secret(), new_secret(), secrets.token_urlsafe(48)  # RFC 7636: 43-128
        browser = new_secret()  # the login's callback is taken only in this browser (no login CSRF)
        left = float(record.get("expires_at", 0)) - time.time()
        await self.credentials.host.backend.put_value(LOGIN_PREFIX + flow, json.dumps({
            "state": state, "nonce": nonce, "verifier": verifier, "browser": digest(browser)}).encode(),
            ttl=max(1.0, left))
        try:
            location = await self.login.authorize_url(flow, nonce, verifier, again=again)
        except (OAuthFailure, OSError, ValueError) as exc:
            return reply(page("Sign-in unavailable", str(exc), 502))
        return redirect(location, set_cookie(flow_cookie(flow), browser, left, secure=self.secure))

    async def _decide(self, state: str, record: dict[str, Any], who: dict[str, Any], *cookies: str) -> Reply:
        """The browser is signed in to the host as ``who``: on to the upstream if it is the link's principal."""
        issuer = self.login.config.issuer.rstrip("/") if self.login is not None else None
        if str(who.get("sub")) != str(record.get("subject")) or str(who.get("iss", "")).rstrip("/") != issuer:
            log.warning("upstream %s: a sign-in link was opened by a browser signed in as another user; refused",
                        record.get("upstream"))
            found = refused("This sign-in link was made for another user, and this browser is signed in to this "
                            f"host as {who.get('sub')!r}. Nothing was stored. Open the link in your own browser, or "
                            f"sign in to this host as someone else: {START_PATH}?state={state}&login=again")
            return reply(found, *cookies)
        return await self._to_upstream(state, record, *cookies)

    async def confirm(self, form: dict[str, str], cookies: dict[str, str], origin: str | None) -> Reply:
        """``POST /oauth/start``: the click on the page without a host login (double-submit token, and
        an ``Origin`` of this host when the browser sends one)."""
        state = form.get("state", "")
        expected = f"{urlsplit(self.base).scheme}://{urlsplit(self.base).netloc}"
        token, sent = form.get("csrf", ""), cookies.get("mcphost_csrf", "")
        if (origin not in (None, "", expected)) or not token or not hmac.compare_digest(token, sent):
            return reply(refused("This form was not sent from this host's own page; open the sign-in link again."))
        record = await self._state(state)
        if record is None:
            return reply(self._expired())
        if self._bound(record):  # a host login exists for this principal: the click does not replace it
            return redirect(f"{START_PATH}?{urlencode({'state': state})}", status=303)
        return await self._to_upstream(state, record, set_cookie("mcphost_csrf", "", 0, secure=self.secure),
                                       status=303)

    async def login_callback(self, args: dict[str, str], cookies: dict[str, str]) -> Reply:
        """``GET /oauth/login/callback?code=&state=``: who the browser is, then :meth:`_decide`."""
        flow = args.get("state", "")
        raw = await self.credentials.host.backend.take_value(LOGIN_PREFIX + flow) if flow else None
        if raw is None or self.login is None:
            return reply(self._expired())
        pending = json.loads(raw)
        if not hmac.compare_digest(digest(cookies.get(flow_cookie(flow), "")), pending["browser"]):
            return reply(refused("This login was started in another browser. Open the sign-in link again."))
        state = str(pending["state"])
        record = await self._state(state)
        if record is None:
            return reply(self._expired())
        if args.get("error") or not args.get("code"):
            return reply(page("Login refused", f"The identity provider answered: {args.get('error', 'no code')}", 400))
        try:
            claims = await self.login.identify(args["code"], pending["verifier"], pending["nonce"])
        except (OAuthFailure, OSError, ValueError) as exc:
            return reply(page("Login failed", str(exc), 502))
        lifetime = self.login.config.cookie_lifetime
        who = {"iss": claims["iss"], "sub": claims["sub"], "exp": time.time() + lifetime}
        cookie = set_cookie(LOGIN_COOKIE, await sign_cookie(self.vault, who), lifetime, secure=self.secure)
        return await self._decide(state, record, who, cookie, set_cookie(flow_cookie(flow), "", 0, secure=self.secure))

    async def _to_upstream(self, state: str, record: dict[str, Any], *cookies: str, status: int = 302) -> Reply:
        """Redirect to the upstream's authorization page; the callback then requires this browser's cookie."""
        client = self.credentials.clients.get(record["upstream"])
        if client is None:
            return reply(page("Unknown upstream", "This upstream is no longer configured.", 400))
        try:
            metadata = await client.discover()
            client_id = await client.client()
        except (OAuthFailure, OSError, ValueError) as exc:
            return reply(page("Sign-in unavailable", str(exc), 502))
        browser = new_secret()
        record["browser"] = digest(browser)
        if not await put_state(self.credentials.host.backend, state, record):
            return reply(self._expired())
        left = float(record["expires_at"]) - time.time()
        return redirect(client.authorize_url(metadata, client_id, state, record["verifier"]), *cookies,
                        set_cookie(flow_cookie(state), browser, left, secure=self.secure), status=status)

    async def callback(self, args: dict[str, str], cookies: dict[str, str]) -> Reply:
        """``GET /oauth/callback?code=&state=``: in the browser that passed the start (its cookie), redeem
        the code (once), keep the tokens, wake the call."""
        state = args.get("state", "")
        record = await self._state(state)
        if record is None:
            return reply(page("Link expired", "This sign-in has expired or was already completed. Call the tool "
                              "again to get a new link.", 400))
        if not record.get("browser") or not hmac.compare_digest(digest(cookies.get(flow_cookie(state), "")),
                                                                 str(record["browser"])):
            return reply(refused("This sign-in was not started in this browser. Open the sign-in link again."))
        if await self.credentials.host.backend.take_value(STATE_PREFIX + state) is None:  # single use
            return reply(self._expired())
        found = await self.credentials.landed(state, record, args)
        return reply(found, set_cookie(flow_cookie(state), "", 0, secure=self.secure))

    def routes(self, app: Any) -> None:
        from quart import Response, request
        from werkzeug.datastructures import Headers

        def answer(found: Reply) -> Any:
            body, status, headers = found
            return Response(body, status=status, headers=Headers(headers))

        async def start_view() -> Any:
            if request.method == "POST":
                form = {k: str(v) for k, v in (await request.form).items()}
                return answer(await self.confirm(form, dict(request.cookies), request.headers.get("origin")))
            return answer(await self.start(dict(request.args), dict(request.cookies)))

        async def login_view() -> Any:
            return answer(await self.login_callback(dict(request.args), dict(request.cookies)))

        async def callback_view() -> Any:
            return answer(await self.callback(dict(request.args), dict(request.cookies)))

        app.add_url_rule(START_PATH, "proxy_oauth_start", start_view, methods=["GET", "POST"])
        app.add_url_rule(LOGIN_CALLBACK_PATH, "proxy_oauth_login", login_view, methods=["GET"])
        app.add_url_rule("/oauth/callback", "proxy_oauth_callback", callback_view, methods=["GET"])
