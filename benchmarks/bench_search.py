#!/usr/bin/env python3
"""Search cost: search latency at 10 000 and 100 000 tools, a per-provider index update, and the event
loop while the index is built in a thread.

    python benchmarks/bench_search.py [--sizes 10000,100000] [--rounds 20] [--json]

For each size, the tools of search_corpus.py (53 recorded reference tools plus generated
distractors) are indexed the way the host does it (``Views.index_sync``: one shard per provider).
The catalog's records are moved out of the garbage collector's view first (``gc.freeze``), as
``mcphost serve`` does after startup; otherwise a collection over them stalls the loop.
Then:

- search: every query of the evaluation set, ``--rounds`` times, through ``SearchIndex.search``
  with a visibility filter like the one ``search_tools`` passes (a dict lookup and a set
  membership per candidate); p50, p99 and max wall time in milliseconds, and the CPU time of the
  searching thread (on a shared machine the wall time's tail is mostly waiting for a core);
- update: one provider (an upstream of 250 tools) lists new definitions; ``index_sync`` finds
  which provider changed (one pass over the catalog's records, comparing identities) and re-indexes
  only it: the tools it indexed and the time of each step, against indexing everything;
- reload: every record is handed over again with the same definition (as ``host.reload`` does):
  nothing is re-indexed, the time is the comparison;
- loop: the whole index is built with ``Views.update_index`` (a thread) while a ticker on the event
  loop measures how late its 1 ms sleeps wake up (p99 and max lag);
- view (``--view-size``, default 200 000 tools): an endpoint whose view shows 1 000 of them; every
  query through ``SearchIndex.search`` with the view's mask (``Views.mask_for``, built once) and
  the visibility filter: p50, p99 and max;
- semantic (``--semantic``): the same searches with mcphost-search-semantic's ranker fused in, at
  the first size only (its vectors are cached on disk: the first run embeds every tool).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search_corpus import QUERIES, corpus

from mcphost.endpoints import EndpointSettings
from mcphost.kernel.views import Views
from mcphost.records import Provenance
from mcphost.search import Document

FIND = EndpointSettings(name="find", path="/mcp/find", server_name="find", discovery="search")


def _entry(provider: str, document: Document) -> Any:
    plugin, _, origin = provider.partition("/")
    schema = {"type": "object", "properties": {name: {"type": "string", "description": text}
                                               for name, text in document.params}}
    record = SimpleNamespace(name=document.name, title=None, description=document.description, input_schema=schema,
                             provenance=Provenance(plugin=plugin, origin=origin or None))
    return SimpleNamespace(record=record)


def catalog_of(total: int) -> tuple[dict[str, Any], list[tuple[str, list[Document]]]]:
    providers = corpus(total)
    tools = {document.name: _entry(provider, document) for provider, documents in providers
             for document in documents}
    return tools, providers


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def loop_lag(views: Views) -> dict[str, float]:
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            start = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - start - 0.001)

    task = asyncio.create_task(ticker())
    started = time.perf_counter()
    await views.update_index()
    built = time.perf_counter() - started
    done.set()
    await task
    return {"build_s": built, "lag_p99_ms": percentile(lags, 0.99) * 1000, "lag_max_ms": max(lags) * 1000,
            "ticks": len(lags)}


def bench(total: int, rounds: int) -> dict[str, Any]:
    tools, providers = catalog_of(total)
    catalog = SimpleNamespace(tools=tools, prompts={}, resources={}, templates={})
    gc.collect()
    gc.freeze()  # the catalog, as `mcphost serve` freezes what startup allocated
    views = Views({"find": FIND}, lambda: catalog)
    loop = asyncio.run(loop_lag(views))
    gc.collect()
    gc.freeze()  # as `mcphost serve` does after startup (the index built at startup included)
    index = views.index
    visible = set(tools)

    def accept(name: str) -> bool:
        return tools.get(name) is not None and name in visible

    timings: list[float] = []
    cpu: list[float] = []
    for query, _ in QUERIES:  # warm up
        index.search(query, 10, accept)
    for _ in range(rounds):
        for query, _ in QUERIES:
            start, start_cpu = time.perf_counter(), time.thread_time()
            index.search(query, 10, accept)
            cpu.append(time.thread_time() - start_cpu)
            timings.append(time.perf_counter() - start)

    # One upstream lists new definitions: new record objects for its tools.
    provider, documents = providers[len(providers) // 2]
    for document in documents:
        tools[document.name] = _entry(provider, Document(document.name, "", document.description + " (v2)",
                                                        document.params))
    update = views.index_sync()
    # A reload: every record handed over afresh, definitions unchanged.
    for provider_name, docs in providers:
        for document in docs:
            if tools[document.name].record.description == document.description:
                tools[document.name] = _entry(provider_name, document)
    reload = views.index_sync()
    full_start = time.perf_counter()
    fresh = Views({}, lambda: catalog)
    fresh.index_sync()
    full = time.perf_counter() - full_start
    return {
        "tools": len(index), "providers": len(providers), "searches": len(timings),
        "search_p50_ms": percentile(timings, 0.5) * 1000, "search_p99_ms": percentile(timings, 0.99) * 1000,
        "search_max_ms": max(timings) * 1000, "search_mean_ms": statistics.fmean(timings) * 1000,
        "search_cpu_p50_ms": percentile(cpu, 0.5) * 1000, "search_cpu_p99_ms": percentile(cpu, 0.99) * 1000,
        "update_tools_indexed": update["tools_indexed"], "update_providers": update["providers"],
        "update_ms": update["seconds"] * 1000, "update_scan_ms": update["scan_seconds"] * 1000,
        "update_index_ms": update["index_seconds"] * 1000, "full_index_ms": full * 1000,
        "reload_ms": reload["seconds"] * 1000, "reload_tools_indexed": reload["tools_indexed"], **loop,
    }


def timed(index: Any, rounds: int, cpu: list[float] | None = None, **options: Any) -> list[float]:
    """Wall times of every query ``rounds`` times (their CPU times into ``cpu``)."""
    timings = []
    for _ in range(rounds):
        for query, _ in QUERIES:
            start, start_cpu = time.perf_counter(), time.thread_time()
            index.search(query, 10, **options)
            if cpu is not None:
                cpu.append(time.thread_time() - start_cpu)
            timings.append(time.perf_counter() - start)
    return timings


def bench_view(total: int, rounds: int) -> dict[str, Any]:
    """An endpoint that sees 1 000 of ``total`` tools: searches with its mask."""
    tools, _ = catalog_of(total)
    catalog = SimpleNamespace(tools=tools, prompts={}, resources={}, templates={})
    views = Views({"find": FIND}, lambda: catalog)
    views.index_sync()
    gc.collect()
    gc.freeze()
    visible = frozenset(sorted(tools)[::max(1, len(tools) // 1000)][:1000])
    view = SimpleNamespace(mask=None)
    started = time.perf_counter()
    version, mask = views.mask_for(view, visible)  # type: ignore[arg-type]
    built = time.perf_counter() - started

    def accept(name: str) -> bool:
        return tools.get(name) is not None and name in visible

    for query, _ in QUERIES:
        views.index.search(query, 10, accept, mask, version)
    cpu: list[float] = []
    timings = timed(views.index, rounds, cpu, accept=accept, mask=mask, version=version)
    return {"tools": len(views.index), "visible": len(visible), "mask_ms": built * 1000,
            "search_cpu_p50_ms": percentile(cpu, 0.5) * 1000, "search_cpu_p99_ms": percentile(cpu, 0.99) * 1000,
            "search_p50_ms": percentile(timings, 0.5) * 1000, "search_p99_ms": percentile(timings, 0.99) * 1000,
            "search_max_ms": max(timings) * 1000}


def bench_semantic(total: int, rounds: int) -> dict[str, Any]:
    """Searches with mcphost-search-semantic's ranker fused in."""
    from mcphost_search_semantic import new_ranker

    from mcphost.search import SearchIndex

    dense = new_ranker()
    index = SearchIndex([dense])
    started = time.perf_counter()
    index.update(dict(corpus(total)))
    embedded = time.perf_counter() - started
    first = []
    for query, _ in QUERIES:
        start = time.perf_counter()
        index.search(query, 10)
        first.append(time.perf_counter() - start)
    cpu: list[float] = []
    timings = timed(index, rounds, cpu)
    return {"tools": len(index), "embedded": len(index), "embed_s": embedded,
            "search_cpu_p50_ms": percentile(cpu, 0.5) * 1000, "search_cpu_p99_ms": percentile(cpu, 0.99) * 1000,
            "first_p50_ms": percentile(first, 0.5) * 1000,
            "search_p50_ms": percentile(timings, 0.5) * 1000, "search_p99_ms": percentile(timings, 0.99) * 1000,
            "search_max_ms": max(timings) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--view-size", type=int, default=200_000, help="0: skip the filtered-view measure")
    parser.add_argument("--semantic", action="store_true")
    args = parser.parse_args()
    try:
        import Stemmer  # noqa: F401
        stemmer = "PyStemmer (C)"
    except ImportError:
        stemmer = "snowballstemmer (pure Python)"
    results = [bench(int(size), args.rounds) for size in args.sizes.split(",")]
    view = bench_view(args.view_size, args.rounds) if args.view_size else None
    semantic = bench_semantic(int(args.sizes.split(",")[0]), args.rounds) if args.semantic else None
    if args.json:
        print(json.dumps({"stemmer": stemmer, "results": results, "view": view, "semantic": semantic}, indent=2))
        return
    print(f"stemmer: {stemmer}")
    for r in results:
        print(f"{r['tools']:>7} tools, {r['providers']} providers:")
        print(f"  search  p50 {r['search_p50_ms']:.2f} ms  p99 {r['search_p99_ms']:.2f} ms  "
              f"max {r['search_max_ms']:.2f} ms  ({r['searches']} searches); CPU time p50 "
              f"{r['search_cpu_p50_ms']:.2f} ms  p99 {r['search_cpu_p99_ms']:.2f} ms")
        print(f"  update  one provider's list_changed re-indexed {r['update_tools_indexed']} tools "
              f"({', '.join(r['update_providers'])}) in {r['update_index_ms']:.1f} ms, after "
              f"{r['update_scan_ms']:.1f} ms finding which provider changed; indexing everything: "
              f"{r['full_index_ms']:.0f} ms")
        print(f"  reload  every record handed over again, unchanged: {r['reload_tools_indexed']} tools re-indexed, "
              f"{r['reload_ms']:.0f} ms comparing")
        print(f"  build   {r['build_s']:.2f} s in a thread; event loop lag meanwhile p99 {r['lag_p99_ms']:.1f} ms, "
              f"max {r['lag_max_ms']:.1f} ms ({r['ticks']} ticks)")
    if view:
        print(f"{view['tools']:>7} tools, a view of {view['visible']}: search p50 {view['search_p50_ms']:.2f} ms  "
              f"p99 {view['search_p99_ms']:.2f} ms  max {view['search_max_ms']:.2f} ms; CPU time p50 "
              f"{view['search_cpu_p50_ms']:.2f} ms  p99 {view['search_cpu_p99_ms']:.2f} ms; the view's mask built "
              f"once in {view['mask_ms']:.0f} ms")
    if semantic:
        print(f"{semantic['tools']:>7} tools with the semantic ranker: search p50 {semantic['search_p50_ms']:.2f} ms  "
              f"p99 {semantic['search_p99_ms']:.2f} ms  max {semantic['search_max_ms']:.2f} ms; CPU time p99 "
              f"{semantic['search_cpu_p99_ms']:.2f} ms (queries embedded "
              f"once each, then remembered: first-time p50 {semantic['first_p50_ms']:.1f} ms); embedding "
              f"{semantic['embedded']} tools took {semantic['embed_s']:.0f} s")


if __name__ == "__main__":
    main()
