"""The tool search index (mcphost.search) and its upkeep per provider (Views.index_sync)."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

from mcphost.kernel.views import Views
from mcphost.records import Provenance
from mcphost.search import Document, SearchIndex, index_of, query_terms, stems

FS = [
    Document("create_directory", "", "Create a new directory or ensure it exists.", (("path", ""),)),
    Document("list_directory", "", "List directory contents with [FILE] or [DIR] prefixes", (("path", ""),)),
    Document("read_text_file", "", "Read complete contents of a file as text.",
             (("path", ""), ("head", "First N lines"))),
]
GIT = [
    Document("git_status", "", "Shows the working tree status", (("repo_path", "Path to Git repository"),)),
    Document("git_log", "", "Shows the commit logs", (("repo_path", "Path to Git repository"),
                                                       ("max_count", "Maximum number of commits to show"))),
]
CRM = [Document(f"crm_{verb}_{thing}", "", f"{verb.title()} a {thing} in the CRM.",
                (("workspace", "The CRM workspace"), (f"{thing}_id", f"The id of the {thing}")))
       for verb in ("create", "get", "list", "delete", "update") for thing in ("contact", "deal", "note", "file")]


def names(found: list[tuple[str, float]]) -> list[str]:
    return [name for name, _ in found]


def test_words_are_split_folded_and_stemmed():
    assert stems("listDirectory_with-sizes files") == ["list", "directori", "listdirectori", "size", "file"]
    terms = query_terms("make a folder")
    assert terms == {"make": 1.0, "folder": 1.0}  # no hand-made table of variants widens a query
    assert query_terms("the a of") == {}


def test_a_query_in_other_words_finds_the_tool():
    index = index_of([("fs", d) for d in FS] + [("git", d) for d in GIT] + [("crm", d) for d in CRM])
    assert names(index.search("create a new directory", 3))[0] == "create_directory"
    assert names(index.search("show me the commit history", 3))[0] == "git_log"
    assert names(index.search("read the text of a file", 3))[0] == "read_text_file"
    assert index.search("zebra", 5) == []
    assert len(names(index.search("create", 4))) == 4


def test_updating_one_provider_gives_the_index_built_from_scratch():
    index = index_of([("fs", d) for d in FS] + [("git", d) for d in GIT] + [("crm", d) for d in CRM])
    changed = [Document("git_status", "", "Shows which files changed in the working tree", GIT[0].params),
               Document("git_branch", "", "List Git branches", GIT[0].params)]
    index.replace("git", changed)
    fresh = index_of([("fs", d) for d in FS] + [("git", d) for d in changed] + [("crm", d) for d in CRM])
    assert len(index) == len(fresh) == len(FS) + len(changed) + len(CRM)
    for query in ("which files changed", "list branches", "commit logs", "create a contact", "directory"):
        got, want = index.search(query, 10), fresh.search(query, 10)
        assert names(got) == names(want), query
        assert all(math.isclose(a, b) for (_, a), (_, b) in zip(got, want, strict=True))
    assert "git_log" not in names(index.search("commit logs", 10))
    index.replace("git", [])  # the provider is gone
    assert all(not name.startswith("git_") for name in names(index.search("git repository status", 10)))


def test_accept_filters_before_the_limit():
    index = index_of([("crm", d) for d in CRM])
    everything = names(index.search("contact", 20))
    hidden = set(everything[:-1])  # all but the weakest match
    found = names(index.search("contact", 2, accept=lambda name: name not in hidden))
    assert found == [everything[-1]]
    assert index.search("contact", 3, accept=lambda name: False) == []


def test_many_updates_renumber_and_stay_correct():
    index = SearchIndex()
    for round_ in range(60):
        index.update({"crm": CRM, "fs": FS if round_ % 2 else []})
    assert len(index) == len(CRM) + len(FS)
    assert names(index.search("create a directory", 1)) == ["create_directory"]
    assert len(index._state.names) <= 2 * len(index) + 1024  # removed numbers were reclaimed


def entry(name: str, provider: str, origin: str | None = None, description: str = "") -> Any:
    record = SimpleNamespace(name=name, title=None, description=description or f"The {name} tool",
                             input_schema={"type": "object", "properties": {"path": {"description": "A path"}}},
                             provenance=Provenance(plugin=provider, origin=origin))
    return SimpleNamespace(record=record)


def test_index_sync_reindexes_only_the_provider_that_changed():
    tools = {f"a{i}": entry(f"a{i}", "proxy", "alpha") for i in range(30)}
    tools.update({f"b{i}": entry(f"b{i}", "proxy", "beta") for i in range(20)})
    tools["local"] = entry("local", "demo")
    catalog = SimpleNamespace(tools=tools)
    views = Views({}, lambda: catalog)
    first = views.index_sync()
    assert first["tools_indexed"] == 51 and first["providers"] == ["demo", "proxy/alpha", "proxy/beta"]
    assert views.index_sync()["tools_indexed"] == 0  # nothing changed
    tools.update({name: entry(name, "proxy", "alpha") for name in list(tools) if name.startswith("a")})
    assert views.index_sync()["tools_indexed"] == 0  # new records, the same definitions (a reload)
    tools["b3"] = entry("b3", "proxy", "beta", "Now it reads meters")  # beta re-listed one tool
    update = views.index_sync()
    assert update["providers"] == ["proxy/beta"] and update["tools_indexed"] == 20
    assert names(views.index.search("read meters", 1)) == ["b3"]
    del tools["a0"]  # alpha dropped a tool
    tools["a1"] = entry("a1", "proxy", "beta")  # and one moved to beta
    update = views.index_sync()
    assert update["providers"] == ["proxy/alpha", "proxy/beta"] and update["tools_indexed"] == 28 + 21
    assert len(views.index) == 50
    for name in [n for n in tools if n.startswith("b")]:
        del tools[name]
    tools.pop("a1")
    update = views.index_sync()
    assert update["providers"] == ["proxy/beta"] and update["tools_indexed"] == 0
    assert len(views.index) == 29
