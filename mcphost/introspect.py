"""What an operator may read about a running host, as plain JSON-able data (the console shows it).

Read-only views of the host's own records: plugins (status, why one failed, hooks, what each
provides, its live status report), the catalog with each record's provider, the live sessions
(on a shared backend those of every process, read from the store), per-tool traffic
(:mod:`mcphost.stats`), per-principal budgets, and health with the configuration in effect,
secrets redacted. One action: :func:`end_session`, which ends a session as a client's DELETE does.
Nothing here runs on the request path; everything is computed when asked.

Other figures are this process's: with several workers, or on a shared backend, each process
reports what it serves.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from typing import Any

from mcphost.budgets import sync_share
from mcphost.catalog import record_key
from mcphost.host import Host
from mcphost.plugins import call_impl, impls
from mcphost.records import Record
from mcphost.redaction import REDACTED as REDACTED  # the config view's first home; callers still import it
from mcphost.redaction import redact as redact
from mcphost.redaction import redact_text
from mcphost.sessions.backend import BackendUnavailable
from mcphost.sessions.session import Session, this_node

# -- plugins ------------------------------------------------------------------------------------------

def plugins(host: Host) -> list[dict[str, Any]]:
    """Every plugin ``mcphost plugins --all`` lists, with the live report of those that give one
    (``mcphost_status``): name, distribution, version, status, error and where it failed, hooks,
    what it provides, ``report``."""
    reports = status_reports(host)
    out = []
    for info in host.plugin_infos.values():
        item = info.to_json()
        item["report"] = reports.get(info.name)
        out.append(redact_plugin(item))
    return out


#: What a plugin provides that is a catalog name (shown as is); anything else it lists (a proxy's
#: upstream status lines, clashes) is text that may carry a URL or a command line, and is redacted.
CATALOG_KINDS = frozenset({"tools", "resources", "resourceTemplates", "prompts", "middleware", "commands"})


def redact_plugin(item: dict[str, Any]) -> dict[str, Any]:
    """A plugin's record (``PluginInfo.to_json``) with its error and what it lists besides catalog
    names redacted, in place; returns it."""
    if item.get("error"):
        item["error"] = redact_text(str(item["error"]))
    provides = item.get("provides") or {}
    for kind, names in provides.items():
        if kind not in CATALOG_KINDS:
            provides[kind] = redact(names)
    return item


def status_reports(host: Host) -> dict[str, Any]:
    """Each plugin's ``mcphost_status`` answer, by plugin name; one that raises reports its error."""
    reports: dict[str, Any] = {}
    for impl in impls(host.pm, "mcphost_status"):
        try:
            report = call_impl(impl, host=host)
        except Exception as exc:
            report = {"error": f"mcphost_status raised {type(exc).__name__}: {exc}"}
        if report is not None:
            reports[impl.plugin_name] = redact(report)
    return reports


# -- catalog ------------------------------------------------------------------------------------------

def catalog(host: Host) -> dict[str, Any]:
    """Every tool, resource, template and prompt with the plugin (and distribution) providing it,
    and the records that were refused (a name another plugin already provides) with why."""
    current = host.catalog
    kinds: dict[str, list[Any]] = {
        "tools": [entry.record for entry in current.tools.values()],
        "resources": list(current.resources.values()),
        "resourceTemplates": [entry.record for entry in current.templates.values()],
        "prompts": list(current.prompts.values()),
    }
    out: dict[str, Any] = {}
    for kind, records in kinds.items():
        out[kind] = [_record(record) for record in records]
    refused = getattr(current, "refused", None)
    if refused is not None:  # a catalog that records refused clashes one by one
        out["refused"] = [_refusal(item) for item in refused]
    else:  # a clash refuses the whole plugin: its failure says why
        out["refused"] = [{"plugin": info.name, "reason": info.error} for info in host.plugin_infos.values()
                          if info.status == "failed" and info.error and "provided by both" in info.error]
    return out


def _record(record: Record) -> dict[str, Any]:
    provenance = record.provenance
    return {"name": record_key(record), "title": record.title, "description": (record.description or "")[:300],
            "plugin": provenance.plugin if provenance else None,
            "distribution": provenance.distribution if provenance else None,
            "version": provenance.version if provenance else None, "scopes": sorted(record.scopes)}


