"""Each endpoint's view of the catalog, its counters, and the search index behind ``search_tools``.

An :class:`EndpointView` answers "is this record in the endpoint's selection" for one
``[endpoints.NAME]`` (:mod:`mcphost.endpoints`) by keeping, per catalog, the keys of the records
it selects: computed once when first asked, again only after the catalog changed. It is one more
narrowing of :class:`~mcphost.kernel.visibility.Visibility` (scopes and the session's allow-lists
still apply on top of it). Listings are filtered from the catalog's own descriptors (per grant,
cached), so an endpoint never copies a record.

:class:`Views` holds every endpoint's view for the kernel, tells which views a change of the
catalog touched (so ``list_changed`` reaches only the sessions whose view changed), and keeps one
search index (:mod:`mcphost.search`) over every tool, updated per provider off the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib.metadata
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from mcphost.endpoints import EndpointSettings, is_code_tool
from mcphost.protocol.versions import at_least
from mcphost.records import Record

if TYPE_CHECKING:
    import numpy as np

    from mcphost.catalog import Catalog
    from mcphost.search import Document, Provider, Ranker, SearchIndex

log = logging.getLogger("mcphost.endpoints")

#: The two tools a ``discovery = "search"`` endpoint lists.
SEARCH_TOOLS = ("search_tools", "call_tool")
_FILTER_CACHE_SIZE = 64


@dataclass
class Counters:
    """What one endpoint served since start, in this process (read by ``Views.stats`` and the console):
    ``tools/call`` requests (``call_tool`` counted as the call it makes, and each inner call of an
    ``execute`` program too), those that failed (an error or an ``isError`` result), ``search_tools``
    requests, and ``execute`` runs (on a code endpoint)."""

    calls: int = 0
    errors: int = 0
    searches: int = 0
    executions: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"calls": self.calls, "errors": self.errors, "searches": self.searches,
                "executions": self.executions}


class EndpointView:
    """One endpoint's selection of the catalog (see the module docstring)."""

    def __init__(self, settings: EndpointSettings) -> None:
        self.settings = settings
        self.name = settings.name
        #: ``search_tools`` is listed (discovery "search", and "code" next to ``execute``).
        self.search = settings.discovery in ("search", "code")
        self.code = settings.discovery == "code"
        self.counters = Counters()
        self._catalog_key: tuple[int, ...] | None = None
        self._keys: dict[str, frozenset[str]] = {}
        self._filtered: dict[tuple[str, str, Any], list[dict[str, Any]]] = {}
        self._server_info: dict[str, dict[str, Any]] = {}
        #: The search index's mask of this view: (index version, selected names, the mask).
        self.mask: tuple[object, frozenset[str], np.ndarray[Any, Any]] | None = None
        #: Instructions made from the catalog (a search endpoint with none configured).
        self.made_instructions: str | None = None

    # -- membership -------------------------------------------------------------------------------

    def keys(self, catalog: Catalog, kind: str) -> frozenset[str]:
        """Names (tools, prompts), URIs (resources) or URI templates (resourceTemplates) selected."""
        key = _identity(catalog)
        if key != self._catalog_key:
            self._keys = {kind: frozenset(_select(self.settings, catalog, kind)) for kind in _VIEW_KINDS}
            self._filtered = {}
            self._catalog_key = key
        return self._keys[kind]

    def forget(self) -> None:
        """The catalog changed in place: compute the selection again when next asked."""
        self._catalog_key = None

    def allows(self, catalog: Catalog, kind: str, key: str) -> bool:
        return key in self.keys(catalog, kind)

    def hides(self, catalog: Catalog, method: str, params: Mapping[str, Any]) -> bool:
        """Whether the record a request targets (by name, URI or reference) is outside this view."""
        if method in ("tools/call", "prompts/get"):
            name = params.get("name")
            kind = "tools" if method == "tools/call" else "prompts"
            return isinstance(name, str) and name not in self.keys(catalog, kind)
        uri: Any = None
        if method in ("resources/read", "resources/subscribe"):
            uri = params.get("uri")
        elif method == "completion/complete":
            ref = params.get("ref")
            if isinstance(ref, Mapping):
                if ref.get("type") == "ref/prompt":
                    return isinstance(ref.get("name"), str) and ref["name"] not in self.keys(catalog, "prompts")
                uri = ref.get("uri")
                return isinstance(uri, str) and uri not in self.keys(catalog, "resourceTemplates")
        if not isinstance(uri, str):
            return False
        found = catalog.find_resource(uri)
        if found is None:
            return False
        record = found[0]
        template = getattr(record, "uri_template", None)
        if template is not None:
            return template not in self.keys(catalog, "resourceTemplates")
        return uri not in self.keys(catalog, "resources")

    def listing(self, catalog: Catalog, kind: str, version: str, grant: Any, items: list[dict[str, Any]],
                field: str) -> list[dict[str, Any]]:
        """``items`` (the catalog's descriptors the grant covers) narrowed to this view, cached."""
        keys = self.keys(catalog, kind)
        cache_key = (kind, version, grant)
        cached = self._filtered.get(cache_key)
        if cached is None:
            cached = [item for item in items if item[field] in keys]
            if len(self._filtered) >= _FILTER_CACHE_SIZE:
                self._filtered.clear()
            self._filtered[cache_key] = cached
        return cached

    def digest(self, catalog: Catalog, kind: str, describe: Callable[[Any], int]) -> tuple[int, int]:
        """A digest of what this view lists of ``kind`` (``tools``, ``prompts``, ``resources``):
        the count and an order-free sum of the listed records' fingerprints."""
        kinds = ("resources", "resourceTemplates") if kind == "resources" else (kind,)
        count = total = 0
        for each in kinds:
            records = _records(catalog, each)
            for key in self.keys(catalog, each):
                record = records.get(key)
                if record is not None:
                    count += 1
                    total = (total + describe(record)) & _MASK
        return count, total

    # -- identity in initialize and server/discover ------------------------------------------------

    def server_info(self, version: str, host_info: dict[str, Any]) -> dict[str, Any]:
        info = self._server_info.get(version)
        if info is None:
            settings = self.settings
            info = {"name": settings.server_name, "version": settings.version or host_info.get("version", "")}
            if settings.title and at_least(version, "2025-06-18"):
                info["title"] = settings.title
            self._server_info[version] = info
        return info


