"""Full-text search over tool definitions: BM25 over Unicode words, intent, server context, fusion.

A tool is found by its name, title, description, its parameters' names and descriptions, and what
its provider (the plugin, or the upstream a proxy mounts) says about itself: its name, title and
instructions. Each field is weighted (a word in the name counts most).

**Words.** Text is normalized (NFKC), split at Unicode word boundaries and at ``_ - . /``, then
camelCase and letter/digit boundaries split further: ``getGitHubRepo`` gives ``get``, ``git``,
``hub``, ``repo`` and the joined neighbours ``getgit``, ``github``, ``hubrepo``, so "GitHub" in a
query meets a ``github_`` prefix. Words are case-folded and diacritics folded for matching
("Zürich", "São Paulo", "Łódź" meet "zurich", "sao paulo", "lodz"); CJK text becomes single
characters and bigrams; English words are stemmed (Snowball; PyStemmer's C code when installed).
No word is dropped for its script: a query in another language still matches the names and
numbers it contains.

**No vocabulary tuned to particular servers.** The only word variants are learned from the catalog
itself: a query word that no tool uses is matched to the tools' words one edit away (a typo), found
through a table of single-character deletions kept with the index; a long one with none one edit
away, to those two edits away (candidates from a table of the words' three-letter pieces, checked
by edit distance). A Cyrillic or Greek word is first transliterated to Latin letters.

**Intent.** A question that asks to read ("show", "list", "what is") prefers tools that read over
tools that write, and a request to change something the reverse, as each tool says about itself:
its ``readOnlyHint`` and ``destructiveHint`` annotations, else the verb its name or description
starts with. A request to change something also says which change (create, update or delete, by
its first such verb); a tool whose name's first such verb does another ranks lower.

**Name coverage.** Among the best NAME_COVERAGE_DEPTH documents, a tool gains by the share of
its name's stems the query holds (a verb that says the query's intent counts as held): "create an
issue" prefers ``create_issue`` to ``issue_attachment_create``.

**Shards.** The inverted index is split into shards, one per provider; replacing a shard tokenizes,
stems and weighs only that provider's tools. Document frequencies stay corpus-wide: the shards'
postings are merged into one array pair per stem, merged again only for the stems a changed shard
holds. Scoring is vectorized with numpy (a few array operations per query word). Shards and merged
postings are swapped in as one immutable state: a search running on another thread never sees half
of an update.

**Filtering before scoring.** ``search(mask=...)`` takes a boolean array over the state's document
numbers (:meth:`SearchIndex.mask_of` builds it once per view and state): tools outside the caller's
view never take a place, whatever their score.

**Rankers.** A :class:`Ranker` (the semantic plugin's, say) ranks the same documents by its own
means; its ranking is fused with the lexical one by their scores (:func:`fuse_scores`): each
ranking's scores brought to [0, 1] (the lexical one relative to its best, a ranker's between its
last and first place), then averaged with equal weights.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import unicodedata
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np
import snowballstemmer  # type: ignore[import-untyped]  # the package ships no type information

log = logging.getLogger("mcphost.search")

#: BM25 parameters (the usual ones).
K1 = 1.2
B = 0.75
#: Weight of a word by the field it appears in.
FIELD_WEIGHTS = {"name": 3.0, "title": 2.0, "description": 1.0, "param": 1.5, "param_description": 0.5,
                 "server": 1.5, "server_title": 1.0, "server_instructions": 0.3}
#: Most words of a provider's instructions that count for each of its tools.
SERVER_INSTRUCTION_WORDS = 40
#: Weight of a query word matched only through a word one edit away (a typo).
TYPO_WEIGHT = 0.7
#: Weight of the parts of a split query word ("git", "hub" of "GitHub"), against its joined form.
PART_WEIGHT = 0.6
#: Score factors by intent: a read question's score of a tool that writes, and the reverse.
READ_ASKS_WRITE = 0.6
WRITE_ASKS_READ = 0.8
#: A request to change something: the score factor of a tool whose verb does another change
#: (a request to create something, of a tool that deletes or updates).
OTHER_ACTION = 0.8
#: How much a tool gains for meeting all of a query's words rather than one (its score times 1 + this
#: times the share of the query's weight it meets).
COVERAGE = 1.0
#: How much a tool gains when the query holds every stem of its name (its score times 1 + this times
#: the share held), among the best NAME_COVERAGE_DEPTH documents.
NAME_COVERAGE = 0.5
NAME_COVERAGE_DEPTH = 200
#: Reciprocal rank fusion constant (:func:`fuse`).
RRF_K = 60
#: Places of each ranking that a fusion with rankers considers (at least the limit asked for).
FUSION_DEPTH = 30
#: The default limit on a query's length, in bytes of UTF-8.
MAX_QUERY_BYTES = 1024

_TOKEN = re.compile(
    r"(?:[^\W_]|[\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed"
    r"\u0900-\u0903\u093a-\u094f\u0951-\u0957\u0962\u0963\u0981-\u0983\u09bc-\u09d7\u0a01-\u0a83\u0abc-\u0acd"
    r"\u0b01-\u0b03\u0b3c-\u0b57\u0b82-\u0bd7\u0c00-\u0c04\u0c3e-\u0c56\u0c81-\u0c83\u0cbc-\u0cd6\u0d00-\u0d03"
    r"\u0d3b-\u0d57\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1-\u0ebc\u0ec8-\u0ecd\u0f71-\u0f84\u102b-\u103e"
    r"\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f])+")
_CJK = re.compile(r"[\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31a0-\u31ff"
                  r"\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\U00020000-\U0003134f]+")
_ASCII_WORD = re.compile(r"[a-z]+")
#: Letters that do not decompose into a base letter and a mark.
_FOLD = str.maketrans({"ł": "l", "ø": "o", "đ": "d", "ð": "d", "ħ": "h", "\u0131": "i", "ŀ": "l", "ŧ": "t",
                       "æ": "ae", "œ": "oe", "þ": "th", "ĸ": "k", "ŋ": "n"})
_STOP = frozenset("""
a about after all also an and any are as at be been being but by can could did do does doing done for from
had has have having he her here his how i if in into is it its itself just let lets me my no nor not of on
once only or other our out over own please same she should so some such than that the their them then there
these they this those through to too under until up very was we were what when where which while who whom
why will with would you your yours want need like give tell i'd i'm i've using use via
""".split())

#: Query words that ask to read, and words that ask to change something (general English, stemmed
#: below); the first of them in a query sets its intent.
_READ_WORDS = """show list get what which who whose where when how find search look view read display see check
describe fetch retrieve query count lookup inspect browse print tell explain summarize summarise is are does
do has have status info information details detail know""".split()
_WRITE_WORDS = """create add new make delete remove update set write edit modify change send post commit push
merge move rename upload insert put open close start stop run execute deploy assign publish drop cancel archive
reply invite schedule book save store clear reset kill restart create submit approve reject apply install
uninstall enable disable lock unlock mark tag label comment upsert patch replace erase destroy purge""".split()
#: Words a tool's name or description starts with that say it reads or writes.
_TOOL_READ = """get list read search find show view fetch query describe lookup count inspect browse check
retrieve download export status info stat stats exists print watch""".split()
_TOOL_WRITE = """create add delete remove update set write edit modify send post commit push merge move rename
upload insert put close start stop run execute deploy assign publish drop cancel archive reply invite schedule
save store clear reset kill restart submit approve reject apply install uninstall enable disable lock unlock
mark tag label comment upsert patch replace erase destroy purge make new open""".split()

#: A tool's intent: reads, writes, or unknown.
READS, WRITES, UNKNOWN = 1, 2, 0

#: What a change does, by its verb (general English): makes something new, changes something that
#: is there, or takes it away. A query's first such verb and a tool name's first one say theirs.
CREATES, UPDATES, DELETES = 1, 2, 3
_ACTION_WORDS = {
    CREATES: "create add new make post publish insert submit open send compose draft upload book invite register",
    UPDATES: "update edit modify change set rename move patch replace assign",
    DELETES: "delete remove drop erase destroy purge clear",
}


@dataclass(frozen=True)
class Document:
    """What a tool is found by."""

    name: str
    title: str
    description: str
    #: (parameter name, its description) pairs.
    params: tuple[tuple[str, str], ...] = ()
    #: Its ``readOnlyHint`` and ``destructiveHint`` annotations (None: not said).
    read_only: bool | None = None
    destructive: bool | None = None


@dataclass(frozen=True)
class Provider:
    """What a provider (a plugin, or an upstream a proxy mounts) says about itself."""

    name: str = ""
    title: str = ""
    instructions: str = ""


class Ranker(Protocol):
    """A ranking of the same documents by other means (the semantic plugin's): told of every
    change of the index (on the thread that makes it), asked for its best names for a query (on
    the thread a search runs on). ``accept`` is the caller's view: names it refuses must not be
    returned."""

    def update(self, changes: Mapping[str, Sequence[Document]]) -> None: ...

    def rank(self, query: str, limit: int, accept: Callable[[str], bool] | None) -> list[tuple[str, float]]: ...


class _Shard(NamedTuple):
    """One provider's part of the index: per stem, the documents that hold it (numbers into
    ``names``) and their weighted term frequencies; each document's length and intent."""

    postings: dict[str, tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]
    names: tuple[str, ...]
    intents: tuple[int, ...]
    lengths: tuple[float, ...]
    #: The stems of each document's name.
    name_stems: tuple[frozenset[str], ...]