def _refusal(item: Any) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(item).items()}
    return {"reason": str(item)}


# -- sessions -----------------------------------------------------------------------------------------

#: Most sessions one listing shows (the sessions of other processes are read from the store).
SESSIONS_LISTED = 500
#: Stored sessions asked for at once while listing them.
SESSIONS_PAGE = 100


async def sessions(host: Host, now: float | None = None, limit: int = SESSIONS_LISTED) -> dict[str, Any]:
    """The live sessions, up to ``limit``: ``{"sessions": [...], "total": n, "complete": bool}``.

    Those held in this process first, with their live figures; then, on a shared backend, those
    of every other process from the store (``Backend.live_sessions``, page by page), each with the
    node that opened it, ``held_here`` False, and the figures only its holder knows (requests in
    flight, questions waiting on the client) as None. ``total`` counts the live sessions (on a
    shared backend: in the store); ``complete`` is False when the listing stopped at ``limit``, or
    when the store could not be read (``error`` then says why, and only this process's are listed).
    2026-07-28 requests are not sessions and are not listed.
    """
    now = time.time() if now is None else now
    transport = "http" if host.manager.driver is not None else "in-process"
    held = list(host.manager.sessions.values())
    listed = [session_view(session, transport, now) for session in held[:limit]]
    complete = len(held) <= limit
    total = len(held)
    out: dict[str, Any] = {"sessions": listed, "total": total, "complete": complete}
    backend = host.backend
    if not (backend.shared and complete):
        return out
    seen = {session.id for session in held}
    try:
        out["total"] = max(total, await backend.sessions.count())
        cursor: str | None = None
        while True:
            page = await backend.live_sessions(cursor, SESSIONS_PAGE)
            for state in page.states:
                if state.get("id") in seen:
                    continue  # held here (listed above), or a repeat of the walk
                if len(listed) >= limit:
                    out["complete"] = False
                    return out
                seen.add(state["id"])
                listed.append(stored_view(state, now))
            cursor = page.cursor
            if cursor is None:
                return out
    except BackendUnavailable as exc:
        out.update(complete=False, error=str(exc))
        return out


def node() -> str:
    """This process as an operator tells it from the other processes of a cluster: ``host:pid``."""
    return this_node()


def stored_view(state: Mapping[str, Any], now: float) -> dict[str, Any]:
    """A session held by another process, as its stored state tells it (see :func:`sessions`)."""
    view = session_view(Session.from_state(state), "http", now)  # only HTTP sessions are stored
    view.update(inflight=None, waiting_on_client=None, held_here=False, node=state.get("node"))
    return view


def session_view(session: Session, transport: str, now: float) -> dict[str, Any]:
    """A session held in this process, with its live figures; ``node``: the process that opened it."""
    principal = session.principal
    info = session.client_info or {}

    def listed(value: set[str] | None) -> list[str] | None:
        return None if value is None else sorted(value)

    return {
        "id": session.id,
        "principal": None if principal is None else {"subject": principal.subject, "issuer": principal.issuer,
                                                     "client_id": principal.client_id,
                                                     "scopes": sorted(principal.scopes)},
        "quota": session.quota,
        "era": session.era,
        "protocol_version": session.protocol_version,
        "transport": transport,
        "client": {"name": info.get("name"), "version": info.get("version"), "title": info.get("title")},
        "initialized": session.initialized,
        "age": max(0.0, now - session.created_at),
        "idle": max(0.0, now - session.last_active),
        "allowed": {"tools": listed(session.allowed_tools), "prompts": listed(session.allowed_prompts),
                    "templates": listed(session.allowed_templates),
                    "resources": listed(session.allowed_resources)},
        "subscriptions": sorted(session.subscriptions),
        "inflight": len(session.inflight),
        "waiting_on_client": len(session.pending),
        "node": session.node or node(),
        "held_here": True,
    }


async def end_session(host: Host, session_id: str) -> bool:
    """End the session ``session_id`` as a client's DELETE does, whichever process holds it (on a
    shared backend it is loaded from the store, as a DELETE reaching this process loads it): its
    work is cancelled, ``mcphost_terminate`` fires once (reason ``deleted``, here), its stored state
    and events are dropped, and the other processes holding it let go. False when no such live
    session exists."""
    session = await host.manager.find(session_id)
    if session is None:
        return False
    await host.manager.end(session, "deleted")
    return True


