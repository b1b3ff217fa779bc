"""The ``[plugins.proxy]`` section: which upstream servers to mount, and how.

Servers come from ``[plugins.proxy.servers.NAME]`` tables and from ``mcp_servers_file`` (the
``{"mcpServers": {...}}`` JSON that MCP clients such as Claude Desktop or Cursor read); a
table of the same name wins over the file. Everything is checked here, before the host starts,
so a typo is a startup error naming the server instead of a failure at the first call.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import Field, model_validator

import mcphost
from mcphost import ConfigError, redact, redact_text

_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
#: ``${NAME}`` in a header value (or an env value) names an environment variable of the host.
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

ServerName = Annotated[str, Field(pattern=_NAME.pattern)]


class AuthConfig(mcphost.PluginSettings):
    """``[plugins.proxy.servers.NAME.auth]``: how calls to an HTTP upstream are authorized (see
    docs/upstream-credentials.md)."""

    mode: Annotated[Literal["oauth", "token-exchange", "static"], Field(description=(
        "'static' (default): the configured headers for everyone; 'oauth': each principal signs in to the "
        "upstream once (authorization code + PKCE, asked in band by URL elicitation) and its calls carry that "
        "principal's own token; 'token-exchange': the caller's validated token exchanged (RFC 8693) for one "
        "whose audience is the upstream"))] = "static"
    client_id: Annotated[str | None, Field(min_length=1, description=(
        "this host's client id at the upstream's authorization server"))] = None
    client_secret: Annotated[mcphost.EnvStr | None, Field(min_length=1, description=(
        "its client secret (\"${VAR}\" reads it from the environment); none: a public client"))] = None
    client_metadata_url: Annotated[str | None, Field(pattern="^https?://", description=(
        "a client ID metadata document URL used as the client id (the 2025-11-25 way)"))] = None
    scopes: Annotated[tuple[str, ...], Field(strict=False, description=(
        "scopes asked for (default: those the upstream's protected resource metadata lists)"))] = ()
    allow_insecure_http: Annotated[bool, Field(description=(
        "development only: allow plain-http authorization servers and upstreams (loopback providers)"))] = False
    sign_in_timeout: Annotated[float, Field(gt=0, le=3600, description=(
        "seconds a call waits for the user to finish signing in (the sign-in link expires then too)"))] = 300.0
    refresh_before: Annotated[float, Field(ge=0, description=(
        "seconds before its expiry an access token is refreshed"))] = 60.0


class BrowserLoginConfig(mcphost.PluginSettings):
    """``[plugins.proxy.browser_login]``: the host's own identity provider, which signs in the *browser*
    that opens a sign-in link, so that only the principal the link was made for can complete it (see
    docs/upstream-credentials.md, "Who may complete a sign-in")."""

    issuer: Annotated[str, Field(pattern="^https?://", description=(
        "the OpenID provider the host's auth plugin trusts (e.g. [plugins.jwt] issuer); its ID token's "
        "subject must be the subject of the principal the link was made for"))]
    client_id: Annotated[str, Field(min_length=1, description="this host's client id at that provider")]
    client_secret: Annotated[mcphost.EnvStr | None, Field(min_length=1, description=(
        "its client secret (\"${VAR}\" reads it from the environment); none: a public client (PKCE only)"))] = None
    allow_insecure_http: Annotated[bool, Field(description=(
        "development only: allow a plain-http provider, and a browser cookie without Secure"))] = False
    cookie_lifetime: Annotated[float, Field(gt=0, le=86400, description=(
        "seconds the browser stays signed in to the host (its cookie), so a second upstream's sign-in does not "
        "ask the host login again"))] = 900.0


class UpstreamConfig(mcphost.PluginSettings):
    """One ``[plugins.proxy.servers.NAME]`` table (or one entry of an mcpServers file)."""

    command: Annotated[str | None, Field(min_length=1, description="stdio: the program to run")] = None
    args: Annotated[tuple[str, ...], Field(strict=False, description="stdio: its arguments")] = ()
    env: Annotated[dict[str, str], Field(description=(
        "stdio: extra environment variables (values may use ${VAR})"))] = Field(default_factory=dict)
    cwd: Annotated[str | None, Field(description="stdio: working directory")] = None
    url: Annotated[str | None, Field(pattern="^https?://", description="Streamable HTTP: the MCP endpoint")] = None
    #: Header values as configured; ``${VAR}`` is resolved when connecting (ServerSettings.resolved_headers).
    headers: Annotated[dict[str, str], Field(description=(
        "Streamable HTTP: request headers; ${VAR} names an environment variable"))] = Field(default_factory=dict)
    prefix: Annotated[str | None, Field(pattern=r"^[A-Za-z0-9_.\-/]*$", description=(
        "prepended to tool and prompt names (default 'NAME_'; characters A-Z a-z 0-9 _ . - /)"))] = None
    include: Annotated[tuple[str, ...], Field(strict=False, description=(
        "glob patterns of upstream names to mount (default: all)"))] = ()
    exclude: Annotated[tuple[str, ...], Field(strict=False, description="glob patterns of names to hide")] = ()
    timeout: Annotated[float, Field(gt=0, description="seconds per upstream request")] = 60.0
    era: Annotated[Literal["session", "auto"], Field(description=(
        "'session' (default): speak the session era to the upstream so it can ask questions mid-call; 'auto': "
        "let the upstream choose (2026-07-28 if it can)"))] = "session"
    start: Annotated[Literal["startup", "lazy"], Field(description=(
        "'startup' (default): start with the host; 'lazy': at the first request"))] = "startup"
    per_session: Annotated[bool, Field(description=(
        "one upstream connection per client session (stateful upstreams)"))] = False
    #: stdio: "auto", "shared" or "own_process" (see docs/proxy.md, Questions).
    questions: Annotated[Literal["auto", "shared", "own_process"], Field(description=(
        "stdio: 'auto' (default): a call whose client can answer questions runs on the shared process unless "
        "another such call is in flight there and the upstream has not been seen to echo the trace id; then it "
        "leases a process of its own (pool of max_instances); 'shared': every call runs on the one process "
        "(concurrent questions of a server that does not echo are refused); 'own_process': every call whose "
        "client can answer questions leases a process of its own (stateless upstreams)"))] = "auto"
    bridge_tasks: Annotated[bool, Field(description=(
        "true (default): a tool that runs only as a task upstream is offered to every client as one that may "
        "run as a task (taskSupport 'optional'): a client that does not use tasks gets its plain result (the "
        "host runs the upstream task and answers the call when it ends); false: a 2026-07-28 client without the "
        "tasks extension gets -32021, and 2025-11-25 clients see taskSupport 'required', as the upstream says"))
    ] = True
    max_queued: Annotated[int, Field(ge=0, description=(
        "own_process: calls that may wait for a free process (each at most timeout)"))] = 64
    enabled: Annotated[bool, Field(description="false: keep the entry but do not mount it")] = True
    pool_size: Annotated[int, Field(ge=1, description=(
        "Streamable HTTP: keep-alive connections a tool call may use at once"))] = 16
    max_message_bytes: Annotated[int, Field(ge=1024, description=(
        "largest message read from the upstream (a stdio line, an HTTP JSON body or SSE event); a larger one "
        "fails only its call"))] = 16 * 1024 * 1024
    max_description_chars: Annotated[int, Field(ge=0, description=(
        "longer descriptions: the record is skipped with a warning"))] = 16 * 1024
    max_schema_bytes: Annotated[int, Field(ge=2, description=(
        "larger input/output schemas: the tool is skipped with a warning"))] = 256 * 1024
    max_instances: Annotated[int, Field(ge=1, description=(
        "per_session, own_process: most upstream processes/connections at once"))] = 16
    #: None: no share per principal beyond max_instances.
    max_instances_per_principal: Annotated[int | None, Field(ge=1, description=(
        "per_session: most instances one principal holds"))] = None
    idle_timeout: Annotated[float, Field(gt=0, description=(
        "per_session, own_process, auth mode oauth/token-exchange (each principal's connection): seconds an "
        "unused instance is kept before it is stopped"))] = 300.0
    # -- per-user upstream credentials (issue 33; docs/upstream-credentials.md) --
    auth: Annotated[AuthConfig, Field(description=(
        "Streamable HTTP: per-user credentials for this upstream (mode = 'oauth' | 'token-exchange' | "
        "'static')"))] = Field(default_factory=AuthConfig)
    # -- what the upstream's definitions may be (docs/pinning.md); None: the [plugins.proxy] default --
    pinning: Annotated[Literal["off", "tofu", "approve"] | None, Field(description=(
        "'off': serve definitions as listed; 'tofu': pin what is first seen; 'approve': serve nothing new "
        "until approved (a definition that differs from its pin is held; default: [plugins.proxy] pinning)"))] = None
    hidden_text: Annotated[Literal["strip", "hold"] | None, Field(description=(
        "zero-width characters, bidi controls, ANSI escapes and HTML comments in titles and descriptions: "
        "'strip' them or 'hold' the definition (default: [plugins.proxy] hidden_text)"))] = None
    max_tools: Annotated[int | None, Field(ge=0, description=(
        "most tools (and most prompts, resources, templates) mounted; past it the rest are refused with one "
        "warning and paging stops (default: [plugins.proxy] max_tools)"))] = None
    max_definition_bytes: Annotated[int | None, Field(ge=256, description=(
        "largest definition (one record's JSON) mounted (default: [plugins.proxy] max_definition_bytes)"))] = None
    max_catalog_bytes: Annotated[int | None, Field(ge=1024, description=(
        "bytes of all the upstream's definitions together (default: [plugins.proxy] max_catalog_bytes)"))] = None
    # -- readiness (/readyz); None: the [plugins.proxy] default --
    required: Annotated[bool | None, Field(description=(
        "true: while this upstream is not running, /readyz answers 503 (a load balancer sends no traffic); "
        "false: /readyz answers 200 with status 'degraded' naming it (default: [plugins.proxy] required)"))] = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if bool(self.command) == bool(self.url):
            raise ValueError("give either command (stdio) or url (Streamable HTTP)")
        if self.command is not None and self.headers:
            raise ValueError("headers apply to url servers only")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("args, env and cwd apply to command servers only")
        if self.auth.mode != "static":
            if self.url is None:
                raise ValueError(f"auth mode {self.auth.mode!r} is for url servers only")
            if self.per_session:
                raise ValueError(f"auth mode {self.auth.mode!r} already keeps one connection per principal: "
                                 f"drop per_session")
            if self.auth.mode == "token-exchange" and not self.auth.client_id:
                raise ValueError("auth mode 'token-exchange' needs client_id")
            if (self.url.startswith("http://") and not self.auth.allow_insecure_http
                    and not self.url.startswith(("http://127.0.0.1", "http://localhost", "http://[::1]"))):
                raise ValueError("auth: the upstream url must be https (allow_insecure_http = true permits http, "
                                 "for development only)")
        if self.questions == "own_process" and (self.url is not None or self.per_session):
            raise ValueError("questions: 'own_process' is for stdio servers without per_session (an HTTP "
                             "upstream's questions come on their call's own stream)")
        return self


class ServerSettings(UpstreamConfig):
    """One upstream server, resolved: either ``command`` (stdio) or ``url`` (Streamable HTTP), its name
    and its prefix settled."""

    name: str
    prefix: str  # settled: "NAME_" unless the table names one
    # settled from [plugins.proxy] when the table leaves them unset
    pinning: Literal["off", "tofu", "approve"] = "off"
    hidden_text: Literal["strip", "hold"] = "strip"
    max_tools: int = 2000
    max_definition_bytes: int = 512 * 1024
    max_catalog_bytes: int = 64 * 1024 * 1024
    required: bool = False

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"

    def mounts(self, upstream_name: str) -> bool:
        """Whether the upstream's tool/prompt/resource ``upstream_name`` passes include and exclude."""
        if self.include and not any(fnmatch.fnmatchcase(upstream_name, p) for p in self.include):
            return False
        return not any(fnmatch.fnmatchcase(upstream_name, p) for p in self.exclude)

    def resolved_headers(self) -> dict[str, str]:
        """Header values with ``${VAR}`` replaced from the environment; a missing variable is an error."""
        return {key: _expand(value, f"[plugins.proxy.servers.{self.name}.headers.{key}]")
                for key, value in self.headers.items()}

    def resolved_env(self) -> dict[str, str]:
        return {key: _expand(value, f"[plugins.proxy.servers.{self.name}.env.{key}]")
                for key, value in self.env.items()}

    def describe(self) -> str:
        """Where the upstream is, for logs and ``mcphost plugins`` (never header values: they hold secrets)."""
        if self.command:  # and never a secret passed as an argument or in the URL (mcphost.redaction)
            return " ".join(redact([self.command, *self.args]))[:120]
        return redact_text(str(self.url))


