"""The ``[plugins.redis]`` section, declared once: its keys, types, defaults and limits.

:class:`RedisConfig` is what the file says (checked by the host before anything starts);
:meth:`RedisConfig.resolve` turns it into the backend's :class:`~mcphost_redis.backend.RedisSettings`,
taking the URL from ``$MCPHOST_REDIS_URL`` when the file has none and the TTLs from ``[server]``
where the section leaves them unset.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

import mcphost

if TYPE_CHECKING:  # the backend (redis.asyncio) is imported when one is made, not by `mcphost plugins`
    from .backend import RedisSettings

ENV_URL = "MCPHOST_REDIS_URL"


class RedisConfig(mcphost.PluginSettings):
    """The shared state backend: where Redis is, and how long state is kept."""

    url: Annotated[str | None, Field(
        pattern=r"^(redis|rediss|unix)://",
        description="Redis URL, e.g. redis://127.0.0.1:6379/0 (redis://, rediss:// or unix://). "
                    "Setting it switches mcphost to this backend.")] = None
    prefix: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[^{}\s]+$",
                                 description="Prefix of every key and channel")] = "mcphost:"
    op_timeout: Annotated[float, Field(gt=0, le=30, description=(
        "Seconds one Redis command may take before Redis counts as unavailable"))] = 1.0
    connect_timeout: Annotated[float, Field(gt=0, le=30, description="Seconds to establish a connection")] = 1.0
    retry_after: Annotated[int, Field(ge=1, le=3600, description=(
        "Retry-After (seconds) on the 503 answered while Redis is unavailable"))] = 1
    session_ttl: Annotated[float | None, Field(gt=0, description=(
        "Seconds an idle session is kept (default: server.session_idle_timeout)"))] = None
    stream_max_events: Annotated[int | None, Field(ge=1, description=(
        "Events kept per stream at least (default: server.stream_max_events)"))] = None
    stream_max_age: Annotated[float | None, Field(gt=0, description=(
        "Seconds events are kept (default: the session TTL)"))] = None
    lease: Annotated[float, Field(ge=1, le=3600, description=(
        "Seconds after which a request whose process stopped heartbeating is ended with an error"))] = 6
    max_connections: Annotated[int, Field(ge=2, description="Connections to Redis per process at most")] = 10000

    def wanted(self, env: Mapping[str, str] | None = None) -> bool:
        """Whether a URL is configured (here or in ``$MCPHOST_REDIS_URL``): without one the plugin is dormant."""
        return bool(self.url or (os.environ if env is None else env).get(ENV_URL))

    def resolve(self, server: mcphost.ServerSettings, env: Mapping[str, str] | None = None) -> RedisSettings | None:
        """The backend's settings, the unset ones taken from ``[server]``; None without a URL."""
        url = self.url or (os.environ if env is None else env).get(ENV_URL)
        if not url:
            return None
        from .backend import RedisSettings

        session_ttl = server.session_idle_timeout if self.session_ttl is None else self.session_ttl
        return RedisSettings(
            url=url, prefix=self.prefix, op_timeout=self.op_timeout, connect_timeout=self.connect_timeout,
            retry_after=self.retry_after, session_ttl=session_ttl,
            stream_max_events=server.stream_max_events if self.stream_max_events is None else self.stream_max_events,
            stream_max_age=session_ttl if self.stream_max_age is None else self.stream_max_age,
            lease=self.lease, max_connections=self.max_connections,
            embryonic_ttl=server.embryonic_timeout)
