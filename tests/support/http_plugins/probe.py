"""``httpprobe``: lifecycle hooks driven by request headers, with a trace file, for HTTP tests.

Configuration comes from the environment, so a test controls it without a config file:

- ``MCPHOST_HTTP_PROBE_TRACE``: a file that gets one line per lifecycle event:
  ``connect <session id> <HTTP method>``, ``disconnect <session id> <reason>``,
  ``terminate <session id> <reason>``;
- ``MCPHOST_HTTP_PROBE_SECRET``: the secret the failing handlers put in their exception messages.

Per request, ``mcphost_connect`` reads:

- ``X-Probe-Refuse: 401`` → :class:`mcphost.Unauthorized` with the challenge :data:`CHALLENGE`;
  ``X-Probe-Refuse: 403`` → :class:`mcphost.Forbidden`;
- ``X-Probe-Tools: a,b`` → narrows ``session.allowed_tools`` to those names;
- ``X-Probe-Delay: 0.5`` → the (async) hook sleeps that long first.

It also provides a tool that fails with a secret, a resource and a prompt that do the same, a
tool that announces a resource update or a list change (standalone-stream traffic on demand),
and a plugin route ``POST /probe/body`` that reads its body (for the body limit on other routes).
"""

from __future__ import annotations

import asyncio
import os

import mcphost
from mcphost import Context

TRACE_ENV = "MCPHOST_HTTP_PROBE_TRACE"
SECRET_ENV = "MCPHOST_HTTP_PROBE_SECRET"
CHALLENGE = 'Bearer realm="probe", error="invalid_token", resource_metadata="http://127.0.0.1/.well-known/x"'


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
    return [leak, announce]


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
async def mcphost_connect(session, request):
    trace(f"connect {session.id} {request.method}")
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
