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

import asyncio
import bisect
import dataclasses
import os
import time
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

import pydantic

from mcphost import stats
from mcphost.budgets import sync_share
from mcphost.catalog import record_key
from mcphost.host import Host
from mcphost.plugins import call_impl, declared_settings, impls
from mcphost.records import Record
from mcphost.redaction import REDACTED as REDACTED  # the config view's first home; callers still import it
from mcphost.redaction import redact as redact
from mcphost.redaction import redact_text
from mcphost.sessions.backend import BackendUnavailable
from mcphost.sessions.session import Session, this_node
from mcphost.settings import PluginSettings
from mcphost.stats import BUCKET_SECONDS, BUCKETS

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
    out: dict[str, Any] = {kind: [_record(record) for record in records] for kind, records in catalog_records(host)}
    out["refused"] = catalog_refused(host)[0]
    return out


def _record(record: Record) -> dict[str, Any]:
    provenance = record.provenance
    return {"name": record_key(record), "title": record.title, "description": (record.description or "")[:300],
            "plugin": provenance.plugin if provenance else None,
            "origin": provenance.origin if provenance else None,
            "distribution": provenance.distribution if provenance else None,
            "version": provenance.version if provenance else None, "scopes": sorted(record.scopes)}


def _refusal(item: Any) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(item).items()}
    return {"reason": str(item)}


#: Kinds of record in the order the catalog's pages list them, with the catalog's attribute.
PAGED_KINDS = (("tools", "tools"), ("resources", "resources"), ("resourceTemplates", "templates"),
               ("prompts", "prompts"))
#: Most records one page holds, and most refusals a page lists (the catalog may hold 200 000 tools).
PAGE_MAX = 500
REFUSED_LISTED = 100
#: A search stops counting its matches here (the page says "more"); it reads this many characters
#: of the catalog's text at once (about half a millisecond), then lets the loop run.
MATCHES_COUNTED = 10_000
SEARCHED_AT_ONCE = 1 << 20


def catalog_records(host: Host, kind: str | None = None) -> list[tuple[str, list[Any]]]:
    """The catalog's records by kind (``kind``: only that one), as the catalog's pages list them:
    copied once per catalog (about 25 ms for 200 000 tools on a busy machine), then kept."""
    paged = _paged(host)
    groups = paged.groups.get(kind)
    if groups is None:
        groups = paged.groups[kind] = [
            (name, [entry.record for entry in getattr(paged.catalog, attribute).values()]
             if attribute in ("tools", "templates") else list(getattr(paged.catalog, attribute).values()))
            for name, attribute in PAGED_KINDS if kind is None or kind == name]
    return groups


async def catalog_page(host: Host, offset: int = 0, limit: int = 100, query: str = "",
                       kind: str | None = None) -> dict[str, Any]:
    """One page of the catalog, whatever its size: ``records`` (each with ``kind`` and its provider:
    ``plugin``, ``origin`` (the upstream a proxy mounted it from), ``distribution``, ``version``),
    ``total`` (records in the catalog, or of ``kind``), ``matched`` (those matching ``query``, a
    case-blind substring of name, title, description or provider; counting stops at
    :data:`MATCHES_COUNTED` and ``more`` says so), ``offset``, ``limit``, ``counts`` per kind and
    the first :data:`REFUSED_LISTED` refused records with ``refused_total``. A search reads an
    index of the catalog's text built once per catalog in a worker thread, so a search of 200 000
    tools holds the event loop for a few milliseconds."""
    limit = max(1, min(PAGE_MAX, limit))
    offset = max(0, offset)
    groups = catalog_records(host, kind)
    counts = {name: len(records) for name, records in groups}
    total = sum(counts.values())
    query = " ".join(query.lower().split())[:200]
    more = False
    if query:
        index = await _search_index(host, kind, groups)
        hits, more = await index.find(query, offset + limit)
        matched = len(hits)
        picked = [index.entry(i) for i in hits[offset:offset + limit]]
    else:
        matched = total
        picked = []
        skip = offset
        for name, records in groups:
            if skip >= len(records):
                skip -= len(records)
                continue
            picked += [(name, record) for record in records[skip:skip + limit - len(picked)]]
            skip = 0
            if len(picked) >= limit:
                break
    refused, refused_total = catalog_refused(host, REFUSED_LISTED)
    return {"records": [{"kind": name, **_record(record)} for name, record in picked], "total": total,
            "matched": matched, "more": more, "offset": offset, "limit": limit, "counts": counts,
            "query": query, "refused": refused, "refused_total": refused_total}


