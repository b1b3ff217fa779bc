"""The real-catalog search evaluation set (benchmarks/eval_search_real.py) holds together.

Its recorded servers, its queries and their gold labels, the distractors beside them and the
harness's arithmetic: a gold tool that is not in the catalog, an untagged query or a distractor
named like a real tool would make every figure it reports wrong without failing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import eval_search_real as harness  # noqa: E402  (benchmarks/ is a folder of scripts, not a package)
from search_corpus import distractors  # noqa: E402

#: The six reference servers of search_corpus.py, which this set must not contain.
REFERENCE_PACKAGES = {"@modelcontextprotocol/server-filesystem", "mcp-server-git", "mcp-server-time",
                      "mcp-server-fetch", "@modelcontextprotocol/server-memory",
                      "@modelcontextprotocol/server-everything"}


@pytest.fixture(scope="module")
def servers() -> list[dict[str, Any]]:
    return harness.load_servers()


@pytest.fixture(scope="module")
def queries() -> list[dict[str, Any]]:
    return harness.load_queries()


def test_the_servers_are_real_recordings_with_their_source(servers: list[dict[str, Any]]) -> None:
    assert len(servers) >= 40
    assert sum(len(s["tools"]) for s in servers) >= 1000
    keys = [s["key"] for s in servers]
    assert len(set(keys)) == len(keys)
    for server in servers:
        source = server["source"]
        assert source["ecosystem"] in ("npm", "pypi") and source["package"] and source["version"], server["key"]
        assert source["package"] not in REFERENCE_PACKAGES
        assert server["server"]["name"], server["key"]
        names = [tool["name"] for tool in server["tools"]]
        assert names and len(set(names)) == len(names), server["key"]
        assert all(isinstance(tool.get("inputSchema"), dict) for tool in server["tools"]), server["key"]


def test_every_query_is_tagged_and_its_gold_tools_exist(servers: list[dict[str, Any]],
                                                          queries: list[dict[str, Any]]) -> None:
    tools = {(s["key"], t["name"]) for s in servers for t in s["tools"]}
    assert len(queries) >= 250
    assert len({q["query"] for q in queries}) == len(queries), "a query is written twice"
    for query in queries:
        _assert_well_formed(query, tools)
    assert len({g.split("/", 1)[0] for q in queries for g in q["gold"]}) >= 40
    assert all(any(tag in q["tags"] for q in queries) for tag in harness.TAGS)


def _assert_well_formed(query: dict[str, Any], tools: set[tuple[str, str]]) -> None:
    """Gold tools that exist, known tags, and the tags given by the words: short, long, non-ASCII."""
    assert query["gold"], query["query"]
    assert all(tuple(g.split("/", 1)) in tools for g in query["gold"]), query
    assert query["tags"] and set(query["tags"]) <= set(harness.TAGS), query
    words = len(query["query"].split())
    assert ("short" in query["tags"]) == (words <= 6), query
    assert ("long" in query["tags"]) == (words >= 10), query
    assert ("non-ASCII" in query["tags"]) == (not query["query"].isascii()), query
    assert len(set(query["gold"])) == len(query["gold"]), query


def test_the_fresh_set_is_other_real_servers_recorded_as_the_script_lists_them(
        servers: list[dict[str, Any]]) -> None:
    import collect_real_servers as collect

    old = {s["key"] for s in servers}
    fresh = [s for s in harness.load_servers(fresh=True) if s["key"] not in old]
    assert len(fresh) >= 15
    assert sum(len(s["tools"]) for s in fresh) >= 300
    packages = {s["source"]["package"] for s in servers} | REFERENCE_PACKAGES
    listed = {server.key: server for server in collect.FRESH}
    assert {s["key"] for s in fresh} == set(listed)
    for server in fresh:
        spec = listed[server["key"]]
        assert (spec.ecosystem, spec.package, spec.version) == (
            server["source"]["ecosystem"], server["source"]["package"], server["source"]["version"])
        assert spec.package not in packages, server["key"]
        names = [tool["name"] for tool in server["tools"]]
        assert names and len(set(names)) == len(names), server["key"]
        text = (harness.FRESH_SERVERS / f"{server['key']}.json").read_text(encoding="utf-8")
        assert text.count("\n") == 1


def test_every_fresh_query_is_tagged_and_answered_by_a_fresh_server(queries: list[dict[str, Any]]) -> None:
    everything = harness.load_servers(fresh=True)
    tools = {(s["key"], t["name"]) for s in everything for t in s["tools"]}
    fresh_keys = {path.stem for path in harness.FRESH_SERVERS.glob("*.json")}
    fresh = harness.load_queries(harness.FRESH_QUERIES)
    assert len(fresh) >= 120
    assert len({q["query"] for q in fresh}) == len(fresh), "a query is written twice"
    assert not {q["query"] for q in fresh} & {q["query"] for q in queries}
    for query in fresh:
        _assert_well_formed(query, tools)
        assert any(g.split("/", 1)[0] in fresh_keys for g in query["gold"]), query
        assert len(query["gold"]) == 1 or "ambiguous" in query["tags"], query
    assert all(any(tag in q["tags"] for q in fresh) for tag in harness.TAGS)
    assert fresh_keys <= {g.split("/", 1)[0] for q in fresh for g in q["gold"]}


def test_no_distractor_is_named_like_a_real_tool(servers: list[dict[str, Any]]) -> None:
    real = {harness.tool_name(s["key"], t["name"]) for s in servers for t in s["tools"]}
    generated = [d.name for _, documents in distractors(10_000, 27, first_tenant=1) for d in documents]
    assert len(generated) == 10_000
    assert not real & set(generated)


def test_recall_and_mrr_count_the_first_gold_tool_found() -> None:
    queries = [{"query": "a", "gold": ["s/one"], "tags": ["short"]},
               {"query": "b", "gold": ["s/two", "s/three"], "tags": ["short", "ambiguous"]},
               {"query": "c", "gold": ["s/one"], "tags": ["long"]}]
    rankings = {"a": ["s_one", "s_two"], "b": ["x", "s_three", "s_two"], "c": ["x"] * 10}
    known = {"s_one", "s_two", "s_three", "x"}
    result = harness.evaluate(lambda query, limit: rankings.get(query, [])[:limit], queries, known,
                              {"s_one": "s", "s_two": "s", "s_three": "s"})
    overall = result["overall"]
    assert [o["rank"] for o in result["outcomes"]] == [1, 2, None]
    assert overall["recall_at_1"] == pytest.approx(1 / 3)
    assert overall["recall_at_5"] == overall["recall_at_10"] == pytest.approx(2 / 3)
    assert overall["mrr"] == pytest.approx((1 + 1 / 2) / 3)
    assert result["tags"]["ambiguous"]["recall_at_5"] == 1.0
    assert result["tags"]["long"]["recall_at_10"] == 0.0
    assert result["wrong_first"] == {"same server": 0, "other real server": 0, "distractor": 2, "nothing": 0}


def test_the_halves_split_by_server_and_never_change(servers: list[dict[str, Any]],
                                                      queries: list[dict[str, Any]]) -> None:
    halves = {server["key"]: harness.half_of_server(server["key"]) for server in servers}
    # The split is a hash of the key (documented in docs/search-evaluation.md): these stay put.
    assert (halves["github"], halves["gitlab"], halves["slack"]) == ("test", "dev", "test")
    assert set(halves.values()) == {"dev", "test"}
    counts = {half: sum(1 for q in queries if harness.half_of(q) == half) for half in harness.HALVES}
    assert counts == {"dev": 302, "test": 271}
    for query in queries:  # a query whose gold tools are all of one server goes with it
        keys = {gold.split("/", 1)[0] for gold in query["gold"]}
        if len(keys) == 1:
            assert harness.half_of(query) == halves[next(iter(keys))]


def test_a_gold_tool_outside_the_catalog_stops_the_evaluation() -> None:
    with pytest.raises(SystemExit, match="not in the catalog"):
        harness.evaluate(lambda query, limit: [], [{"query": "a", "gold": ["s/gone"], "tags": ["short"]}],
                         {"s_one"}, {})


def test_the_recorded_data_is_compact_json() -> None:
    for path in sorted(harness.SERVERS.glob("*.json")):
        text = path.read_text(encoding="utf-8")
        assert text.count("\n") == 1 and json.loads(text)["key"] == path.stem


def test_the_collection_script_lists_each_recorded_server_at_its_recorded_version(
        servers: list[dict[str, Any]]) -> None:
    import collect_real_servers as collect

    listed = {server.key: server for server in collect.SERVERS}
    assert {s["key"] for s in servers} == set(listed)
    for server in servers:
        spec = listed[server["key"]]
        assert (spec.ecosystem, spec.package, spec.version) == (
            server["source"]["ecosystem"], server["source"]["package"], server["source"]["version"])


class _Dense:
    """A stand-in for the semantic plugin's ranker: it knows that "utterly unrelated" means a_beta."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def update(self, changes: Any) -> None:
        self.names |= {document.name for documents in changes.values() for document in documents}

    def rank(self, query: str, limit: int, accept: Any) -> list[tuple[str, float]]:
        return [("a_beta", 1.0)] if query == "utterly unrelated" and "a_beta" in self.names else []


def test_the_semantic_stage_is_skipped_without_the_plugin_and_fused_with_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from types import ModuleType

    from mcphost.search import Document, SearchIndex

    index = SearchIndex()
    providers = [("proxy/a", [Document("a_alpha", "", "first tool"), Document("a_beta", "", "second tool")])]
    for provider, documents in providers:
        index.replace(provider, documents)
    monkeypatch.setitem(sys.modules, "mcphost_search_semantic", None)  # an import of it fails
    assert harness.semantic_stage(index, [], providers) is None

    plugin = ModuleType("mcphost_search_semantic")
    plugin.new_ranker = _Dense  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "mcphost_search_semantic", plugin)
    fused = harness.semantic_stage(index, [], providers)
    assert fused is not None
    # No document holds these words, so only the stand-in's ranking can bring a_beta.
    assert [name for name, _ in index.search("utterly unrelated", 5)] == []
    assert fused("utterly unrelated", 5) == ["a_beta"]
    assert fused("first", 5)[0] == "a_alpha"