class _State(NamedTuple):
    """What a search reads. Each shard's documents have numbers of their own in ``names`` (taken
    when it was indexed, so other shards never move); ``by_term`` holds each stem's postings per
    shard with those numbers, ``merged`` the same postings as one array pair per stem."""

    shards: dict[str, _Shard]
    by_term: dict[str, dict[str, tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]]
    merged: dict[str, tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]
    names: list[str | None]
    intents: np.ndarray[Any, Any]
    lengths: list[float]
    #: Each document's BM25 length normalization, ``K1 * (1 - B + B * length / mean length)``,
    #: with the mean over the whole index (a provider of long descriptions gains nothing by them).
    norms: np.ndarray[Any, Any]
    size: int
    name_stems: list[frozenset[str]]


_EMPTY = _State({}, {}, {}, [], np.zeros(0, dtype=np.int8), [], np.zeros(0), 0, [])

_stemmer = snowballstemmer.stemmer("english")
_stem_lock = threading.Lock()  # a Snowball stemmer object is not safe to share between threads


def _stem_all(found: list[str]) -> list[str]:
    with _stem_lock:
        return list(_stemmer.stemWords(found))


_READ_STEMS = frozenset(_stem_all(_READ_WORDS))
_WRITE_STEMS = frozenset(_stem_all(_WRITE_WORDS)) - _READ_STEMS
_TOOL_READ_STEMS = frozenset(_stem_all(_TOOL_READ))
_TOOL_WRITE_STEMS = frozenset(_stem_all(_TOOL_WRITE)) - _TOOL_READ_STEMS
_ACTION_OF_STEM = {stem: action for action, text in _ACTION_WORDS.items() for stem in _stem_all(text.split())}


