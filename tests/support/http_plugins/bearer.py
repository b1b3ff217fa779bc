"""``httpbearer``: static bearer tokens mapped to principals, and scoped records, for the auth tests.

Never use anything like it for real: the tokens are constants. What it does per token
(``Authorization: Bearer <token>``, read with :func:`mcphost.bearer_token`):

- :data:`TOKENS` → that principal (``tok-alice-write-…`` is alice again, with a wider scope);
- :data:`OPT_IN` → a principal that carries its raw token on ``Principal.token`` (the opt-in);
- ``boom`` → the hook raises (an identity provider that cannot be reached);
- ``evil`` → ``Unauthorized`` whose description holds quotes and CR/LF;
- ``evil-raw`` → ``Unauthorized`` with a hand-written challenge holding the same;
- any other token → ``Unauthorized(error="invalid_token")``; no header → no opinion.

It contributes protected resource metadata unless ``MCPHOST_TEST_NO_PRM`` is set. Its connect
hook copies the request headers into ``session.assigns`` (a careless plugin), so tests can check
that the credentials never get that far.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import urllib.request

import mcphost
from mcphost import Context

ISSUER = "https://as.example"
#: Token → principal. The tokens are long and distinctive, so a test can search for them anywhere.
TOKENS = {
    "tok-alice-5d1e9a": mcphost.Principal("alice", issuer=ISSUER, client_id="app", scopes=frozenset({"files:read"})),
    "tok-alice-write-77c2": mcphost.Principal("alice", issuer=ISSUER, client_id="app",
                                              scopes=frozenset({"files:read", "files:write"})),
    "tok-bob-0b44f1": mcphost.Principal("bob", issuer=ISSUER, client_id="app", scopes=frozenset({"files"})),
    "tok-carol-9e0d3c": mcphost.Principal("carol", issuer=ISSUER, client_id="app", scopes=frozenset()),
    "tok-root-61aa07": mcphost.Principal("root", issuer=ISSUER, client_id="app",
                                         scopes=frozenset({"admin", "files"})),
}
OPT_IN = "tok-optin-3f9b20"
EVIL = 'bad "token"\r\nX-Injected: yes'
_host: list = []


@mcphost.hookimpl
def mcphost_startup(host):
    _host[:] = [host]  # an auth plugin keeps the host to learn the audience its tokens must name


@mcphost.hookimpl
def mcphost_authenticate(request):
    header = request.headers.get("authorization")
    if header is None:
        return None
    token = mcphost.bearer_token(header)
    if token in TOKENS:
        audience = _host[0].resource_server.resource_url_for(request)
        return dataclasses.replace(TOKENS[token], claims={"aud": audience})
    if token == OPT_IN:
        return mcphost.Principal("opted", issuer=ISSUER, token=token)
    if token == "boom":
        raise ConnectionError("identity provider unreachable")
    if token == "evil":
        raise mcphost.Unauthorized(EVIL, error="invalid_token")
    if token == "evil-raw":
        raise mcphost.Unauthorized("evil", challenge=f'Bearer error="invalid_token", error_description="{EVIL}"')
    raise mcphost.Unauthorized("Unknown token", error="invalid_token")


@mcphost.hookimpl
def mcphost_protected_resource_metadata(host):
    if os.environ.get("MCPHOST_TEST_NO_PRM"):
        return None
    return {"authorization_servers": [ISSUER], "scopes_supported": ["files:read", "offline_access"],
            "resource_name": "Test files"}


@mcphost.hookimpl
def mcphost_connect(session, request):
    session.assigns["headers"] = dict(request.headers)


@mcphost.tool
async def whoami(delay_ms: int = 0, *, ctx: Context) -> dict:
    """Who this request is from, and every place a tool could look for the inbound token."""
    if delay_ms:
        await asyncio.sleep(delay_ms / 1000)
    principal = ctx.principal
    session = ctx.session
    return {
        "subject": principal.subject if principal else None,
        "scopes": sorted(principal.scopes) if principal else [],
        "session_subject": session.principal.subject if session.principal else None,
        "token": principal.token if principal else None,
        "audience": principal.claims.get("aud") if principal else None,
        "visible": repr({"principal": principal, "state": session.to_state(), "assigns": session.assigns}),
    }


@mcphost.tool
async def ask_name(*, ctx: Context) -> str:
    """Ask the user's name (a 2026-07-28 client answers in a retry carrying requestState)."""
    answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}},
                                             "required": ["name"]}, key="name")
    return f"Hello, {answer.content['name']}!" if answer.accepted and answer.content else "Hello, stranger!"


@mcphost.tool(scopes=["files:read"])
def read_file(name: str) -> str:
    """Read a file (needs files:read)."""
    return f"contents of {name}"


@mcphost.tool(scopes=["files:read", "files:write"])
def write_file(name: str, text: str) -> str:
    """Write a file (needs files:read and files:write)."""
    return f"wrote {len(text)} characters to {name}"


@mcphost.tool(scopes=["admin"])
def shutdown_everything() -> str:
    """An administrative tool (needs admin)."""
    return "done"


@mcphost.tool
def call_downstream(url: str) -> str:
    """Call another API the way a tool would (no credentials of its own here)."""
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


@mcphost.prompt(scopes=["admin"])
def audit_prompt() -> str:
    """A prompt for administrators."""
    return "Review the audit log."


@mcphost.prompt
def open_prompt() -> str:
    """A prompt for everyone."""
    return "Hello."


@mcphost.resource("files://readme", name="readme", scopes=["files:read"])
def readme() -> str:
    """A readable file."""
    return "read me"


@mcphost.resource("files://public", name="public")
def public() -> str:
    """A public file."""
    return "public"


@mcphost.resource_template("files://secret/{name}", name="secret", scopes=["files:write"])
def secret(name: str) -> str:
    """Files that need files:write even to read."""
    return f"secret {name}"


@mcphost.hookimpl
def mcphost_tools(host):
    return [whoami, ask_name, read_file, write_file, shutdown_everything, call_downstream]


@mcphost.hookimpl
def mcphost_prompts(host):
    return [audit_prompt, open_prompt]


@mcphost.hookimpl
def mcphost_resources(host):
    return [readme, public]


@mcphost.hookimpl
def mcphost_resource_templates(host):
    return [secret]
