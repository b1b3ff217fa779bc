"""mcphost-redis: the shared state backend for several workers and machines.

Install it and set ``url`` in ``[plugins.redis]`` (or ``$MCPHOST_REDIS_URL``): that is all it
takes to switch backends. Without a URL the plugin is dormant ("not configured" in ``mcphost
plugins``) and the built-in in-memory backend serves.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

import mcphost

if TYPE_CHECKING:
    from .backend import (
        RedisBackend,
        RedisBroker,
        RedisEventLog,
        RedisSessionStore,
        RedisSettings,
        RedisSubscription,
        RedisTaskStore,
    )

#: Loaded on first use (redis.asyncio takes half a second to import): a CLI command that loads the
#: plugins, with this one dormant, does not pay for it.
_BACKEND_NAMES = ("RedisBackend", "RedisBroker", "RedisEventLog", "RedisSessionStore", "RedisSettings",
                  "RedisSubscription", "RedisTaskStore")


def __getattr__(name: str) -> Any:
    if name in _BACKEND_NAMES:
        return getattr(importlib.import_module("mcphost_redis.backend"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__version__ = "0.1.0"

ENV_URL = "MCPHOST_REDIS_URL"

CONFIG_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "[plugins.redis]",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "url": {"type": "string", "pattern": "^(redis|rediss|unix)://",
                "description": "Redis URL, e.g. redis://127.0.0.1:6379/0 (redis://, rediss:// or unix://). "
                               "Setting it switches mcphost to this backend."},
        "prefix": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[^{}\\s]+$",
                   "default": "mcphost:", "description": "Prefix of every key and channel"},
        "op_timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 30, "default": 1.0,
                       "description": "Seconds one Redis command may take before Redis counts as unavailable"},
        "connect_timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 30, "default": 1.0,
                            "description": "Seconds to establish a connection"},
        "retry_after": {"type": "integer", "minimum": 1, "maximum": 3600, "default": 1,
                        "description": "Retry-After (seconds) on the 503 answered while Redis is unavailable"},
        "session_ttl": {"type": "number", "exclusiveMinimum": 0,
                        "description": "Seconds an idle session is kept (default: server.session_idle_timeout)"},
        "stream_max_events": {"type": "integer", "minimum": 1,
                              "description": "Events kept per stream at least (default: server.stream_max_events)"},
        "stream_max_age": {"type": "number", "exclusiveMinimum": 0,
                           "description": "Seconds events are kept (default: the session TTL)"},
        "lease": {"type": "number", "minimum": 1, "maximum": 3600, "default": 6,
                  "description": "Seconds after which a request whose process stopped heartbeating is ended "
                                 "with an error"},
        "max_connections": {"type": "integer", "minimum": 2, "default": 10000,
                            "description": "Connections to Redis per process at most"},
    },
}


def settings_for(host: Any) -> RedisSettings | None:
    """The settings from ``[plugins.redis]`` and ``[server]``; None when no URL is configured."""
    section = dict(host.plugin_config("redis"))
    url = section.pop("url", None) or os.environ.get(ENV_URL)
    if not url:
        return None
    from .backend import RedisSettings
    server = host.config.server
    session_ttl = float(section.pop("session_ttl", server.session_idle_timeout))
    return RedisSettings(
        url=url,
        session_ttl=session_ttl,
        stream_max_events=int(section.pop("stream_max_events", server.stream_max_events)),
        stream_max_age=float(section.pop("stream_max_age", session_ttl)),
        **section,
    )


@mcphost.hookimpl
def mcphost_config_schema() -> dict[str, Any]:
    return CONFIG_SCHEMA


@mcphost.hookimpl
def mcphost_unconfigured(host: Any) -> str | None:
    # Without a URL the built-in in-memory backend serves and this plugin has nothing to do.
    if host.plugin_config("redis").get("url") or os.environ.get(ENV_URL):
        return None
    return "[plugins.redis] url"  # or $MCPHOST_REDIS_URL


@mcphost.hookimpl
def mcphost_backend(host: Any) -> RedisBackend | None:
    settings = settings_for(host)
    if settings is None:
        return None
    from .backend import RedisBackend
    return RedisBackend(settings)


__all__ = [
    "CONFIG_SCHEMA",
    "RedisBackend",
    "RedisBroker",
    "RedisEventLog",
    "RedisSessionStore",
    "RedisSettings",
    "RedisSubscription",
    "RedisTaskStore",
    "settings_for",
]
