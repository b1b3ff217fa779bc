"""Full-text search over tool definitions: BM25 ranking, Snowball stemming, word variants.

A tool is found by its name (split at ``_ - . /`` and camelCase), title, description, and its
parameters' names and descriptions, each field weighted (a word in the name counts most). Words
are stemmed with the Snowball English stemmer (``snowballstemmer``, which uses PyStemmer's C
implementation when installed), so "files", "filed" and "file" meet; a small table of the word
variants tool descriptions use ("folder" for "directory", "make" for "create") widens a query.

Why an inverted index of our own rather than ``bm25s`` or ``rank-bm25``: both build a static
corpus, so adding one provider's tools means indexing every tool again; here the index is split
into shards, one per provider (a plugin, or one upstream a proxy mounts), and replacing a shard
costs only that provider's tools, while document frequencies stay corpus-wide (kept as sums over
the shards). Shards and frequencies are swapped in as one immutable state, so a search running on
the event loop never sees half an update made in a thread. BM25 itself is a few lines.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import snowballstemmer  # type: ignore[import-untyped]  # the package ships no type information

#: BM25 parameters (the usual ones).
K1 = 1.2
B = 0.75
#: Weight of a word by the field it appears in.
FIELD_WEIGHTS = {"name": 3.0, "title": 2.0, "description": 1.0, "param": 1.5, "param_description": 0.5}
#: Weight of a word that only a variant of the query's word matched.
VARIANT_WEIGHT = 0.6

_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|[a-z]+|\d+")
_STOP = frozenset("""
a about after all also an and any are as at be been being but by can could did do does doing done for from
had has have having he her here his how i if in into is it its itself just let lets me my no nor not of on
once only or other our out over own please same she should so some such than that the their them then there
these they this those through to too under until up very was we were what when where which while who whom
why will with would you your yours want need like give tell show me i'd i'm i've
""".split())

#: Groups of words tool descriptions use for one idea; a query word brings in the others.
VARIANTS: tuple[tuple[str, ...], ...] = (
    ("create", "make", "new", "add", "generate", "build"),
    ("delete", "remove", "erase", "drop", "destroy", "unlink"),
    ("directory", "folder", "dir"),
    ("file", "document"),
    ("list", "enumerate", "show", "browse", "ls"),
    ("read", "open", "view", "load", "cat", "content", "contents"),
    ("write", "save", "store", "put"),
    ("edit", "modify", "change", "update", "alter", "patch"),
    ("search", "find", "lookup", "query", "locate", "grep", "match"),
    ("fetch", "download", "retrieve", "get", "grab", "url", "web", "page"),
    ("move", "rename", "mv", "relocate"),
    ("copy", "duplicate", "clone"),
    ("time", "clock", "hour", "date", "now"),
    ("timezone", "zone", "tz"),
    ("convert", "translate", "transform"),
    ("commit", "checkin", "record"),
    ("diff", "difference", "changes", "changed"),
    ("status", "state"),
    ("log", "history"),
    ("branch", "checkout"),
    ("stage", "staged", "index", "add"),
    ("entity", "node", "object"),
    ("relation", "relationship", "link", "connection", "edge"),
    ("observation", "note", "fact"),
    ("graph", "knowledge", "memory"),
    ("size", "metadata", "info", "information", "stat", "stats", "attributes"),
    ("tree", "hierarchy", "recursive", "nested"),
    ("allowed", "permitted", "accessible"),
    ("echo", "repeat"),
    ("sum", "add", "plus", "total"),
    ("image", "picture", "photo"),
    ("sleep", "wait", "delay", "long", "running"),
    ("reset", "unstage"),
    ("show", "display", "print"),
    ("message", "email", "mail"),
    ("send", "post", "submit"),
    ("user", "account", "person", "people"),
    ("issue", "ticket", "bug"),
)


@dataclass(frozen=True)
class Document:
    """What a tool is found by."""

    name: str
    title: str
    description: str
    #: (parameter name, its description) pairs.
    params: tuple[tuple[str, str], ...] = ()


class _Shard(NamedTuple):
    """One provider's part of the index: postings per stem and its documents' names."""

    postings: dict[str, tuple[tuple[int, float], ...]]
    names: tuple[str, ...]
    df: dict[str, int]


class _State(NamedTuple):
    shards: dict[str, _Shard]
    df: dict[str, int]
    size: int


_stemmer = snowballstemmer.stemmer("english")
_variants: dict[str, tuple[str, ...]] = {}


def words(text: str) -> list[str]:
    """Lower-case words of ``text``: split at punctuation, ``_``, digits and camelCase, stop words out."""
    return [w for w in (m.lower() for m in _WORD.findall(text)) if w not in _STOP]


def stems(text: str) -> list[str]:
    found = words(text)
    return list(_stemmer.stemWords(found)) if found else []


def _variant_table() -> dict[str, tuple[str, ...]]:
    if not _variants:
        groups: dict[str, set[str]] = {}
        for group in VARIANTS:
            stemmed = set(_stemmer.stemWords(list(group)))
            for stem in stemmed:
                groups.setdefault(stem, set()).update(stemmed)
        _variants.update({stem: tuple(sorted(others - {stem})) for stem, others in groups.items()})
    return _variants


def query_terms(query: str) -> dict[str, float]:
    """Stems of ``query`` with their weights: its own words 1, their variants less."""
    terms: dict[str, float] = {}
    table = _variant_table()
    for stem in stems(query):
        terms[stem] = max(terms.get(stem, 0.0), 1.0)
        for variant in table.get(stem, ()):
            terms[variant] = max(terms.get(variant, 0.0), VARIANT_WEIGHT)
    return terms


def _weighted_terms(document: Document) -> dict[str, float]:
    counts: dict[str, float] = {}

    def add(text: str, weight: float) -> None:
        for stem in stems(text):
            counts[stem] = counts.get(stem, 0.0) + weight

    add(document.name, FIELD_WEIGHTS["name"])
    add(document.title, FIELD_WEIGHTS["title"])
    add(document.description, FIELD_WEIGHTS["description"])
    for name, description in document.params:
        add(name, FIELD_WEIGHTS["param"])
        add(description, FIELD_WEIGHTS["param_description"])
    return counts


def build_shard(documents: Sequence[Document]) -> _Shard:
    """Index one provider's documents (BM25 term parts precomputed with the shard's mean length)."""
    term_lists = [_weighted_terms(document) for document in documents]
    lengths = [sum(terms.values()) for terms in term_lists]
    mean = (sum(lengths) / len(lengths)) if lengths else 1.0
    postings: dict[str, list[tuple[int, float]]] = {}
    for number, (terms, length) in enumerate(zip(term_lists, lengths, strict=True)):
        norm = K1 * (1 - B + B * length / (mean or 1.0))
        for term, tf in terms.items():
            postings.setdefault(term, []).append((number, tf * (K1 + 1) / (tf + norm)))
    frozen = {term: tuple(items) for term, items in postings.items()}
    return _Shard(frozen, tuple(document.name for document in documents),
                  {term: len(items) for term, items in frozen.items()})


class SearchIndex:
    """BM25 over shards of tool documents, one shard per provider (see the module docstring)."""

    def __init__(self) -> None:
        self._state = _State({}, {}, 0)

    def __len__(self) -> int:
        return self._state.size

    def replace(self, provider: str, documents: Sequence[Document]) -> None:
        """Index ``provider``'s documents in place of what it had (none: it is gone)."""
        shard = build_shard(documents) if documents else None
        state = self._state
        shards = dict(state.shards)
        df = dict(state.df)
        size = state.size
        old = shards.pop(provider, None)
        if old is not None:
            size -= len(old.names)
            for term, n in old.df.items():
                left = df[term] - n
                if left:
                    df[term] = left
                else:
                    del df[term]
        if shard is not None:
            shards[provider] = shard
            size += len(shard.names)
            for term, n in shard.df.items():
                df[term] = df.get(term, 0) + n
        self._state = _State(shards, df, size)  # one assignment: readers see before or after

    def search(self, query: str, limit: int = 10, accept: Callable[[str], bool] | None = None
               ) -> list[tuple[str, float]]:
        """The best ``limit`` tool names for ``query`` with their scores, best first; ``accept``
        (the caller's view) filters names before they take a place."""
        state = self._state
        terms = query_terms(query)
        if not terms or not state.size:
            return []
        count = state.size
        scores: dict[str, float] = {}
        get = scores.get
        for term, weight in terms.items():
            df = state.df.get(term)
            if not df:
                continue
            idf = weight * math.log(1 + (count - df + 0.5) / (df + 0.5))
            for shard in state.shards.values():
                postings = shard.postings.get(term)
                if postings is None:
                    continue
                names = shard.names
                for number, part in postings:
                    name = names[number]
                    scores[name] = get(name, 0.0) + idf * part
        return _best(scores, limit, accept)


def _best(scores: dict[str, float], limit: int, accept: Callable[[str], bool] | None) -> list[tuple[str, float]]:
    if accept is None:
        return heapq.nlargest(limit, scores.items(), key=lambda item: (item[1], item[0]))
    wanted = limit * 4
    while True:
        top = heapq.nlargest(wanted, scores.items(), key=lambda item: (item[1], item[0]))
        found = [(name, score) for name, score in top if accept(name)][:limit]
        if len(found) >= limit or len(top) < wanted:
            return found
        wanted *= 4


def index_of(documents: Iterable[tuple[str, Document]]) -> SearchIndex:
    """An index of ``(provider, document)`` pairs (tests and benchmarks)."""
    by_provider: dict[str, list[Document]] = {}
    for provider, document in documents:
        by_provider.setdefault(provider, []).append(document)
    index = SearchIndex()
    for provider, docs in by_provider.items():
        index.replace(provider, docs)
    return index