def fold(word: str) -> str:
    """``word`` case-folded with its diacritics taken off (for matching)."""
    word = word.casefold()
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFKD", word)
    kept = []
    base = 0
    for char in decomposed:
        if unicodedata.combining(char):
            if base < 0x0530:  # a mark on a Latin, Greek or Cyrillic letter: a diacritic
                continue
        else:
            base = ord(char)
        kept.append(char)
    return unicodedata.normalize("NFC", "".join(kept)).translate(_FOLD)


def _camel_parts(token: str) -> list[str]:
    """``token`` split at lower-to-upper and letter/digit changes (``HTTPServer2`` -> HTTP, Server, 2)."""
    parts: list[str] = []
    start = 0
    n = len(token)
    for i in range(1, n):
        a, b = token[i - 1], token[i]
        split = ((a.islower() and b.isupper()) or (a.isdigit() != b.isdigit())
                 or (a.isupper() and b.isupper() and i + 1 < n and token[i + 1].islower()))
        if split:
            parts.append(token[start:i])
            start = i
    parts.append(token[start:])
    return parts


def tokens(text: str, part: float = PART_WEIGHT, joined: float = 1.0) -> list[tuple[str, float]]:
    """Folded words of ``text`` with their weights (1 for a word).

    Split words give their parts (weighing ``part``) and each pair of neighbouring parts joined
    (weighing ``joined``); CJK runs give their characters and bigrams."""
    found: list[tuple[str, float]] = []
    for token in _TOKEN.findall(unicodedata.normalize("NFKC", text)):
        if not token.isascii() and _CJK.search(token):
            position = 0
            for run in _CJK.finditer(token):
                if run.start() > position:
                    found.extend(tokens(token[position:run.start()], part, joined))
                chars = run.group()
                found.extend((char, 1.0) for char in chars)
                found.extend((chars[i:i + 2], 1.0) for i in range(len(chars) - 1))
                position = run.end()
            if position < len(token):
                found.extend(tokens(token[position:], part, joined))
            continue
        plain = (token.isalpha() and (token[1:].islower() or token.isupper())) or token.isdigit()
        parts = [token] if plain or len(token) == 1 else _camel_parts(token)
        if len(parts) == 1:
            found.append((fold(token), 1.0))
            continue
        folded = [fold(part) for part in parts]
        found.extend((each, part) for each in folded)
        found.extend((folded[i] + folded[i + 1], joined) for i in range(len(folded) - 1))
    return [(word, weight) for word, weight in found if word not in _STOP]


def words(text: str) -> list[str]:
    """The folded words of ``text`` (see :func:`tokens`), stop words out."""
    return [word for word, _ in tokens(text)]


