"""What the tool search understands without a vocabulary of its own (Unicode, camelCase, typos,
read/write intent, provider context), the view mask, the ranker hook, made instructions and the
bounds on a query (mcphost.search, mcphost.kernel.search)."""

from __future__ import annotations

from typing import Any

import numpy as np

import mcphost
from mcphost.records import Provenance
from mcphost.search import (
    Document,
    Provider,
    SearchIndex,
    action_of,
    action_of_query,
    fold,
    fuse_scores,
    index_of,
    intent_of,
    intent_of_query,
    words,
)
from mcphost.sessions.session import Connection
from mcphost.testing import MemoryClient, make_host

GIT = [  # the git reference server's wording
    Document("git_commit", "", "Records changes to the repository", (("repo_path", ""), ("message", "Commit message"))),
    Document("git_log", "", "Shows the commit logs", (("repo_path", ""), ("max_count", "Maximum number of commits"))),
    Document("git_show", "", "Shows the contents of a commit", (("repo_path", ""), ("revision", ""))),
    Document("git_add", "", "Adds file contents to the staging area", (("repo_path", ""), ("files", ""))),
]


#: "Sales report for 2024" and "sales report" (the diaeresis folded away), in Cyrillic.
RUSSIAN = ("\u041e\u0442\u0447\u0451\u0442 \u043e \u043f\u0440\u043e\u0434\u0430\u0436\u0430\u0445 "
           "\u0437\u0430 2024 \u0433\u043e\u0434")
RUSSIAN_QUERY = "\u043e\u0442\u0447\u0435\u0442 \u043e \u043f\u0440\u043e\u0434\u0430\u0436\u0430\u0445"


def names(found: list[tuple[str, float]]) -> list[str]:
    return [name for name, _ in found]


def test_a_read_question_ranks_the_read_tool_above_the_write_tool():
    index = index_of([("git", d) for d in GIT])
    assert intent_of_query("show the last commit") == intent_of(GIT[1]) == 1
    assert intent_of(GIT[0]) == 2  # the verb in its name: it writes
    found = names(index.search("show the last commit", 4))
    assert found.index("git_log") < found.index("git_commit")
    assert found.index("git_show") < found.index("git_commit")
    assert names(index.search("commit my staged changes", 1)) == ["git_commit"]


def test_a_request_to_create_prefers_the_tool_that_creates_to_those_that_change_or_delete(monkeypatch: Any):
    import mcphost.search

    tasks = [Document("tasks_delete_task", "", "Delete a task"), Document("tasks_update_task", "", "Update a task"),
             Document("tasks_create_task", "", "Create a task in a project, with its name, notes and due date")]
    assert [action_of(d) for d in tasks] == [3, 2, 1]
    assert action_of_query("new task: renew passport") == 1
    assert action_of_query("show what I changed") == 0  # a read question first
    index = index_of([("t", d) for d in tasks])
    assert names(index.search("new task: renew passport", 1)) == ["tasks_create_task"]
    assert names(index.search("remove the task", 1)) == ["tasks_delete_task"]
    monkeypatch.setattr(mcphost.search, "OTHER_ACTION", 1.0)  # by words alone, the short names win
    assert names(index.search("new task: renew passport", 1)) != ["tasks_create_task"]


def test_a_query_that_holds_a_tools_whole_name_prefers_it(monkeypatch: Any) -> None:
    import mcphost.search

    tools = [Document("tickets_create_issue", "", "Opens a ticket in the tracker"),
             Document("tickets_issue_attachment_create", "", "Create an attachment on an issue: the issue gets a "
                      "new attachment")]
    index = index_of([("t", d) for d in tools])
    assert names(index.search("create an issue", 2)) == ["tickets_create_issue", "tickets_issue_attachment_create"]
    monkeypatch.setattr(mcphost.search, "NAME_COVERAGE", 0.0)  # by words alone, the longer description wins
    assert names(index.search("create an issue", 2)) == ["tickets_issue_attachment_create", "tickets_create_issue"]


def test_annotations_say_what_a_tool_does_before_its_words():
    reader = Document("entry", "", "The entry for an id", read_only=True)
    writer = Document("entry_put", "", "The entry for an id", destructive=True)
    assert intent_of(reader) == 1 and intent_of(writer) == 2
    index = index_of([("a", reader), ("b", writer)])
    assert names(index.search("what is the entry for id 7", 2)) == ["entry", "entry_put"]
    assert names(index.search("delete the entry for id 7", 2)) == ["entry_put", "entry"]


