"""A plugin for the stdio transport tests.

It misbehaves on purpose: tools that print to stdout, raise exceptions holding a secret, or
take their time; lifecycle hooks that leave a trace in a file. Configuration comes from the
environment so a test controls it without a config file:

- ``MCPHOST_PROBE_SECRET``: the secret the failing handlers put in their exception messages;
- ``MCPHOST_PROBE_TRACE``: a file that gets one line per lifecycle event and cancellation;
- ``MCPHOST_PROBE_IMPORT_NOISE=1``: print to stdout while the module is imported.
"""

from __future__ import annotations

import asyncio
import os
import sys

import mcphost

SECRET_ENV = "MCPHOST_PROBE_SECRET"
TRACE_ENV = "MCPHOST_PROBE_TRACE"

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


@mcphost.resource("probe://leak", name="leak")
def leaky_resource() -> str:
    """A resource whose handler fails with a secret in the message."""
    raise RuntimeError(f"resource backend said: token={_secret()}")


@mcphost.prompt
def leaky_prompt(topic: str = "") -> str:
    """A prompt whose handler fails with a secret in the message."""
    raise ValueError(f"template store said: key={_secret()}")


@mcphost.hookimpl
def mcphost_tools(host):
    return [leak, noisy, slow]


@mcphost.hookimpl
def mcphost_resources(host):
    return [leaky_resource]


@mcphost.hookimpl
def mcphost_prompts(host):
    return [leaky_prompt]


@mcphost.hookimpl
def mcphost_startup(host):
    print("probe: noise printed by the startup hook")
    trace("startup")


@mcphost.hookimpl
def mcphost_connect(session, request):
    trace(f"connect {request.transport}")


@mcphost.hookimpl
def mcphost_disconnect(session, reason):
    trace(f"disconnect {reason}")


@mcphost.hookimpl
def mcphost_terminate(session, reason):
    trace(f"terminate {reason}")


@mcphost.hookimpl
def mcphost_shutdown(host):
    trace("shutdown")