#: Weights of a document's split words: each part counts fully, the joined neighbours less.
_DOC_SPLIT = {"part": 1.0, "joined": 0.7}


def _stemmed(found: list[tuple[str, float]]) -> list[tuple[str, float]]:
    english = [word for word, _ in found if _ASCII_WORD.fullmatch(word)]
    stemmed = iter(_stem_all(english)) if english else iter(())
    return [(next(stemmed) if _ASCII_WORD.fullmatch(word) else word, weight) for word, weight in found]


def stems(text: str) -> list[str]:
    return [stem for stem, _ in _stemmed(tokens(text))]


def query_terms(query: str) -> dict[str, float]:
    """Stems of ``query`` with their weights: its own words 1, parts of split words less."""
    return _query_terms(query)[0]


def _query_terms(query: str) -> tuple[dict[str, float], dict[str, str]]:
    """:func:`query_terms`, and the word each stem came from (a typo is looked for in both)."""
    found = tokens(query)
    terms: dict[str, float] = {}
    surface: dict[str, str] = {}
    for (word, _), (stem, weight) in zip(found, _stemmed(found), strict=True):
        terms[stem] = max(terms.get(stem, 0.0), weight)
        surface.setdefault(stem, word)
    return terms, surface


def intent_of_query(query: str) -> int:
    """READS, WRITES or UNKNOWN: what the first word of ``query`` that says either asks."""
    for word in _stem_all(_ASCII_WORD.findall(query.casefold())[:64]):
        if word in _READ_STEMS:
            return READS
        if word in _WRITE_STEMS:
            return WRITES
    return UNKNOWN


def action_of_query(query: str) -> int:
    """CREATES, UPDATES, DELETES or UNKNOWN: what the first verb of ``query`` that says one asks
    (UNKNOWN when a word that asks to read comes first)."""
    return _first_action(_stem_all(_ASCII_WORD.findall(query.casefold())[:64]), _READ_STEMS)


def action_of(document: Document) -> int:
    """CREATES, UPDATES, DELETES or UNKNOWN: what the first verb of ``document``'s name that says one does."""
    return _first_action(_stem_all([w for w in words(document.name) if _ASCII_WORD.fullmatch(w)]),
                         _TOOL_READ_STEMS)


def _first_action(stems: Iterable[str], reading: Container[str]) -> int:
    """The action of the first of ``stems`` that names one, UNKNOWN when one of ``reading`` comes first."""
    for stem in stems:
        action = _ACTION_OF_STEM.get(stem)
        if action:
            return action
        if stem in reading:
            return UNKNOWN
    return UNKNOWN


def intent_of(document: Document) -> int:
    """READS, WRITES or UNKNOWN: what ``document`` says it does (annotations first, then the verb
    its name, else its description, starts with)."""
    if document.read_only is True:
        return READS
    if document.destructive is True or document.read_only is False:
        return WRITES
    for stem in _stem_all([w for w in words(document.name) if _ASCII_WORD.fullmatch(w)]):
        if stem in _TOOL_READ_STEMS:
            return READS
        if stem in _TOOL_WRITE_STEMS:
            return WRITES
    first = [w for w in words(document.description)[:1] if _ASCII_WORD.fullmatch(w)]
    stem = _stem_all(first)[0] if first else ""
    if stem in _TOOL_READ_STEMS:
        return READS
    return WRITES if stem in _TOOL_WRITE_STEMS else UNKNOWN


def _server_terms(provider: Provider | None) -> dict[str, float]:
    counts: dict[str, float] = {}
    if provider is None:
        return counts
    for text, field in ((provider.name, "server"), (provider.title, "server_title")):
        for stem, weight in _stemmed(tokens(text)):
            counts[stem] = counts.get(stem, 0.0) + weight * FIELD_WEIGHTS[field]
    seen: set[str] = set()
    for stem, weight in _stemmed(tokens(provider.instructions[:4096])):
        if stem not in seen and len(seen) < SERVER_INSTRUCTION_WORDS:
            seen.add(stem)
            counts[stem] = counts.get(stem, 0.0) + weight * FIELD_WEIGHTS["server_instructions"]
    return counts


def _weighted_terms(document: Document, server: Mapping[str, float]) -> dict[str, float]:
    counts: dict[str, float] = dict(server)

    def add(text: str, weight: float) -> None:
        for stem, part in _stemmed(tokens(text, **_DOC_SPLIT)):
            counts[stem] = counts.get(stem, 0.0) + weight * part

    add(document.name, FIELD_WEIGHTS["name"])
    add(document.title, FIELD_WEIGHTS["title"])
    add(document.description, FIELD_WEIGHTS["description"])
    for name, description in document.params:
        add(name, FIELD_WEIGHTS["param"])
        add(description, FIELD_WEIGHTS["param_description"])
    return counts