def test_unicode_words_are_folded_not_dropped():
    assert fold("Zürich") == "zurich" and fold("Łódź") == "lodz" and fold("São") == "sao"
    assert words("Größe der Datei") == ["grosse", "der", "datei"]
    assert words("Привет мир") == ["привет", "мир"]
    assert set(words("東京の天気")) >= {"東", "京", "東京", "天気"}
    index = index_of([("w", Document("weather_zurich", "", "Wetter in Zürich")),
                      ("w", Document("weather_lodz", "", "Pogoda w Łódź")),
                      ("w", Document("weather_sp", "", "Previsão do tempo em São Paulo")),
                      ("w", Document("tokyo_weather", "東京の天気", "今日の天気予報")),
                      ("w", Document("ru_report", "", RUSSIAN))])
    for query, tool in [("Zurich", "weather_zurich"), ("zürich", "weather_zurich"), ("LODZ", "weather_lodz"),
                        ("Łódź", "weather_lodz"), ("sao paulo", "weather_sp"), ("東京の天気は", "tokyo_weather"),
                        (RUSSIAN_QUERY, "ru_report"), ("Bericht 2024", "ru_report")]:
        assert names(index.search(query, 1)) == [tool], query


def test_a_product_named_in_camel_case_meets_its_prefix():
    index = index_of([("ci", Document("circleci_trigger_pipeline", "", "Trigger a pipeline for a branch")),
                      ("ci", Document("circleci_get_branch_status", "", "Status of a branch's pipeline")),
                      ("gh", Document("github_create_pull_request", "", "Create a pull request")),
                      ("gh", Document("getGitHubRepo", "", "A repository"))])
    found = names(index.search("propose my branch for review on GitHub", 4))
    assert found.index("github_create_pull_request") < found.index("circleci_trigger_pipeline")
    assert "getGitHubRepo" in names(index.search("github repository", 2))


def test_a_word_one_edit_away_still_finds_the_tool():
    index = index_of([("fs", Document("list_directory", "", "List the entries of a directory")),
                      ("fs", Document("read_file", "", "Read a file's contents"))])
    assert names(index.search("lsit the directry", 1)) == ["list_directory"]
    assert names(index.search("raed a fiel", 1)) == ["read_file"]


def test_a_typo_is_looked_for_from_the_word_as_written_as_well_as_from_its_stem():
    # "calender" and "proces" stem to "calend" and "proce", two edits from the stems the tools have
    # ("calendar", "process"); the words as written are one edit from them.
    index = index_of([("c", Document("list_events", "", "List the events of a calendar")),
                      ("c", Document("kill_process", "", "Terminate a running process by its id")),
                      ("c", Document("list_mail", "", "List the messages of a mailbox"))])
    assert names(index.search("my calender", 1)) == ["list_events"]
    assert names(index.search("end the proces 1234", 1)) == ["kill_process"]


def test_a_long_word_two_edits_away_still_finds_the_tool():
    # "kalender" is two substitutions from "calendar"; a short word two edits away is not matched.
    index = index_of([("c", Document("list_events", "", "List the events of a calendar")),
                      ("c", Document("list_mail", "", "List the messages of a mailbox"))])
    assert names(index.search("kalender", 1)) == ["list_events"]
    assert index.search("kolendur", 1) == []  # three edits
    assert index.search("maxe", 1) == []  # two edits from "mail", but a short word


def test_a_cyrillic_or_greek_word_meets_its_latin_transliteration():
    index = index_of([("git", Document("git_commit", "", "Records changes to the repository")),
                      ("git", Document("git_status", "", "Shows the working tree status")),
                      ("k", Document("kafka_list_topics", "", "List the topics of a Kafka cluster"))])
    # "коммит" -> "kommit", one edit from "commit"; "статус" -> "status" exactly; Greek "κάφκα" -> "kafka".
    assert names(index.search("\u043a\u043e\u043c\u043c\u0438\u0442", 1)) == ["git_commit"]
    assert names(index.search("\u0441\u0442\u0430\u0442\u0443\u0441", 1)) == ["git_status"]
    assert names(index.search("\u03ba\u03ac\u03c6\u03ba\u03b1", 1)) == ["kafka_list_topics"]