_VIEW_KINDS = ("tools", "prompts", "resources", "resourceTemplates")


def _identity(catalog: Catalog) -> tuple[int, ...]:
    return (id(catalog), id(catalog.tools), id(catalog.prompts), id(catalog.resources), id(catalog.templates),
            len(catalog.tools), len(catalog.prompts), len(catalog.resources), len(catalog.templates))


def _records(catalog: Catalog, kind: str) -> Mapping[str, Any]:
    if kind == "tools":
        return {name: entry.record for name, entry in catalog.tools.items()}
    if kind == "resourceTemplates":
        return {key: entry.record for key, entry in catalog.templates.items()}
    return catalog.prompts if kind == "prompts" else catalog.resources


def _select(settings: EndpointSettings, catalog: Catalog, kind: str) -> Iterable[str]:
    glob_kind = "resources" if kind == "resourceTemplates" else kind
    code = settings.discovery == "code"
    for key, record in _records(catalog, kind).items():
        if kind == "tools" and is_code_tool(record):  # every code endpoint's own tool, no other endpoint's
            if code:
                yield key
            continue
        provenance = record.provenance
        plugin = provenance.plugin if provenance is not None else None
        origin = provenance.origin if provenance is not None else None
        if settings.selects(glob_kind, key, plugin, origin):
            yield key


_MASK = (1 << 64) - 1


