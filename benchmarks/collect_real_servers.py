#!/usr/bin/env python3
"""Record the tool listings of real MCP servers for the search evaluation (eval_search_real.py).

    python benchmarks/collect_real_servers.py [--only KEY ...] [--jobs 3] [--timeout 90]
                                              [--root /tmp/mcpsrv] [--force] [--fresh]

Each server below is a published package, installed outside the repository (npm packages with
``npm install --prefix ROOT/KEY``, PyPI packages in a virtualenv ROOT/KEY made by ``uv``), started over
stdio with dummy credentials where it asks for some, and listed with the official MCP Python SDK
client (``stdio_client`` + ``ClientSession``): initialize, then every page of ``tools/list``. What is
recorded, one compact JSON file per server in ``data/real_servers/KEY.json``: the package and its
installed version (the source), the server's name, title, version and instructions from initialize,
and each tool's name, title, description, inputSchema, outputSchema and annotations as listed.

A server that fails to install, start or list within ``--timeout`` seconds is reported and skipped;
a server already recorded is skipped unless ``--force``. None of the six reference servers of
search_corpus.py (filesystem, git, time, fetch, memory, everything) is in the list. Left out of it,
because they do not list here: ``@stripe/mcp`` (lists a remote server's tools), ``@bytebase/dbhub``
and ``@apify/actors-mcp-server`` (need Node.js 22), ``mcp-server-qdrant`` (fetches a model at start),
``@supabase/mcp-server-supabase``, ``@modelcontextprotocol/server-redis``, ``@heroku/mcp-server`` and
``jupyter-mcp-server`` (reach their service, or fail, before they list), ``@azure-devops/mcp`` (its
native add-on does not build here), ``mcp-server-docker`` (its requirements do not resolve).

``--fresh`` records the FRESH list instead, in ``data/fresh_servers/KEY.json``: a set kept apart from the
development set and never used to tune the ranking (docs/search-evaluation.md, "A fresh set"). Tried for it
and left out because they do not list here: ``@upstash/mcp-server`` (reaches its service before it lists),
``@dynatrace-oss/dynatrace-mcp-server`` (needs a newer Node.js), ``@neondatabase/mcp-server-neon`` (a
dependency is fetched from a git host, not the registry), ``pagerduty-mcp``, ``kagimcp`` and ``hass-mcp``
(need Python 3.12 or 3.13).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "data" / "real_servers"
#: Where ``--fresh`` records the FRESH servers: a set kept apart, never used to tune the ranking.
FRESH_OUT = Path(__file__).resolve().parent / "data" / "fresh_servers"

#: Dummy credentials: most servers read one of these at start and only use it on a call.
DUMMY_ENV = {
    "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_dummy0000000000000000000000000000000",
    "GITHUB_TOKEN": "ghp_dummy0000000000000000000000000000000",
    "GITLAB_PERSONAL_ACCESS_TOKEN": "glpat-dummy", "GITLAB_API_URL": "https://gitlab.example.com/api/v4",
    "SLACK_BOT_TOKEN": "xoxb-dummy", "SLACK_TEAM_ID": "T00000000",
    "GOOGLE_MAPS_API_KEY": "dummy", "BRAVE_API_KEY": "dummy", "NOTION_TOKEN": "ntn_dummy",
    "OPENAPI_MCP_HEADERS": '{"Authorization": "Bearer ntn_dummy", "Notion-Version": "2022-06-28"}',
    "TAVILY_API_KEY": "tvly-dummy", "FIRECRAWL_API_KEY": "fc-dummy", "DATADOG_API_KEY": "dummy",
    "DATADOG_APP_KEY": "dummy", "DATADOG_SITE": "datadoghq.com", "PRIVATE_APP_ACCESS_TOKEN": "dummy",
    "PERPLEXITY_API_KEY": "pplx-dummy", "SHORTCUT_API_TOKEN": "dummy", "APIFY_TOKEN": "apify_api_dummy",
    "EXA_API_KEY": "dummy", "MAPBOX_ACCESS_TOKEN": "pk.dummy", "ARGOCD_BASE_URL": "https://argocd.example.com",
    "ARGOCD_API_TOKEN": "dummy", "API_TOKEN": "dummy", "AMAP_MAPS_API_KEY": "dummy", "HEROKU_API_KEY": "dummy",
    "PINECONE_API_KEY": "dummy", "AIRTABLE_API_KEY": "patdummy", "ASANA_ACCESS_TOKEN": "dummy",
    "TRELLO_API_KEY": "dummy", "TRELLO_TOKEN": "dummy", "CHANNEL_ACCESS_TOKEN": "dummy",
    "DESTINATION_USER_ID": "U0000", "ES_URL": "http://127.0.0.1:9200", "ES_API_KEY": "dummy",
    "SEARXNG_URL": "http://127.0.0.1:8888", "CLOUDFLARE_API_TOKEN": "dummy", "CLOUDFLARE_ACCOUNT_ID": "dummy",
    "MONDAY_TOKEN": "dummy", "BITBUCKET_URL": "https://api.bitbucket.org/2.0", "BITBUCKET_USERNAME": "dummy",
    "BITBUCKET_PASSWORD": "dummy", "BITBUCKET_WORKSPACE": "dummy", "BROWSERSTACK_USERNAME": "dummy",
    "BROWSERSTACK_ACCESS_KEY": "dummy", "POSTMAN_API_KEY": "PMAK-dummy", "LINEAR_API_KEY": "lin_api_dummy",
    "CIRCLECI_TOKEN": "dummy", "HEVY_API_KEY": "dummy", "FIGMA_API_KEY": "figd_dummy",
    "MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": "3306", "MYSQL_USER": "dummy", "MYSQL_PASS": "dummy",
    "MYSQL_DB": "dummy", "JIRA_URL": "https://example.atlassian.net", "JIRA_USERNAME": "dummy@example.com",
    "JIRA_API_TOKEN": "dummy", "CONFLUENCE_URL": "https://example.atlassian.net/wiki",
    "CONFLUENCE_USERNAME": "dummy@example.com", "CONFLUENCE_API_TOKEN": "dummy", "QDRANT_URL": "http://127.0.0.1:6333",
    "COLLECTION_NAME": "dummy", "OBSIDIAN_API_KEY": "dummy", "TODOIST_API_TOKEN": "dummy",
    "CLICKHOUSE_HOST": "127.0.0.1", "CLICKHOUSE_USER": "dummy", "CLICKHOUSE_PASSWORD": "dummy",
    "NEO4J_URI": "bolt://127.0.0.1:7687", "NEO4J_USERNAME": "neo4j", "NEO4J_PASSWORD": "dummy",
    "ZOTERO_LOCAL": "true", "GRAFANA_URL": "http://127.0.0.1:3000", "GRAFANA_API_KEY": "dummy",
    "WORDPRESS_SITE_URL": "https://example.com", "WORDPRESS_USERNAME": "dummy",
    "WORDPRESS_APP_PASSWORD": "abcd efgh ijkl mnop qrst uvwx",
    "MDB_MCP_CONNECTION_STRING": "mongodb://127.0.0.1:27017", "PUPPETEER_SKIP_DOWNLOAD": "1",
    "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1", "SENTRY_ACCESS_TOKEN": "dummy", "SUPABASE_ACCESS_TOKEN": "sbp_dummy",
    "STRIPE_SECRET_KEY": "sk_test_dummy", "LAUNCHDARKLY_ACCESS_TOKEN": "api-dummy",
    "NETLIFY_PERSONAL_ACCESS_TOKEN": "dummy", "GOOGLE_OAUTH_CREDENTIALS": "{root}/gcp-oauth.keys.json",
    "BRIGHTDATA_API_TOKEN": "dummy", "DISCORD_TOKEN": "dummy", "YOUTUBE_API_KEY": "dummy",
    "ATLASSIAN_SITE_NAME": "example", "ATLASSIAN_USER_EMAIL": "dummy@example.com", "ATLASSIAN_API_TOKEN": "dummy",
    "REPLICATE_API_TOKEN": "dummy", "ELASTICSEARCH_URL": "http://127.0.0.1:9200",
}


@dataclass(frozen=True)
class Server:
    """One server to record: ``key`` names the file; ``bin`` the command when the package has several."""

    key: str
    ecosystem: str  # "npm" or "pypi"
    package: str
    version: str
    bin: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    #: Further requirements installed with a PyPI package (``mcp<2`` for a server written for the 1.x SDK).
    pins: tuple[str, ...] = ()


SERVERS: tuple[Server, ...] = (
    # npm
    Server("playwright", "npm", "@playwright/mcp", "0.0.83"),
    Server("chrome-devtools", "npm", "chrome-devtools-mcp", "1.11.0"),
    Server("context7", "npm", "@upstash/context7-mcp", "4.1.1"),
    Server("github", "npm", "@modelcontextprotocol/server-github", "2025.4.8"),
    Server("slack", "npm", "@modelcontextprotocol/server-slack", "2025.4.25"),
    Server("postgres", "npm", "@modelcontextprotocol/server-postgres", "0.6.2",
           args=("postgresql://127.0.0.1:5999/none",)),
    Server("google-maps", "npm", "@modelcontextprotocol/server-google-maps", "0.6.2"),
    Server("brave-search", "npm", "@brave/brave-search-mcp-server", "2.1.4"),
    Server("puppeteer", "npm", "@modelcontextprotocol/server-puppeteer", "2025.5.12"),
    Server("sequential-thinking", "npm", "@modelcontextprotocol/server-sequential-thinking", "2026.8.31"),
    Server("notion", "npm", "@notionhq/notion-mcp-server", "2.5.2"),
    Server("mongodb", "npm", "mongodb-mcp-server", "3.0.4"),
    Server("tavily", "npm", "tavily-mcp", "0.2.22"),
    Server("gitlab", "npm", "@zereight/mcp-gitlab", "2.1.64"),
    Server("firecrawl", "npm", "firecrawl-mcp", "3.26.0"),
    Server("desktop-commander", "npm", "@wonderwhy-er/desktop-commander", "0.2.52"),
    Server("sentry", "npm", "@sentry/mcp-server", "0.39.0", args=("--access-token=dummy",)),
    Server("launchdarkly", "npm", "@launchdarkly/mcp-server", "0.6.2", args=("start", "--api-key", "api-dummy")),
    Server("eslint", "npm", "@eslint/mcp", "0.3.13"),
    Server("datadog", "npm", "@winor30/mcp-server-datadog", "1.8.0"),
    Server("google-calendar", "npm", "@cocal/google-calendar-mcp", "2.6.3"),
    Server("hubspot", "npm", "@hubspot/mcp-server", "0.4.0"),
    Server("perplexity", "npm", "@perplexity-ai/mcp-server", "1.2.1"),
    Server("shortcut", "npm", "@shortcut/mcp", "0.25.0"),
    Server("drawio", "npm", "@drawio/mcp", "1.6.1"),
    Server("mobile", "npm", "@mobilenext/mobile-mcp", "1.0.4"),
    Server("lark", "npm", "@larksuiteoapi/lark-mcp", "0.5.1", args=("mcp", "-a", "cli_dummy", "-s", "dummy")),
    Server("exa", "npm", "exa-mcp-server", "3.4.1"),
    Server("mysql", "npm", "@benborla29/mcp-server-mysql", "2.0.9"),
    Server("ms365", "npm", "@softeria/ms-365-mcp-server", "0.155.0"),
    Server("mapbox", "npm", "@mapbox/mcp-server", "0.14.0"),
    Server("argocd", "npm", "argocd-mcp", "0.9.0", args=("stdio",)),
    Server("kubernetes", "npm", "mcp-server-kubernetes", "4.1.7"),
    Server("brightdata", "npm", "@brightdata/mcp", "2.11.3"),
    Server("mermaid", "npm", "mcp-mermaid", "0.4.1"),
    Server("amap", "npm", "@amap/amap-maps-mcp-server", "0.0.8"),
    Server("airbnb", "npm", "@openbnb/mcp-server-airbnb", "0.3.0"),
    Server("pinecone", "npm", "@pinecone-database/mcp", "0.3.0"),
    Server("airtable", "npm", "airtable-mcp-server", "1.14.0"),
    Server("asana", "npm", "@roychri/mcp-server-asana", "1.8.0"),
    Server("trello", "npm", "@delorenj/mcp-server-trello", "1.8.1"),
    Server("line", "npm", "@line/line-bot-mcp-server", "0.5.0"),
    Server("elasticsearch", "npm", "@elastic/mcp-server-elasticsearch", "0.3.1"),
    Server("searxng", "npm", "mcp-searxng", "2.4.0"),
    Server("reddit", "npm", "reddit-mcp-buddy", "1.1.14"),
    Server("pdf-reader", "npm", "@sylphx/pdf-reader-mcp", "2.4.0"),
    Server("cloudflare", "npm", "@cloudflare/mcp-server-cloudflare", "0.2.0", args=("run", "dummy-account")),
    Server("netlify", "npm", "@netlify/mcp", "1.15.1"),
    Server("monday", "npm", "@mondaydotcomorg/monday-api-mcp", "3.3.0", args=("-t", "dummy")),
    Server("bitbucket", "npm", "bitbucket-mcp", "5.0.6"),
    Server("browserstack", "npm", "@browserstack/mcp-server", "1.4.2"),
    Server("postman", "npm", "@postman/postman-mcp-server", "2.13.0"),
    Server("linear", "npm", "@tacticlaunch/mcp-linear", "1.4.3"),
    Server("excel", "npm", "@negokaz/excel-mcp-server", "0.12.0"),
    Server("circleci", "npm", "@circleci/mcp-server-circleci", "0.20.0"),
    Server("hevy", "npm", "hevy-mcp", "6.1.13"),
    Server("figma", "npm", "figma-developer-mcp", "0.13.2", args=("--stdio",)),
    Server("shopify-dev", "npm", "@shopify/dev-mcp", "1.16.0"),
    Server("wordpress", "npm", "mcp-wordpress", "3.3.35"),
    Server("youtube-transcript", "npm", "@kimtaeyoon83/mcp-server-youtube-transcript", "0.1.1"),
    Server("discord", "npm", "mcp-discord", "1.3.4"),
    Server("youtube", "npm", "youtube-data-mcp-server", "1.0.16"),
    Server("twilio", "npm", "@twilio-alpha/mcp", "0.7.0", args=("AC" + "0" * 32 + "/SK" + "0" * 32 + ":secret",)),
    Server("grafana", "npm", "@leval/mcp-grafana", "1.1.7"),
    # PyPI
    Server("atlassian", "pypi", "mcp-atlassian", "0.23.1"),
    Server("sqlite", "pypi", "mcp-server-sqlite", "2025.4.25", args=("--db-path", "/tmp/mcpsrv/data/test.db"),
           pins=("mcp<2",)),
    Server("duckduckgo", "pypi", "duckduckgo-mcp-server", "0.7.0"),
    Server("arxiv", "pypi", "arxiv-mcp-server", "0.8.2"),
    Server("markitdown", "pypi", "markitdown-mcp", "0.0.1a8"),
    Server("obsidian", "pypi", "mcp-obsidian", "0.2.3"),
    Server("clickhouse", "pypi", "mcp-clickhouse", "0.7.0"),
    Server("wikipedia", "pypi", "wikipedia-mcp", "2.0.1"),
    Server("neo4j", "pypi", "mcp-neo4j-cypher", "0.6.0"),
    Server("zotero", "pypi", "zotero-mcp", "0.3.1"),
    Server("yfinance", "pypi", "yfinance-mcp", "0.1.2", pins=("mcp<2",)),
    Server("todoist", "pypi", "todoist-mcp", "0.4.0"),
    Server("calculator", "pypi", "mcp-server-calculator", "0.2.1"),
    Server("excel-py", "pypi", "excel-mcp-server", "2.2.2", args=("stdio",)),
    Server("shell", "pypi", "mcp-shell-server", "1.1.14"),
    Server("tree-sitter", "pypi", "mcp-server-tree-sitter", "0.7.0", pins=("mcp<2",)),
    Server("motherduck", "pypi", "mcp-server-motherduck", "1.1.0", args=("--db-path", ":memory:", "--read-write")),
    Server("chroma", "pypi", "chroma-mcp", "0.2.6", pins=("pydantic<2.11",)),
    Server("blender", "pypi", "blender-mcp", "2.0.0"),
)

#: The fresh set (``--fresh``, docs/search-evaluation.md "A fresh set"): other servers, none of SERVERS nor of
#: the six reference servers, recorded in ``data/fresh_servers`` and evaluated with ``eval_search_real.py --set
#: fresh``; never used to tune the ranking.
FRESH: tuple[Server, ...] = (
    # npm
    Server("gmail", "npm", "@gongrzhe/server-gmail-autoauth-mcp", "1.1.11",
           env={"GMAIL_OAUTH_PATH": "{root}/gcp-oauth.keys.json", "GMAIL_CREDENTIALS_PATH": "{root}/oauth-token.json"}),
    Server("resend", "npm", "resend-mcp", "2.22.0", env={"RESEND_API_KEY": "re_dummy"}),
    Server("digitalocean", "npm", "@digitalocean/mcp", "1.0.70", env={"DIGITALOCEAN_API_TOKEN": "dop_v1_dummy"}),
    Server("bitwarden", "npm", "@bitwarden/mcp-server", "2026.7.0"),
    Server("antv-chart", "npm", "@antv/mcp-server-chart", "0.9.10"),
    Server("paperless", "npm", "@baruchiro/paperless-mcp", "2.2.1",
           env={"PAPERLESS_URL": "http://127.0.0.1:8000", "PAPERLESS_API_KEY": "dummy"}),
    Server("lunchmoney", "npm", "@akutishevsky/lunchmoney-mcp", "3.0.0", env={"LUNCHMONEY_API_TOKEN": "dummy"}),
    Server("baidu-map", "npm", "@baidumap/mcp-server-baidu-map", "1.0.5", env={"BAIDU_MAP_API_KEY": "dummy"}),
    Server("gdrive", "npm", "@modelcontextprotocol/server-gdrive", "2025.1.14",
           env={"GDRIVE_CREDENTIALS_PATH": "{root}/oauth-token.json"}),
    Server("everart", "npm", "@modelcontextprotocol/server-everart", "0.6.2", env={"EVERART_API_KEY": "dummy"}),
    Server("excalidraw", "npm", "excalidraw-mcp", "1.0.0"),
    Server("terraform", "npm", "terraform-mcp-server", "0.13.0"),
    Server("nx", "npm", "nx-mcp", "0.25.0"),
    Server("gcs", "npm", "@google-cloud/storage-mcp", "0.6.0"),
    Server("cloudinary", "npm", "@cloudinary/asset-management-mcp", "0.11.0", bin="mcp", args=("start",),
           env={"CLOUDINARY_CLOUD_NAME": "dummy", "CLOUDINARY_API_KEY": "dummy", "CLOUDINARY_API_SECRET": "dummy"}),
    Server("selenium", "npm", "@angiejones/mcp-selenium", "0.2.3"),
    Server("webflow", "npm", "webflow-mcp-server", "1.0.0", env={"WEBFLOW_TOKEN": "dummy"}),
    Server("variflight", "npm", "@variflight-ai/variflight-mcp", "1.0.3"),
    Server("flightradar", "npm", "flightradar-mcp-server", "0.1.2"),
    Server("open-meteo", "npm", "open-meteo-mcp-server", "2.1.0"),
    Server("xero", "npm", "@xeroapi/xero-mcp-server", "0.0.17",
           env={"XERO_CLIENT_ID": "dummy", "XERO_CLIENT_SECRET": "dummy"}),
    Server("strava", "npm", "@r-huijts/strava-mcp-server", "1.2.1"),
    Server("woocommerce", "npm", "@lockon0927/woocommerce-mcp", "1.0.6",
           env={"WOOCOMMERCE_CONSUMER_KEY": "ck_dummy", "WOOCOMMERCE_CONSUMER_SECRET": "cs_dummy"}),
    Server("paddle", "npm", "@paddle/paddle-mcp", "0.1.6", args=("--tools=all",),
           env={"PADDLE_API_KEY": "pdl_dummy", "PADDLE_ENVIRONMENT": "sandbox"}),
    Server("howtocook", "npm", "howtocook-mcp", "0.2.2"),
    # PyPI
    Server("prometheus", "pypi", "prometheus-mcp-server", "1.6.2", env={"PROMETHEUS_URL": "http://127.0.0.1:9090"}),
    Server("biomcp", "pypi", "biomcp-python", "0.7.3", args=("run",)),
    Server("pubmed", "pypi", "mcp-simple-pubmed", "0.1.16", env={"PUBMED_EMAIL": "dummy@example.com"},
           pins=("mcp<2", "pydantic-settings")),
    Server("aws-pricing", "pypi", "awslabs.aws-pricing-mcp-server", "1.1.1"),
    Server("aws-docs", "pypi", "awslabs.aws-documentation-mcp-server", "1.2.3"),
    Server("dynamodb", "pypi", "awslabs.dynamodb-mcp-server", "2.1.8"),
    Server("alpaca", "pypi", "alpaca-mcp-server", "2.4.0",
           env={"ALPACA_API_KEY": "dummy", "ALPACA_SECRET_KEY": "dummy", "ALPACA_PAPER_TRADE": "true"}),
    Server("joplin", "pypi", "joplin-mcp", "0.10.0", env={"JOPLIN_TOKEN": "dummy"}),
    Server("jenkins", "pypi", "mcp-jenkins", "3.6.0"),
    Server("proxmox", "pypi", "mcp-proxmox", "1.2.3"),
)


def _run(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd[:4])}...: exit {done.returncode}: {done.stderr[-800:]}")


def _uv(root: Path) -> str:
    uv = root / "uvenv" / "bin" / "uv"
    if not uv.exists():
        _run([sys.executable, "-m", "venv", str(root / "uvenv")], 120)
        _run([str(root / "uvenv" / "bin" / "pip"), "install", "-q", "uv"], 300)
    return str(uv)


def install(server: Server, root: Path, timeout: float) -> tuple[str, str]:
    """Install the package under ``root/KEY``; return (command, installed version)."""
    home = root / server.key
    env = dict(os.environ, PUPPETEER_SKIP_DOWNLOAD="1", PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1")
    if server.ecosystem == "npm":
        manifest = home / "node_modules" / server.package / "package.json"
        if not manifest.exists():
            command = ["npm", "install", "--prefix", str(home), "--no-audit", "--no-fund", "--loglevel=error",
                       f"{server.package}@{server.version}"]
            try:
                _run(command, timeout, env)
            except RuntimeError:  # a native add-on that does not build here (keytar...): listing needs none
                _run([*command, "--ignore-scripts"], timeout, env)
        meta = json.loads(manifest.read_text(encoding="utf-8"))
        bins = meta.get("bin") or {}
        if isinstance(bins, str):
            bins = {server.package.split("/")[-1]: bins}
        name = server.bin or (next(iter(bins)) if len(bins) == 1 else
                              next((b for b in bins if "mcp" in b), next(iter(bins), "")))
        if not name:
            raise RuntimeError(f"{server.package} has no command")
        return str(home / "node_modules" / ".bin" / name.split("/")[-1]), meta["version"]  # npm links @a/b as b
    python = home / "bin" / "python"
    if not python.exists():
        uv = _uv(root)
        _run([uv, "venv", "-q", "--python", sys.executable, str(home)], timeout, env)
        _run([uv, "pip", "install", "-q", "--python", str(python), f"{server.package}=={server.version}",
              *server.pins], timeout, env)
    version = subprocess.run([str(python), "-c", "import importlib.metadata as m, sys; "
                              f"print(m.version({server.package!r}))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    command = server.bin or _console_script(python, server.package)
    return str(home / "bin" / command), version


def _console_script(python: Path, package: str) -> str:
    code = ("import importlib.metadata as m; "
            f"print('\\n'.join(e.name for e in m.distribution({package!r}).entry_points "
            "if e.group == 'console_scripts'))")
    names = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.split()
    if not names:
        raise RuntimeError(f"{package} has no console script")
    return next((n for n in names if n == package), next((n for n in names if "mcp" in n), names[0]))


async def list_server(command: str, server: Server, root: Path) -> dict[str, Any]:
    """Start the server over stdio with the official SDK client; its initialize result and all its tools."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp_types import PaginatedRequestParams

    (root / "data").mkdir(exist_ok=True)  # where the SQLite server keeps its database
    keys = root / "gcp-oauth.keys.json"  # a dummy OAuth client: some Google servers read one at start
    if not keys.exists():
        keys.write_text(json.dumps({"installed": {"client_id": "dummy.apps.googleusercontent.com",
                                                  "client_secret": "dummy", "redirect_uris": ["http://localhost"]}}))
    token = root / "oauth-token.json"  # and a dummy token of a past sign-in
    if not token.exists():
        token.write_text(json.dumps({"access_token": "dummy", "refresh_token": "dummy", "token_type": "Bearer"}))
    env = {name: value.replace("{root}", str(root)) for name, value in {**DUMMY_ENV, **server.env}.items()}
    params = StdioServerParameters(command=command, args=list(server.args), env=env, cwd=str(root / server.key))
    with open(root / f"{server.key}.stderr", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write, read_timeout_seconds=60) as session:
            init = await session.initialize()
            tools: list[dict[str, Any]] = []
            cursor = None
            while True:
                page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
                tools.extend(tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
    info = init.server_info
    keep = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
    return {
        "server": {"name": info.name, "title": getattr(info, "title", None), "version": info.version,
                   "instructions": init.instructions},
        "tools": [{k: tool[k] for k in keep if k in tool} for tool in tools],
    }


async def collect(server: Server, root: Path, timeout: float, force: bool, out: Path = OUT) -> str:
    target = out / f"{server.key}.json"
    if target.exists() and not force:
        return f"{server.key}: already recorded"
    started = time.monotonic()
    try:
        command, version = await asyncio.to_thread(install, server, root, max(timeout, 300))
        listing = await asyncio.wait_for(list_server(command, server, root), timeout)
    except BaseException as exc:  # a failing server is reported and skipped
        if isinstance(exc, KeyboardInterrupt):
            raise
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        return f"{server.key}: FAILED {type(exc).__name__}: {str(exc)[:300]} (stderr: {root / server.key}.stderr)"
    if not listing["tools"]:
        return f"{server.key}: no tools listed"
    record = {"key": server.key, "source": {"ecosystem": server.ecosystem, "package": server.package,
                                             "version": version}, **listing}
    out.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(record, ensure_ascii=False, separators=(",", ":"), sort_keys=False) + "\n",
                      encoding="utf-8")
    return f"{server.key}: {len(listing['tools'])} tools in {time.monotonic() - started:.0f} s"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="keys of the servers to record")
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds to start and list one server")
    parser.add_argument("--root", type=Path, default=Path("/tmp/mcpsrv"))
    parser.add_argument("--force", action="store_true", help="record again servers already recorded")
    parser.add_argument("--fresh", action="store_true",
                        help="record the FRESH servers (data/fresh_servers) instead of SERVERS")
    args = parser.parse_args()
    logging.getLogger("mcp").setLevel(logging.CRITICAL)  # a server's log lines on stdout are its own affair
    listed, out = (FRESH, FRESH_OUT) if args.fresh else (SERVERS, OUT)
    chosen = [s for s in listed if args.only is None or s.key in args.only]
    args.root.mkdir(parents=True, exist_ok=True)
    gate = asyncio.Semaphore(args.jobs)

    async def one(server: Server) -> None:
        async with gate:
            print(await collect(server, args.root, args.timeout, args.force, out), flush=True)

    await asyncio.gather(*(one(s) for s in chosen))


if __name__ == "__main__":
    asyncio.run(main())
