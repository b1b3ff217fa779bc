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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcphost import ConfigError, redact, redact_text

_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
#: ``${NAME}`` in a header value (or an env value) names an environment variable of the host.
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

_SERVER_PROPERTIES: dict[str, Any] = {
    "command": {"type": "string", "minLength": 1, "description": "stdio: the program to run"},
    "args": {"type": "array", "items": {"type": "string"}, "description": "stdio: its arguments"},
    "env": {"type": "object", "additionalProperties": {"type": "string"},
            "description": "stdio: extra environment variables (values may use ${VAR})"},
    "cwd": {"type": "string", "description": "stdio: working directory"},
    "url": {"type": "string", "pattern": "^https?://", "description": "Streamable HTTP: the MCP endpoint"},
    "headers": {"type": "object", "additionalProperties": {"type": "string"},
                "description": "Streamable HTTP: request headers; ${VAR} names an environment variable"},
    "prefix": {"type": "string", "description": "prepended to tool and prompt names (default 'NAME_')"},
    "include": {"type": "array", "items": {"type": "string"},
                "description": "glob patterns of upstream names to mount (default: all)"},
    "exclude": {"type": "array", "items": {"type": "string"}, "description": "glob patterns of names to hide"},
    "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "seconds per upstream request"},
    "era": {"enum": ["session", "auto"],
            "description": "'session' (default): speak the session era to the upstream so it can ask "
                           "questions mid-call; 'auto': let the upstream choose (2026-07-28 if it can)"},
    "start": {"enum": ["startup", "lazy"],
              "description": "'startup' (default): start with the host; 'lazy': at the first request"},
    "per_session": {"type": "boolean",
                    "description": "one upstream connection per client session (stateful upstreams)"},
    "questions": {"enum": ["shared", "own_process"],
                  "description": "stdio: 'shared' (default): every call runs on the one process (its state is "
                                 "shared); 'own_process': a call whose client can answer questions leases a "
                                 "process of its own from a pool of max_instances (stateless upstreams)"},
    "max_queued": {"type": "integer", "minimum": 0,
                   "description": "own_process: calls that may wait for a free process (each at most timeout)"},
    "enabled": {"type": "boolean", "description": "false: keep the entry but do not mount it"},
    "max_message_bytes": {"type": "integer", "minimum": 1024,
                          "description": "largest message read from the upstream (a stdio line, an HTTP "
                                         "JSON body or SSE event); a larger one fails only its call"},
    "max_description_chars": {"type": "integer", "minimum": 0,
                              "description": "longer descriptions: the record is skipped with a warning"},
    "max_schema_bytes": {"type": "integer", "minimum": 2,
                         "description": "larger input/output schemas: the tool is skipped with a warning"},
    "max_instances": {"type": "integer", "minimum": 1,
                      "description": "per_session, own_process: most upstream processes/connections at once"},
    "max_instances_per_principal": {"type": "integer", "minimum": 1,
                                    "description": "per_session: most instances one principal holds"},
    "idle_timeout": {"type": "number", "exclusiveMinimum": 0,
                     "description": "per_session, own_process: seconds an unused instance is kept before it "
                                    "is stopped"},
}

#: Defaults of the per-server limits (docs/proxy.md, "Limits").
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
MAX_DESCRIPTION_CHARS = 16 * 1024
MAX_SCHEMA_BYTES = 256 * 1024
MAX_INSTANCES = 16
MAX_QUEUED = 64
IDLE_TIMEOUT = 300.0

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "servers": {
            "type": "object",
            "additionalProperties": {"type": "object", "properties": _SERVER_PROPERTIES,
                                     "additionalProperties": False},
            "description": "upstream MCP servers by name",
        },
        "mcp_servers_file": {
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
            "description": "JSON file(s) in the mcpServers format MCP clients use",
        },
        "restart_backoff": {"type": "number", "exclusiveMinimum": 0,
                            "description": "first delay (seconds) before restarting a dead upstream; doubles"},
        "restart_backoff_max": {"type": "number", "exclusiveMinimum": 0,
                                "description": "longest delay between restarts"},
        "startup_timeout": {"type": "number", "exclusiveMinimum": 0,
                            "description": "seconds after which an upstream that has not listed is reported "
                                           "(it is still mounted when it does)"},
        "max_parked_calls": {"type": "integer", "minimum": 1,
                             "description": "calls one principal may have waiting for its answers (2026-07-28)"},
        "max_parked_bytes": {"type": "integer", "minimum": 1024,
                             "description": "bytes (of arguments) those parked calls may hold, per principal"},
        "max_starting": {"type": "integer", "minimum": 1,
                         "description": "stdio upstreams starting at once (until each first answers); default: "
                                        "the machine's CPUs"},
        "startup_wait": {"type": "number", "minimum": 0,
                         "description": "seconds the host's startup waits for the upstreams to list before "
                                        "it serves (default 0: it serves at once)"},
    },
    "additionalProperties": False,
}


