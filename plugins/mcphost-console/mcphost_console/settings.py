"""The ``[plugins.console]`` section, declared once: its keys, types, defaults and limits."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

import mcphost


class ConsoleSettings(mcphost.PluginSettings):
    """The operator's live web page: where it is served and who may see it."""

    path: Annotated[str, Field(pattern=r"^/[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*$", description=(
        "Where the page is served; its data is under <path>/api/."))] = "/console"
    scope: Annotated[str, Field(min_length=1, description=(
        "With an auth plugin installed: the scope a principal needs to see the page and to end sessions."
    ))] = "mcphost:admin"
    allow_remote: Annotated[bool, Field(description=(
        "Serve clients that are not on loopback too (put it behind an auth plugin or a reverse proxy that "
        "authenticates)."))] = False
    poll_seconds: Annotated[float, Field(ge=0.2, le=60, description=(
        "How often the page asks for fresh figures."))] = 1.0