def build_shard(documents: Sequence[Document], provider: Provider | None = None) -> _Shard:
    """Index one provider's documents: per stem, the documents and weighted term frequencies."""
    server = _server_terms(provider)
    term_lists = [_weighted_terms(document, server) for document in documents]
    postings: dict[str, tuple[list[int], list[float]]] = {}
    for number, terms in enumerate(term_lists):
        for term, tf in terms.items():
            numbers, parts = postings.setdefault(term, ([], []))
            numbers.append(number)
            parts.append(tf)
    arrays = {term: (np.array(numbers, dtype=np.int32), np.array(parts, dtype=np.float64))
              for term, (numbers, parts) in postings.items()}
    return _Shard(arrays, tuple(document.name for document in documents),
                  tuple(intent_of(document) | action_of(document) << 2 for document in documents),
                  tuple(sum(terms.values()) for terms in term_lists),
                  tuple(frozenset(stems(document.name)) for document in documents))


def _deletions(term: str) -> list[str]:
    return [term[:i] + term[i + 1:] for i in range(len(term))]


#: Shortest word matched to another one edit away (shorter ones are too easily something else).
TYPO_MIN = 4
#: Shortest and longest word matched to another two edits away, when none is one edit away, and
#: the weight of such a match.
TYPO2_MIN = 8
TYPO2_MAX = 24
TYPO2_WEIGHT = 0.5
#: Most words of a query looked for two edits away, and most stems checked for each (the cost of
#: a query full of unknown long words stays bounded).
TYPO2_WORDS = 4
TYPO2_CANDIDATES = 32
#: Weight of a query word matched through its Latin transliteration (a Cyrillic or Greek word).
TRANSLIT_WEIGHT = 0.8

#: Cyrillic and Greek letters in Latin script (a plain scientific-style transliteration; the
#: letters with diacritics are folded before): lets "kommit" or "kafka" written in Cyrillic or
#: Greek meet "commit", "kafka". Cyrillic U+0430-U+045F, then Greek U+03B1-U+03C9, in code point order.
_CYRILLIC = ("a b v g d e zh z i i k l m n o p r s t u f kh ts ch sh shch - y - e yu ya "
             "e e d g e dz i i j lj nj c k i u dz").split()
_GREEK = "a b g d e z i th i k l m n x o p r s s t y f ch ps o".split()
_TRANSLIT = str.maketrans({**{chr(0x0430 + i): ("" if latin == "-" else latin) for i, latin in enumerate(_CYRILLIC)},
                           **{chr(0x03B1 + i): latin for i, latin in enumerate(_GREEK)}})


def transliterate(word: str) -> str:
    """``word`` (folded) with its Cyrillic and Greek letters in Latin ones; other words unchanged."""
    if word.isascii():
        return word
    latin = word.translate(_TRANSLIT)
    return latin if latin.isascii() and latin.isalnum() else word


def _grams_of(term: str) -> set[str]:
    return {term[i:i + 3] for i in range(len(term) - 2)}


