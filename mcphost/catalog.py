"""The catalog: every tool, resource, template and prompt the plugins provide, validated once.

Plain state: :func:`mcphost.plugins.collect_catalog` calls the hooks and hands each plugin's
records to :meth:`Catalog.admit`, which takes them all or none (an invalid record, or a name
another plugin already provides, refuses the lot). Accepted records are stamped with their
provenance. Input and output validators are compiled here, once per schema content, and wire
descriptors are built once per record and protocol revision and cached.

Mounted records (a record whose provenance names an ``origin``: an upstream server a proxy
mounts) are admitted one by one instead: a mounted record whose name is already served loses
only itself, and a local plugin's record always wins over a mounted one (see :class:`Clash`).
:meth:`Catalog.with_provider` derives a new catalog in which one provider's records are replaced
(the catalog a host swaps in when one upstream's listing changed); it costs that provider's
records, not the whole catalog's, and never changes the catalog it is called on.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import jsonschema
import orjson

from mcphost.errors import PluginError
from mcphost.protocol.auth import NO_SCOPES, SCOPE_TOKEN, Grant, grant_of, permits  # noqa: F401 - grant_of: re-exported
from mcphost.protocol.modern import check_x_mcp_headers, x_mcp_headers
from mcphost.protocol.uritemplate import UriTemplate, UriTemplateError
from mcphost.records import TOOL_NAME, Prompt, Provenance, Resource, ResourceTemplate, Tool, app_only, stamped
from mcphost.stats import ToolStats

log = logging.getLogger("mcphost.catalog")

_FILTER_CACHE_SIZE = 256

CATALOG_HOOKS: tuple[tuple[str, type, str], ...] = (
    ("mcphost_tools", Tool, "tools"),
    ("mcphost_resources", Resource, "resources"),
    ("mcphost_resource_templates", ResourceTemplate, "resourceTemplates"),
    ("mcphost_prompts", Prompt, "prompts"),
)

CATALOG_KINDS = frozenset(kind for _, _, kind in CATALOG_HOOKS)


#: Compiled validators by schema content (canonical JSON); oldest dropped past the size.
_VALIDATORS: dict[bytes, jsonschema.protocols.Validator] = {}
_VALIDATOR_CACHE_SIZE = 32768


def compile_validator(schema: Mapping[str, Any]) -> jsonschema.protocols.Validator:
    """A validator for ``schema`` (2020-12 unless it names another dialect), checked and compiled once.

    Cached by content: the same schema (an upstream listing collected again, a tool mounted
    twice) is checked once. Safe to call from a worker thread.
    """
    try:
        key: bytes | None = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not JSON (a Python-made schema with odd values): compile it uncached
        key = None
    cached = _VALIDATORS.get(key) if key is not None else None
    if cached is not None:
        return cached
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)  # type: ignore[arg-type]  # the stubs say dict; jsonschema takes any Mapping
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    if key is not None:
        if len(_VALIDATORS) >= _VALIDATOR_CACHE_SIZE:
            _VALIDATORS.pop(next(iter(_VALIDATORS)), None)
        _VALIDATORS[key] = validator
    return validator


#: JSON Schema keywords that never make an instance invalid (annotations), and the Python types of
#: the plain ``type`` names :func:`quick_check` decides alone (``integer``: an int, not a bool; a
#: float such as 1.0, which the schema admits too, is left to the full validator).
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
                          "$comment"})
_PLAIN_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "boolean": (bool,), "integer": (int,),
                                             "number": (int, float), "null": (type(None),)}


def quick_check(schema: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool] | None:
    """For a plain input schema (an object of named properties, each a ``type`` or anything, some
    required, others allowed or not), a check that says True only of arguments the full validator
    accepts; False means "ask the full validator" (for its errors too). None for any other schema.

    A proxied tool's arguments are checked against the upstream's schema on every call: for the
    usual schema the full validator's walk costs about 20 µs, this about 1 µs."""
    if any(key not in ("type", "properties", "required", "additionalProperties") and key not in _ANNOTATIONS
           and not key.startswith("x-") for key in schema):
        return None
    properties, required = schema.get("properties", {}), schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if (schema.get("type") != "object" or not isinstance(properties, dict) or not isinstance(extra, bool)
            or not isinstance(required, list) or not all(isinstance(name, str) for name in required)):
        return None
    kinds: dict[str, tuple[type, ...] | None] = {}
    for name, sub in properties.items():
        if sub is True or sub == {}:
            kinds[name] = None
            continue
        if not isinstance(sub, dict) or any(key != "type" and key not in _ANNOTATIONS and not key.startswith("x-")
                                            for key in sub):
            return None
        named = sub.get("type")
        names = [named] if isinstance(named, str) else named
        if not isinstance(names, list) or not names or not all(n in _PLAIN_TYPES for n in names):
            return None
        kinds[name] = tuple(t for n in names for t in _PLAIN_TYPES[n])
    needed, closed = tuple(required), not extra

    def check(arguments: Mapping[str, Any]) -> bool:
        for name in needed:
            if name not in arguments:
                return False
        for name, value in arguments.items():
            if name not in kinds:
                if closed:
                    return False
                continue
            allowed = kinds[name]
            if allowed is not None and type(value) not in allowed:
                return False
        return True

    return check


