"""mcphost-redis: the shared state backend for several workers and machines.

Install it and set ``url`` in ``[plugins.redis]`` (or ``$MCPHOST_REDIS_URL``): that is all it
takes to switch backends. Without a URL the plugin is dormant ("not configured" in ``mcphost
plugins``) and the built-in in-memory backend serves.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import mcphost

from .settings import ENV_URL, RedisConfig

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


@mcphost.hookimpl
def mcphost_settings() -> type[RedisConfig]:
    return RedisConfig


@mcphost.hookimpl
def mcphost_unconfigured(host: mcphost.Host) -> str | None:
    # Without a URL the built-in in-memory backend serves and this plugin has nothing to do.
    return None if host.settings(RedisConfig).wanted() else "[plugins.redis] url"  # or $MCPHOST_REDIS_URL


@mcphost.hookimpl
def mcphost_backend(host: mcphost.Host) -> RedisBackend | None:
    settings = host.settings(RedisConfig).resolve(host.config.server)
    if settings is None:
        return None
    from .backend import RedisBackend
    return RedisBackend(settings)


__all__ = [
    "ENV_URL",
    "RedisBackend",
    "RedisBroker",
    "RedisConfig",
    "RedisEventLog",
    "RedisSessionStore",
    "RedisSettings",
    "RedisSubscription",
    "RedisTaskStore",
]