def _edits(a: str, b: str) -> int:
    """The edit distance of ``a`` and ``b`` (insertions, deletions, substitutions, swaps of neighbours)."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y))
            if i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return previous[-1]


def _updated(state: _State, changes: Mapping[str, _Shard | None]) -> tuple[_State, set[str], set[str]]:
    """``state`` with the given shards replaced (None: removed): only the stems those shards hold
    are merged again. Documents of a new shard take new numbers at the end of ``names``; when
    numbers of removed documents outnumber the live ones, everything is numbered afresh. Also the
    stems that appeared in and vanished from the whole index."""
    shards = dict(state.shards)
    for provider, shard in changes.items():
        if shard is None:
            shards.pop(provider, None)
        else:
            shards[provider] = shard
    size = sum(len(shard.names) for shard in shards.values())
    names = state.names
    before = state
    if len(names) + sum(len(s.names) for s in changes.values() if s is not None) > 2 * size + 1024:
        state, changes = _EMPTY, shards  # compact: renumber every shard
        names = []
    else:
        names = list(names)  # a reader of the old state keeps its own list
    intents = state.intents.tolist()
    lengths = list(state.lengths)
    name_stems = list(state.name_stems)
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
        intents.extend(shard.intents)
        lengths.extend(shard.lengths)
        name_stems.extend(shard.name_stems)
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
    added = {term for term in dirty if term in merged and term not in before.merged}
    removed = {term for term in dirty if term not in merged and term in before.merged}
    if state is _EMPTY and before is not _EMPTY:  # compacted: every stem was merged again
        added = set(merged) - set(before.merged)
        removed = set(before.merged) - set(merged)
    mean = sum(sum(shard.lengths) for shard in shards.values()) / size if size else 1.0
    norms = K1 * (1 - B + B * np.array(lengths) / (mean or 1.0))
    return (_State(shards, by_term, merged, names, np.array(intents, dtype=np.int8), lengths, norms, size,
                   name_stems), added, removed)


class SearchIndex:
    """BM25 over shards of tool documents, one shard per provider (see the module docstring)."""

    def __init__(self, rankers: Sequence[Ranker] = ()) -> None:
        self._state = _EMPTY
        #: Other rankings fused with this one (reciprocal rank fusion).
        self.rankers: list[Ranker] = list(rankers)
        #: Each single-character deletion of an indexed stem -> the stems that give it (typos).
        self._deleted: dict[str, tuple[str, ...]] = {}
        #: Each three-letter piece of an indexed stem of TYPO2_MIN - 2 letters or more -> those stems
        #: (lists: a search may read one while an update appends to it).
        self._grams: dict[str, list[str]] = {}
        self._update_lock = threading.Lock()

    def __len__(self) -> int:
        return self._state.size

    @property
    def version(self) -> object:
        """Changes whenever the index does (a cache of masks is keyed by it)."""
        return self._state

    def replace(self, provider: str, documents: Sequence[Document], about: Provider | None = None) -> None:
        """Index ``provider``'s documents in place of what it had (none: it is gone)."""
        self.update({provider: documents}, {provider: about} if about is not None else None)

    def update(self, changes: Mapping[str, Sequence[Document]],
               providers: Mapping[str, Provider | None] | None = None) -> None:
        """Index each changed provider's documents in place of what it had (none: it is gone);
        ``providers`` says what each provider says about itself (its name, title, instructions).

        Only the changed providers' documents are tokenized, stemmed and weighted; the postings
        are then merged again (an array copy). The new state is swapped in with one assignment,
        so a search on another thread sees the index before or after, never between.
        """
        about = providers or {}
        built = {provider: build_shard(documents, about.get(provider) or Provider(provider))
                 if documents else None for provider, documents in changes.items()}
        with self._update_lock:
            state, added, removed = _updated(self._state, built)
            deleted = self._deleted
            for term in removed:
                if len(term) >= TYPO_MIN:
                    for form in _deletions(term):
                        left = tuple(t for t in deleted.get(form, ()) if t != term)
                        if left:
                            deleted[form] = left
                        else:
                            deleted.pop(form, None)
            for term in added:
                if len(term) >= TYPO_MIN:
                    for form in _deletions(term):
                        deleted[form] = (*deleted.get(form, ()), term)
            self._index_grams(added, removed)
            self._state = state
            for ranker in self.rankers:
                try:
                    ranker.update(changes)
                except Exception:  # the lexical ranking still answers
                    log.exception("search ranker %s failed to index", type(ranker).__name__)

    def _index_grams(self, added: Iterable[str], removed: Iterable[str]) -> None:
        grams = self._grams
        for term in removed:
            if len(term) >= TYPO2_MIN - 2:
                for gram in _grams_of(term):
                    left = [t for t in grams.get(gram, ()) if t != term]
                    if left:
                        grams[gram] = left
                    else:
                        grams.pop(gram, None)
        for term in added:
            if len(term) >= TYPO2_MIN - 2 and _ASCII_WORD.fullmatch(term):
                for gram in _grams_of(term):
                    grams.setdefault(gram, []).append(term)

    def _far(self, term: str, merged: Mapping[str, Any]) -> list[str]:
        """Indexed stems two edits away from ``term`` (a word of TYPO2_MIN letters or more): those
        that share at least two of its three-letter pieces and differ in length by two at most,
        each checked by its edit distance."""
        shared: dict[str, int] = {}
        for gram in _grams_of(term):
            for stem in self._grams.get(gram, ()):
                shared[stem] = shared.get(stem, 0) + 1
        size = len(term)
        likely = sorted((stem for stem, count in shared.items() if count >= 2 and abs(len(stem) - size) <= 2),
                        key=lambda stem: -shared[stem])[:TYPO2_CANDIDATES]
        return [stem for stem in likely if stem in merged and _edits(term, stem) <= 2]

    def _near(self, term: str, merged: Mapping[str, Any]) -> list[str]:
        """Indexed stems one edit away from ``term`` (a deletion, insertion, substitution or swap)."""
        deleted = self._deleted
        found: set[str] = set(deleted.get(term, ()))
        for form in _deletions(term):
            if form in merged:
                found.add(form)
            found.update(deleted.get(form, ()))
        found.discard(term)
        return [stem for stem in found if stem in merged]

    def _variants(self, terms: dict[str, float], surface: Mapping[str, str], merged: Mapping[str, Any]) -> None:
        """Add to ``terms`` the indexed stems that a query word the index lacks may mean: its Latin
        transliteration (a Cyrillic or Greek word), the stems one edit from it or from the word as
        written (a typo), else, for a long word, those two edits away; each weighing less."""
        far = TYPO2_WORDS
        for term in [t for t in terms if t not in merged]:
            written = surface[term]
            weight = terms[term]
            forms = [written] if written == term else [term, written]
            latin = transliterate(written)
            if latin != written:
                weight *= TRANSLIT_WEIGHT
                forms = [stem for stem, _ in _stemmed([(latin, 1.0)])] + [latin]
                if forms[0] in merged:
                    terms[forms[0]] = max(terms.get(forms[0], 0.0), weight)
                    continue
            found: set[str] = set()
            # One edit from the stem or from the word as written: "calender" stems to "calend",
            # two edits from the stem "calendar", but the word itself is one edit from it.
            for form in forms:
                if len(form) >= TYPO_MIN:
                    found.update(self._near(form, merged))
            factor = TYPO_WEIGHT
            if not found and far and TYPO2_MIN <= len(forms[-1]) <= TYPO2_MAX:
                far -= 1
                found.update(self._far(forms[-1], merged))
                factor = TYPO2_WEIGHT
            for near in sorted(found):
                terms[near] = max(terms.get(near, 0.0), weight * factor)

    def mask_of(self, accept: Callable[[str], bool]) -> np.ndarray[Any, Any]:
        """A boolean array over this state's document numbers: the documents ``accept`` lets
        through (a view's mask, built once per view and state; pass it to :meth:`search`)."""
        names = self._state.names
        return np.fromiter((name is not None and accept(name) for name in names), dtype=bool, count=len(names))

    def search(self, query: str, limit: int = 10, accept: Callable[[str], bool] | None = None,
               mask: np.ndarray[Any, Any] | None = None, version: object | None = None
               ) -> list[tuple[str, float]]:
        """The best ``limit`` tool names for ``query`` with their scores, best first.

        ``mask`` (from :meth:`mask_of`, for the state ``version`` names) drops the documents the
        caller's view hides before they are ranked; ``accept`` then filters the names that take
        a place (scopes, allow-lists). A mask built for another state is not used."""
        state = self._state
        if mask is not None and (version is not state or len(mask) != len(state.names)):
            mask = None
        depth = limit if not self.rankers else max(limit, FUSION_DEPTH)
        lexical = self._lexical(state, query, depth, accept, mask)
        if not self.rankers:
            return lexical[:limit]
        rankings = []
        for ranker in self.rankers:  # ``accept`` covers the view (the mask only spares the work)
            try:
                rankings.append(ranker.rank(query, depth, accept))
            except Exception:  # the lexical ranking still answers
                log.exception("search ranker %s failed", type(ranker).__name__)
        return fuse_scores(lexical, rankings, limit)

    def _lexical(self, state: _State, query: str, limit: int, accept: Callable[[str], bool] | None,
                 mask: np.ndarray[Any, Any] | None) -> list[tuple[str, float]]:
        terms, surface = _query_terms(query)
        size = state.size
        if not terms or not size:
            return []
        merged = state.merged
        self._variants(terms, surface, merged)
        scores: np.ndarray[Any, Any] | None = None
        covered: np.ndarray[Any, Any] | None = None
        asked = sum(weight for term, weight in terms.items() if term in merged)
        for term, weight in terms.items():
            posting = merged.get(term)
            if posting is None:
                continue
            numbers, tf = posting
            idf = weight * math.log(1 + (size - len(numbers) + 0.5) / (len(numbers) + 0.5))
            if mask is not None:  # the view's documents only: the rest cost one lookup each
                seen = mask[numbers]
                numbers, tf = numbers[seen], tf[seen]
            if scores is None:
                scores = np.zeros(len(state.names))
                covered = np.zeros(len(state.names))
            scores[numbers] += idf * (tf * (K1 + 1) / (tf + state.norms[numbers]))
            covered[numbers] += weight  # type: ignore[index]
        if scores is None:
            return []
        hit = np.flatnonzero(scores)
        if COVERAGE and asked:  # a tool that meets more of the question's words ranks higher
            scores[hit] *= 1.0 + COVERAGE * covered[hit] / asked  # type: ignore[index]
        intent = intent_of_query(query)
        if len(hit):
            factors = _intent_factors(intent, action_of_query(query) if intent == WRITES else UNKNOWN)
            if factors is not None:
                scores[hit] *= factors[state.intents[hit]]
        if NAME_COVERAGE and len(hit):
            _name_coverage(state, scores, hit, terms, intent)
        return _best(scores, hit, state.names, limit, accept)


