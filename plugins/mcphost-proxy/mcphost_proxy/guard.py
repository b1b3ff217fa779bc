"""Which of an upstream's definitions are served: pins (``pinning``) and hidden text (``hidden_text``).

A held definition is left out of the records handed to the host, so it is neither listed nor
searchable on any endpoint in either era; a call to it is answered by the proxy's middleware
with an error naming the upstream and saying it awaits approval (:meth:`Guard.refusal`).
Approvals made elsewhere (``mcphost pins approve``, another process of a cluster) are noticed
by polling the pin store's version every ``pins_poll`` seconds. See docs/pinning.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcphost import pins
from mcphost_proxy.settings import ServerSettings
from mcphost_proxy.work import offload

if TYPE_CHECKING:
    from mcphost_proxy.mount import Report

log = logging.getLogger("mcphost.proxy")

#: The catalog kinds pinned, by the plugin's own kind names (resources are served as listed).
PINNED = {"tools": "tools", "prompts": "prompts", "templates": "resourceTemplates"}
#: Every kind the plugin mounts, as the catalog names it.
CATALOG = {**PINNED, "resources": "resources"}
#: How the reason of a definition held for its hidden text begins (mount.records writes it).
HIDDEN = "it carries hidden text"
#: Called with a server's name when its pins changed elsewhere: serve its records again.
Republish = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class Held:
    upstream: str
    kind: str
    name: str
    reason: str

    def what(self) -> str:
        return {"tools": "Tool", "prompts": "Prompt", "resources": "Resource",
                "resourceTemplates": "Resource template"}.get(self.kind, "Definition")

    def message(self) -> str:
        what = self.what()
        if self.reason.startswith(HIDDEN):  # not a pin: approving it means serving it cleaned
            return (f"{what} {self.name!r} of upstream {self.upstream!r} is held: {self.reason}. It awaits approval: "
                    f"an operator serves it cleaned with hidden_text = 'strip' for this upstream")
        return (f"{what} {self.name!r} of upstream {self.upstream!r} is held: {self.reason}. It awaits approval "
                f"by an operator (mcphost pins diff {self.name}; mcphost pins approve {self.name})")


def scope_of(server: str) -> str:
    return f"proxy:{server}"


def wire(kind: str, record: Any) -> dict[str, Any]:
    """The pinned fields of a record, as a client reads them."""
    if kind == "tools":
        return {"name": record.name, "title": record.title, "description": record.description,
                "inputSchema": record.input_schema, "outputSchema": record.output_schema,
                "annotations": record.annotations}
    if kind == "prompts":
        return {"name": record.name, "title": record.title, "description": record.description,
                "arguments": [dict(a) for a in record.arguments] or None}
    return {"uriTemplate": record.uri_template, "name": record.name, "title": record.title,
            "description": record.description, "mimeType": record.mime_type, "annotations": record.annotations}


def served_name(kind: str, record: Any) -> str:
    if kind == "resources":
        return str(record.uri)
    return str(record.uri_template if kind == "resourceTemplates" else record.name)


def _event(held: Held, entry: pins.Entry) -> None:
    """One log line and, where OpenTelemetry is installed, one span event (``mcphost.pin.held``)."""
    log.warning("upstream %s: %s %r held: %s (mcphost pins diff %s)", held.upstream, held.kind[:-1], held.name,
                held.reason, held.name)
    try:
        from opentelemetry import trace
    except ImportError:
        return
    tracer = trace.get_tracer("mcphost.proxy")
    with tracer.start_as_current_span("mcphost.pin.held") as span:
        span.add_event("mcphost.pin.held", {"mcphost.upstream": held.upstream, "mcphost.kind": held.kind,
                                            "mcphost.name": held.name, "mcphost.reason": held.reason,
                                            "mcphost.pin.hash": entry.hash or "",
                                            "mcphost.pin.pending_hash": entry.pending_hash or ""})


def _without(derived: dict[str, list[Any]], held: dict[tuple[str, str], Held]) -> dict[str, list[Any]]:
    return {mine: [r for r in records if (CATALOG[mine], served_name(CATALOG[mine], r)) not in held]
            for mine, records in derived.items()}


class Guard:
    """The pins and held definitions of every upstream of one host (the console's view: :meth:`state`)."""

    def __init__(self) -> None:
        self.store: pins.PinStore | None = None
        #: Held definitions by server: (catalog kind, name as served) -> why.
        self.held: dict[str, dict[tuple[str, str], Held]] = {}
        #: Hidden text removed, by server: (catalog kind, name as served) -> what went.
        self.hidden: dict[str, dict[tuple[str, str], list[dict[str, str]]]] = {}
        #: The pins each server's records were last judged against (to notice changes made elsewhere).
        self._seen: dict[str, dict[str, dict[str, Any]]] = {}
        self._poller: asyncio.Task[None] | None = None
        self._republish: Republish | None = None

    async def admit(self, server: ServerSettings, derived: dict[str, list[Any]], report: Report
                    ) -> dict[str, list[Any]]:
        """``derived`` less what is held (hidden text under ``hold``; under pinning, what differs from its pin)."""
        held = {key: Held(server.name, key[0], key[1], reason) for key, reason in report.held.items()}
        self.hidden[server.name] = {key: [r.to_json() for r in removed] for key, removed in report.hidden.items()}
        if server.pinning != "off" and self.store is not None:
            offered = {f"{kind}/{served_name(kind, r)}": (kind, served_name(kind, r),
                                                          pins.definition(kind, wire(kind, r)))
                       for mine, kind in PINNED.items() for r in derived[mine]}
            scope = scope_of(server.name)
            try:
                entries = await self.store.load(scope)
                verdict = await offload(pins.judge, server.pinning, entries, offered)
                await self.store.save(scope, verdict.writes)
            except Exception as exc:  # fail closed: nothing pinned is served unchecked
                log.error("upstream %s: the pin store (%s) cannot be used (%s): its tools, prompts and templates "
                          "are held until it can", server.name, self.store.where, exc)
                held.update({(kind, name): Held(server.name, kind, name, "the pin store cannot be read")
                             for kind, name, _ in offered.values()})
                self._seen[server.name] = {"": {}}  # never what the store holds: served again once it reads
                self.held[server.name] = held
                return _without(derived, held)
            entries.update(verdict.writes)
            self._seen[server.name] = {key: entry.to_json() for key, entry in entries.items()}
            for key, entry in verdict.held.items():
                reason = ("its definition differs from the pinned one" if entry.hash is not None
                          else "it is new and pinning is 'approve'")
                if entry.rejected == entry.pending_hash:
                    reason += " (rejected)"
                item = held[(entry.kind, entry.name)] = Held(server.name, entry.kind, entry.name, reason)
                if key in verdict.newly_held:
                    _event(item, entry)
        self.held[server.name] = held
        return _without(derived, held) if held else derived

    def refusal(self, kind: str, name: str) -> str | None:
        """The error for a call to a held definition (None when ``name`` is not held)."""
        for held in self.held.values():
            found = held.get((kind, name))
            if found is not None:
                return found.message()
        return None

    def start(self, every: float, republish: Republish) -> None:
        self._republish = republish
        if self.store is not None and self._poller is None:
            self._poller = asyncio.get_running_loop().create_task(self._poll(every, republish), name="proxy:pins")

    def stop(self) -> None:
        if self._poller is not None:
            self._poller.cancel()

    async def _poll(self, every: float, republish: Republish) -> None:
        """Serve again each server whose pins changed elsewhere (an approval from the CLI or another process)."""
        assert self.store is not None
        version: str | None = None
        failing = False
        while True:
            await asyncio.sleep(every)
            try:
                now = await self.store.version()
                if now == version and not failing:
                    continue
                for server, seen in list(self._seen.items()):
                    stored = await self.store.load(scope_of(server))
                    if {key: entry.to_json() for key, entry in stored.items()} != seen:
                        log.info("upstream %s: its pins changed; serving its definitions again", server)
                        await republish(server)
                version, failing = now, False
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not failing:  # once per outage
                    log.warning("the pin store (%s) could not be read: %s", self.store.where, exc)
                failing = True

    def problems(self, shown: int = 20) -> list[dict[str, str]]:
        """The console's problems strip: each held definition (the first ``shown``), then how many more."""
        held = [h for by in self.held.values() for h in by.values()]
        out = [{"kind": "held", "severity": "warning",
                "title": f"{h.what()} {h.name} of upstream {h.upstream} awaits approval",
                "detail": h.reason, "link": f"#pin-{h.upstream}-{h.name}"} for h in held[:shown]]
        if len(held) > shown:
            out.append({"kind": "held", "severity": "warning", "title": f"{len(held) - shown} more definitions held",
                        "detail": "mcphost pins list", "link": "#pins"})
        return out

    async def state(self) -> dict[str, Any]:
        """Every pin, what is held and why, and the hidden text removed: what a console shows
        (JSON-able; ``diff`` is the word diff of a pending definition against its pin)."""
        listed = await pins.everything(self.store) if self.store is not None else []
        return {
            "store": self.store.where if self.store is not None else None,
            "pins": [{"upstream": pins.provider_of(scope), **entry.to_json(), "awaiting": entry.awaiting,
                      "diff": entry.diff() if entry.pending is not None else None} for scope, entry in listed],
            "held": [held.__dict__ for by in self.held.values() for held in by.values()],
            "hidden": [{"upstream": server, "kind": key[0], "name": key[1], "removed": removed}
                       for server, by in self.hidden.items() for key, removed in by.items()],
        }

    async def decide(self, name: str | None, *, approve: bool, upstream: str | None = None, every: bool = False
                     ) -> list[pins.Entry]:
        """Approve or reject (as ``mcphost pins`` does) and serve the changed upstreams again at once."""
        if self.store is None:
            return []
        changed = await pins.decide(self.store, name, approve=approve, provider=upstream, every=every)
        republish = self._republish
        if republish is not None:
            for server in sorted({pins.provider_of(scope) for scope, _ in changed}):
                if server in self._seen:
                    await republish(server)
        return [entry for _, entry in changed]