@dataclass(frozen=True)
class ServerSettings:
    """One upstream server, resolved: either ``command`` (stdio) or ``url`` (Streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    #: Header values as configured; ``${VAR}`` is resolved when connecting (see :meth:`resolved_headers`).
    headers: Mapping[str, str] = field(default_factory=dict)
    prefix: str = ""
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    timeout: float = 60.0
    era: str = "session"
    start: str = "startup"
    per_session: bool = False
    #: stdio: "shared" (one process serves every call) or "own_process" (see docs/proxy.md, Questions).
    questions: str = "shared"
    max_queued: int = MAX_QUEUED
    max_message_bytes: int = MAX_MESSAGE_BYTES
    max_description_chars: int = MAX_DESCRIPTION_CHARS
    max_schema_bytes: int = MAX_SCHEMA_BYTES
    max_instances: int = MAX_INSTANCES
    #: None: no share per principal beyond max_instances.
    max_instances_per_principal: int | None = None
    idle_timeout: float = IDLE_TIMEOUT

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


@dataclass(frozen=True)
class ProxySettings:
    servers: tuple[ServerSettings, ...] = ()
    restart_backoff: float = 0.5
    restart_backoff_max: float = 30.0
    startup_timeout: float = 30.0
    startup_wait: float = 0.0
    max_parked_calls: int = 32
    max_parked_bytes: int = 32 * 1024 * 1024
    #: stdio upstreams starting at once (None: the machine's CPUs).
    max_starting: int | None = None


def load_settings(section: Mapping[str, Any], *, base: Path | None = None) -> ProxySettings:
    """Resolve the validated ``[plugins.proxy]`` section (and the mcpServers files it names)."""
    raw: dict[str, dict[str, Any]] = {}
    files = section.get("mcp_servers_file") or []
    for file in [files] if isinstance(files, str) else files:
        raw.update(read_mcp_servers_file(Path(file).expanduser() if base is None
                                         else (base / Path(file).expanduser())))
    for name, table in (section.get("servers") or {}).items():
        raw[name] = dict(table)
    servers = tuple(server_settings(name, table) for name, table in raw.items() if table.get("enabled", True))
    return ProxySettings(servers=servers,
                         restart_backoff=float(section.get("restart_backoff", 0.5)),
                         restart_backoff_max=float(section.get("restart_backoff_max", 30.0)),
                         startup_timeout=float(section.get("startup_timeout", 30.0)),
                         startup_wait=float(section.get("startup_wait", 0.0)),
                         max_parked_calls=int(section.get("max_parked_calls", 32)),
                         max_parked_bytes=int(section.get("max_parked_bytes", 32 * 1024 * 1024)),
                         max_starting=int(section["max_starting"]) if "max_starting" in section else None)


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


def server_settings(name: str, table: Mapping[str, Any]) -> ServerSettings:
    where = f"[plugins.proxy.servers.{name}]"
    if not _NAME.match(name):
        raise ConfigError(f"{where}: server names are 1-64 characters of A-Z a-z 0-9 _ . -")
    unknown = set(table) - set(_SERVER_PROPERTIES)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    command, url = table.get("command"), table.get("url")
    if bool(command) == bool(url):
        raise ConfigError(f"{where}: give either command (stdio) or url (Streamable HTTP)")
    if url is not None and not re.match(r"^https?://", str(url)):
        raise ConfigError(f"{where}.url: must start with http:// or https://")
    if command is not None and (table.get("headers")):
        raise ConfigError(f"{where}: headers apply to url servers only")
    if url is not None and any(table.get(k) for k in ("args", "env", "cwd")):
        raise ConfigError(f"{where}: args, env and cwd apply to command servers only")
    for key in ("args", "include", "exclude"):
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}.{key}: must be a list of strings")
    for key in ("env", "headers"):
        value = table.get(key, {})
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ConfigError(f"{where}.{key}: must be a table of strings")
    era = table.get("era", "session")
    if era not in ("session", "auto"):
        raise ConfigError(f"{where}.era: 'session' or 'auto', not {era!r}")
    start = table.get("start", "startup")
    if start not in ("startup", "lazy"):
        raise ConfigError(f"{where}.start: 'startup' or 'lazy', not {start!r}")
    questions = table.get("questions", "shared")
    if questions not in ("shared", "own_process"):
        raise ConfigError(f"{where}.questions: 'shared' or 'own_process', not {questions!r}")
    if questions == "own_process" and (url is not None or table.get("per_session")):
        raise ConfigError(f"{where}.questions: 'own_process' is for stdio servers without per_session (an HTTP "
                          "upstream's questions come on their call's own stream)")
    timeout = table.get("timeout", 60.0)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise ConfigError(f"{where}.timeout: a positive number of seconds")
    limits: dict[str, Any] = {}
    for key, least in (("max_message_bytes", 1024), ("max_description_chars", 0), ("max_schema_bytes", 2),
                       ("max_instances", 1), ("max_instances_per_principal", 1), ("max_queued", 0)):
        if key in table:
            value = table[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ConfigError(f"{where}.{key}: an integer of at least {least}")
            limits[key] = value
    if "idle_timeout" in table:
        idle = table["idle_timeout"]
        if not isinstance(idle, int | float) or isinstance(idle, bool) or idle <= 0:
            raise ConfigError(f"{where}.idle_timeout: a positive number of seconds")
        limits["idle_timeout"] = float(idle)
    prefix = table.get("prefix", f"{name}_")
    if not isinstance(prefix, str) or (prefix and not re.match(r"^[A-Za-z0-9_.\-/]*$", prefix)):
        raise ConfigError(f"{where}.prefix: characters A-Z a-z 0-9 _ . - / only")
    return ServerSettings(
        name=name, command=command, args=tuple(table.get("args", [])), env=dict(table.get("env", {})),
        cwd=table.get("cwd"), url=url, headers=dict(table.get("headers", {})), prefix=prefix,
        include=tuple(table.get("include", [])), exclude=tuple(table.get("exclude", [])),
        timeout=float(timeout), era=era, start=start, per_session=bool(table.get("per_session", False)),
        questions=questions, **limits)
