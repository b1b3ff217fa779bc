"""The tool-search evaluation set: real tool listings, generated distractors, natural-language queries.

- Real tools: the 53 tools of six reference MCP servers (filesystem, git, time, fetch, memory,
  everything), recorded with their source in ``data/official_tools.json``.
- Distractors: tools of made-up but realistic services (issue trackers, CRMs, cloud storage, chat,
  calendars, databases...), generated from services x resources x verbs with templated descriptions
  and parameters, deterministic for a seed. They share the real tools' vocabulary on purpose
  (``create_drive_folder``, ``list_bucket_files``, ``search_mail_messages``, ``get_repo_commit``),
  so a query has to be matched on meaning, not on one rare word. Each service is mounted once per
  tenant with a prefix (``acme_jira_create_issue``), as a gateway mounting one server per customer
  would: that is how the corpus grows to 100 000 tools. One service instance is one provider.
- Queries: how a person or a model asks for each real tool ("which files did I change", "make a
  folder"), one gold tool each.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

from mcphost.search import Document

DATA = Path(__file__).resolve().parent / "data" / "official_tools.json"

#: (query, the tool that answers it).
QUERIES: tuple[tuple[str, str], ...] = (
    # filesystem
    ("make a folder", "create_directory"),
    ("create a new directory called build", "create_directory"),
    ("show me what's in this directory", "list_directory"),
    ("read the contents of config.yaml", "read_text_file"),
    ("open a picture file and show it", "read_media_file"),
    ("save this text to a file", "write_file"),
    ("rename report.txt to final.txt", "move_file"),
    ("find all python files under src", "search_files"),
    ("how big is this file and when was it last modified", "get_file_info"),
    ("which folders am I allowed to access", "list_allowed_directories"),
    ("replace a line of text in a file", "edit_file"),
    ("show the folder hierarchy as a tree", "directory_tree"),
    ("list the files with their sizes", "list_directory_with_sizes"),
    ("read several files at once", "read_multiple_files"),
    # git
    ("which files did I change", "git_status"),
    ("what changes are staged for the next commit", "git_diff_staged"),
    ("commit my changes with a message", "git_commit"),
    ("stage these files for commit", "git_add"),
    ("unstage everything I staged", "git_reset"),
    ("show the recent commit history", "git_log"),
    ("what was committed in the last two weeks", "git_log"),
    ("start a new branch for this feature", "git_create_branch"),
    ("switch to the main branch", "git_checkout"),
    ("what did commit abc123 change", "git_show"),
    ("list all remote branches", "git_branch"),
    ("compare my branch with main", "git_diff"),
    ("sign my commit with gpg", "git_commit_signed"),
    ("show the edits I haven't staged yet", "git_diff_unstaged"),
    # time
    ("what time is it in Tokyo", "get_current_time"),
    ("convert 3pm New York time to London time", "convert_time"),
    ("current time in my timezone", "get_current_time"),
    # fetch
    ("download this web page as markdown", "fetch"),
    ("get the contents of https://example.com", "fetch"),
    ("read an article from a url", "fetch"),
    # memory
    ("remember a new person named Alice in the knowledge graph", "create_entities"),
    ("record that Alice works at Acme as a relation between them", "create_relations"),
    ("add a fact to what you remember about Bob", "add_observations"),
    ("forget the entity Bob and its relations", "delete_entities"),
    ("show the whole knowledge graph", "read_graph"),
    ("look up what you remember about Paris", "search_nodes"),
    ("remove the relationship between two entities", "delete_relations"),
    ("delete an observation attached to an entity", "delete_observations"),
    ("retrieve the memory nodes named Alice and Bob", "open_nodes"),
    # everything
    ("repeat my message back to me", "echo"),
    ("add two numbers together", "get-sum"),
    ("read an environment variable", "get-env"),
    ("run a long operation that reports progress", "trigger-long-running-operation"),
    ("ask the client's model to generate text from a prompt", "trigger-sampling-request"),
    ("turn simulated logging on", "toggle-simulated-logging"),
    ("compress a file with gzip", "gzip-file-as-resource"),
    ("send me a tiny image", "get-tiny-image"),
    ("which roots did the client send", "get-roots-list"),
)

SERVICES = (
    ("jira", "Jira"), ("linear", "Linear"), ("github", "GitHub"), ("gitlab", "GitLab"), ("slack", "Slack"),
    ("teams", "Microsoft Teams"), ("mail", "Gmail"), ("outlook", "Outlook"), ("drive", "Google Drive"),
    ("dropbox", "Dropbox"), ("s3", "Amazon S3"), ("box", "Box"), ("notion", "Notion"),
    ("confluence", "Confluence"), ("salesforce", "Salesforce"), ("hubspot", "HubSpot"), ("zendesk", "Zendesk"),
    ("stripe", "Stripe"), ("shopify", "Shopify"), ("calendar", "Google Calendar"), ("postgres", "PostgreSQL"),
    ("mongo", "MongoDB"), ("k8s", "Kubernetes"), ("docker", "Docker"), ("ec2", "Amazon EC2"),
    ("twilio", "Twilio"), ("trello", "Trello"), ("asana", "Asana"), ("figma", "Figma"),
    ("spotify", "Spotify"), ("weather", "OpenWeather"), ("maps", "Google Maps"), ("translate", "DeepL"),
    ("youtube", "YouTube"), ("sheets", "Google Sheets"), ("airtable", "Airtable"), ("datadog", "Datadog"),
    ("sentry", "Sentry"), ("pagerduty", "PagerDuty"), ("bitbucket", "Bitbucket"),
)
RESOURCES = (
    "issue", "ticket", "message", "channel", "file", "folder", "document", "page", "record", "contact",
    "deal", "invoice", "payment", "order", "product", "event", "meeting", "table", "row", "bucket",
    "object", "pod", "container", "repo", "pull_request", "commit", "user", "team", "project", "task",
    "comment", "report", "dashboard", "image", "video", "playlist", "forecast", "route", "alert", "incident",
)
VERBS = (
    ("create", "Create a new {r} in {s}"), ("get", "Get one {r} from {s} by its id"),
    ("list", "List the {r}s of a {s} workspace"), ("update", "Update the fields of an existing {s} {r}"),
    ("delete", "Delete a {r} from {s} permanently"), ("search", "Search {s} {r}s matching a text query"),
    ("archive", "Archive a {s} {r} so it no longer shows up"), ("export", "Export {s} {r}s as CSV or JSON"),
    ("share", "Share a {s} {r} with other people"), ("move", "Move a {s} {r} to another location"),
    ("copy", "Copy a {s} {r}"), ("count", "Count the {r}s in {s}"), ("assign", "Assign a {s} {r} to a user"),
    ("close", "Close a {s} {r}"), ("comment", "Add a comment to a {s} {r}"), ("approve", "Approve a pending {s} {r}"),
    ("watch", "Get notified when a {s} {r} changes"), ("restore", "Restore a deleted {s} {r}"),
)
EXTRA = (
    "Returns the {r} as JSON.", "Requires an API token with access to the workspace.",
    "Results are paginated; pass the cursor to get more.", "Changes are applied immediately.",
    "Only {r}s the caller can access are included.", "Useful for automation and reporting.", "",
)
TENANTS = ("acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka", "tyrell", "cyberdyne",
           "soylent", "vandelay", "pied", "oscorp", "aperture", "monarch", "gringotts", "duff", "krusty", "ollivander",
           "nakatomi", "zorg", "weyland", "massive", "dunder")


def real_tools() -> dict[str, list[Document]]:
    """The recorded tools, by server."""
    data = json.loads(DATA.read_text(encoding="utf-8"))
    return {server: [Document(t["name"], "", t["description"], tuple((p[0], p[1]) for p in t["params"]))
                     for t in tools]
            for server, tools in data["servers"].items()}


def _service_tools(prefix: str, key: str, label: str, rng: random.Random, count: int) -> list[Document]:
    combos = [(verb, template, resource) for verb, template in VERBS for resource in RESOURCES]
    rng.shuffle(combos)
    tools = []
    for verb, template, resource in combos[:count]:
        noun = resource.replace("_", " ")
        description = template.format(r=noun, s=label) + ". " + rng.choice(EXTRA).format(r=noun)
        params = [("workspace", f"The {label} workspace or account to use")]
        if verb in ("get", "update", "delete", "archive", "share", "move", "copy", "assign", "close", "comment",
                    "approve", "watch", "restore"):
            params.append((f"{resource}_id", f"The id of the {noun}"))
        if verb in ("search", "list", "export", "count"):
            params.append(("query", f"Text to filter {noun}s by"))
            params.append(("limit", "Maximum number of results"))
        if verb in ("create", "update"):
            params.append(("fields", f"The {noun}'s fields as an object"))
        if verb == "move":
            params.append(("destination", "Where to move it"))
        tools.append(Document(f"{prefix}{key}_{verb}_{resource}", "", description, tuple(params)))
    return tools


def distractors(total: int, seed: int = 27, per_service: int = 250, first_tenant: int = 0
                ) -> Iterator[tuple[str, list[Document]]]:
    """``total`` generated tools as (provider, tools) pairs, ``per_service`` per service instance.

    Tenant 0 mounts each service without a prefix (``github_create_issue``); ``first_tenant=1``
    starts at the first prefixed tenant (``globex1_github_create_issue``), for an evaluation whose
    real servers are mounted as ``github_...`` and must not share a name with a distractor.
    """
    rng = random.Random(seed)
    made = 0
    for tenant_index in range(first_tenant, 10_000):
        for key, label in SERVICES:
            if made >= total:
                return
            prefix = "" if tenant_index == 0 else f"{TENANTS[tenant_index % len(TENANTS)]}{tenant_index}_"
            count = min(per_service, total - made)
            yield f"proxy/{prefix}{key}", _service_tools(prefix, key, label, rng, count)
            made += count


def corpus(total: int, seed: int = 27) -> list[tuple[str, list[Document]]]:
    """Real tools (one provider per server) plus distractors up to ``total`` tools in all."""
    providers: list[tuple[str, list[Document]]] = [(f"proxy/{server}", tools)
                                                   for server, tools in real_tools().items()]
    real = sum(len(tools) for _, tools in providers)
    providers.extend(distractors(max(0, total - real), seed))
    return providers
