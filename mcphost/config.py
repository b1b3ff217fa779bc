"""Configuration: ``mcphost.toml`` plus environment overrides, checked before the host starts.

The file is looked up in this order: ``--config``, ``$MCPHOST_CONFIG``, then
``mcphost.toml`` in the platform's user config directory (missing there means defaults).
``[server]`` holds the host's own settings; ``[plugins]`` the block/allow lists and one
``[plugins.<name>]`` section per plugin, validated against the JSON Schema the plugin
declares through ``mcphost_config_schema``. Environment variables ``MCPHOST_<KEY>``
override ``[server]`` keys (``MCPHOST_PORT=9000``).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import platformdirs
import pydantic

from mcphost.endpoints import ENDPOINTS_SCHEMA, EndpointSettings, endpoints_from_dict
from mcphost.errors import ConfigError
from mcphost.protocol.auth import canonical_resource_url
from mcphost.redaction import REDACTED, is_secret_name, redact_text
from mcphost.settings import SettingsModel, bind_settings
from mcphost.settings import did_you_mean as did_you_mean  # its home was here: kept importable

ENV_CONFIG = "MCPHOST_CONFIG"
FILE_NAME = "mcphost.toml"


@dataclass(frozen=True)
class ServerSettings:
    """The ``[server]`` section. Every field can be overridden by ``MCPHOST_<FIELD>``."""

    #: ``serverInfo.name`` in the initialize result.
    name: str = "mcphost"
    #: ``serverInfo.version``; unset: mcphost's own version.
    version: str | None = None
    #: ``serverInfo.title`` (2025-06-18 and later).
    title: str | None = None
    #: Instructions for the client's model, sent in the initialize result.
    instructions: str | None = None
    #: Address the HTTP transport listens on.
    host: str = "127.0.0.1"
    #: Port the HTTP transport listens on.
    port: int = 8000
    #: Path of the MCP endpoint.
    path: str = "/mcp"
    #: HTTP worker processes on one socket; more than one needs a shared state backend (mcphost-redis).
    workers: int = 1
    #: Largest request body (HTTP) or line (stdio) accepted, in bytes.
    max_body_bytes: int = 4 * 1024 * 1024
    #: Largest HTTP request header block (request line and headers), in bytes; beyond it, 431.
    max_header_bytes: int = 16 * 1024
    #: Seconds an HTTP request body may take to arrive in full; then 408 and the connection is closed.
    body_timeout: float = 30.0
    #: Page size of tools/list, resources/list, prompts/list and resources/templates/list.
    page_size: int = 100
    #: Seconds a server-to-client request (elicitation, sampling, roots) waits for its answer.
    client_request_timeout: float = 300.0
    #: Seconds each plugin's ``mcphost_connect`` (and ``mcphost_authenticate``) may take (at most 30);
    #: one that takes longer, or raises CancelledError, refuses the client (503 over HTTP, -32001 over
    #: stdio) naming the plugin.
    connect_timeout: float = 10.0
    #: Seconds every other plugin hook without a deadline of its own may take (``mcphost_disconnect``,
    #: ``mcphost_terminate``, ``mcphost_exception``, ``mcphost_shutdown``); one that takes longer is
    #: abandoned, logged with its plugin's name.
    hook_timeout: float = 10.0
    #: Seconds a tools/call may run before it is cancelled (0: no limit). Session era: error -32001;
    #: 2026-07-28: an isError result. Calls that became tasks are limited by task_ttl instead.
    max_tool_seconds: float = 600.0
    #: Seconds a ``resources/read``, ``prompts/get`` or ``completion/complete`` handler may run before
    #: it is cancelled (0: no limit); then error -32001 naming this setting.
    max_handler_seconds: float = 120.0
    #: Requests one session may have in flight at once; more are refused with -32000.
    max_inflight: int = 64
    #: Threads that run synchronous (``def``) tools, resources, prompts and completions, so one that
    #: blocks never freezes the event loop; more calls at once wait for a free thread.
    sync_workers: int = 16
    #: Threads of that pool one principal may hold at once (anonymous callers: per client address);
    #: its further synchronous calls wait behind its own, not behind everyone's. 0: a quarter of
    #: sync_workers (at least one).
    sync_workers_per_principal: int = 0
    #: Resource subscriptions one session may hold (``resources/subscribe``), and entries one
    #: ``subscriptions/listen`` filter may name; beyond this, -32602.
    max_subscriptions: int = 1000
    #: Longest resource URI a session may subscribe to or name in a listen filter, in bytes; longer, -32602.
    max_uri_bytes: int = 2048
    #: Longest URI a ``resources/read`` may name, in bytes; longer is refused with -32602 before it is
    #: matched against any template (twice RFC 9110's recommended minimum of 8000; a 2026-07-28
    #: request repeats the URI in its Mcp-Name header, within max_header_bytes anyway).
    max_read_uri_bytes: int = 16 * 1024
    #: Largest ``capabilities`` plus ``clientInfo`` of an ``initialize`` (kept for the session's
    #: life), as JSON bytes; larger, -32602.
    max_client_info_bytes: int = 65536
    #: Standalone GET streams (resumptions included) one session may have open at once; beyond
    #: this, 409.
    max_streams_per_session: int = 8
    #: Bytes of finished replies one session may leave unread for resumption (a client that
    #: dropped its connection); beyond this the oldest such streams are dropped, and resuming one
    #: gets 400.
    max_retained_bytes: int = 16 * 1024 * 1024
    #: The same over all sessions of one principal (anonymous callers: per client address); beyond
    #: it that principal's oldest unread streams are dropped first. 0: only the per-session budget.
    max_retained_bytes_per_principal: int = 64 * 1024 * 1024
    #: The same over every session in this process. 0: no global budget.
    max_retained_bytes_total: int = 1024 * 1024 * 1024
    #: Seconds without a request before a session expires.
    session_idle_timeout: float = 1800.0
    #: Seconds a session-era session that sent no request after its initialize lives (an
    #: initialize-and-leave client): it holds one of its principal's ``max_sessions_per_principal``
    #: only that long, so a flood of them locks no one out for longer. Any later request (the
    #: ``notifications/initialized`` that follows at once too) makes it an ordinary session.
    embryonic_timeout: float = 10.0
    #: Seconds after which a session ends however active it is (0 = no limit).
    session_max_lifetime: float = 0.0
    #: Sessions held at once; beyond this, initialize is refused (503 with Retry-After on HTTP).
    max_sessions: int = 10000
    #: Sessions one principal may hold at once (anonymous callers share one count per client address);
    #: beyond this its initialize is refused (429 with Retry-After on HTTP). 0: only max_sessions.
    max_sessions_per_principal: int = 500
    #: Requests one principal may have in flight at once over all its sessions, 2026-07-28
    #: ``subscriptions/listen`` streams included (anonymous callers: per client address); beyond
    #: this, 429 with Retry-After on HTTP, error -32000 in-band. 0: no limit.
    max_requests_per_principal: int = 256
    #: Requests in flight at once in this process over all principals (standalone GET streams and
    #: ``subscriptions/listen`` streams included); beyond this, 503 with Retry-After. 0: no limit.
    max_requests: int = 4096
    #: Resource subscriptions one principal may hold over all its sessions (anonymous callers: per
    #: client address), and all principals together in this process; beyond them, -32602.
    max_subscriptions_per_principal: int = 5000
    #: Resource subscriptions of all principals together in this process (0: no limit).
    max_subscriptions_total: int = 100000
    #: Parked runs of resumable (``resumable=True``) 2026-07-28 calls, per principal (anonymous:
    #: per client address) and in all in this process; a resumable call beyond them gets -32000.
    max_parked_per_principal: int = 50
    #: Parked runs of resumable 2026-07-28 calls of all principals together in this process (0: no limit).
    max_parked: int = 1000
    #: Bytes of arguments (and answers) those parked runs hold, per principal and in all in this
    #: process: a resumable call beyond them gets -32000 saying "bytes" and naming the setting.
    max_parked_bytes_per_principal: int = 16 * 1024 * 1024
    max_parked_bytes: int = 256 * 1024 * 1024
    #: Bytes of the questions (elicitation, sampling, roots requests) a principal's calls have out
    #: to their client and wait on, per principal and in all in this process: the question beyond
    #: them fails its call with -32000 saying "bytes" and naming the setting (0: no limit).
    max_question_bytes_per_principal: int = 4 * 1024 * 1024
    max_question_bytes: int = 64 * 1024 * 1024
    #: Addresses of proxies trusted to report the client's address (``X-Forwarded-For``,
    #: ``Forwarded``): behind them the forwarded address tells anonymous clients apart (their
    #: quotas are per address). Hypercorn's setting of the same name; ``*`` trusts any. Empty: the
    #: socket address counts.
    forwarded_allow_ips: tuple[str, ...] = ()
    #: Level of the host's own log on stderr.
    log_level: str = "info"
    #: Host headers accepted over HTTP (``host`` or ``host:port``); empty on a loopback bind means
    #: the loopback names, elsewhere any (then set it, or put auth in front).
    allowed_hosts: tuple[str, ...] = ()
    #: Origin headers accepted over HTTP (``scheme://host[:port]``); same defaulting as allowed_hosts.
    allowed_origins: tuple[str, ...] = ()
    #: Answer requests with a single JSON body instead of an SSE stream (no progress, no
    #: server-to-client requests mid-call, no resumption; slightly faster).
    json_response: bool = False
    #: Seconds between SSE keep-alive comments on an idle stream.
    sse_keepalive: float = 15.0
    #: Seconds an SSE write may wait on a client that reads nothing before the stream is closed
    #: (its events stay in the log, so the client can resume).
    sse_write_timeout: float = 30.0
    #: Milliseconds a client should wait before reconnecting (the SSE ``retry`` field).
    sse_retry_ms: int = 1000
    #: Seconds a standalone GET stream or a 2026-07-28 ``subscriptions/listen`` stream stays open at
    #: most (0: no limit); then it ends gracefully (the listen stream with its result) and the client
    #: reconnects. Streams of a principal whose credentials expire earlier end at that expiry.
    max_stream_seconds: float = 3600.0
    #: Events kept per stream for resumption with Last-Event-ID (older ones are trimmed).
    stream_max_events: int = 1000
    #: Seconds an idle keep-alive connection stays open. Keep it above the idle timeout of the clients
    #: and load balancers in front (httpx 5 s; raise it above a balancer's 60 s), so that they, not
    #: the server, close idle connections: a request sent just as the server closes is lost. Hypercorn
    #: also holds a connection the client closed while idle until this runs out, so it is not free.
    keep_alive_timeout: float = 10.0
    #: Seconds in-flight requests get to finish on shutdown before they are cancelled.
    graceful_timeout: float = 30.0
    #: Seconds a stopping process keeps serving while /readyz already answers 503, so a load balancer
    #: takes it out of rotation before it stops accepting connections (a rolling restart then loses
    #: no request). Default: 3 with a shared backend (several nodes), 0 alone.
    shutdown_drain: float | None = None
    #: Keys that seal 2026-07-28 requestState (HMAC): the first signs, all verify (rotation).
    #: Empty: on a shared backend (mcphost-redis), one key ring kept in the backend and shared by every
    #: process; on the in-memory backend, a random key per process (sealed states do not survive a restart).
    state_keys: tuple[str, ...] = ()
    #: Seconds a sealed requestState stays valid.
    state_ttl: float = 600.0
    #: Accept each sealed requestState once (claimed in the backend, so across processes of a shared
    #: one): a replayed retry gets the same fixed rejection as a tampered state.
    single_use_states: bool = False
    #: ttlMs put on cacheable 2026-07-28 results (discover, lists, resources/read).
    cache_ttl_ms: int = 0
    #: Seconds a call of a task-capable tool runs before it becomes a task (2026-07-28 tasks extension).
    task_after: float = 0.2
    #: Seconds a task's record (status, then result) is kept from its creation (its ttlMs).
    task_ttl: float = 3600.0
    #: How often clients should poll tasks/get (pollIntervalMs).
    task_poll_interval_ms: int = 500
    #: Tasks this process runs at once; beyond this, calls that would become tasks get -32000.
    max_tasks: int = 1000
    #: Tasks one principal may have running at once in this process (anonymous callers: per client
    #: address); beyond this its calls that would become tasks get -32000. 0: only max_tasks.
    max_tasks_per_principal: int = 50
    #: On a shared backend: seconds after which a running task whose process stopped restamping it
    #: (every third of this) is reported failed by whichever process is asked about it.
    task_lease: float = 10.0
    #: The canonical URL of the MCP endpoint as clients reach it (``https://mcp.example.com/mcp``):
    #: the ``resource`` of the protected resource metadata and the audience tokens must name.
    #: Unset: derived from each request (scheme, Host, path), which is wrong behind most proxies.
    resource_url: str | None = None
    #: With an auth plugin installed, let requests that no plugin authenticates through as
    #: anonymous (they hold no scopes) instead of answering 401.
    allow_anonymous: bool = False
    #: With an auth plugin installed, plugin routes (``mcphost_routes``: ``/metrics``...) require the
    #: same authentication as the MCP endpoint. They always get its Host and Origin checks.
    routes_require_auth: bool = False


@dataclass(frozen=True)
class Config:
    """The whole configuration: server settings, plugin selection and per-plugin sections."""

    server: ServerSettings = field(default_factory=ServerSettings)
    plugins: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    block: tuple[str, ...] = ()
    allow: tuple[str, ...] | None = None
    strict: bool = False
    path: Path | None = None
    #: Tables of the sections declared with :func:`declare_section`, by name, as read.
    sections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: ``[endpoints.NAME]`` sections: curated views of the catalog, each at its own path.
    endpoints: Mapping[str, EndpointSettings] = field(default_factory=dict)

    def plugin(self, name: str) -> Mapping[str, Any]:
        """The ``[plugins.<name>]`` section, empty when absent."""
        return self.plugins.get(name, {})


def default_path() -> Path:
    return Path(platformdirs.user_config_dir("mcphost")) / FILE_NAME


def resolve_path(explicit: str | os.PathLike[str] | None = None,
                 env: Mapping[str, str] | None = None) -> tuple[Path, bool]:
    """The config file to read and whether it must exist (it must when named explicitly)."""
    env = os.environ if env is None else env
    if explicit:
        return Path(explicit), True
    if env.get(ENV_CONFIG):
        return Path(env[ENV_CONFIG]), True
    return default_path(), False


class ConfigErrors(ConfigError):
    """Every problem found in the configuration at once, one per line (each naming file and key)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)