def _expand(value: str, where: str) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ConfigError(f"{where}: environment variable {name} is not set")
        return os.environ[name]

    return _ENV_REF.sub(replace, value)


class ProxyConfig(mcphost.PluginSettings):
    """Existing MCP servers mounted into the catalog: stdio commands and Streamable HTTP URLs."""

    servers: Annotated[dict[ServerName, UpstreamConfig], Field(
        description="upstream MCP servers by name (1-64 characters of A-Z a-z 0-9 _ . -)",
        json_schema_extra={"x-aliases": ["upstreams", "mcpServers", "mcp_servers"]})] = Field(default_factory=dict)
    mcp_servers_file: Annotated[str | list[str] | None, Field(description=(
        "JSON file(s) in the mcpServers format MCP clients use"))] = None
    restart_backoff: Annotated[float, Field(gt=0, description=(
        "first delay (seconds) before restarting a dead upstream; doubles"))] = 0.5
    restart_backoff_max: Annotated[float, Field(gt=0, description="longest delay between restarts")] = 30.0
    startup_timeout: Annotated[float, Field(gt=0, description=(
        "seconds after which an upstream that has not listed is reported (it is still mounted when it "
        "does)"))] = 30.0
    max_parked_calls: Annotated[int, Field(ge=1, description=(
        "calls one principal may have waiting for their answers (2026-07-28)"))] = 32
    max_parked_bytes: Annotated[int, Field(ge=1024, description=(
        "bytes (of arguments) those parked calls may hold, per principal"))] = 32 * 1024 * 1024
    max_queued_bytes_per_principal: Annotated[int, Field(ge=0, description=(
        "bytes (of arguments) the calls one principal has waiting may hold, over every server: for a free "
        "own_process process, or for an upstream (a per_session instance) to start; past it a call gets "
        "-32000 at once (0: no limit)"))] = 8 * 1024 * 1024
    #: stdio upstreams starting at once (None: the machine's CPUs).
    max_starting: Annotated[int | None, Field(ge=1, description=(
        "stdio upstreams starting at once (until each first answers); default: the machine's CPUs"))] = None
    # -- per-user upstream credentials (issue 33; docs/upstream-credentials.md) --
    public_url: Annotated[str | None, Field(pattern="^https?://", description=(
        "this host's base URL as users' browsers reach it, for the sign-in links and the OAuth callback "
        "(default: the origin of [server] resource_url, else http://HOST:PORT of [server])"))] = None
    credentials_key: Annotated[mcphost.EnvStr | None, Field(min_length=32, description=(
        "the key upstream tokens are encrypted with at rest (\"${VAR}\"; 32+ characters); default: the key "
        "ring 'credentials' kept in the backend"))] = None
    browser_login: Annotated[BrowserLoginConfig | None, Field(description=(
        "the host's own OpenID provider, which signs in the browser completing a sign-in link; without it, "
        "the link's page names the principal and the upstream and asks for a click"))] = None
    startup_wait: Annotated[float, Field(ge=0, description=(
        "seconds the host's startup waits for the upstreams to list before it serves (default 0: it serves "
        "at once)"))] = 0.0
    # -- defaults of the per-server definition settings (docs/pinning.md) --
    pinning: Annotated[Literal["off", "tofu", "approve"], Field(description=(
        "default pinning of every server: 'off', 'tofu' (pin what is first seen) or 'approve'"))] = "off"
    hidden_text: Annotated[Literal["strip", "hold"], Field(description=(
        "default for hidden text in titles and descriptions: 'strip' it or 'hold' the definition"))] = "strip"
    max_tools: Annotated[int, Field(ge=0, description="default most tools (and of each other kind) per server")] = 2000
    max_definition_bytes: Annotated[int, Field(ge=256, description=(
        "default largest definition (one record's JSON) per server"))] = 512 * 1024
    max_catalog_bytes: Annotated[int, Field(ge=1024, description=(
        "default bytes of one server's definitions together"))] = 64 * 1024 * 1024
    pins_poll: Annotated[float, Field(gt=0, le=60, description=(
        "seconds between looks at the pin store for approvals made elsewhere (mcphost pins, other processes)"))] = 1.0
    # -- readiness (/readyz) --
    required: Annotated[bool, Field(description=(
        "the default of each server's required: true makes /readyz answer 503 while that upstream is not "
        "running"))] = False


