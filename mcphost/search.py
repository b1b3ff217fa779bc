"""Full-text search over tool definitions: BM25 ranking, Snowball stemming, word variants.

A tool is found by its name (split at ``_ - . /`` and camelCase), title, description, and its
parameters' names and descriptions, each field weighted (a word in the name counts most). Words
are stemmed with the Snowball English stemmer (``snowballstemmer``, which uses PyStemmer's C
implementation when installed), so "files", "filed" and "file" meet; a small table of the word
variants tool descriptions use ("folder" for "directory", "make" for "create") widens a query.

Why an inverted index of our own rather than ``bm25s`` or ``rank-bm25``: both build a static
corpus, so adding one provider's tools means indexing every tool again; here the index is split
into shards, one per provider (a plugin, or one upstream a proxy mounts), and replacing a shard
tokenizes, stems and weighs only that provider's tools. Document frequencies stay corpus-wide: the
shards' postings are merged into one array pair per stem, merged again only for the stems a
changed shard holds. Scoring is vectorized with numpy, so a search costs a few array operations
per query word (a search over 100 000 tools takes about a millisecond). Shards and merged postings
are swapped in as one immutable state: a search running on the event loop never sees half of an
update made in a thread. BM25 itself is a few lines.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
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
    ("edit", "modify", "change", "update", "alter", "patch", "replace"),
    ("search", "find", "lookup", "look", "query", "locate", "grep", "match"),
    ("fetch", "download", "retrieve", "get", "grab", "url", "web", "page"),
    ("move", "rename", "mv", "relocate"),
    ("copy", "duplicate", "clone"),
    ("time", "clock", "hour", "date", "now"),
    ("timezone", "zone", "tz"),
    ("convert", "translate", "transform"),
    ("commit", "checkin", "record"),
    ("diff", "difference", "changes", "changed"),
    ("status", "state", "modified", "changed", "dirty"),
    ("log", "history"),
    ("branch", "checkout"),
    ("stage", "staged", "index", "add"),
    ("entity", "node", "object"),
    ("relation", "relationship", "link", "connection", "edge"),
    ("observation", "note", "fact"),
    ("graph", "knowledge", "memory", "remember", "recall", "forget"),
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
    """One provider's part of the index: per stem, the documents that hold it (numbers into
    ``names``) and their BM25 term parts."""

    postings: dict[str, tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]
    names: tuple[str, ...]


class _State(NamedTuple):
    """What a search reads. Each shard's documents have numbers of their own in ``names`` (taken
    when it was indexed, so other shards never move); ``by_term`` holds each stem's postings per
    shard with those numbers, ``merged`` the same postings as one array pair per stem."""

    shards: dict[str, _Shard]
    by_term: dict[str, dict[str, tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]]
    merged: dict[str, tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]
    names: list[str | None]
    size: int


_EMPTY = _State({}, {}, {}, [], 0)


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
    postings: dict[str, tuple[list[int], list[float]]] = {}
    for number, (terms, length) in enumerate(zip(term_lists, lengths, strict=True)):
        norm = K1 * (1 - B + B * length / (mean or 1.0))
        for term, tf in terms.items():
            numbers, parts = postings.setdefault(term, ([], []))
            numbers.append(number)
            parts.append(tf * (K1 + 1) / (tf + norm))
    arrays = {term: (np.array(numbers, dtype=np.int32), np.array(parts, dtype=np.float64))
              for term, (numbers, parts) in postings.items()}
    return _Shard(arrays, tuple(document.name for document in documents))


def _updated(state: _State, changes: Mapping[str, _Shard | None]) -> _State:
    """``state`` with the given shards replaced (None: removed): only the stems those shards hold
    are merged again. Documents of a new shard take new numbers at the end of ``names``; when
    numbers of removed documents outnumber the live ones, everything is numbered afresh."""
    shards = dict(state.shards)
    for provider, shard in changes.items():
        if shard is None:
            shards.pop(provider, None)
        else:
            shards[provider] = shard
    size = sum(len(shard.names) for shard in shards.values())
    names = state.names
    if len(names) + sum(len(s.names) for s in changes.values() if s is not None) > 2 * size + 1024:
        state, changes = _EMPTY, shards  # compact: renumber every shard
        names = []
    else:
        names = list(names)  # a reader of the old state keeps its own list
    by_term = dict(state.by_term)
    dirty: set[str] = set()
    for provider, shard in changes.items():
        old = state.shards.get(provider)
        for term in old.postings if old is not None else ():
            postings = by_term[term] = dict(by_term[term])
            postings.pop(provider, None)
            dirty.add(term)
        if shard is None:
            continue
        base = len(names)
        names.extend(shard.names)
        for term, (numbers, parts) in shard.postings.items():
            postings = by_term[term] = dict(by_term.get(term) or {})
            postings[provider] = (numbers + base if base else numbers, parts)
            dirty.add(term)
    merged = dict(state.merged)
    for term in dirty:
        postings = by_term[term]
        if not postings:
            del by_term[term]
            merged.pop(term, None)
        elif len(postings) == 1:
            merged[term] = next(iter(postings.values()))
        else:
            merged[term] = (np.concatenate([numbers for numbers, _ in postings.values()]),
                            np.concatenate([parts for _, parts in postings.values()]))
    return _State(shards, by_term, merged, names, size)


class SearchIndex:
    """BM25 over shards of tool documents, one shard per provider (see the module docstring)."""

    def __init__(self) -> None:
        self._state = _EMPTY

    def __len__(self) -> int:
        return self._state.size

    def replace(self, provider: str, documents: Sequence[Document]) -> None:
        """Index ``provider``'s documents in place of what it had (none: it is gone)."""
        self.update({provider: documents})

    def update(self, changes: Mapping[str, Sequence[Document]]) -> None:
        """Index each changed provider's documents in place of what it had (none: it is gone).

        Only the changed providers' documents are tokenized, stemmed and weighted; the postings
        are then merged again (an array copy). The new state is swapped in with one assignment,
        so a search on another thread sees the index before or after, never between.
        """
        built = {provider: build_shard(documents) if documents else None for provider, documents in changes.items()}
        self._state = _updated(self._state, built)

    def search(self, query: str, limit: int = 10, accept: Callable[[str], bool] | None = None
               ) -> list[tuple[str, float]]:
        """The best ``limit`` tool names for ``query`` with their scores, best first; ``accept``
        (the caller's view) filters names before they take a place."""
        state = self._state
        terms = query_terms(query)
        size = state.size
        if not terms or not size:
            return []
        scores: np.ndarray[Any, Any] | None = None
        for term, weight in terms.items():
            posting = state.merged.get(term)
            if posting is None:
                continue
            numbers, parts = posting
            idf = weight * math.log(1 + (size - len(numbers) + 0.5) / (len(numbers) + 0.5))
            if scores is None:
                scores = np.zeros(len(state.names))
            scores[numbers] += idf * parts
        if scores is None:
            return []
        return _best(scores, state.names, limit, accept)


def _best(scores: np.ndarray[Any, Any], names: list[str | None], limit: int,
          accept: Callable[[str], bool] | None) -> list[tuple[str, float]]:
    """The best ``limit`` documents that ``accept`` lets through, with their scores, best first."""
    hit = np.flatnonzero(scores)
    wanted = limit if accept is None else limit * 4
    while True:
        top = hit if len(hit) <= wanted else hit[np.argpartition(scores[hit], len(hit) - wanted)[-wanted:]]
        ranked = sorted(((float(scores[number]), names[number] or "") for number in top.tolist()), key=_by_score)
        chosen = [(name, score) for score, name in ranked if accept is None or accept(name)]
        if len(chosen) >= limit or len(top) == len(hit):
            return chosen[:limit]
        wanted *= 4


def _by_score(item: tuple[float, str]) -> tuple[float, str]:
    return (-item[0], item[1])


def index_of(documents: Iterable[tuple[str, Document]]) -> SearchIndex:
    """An index of ``(provider, document)`` pairs (tests and benchmarks)."""
    by_provider: dict[str, list[Document]] = {}
    for provider, document in documents:
        by_provider.setdefault(provider, []).append(document)
    index = SearchIndex()
    index.update(by_provider)
    return index