def _type_name(kind: Any) -> str:
    return str(kind).replace("tuple[str, ...]", "a list of strings")


def _coerce(name: str, kind: Any, value: Any, source: str, *, from_env: bool) -> Any:
    """``value`` as the type of ``ServerSettings.<name>``. From the environment a string is parsed;
    from the file the TOML type must already be right (``port = "8000"`` is an error)."""
    text = str(kind)
    try:
        if "tuple" in text:
            if from_env and isinstance(value, str):
                value = [part.strip() for part in value.split(",") if part.strip()]
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                raise TypeError
            return tuple(value)
        if text.startswith("bool") or kind is bool:
            if from_env and isinstance(value, str) and value.lower() in _BOOLEAN_WORDS:
                return value.lower() in ("1", "true", "yes", "on")
            if not isinstance(value, bool):
                raise TypeError
            return value
        if text.startswith("int") or kind is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise TypeError
            if isinstance(value, str) and not from_env:
                raise TypeError
            return int(value)
        if text.startswith("float") or kind is float:
            if isinstance(value, bool) or (isinstance(value, str) and not from_env):
                raise TypeError
            return float(value)
        if "str" in text:
            if value is None and "None" in text:
                return None
            if not isinstance(value, str):
                raise TypeError
            return value
    except (TypeError, ValueError):
        raise ConfigError(f"{source}: server.{name} must be {_type_name(kind)}, not {value!r}") from None
    return value