@dataclass(frozen=True)
class ProxySettings:
    """The checked section with its servers resolved (the mcpServers files read, names and prefixes set)."""

    config: ProxyConfig
    servers: tuple[ServerSettings, ...]


def load_settings(section: ProxyConfig | Mapping[str, Any], *, base: Path | None = None) -> ProxySettings:
    """Resolve the checked ``[plugins.proxy]`` section (and the mcpServers files it names); a mapping is
    checked first. A table of ``servers`` wins over a file's entry of the same name."""
    if not isinstance(section, ProxyConfig):
        section = _checked(ProxyConfig, section, "proxy", "configuration")
    tables: dict[str, UpstreamConfig] = {}
    files = section.mcp_servers_file or []
    for file in [files] if isinstance(files, str) else files:
        path = Path(file).expanduser() if base is None else (base / Path(file).expanduser())
        for name, table in read_mcp_servers_file(path).items():
            tables[name] = _checked(UpstreamConfig, table, f"proxy.servers.{name}",
                                    f"[plugins.proxy.mcp_servers_file] {path}")
    tables.update(section.servers)
    servers = tuple(server_settings(name, table, section) for name, table in tables.items() if table.enabled)
    return ProxySettings(config=section, servers=servers)


M = TypeVar("M", bound=mcphost.PluginSettings)