@dataclass(frozen=True)
class Clash:
    """A mounted record that is not served because another provider already serves that name.

    ``loser`` is the mounted record's provenance (its ``origin`` names the upstream); ``holder``
    the provenance of the record that is served (a local plugin, or the upstream mounted first).
    """

    kind: str
    key: str
    loser: Provenance
    holder: Provenance | None

    def describe(self) -> str:
        return (f"{_noun(self.kind)} {self.key!r} from {_source(self.loser)} is not served: "
                f"{_source(self.holder)} already serves it")


@dataclass(frozen=True)
class ProviderChange:
    """What :meth:`Catalog.with_provider` changed: the keys of one provider's records, by kind,
    before and after (an index of the catalog follows these), and the clashes now standing."""

    plugin: str
    origin: str | None
    removed: Mapping[str, frozenset[str]]
    added: Mapping[str, frozenset[str]]
    #: Kinds whose list a client sees changed (``tools``, ``prompts``, ``resources``).
    lists: frozenset[str]


@dataclass(eq=False)
class ToolEntry:
    record: Tool
    validator: Any
    output_validator: Any | None
    descriptors: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ``Mcp-Param-<X>`` headers (lower-cased X) a 2026-07-28 client sends, by argument name.
    header_params: dict[str, str] = field(default_factory=dict)
    #: Calls, errors and latencies of this tool in this process (read by operators' tools).
    stats: ToolStats = field(default_factory=ToolStats)
    #: :func:`quick_check` of the input schema (None: a schema it does not decide).
    quick: Callable[[Mapping[str, Any]], bool] | None = None

    def __post_init__(self) -> None:
        self.stats.name = self.record.name


@dataclass(eq=False)
class TemplateEntry:
    record: ResourceTemplate
    matcher: UriTemplate