_BOOLEAN_WORDS = ("1", "true", "yes", "on", "0", "false", "no", "off")


def read_config_file(explicit: str | os.PathLike[str] | None = None,
                     env: Mapping[str, str] | None = None) -> tuple[dict[str, Any], Path | None]:
    """The parsed TOML of the file in effect (empty without one) and its path; ConfigError when a
    named file is missing or a file cannot be parsed."""
    env = os.environ if env is None else env
    path, required = resolve_path(explicit, env)
    if path.is_file():
        try:
            return tomllib.loads(path.read_text(encoding="utf-8")), path
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read the configuration: {exc}") from None
    if required:
        raise ConfigError(f"{path}: configuration file not found")
    return {}, None


def load_config(explicit: str | os.PathLike[str] | None = None,
                env: Mapping[str, str] | None = None) -> Config:
    """Read and check the configuration; raise :class:`ConfigErrors` naming every problem."""
    env = os.environ if env is None else env
    data, path = read_config_file(explicit, env)
    return config_from_dict(data, env=env, path=path)


#: The top-level sections of the file, each with the JSON Schema of its table. ``[server]`` is checked
#: field by field against :class:`ServerSettings` (below) and ``[plugins]`` here; another part of
#: mcphost adds a section with :func:`declare_section`, and the checks below cover it without change.
SECTIONS: dict[str, dict[str, Any]] = {
    "server": {"type": "object"},
    "plugins": {
        "type": "object",
        "properties": {
            "block": {"type": "array", "items": {"type": "string"}},
            "allow": {"type": "array", "items": {"type": "string"}},
            "strict": {"type": "boolean"},
        },
        # [plugins.<name>]: checked against that plugin's own schema (check_plugin_sections)
        "additionalProperties": {"type": "object"},
    },
    # [endpoints.<name>]: curated views of the catalog (mcphost.endpoints)
    "endpoints": ENDPOINTS_SCHEMA,
}