def _checked(model: type[M], table: Mapping[str, Any], name: str, source: str) -> M:
    instance, problems = mcphost.bind_settings(model, table, name, source)
    if problems:
        raise ConfigError("\n".join(problems))
    assert isinstance(instance, model)
    return instance


def read_mcp_servers_file(path: Path) -> dict[str, dict[str, Any]]:
    """The servers of an ``{"mcpServers": {...}}`` file, as server tables.

    Entries carry ``command``/``args``/``env``/``cwd`` or ``url``/``headers`` (``type`` and
    ``disabled`` as MCP clients write them are understood; other client-specific keys are ignored).
    """
    where = f"[plugins.proxy.mcp_servers_file] {path}"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{where}: not valid JSON: {exc}") from None
    servers = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError(f"{where}: expected an object with an \"mcpServers\" object")
    tables: dict[str, dict[str, Any]] = {}
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: server {name!r} must be an object")
        kind = entry.get("type")
        if kind not in (None, "stdio", "http", "streamable-http", "streamableHttp"):
            raise ConfigError(f"{where}: server {name!r}: transport {kind!r} is not supported "
                              "(stdio or Streamable HTTP)")
        table = {key: entry[key] for key in ("command", "args", "env", "cwd", "url", "headers") if key in entry}
        if entry.get("disabled") is True:
            table["enabled"] = False
        tables[str(name)] = table
    return tables


#: Per-server settings whose default is the [plugins.proxy] key of the same name.
DEFAULTED = ("pinning", "hidden_text", "max_tools", "max_definition_bytes", "max_catalog_bytes", "required")


def server_settings(name: str, table: UpstreamConfig, defaults: ProxyConfig | None = None) -> ServerSettings:
    """The checked table of server ``name``, its name, prefix and defaulted settings settled."""
    if not _NAME.match(name):
        raise ConfigError(f"[plugins.proxy.servers.{name}]: server names are 1-64 characters of A-Z a-z 0-9 _ . -")
    fields = dict(table)
    fields["prefix"] = f"{name}_" if table.prefix is None else table.prefix
    defaults = defaults or ProxyConfig()
    for key in DEFAULTED:
        if fields.get(key) is None:
            fields[key] = getattr(defaults, key)
    return ServerSettings.model_construct(table.model_fields_set | {"name", "prefix"}, name=name, **fields)