def test_the_provider_named_in_a_query_decides():
    index = SearchIndex()
    issue = Document("create_issue", "", "Create an issue in a project", (("title", ""), ("body", "")))
    other = Document("new_issue", "", "Create an issue in a project", (("title", ""), ("body", "")))
    index.update({"proxy/gitlab": [issue], "proxy/github": [other]},
                 {"proxy/gitlab": Provider("gitlab", "GitLab", "Projects, merge requests and CI on GitLab"),
                  "proxy/github": Provider("github", "GitHub")})
    assert names(index.search("open a GitLab issue", 1)) == ["create_issue"]
    assert names(index.search("open a GitHub issue", 1)) == ["new_issue"]
    assert names(index.search("merge requests", 1)) == ["create_issue"]  # its instructions count too


def test_a_mask_drops_hidden_tools_before_ranking():
    documents = [("p", Document(f"tool_{i}", "", f"Report number {i} about sales")) for i in range(5000)]
    index = index_of(documents)
    visible = {"tool_4321", "tool_17"}
    mask = index.mask_of(visible.__contains__)
    assert int(np.count_nonzero(mask)) == 2
    found = names(index.search("sales report", 10, mask=mask, version=index.version))
    assert sorted(found) == ["tool_17", "tool_4321"]
    index.replace("q", [Document("other", "", "sales")])
    # A mask made for another version of the index is not used (no stale view): the accept filter decides.
    assert "other" in names(index.search("sales", 10, mask=mask, version=object()))


class Echo:
    """A ranker that knows one thing the words do not say."""

    def __init__(self) -> None:
        self.seen: dict[str, list[str]] = {}

    def update(self, changes: Any) -> None:
        for provider, documents in changes.items():
            self.seen[provider] = [d.name for d in documents]

    def rank(self, query: str, limit: int, accept: Any) -> list[tuple[str, float]]:
        if "folder" in query:
            return [(name, 1.0) for name in ("create_directory",) if accept is None or accept(name)]
        return []


def test_a_ranker_is_told_of_changes_and_fused():
    ranker = Echo()
    index = index_of([("fs", Document("create_directory", "", "Create a new directory")),
                      ("fs", Document("folder_colour", "", "The colour of a folder icon")),
                      ("fs", Document("read_file", "", "Read a file"))], rankers=[ranker])
    assert ranker.seen == {"fs": ["create_directory", "folder_colour", "read_file"]}
    assert names(index.search("make a folder", 2))[0] == "create_directory"
    assert names(index.search("make a folder", 2, accept=lambda n: n != "create_directory")) == ["folder_colour"]


def test_fusion_by_scores_keeps_a_clear_lead_and_counts_agreement():
    lexical = [("exact", 9.0), ("partial", 3.0), ("weak", 1.0)]
    dense = [("close", 0.62), ("exact", 0.60), ("partial", 0.59), ("far", 0.20)]
    # "exact" leads the words by far and is nearly the dense ranking's first: it stays first (by
    # reciprocal rank fusion "close", first by a hair among the vectors, would come near it).
    fused = fuse_scores(lexical, [dense], 4)
    assert [name for name, _ in fused][:2] == ["exact", "partial"]
    assert 0.0 <= fused[-1][1] <= fused[0][1] <= 1.0
    assert [name for name, _ in fuse_scores(lexical, [], 2)] == ["exact", "partial"]  # no ranker: the words
    assert fuse_scores([], [[("only", 0.5)]], 1) == [("only", 0.5)]  # nothing lexical: the ranker's (halved)


class Broken:
    def update(self, changes: Any) -> None:
        raise RuntimeError("no model")

    def rank(self, query: str, limit: int, accept: Any) -> list[tuple[str, float]]:
        raise RuntimeError("no model")


def test_a_failing_ranker_leaves_the_lexical_ranking():
    index = index_of([("fs", Document("read_file", "", "Read a file"))], rankers=[Broken()])
    assert names(index.search("read a file", 1)) == ["read_file"]