def catalog_refused(host: Host, limit: int | None = None) -> tuple[list[dict[str, Any]], int]:
    """The records the catalog refused (a name another plugin already provides) with why: the first
    ``limit`` of them (None: all), and how many there are."""
    refused = getattr(host.catalog, "refused", None)
    if refused is not None:  # a catalog that records refused clashes one by one
        items = list(refused)
        return [_refusal(item) for item in items[:limit]], len(items)
    # a clash refuses the whole plugin: its failure says why
    failed = [{"plugin": info.name, "reason": info.error} for info in host.plugin_infos.values()
              if info.status == "failed" and info.error and "provided by both" in info.error]
    return failed[:limit], len(failed)


class _Index:
    """The catalog's searchable text, one line per record, lower-cased, in one string: a search is
    ``str.find`` over it (C speed), a slice at a time, and a bisect per match. It holds no object
    per record that the garbage collector tracks (a list of 200 000 tuples made while the loop
    serves would set off a full collection of the whole heap)."""

    def __init__(self, groups: list[tuple[str, list[Any]]]) -> None:
        self.groups = groups
        self.firsts: list[int] = []  # the index of each group's first record
        lines: list[str] = []
        for name, records in groups:
            self.firsts.append(len(lines))
            lines += [_searchable(name, record) for record in records]
        self.starts: list[int] = []
        at = 0
        for line in lines:
            self.starts.append(at)
            at += len(line) + 1
        self.text = "\n".join(lines)

    def entry(self, index: int) -> tuple[str, Any]:
        """The record at ``index``, with its kind."""
        group = bisect.bisect_right(self.firsts, index) - 1
        name, records = self.groups[group]
        return name, records[index - self.firsts[group]]

    async def find(self, query: str, needed: int) -> tuple[list[int], bool]:
        """The indexes of the records matching ``query`` (at least ``needed`` of them when there are,
        counting on to :data:`MATCHES_COUNTED`), and whether more match than were counted. The
        text is searched :data:`SEARCHED_AT_ONCE` characters at a time, letting the loop run
        between (``str.find`` holds the GIL: 20 MB at once is about 10 ms)."""
        hits: list[int] = []
        text, starts = self.text, self.starts
        cap = max(needed, MATCHES_COUNTED)
        position, size, reach = 0, len(text), len(query) - 1
        while position < size:
            end = min(size, position + SEARCHED_AT_ONCE)
            found = text.find(query, position, end + reach)  # a match may start before end and run past it
            if found < 0:
                position = end
                await asyncio.sleep(0)
                continue
            if len(hits) >= cap:
                return hits, True
            index = bisect.bisect_right(starts, found) - 1
            hits.append(index)
            if len(hits) % 1000 == 0:
                await asyncio.sleep(0)
            if index + 1 >= len(starts):
                break
            position = starts[index + 1]
        return hits, False


def _searchable(kind: str, record: Any) -> str:
    provenance = record.provenance
    provider = f"{provenance.plugin} {provenance.origin or ''} {provenance.distribution or ''}" if provenance else ""
    return " ".join(f"{kind} {record_key(record)} {record.title or ''} {provider} {record.description or ''}"
                    .lower().split())


class _Paged:
    """One catalog's records as its pages list them, and its search indexes, by kind (built once)."""

    def __init__(self, catalog: Any) -> None:
        self.catalog = catalog
        self.groups: dict[str | None, list[tuple[str, list[Any]]]] = {}
        self.indexes: dict[str | None, asyncio.Future[_Index]] = {}


#: Per host: its current catalog, paged (a rebuilt catalog gets a new one).
_pages: weakref.WeakKeyDictionary[Host, _Paged] = weakref.WeakKeyDictionary()


def _paged(host: Host) -> _Paged:
    paged = _pages.get(host)
    if paged is None or paged.catalog is not host.catalog:
        paged = _pages[host] = _Paged(host.catalog)
    return paged


