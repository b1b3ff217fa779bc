"""``probe``: the one test plugin that misbehaves on purpose, for the stdio and the HTTP tests.

Tools that print to stdout, raise exceptions holding a secret, take their time or announce changes;
lifecycle hooks that leave a trace in a file and, over HTTP, obey request headers. It is installed
into a server subprocess through a fake dist-info (``tests/support/stdio_support.py`` names it
``probe``, ``tests/support/http_plugins/harness.py`` ``httpprobe``). Configuration comes from the
environment, so a test controls it without a config file:

- ``MCPHOST_PROBE_SECRET``: the secret the failing handlers put in their exception messages;
- ``MCPHOST_PROBE_TRACE``: a file that gets one line per event: ``startup`` and ``shutdown``;
  ``connect <session id> <HTTP method, or the transport>``, ``disconnect <session id> <reason>``,
  ``terminate <session id> <reason>``; ``cancelled slow``;
- ``MCPHOST_PROBE_IMPORT_NOISE=1``: print to stdout while the module is imported.

Per HTTP request, ``mcphost_connect`` reads:

- ``X-Probe-Refuse: 401`` → :class:`mcphost.Unauthorized` with the challenge :data:`CHALLENGE`;
  ``X-Probe-Refuse: 403`` → :class:`mcphost.Forbidden`;
- ``X-Probe-Tools: a,b`` → narrows ``session.allowed_tools`` to those names;
- ``X-Probe-Delay: 0.5`` → the (async) hook sleeps that long first.

It also offers a plugin route ``POST /probe/body`` that reads its body (for the body limit on
other routes) and a resource ``probe://counter`` that ``announce`` says changed.
"""

from __future__ import annotations

import asyncio
import os
import sys

import mcphost
from mcphost import Context

SECRET_ENV = "MCPHOST_PROBE_SECRET"
TRACE_ENV = "MCPHOST_PROBE_TRACE"
CHALLENGE = 'Bearer realm="probe", error="invalid_token", resource_metadata="http://127.0.0.1/.well-known/x"'

if os.environ.get("MCPHOST_PROBE_IMPORT_NOISE") == "1":
    print("probe: noise printed while the plugin is imported")


def trace(line: str) -> None:
    path = os.environ.get(TRACE_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def _secret() -> str:
    return os.environ.get(SECRET_ENV, "no-secret-configured")


@mcphost.tool
def leak() -> str:
    """Fail with an exception whose message holds a secret."""
    raise RuntimeError(f"cannot reach the database: password={_secret()}")


@mcphost.tool
def noisy(text: str = "") -> str:
    """Write to stdout three ways, then answer."""
    print("probe: noise from print", text)
    sys.stdout.write("probe: noise from sys.stdout\n")
    sys.stdout.flush()
    os.write(1, b"probe: noise written to descriptor 1\n")
    return "quiet"


@mcphost.tool
async def slow(seconds: float = 1.0) -> str:
    """Sleep, then answer "done"; a cancellation is traced."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        trace("cancelled slow")
        raise
    return "done"


@mcphost.tool
async def announce(uri: str = "", kind: str = "", *, ctx: Context) -> str:
    """Send notifications/resources/updated for ``uri`` and/or list_changed for ``kind``."""
    if uri:
        await ctx.notify_resource_updated(uri)
    if kind:
        await ctx.host.notify_list_changed(kind)
    return "announced"


@mcphost.resource("probe://leak", name="leak")
def leaky_resource() -> str:
    """A resource whose handler fails with a secret in the message."""
    raise RuntimeError(f"resource backend said: token={_secret()}")


@mcphost.resource("probe://counter", name="counter")
def counter() -> str:
    """A resource to subscribe to; ``announce`` says it changed."""
    return "0"


@mcphost.prompt
def leaky_prompt(topic: str = "") -> str:
    """A prompt whose handler fails with a secret in the message."""
    raise ValueError(f"template store said: key={_secret()}")


@mcphost.hookimpl
def mcphost_tools(host):
    return [leak, noisy, slow, announce]


@mcphost.hookimpl
def mcphost_resources(host):
    return [leaky_resource, counter]


@mcphost.hookimpl
def mcphost_prompts(host):
    return [leaky_prompt]


@mcphost.hookimpl
def mcphost_routes(app):
    from quart import request

    @app.post("/probe/body")
    async def body_length():
        data = await request.get_data()
        return {"length": len(data)}


@mcphost.hookimpl
def mcphost_startup(host):
    print("probe: noise printed by the startup hook")
    trace("startup")


@mcphost.hookimpl
async def mcphost_connect(session, request):
    trace(f"connect {session.id} {request.method or request.transport}")
    delay = request.headers.get("x-probe-delay")
    if delay:
        await asyncio.sleep(float(delay))
    refuse = request.headers.get("x-probe-refuse")
    if refuse == "401":
        raise mcphost.Unauthorized("Unauthorized: the probe wants a token", challenge=CHALLENGE)
    if refuse == "403":
        raise mcphost.Forbidden("Forbidden: the probe says no")
    tools = request.headers.get("x-probe-tools")
    if tools is not None:
        session.allowed_tools = {name.strip() for name in tools.split(",") if name.strip()}


@mcphost.hookimpl
def mcphost_disconnect(session, reason):
    trace(f"disconnect {session.id} {reason}")


@mcphost.hookimpl
def mcphost_terminate(session, reason):
    trace(f"terminate {session.id} {reason}")


@mcphost.hookimpl
def mcphost_shutdown(host):
    trace("shutdown")