def declare_section(name: str, schema: Mapping[str, Any]) -> None:
    """Declare a top-level ``[name]`` section and the JSON Schema of its table (raw data in
    ``Config.sections[name]``); unknown sections stay errors with a did-you-mean."""
    SECTIONS[name] = dict(schema)


def _schema_problems(source: str, prefix: str, schema: Mapping[str, Any], value: Any) -> list[str]:
    """Every violation of ``schema`` by ``value``, one message each, unknown keys with a did-you-mean."""
    validator_cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    problems: list[str] = []
    for error in sorted(validator_cls(schema).iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path]):
        where = ".".join([prefix, *(str(p) for p in error.absolute_path)])
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            node = error.schema if isinstance(error.schema, Mapping) else {}
            known = list(node.get("properties", {}))
            for key in sorted(set(error.instance) - set(known)):
                problems.append(f"{source}: [{where}] unknown key {key!r}{did_you_mean(key, known)}")
            continue
        problems.append(f"{source}: [{where}] {_shown_message(error)}")
    return problems


def _shown_message(error: jsonschema.ValidationError) -> str:
    """The validator's message, which quotes the value: never a secret's (mcphost.redaction)."""
    message = error.message
    names = [str(p) for p in error.absolute_path if isinstance(p, str)]
    if names and is_secret_name(names[-1]) and isinstance(error.instance, str) and error.instance:
        message = message.replace(repr(error.instance), repr(REDACTED))
    return redact_text(message)