def _intent_factors(intent: int, action: int) -> np.ndarray[Any, Any] | None:
    """Score factors by a tool's code (its intent, plus its action times 4) for a query's intent
    and action; None: all 1."""
    if intent == UNKNOWN:
        return None
    factors = np.ones(16)
    for code in range(16):
        tool_intent, tool_action = code & 3, code >> 2
        if intent == READS and tool_intent == WRITES:
            factors[code] = READ_ASKS_WRITE
        elif intent == WRITES and tool_intent == READS:
            factors[code] = WRITE_ASKS_READ
        if action and tool_action and tool_action != action:
            factors[code] *= OTHER_ACTION
    return factors


def _name_coverage(state: _State, scores: np.ndarray[Any, Any], hit: np.ndarray[Any, Any],
                   terms: Mapping[str, float], intent: int) -> None:
    """Raise the best NAME_COVERAGE_DEPTH documents' scores by the share of their name's stems the
    query holds: a question that spells out a tool's whole name ("create issue" for
    ``create_issue``) prefers it to one that shares only some of its name's words. A verb of the
    name that says what the query asks (a writing verb for a request to change something, a
    reading one for a question) counts as held: the intent is met, if in other words."""
    verbs = _TOOL_READ_STEMS if intent == READS else _TOOL_WRITE_STEMS if intent == WRITES else frozenset()
    top = hit if len(hit) <= NAME_COVERAGE_DEPTH else hit[np.argpartition(scores[hit], -NAME_COVERAGE_DEPTH)
                                                          [-NAME_COVERAGE_DEPTH:]]
    wanted = verbs.union(terms)
    name_stems = state.name_stems
    shares = [len(held & wanted) / len(held) if held else 0.0 for held in map(name_stems.__getitem__, top.tolist())]
    scores[top] *= 1.0 + NAME_COVERAGE * np.array(shares)