class Catalog:
    """What the host serves. Built by :func:`mcphost.plugins.collect_catalog`; replaced whole on reload,
    or by a copy with one mounted provider's records replaced (:meth:`with_provider`)."""

    def __init__(self) -> None:
        self.tools: dict[str, ToolEntry] = {}
        self.resources: dict[str, Resource] = {}
        self.templates: dict[str, TemplateEntry] = {}
        self.prompts: dict[str, Prompt] = {}
        self._descriptor_cache: dict[tuple[str, str], list[dict[str, Any]]] = {}
        #: Each record's descriptors by revision, by id(record) (the record is kept to check identity);
        #: carried into a catalog derived by :meth:`with_provider` for the records it keeps.
        self._built: dict[int, tuple[Any, dict[str, dict[str, Any]]]] = {}
        #: The keys each mounted provider (plugin, origin) serves, by kind.
        self._served: dict[tuple[str, str | None], dict[str, set[str]]] = {}
        self._scopes_cache: dict[str, list[frozenset[str]]] = {}
        self._visible_cache: dict[tuple[str, str, frozenset[str]], list[dict[str, Any]]] = {}
        self._capabilities: dict[str, Any] | None = None
        self._task_tools = False  # computed with the capabilities
        #: Kinds (``tools``, ``resources``, ``prompts``) a mounting provider (the proxy) will serve once
        #: its upstreams list: declared at initialize even while none is mounted (:meth:`expect`).
        self.expected: frozenset[str] = frozenset()
        #: Kinds (``tools``, ``resources``, ``resourceTemplates``, ``prompts``) with a record that needs scopes.
        self.scoped_kinds: set[str] = set()
        #: Mounted records not served because their name is taken: (kind, stamped record, clash).
        self._shadowed: list[tuple[str, Any, Clash]] = []
        self._app_only: frozenset[str] | None = None

    # -- building ---------------------------------------------------------------------------

    def admit(self, records: Iterable[tuple[str, Any]], provenance: Provenance) -> None:
        """Validate one plugin's records as a whole, then add them; all or nothing.

        Mounted records (their provenance names an ``origin``) are the exception: each is admitted
        on its own (:meth:`_mount`), and a local record displaces a mounted one of the same name.
        """
        staged: list[tuple[str, Any]] = []
        mounted: list[tuple[str, Any]] = []
        evicted: list[tuple[str, str]] = []
        seen: dict[tuple[str, str], Any] = {}
        for kind, record in records:
            record = _with_checked_scopes(stamped(record, provenance), kind)
            if _is_mounted(record):
                mounted.append((kind, record))
                continue
            key = (kind, record_key(record))
            existing = seen.get(key) or self._existing(kind, key[1])
            if existing is not None and key not in seen and _is_mounted(existing):
                evicted.append(key)  # a local plugin wins over a mounted record
            elif existing is not None:
                raise PluginError(f"{_noun(kind)} {key[1]!r} is provided by both plugin "
                                  f"{_who(existing.provenance)} and plugin {_who(provenance)}")
            seen[key] = record
            staged.append((kind, self._entry(kind, record)))
        for kind, name in evicted:
            loser = self._remove(kind, name)
            self._shadow(kind, loser, Clash(kind, name, loser.provenance, provenance))
        for kind, entry in staged:
            self._put(kind, entry)
        for kind, record in mounted:
            self._mount(kind, record)

    def with_provider(self, provenance: Provenance, records: Iterable[tuple[str, Any]]
                      ) -> tuple[Catalog, ProviderChange]:
        """A new catalog: this one with every record of one mounted provider replaced by ``records``.

        The provider is ``provenance.plugin`` with ``provenance.origin`` (an upstream a proxy
        mounts). Only its records are stamped, checked and compiled; every other entry, and the
        descriptors already built, are shared with this catalog, which stays as it was (so the
        result can be built in a worker thread while this one serves, then swapped in). Names
        another provider serves are clashes (:attr:`clashes`); records of other providers that
        were shadowed by this provider's old records are mounted now if their name became free.
        A tool served before and after shares its counters (:class:`ToolStats`) with this catalog's.
        """
        if provenance.origin is None:
            raise ValueError("with_provider replaces a mounted provider's records: give its origin")
        plugin, origin = provenance.plugin, provenance.origin

        def theirs(record: Any) -> bool:
            own = record.provenance
            return own is not None and own.plugin == plugin and own.origin == origin

        new = Catalog()
        mine = self._served.get((plugin, origin), {})
        removed: dict[str, set[str]] = {kind: set(mine.get(kind, ())) for kind in CATALOG_KINDS}
        gone: set[int] = set()
        for kind in CATALOG_KINDS:
            source, target = self._table(kind), new._table(kind)
            target.update(source)  # shared entries: a copy of the table, not of what it holds
            for key in removed[kind]:
                entry = target.pop(key)
                gone.add(id(record_of(entry)))
        new._served = {owner: {kind: set(keys) for kind, keys in kinds.items()}
                       for owner, kinds in self._served.items() if owner != (plugin, origin)}
        new._built = dict(self._built)
        for ident in gone:
            new._built.pop(ident, None)
        new.scoped_kinds = set(self.scoped_kinds)
        new.expected = self.expected
        added: dict[str, set[str]] = {kind: set() for kind in CATALOG_KINDS}
        for kind, record in records:
            record = _with_checked_scopes(stamped(record, provenance), kind)
            if new._mount(kind, record):
                added[kind].add(record_key(record))
        for kind, record, _clash in self._shadowed:
            if not theirs(record) and new._mount(kind, record, quiet=True):  # served now if its name became free
                added[kind].add(record_key(record))
        for name in removed["tools"] & added["tools"]:  # a tool that stays keeps its counters (shared, not copied)
            new.tools[name].stats = self.tools[name].stats
        lists = frozenset({"resourceTemplates": "resources"}.get(kind, kind)
                          for kind in CATALOG_KINDS if removed[kind] or added[kind])
        change = ProviderChange(plugin, origin, {k: frozenset(v) for k, v in removed.items()},
                                {k: frozenset(v) for k, v in added.items()}, lists)
        return new, change

    @property
    def clashes(self) -> list[Clash]:
        """The mounted records not served because another provider serves their name."""
        return [clash for _, _, clash in self._shadowed]

    def _mount(self, kind: str, record: Any, *, quiet: bool = False) -> bool:
        """Admit one mounted record on its own: a clash or an invalid record loses only itself."""
        key = record_key(record)
        existing = self._existing(kind, key)
        if existing is not None:
            self._shadow(kind, record, Clash(kind, key, record.provenance, existing.provenance), quiet=quiet)
            return False
        try:
            entry = self._entry(kind, record)
        except PluginError as exc:
            log.warning("%s: %s; not served", _source(record.provenance), exc)
            return False
        self._put(kind, entry)
        return True

    def _shadow(self, kind: str, record: Any, clash: Clash, *, quiet: bool = False) -> None:
        self._shadowed.append((kind, record, clash))
        if not quiet:
            log.warning("%s", clash.describe())

    def _put(self, kind: str, entry: Any) -> None:
        record = record_of(entry)
        if record.scopes:
            self.scoped_kinds.add(kind)
        if _is_mounted(record):
            owner = (record.provenance.plugin, record.provenance.origin)
            self._served.setdefault(owner, {}).setdefault(kind, set()).add(record_key(record))
        if kind == "tools":
            self.tools[entry.record.name] = entry
        elif kind == "resources":
            self.resources[entry.uri] = entry
        elif kind == "resourceTemplates":
            self.templates[entry.record.uri_template] = entry
        else:
            self.prompts[entry.name] = entry

    def _remove(self, kind: str, key: str) -> Any:
        entry = self._table(kind).pop(key)
        record = record_of(entry)
        if _is_mounted(record):
            self._served[(record.provenance.plugin, record.provenance.origin)][kind].discard(key)
        return record

    def _table(self, kind: str) -> dict[str, Any]:
        """The entries of ``kind`` by name (URI, template)."""
        tables: dict[str, dict[str, Any]] = {"tools": self.tools, "resources": self.resources,
                                             "resourceTemplates": self.templates, "prompts": self.prompts}
        return tables[kind]

    def _existing(self, kind: str, key: str) -> Any:
        if kind == "tools":
            entry = self.tools.get(key)
            return entry.record if entry else None
        if kind == "resourceTemplates":
            template = self.templates.get(key)
            return template.record if template else None
        return (self.resources if kind == "resources" else self.prompts).get(key)

    def _entry(self, kind: str, record: Any) -> Any:
        where = f"{_noun(kind)} {record_key(record)!r}"
        if kind == "tools":
            if not TOOL_NAME.match(record.name):
                raise PluginError(f"{where}: tool names are 1-128 characters of A-Z a-z 0-9 _ . - /")
            if record.input_schema.get("type") != "object":
                raise PluginError(f"{where}: inputSchema must have type 'object'")
            try:
                validator = compile_validator(record.input_schema)
                output = compile_validator(record.output_schema) if record.output_schema is not None else None
            except jsonschema.SchemaError as exc:
                raise PluginError(f"{where}: invalid JSON Schema: {exc.message}") from None
            if record.output_schema is not None and record.output_schema.get("type") != "object":
                raise PluginError(f"{where}: outputSchema must have type 'object'")
            problems = check_x_mcp_headers(dict(record.input_schema))
            if problems:
                raise PluginError(f"{where}: x-mcp-header: {'; '.join(problems)}")
            return ToolEntry(record, validator, output, header_params=x_mcp_headers(dict(record.input_schema)),
                             quick=quick_check(record.input_schema))
        if kind == "resourceTemplates":
            try:
                return TemplateEntry(record, UriTemplate(record.uri_template))
            except UriTemplateError as exc:
                raise PluginError(f"{where}: {exc}") from None
        if not (record.uri if kind == "resources" else record.name):
            raise PluginError(f"{where}: must not be empty")
        return record

    # -- queries ----------------------------------------------------------------------------

    @property
    def has_completions(self) -> bool:
        return any(p.completions for p in self.prompts.values()) or any(
            t.record.completions for t in self.templates.values())

    def capabilities(self) -> dict[str, Any]:
        """Server capabilities derived from what the catalog holds (computed once; treat as read-only)."""
        if self._capabilities is not None:
            return self._capabilities
        caps: dict[str, Any] = {"logging": {}}
        expected = self.expected
        if self.tools or "tools" in expected:
            caps["tools"] = {"listChanged": True}
        if self.resources or self.templates or "resources" in expected:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if self.prompts or "prompts" in expected:
            caps["prompts"] = {"listChanged": True}
        if self.prompts or self.templates:
            caps["completions"] = {}
        self._task_tools = any(entry.record.task != "forbidden" for entry in self.tools.values())
        self._capabilities = caps
        return caps

    @property
    def has_task_tools(self) -> bool:
        """Whether a tool may run as a task: a 2025-11-25 server then declares the ``tasks`` capability."""
        self.capabilities()
        return self._task_tools

    def expect(self, kinds: Iterable[str]) -> None:
        """Declare ``kinds`` (``tools``, ``resources``, ``prompts``) served from now on, with or without
        records: a client that initializes before a mounting provider's upstreams have listed still
        finds the capability, lists (empty at first) and hears ``list_changed`` when they mount."""
        unknown = set(kinds) - {"tools", "resources", "prompts"}
        if unknown:
            raise ValueError(f"expect: unknown kinds {sorted(unknown)} (tools, resources, prompts)")
        self.expected = self.expected | frozenset(kinds)
        self._capabilities = None

    def tool_header_params(self, name: str) -> dict[str, str] | None:
        """The ``x-mcp-header`` map of tool ``name`` (None for an unknown tool)."""
        entry = self.tools.get(name)
        return None if entry is None else entry.header_params

    def find_resource(self, uri: str) -> tuple[Any, dict[str, Any]] | None:
        """The static resource at ``uri``, or the first template matching it with its variables."""
        record = self.resources.get(uri)
        if record is not None:
            return record, {}
        for entry in self.templates.values():
            values = entry.matcher.match(uri)
            if values is not None:
                return entry.record, values
        return None

    def descriptors(self, kind: str, version: str, build: Callable[[Any, str], dict[str, Any]]
                    ) -> list[dict[str, Any]]:
        """Wire descriptors of every record of ``kind`` for ``version``, built once and cached."""
        cached = self._descriptor_cache.get((kind, version))
        if cached is None:
            built = self._built
            cached = []
            for record in self._records(kind):
                memo = built.get(id(record))
                if memo is None or memo[0] is not record:
                    memo = built[id(record)] = (record, {})
                descriptor = memo[1].get(version)
                if descriptor is None:
                    descriptor = memo[1][version] = build(record, version)
                cached.append(descriptor)
            self._descriptor_cache[(kind, version)] = cached
        return cached

    @property
    def app_only_tools(self) -> frozenset[str]:
        """Names of the tools for their MCP App alone (:func:`mcphost.records.app_only`), found once."""
        if self._app_only is None:
            self._app_only = frozenset(name for name, entry in self.tools.items() if app_only(entry.record))
        return self._app_only

    def visible_descriptors(self, kind: str, version: str, build: Callable[[Any, str], dict[str, Any]],
                            grant: Grant) -> list[dict[str, Any]]:
        """The descriptors of ``kind`` whose records ``grant`` covers (all of them when nothing needs scopes).

        Filtered lists are cached per grant, so paging through a long list stays consistent and
        cheap for each caller, and one caller's view never reaches another with other scopes.
        """
        items = self.descriptors(kind, version, build)
        if grant is None or kind not in self.scoped_kinds:
            return items
        key = (kind, version, grant)
        cached = self._visible_cache.get(key)
        if cached is None:
            scopes = self._scopes_cache.get(kind)
            if scopes is None:
                scopes = self._scopes_cache[kind] = [record.scopes for record in self._records(kind)]
            cached = [item for item, needed in zip(items, scopes, strict=True) if permits(grant, needed)]
            if len(self._visible_cache) >= _FILTER_CACHE_SIZE:
                self._visible_cache.clear()
            self._visible_cache[key] = cached
        return cached

    def required_scopes(self, method: str, params: Mapping[str, Any]) -> frozenset[str]:
        """The scopes the record a request targets needs (empty when none, or the target is unknown)."""
        if not self.scoped_kinds:
            return NO_SCOPES
        record: Any = None
        if method in ("tools/call", "prompts/get"):
            name = params.get("name")
            if isinstance(name, str):
                entry: Any = self.tools.get(name) if method == "tools/call" else self.prompts.get(name)
                record = record_of(entry)
        elif method in ("resources/read", "resources/subscribe"):
            uri = params.get("uri")
            found = self.find_resource(uri) if isinstance(uri, str) else None
            record = found[0] if found is not None else None
        elif method == "completion/complete":
            ref = params.get("ref")
            if isinstance(ref, dict):
                if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
                    record = self.prompts.get(ref["name"])
                elif ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str):
                    entry = self.templates.get(ref["uri"])
                    record = entry.record if entry is not None else None
        return record.scopes if record is not None else NO_SCOPES

    def _records(self, kind: str) -> Iterable[Any]:
        return {
            "tools": [e.record for e in self.tools.values()],
            "resources": self.resources.values(),
            "resourceTemplates": [e.record for e in self.templates.values()],
            "prompts": self.prompts.values(),
        }[kind]


