"""mcphost-conformance: the fixtures the official MCP conformance suite expects a server to have.

The suite (``@modelcontextprotocol/conformance``, ``conformance server --url ...``) calls tools,
reads resources and gets prompts with fixed names and checks the exact shapes that come back.
This plugin provides them for the dated (session-era) protocol revisions and for 2026-07-28
(the stateless diagnostics and ``input_required`` fixtures live in :mod:`mcphost_conformance.stateless`);
the suite's repository lists the scenarios one by one.

The plugin is a class: the ``conformance`` entry point names :class:`ConformancePlugin`, which
mcphost instantiates once per Host. Per-host state (the watched resource and the background task
that keeps "updating" it) lives on that object, keyed by host, never in module globals.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

import mcphost

if TYPE_CHECKING:
    from mcphost_conformance.fixtures import PROMPTS, RESOURCE_TEMPLATES, TOOLS
    from mcphost_conformance.media import PNG, WAV


__all__ = [
    "PLUGIN_NAME",
    "PNG",
    "PROMPTS",
    "RESOURCE_TEMPLATES",
    "TOOLS",
    "WATCHED_URI",
    "WAV",
    "ConformancePlugin",
    "ConformanceSettings",
]


def __getattr__(name: str) -> Any:
    """The fixtures (and the media they serve) on first use: building their schemas at import is what a
    dormant plugin would otherwise cost every command line."""
    if name in ("PROMPTS", "RESOURCE_TEMPLATES", "TOOLS"):
        return getattr(importlib.import_module("mcphost_conformance.fixtures"), name)
    if name in ("PNG", "WAV"):
        return getattr(importlib.import_module("mcphost_conformance.media"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


log = logging.getLogger("mcphost_conformance")

#: The entry-point name, and so the config section ``[plugins.conformance]``.
PLUGIN_NAME = "conformance"
WATCHED_URI = "test://watched-resource"


class ConformanceSettings(mcphost.PluginSettings):
    """The conformance fixtures: how fast the watched resource changes, how long a reconnection waits."""

    enabled: Annotated[bool | None, Field(description=(
        "Serve the fixtures (the plugin is dormant without this, any other setting of this section, or its "
        "name in the plugin allow list)"))] = None
    watched_interval_seconds: Annotated[float, Field(gt=0, description=(
        "How often test://watched-resource changes (notifications/resources/updated)"))] = 3.0
    reconnect_retry_ms: Annotated[int, Field(ge=0, le=60_000, description=(
        "The SSE retry interval test_reconnection asks for when it drops its stream"))] = 500




# -- the plugin object ------------------------------------------------------------------------------

@dataclass
class Watched:
    """One host's test://watched-resource: how often it changes, how often it has, and the task doing it."""

    interval: float
    revision: int = 0
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    def text(self) -> str:
        return f"Watched resource content (revision {self.revision})"


class ConformancePlugin:
    """The ``conformance`` plugin. mcphost instantiates it once per Host from the entry point.

    ``__name__`` is the entry-point name so that ``mcphost.testing.make_host(ConformancePlugin())``
    registers it as ``conformance`` too, and ``[plugins.conformance]`` is validated and read alike.
    """

    def __init__(self) -> None:
        self.__name__ = PLUGIN_NAME
        self._watched: weakref.WeakKeyDictionary[Any, Watched] = weakref.WeakKeyDictionary()

    def watched(self, host: mcphost.Host) -> Watched:
        """The watched-resource state of ``host`` (created on first use)."""
        state = self._watched.get(host)
        if state is None:
            interval = host.settings(ConformanceSettings).watched_interval_seconds
            state = self._watched[host] = Watched(interval)
        return state

    @mcphost.hookimpl
    def mcphost_settings(self) -> type[ConformanceSettings]:
        return ConformanceSettings

    @mcphost.hookimpl
    def mcphost_unconfigured(self, host: mcphost.Host) -> str | None:
        """Dormant unless asked for: its 35 fixtures are for the conformance suite, not for a first
        ``mcphost serve``. ``enabled = true`` (or any other setting of the section) wakes it, and so
        does naming it in the allow list (``--plugins demo,conformance``, ``MCPHOST_PLUGINS``)."""
        if host.settings(ConformanceSettings).enabled is False:
            return f"[plugins.{PLUGIN_NAME}] enabled = true"
        if host.config.plugin(PLUGIN_NAME):
            return None
        allow = getattr(getattr(host, "selection", None), "allow", None)
        if allow is not None and PLUGIN_NAME in allow:
            return None
        return f"[plugins.{PLUGIN_NAME}] enabled = true"

    @mcphost.hookimpl
    def mcphost_tools(self, host: mcphost.Host) -> list[mcphost.Tool]:
        from mcphost_conformance.fixtures import TOOLS, make_reconnection_tool

        retry_ms = host.settings(ConformanceSettings).reconnect_retry_ms
        return [*TOOLS, make_reconnection_tool(retry_ms)]

    @mcphost.hookimpl
    def mcphost_resources(self, host: mcphost.Host) -> list[mcphost.Resource]:
        from mcphost_conformance.fixtures import static_binary, static_text

        state = self.watched(host)

        @mcphost.resource(WATCHED_URI, name="watched-resource", title="Watched resource", mime_type="text/plain")
        def watched_resource() -> str:
            """A text resource that changes every few seconds; subscribe to hear about it."""
            return state.text()

        # static-text first: the caching scenario reads the first listed resource.
        return [static_text, static_binary, watched_resource]

    @mcphost.hookimpl
    def mcphost_resource_templates(self, host: mcphost.Host) -> list[mcphost.ResourceTemplate]:
        from mcphost_conformance.fixtures import RESOURCE_TEMPLATES

        return list(RESOURCE_TEMPLATES)

    @mcphost.hookimpl
    def mcphost_prompts(self, host: mcphost.Host) -> list[mcphost.Prompt]:
        from mcphost_conformance.fixtures import PROMPTS

        return list(PROMPTS)

    @mcphost.hookimpl
    async def mcphost_startup(self, host: mcphost.Host) -> None:
        state = self.watched(host)
        if state.task is None or state.task.done():
            state.task = asyncio.get_running_loop().create_task(self._update_watched(host, state),
                                                                name="mcphost-conformance: watched-resource")

    @mcphost.hookimpl
    async def mcphost_shutdown(self, host: mcphost.Host) -> None:
        state = self._watched.get(host)
        if state is None or state.task is None:
            return
        task, state.task = state.task, None
        task.cancel()
        await asyncio.wait([task])  # let it finish without swallowing a cancellation of the shutdown itself

    @staticmethod
    async def _update_watched(host: mcphost.Host, state: Watched) -> None:
        while True:
            await asyncio.sleep(state.interval)
            state.revision += 1
            try:
                await host.notify_resource_updated(WATCHED_URI)
            except Exception:
                log.warning("could not announce an update of %s", WATCHED_URI, exc_info=True)