def config_from_dict(data: Mapping[str, Any], *, env: Mapping[str, str] | None = None,
                     path: Path | None = None) -> Config:
    """Build a Config from parsed TOML data and environment overrides.

    Every problem is found before any is reported: :class:`ConfigErrors` lists them all, each
    naming the file (or variable) and the key.
    """
    env = {} if env is None else env
    source = str(path) if path else "configuration"
    problems: list[str] = []
    for name in data:
        if name not in SECTIONS:
            problems.append(f"{source}: [{name}] unknown section{did_you_mean(name, SECTIONS)}; "
                            f"known: {', '.join(f'[{s}]' for s in SECTIONS)}")
    for name, value in data.items():
        if name in SECTIONS:
            if not isinstance(value, dict):
                problems.append(f"{source}: [{name}] must be a table, not {type(value).__name__}")
            else:
                problems += _schema_problems(source, name, SECTIONS[name], value)
    server_table = data.get("server", {})
    server = _server_settings(server_table if isinstance(server_table, dict) else {}, env, source, problems)
    if problems:
        raise ConfigErrors(problems)
    assert server is not None
    plugins = dict(data.get("plugins", {}))
    block = plugins.pop("block", [])
    allow = plugins.pop("allow", None)
    strict = plugins.pop("strict", False)
    sections = {name: value for name, value in data.items() if name not in ("server", "plugins")}
    try:  # what the schema cannot say: default paths under server.path, no path served twice
        endpoints = endpoints_from_dict(data.get("endpoints", {}), server.path, source)
    except ConfigError as exc:
        raise ConfigErrors([str(exc)]) from None
    return Config(server=server, plugins=plugins, block=tuple(block),
                  allow=None if allow is None else tuple(allow), strict=strict, path=path, sections=sections,
                  endpoints=endpoints)