def fuse(rankings: Sequence[Sequence[tuple[str, float]]], limit: int, k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion of ``rankings`` (each best first): the best ``limit`` names."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, (name, _) in enumerate(ranking):
            fused[name] = fused.get(name, 0.0) + 1.0 / (k + rank + 1)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:limit]


def fuse_scores(lexical: Sequence[tuple[str, float]], rankings: Sequence[Sequence[tuple[str, float]]],
                limit: int) -> list[tuple[str, float]]:
    """The best ``limit`` names by the mean of their normalized scores in ``lexical`` and each of
    ``rankings`` (each best first; a name absent from one counts 0 there).

    A lexical score is taken relative to the best one (BM25 has a natural zero: no word met); a
    ranker's scores (a cosine, say, whose zero means nothing) are spread between 0 at its last
    place and 1 at its first. Unlike reciprocal rank fusion, a clear lead in either ranking
    survives the fusion (measured on the development half of benchmarks/eval_search_real.py:
    recall@1 0.66 by rank fusion, 0.70 by scores, recall@5 0.86 and 0.87)."""
    fused: dict[str, float] = {}
    parts = [_relative(lexical)] + [_spread(ranking) for ranking in rankings if ranking]
    for part in parts:
        for name, score in part.items():
            fused[name] = fused.get(name, 0.0) + score / len(parts)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:limit]


def _relative(ranking: Sequence[tuple[str, float]]) -> dict[str, float]:
    best = ranking[0][1] if ranking else 0.0
    return {name: score / best for name, score in ranking} if best > 0 else {}


def _spread(ranking: Sequence[tuple[str, float]]) -> dict[str, float]:
    high, low = ranking[0][1], ranking[-1][1]
    span = high - low
    return {name: (score - low) / span if span > 0 else 1.0 for name, score in ranking}


def _best(scores: np.ndarray[Any, Any], hit: np.ndarray[Any, Any], names: list[str | None], limit: int,
          accept: Callable[[str], bool] | None) -> list[tuple[str, float]]:
    """The best ``limit`` of the documents ``hit`` (their numbers) that ``accept`` lets through,
    with their scores, best first."""
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


def index_of(documents: Iterable[tuple[str, Document]], rankers: Sequence[Ranker] = ()) -> SearchIndex:
    """An index of ``(provider, document)`` pairs (tests and benchmarks)."""
    by_provider: dict[str, list[Document]] = {}
    for provider, document in documents:
        by_provider.setdefault(provider, []).append(document)
    index = SearchIndex(rankers)
    index.update(by_provider)
    return index
