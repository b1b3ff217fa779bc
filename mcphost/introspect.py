"""What an operator may read about a running host, as plain JSON-able data (the console shows it).

Read-only views of the host's own records: plugins (status, why one failed, hooks, what each
provides, its live status report), the catalog with each record's provider, the sessions held in
this process, per-tool traffic (:mod:`mcphost.stats`), per-principal budgets, and health with the
configuration in effect, secrets redacted. One action: :func:`end_session`, which ends a session as
a client's DELETE does. Nothing here runs on the request path; everything is computed when asked.

Figures are this process's: with several workers, or on a shared backend, each process reports
what it holds.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from mcphost.budgets import sync_share
from mcphost.catalog import record_key
from mcphost.host import Host
from mcphost.plugins import call_impl, impls
from mcphost.sessions.session import Session

#: Config keys whose values are never shown (matched anywhere in the key, case-insensitive).
SECRET_KEY = re.compile(r"secret|password|passwd|token|credential|private|api[_-]?key|state_keys|authorization", re.I)
REDACTED = "[redacted]"


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
        out.append(item)
    return out


def status_reports(host: Host) -> dict[str, Any]:
    """Each plugin's ``mcphost_status`` answer, by plugin name; one that raises reports its error."""
    reports: dict[str, Any] = {}
    for impl in impls(host.pm, "mcphost_status"):
        try:
            report = call_impl(impl, host=host)
        except Exception as exc:
            report = {"error": f"mcphost_status raised {type(exc).__name__}: {exc}"}
        if report is not None:
            reports[impl.plugin_name] = report
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


def _record(record: Any) -> dict[str, Any]:
    provenance = getattr(record, "provenance", None)
    return {"name": record_key(record), "title": getattr(record, "title", None),
            "description": (getattr(record, "description", None) or "")[:300],
            "plugin": getattr(provenance, "plugin", None), "distribution": getattr(provenance, "distribution", None),
            "version": getattr(provenance, "version", None), "scopes": sorted(getattr(record, "scopes", ()) or ())}


def _refusal(item: Any) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(item).items()}
    return {"reason": str(item)}


# -- sessions -----------------------------------------------------------------------------------------

def sessions(host: Host, now: float | None = None) -> list[dict[str, Any]]:
    """The sessions held in this process (2026-07-28 requests are not sessions and are not listed)."""
    now = time.time() if now is None else now
    transport = "http" if host.manager.driver is not None else "in-process"
    here = node()
    return [session_view(session, transport, now, here) for session in list(host.manager.sessions.values())]


def node() -> str:
    """This process as an operator tells it from the other processes of a cluster: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def session_view(session: Session, transport: str, now: float, where: str | None = None) -> dict[str, Any]:
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
        "node": where or node(),
    }


async def end_session(host: Host, session_id: str) -> bool:
    """End the session ``session_id`` held here as a client's DELETE does: its work is cancelled,
    ``mcphost_terminate`` fires once (reason ``deleted``), its stored state and events are dropped.
    False when no such session is held here."""
    session = host.manager.get(session_id)
    if session is None or session.closed:
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


def redact(value: Any, key: str = "") -> Any:
    """``value`` with secrets replaced: values under a secret-looking key, and passwords in URLs."""
    if key and SECRET_KEY.search(key) and value not in (None, "", [], (), {}, False):
        return REDACTED
    if isinstance(value, Mapping):
        return {str(k): redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [redact(v) for v in value]
    if isinstance(value, str) and "://" in value and "@" in value:
        return _url_without_password(value)
    return _plain(value)


def _url_without_password(text: str) -> str:
    try:
        parts = urlsplit(text)
    except ValueError:
        return text
    if parts.password is None:
        return text
    netloc = f"{parts.username or ''}:{REDACTED}@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return str(value)