class Tools:
    @mcphost.hookimpl
    def mcphost_tools(self, host: Any) -> list[mcphost.Tool]:
        made = []
        specs = [("git_log", "Shows the commit logs"), ("git_commit", "Records changes to the repository"),
                 ("zurich_weather", "Weather in Zürich")] + [(f"filler_{i}", f"Filler {i}") for i in range(3000)]
        for name, text in specs:
            async def run(text: str = "") -> str:
                return text
            made.append(mcphost.tool(name=name, description=text)(run))
        return made


class Rankers:
    def __init__(self) -> None:
        self.ranker = Echo()

    @mcphost.hookimpl
    def mcphost_search_rankers(self, host: Any) -> list[Any]:
        return [self.ranker]


def client(host: Any, endpoint: str) -> MemoryClient:
    return MemoryClient(host, connection=Connection(transport="memory", endpoint=endpoint))


async def test_search_endpoint_bounds_queries_makes_instructions_and_uses_rankers():
    rankers = Rankers()
    config = {"endpoints": {"find": {"discovery": "search", "search_max_query": 64},
                            "told": {"discovery": "search", "instructions": "Ask me."},
                            "few": {"discovery": "search", "include": {"tools": ["git_*"]}}}}
    host = make_host(Tools(), rankers, config=config)
    async with client(host, "find") as find, client(host, "told") as told, client(host, "few") as few:
        made = find.initialize_result["instructions"]
        assert "3003 tools" in made and "search_tools" in made and "call_tool" in made
        assert told.initialize_result["instructions"] == "Ask me."
        assert "2 tools" in few.initialize_result["instructions"]
        long = await find.call_tool("search_tools", {"query": "x" * 65})
        assert long["isError"] and "longer than 64 bytes" in long["content"][0]["text"]
        wide = await find.call_tool("search_tools", {"query": "ü" * 33})  # 66 bytes of UTF-8
        assert wide["isError"]
        found = await find.call_tool("search_tools", {"query": "show the last commit", "limit": 2})
        assert found["structuredContent"]["tools"][0]["name"] == "git_log"
        found = await find.call_tool("search_tools", {"query": "weather in Zurich", "limit": 1})
        assert [t["name"] for t in found["structuredContent"]["tools"]] == ["zurich_weather"]
        # The view is applied before ranking: the few endpoint never sees the fillers.
        found = await few.call_tool("search_tools", {"query": "filler 12 commit", "limit": 5})
        assert {t["name"] for t in found["structuredContent"]["tools"]} <= {"git_log", "git_commit"}
    assert sum(len(v) for v in rankers.ranker.seen.values()) == 3003  # the ranker was told of the catalog


async def test_an_upstream_relisting_its_tools_is_seen_by_the_next_search_and_reindexes_only_it():
    host = make_host(Tools(), config={"endpoints": {"find": {"discovery": "search"}}})

    def tool(name: str, description: str) -> tuple[str, Any]:
        async def run() -> str:
            return name
        return ("tools", mcphost.tool(name=name, description=description)(run))

    async with client(host, "find") as find:
        await host.replace_provider(Provenance(plugin="proxy", origin="alpha"),
                                    [tool("alpha_meter", "Read the gas meter")])
        await host.replace_provider(Provenance(plugin="proxy", origin="beta"),
                                    [tool("beta_lamp", "Switch a lamp on or off")])
        found = await find.call_tool("search_tools", {"query": "read the gas meter", "limit": 1})
        assert [t["name"] for t in found["structuredContent"]["tools"]] == ["alpha_meter"]
        index = host.kernel.views.index
        indexed: list[dict[str, list[str]]] = []
        update = index.update

        def recording(changes: Any, providers: Any = None) -> None:
            indexed.append({provider: [d.name for d in documents] for provider, documents in changes.items()})
            update(changes, providers)

        index.update = recording  # type: ignore[method-assign]
        await host.replace_provider(Provenance(plugin="proxy", origin="alpha"),
                                    [tool("alpha_thermostat", "Set the heating temperature")])
        found = await find.call_tool("search_tools", {"query": "heating temperature", "limit": 1})
        assert [t["name"] for t in found["structuredContent"]["tools"]] == ["alpha_thermostat"]
        found = await find.call_tool("search_tools", {"query": "read the gas meter", "limit": 3})
        assert "alpha_meter" not in [t["name"] for t in found["structuredContent"]["tools"]]
        assert indexed == [{"proxy/alpha": ["alpha_thermostat"]}]  # beta and the 3 003 others untouched