def _fingerprint(record: Any) -> int:
    """What a client sees of a record (its key and definition, not its handler), as 64 bits."""
    seen = (getattr(record, "name", None), getattr(record, "uri", None), getattr(record, "uri_template", None),
            getattr(record, "description", None), getattr(record, "title", None),
            getattr(record, "input_schema", None), getattr(record, "output_schema", None),
            getattr(record, "annotations", None), getattr(record, "arguments", None),
            getattr(record, "mime_type", None), sorted(getattr(record, "scopes", None) or ()))
    try:
        text = orjson.dumps(seen, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except TypeError:  # a value JSON cannot hold (a plugin's own type in annotations, say)
        text = repr(seen).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def _kind_of(record: Record) -> str:
    """The list-changed kind a record belongs to (a template's change is a resources change)."""
    return "resources" if record.kind == "resourceTemplates" else record.kind


def provider_of(record: Any) -> str:
    """The provider a record is indexed under: its plugin, and the upstream for a proxy's records."""
    provenance = record.provenance
    if provenance is None:
        return "?"
    return provenance.plugin if provenance.origin is None else f"{provenance.plugin}/{provenance.origin}"


def document_of(record: Any) -> Document:
    """The text a tool is found by: its name, title, description, parameter names and descriptions."""
    params: list[tuple[str, str]] = []
    properties = record.input_schema.get("properties")
    if isinstance(properties, Mapping):
        for pname, schema in properties.items():
            description = schema.get("description") if isinstance(schema, Mapping) else None
            params.append((str(pname), description if isinstance(description, str) else ""))
    from mcphost.search import Document  # numpy and the stemmer load only where a search runs

    annotations = record.annotations if isinstance(getattr(record, "annotations", None), Mapping) else {}
    read_only, destructive = annotations.get("readOnlyHint"), annotations.get("destructiveHint")
    return Document(record.name, record.title or "", record.description or "", tuple(params),
                    read_only if isinstance(read_only, bool) else None,
                    destructive if isinstance(destructive, bool) else None)


@functools.lru_cache(maxsize=256)
def _summary(distribution: str) -> str:
    """A distribution's one-line summary (what a plugin says it is for)."""
    try:
        return str(importlib.metadata.metadata(distribution)["Summary"] or "")
    except (importlib.metadata.PackageNotFoundError, KeyError, ValueError):
        return ""


def provider_about(record: Any) -> Provider:
    """What the provider of ``record`` says about itself, as far as the host knows: the upstream's
    name for a proxy's records; else the plugin's name and its distribution's summary."""
    from mcphost.search import Provider

    provenance = record.provenance
    if provenance is None:
        return Provider()
    if provenance.origin is not None:
        return Provider(provenance.origin)
    return Provider(provenance.plugin, _summary(provenance.distribution) if provenance.distribution else "")


class Views:
    """Every endpoint's view, by name and by path, and the tool search index they share."""

    def __init__(self, endpoints: Mapping[str, EndpointSettings], catalog: Callable[[], Catalog]) -> None:
        self.by_name = {name: EndpointView(settings) for name, settings in endpoints.items()}
        self._catalog = catalog
        self._digests: dict[tuple[str, str], tuple[int, int]] = {}
        self._changes_lock = threading.Lock()
        #: Fingerprints of the records seen, by identity (a record is described once in its life).
        self._fingerprints: dict[int, tuple[Any, int]] = {}
        self._index: SearchIndex | None = None
        #: Other rankings fused with the index's (the ``mcphost_search_rankers`` hook's, at startup).
        self.rankers: list[Ranker] = []
        #: What providers say about themselves, by provider key (``plugin`` or ``plugin/upstream``),
        #: where a plugin told more than :func:`provider_about` finds (an upstream's instructions).
        self.providers: dict[str, Provider] = {}
        #: The records the index holds, by tool name, and each provider's tool names.
        self._records: dict[str, Any] = {}
        self._documents: dict[str, Document] = {}
        self._members: dict[str, set[str]] = {}
        self._index_lock = asyncio.Lock()
        self._index_task: asyncio.Task[Any] | None = None
        #: Seconds and tools of the last index update (observability and the benchmark).
        self.last_update: dict[str, Any] = {}

    def __bool__(self) -> bool:
        return bool(self.by_name)

    @property
    def index(self) -> SearchIndex:
        """The tool search index, made on first use: a host with no search endpoint never loads it."""
        if self._index is None:
            from mcphost.search import SearchIndex

            self._index = SearchIndex(self.rankers)
        return self._index

    def get(self, name: str | None) -> EndpointView | None:
        return None if name is None else self.by_name.get(name)

    @property
    def searching(self) -> bool:
        return any(view.search for view in self.by_name.values())

    # -- changes ----------------------------------------------------------------------------------

    def remember(self) -> None:
        """Note what every view lists now (at startup, and after each change)."""
        self.changed("tools")
        self.changed("prompts")
        self.changed("resources")

    def changed(self, kind: str) -> list[str]:
        """The endpoints whose ``kind`` listing differs from the last time this was asked.

        Each record is described once in its life (a reload hands over new records, so a large
        catalog costs a pass; :meth:`changed_async` makes it in a thread)."""
        with self._changes_lock:
            return self._changed(kind)

    async def changed_async(self, kind: str) -> list[str]:
        return await asyncio.to_thread(self.changed, kind)

    def _changed(self, kind: str) -> list[str]:
        catalog = self._catalog()
        names = []
        known = self._fingerprints
        fresh: dict[int, tuple[Any, int]] = {}

        def describe(record: Any) -> int:
            held = known.get(id(record))
            if held is None or held[0] is not record:
                held = (record, _fingerprint(record))
            fresh[id(record)] = held
            return held[1]

        for view in self.by_name.values():
            view.forget()
            digest = view.digest(catalog, kind, describe)
            if self._digests.get((view.name, kind)) != digest:
                self._digests[(view.name, kind)] = digest
                names.append(view.name)
        # Keep the fingerprints of records still listed (of any kind), forget the others.
        self._fingerprints = {**{k: v for k, v in known.items() if _kind_of(v[0]) != kind}, **fresh}
        return names

    # -- the search index -------------------------------------------------------------------------

    def index_sync(self, tools: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Bring the index up to date with ``tools`` (the catalog's tool entries by name; default:
        the catalog's now): only the providers whose tools changed are indexed again.

        Finding them is one pass comparing each record with the one indexed: by identity first,
        then, for a record that is new (a reload hands over new records for every plugin), by
        what the index reads of it. Only the changed providers' tools are tokenized again.
        """
        if tools is None:
            tools = dict(self._catalog().tools)
        started = time.perf_counter()
        indexed, documents = self._records, self._documents
        providers: set[str] = set()
        arrived: dict[str, set[str]] = {}
        for name, entry in tools.items():
            record = entry.record
            before = indexed.get(name)
            if before is record:
                continue
            indexed[name] = record
            document = document_of(record)
            provider = provider_of(record)
            if before is not None:
                old_provider = provider_of(before)
                if old_provider == provider and documents.get(name) == document:
                    continue  # the same definition, handed over again
                providers.add(old_provider)
            documents[name] = document
            providers.add(provider)
            arrived.setdefault(provider, set()).add(name)
        gone = indexed.keys() - tools.keys() if len(indexed) != len(tools) else set()
        for name in gone:
            providers.add(provider_of(indexed.pop(name)))
            documents.pop(name, None)
        changes: dict[str, list[Document]] = {}
        for provider in providers:
            members = {name for name in self._members.get(provider, ())
                       if name in indexed and provider_of(indexed[name]) == provider}
            members |= arrived.get(provider, set())
            if members:
                self._members[provider] = members
            else:
                self._members.pop(provider, None)
            changes[provider] = [documents[name] for name in sorted(members)]
        scanned = time.perf_counter()
        if changes:
            about: dict[str, Provider | None] = {}
            for provider in changes:
                held = self._members.get(provider)
                about[provider] = self.providers.get(provider) or (
                    provider_about(indexed[next(iter(held))]) if held else None)
            self.index.update(changes, about)
            self._describe(tools)
        touched = sum(len(docs) for docs in changes.values())
        done = time.perf_counter()
        self.last_update = {"seconds": done - started, "scan_seconds": scanned - started,
                            "index_seconds": done - scanned, "tools_indexed": touched,
                            "providers": sorted(changes), "tools_total": len(tools)}
        return self.last_update

    def _describe(self, tools: Mapping[str, Any]) -> None:
        """Make the instructions of each search endpoint that has none configured (one pass over
        its tools; one over the providers for an endpoint that selects everything)."""
        catalog = self._catalog()
        for view in self.by_name.values():
            if view.search and view.settings.instructions is None:
                if view.settings.include is None and view.settings.exclude.empty:
                    names: Iterable[str] = [min(members) for members in self._members.values() if members]
                    counts = {provider: len(members) for provider, members in self._members.items()}
                    view.made_instructions = instructions_for(names, tools, self.providers, counts)
                else:
                    view.made_instructions = instructions_for(view.keys(catalog, "tools"), tools, self.providers)

    def instructions(self, view: EndpointView) -> str | None:
        """``view``'s instructions: configured, else made from the catalog behind it."""
        if view.settings.instructions is not None or not view.search:
            return view.settings.instructions
        if view.made_instructions is None:
            view.made_instructions = instructions_for(view.keys(self._catalog(), "tools"), self._catalog().tools,
                                                      self.providers)
        return view.made_instructions

    def mask_for(self, view: EndpointView, keys: frozenset[str]) -> tuple[object, np.ndarray[Any, Any]]:
        """The index's version and ``view``'s mask over it (``keys``: the tools it selects), built
        once per version of the index and of the selection (call it off the event loop)."""
        index = self.index
        version = index.version
        held = view.mask
        if held is None or held[0] is not version or held[1] is not keys:
            held = view.mask = (version, keys, index.mask_of(keys.__contains__))
        return held[0], held[2]

    async def update_index(self) -> None:
        """Update the index off the event loop (in a thread); one update at a time."""
        if not self.searching:
            return
        async with self._index_lock:
            # A snapshot taken on the loop: the catalog may change while the thread indexes it.
            await asyncio.to_thread(self.index_sync, dict(self._catalog().tools))

    def schedule_index(self) -> None:
        """Start an index update now (the catalog changed); searches meanwhile use the last index."""
        if not self.searching:
            return
        task = asyncio.get_running_loop().create_task(self.update_index())
        self._index_task = task
        task.add_done_callback(_log_failure)

    async def ready(self) -> None:
        """Wait for an update in progress (a search right after a change sees it)."""
        task = self._index_task
        if task is not None and not task.done():
            await asyncio.shield(task)

    # -- counters ---------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Read-only figures per endpoint: its path, discovery mode and counters."""
        catalog = self._catalog()
        return {name: {"path": view.settings.path, "discovery": view.settings.discovery,
                       "tools": len(view.keys(catalog, "tools")), **view.counters.as_dict(), "sessions": 0}
                for name, view in self.by_name.items()}


#: Providers named one by one in made instructions (the rest are counted).
INSTRUCTION_PROVIDERS = 12


def instructions_for(names: Iterable[str], tools: Mapping[str, Any], providers: Mapping[str, Provider],
                     counts: Mapping[str, int] | None = None) -> str:
    """A search endpoint's instructions, made from what lies behind it: how to use it, then each
    provider (what it says it is for, how many tools, a few of their names). ``counts``: each
    provider's number of tools, when ``names`` holds one tool of each."""
    groups: dict[str, list[str]] = {}
    about: dict[str, Provider] = {}
    for name in names:
        entry = tools.get(name)
        if entry is None:
            continue
        key = provider_of(entry.record)
        members = groups.setdefault(key, [])
        if not members:
            about[key] = providers.get(key) or provider_about(entry.record)
        members.append(name)
    sizes = {key: (counts or {}).get(key, len(members)) for key, members in groups.items()}
    total = sum(sizes.values())
    lines = [f"This server has {total} tools from {len(groups)} "
             f"{'source' if len(groups) == 1 else 'sources'}, found on demand: call search_tools with the task "
             "in words (it returns the matching tools' definitions), then run one with call_tool."]
    ranked = sorted(groups.items(), key=lambda item: (-sizes[item[0]], item[0]))
    for key, members in ranked[:INSTRUCTION_PROVIDERS]:
        said = about[key]
        what = (said.title or said.instructions).strip().split("\n")[0][:120]
        sample = ", ".join(sorted(members)[:3])
        lines.append(f"- {said.name or key}: {sizes[key]} tools{' (' + what + ')' if what else ''}, e.g. {sample}")
    if len(ranked) > INSTRUCTION_PROVIDERS:
        rest = ranked[INSTRUCTION_PROVIDERS:]
        lines.append(f"- and {len(rest)} more sources with {sum(sizes[key] for key, _ in rest)} tools")
    return "\n".join(lines)


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("updating the tool search index failed", exc_info=task.exception())
