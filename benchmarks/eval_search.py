#!/usr/bin/env python3
"""Search quality: recall@5 of ``search_tools`` ranking on the evaluation set of search_corpus.py.

    python benchmarks/eval_search.py [--tools 10000] [--seed 27] [--show-misses] [--json]

Builds the index the host builds (mcphost.search, one shard per provider) over the 53 recorded
tools of six reference MCP servers plus generated distractors up to ``--tools``, asks each
natural-language query, and prints recall@5 (the share of queries whose tool is among the first
five), recall@1 and the mean reciprocal rank. ``--show-misses`` lists the queries whose tool
ranked below five, with what came first.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search_corpus import QUERIES, corpus

from mcphost.search import SearchIndex


def evaluate(total: int, seed: int) -> dict[str, object]:
    index = SearchIndex()
    providers = corpus(total, seed)
    for provider, tools in providers:
        index.replace(provider, tools)
    ranks: list[int | None] = []
    misses = []
    for query, gold in QUERIES:
        found = [name for name, _ in index.search(query, 20)]
        rank = found.index(gold) + 1 if gold in found else None
        ranks.append(rank)
        if rank is None or rank > 5:
            misses.append({"query": query, "gold": gold, "rank": rank, "top": found[:5]})
    n = len(QUERIES)
    return {
        "tools": len(index), "providers": len(providers), "queries": n,
        "recall_at_5": sum(1 for r in ranks if r is not None and r <= 5) / n,
        "recall_at_1": sum(1 for r in ranks if r == 1) / n,
        "mrr": sum(1 / r for r in ranks if r is not None) / n,
        "misses": misses,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--show-misses", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = evaluate(args.tools, args.seed)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"evaluation set: {result['queries']} queries over {result['tools']} tools "
          f"({result['providers']} providers: 6 reference servers, the rest generated distractors)")
    print(f"recall@5 {result['recall_at_5']:.3f}   recall@1 {result['recall_at_1']:.3f}   "
          f"MRR {result['mrr']:.3f}")
    if args.show_misses:
        for miss in result["misses"]:  # type: ignore[attr-defined]
            print(f"  miss: {miss['query']!r} -> {miss['gold']} at {miss['rank']}; top: {miss['top']}")


if __name__ == "__main__":
    main()