def _server_settings(table: Mapping[str, Any], env: Mapping[str, str], source: str,
                     problems: list[str]) -> ServerSettings | None:
    fields = {f.name: f for f in dataclasses.fields(ServerSettings)}
    values: dict[str, Any] = {}
    for name, value in table.items():
        if name not in fields:
            problems.append(f"{source}: [server] unknown key {name!r}{did_you_mean(name, fields)}")
            continue
        try:
            values[name] = _coerce(name, fields[name].type, value, source, from_env=False)
        except ConfigError as exc:
            problems.append(str(exc))
    for name in fields:
        raw = env.get(f"MCPHOST_{name.upper()}")
        if raw is not None:
            try:
                values[name] = _coerce(name, fields[name].type, raw, f"$MCPHOST_{name.upper()}", from_env=True)
            except ConfigError as exc:
                problems.append(str(exc))
    if problems:
        return None
    server = ServerSettings(**values)
    problems += server_problems(server, source)
    if server.resource_url is not None and not problems:
        try:
            server = dataclasses.replace(server, resource_url=canonical_resource_url(server.resource_url))
        except ValueError as exc:
            problems.append(f"{source}: server.resource_url: {exc}")
    return server


def server_problems(server: ServerSettings, source: str) -> list[str]:
    """What is wrong with settings each of the right type (ranges, forms), one message each."""
    problems: list[str] = []

    def check(ok: bool, message: str) -> None:
        if not ok:
            problems.append(f"{source}: {message}")

    check(server.path.startswith("/"), f"server.path must start with '/', not {server.path!r}")
    check(0 <= server.port <= 65535, f"server.port must be 0-65535, not {server.port}")
    for name in ("max_body_bytes", "max_header_bytes", "page_size", "max_inflight", "max_sessions", "workers",
                 "stream_max_events", "max_tasks", "task_poll_interval_ms", "sync_workers", "max_subscriptions",
                 "max_uri_bytes", "max_read_uri_bytes", "max_client_info_bytes", "max_streams_per_session",
                 "max_retained_bytes"):
        check(getattr(server, name) >= 1, f"server.{name} must be at least 1")
    check(all(len(key.encode()) >= 16 for key in server.state_keys),
          "server.state_keys must each be at least 16 bytes (use 32 random bytes)")
    check(server.body_timeout > 0, "server.body_timeout must be positive")
    check(0 < server.connect_timeout <= 30, "server.connect_timeout must be more than 0 and at most 30 seconds")
    check(server.hook_timeout > 0, "server.hook_timeout must be positive")
    check(server.embryonic_timeout > 0, "server.embryonic_timeout must be positive")
    check(server.state_ttl > 0 and server.cache_ttl_ms >= 0,
          "server.state_ttl must be positive and server.cache_ttl_ms not negative")
    check(server.shutdown_drain is None or 0 <= server.shutdown_drain <= 300,
          "server.shutdown_drain must be 0-300 seconds")
    check(server.keep_alive_timeout > 0, "server.keep_alive_timeout must be positive")
    for name in ("max_sessions_per_principal", "max_requests_per_principal", "max_tasks_per_principal",
                 "sync_workers_per_principal", "max_requests", "max_subscriptions_per_principal",
                 "max_subscriptions_total", "max_parked_per_principal", "max_parked",
                 "max_parked_bytes_per_principal", "max_parked_bytes",
                 "max_question_bytes_per_principal", "max_question_bytes",
                 "max_retained_bytes_per_principal", "max_retained_bytes_total"):
        check(getattr(server, name) >= 0, f"server.{name} must not be negative (0 means no limit)")
    for item in server.forwarded_allow_ips:
        check(_is_network(item), f"server.forwarded_allow_ips: {item[:60]!r} is not an address, a network "
                                 "(10.0.0.0/8) or '*'")
    check(server.max_stream_seconds >= 0, "server.max_stream_seconds must not be negative (0 means no limit)")
    check(server.max_tool_seconds >= 0, "server.max_tool_seconds must not be negative (0 means no limit)")
    check(server.max_handler_seconds >= 0, "server.max_handler_seconds must not be negative (0 means no limit)")
    check(server.task_ttl > 0 and server.task_after >= 0 and server.task_lease > 0,
          "server.task_ttl and task_lease must be positive, server.task_after not negative")
    check(server.log_level.lower() in ("debug", "info", "warning", "error", "critical"),
          "server.log_level must be debug, info, warning, error or critical")
    return problems