async def _search_index(host: Host, kind: str | None, groups: list[tuple[str, list[Any]]]) -> _Index:
    """The search index of the host's current catalog (of ``kind``), built once in a worker thread
    (records are frozen, and their lists are the catalog's copies, never changed)."""
    paged = _paged(host)
    future = paged.indexes.get(kind)
    if future is None:
        future = paged.indexes[kind] = asyncio.ensure_future(asyncio.to_thread(_Index, groups))
    return await asyncio.shield(future)


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

#: Most tools :func:`traffic` shows (the busiest), whatever the number called.
TRAFFIC_SHOWN = 24


def used_tools(host: Host) -> list[tuple[str, Any]]:
    """The tools of the host's catalog called or refused in this process, as (name, counters):
    read from the counters in use (:func:`mcphost.stats.used`), not by walking the catalog."""
    tools = host.catalog.tools
    found = []
    for counters in stats.used():
        entry = tools.get(counters.name)
        if entry is not None and entry.stats is counters:
            found.append((counters.name, counters))
    return sorted(found, key=lambda item: item[0])


def traffic(host: Host, limit: int | None = None) -> dict[str, Any]:
    """Per tool called (or refused) in this process, its calls, errors, refusals by reason and
    latencies (see :meth:`ToolStats.snapshot`); tools never called are left out (a gateway may
    mount thousands). ``limit``: only the busiest that many (calls in the last minutes, then
    refusals, then calls since start)."""
    used = used_tools(host)
    if limit is not None and len(used) > limit:
        def busy(item: tuple[str, Any]) -> tuple[int, int, int]:
            return item[1].recent()[0], sum((item[1].refused or {}).values()), item[1].calls
        used = sorted(used, key=busy, reverse=True)[:limit]
    return {name: counters.snapshot() for name, counters in used}


# -- problems -----------------------------------------------------------------------------------------

#: A budget that refused within this many seconds is "refusing".
REFUSING_SECONDS = 60.0
#: A tool's error rate over the last minutes is above normal with at least this many errors, at
#: least this rate, and more than twice its rate before.
ERRORS_NOTICED = 5
ERROR_RATE_NOTICED = 0.2
#: Most problems listed (errors first).
PROBLEMS_LISTED = 50
_SEVERITY = {"error": 0, "warning": 1}


def problem(kind: str, severity: str, title: str, detail: str, link: str) -> dict[str, str]:
    """One problem as the console's strip shows it (see the ``mcphost_problems`` hook)."""
    return {"kind": kind, "severity": severity, "title": title, "detail": detail, "link": link}


async def problems(host: Host, healthy: bool | None = None) -> list[dict[str, str]]:
    """What needs the operator now, errors first: failed plugins, an unhealthy backend, budgets
    refusing (within :data:`REFUSING_SECONDS`), tools whose error rate is above normal, and what
    plugins report through ``mcphost_problems`` (mcphost-proxy: upstreams restarting or failed).
    ``healthy``: the backend's health when the caller already asked. Text is redacted."""
    found = [problem("plugin", "error", f"Plugin {info.name} failed", info.error or "", f"#plugin-{info.name}")
             for info in host.plugin_infos.values() if info.status == "failed"]
    if host.started:
        healthy = await host.backend_healthy() if healthy is None else healthy
        if not healthy:
            found.append(problem("backend", "error", f"Backend {host.backend.name} is unhealthy",
                                 "sessions and budgets shared through it may fail", "#health"))
    found += _budget_problems(host)
    found += _error_problems(host)
    for impl in impls(host.pm, "mcphost_problems"):
        try:
            reported: Iterable[Any] = call_impl(impl, host=host) or ()
            found += [_reported(item, impl.plugin_name) for item in reported]
        except Exception as exc:
            found.append(problem("plugin", "error", f"Plugin {impl.plugin_name} could not report its problems",
                                 f"mcphost_problems raised {type(exc).__name__}: {exc}",
                                 f"#plugin-{impl.plugin_name}"))
    found.sort(key=lambda p: _SEVERITY.get(p["severity"], 2))
    return [{**p, "title": redact_text(p["title"]), "detail": redact_text(p["detail"])}
            for p in found[:PROBLEMS_LISTED]]


def _reported(item: Any, plugin: str) -> dict[str, str]:
    if not isinstance(item, Mapping):
        return problem("plugin", "warning", f"Plugin {plugin} reported a problem", str(item), f"#plugin-{plugin}")
    severity = str(item.get("severity") or "warning")
    return problem(str(item.get("kind") or plugin), severity if severity in _SEVERITY else "warning",
                   str(item.get("title") or f"Plugin {plugin} reported a problem"), str(item.get("detail") or ""),
                   str(item.get("link") or f"#plugin-{plugin}"))


