"""Exceptions that handlers and hooks raise to tell the host what went wrong, and how to say it."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from mcphost.protocol.auth import bearer_challenge
from mcphost.protocol.errors import McpError


class ToolError(Exception):
    """A tool failure the model should see: becomes an ``isError`` result carrying this message.

    Any other exception from a tool also becomes an ``isError`` result, but with a generic
    text: exception messages may hold secrets, so only a ToolError's message reaches the wire.
    """


class HostSignal(BaseException):
    """A BaseException the host raises through plugin code on purpose (a 2026-07-28 handler's
    missing answer, say): it passes the host's containment of plugin exceptions untouched."""


class PluginAborted(Exception):
    """Plugin code raised a BaseException that is neither an Exception nor a cancellation.

    ``SystemExit`` (an argparse CLI wrapped as a tool, given bad arguments), ``KeyboardInterrupt``
    or ``GeneratorExit`` leaving a request's task would stop the event loop and the process with
    every session in it. The host turns them into this ordinary failure of the plugin that raised
    them: the request fails like any other plugin error, and the process keeps serving.
    """

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__)
        self.cause = cause


class Refused(Exception):
    """Raised by ``mcphost_connect`` or an auth hook to turn a client away.

    ``status`` is the HTTP status (stdio reports it as a JSON-RPC error); ``headers`` are
    added to the HTTP response (for instance a ``WWW-Authenticate`` challenge).
    """

    status = 403

    def __init__(self, message: str = "Forbidden", *, headers: dict[str, str] | None = None,
                 status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = dict(headers or {})
        if status is not None:
            self.status = status


class Unauthorized(Refused):
    """401: credentials are missing or invalid. ``challenge`` becomes ``WWW-Authenticate``.

    Give ``error`` (``"invalid_token"``) instead of a challenge and the host writes
    ``Bearer error="invalid_token", error_description="<message>"`` with the values escaped.
    Over HTTP the host adds ``resource_metadata`` and ``scope`` to any Bearer challenge that lacks
    them (see docs/auth.md).
    """

    status = 401

    def __init__(self, message: str = "Unauthorized", *, challenge: str | None = None, error: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        if challenge is None:
            challenge = bearer_challenge(error=error, description=message if error else None)
        merged = {"WWW-Authenticate": challenge, **(headers or {})}
        super().__init__(message, headers=merged)


class Forbidden(Refused):
    """403: the client is known but may not do this."""

    status = 403


class InsufficientScope(Forbidden):
    """403: the token lacks scopes the operation needs.

    ``scopes`` are *all* the scopes the operation needs (clients add them to what they hold
    and ask for a new token); they go into one
    ``Bearer error="insufficient_scope", scope="...", error_description="..."`` challenge.
    Raised by the host for records declared with ``scopes=[...]``; a handler may raise it too
    (over HTTP it then reaches the client as a JSON-RPC error, the response having started).
    """

    def __init__(self, scopes: Iterable[str], message: str | None = None) -> None:
        self.scopes = tuple(sorted(set(scopes)))
        message = message or f"Insufficient scope: this operation needs {' '.join(self.scopes) or 'more access'}"
        challenge = bearer_challenge(error="insufficient_scope", scope=self.scopes, description=message)
        super().__init__(message, headers={"WWW-Authenticate": challenge})


class PluginError(Exception):
    """A plugin handed the host something invalid (a bad record, a duplicate name, bad config)."""


class ConfigError(Exception):
    """The configuration cannot be used; the message says which file, section and key."""


class ClientRequestError(Exception):
    """A server-to-client request (elicitation, sampling, roots) failed.

    ``code`` is the JSON-RPC error code the client answered with, or a host code
    (-32001 for a timeout, -32601 when the client lacks the capability).
    """

    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


__all__ = ["ClientRequestError", "ConfigError", "Forbidden", "InsufficientScope", "McpError", "PluginError",
           "Refused", "ToolError", "Unauthorized"]


class PluginFailures:
    """Failures of plugin code on the request path, logged in full once per plugin and place.

    A broken telemetry or lifecycle plugin fails the same way on every request; one traceback
    tells the operator, a traceback per request would drown the log. Later failures are counted
    (``counts``) and logged at debug level.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self.log = logger
        self.counts: dict[tuple[str, str], int] = {}

    def report(self, plugin: str, where: str, exc: BaseException) -> None:
        key = (plugin, where)
        count = self.counts.get(key, 0) + 1
        self.counts[key] = count
        if count == 1:
            self.log.error("plugin %s: %s raised and was skipped (shown once; repeats are logged at debug "
                           "level)", plugin, where, exc_info=exc)
        else:
            self.log.debug("plugin %s: %s raised again (%d times): %s: %s", plugin, where, count,
                           type(exc).__name__, exc)