# -- traffic and budgets ------------------------------------------------------------------------------

def traffic(host: Host) -> dict[str, Any]:
    """Per tool called in this process, its calls, errors and latencies (see :meth:`ToolStats.snapshot`);
    tools never called are left out (a gateway may mount thousands)."""
    return {name: entry.stats.snapshot() for name, entry in list(host.catalog.tools.items()) if entry.stats.calls}


def budgets(host: Host) -> dict[str, Any]:
    """Per caller (principal, or address for anonymous clients): what it holds of every budget in
    this process against the per-principal limit, and how often each budget refused it (429s).

    ``budgets`` lists every budget with its limits (``perPrincipal``, ``total``) and what everyone
    here holds; ``shared`` says whether the per-principal limits hold across the cluster (a shared
    backend's budget share, not fallen back to per-process limits). Each caller row has ``held``
    and ``refusals`` by budget name, and the older flat figures (``sessions``, ``requests``,
    ``tasks``, ``parked``, ``refused``: every refusal together)."""
    manager = host.manager
    settings = host.config.server
    ledger = manager.budgets
    snapshot = ledger.snapshot()
    sync_running = host.kernel.sync_running() if host.kernel is not None else {}
    rows: dict[str, dict[str, int]] = {"sessions": dict(manager.held_by), "sync pool": sync_running}
    rows.update((name, budget["byPrincipal"]) for name, budget in snapshot.items())
    listed = [{"name": "sessions", "setting": "max_sessions_per_principal",
               "perPrincipal": settings.max_sessions_per_principal, "total": settings.max_sessions,
               "held": len(manager.sessions)}]
    listed += [{"name": name, "setting": ledger.budgets[name].setting, "perPrincipal": budget["perPrincipal"],
                "total": budget["total"], "held": budget["held"]} for name, budget in snapshot.items()]
    listed.append({"name": "sync pool", "setting": "sync_workers_per_principal",
                   "perPrincipal": sync_share(settings), "total": settings.sync_workers,
                   "held": sum(sync_running.values())})
    callers = set(manager.refused_by) | set(ledger.refusals)
    for held in rows.values():
        callers |= set(held)
    table = []
    for key in sorted(callers):
        held = {name: by_key.get(key, 0) for name, by_key in rows.items()}
        table.append({"caller": key, "sessions": held["sessions"], "requests": held["requests"],
                      "tasks": held["tasks"], "parked": held["parked calls"],
                      "refused": manager.refused_by.get(key, 0), "held": held,
                      "refusals": dict(ledger.refusals.get(key, {}))})
    return {"limits": {"sessions": settings.max_sessions_per_principal,
                       "requests": settings.max_requests_per_principal,
                       "tasks": settings.max_tasks_per_principal,
                       "sessions_total": settings.max_sessions},
            "budgets": listed,
            "shared": ledger.share is not None and not ledger.degraded,
            "callers": table}


# -- health and configuration -------------------------------------------------------------------------

async def health(host: Host) -> dict[str, Any]:
    """Readiness of this process as far as the host knows it, the backend, workers and the config
    in effect with secrets redacted."""
    backend = host.backend
    healthy = await host.backend_healthy() if host.started else False
    return {"started": host.started, "ready": host.started and healthy,
            "backend": {"name": backend.name, "healthy": healthy, "shared": backend.shared},
            "workers": host.config.server.workers, "process": os.getpid(), "node": node(),
            "sessions": len(host.manager.sessions), "config": config(host)}


def config(host: Host) -> dict[str, Any]:
    """The configuration in effect (file and environment), secrets redacted."""
    cfg = host.config
    shown: dict[str, Any] = redact({
        "server": dataclasses.asdict(cfg.server), "plugins": {k: dict(v) for k, v in cfg.plugins.items()},
        "block": list(cfg.block), "allow": None if cfg.allow is None else list(cfg.allow),
        "path": str(cfg.path) if cfg.path else None})
    return shown


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return str(value)