def _is_network(item: str) -> bool:
    if item.strip() == "*":
        return True
    try:
        ipaddress.ip_network(item.strip(), strict=False)
    except ValueError:
        return False
    return True


def bind_plugin_sections(config: Config, declared: Mapping[str, Mapping[str, Any] | SettingsModel],
                         installed: Iterable[str] | None = None) -> tuple[dict[str, pydantic.BaseModel], list[str]]:
    """Check every ``[plugins.<name>]`` section at once: each against what its plugin declares (a
    settings model, or a JSON Schema), and the names against ``installed``.

    Returns each settings model's checked instance by plugin name, and every problem found.
    ``installed``: every plugin name the host knows (loaded, disabled or not configured); a section
    for any other name is reported with a did-you-mean. None: do not check names.
    """
    source = str(config.path) if config.path else "configuration"
    problems: list[str] = []
    bound: dict[str, pydantic.BaseModel] = {}
    if installed is not None:
        known = sorted(set(installed))
        for name in config.plugins:
            if name not in known:
                problems.append(f"{source}: [plugins.{name}] no plugin named {name!r} is installed"
                                f"{did_you_mean(name, known)}; installed: {', '.join(known) or 'none'}")
    for name, schema in declared.items():
        if isinstance(schema, type):
            instance, found = bind_settings(schema, config.plugin(name), name, source)
            problems += found
            if instance is not None:
                bound[name] = instance
            continue
        validator_cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            validator_cls.check_schema(schema)  # type: ignore[arg-type]  # the stubs say dict; jsonschema takes any Mapping
        except jsonschema.SchemaError as exc:
            problems.append(f"plugin {name!r} declares an invalid config schema: {exc.message}")
            continue
        problems += _schema_problems(source, f"plugins.{name}", schema, dict(config.plugin(name)))
    return bound, problems


def check_plugin_sections(config: Config, declared: Mapping[str, Mapping[str, Any] | SettingsModel],
                          installed: Iterable[str] | None = None) -> list[str]:
    """Problems in the ``[plugins.<name>]`` sections, all at once (see :func:`bind_plugin_sections`)."""
    return bind_plugin_sections(config, declared, installed)[1]


def validate_plugin_sections(config: Config, schemas: Mapping[str, Mapping[str, Any]],
                             installed: Iterable[str] | None = None) -> None:
    """Check each ``[plugins.<name>]`` (see :func:`check_plugin_sections`); raise ConfigErrors with every problem."""
    problems = check_plugin_sections(config, schemas, installed)
    if problems:
        raise ConfigErrors(problems)