def _budget_problems(host: Host) -> list[dict[str, str]]:
    ledger = host.manager.budgets
    now = time.monotonic()
    found = []
    for name, at in sorted(ledger.last_refused.items()):
        if now - at <= REFUSING_SECONDS:
            spec = ledger.budgets.get(name)
            setting = f" (server.{spec.setting})" if spec is not None else ""
            found.append(problem("budget", "warning", f"Budget {name} is refusing callers",
                                 f"{ledger.refused[name]} refusals since start{setting}", "#budgets"))
    return found


def _error_problems(host: Host) -> list[dict[str, str]]:
    found = []
    for name, counters in used_tools(host):
        calls, errors = counters.recent()
        if errors < ERRORS_NOTICED or errors < ERROR_RATE_NOTICED * calls:
            continue
        before_calls, before_errors = counters.calls - calls, counters.errors - errors
        rate = errors / calls
        if before_calls and rate <= 2 * before_errors / before_calls:
            continue  # as it usually is
        found.append(problem("errors", "warning", f"Tool {name}: {rate:.0%} of its calls failed",
                             f"{errors} of {calls} calls in the last {BUCKETS * BUCKET_SECONDS // 60} min"
                             + (f", {before_errors / before_calls:.0%} before" if before_calls else ""),
                             f"#tool-{name}"))
    return found


def budgets(host: Host, offset: int = 0, limit: int | None = None) -> dict[str, Any]:
    """Per caller (principal, or address for anonymous clients): what it holds of every budget in
    this process against the per-principal limit, and how often each budget refused it (429s).

    ``budgets`` lists every budget with its limits (``perPrincipal``, ``total``) and what everyone
    here holds; ``shared`` says whether the per-principal limits hold across the cluster (a shared
    backend's budget share, not fallen back to per-process limits). Each caller row has ``held``
    and ``refusals`` by budget name, and the older flat figures (``sessions``, ``requests``,
    ``tasks``, ``parked``, ``refused``: every refusal together). ``limit``: only that many caller
    rows from ``offset`` (in the callers' order; ``callers_total`` counts them all)."""
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
    ordered = sorted(callers)
    for key in ordered[offset:] if limit is None else ordered[offset:offset + limit]:
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
            "callers": table, "callers_total": len(ordered), "offset": offset}


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


def config_changes(host: Host) -> list[dict[str, Any]]:
    """Each setting in effect that differs from its default, secrets redacted: ``section``
    (``server`` or ``plugins.NAME``), ``key``, ``value``, ``default``. A plugin section is read
    through the plugin's settings model (``mcphost_settings``); a section without one lists every
    key it sets."""
    changes: list[dict[str, Any]] = []
    server = host.config.server
    for spec in dataclasses.fields(server):
        if spec.default is not dataclasses.MISSING:
            default = spec.default
        elif spec.default_factory is not dataclasses.MISSING:
            default = spec.default_factory()
        else:
            continue
        value = getattr(server, spec.name)
        if value != default:
            changes.append(_change("server", spec.name, value, default))
    declared, _ = declared_settings(host.pm)
    for name, section in sorted(host.config.plugins.items()):
        model = declared.get(name)
        if isinstance(model, type) and issubclass(model, PluginSettings):
            try:
                bound = host.settings(model)
            except Exception:  # a section that does not check: shown as written
                bound = None
            if bound is not None:
                for key, field in type(bound).model_fields.items():
                    default = field.get_default(call_default_factory=True)
                    value = getattr(bound, key)
                    if value != default:
                        changes.append(_change(f"plugins.{name}", key, value, default))
                continue
        changes += [_change(f"plugins.{name}", key, value, None) for key, value in dict(section).items()]
    return changes


def _change(section: str, key: str, value: Any, default: Any) -> dict[str, Any]:
    return {"section": section, "key": key, "value": redact(_plain(value), key),
            "default": redact(_plain(default), key)}


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if isinstance(value, pydantic.BaseModel):  # a settings model's nested table (a proxy's servers)
        return _plain(value.model_dump(mode="json"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    return str(value)
