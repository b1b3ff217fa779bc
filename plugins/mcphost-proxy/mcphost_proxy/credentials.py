"""The proxy's broker of per-user upstream credentials: who has signed in to what, the in-band sign-in,
the code's redemption when the callback lands, refresh (one process of a cluster at a time), each
principal's own connection to an oauth upstream, and revocation (the ``sign_out`` tool, ``mcphost
credentials``). The OAuth and storage parts are in oauth.py, the host's sign-in routes and who may
complete a sign-in in binding.py; see docs/upstream-credentials.md."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import click

import mcphost
from mcphost_proxy.oauth import (
    CALLBACK_PATH,
    START_PATH,
    STATE_PREFIX,
    Client,
    OAuthFailure,
    SignInRequired,
    Vault,
    page,
    principal_of,
)
from mcphost_proxy.settings import ProxySettings, ServerSettings

if TYPE_CHECKING:
    from mcphost_proxy.upstream import Upstream

log = logging.getLogger("mcphost.proxy.oauth")

#: -32042: URL elicitation required (2025-11-25), for a client that cannot be asked mid-call.
URL_ELICITATION_REQUIRED = -32042
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
#: Seconds between two looks at the vault while a call waits for its caller's sign-in (the callback may
#: land on another process of the cluster; one landing here wakes the call at once).
POLL_SECONDS = 1.0
#: The backend lease one process holds while it refreshes a principal's token (seconds it lasts, at most).
REFRESH_PREFIX = "proxy-refresh:"
REFRESH_LEASE = 30.0
#: Seconds the status report's list of stored credentials is reused before the vault is read again.
STORED_EVERY = 2.0


def fresh_enough(record: dict[str, Any], refresh_before: float) -> bool:
    """Whether a stored access token is used as it is: more than ``refresh_before`` seconds left, or
    more than half its lifetime when that is shorter (a token that lives a few seconds is still used
    for the first half of them, not refreshed at every call)."""
    expires_at = record.get("expires_at")
    if not isinstance(expires_at, int | float):
        return True
    obtained = record.get("obtained_at")
    margin = refresh_before
    if isinstance(obtained, int | float) and expires_at > obtained:
        margin = min(margin, (expires_at - obtained) / 2)
    return expires_at - time.time() > margin


def public_base(host: mcphost.Host, settings: ProxySettings) -> str:
    """This host's base URL as browsers reach it (``public_url``, else [server] resource_url's origin,
    else its bind address)."""
    if settings.config.public_url:
        return settings.config.public_url.rstrip("/")
    server = host.config.server
    if server.resource_url:
        parts = urlsplit(server.resource_url)
        return f"{parts.scheme}://{parts.netloc}"
    bind = "127.0.0.1" if server.host in ("0.0.0.0", "::", "") else server.host
    return f"http://{bind}:{server.port}"


class Credentials:
    """Per-user credentials for the oauth upstreams of one host."""

    def __init__(self, host: mcphost.Host, settings: ProxySettings,
                 make: Callable[[ServerSettings, str], Upstream]) -> None:
        self.host = host
        self.base = public_base(host, settings)
        self.vault = Vault(host, settings.config.credentials_key)
        #: The host's own identity provider, which signs in the browser completing a link (binding.py).
        self.login = settings.config.browser_login
        self.servers = {s.name: s for s in settings.servers if s.auth.mode == "oauth"}
        #: The token-exchange servers (RFC 8693: the caller's own validated token, exchanged).
        self.exchanging = {s.name: s for s in settings.servers if s.auth.mode == "token-exchange"}
        self.clients = {name: Client(s, self.base + CALLBACK_PATH)
                        for name, s in (*self.servers.items(), *self.exchanging.items())}
        self._make = make
        #: (upstream, principal) -> (the access token it carries, that principal's own connection).
        self.personal: dict[tuple[str, str], tuple[str, Upstream]] = {}
        self._landed: dict[tuple[str, str], asyncio.Event] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        #: The stored credentials for the status report (``stored``): the last snapshot, when it was read.
        self._stored: list[dict[str, Any]] = []
        self._stored_at = -STORED_EVERY
        self._reading: asyncio.Task[None] | None = None
        #: Connections stopping (a refreshed token's old one, idle ones).
        self._stopping: set[asyncio.Task[None]] = set()
        #: The shared connections of the servers that have no listing credential of the gateway's own
        #: (set by the plugin), and the principal whose token lists each once one signed in (adopt).
        self.listers: dict[str, Upstream] = {}
        self._lister: dict[str, str] = {}
        self._scanned_at = -STORED_EVERY

    # -- calls ------------------------------------------------------------------------------------------

    def resolver(self, server: ServerSettings) -> Callable[[mcphost.Context | None], Awaitable[Upstream]]:
        async def resolve(ctx: mcphost.Context | None) -> Upstream:
            if ctx is None:
                raise SignInRequired(f"Upstream {server.name!r} is called per user: this request has no caller")
            principal = principal_of(ctx)
            if server.auth.mode == "token-exchange":
                exchanged = await self.exchanged(ctx, server, principal)
                self.adopt(server.name, principal)
                return self._connection(server, principal, exchanged)
            token = await self.token(server.name, principal)
            if token is None:
                await self.sign_in(ctx, server, principal)
                token = await self.token(server.name, principal)
                if token is None:
                    raise SignInRequired(f"Sign-in to upstream {server.name!r} did not complete; call again")
            self.adopt(server.name, principal)
            return self._connection(server, principal, token)
        return resolve

    # -- listing with a signed-in principal's token -------------------------------------------------------

    @staticmethod
    def lists_itself(server: ServerSettings) -> bool:
        """Whether the configured ``headers`` carry a listing credential of the gateway's own."""
        return server.command is not None or any(key.lower() == "authorization" for key in server.headers)

    def awaiting(self) -> list[str]:
        """The servers still waiting for a first principal's token to list their catalog."""
        return [name for name in self.listers if name not in self._lister]

    def adopt(self, name: str, principal: str) -> None:
        """``principal`` holds a token for ``name``: if that server waits for one to list its catalog, it is
        listed from now on with this principal's token (its current one at each request, refreshed). The
        catalog is then the upstream's, shared by every caller like any upstream's; calls still go with
        each caller's own token."""
        upstream = self.listers.get(name)
        if upstream is None or name in self._lister:
            return
        self._lister[name] = principal
        upstream.token_source = functools.partial(self._listing_token, name)
        upstream.awaiting = False
        log.info("upstream %s: listed with the token of a principal who signed in", name)
        upstream.start()

    async def adopt_stored(self) -> None:
        """At start-up: a server waiting for a sign-in is listed with a token already in the vault (another
        node's, or one from before a restart)."""
        if not self.awaiting():
            return
        try:
            entries = await self.vault.entries()
        except Exception:
            log.debug("could not read the vault for a listing token", exc_info=True)
            return
        for entry in entries:
            if entry["upstream"] in self.listers:
                self.adopt(str(entry["upstream"]), str(entry["principal"]))

    async def _listing_token(self, name: str) -> str | None:
        """The listing principal's token for ``name``; when it is gone (signed out, refused refresh), another
        stored principal's, who then lists it."""
        principal = self._lister.get(name)
        token = await self._stored_token(name, principal) if principal is not None else None
        if token:
            return token
        for entry in await self.vault.entries():
            other = str(entry["principal"])
            if entry["upstream"] == name and other != principal:
                token = await self._stored_token(name, other)
                if token:
                    self._lister[name] = other
                    return token
        return None

    async def _stored_token(self, name: str, principal: str) -> str | None:
        if name in self.servers:
            return await self.token(name, principal)
        record = await self.vault.get(principal, name)  # token exchange: usable while fresh (no caller here)
        server = self.exchanging.get(name)
        if record is None or server is None or not fresh_enough(record, server.auth.refresh_before):
            return None
        return str(record["access_token"])

    async def on_list(self, request: Any, host: mcphost.Host) -> None:
        """A ``tools/list`` while a server still waits for its first principal's token. A token already
        in the vault (another node's sign-in) lists it, nobody asked. Else, an oauth server: a
        session-era client that declared URL elicitation is asked (once per session and server), as a
        call would ask, and the list waits for the sign-in and the catalog (2026-07-28 allows no
        input-required round on a list). A token-exchange server: the caller's own token is exchanged,
        in either era, nobody asked. Anything else (no URL elicitation, declined, timed out, failed)
        leaves the list as it is: a list never fails for it."""
        waiting = self.awaiting()
        if time.monotonic() - self._scanned_at > STORED_EVERY:  # one vault scan per STORED_EVERY s at most
            self._scanned_at = time.monotonic()
            await self.adopt_stored()
        await self._listed([name for name in waiting if name in self._lister])
        declared = request.session.client_capabilities.get("elicitation")
        may_ask = request.era == "legacy" and isinstance(declared, dict) and "url" in declared
        # A list, not a set: a shared backend keeps the session's assigns as JSON.
        asked: list[str] = request.session.assigns.setdefault("proxy:sign-in-asked", [])
        for name in self.awaiting():
            server = self.servers.get(name) or self.exchanging[name]
            if name in asked or (name in self.servers and not may_ask):
                continue
            asked.append(name)
            ctx = host.context_for(request)
            principal = principal_of(ctx)
            try:
                if name in self.exchanging:  # nobody is asked: the caller's own token, exchanged
                    await self.exchanged(ctx, server, principal)
                elif await self.token(name, principal) is None:
                    await self.sign_in(ctx, server, principal)
                self.adopt(name, principal)
                await self._listed([name])
            except Exception as exc:  # the list goes on without this upstream
                log.info("upstream %s: no sign-in at tools/list (%s)", name, mcphost.redact_text(str(exc)))

    async def _listed(self, names: list[str]) -> None:
        """Wait (each server's ``timeout`` at most) for these newly adopted servers to list and mount."""
        await asyncio.gather(*(self.listers[name].wait_ready(self.listers[name].settings.timeout) for name in names))

    def _connection(self, server: ServerSettings, principal: str, token: str) -> Upstream:
        self._reap()
        key = (server.name, principal)
        held = self.personal.get(key)
        if held is not None and held[0] == token:
            held[1].last_used = time.monotonic()
            return held[1]
        if held is not None:  # refreshed: the old connection carries the old token
            self._stop(held[1])
        # Only this principal's token: never the downstream caller's own, never another principal's.
        settings = server.model_copy(update={"headers": {**server.headers, "Authorization": f"Bearer {token}"}})
        upstream = self._make(settings, f"{server.name}@{secrets.token_hex(3)}")
        upstream.start()
        self.personal[key] = (token, upstream)
        return upstream

    def connected(self) -> list[dict[str, Any]]:
        """Each principal's live connection, most recently used first: its upstream's row
        (``Upstream.describe``) with ``principal`` and ``upstream`` (the server's name); never a token."""
        live = sorted(self.personal.items(), key=lambda item: -item[1][1].last_used)
        return [{**upstream.describe(), "principal": principal, "upstream": server}
                for (server, principal), (_token, upstream) in live]

    def stored(self) -> list[dict[str, Any]]:
        """The stored credentials as last read from the vault (principal, upstream, expiry, whether it
        can be refreshed; never a token), soonest expiry first; read again in the background when older
        than STORED_EVERY seconds (the status report is synchronous; the console polls it)."""
        if time.monotonic() - self._stored_at > STORED_EVERY and self._reading is None:
            with contextlib.suppress(RuntimeError):  # no running loop: the snapshot as it is
                self._reading = asyncio.get_running_loop().create_task(self._read_stored(),
                                                                       name="proxy:credentials:list")
        return self._stored

    async def _read_stored(self) -> None:
        try:
            entries = [e for e in await self.vault.entries() if e["upstream"] in self.clients]
            self._stored = sorted(entries, key=lambda e: (e["expires_at"] or float("inf"), e["principal"]))
        except Exception:
            log.debug("could not list the stored upstream credentials", exc_info=True)
        finally:
            self._stored_at, self._reading = time.monotonic(), None

    def _stop(self, upstream: Upstream) -> None:
        task = asyncio.get_running_loop().create_task(upstream.stop(), name=f"proxy:stop:{upstream.label}")
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    def _reap(self) -> None:
        """Stop the principals' connections unused for their server's idle_timeout (they start again on
        the next call, with the stored token)."""
        now = time.monotonic()
        for key, (_, upstream) in list(self.personal.items()):
            if upstream.in_flight == 0 and now - upstream.last_used > upstream.settings.idle_timeout:
                del self.personal[key]
                log.info("upstream %s: idle for %.0f s; stopped", upstream.label, now - upstream.last_used)
                self._stop(upstream)

    async def token(self, upstream: str, principal: str) -> str | None:
        """The principal's access token for ``upstream``, refreshed when near expiry (None: sign in)."""
        async with self._locks.setdefault((upstream, principal), asyncio.Lock()):
            record = await self.vault.get(principal, upstream)
            if record is None:
                return None
            auth = self.servers[upstream].auth
            if fresh_enough(record, auth.refresh_before):
                return str(record["access_token"])
            return await self._refresh(upstream, principal)

    async def _refresh(self, upstream: str, principal: str) -> str | None:
        """Refresh with the refresh token, one process of the cluster at a time: a lease in the backend
        (``hold``), and whoever waits for it reads the vault again (the holder's new token) instead of
        spending the same refresh token (a rotating authorization server refuses it, and may revoke the
        whole grant)."""
        auth = self.servers[upstream].auth
        lease = f"{REFRESH_PREFIX}{upstream}:{hashlib.sha256(principal.encode()).hexdigest()}"
        owner = secrets.token_hex(8)
        deadline = time.monotonic() + REFRESH_LEASE
        while not await self.host.backend.hold(lease, owner, REFRESH_LEASE):
            if time.monotonic() > deadline:
                raise OAuthFailure(f"Upstream {upstream!r}: another process has been refreshing this token for "
                                   f"{REFRESH_LEASE:.0f} s; call again")
            await asyncio.sleep(0.2)
        try:
            record = await self.vault.get(principal, upstream)  # another process may have refreshed it
            if record is None:
                return None
            if fresh_enough(record, auth.refresh_before):
                return str(record["access_token"])
            refresh = record.get("refresh_token")
            if refresh:
                try:
                    fresh = await self.clients[upstream].grant({"grant_type": "refresh_token",
                                                                "refresh_token": str(refresh)})
                except (OAuthFailure, OSError, ValueError) as exc:  # refused: ask for consent again
                    log.info("upstream %s: refreshing a token failed (%s); the user signs in again", upstream, exc)
                else:
                    fresh["refresh_token"] = fresh.get("refresh_token") or refresh
                    await self.vault.put(principal, upstream, fresh)
                    log.info("upstream %s: a token was refreshed", upstream)
                    return str(fresh["access_token"])
            await self.vault.delete(principal, upstream)
            return None
        finally:
            await self.host.backend.unhold(lease, owner)

    async def exchanged(self, ctx: mcphost.Context, server: ServerSettings, principal: str) -> str:
        """A token for ``server`` got by exchanging the caller's own validated token (RFC 8693), kept in
        the vault (bound to a digest of that subject token) until near its expiry."""
        subject = ctx.principal.token if ctx.principal is not None else None
        if not subject:
            raise SignInRequired(f"Upstream {server.name!r} exchanges the caller's token (RFC 8693), and this "
                                 f"caller's token is not kept: set [plugins.jwt] keep_subject_token = true")
        digest = hashlib.sha256(subject.encode()).hexdigest()
        async with self._locks.setdefault((server.name, principal), asyncio.Lock()):
            record = await self.vault.get(principal, server.name)
            if (record is not None and record.get("subject") == digest
                    and fresh_enough(record, server.auth.refresh_before)):
                return str(record["access_token"])
            form = {"grant_type": TOKEN_EXCHANGE, "subject_token": subject, "subject_token_type": ACCESS_TOKEN_TYPE,
                    "requested_token_type": ACCESS_TOKEN_TYPE}
            metadata = await self.clients[server.name].discover()
            if metadata.scopes:
                form["scope"] = " ".join(metadata.scopes)
            fresh = await self.clients[server.name].grant(form)
            fresh["subject"], fresh["refresh_token"] = digest, None
            await self.vault.put(principal, server.name, fresh)
            return str(fresh["access_token"])

    async def sign_in(self, ctx: mcphost.Context, server: ServerSettings, principal: str) -> None:
        """Ask the caller, in band, to sign in to ``server``; return once the callback has landed."""
        client = self.clients[server.name]
        await client.discover()
        state = secrets.token_urlsafe(24)
        record: dict[str, Any] = {"principal": principal, "upstream": server.name,
                                  "verifier": secrets.token_urlsafe(48),
                                  "expires_at": time.time() + server.auth.sign_in_timeout}
        if ctx.principal is not None and principal.startswith("p:"):  # whom the host login must find
            record.update(subject=ctx.principal.subject, issuer=ctx.principal.issuer)
        await self.host.backend.put_value(STATE_PREFIX + state, json.dumps(record).encode(),
                                          ttl=server.auth.sign_in_timeout)
        url = f"{self.base}{START_PATH}?state={state}"
        message = f"Sign in to {server.name} to let this server call it as you"
        elicitation = secrets.token_hex(16)
        try:
            answer = await ctx.elicit_url(message, url, elicitation_id=elicitation, key=f"sign-in:{server.name}",
                                          timeout=server.auth.sign_in_timeout)
        except mcphost.ClientRequestError as exc:
            if "does not support" not in str(exc) and "elicitation" not in str(exc):
                raise
            text = (f"Sign-in to upstream {server.name!r} is needed and this client cannot open a link: open {url} "
                    f"in a browser (it expires in {server.auth.sign_in_timeout:.0f} s), then call again")
            if (ctx.session.protocol_version or "") == "2025-11-25":
                raise mcphost.McpError(URL_ELICITATION_REQUIRED, text, {"elicitations": [
                    {"mode": "url", "elicitationId": elicitation, "url": url, "message": message}]}) from None
            raise SignInRequired(text) from None
        if answer.action != "accept":
            raise SignInRequired(f"Sign-in to upstream {server.name!r} was {answer.action}d; to sign in later, call "
                                 f"again (or open {url} within {server.auth.sign_in_timeout:.0f} s)")
        await self._wait(server, principal)
        await self._complete(ctx, elicitation)

    async def _wait(self, server: ServerSettings, principal: str) -> None:
        key = (server.name, principal)
        landed = self._landed.setdefault(key, asyncio.Event())
        deadline = time.monotonic() + server.auth.sign_in_timeout
        while await self.vault.get(principal, server.name) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SignInRequired(f"Sign-in to upstream {server.name!r} did not complete within "
                                     f"{server.auth.sign_in_timeout:.0f} s; call again")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(landed.wait(), min(left, POLL_SECONDS))
        landed.clear()

    @staticmethod
    async def _complete(ctx: mcphost.Context, elicitation: str) -> None:
        """notifications/elicitation/complete to a 2025-11-25 session (its client may close the prompt)."""
        session = ctx.session
        if session.era == "modern" or (session.protocol_version or "") < "2025-11-25" or session.outlet is None:
            return
        from mcphost.protocol import jsonrpc

        note = jsonrpc.notification("notifications/elicitation/complete", {"elicitationId": elicitation})
        try:
            await session.outlet(note, ctx.request_id)
        except Exception:
            log.debug("could not send notifications/elicitation/complete", exc_info=True)

    # -- the host's routes --------------------------------------------------------------------------------

    async def landed(self, state: str, record: dict[str, Any], args: dict[str, str]) -> tuple[Any, ...]:
        """The upstream's authorization server sent the browser back (state taken, browser checked): redeem
        the code, keep the tokens, wake the waiting call; the page to show."""
        upstream, principal = str(record["upstream"]), str(record["principal"])
        client = self.clients.get(upstream)
        if client is None:
            return page("Unknown upstream", "This upstream is no longer configured.", 400)
        if args.get("error") or not args.get("code"):
            return page("Sign-in refused", f"The authorization server answered: {args.get('error', 'no code')}", 400)
        try:
            tokens = await client.grant({"grant_type": "authorization_code", "code": args["code"],
                                         "redirect_uri": client.redirect_uri, "code_verifier": record["verifier"]})
        except (OAuthFailure, OSError, ValueError) as exc:
            return page("Sign-in failed", str(exc), 502)
        await self.vault.put(principal, upstream, tokens)
        self._landed.setdefault((upstream, principal), asyncio.Event()).set()
        self.adopt(upstream, principal)
        log.info("upstream %s: a principal signed in", upstream)
        return page("Signed in", f"You are signed in to {upstream}. You may close this page.")

    def routes(self, app: Any) -> None:
        """The sign-in routes (binding.py: who may complete a sign-in)."""
        from mcphost_proxy.binding import SignInRoutes

        SignInRoutes(self, self.login).routes(app)

    # -- revocation -------------------------------------------------------------------------------------

    async def revoke(self, principal: str, upstream: str) -> bool:
        """Forget ``principal``'s tokens for ``upstream`` (revoked at the authorization server when it
        offers revocation) and stop its connection; True when there were any."""
        record = await self.vault.get(principal, upstream)
        removed = await self.vault.delete(principal, upstream)
        held = self.personal.pop((upstream, principal), None)
        if held is not None:
            await held[1].stop()
        client = self.clients.get(upstream)
        if record is not None and client is not None:
            with contextlib.suppress(Exception):
                await client.revoke(record)
        return removed

    def sign_out_tool(self) -> mcphost.Tool:
        names = sorted(self.servers)

        async def sign_out(upstream: str, ctx: mcphost.Context) -> str:
            """Sign out of an upstream server: its stored tokens for you are deleted (and revoked), so the
            next call to it asks you to sign in again."""
            if upstream not in self.servers:
                raise mcphost.ToolError(f"Unknown upstream {upstream!r}; signed-in upstreams are: {', '.join(names)}")
            removed = await self.revoke(principal_of(ctx), upstream)
            return f"Signed out of {upstream}." if removed else f"You were not signed in to {upstream}."

        return mcphost.tool(name="sign_out", annotations={"destructiveHint": False, "idempotentHint": True})(sign_out)

    async def close(self) -> None:
        held = list(self.personal.values())
        self.personal.clear()
        await asyncio.gather(*(upstream.stop() for _, upstream in held), *self._stopping, return_exceptions=True)


