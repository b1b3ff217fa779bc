#!/usr/bin/env python3
"""How long the semantic plugin takes to embed a catalog: the eval set's 12 209 tools, from nothing.

    python benchmarks/bench_semantic_embed.py [--tools N] [--threads T] [--cache FILE] [--json]

The tools of ``eval_search_real.py`` (2 209 real ones and distractors up to ``--tools``; default
10 000 distractors) are handed to a ``SemanticRanker`` with an empty cache (a fresh file unless
``--cache`` names one; an existing file there is removed first), as the search index hands them
over, and embedded in the ranker's own threads (``background=False``: ``update`` returns when every
tool is embedded). Reported: wall seconds, this process's CPU seconds, the texts and their tokens,
the threads, and the machine's load average at the start (a busy machine stretches the wall time).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import eval_search_real


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tools", type=int, default=None, help="tools in all (default: real + 10 000)")
    parser.add_argument("--threads", type=int, default=None, help="embedding threads (default: one per CPU)")
    parser.add_argument("--cache", type=Path, default=None, help="cache file to fill (default: a temporary one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from mcphost_search_semantic import load_model
    from mcphost_search_semantic.ranker import SemanticRanker, default_threads, text_of

    _, _, providers = eval_search_real.build(args.tools, 27)
    texts = {text_of(document) for _, documents in providers for document in documents}
    model = load_model()  # loaded before the clock starts (the host loads it once, off the loop)
    tokens = sum(model.lengths(sorted(texts)))
    with tempfile.TemporaryDirectory() as work:
        cache = args.cache or Path(work) / "vectors.npz"
        cache.unlink(missing_ok=True)
        ranker = SemanticRanker(lambda: model, cache, background=False, threads=args.threads)
        load = os.getloadavg()[0]
        started, cpu = time.perf_counter(), cpu_seconds()
        ranker.update(dict(providers))
        wall, cpu = time.perf_counter() - started, cpu_seconds() - cpu
        ranked = len(ranker.rank("list my open pull requests", 5, None))
    result = {"texts": len(texts), "tokens": tokens, "threads": args.threads or default_threads(),
              "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "load_average": round(load, 1),
              "texts_per_cpu_s": round(len(texts) / cpu, 1), "ranked": ranked}
    if args.json:
        print(json.dumps(result))
        return
    print(f"{result['texts']} tool texts ({tokens} tokens), {result['threads']} threads, load average "
          f"{result['load_average']}: {result['wall_s']} s wall, {result['cpu_s']} s CPU "
          f"({result['texts_per_cpu_s']} texts per CPU second)")


if __name__ == "__main__":
    main()
