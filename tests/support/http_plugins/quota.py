"""``httpquota``: principals with scopes and expiry, slow tools and scoped resources, for the
per-principal limit tests (RELIABILITY H4-H7). Never use anything like it for real.

- ``X-Test-User: alice`` authenticates ``Principal("alice")``; ``X-Test-Scopes`` (space
  separated) are its scopes; ``X-Test-Expires-In: 2`` makes its credentials expire 2 s from now.
  Without ``X-Test-User`` the hook has no opinion (run with ``allow_anonymous``).
- ``hold(seconds)`` sleeps (a request held in flight); ``echo(text)``; ``big(size, delay)`` answers
  with a large reply; ``long_job(seconds)`` may become a task (2026-07-28); ``touch(uri)``
  announces that a resource changed.
- ``ask()`` is resumable (2026-07-28): it parks while the client answers its one question.
- ``quota://public`` needs nothing, ``quota://secret`` and the template ``quota://vault/{name}``
  need the ``secret:read`` scope.
"""

from __future__ import annotations

import asyncio
import time

import mcphost
from mcphost import Context

ISSUER = "https://quota.example"


@mcphost.hookimpl
def mcphost_authenticate(request):
    user = request.headers.get("x-test-user")
    if not user:
        return None
    scopes = frozenset(request.headers.get("x-test-scopes", "").split())
    expires_in = request.headers.get("x-test-expires-in")
    return mcphost.Principal(subject=user, issuer=ISSUER, scopes=scopes,
                             expires_at=time.time() + float(expires_in) if expires_in else None)


@mcphost.tool
async def hold(seconds: float) -> str:
    """Sleep ``seconds`` (keeps a request in flight)."""
    await asyncio.sleep(seconds)
    return "held"


@mcphost.tool
def echo(text: str) -> str:
    """Say it back."""
    return text


@mcphost.tool
async def big(size: int, delay: float = 0.0) -> str:
    """A reply of ``size`` bytes after ``delay`` seconds (a large reply a client may abandon)."""
    await asyncio.sleep(delay)
    return "x" * size


@mcphost.tool(task="optional")
async def long_job(seconds: float) -> str:
    """Work ``seconds``; a 2026-07-28 client that declared tasks gets a task for it."""
    await asyncio.sleep(seconds)
    return "done"


@mcphost.tool(resumable=True)
async def ask(*, ctx: Context) -> str:
    """Ask for a name; the call stays parked until the retry brings the answer."""
    answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name")
    return str(answer.content["name"])


@mcphost.tool
async def touch(uri: str, *, ctx: Context) -> str:
    """Announce that ``uri`` changed (subscribers get notifications/resources/updated)."""
    await ctx.notify_resource_updated(uri)
    return "touched"


@mcphost.resource("quota://public", name="public")
def public() -> str:
    """Anyone may read it."""
    return "public"


@mcphost.resource("quota://secret", name="secret", scopes=["secret:read"])
def secret() -> str:
    """Needs secret:read."""
    return "secret"


def _names(value: str, context: dict) -> list[str]:
    return [name for name in ("alpha", "beta") if name.startswith(value)]


@mcphost.resource_template("quota://vault/{name}", name="vault", scopes=["secret:read"], completions={"name": _names})
def vault(name: str) -> str:
    """Needs secret:read."""
    return f"vault {name}"


@mcphost.hookimpl
def mcphost_tools(host):
    return [hold, echo, big, long_job, ask, touch]


@mcphost.hookimpl
def mcphost_resources(host):
    return [public, secret]


@mcphost.hookimpl
def mcphost_resource_templates(host):
    return [vault]