# -- the operator's command line: mcphost credentials list | revoke ----------------------------------------

def _subject(principal: str) -> str | None:
    """The subject of a principal key ``p:(issuer, subject, client id)``, if it is one."""
    import ast

    if not principal.startswith("p:("):
        return None
    try:
        key = ast.literal_eval(principal[2:])
    except (ValueError, SyntaxError):
        return None
    return str(key[1]) if isinstance(key, tuple) and len(key) >= 2 else None


def register_commands(cli: click.Group) -> None:
    """``mcphost credentials list`` (principal, upstream, expiry; never a token) and ``mcphost credentials
    revoke PRINCIPAL UPSTREAM`` (PRINCIPAL as listed, or a bare subject that names one principal)."""
    def broker(options: Any) -> Credentials:
        from mcphost_proxy.settings import ProxyConfig, load_settings

        host = options.host()
        path = host.config.path
        settings = load_settings(host.settings(ProxyConfig), base=None if path is None else path.parent)
        credentials = Credentials(host, settings, lambda server, label: None)  # type: ignore[arg-type,return-value]
        if not host.backend.shared:
            click.echo("note: the backend is this process's own memory: a running host's credentials live in its "
                       "own process (a shared backend such as [plugins.redis] lets the operator see them)", err=True)
        return credentials

    async def run(credentials: Credentials, work: Callable[[], Awaitable[Any]]) -> Any:
        await credentials.host.backend.start()
        try:
            return await work()
        finally:
            await credentials.host.backend.close()

    @cli.group()
    def credentials() -> None:
        """Per-user upstream credentials (mcphost-proxy auth mode "oauth"): who is signed in to what."""

    @credentials.command("list")
    @click.option("--json", "as_json", is_flag=True, help="print JSON")
    @click.pass_obj
    def list_credentials(options: Any, as_json: bool) -> None:
        """Principal, upstream and expiry of each stored credential (never a token)."""
        held = broker(options)
        entries = asyncio.run(run(held, held.vault.entries))
        if as_json:
            click.echo(json.dumps(entries, indent=2))
            return
        for entry in entries:
            expiry = entry["expires_at"]
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expiry)) if expiry else "-"
            click.echo(f"{entry['principal']}\t{entry['upstream']}\texpires {when}"
                       f"{'' if entry['refreshable'] else ' (no refresh token)'}")

    @credentials.command("revoke")
    @click.argument("principal")
    @click.argument("upstream")
    @click.pass_obj
    def revoke_credentials(options: Any, principal: str, upstream: str) -> None:
        """Delete (and revoke at the authorization server) PRINCIPAL's tokens for UPSTREAM."""
        held = broker(options)

        async def work() -> list[str]:
            entries = [e for e in await held.vault.entries() if e["upstream"] == upstream]
            exact = [e["principal"] for e in entries if e["principal"] == principal]
            matched = exact or [e["principal"] for e in entries if _subject(e["principal"]) == principal]
            if len(matched) == 1:
                await held.revoke(matched[0], upstream)
            return matched

        matched = asyncio.run(run(held, work))
        if not matched:
            raise click.ClickException(f"no credential of {principal!r} for upstream {upstream!r}")
        if len(matched) > 1:
            raise click.ClickException(f"{principal!r} names {len(matched)} principals; give one as listed")
        click.echo(f"revoked: {matched[0]} -> {upstream}")