def _with_checked_scopes(record: Any, kind: str) -> Any:
    """``record`` with its scopes as a frozenset of valid scope tokens; PluginError otherwise."""
    scopes = record.scopes
    if isinstance(scopes, frozenset) and all(isinstance(s, str) and SCOPE_TOKEN.match(s) for s in scopes):
        return record
    where = f"{_noun(kind)} {record_key(record)!r}"
    if isinstance(scopes, str) or not isinstance(scopes, Iterable):
        raise PluginError(f"{where}: scopes must be a list of scope strings, not {type(scopes).__name__}")
    scopes = list(scopes)
    for scope in scopes:
        if not isinstance(scope, str) or not SCOPE_TOKEN.match(scope):
            raise PluginError(f"{where}: invalid scope {scope!r} (printable ASCII without spaces, quotes or "
                              "backslashes)")
    return dataclasses.replace(record, scopes=frozenset(scopes))


def count_refused(catalog: Catalog, message: Any, reason: str) -> None:
    """Count a refused ``tools/call`` against its tool (``reason``: one of
    :data:`mcphost.stats.REFUSALS`); anything else, or an unknown tool, is not counted. Refusals
    are rare, so this costs nothing on the path of the calls that are served."""
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    entry = catalog.tools.get(name) if isinstance(name, str) else None
    if entry is not None:
        entry.stats.refuse(reason)


def record_of(entry: Any) -> Any:
    """The record behind a catalog entry: tools and templates are held in an entry (with the
    compiled validator, the counters), resources and prompts as the record itself."""
    return getattr(entry, "record", entry)


def record_key(record: Any) -> str:
    """The name a record is known by: a tool's or prompt's name, a resource's URI, a template."""
    if isinstance(record, Resource):
        return record.uri
    if isinstance(record, ResourceTemplate):
        return record.uri_template
    return cast(str, record.name)


def _noun(kind: str) -> str:
    return {"tools": "tool", "resources": "resource", "resourceTemplates": "resource template",
            "prompts": "prompt"}[kind]


def decorator_name(record_type: type) -> str:
    return {Tool: "tool", Resource: "resource", ResourceTemplate: "resource_template", Prompt: "prompt"}[record_type]


def _is_mounted(record: Any) -> bool:
    return record.provenance is not None and record.provenance.origin is not None


def _source(provenance: Provenance | None) -> str:
    """Who serves a record, for clash reports: ``upstream 'u' (plugin 'proxy')`` or ``plugin 'p'``."""
    if provenance is not None and provenance.origin is not None:
        return f"upstream {provenance.origin!r} (plugin {provenance.plugin!r})"
    return f"plugin {_who(provenance)}"


def _who(provenance: Provenance | None) -> str:
    if provenance is None:
        return "?"
    if provenance.distribution:
        return f"{provenance.plugin!r} ({provenance.distribution} {provenance.version or ''})".replace(" )", ")")
    return repr(provenance.plugin)
