"""The ``mcphost`` command line: serve, inspect plugins and the catalog, run a tool, show config."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from mcphost import __version__
from mcphost.errors import ConfigError, McpError, PluginError

T = TypeVar("T")

if TYPE_CHECKING:
    from mcphost.config import Config
    from mcphost.host import Host
    from mcphost.pins import PinStore
    from mcphost.plugins import PluginInfo, PluginSelection


def _selection(config: Config, block: Iterable[str], allow: list[str] | None, strict: bool) -> PluginSelection:
    """Which plugins to load: the flags, the environment and the config file, in one place."""
    from mcphost.plugins import PluginSelection
    return PluginSelection.from_env(block=(*config.block, *block), allow=allow, config_allow=config.allow,
                                    strict=strict or config.strict)


def _load(selection: PluginSelection) -> tuple[Any, dict[str, PluginInfo]]:
    """The plugin manager and report for ``selection``, loaded once per command (kept on the root
    click context: looking for a plugin's command, then running it, loads the plugins once)."""
    ctx = click.get_current_context(silent=True)
    meta: dict[str, Any] = ctx.find_root().meta if ctx is not None else {}
    loaded = meta.get("mcphost.loaded")
    if loaded is not None and loaded[0] == selection:
        return loaded[1], loaded[2]
    from mcphost.plugins import load_plugins, make_plugin_manager
    pm = make_plugin_manager()
    try:
        infos = load_plugins(pm, selection)
    except Exception as exc:  # strict mode re-raises a plugin's import error
        raise click.ClickException(f"a plugin failed to load (strict mode): {type(exc).__name__}: {exc}") from None
    meta["mcphost.loaded"] = (selection, pm, infos)
    return pm, infos


def _problems_message(problems: list[str]) -> str:
    if len(problems) == 1:
        return problems[0]
    return f"{len(problems)} problems in the configuration:\n  " + "\n  ".join(problems)


class Options:
    """Global options shared by every subcommand."""

    def __init__(self, config_path: str | None, block: tuple[str, ...], allow: str | None, strict: bool) -> None:
        self.config_path = config_path
        self.block = block
        self.allow = _names(allow)
        self.strict = strict

    def config(self) -> Config:
        from mcphost.config import load_config
        try:
            return load_config(self.config_path)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from None

    def selection(self, config: Config) -> PluginSelection:
        return _selection(config, self.block, self.allow, self.strict)

    def checked(self) -> Config:
        """The configuration, checked whole against the core schema and every loaded plugin's schema.

        Every problem (unknown sections and keys with a did-you-mean, wrong types, values out of
        range, plugin sections) is reported at once, before any plugin's other hooks run and before
        anything binds.
        """
        from mcphost.config import Config, ConfigErrors, check_plugin_sections, config_from_dict, read_config_file
        try:
            data, path = read_config_file(self.config_path)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from None
        problems: list[str] = []
        config: Config | None = None
        try:
            config = config_from_dict(data, env=os.environ, path=path)
        except ConfigErrors as exc:
            problems += exc.problems
        # With core problems, the plugin sections are still checked, against the selection the flags
        # and environment make (the file's own block/allow may be what is broken).
        table = data.get("plugins") if isinstance(data.get("plugins"), dict) else {}
        sections = {k: v for k, v in (table or {}).items() if isinstance(v, dict)}
        probe = config or Config(plugins=sections, path=path)
        pm, infos = _load(self.selection(probe))
        from mcphost.plugins import declared_settings
        schemas, declaring = declared_settings(pm)
        problems += declaring
        problems += check_plugin_sections(probe, schemas, [n for n, i in infos.items() if not i.builtin])
        if problems:
            raise click.ClickException(_problems_message(problems))
        assert config is not None
        return config

    def host(self, config: Config | None = None, *, prepare: bool = True, kernel: bool = True) -> Host:
        """The host of this configuration, prepared (``kernel=False``: only collected, for commands
        that list what it would serve: see :meth:`Host.collect`)."""
        from mcphost.host import Host
        config = config or self.checked()
        selection = self.selection(config)
        try:
            host = Host(config, selection=selection, loaded=_load(selection))
            if prepare and kernel:
                host.prepare()
            elif prepare:
                host.collect()
        except (ConfigError, PluginError) as exc:
            raise click.ClickException(str(exc)) from None
        return host


def _names(value: str | None) -> list[str] | None:
    return [a.strip() for a in value.split(",") if a.strip()] if value else None


def _setup_logging(level: str) -> None:
    from mcphost.redaction import redact_logs
    logging.basicConfig(stream=sys.stderr, level=level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    redact_logs()  # no secret in the log: upstream URLs, commands and errors are redacted


class _Commands(click.Group):
    """The top-level group: its own commands need no plugin; a name it does not know loads the
    plugins (honouring the global options) to look for a command one of them adds."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is not None or ctx.resilient_parsing:
            return found
        params = ctx.params  # the group's callback has not run yet: its options are parsed, though
        options = Options(params.get("config_path"), tuple(params.get("block") or ()), params.get("allow"),
                          bool(params.get("strict")))
        try:
            selection = options.selection(options.config())
            pm, _ = _load(selection)
            pm.hook.mcphost_register_commands(cli=self)
        except Exception as exc:  # a plugin's commands must not make the whole CLI unusable
            logging.getLogger("mcphost.cli").warning("plugin commands unavailable: %s", exc)
        return super().get_command(ctx, cmd_name)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Plugins may add commands (hook mcphost_register_commands); run one by its name. "
                    "Shell completion: eval \"$(_MCPHOST_COMPLETE=bash_source mcphost)\" (zsh_source, fish_source).")
@click.version_option(__version__, "--version", "-V", prog_name="mcphost", message="%(prog)s %(version)s")
@click.option("--config", "config_path", metavar="FILE", help="Configuration file (default: $MCPHOST_CONFIG, "
              "then mcphost.toml in the user config directory).")
@click.option("--disable-plugin", "block", multiple=True, metavar="NAME",
              help="Do not load this plugin (entry-point or distribution name). Repeatable. "
                   "Env: MCPHOST_DISABLE_PLUGINS=a,b")
@click.option("--plugins", "allow", metavar="A,B", help="Load only these plugins (built-ins always load). "
              "Env: MCPHOST_PLUGINS")
@click.option("--strict-plugins", "strict", is_flag=True, help="Fail on the first plugin that does not load. "
              "Env: MCPHOST_STRICT_PLUGINS=1")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, block: tuple[str, ...], allow: str | None,
        strict: bool) -> None:
    """mcphost: a plugin host for the Model Context Protocol."""
    ctx.obj = Options(config_path, block, allow, strict)


@cli.command()
@click.option("--stdio", is_flag=True, help="Serve one client on stdin/stdout instead of HTTP.")
@click.option("--host", "bind_host", metavar="ADDRESS", help="Address to bind (default 127.0.0.1).")
@click.option("--port", type=int, help="Port to bind (default 8000).")
@click.option("--path", "mcp_path", metavar="PATH", help="Path of the MCP endpoint (default /mcp).")
@click.option("--workers", type=int, help="Worker processes (needs a shared backend such as mcphost-redis).")
@click.option("--allow-remote", is_flag=True,
              help="Listen on a non-loopback address without auth or allowed_hosts (something in front "
                   "of mcphost must authenticate).")
@click.option("--reload", "reload_", is_flag=True,
              help="Restart the server when a source file of an installed plugin changes (for plugin "
                   "authors; needs watchfiles: pip install 'mcphost[reload]').")
@click.option("--worker-fd", type=int, hidden=True)  # a replacement worker started by the supervisor (SIGHUP)
@click.option("--ready-fd", type=int, hidden=True)
@click.pass_obj
def serve(options: Options, stdio: bool, bind_host: str | None, port: int | None, mcp_path: str | None,
          workers: int | None, allow_remote: bool, reload_: bool = False, worker_fd: int | None = None,
          ready_fd: int | None = None) -> None:
    """Serve the installed plugins to MCP clients (Streamable HTTP, or stdio with --stdio)."""
    config = options.checked()
    overrides: dict[str, Any] = {k: v for k, v in (("host", bind_host), ("port", port), ("path", mcp_path),
                                   ("workers", workers)) if v is not None}
    if overrides:
        import dataclasses

        from mcphost.config import server_problems
        config = dataclasses.replace(config, server=dataclasses.replace(config.server, **overrides))
        problems = server_problems(config.server, "command line")
        if problems:
            raise click.ClickException(_problems_message(problems))
        if "path" in overrides and config.endpoints:  # their default paths lie under server.path
            from mcphost.endpoints import endpoints_from_dict
            try:
                config = dataclasses.replace(config, endpoints=endpoints_from_dict(
                    {name: dict(e.table) for name, e in config.endpoints.items()}, config.server.path,
                    "command line"))
            except ConfigError as exc:
                raise click.ClickException(str(exc)) from None
    _setup_logging(config.server.log_level)
    if reload_ and not os.environ.get("MCPHOST_RELOAD_CHILD"):
        if stdio:
            raise click.ClickException("--reload serves HTTP; a stdio client cannot follow a restart")
        from mcphost.reload import run_with_reload
        extra = [config.path] if config.path else []
        raise SystemExit(run_with_reload(sys.argv[1:], extra_paths=extra))
    host = options.host(config)
    if stdio:
        from mcphost.transports.stdio import serve_stdio
        runner = serve_stdio(host)
    else:
        from mcphost.serve import check_exposure, check_workers, run_workers, serve_http
        try:
            check_exposure(host, allow_remote=allow_remote)  # the policy first: it names --allow-remote
            if worker_fd is None:
                _check_address(config.server.host, config.server.port)  # before any plugin starts
            check_workers(host)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from None
        if worker_fd is not None:  # a fresh worker: plugins loaded now, the supervisor's socket
            import socket as socket_module
            runner = serve_http(host, sock=socket_module.socket(fileno=worker_fd), ready_fd=ready_fd)
        elif config.server.workers > 1:
            host.prepare()  # plugins and catalog once, before forking
            try:
                code = run_workers(host, config.server.workers)
            except OSError as exc:  # lost a race for the port since the check
                raise click.ClickException(_address_problem(config.server.host, config.server.port, exc)) from None
            raise SystemExit(code)
        else:
            runner = serve_http(host)
    try:
        asyncio.run(runner)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        if stdio or exc.errno not in _BIND_ERRNOS:
            raise
        raise click.ClickException(_address_problem(config.server.host, config.server.port, exc)) from None


def _address_problem(host: str, port: int, exc: OSError) -> str:
    """One line naming the address that cannot be listened on, and what to do about it."""
    import errno
    if exc.errno == errno.EADDRINUSE:
        return (f"port {port} on {host} is already in use: stop the server listening there (ss -ltnp "
                f"'sport = :{port}' shows it) or choose another port with --port")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"port {port} on {host} needs privileges this user lacks: choose a port above 1023 with --port"
    return (f"cannot listen on {host}:{port} ({exc.strerror or exc}): give an address of this machine with "
            "--host (127.0.0.1 for this machine only, 0.0.0.0 for every interface)")


def _bind_errnos() -> frozenset[int]:
    import errno
    return frozenset({errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES, errno.EPERM, errno.EAFNOSUPPORT})


_BIND_ERRNOS = _bind_errnos()


def _check_address(host: str, port: int) -> None:
    """Exit with one line (no traceback) when ``host:port`` cannot be listened on: a busy port, an
    address this machine does not have, a privileged port. Binds and closes a probe socket."""
    import socket
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {host!r} is not an address or a name this "
                                   f"machine resolves ({exc}); use --host 127.0.0.1 or --host 0.0.0.0") from None
    for family, kind, proto, _, address in infos[:1]:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
            try:
                probe.bind(address)
            except OSError as exc:
                raise click.ClickException(_address_problem(host, port, exc)) from None


def _table(rows: list[list[str]], headers: list[str], width: int | None = None, wrap: Iterable[int] = (-1,)) -> str:
    """Columns padded to fit. Beyond ``width`` the ``wrap`` columns (by index; the last by default) are
    narrowed and their cells wrapped onto more lines, never cut; without a width, lines are whole."""
    count = len(headers)
    cells = [[str(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(count)]
    wrapped = sorted({i % count for i in wrap})
    if width and sum(widths) + 2 * (count - 1) > width and wrapped:
        fixed = sum(w for i, w in enumerate(widths) if i not in wrapped) + 2 * (count - 1)
        room = max(width - fixed, 12 * len(wrapped))
        # Each wrapped column gets at least its longest word (so no word is broken) where the room
        # allows; what is left is shared in proportion to what each would still take.
        least = {i: min(widths[i], max(12, *(len(w) for row in cells for w in row[i].split()))) for i in wrapped}
        if sum(least.values()) > room:
            least = {i: 12 for i in wrapped}
        spare, wanted = room - sum(least.values()), sum(widths[i] - least[i] for i in wrapped)
        for i in wrapped:
            widths[i] = least[i] + (spare * (widths[i] - least[i]) // wanted if wanted else 0)
    import textwrap
    lines = []
    for row in cells:
        parts = [textwrap.wrap(c, widths[i], break_on_hyphens=False) or [""] if i in wrapped else [c]
                 for i, c in enumerate(row)]
        for n in range(max(len(p) for p in parts)):
            lines.append("  ".join((p[n] if n < len(p) else "").ljust(widths[i])
                                   for i, p in enumerate(parts)).rstrip())
    return "\n".join(lines)


def _terminal_width() -> int | None:
    """The terminal's width; None when the output is piped (whole lines for grep), unless COLUMNS says."""
    import shutil
    if not os.environ.get("COLUMNS", "").strip().isdigit() and not sys.stdout.isatty():
        return None
    return max(60, shutil.get_terminal_size((100, 24)).columns)


def _provides(provides: dict[str, list[Any]]) -> str:
    """What a plugin provides, counted (``3 tools, 1 prompt``); names are in --json."""
    order = ["tools", "resources", "resourceTemplates", "prompts", "middleware"]
    parts = []
    for kind in sorted(provides, key=lambda k: order.index(k) if k in order else len(order)):
        count = len(provides[kind])
        noun = {"resourceTemplates": "templates"}.get(kind, kind)
        parts.append(f"{count} {noun.removesuffix('s') if count == 1 else noun}")
    return ", ".join(parts)


def _status(record: dict[str, Any]) -> str:
    """A plugin's status from its record (``introspect.plugins``: its error already redacted)."""
    if record["status"] == "not configured":
        return f"not configured: {record.get('wake')}"
    if record.get("error"):
        return f"{record['status']}: {record['error']}"
    return str(record["status"])


def _start_options(command: Any) -> Any:
    """``--start`` and ``--wait``: run the plugins' start-up (mcphost-proxy starts its upstreams) and
    show what they mount, as a fresh ``mcphost serve`` would serve it."""
    command = click.option("--wait", type=click.FloatRange(0, 600), default=10.0, show_default=True,
                           metavar="SECONDS", help="With --start: the longest wait for what is starting.")(command)
    return click.option("--start", "start", is_flag=True,
                        help="Start the plugins (mcphost-proxy's upstreams) for at most --wait seconds, show what "
                             "they mount and each upstream's state, protocol version and extensions, then stop "
                             "them.")(command)


def _snapshot(host: Host, start: bool, wait: float, take: Any) -> Any:
    """``take(host)``: at once, or (``start``) with the host started until nothing reports itself
    ``starting`` (``mcphost_readiness``) or ``wait`` seconds passed, then stopped again."""
    if not start:
        return take(host)

    async def run() -> Any:
        loop = asyncio.get_running_loop()
        await host.start()
        try:
            deadline = loop.time() + wait
            while any(item.state == "starting" for _, item in host.unready()) and loop.time() < deadline:
                await asyncio.sleep(0.05)
            return take(host)
        finally:
            await host.stop()

    try:
        return asyncio.run(run())
    except (ConfigError, PluginError) as exc:
        raise click.ClickException(str(exc)) from None


def _upstream_rows(reports: dict[str, Any]) -> list[list[str]]:
    """One row per upstream a plugin reports (mcphost-proxy's ``mcphost_status``: Upstream.describe)."""
    rows = []
    for plugin, report in reports.items():
        listed = report.get("upstreams") if isinstance(report, dict) else None
        for item in listed if isinstance(listed, list) else ():
            state = str(item.get("state"))
            if item.get("restarts"):
                state += f" ({item['restarts']} restarts)"
            error = item.get("error") if item.get("state") != "running" else None
            rows.append([str(item.get("name")), plugin, state, str(item.get("era") or "-"),
                         str(item.get("tools", 0)), " ".join(item.get("extensions") or ()) or "-",
                         "yes" if item.get("required") else "no", str(error or "-")])
    return rows


def _not_started_note(rows: list[list[str]], start: bool) -> None:
    if rows and not start:
        click.echo(f"note: {len(rows)} upstream(s) not started: --start starts them to show their state, "
                   "protocol version, extensions and tools (a running server's are on its console)", err=True)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the whole record of each plugin as JSON.")
@click.option("--all", "show_all", is_flag=True, help="Include built-in plugins.")
@_start_options
@click.pass_obj
def plugins(options: Options, as_json: bool, show_all: bool, start: bool = False, wait: float = 10.0) -> None:
    """List plugins: name, version, status and what each provides (--json: hooks, names, the whole record),
    then the upstreams they mount: state, protocol version, tools, extensions."""
    import copy

    from mcphost.introspect import plugins as plugin_records

    # A copy: stopping (after --start) rewrites what plugins list in their report.
    records = _snapshot(options.host(kernel=start), start, wait, lambda host: copy.deepcopy(plugin_records(host)))
    records = [r for r in records if show_all or not r["builtin"]]
    if as_json:  # the records carry each upstream in their "report"
        click.echo(json.dumps(records, indent=2))
        return
    if not records:
        click.echo("No plugins installed.")
        return
    rows = [[r["name"], r.get("version") or "-", _status(r), _provides(r["provides"]) or "-"] for r in records]
    width = _terminal_width()
    click.echo(_table(rows, ["NAME", "VERSION", "STATUS", "PROVIDES"], width, wrap=(2, 3)))
    upstreams = _upstream_rows({r["name"]: r["report"] for r in records})
    if upstreams:
        click.echo("")
        click.echo(_table(upstreams, ["UPSTREAM", "PLUGIN", "STATE", "PROTOCOL", "TOOLS", "EXTENSIONS", "REQUIRED",
                                      "LAST ERROR"], width, wrap=(5, 7)))
    _not_started_note(upstreams, start)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--endpoint", metavar="NAME", help="Only the tools [endpoints.NAME] selects (before scopes).")
@click.option("--search", "query", metavar="QUERY", help="Rank the tools for QUERY as search_tools does.")
@_start_options
@click.pass_obj
def tools(options: Options, as_json: bool, endpoint: str | None, query: str | None, start: bool = False,
          wait: float = 10.0) -> None:
    """List every tool in the merged catalog, with the plugin (and upstream) that provides it."""
    from mcphost.introspect import status_reports

    def take(host: Host) -> tuple[list[Any], dict[str, Any]]:
        entries = [entry.record for entry in host.catalog.tools.values()]
        if endpoint is not None or query is not None:
            entries = _endpoint_tools(host, endpoint, query)
        return entries, status_reports(host)

    entries, reports = _snapshot(options.host(kernel=start), start, wait, take)
    if as_json:
        from mcphost.kernel.handlers import tool_descriptor
        data = [{**tool_descriptor(t, "2025-11-25"),
                 "plugin": t.provenance.plugin if t.provenance else None,
                 "upstream": t.provenance.origin if t.provenance else None,
                 "distribution": t.provenance.distribution if t.provenance else None} for t in entries]
        click.echo(json.dumps(data, indent=2))
        return
    rows = [[t.name, _provider(t), (t.description or "").split("\n")[0]] for t in entries]
    click.echo(_table(rows, ["TOOL", "PLUGIN", "DESCRIPTION"], _terminal_width()) if rows else "No tools.")
    _not_started_note(_upstream_rows(reports), start)


def _provider(record: Any) -> str:
    """The plugin providing ``record``, and the upstream it comes through (``proxy (files)``)."""
    provenance = record.provenance
    if provenance is None:
        return "-"
    return f"{provenance.plugin} ({provenance.origin})" if provenance.origin else provenance.plugin


def _endpoint_tools(host: Any, endpoint: str | None, query: str | None) -> list[Any]:
    """The tools of ``endpoint``'s view (all: None), ranked for ``query`` when one is given."""
    from mcphost.kernel.views import EndpointView, Views
    catalog = host.catalog
    view: EndpointView | None = None
    if endpoint is not None:
        if endpoint not in host.config.endpoints:
            known = ", ".join(sorted(host.config.endpoints)) or "none configured"
            raise click.ClickException(f"no endpoint {endpoint!r} (known: {known})")
        view = EndpointView(host.config.endpoints[endpoint])
    keys = view.keys(catalog, "tools") if view is not None else set(catalog.tools)
    if query is None:
        return [entry.record for name, entry in catalog.tools.items() if name in keys]
    views = Views({}, lambda: catalog)
    views.index_sync()
    return [catalog.tools[name].record for name, _ in views.index.search(query, 10, keys.__contains__)]


def _parse_arg(pair: str, schema: dict[str, Any]) -> tuple[str, Any]:
    """KEY=VALUE: VALUE is JSON when it parses, except for string parameters, which take it verbatim."""
    if "=" not in pair:
        raise click.BadParameter(f"{pair!r}: expected KEY=VALUE", param_hint="--arg")
    key, raw = pair.split("=", 1)
    if schema.get("properties", {}).get(key, {}).get("type") == "string":
        return key, raw
    try:
        return key, json.loads(raw)
    except ValueError:
        return key, raw


@cli.command()
@click.argument("tool_name")
@click.option("--arg", "args", multiple=True, metavar="KEY=VALUE",
              help="An argument; VALUE is parsed as JSON when it can be, else taken as a string.")
@click.option("--json-args", metavar="JSON", help="All arguments as one JSON object.")
@click.option("--answer", "answers", multiple=True, metavar="KEY=VALUE",
              help="Answer a field of a form the tool asks for (elicitation) without being asked; "
                   "url=accept|decline for a URL elicitation. Repeatable.")
@click.pass_obj
def call(options: Options, tool_name: str, args: tuple[str, ...], json_args: str | None,
         answers: tuple[str, ...]) -> None:
    """Run a tool locally and print its result as JSON (exit 1 on an error result).

    A form the tool asks for is prompted field by field on the terminal (or filled from --answer);
    a URL it asks you to open is printed; sampling is refused (there is no model here).
    """
    from mcphost.questions import CAPABILITIES, TerminalAnswers, parse_answers
    try:
        arguments: dict[str, Any] = json.loads(json_args) if json_args else {}
    except ValueError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--json-args") from None
    if not isinstance(arguments, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--json-args")
    terminal = TerminalAnswers(parse_answers(answers))
    host = options.host()
    entry = host.catalog.tools.get(tool_name)
    schema = dict(entry.record.input_schema) if entry is not None else {}
    arguments.update(_parse_arg(pair, schema) for pair in args)
    from mcphost.transports.memory import MemoryTransport

    async def run() -> dict[str, Any]:
        _exit_soon_after_ctrl_c()
        async with MemoryTransport(host, capabilities=CAPABILITIES, handlers=terminal.handlers()) as client:
            result = await client.call_tool(tool_name, arguments)
        task = asyncio.current_task()
        if task is not None and task.cancelling():  # Ctrl-C: the kernel ended the call; do not print it
            raise asyncio.CancelledError
        return result

    try:
        result = asyncio.run(run())
    except McpError as exc:
        raise click.ClickException(f"{tool_name}: {exc.message}") from None
    click.echo(json.dumps(result, indent=2))
    if result.get("isError"):
        sys.exit(1)


#: Seconds a Ctrl-C'd ``mcphost call`` may take to wind down before it exits regardless.
CTRL_C_GRACE = 5.0


def _exit_soon_after_ctrl_c() -> None:
    """Chain onto asyncio's own SIGINT handler (which cancels the call): a wind-down that does not
    end within CTRL_C_GRACE (a tool or hook that ignores cancellation) is cut short with exit
    status 1, as a finished Ctrl-C would give."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return  # signals reach only the main thread's handlers
    previous = signal.getsignal(signal.SIGINT)

    def on_sigint(signum: int, frame: Any) -> None:
        def give_up() -> None:
            sys.stderr.write("\nAborted! (the call did not wind down in time)\n")
            sys.stderr.flush()
            os._exit(1)

        timer = threading.Timer(CTRL_C_GRACE, give_up)
        timer.daemon = True
        timer.start()
        if callable(previous):
            previous(signum, frame)
        else:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)


@cli.command()
@click.argument("target", metavar="FILE_OR_PACKAGE")
@click.option("--host", "bind_host", default="127.0.0.1", show_default=True, metavar="ADDRESS",
              help="Address to bind (loopback: this is a development server).")
@click.option("--port", type=int, default=8000, show_default=True, help="Port to bind.")
@click.option("--path", "mcp_path", default="/mcp", show_default=True, metavar="PATH", help="MCP endpoint path.")
@click.option("--stdio", is_flag=True, help="Serve one client on stdin/stdout instead (no reload).")
@click.option("--reload/--no-reload", "reload_", default=True, show_default=True,
              help="Restart when the module (or an installed plugin) changes; needs watchfiles.")
@click.option("--inspector", is_flag=True, help="Also start the MCP Inspector (npx @modelcontextprotocol/inspector).")
@click.pass_obj
def dev(options: Options, target: str, bind_host: str, port: int, mcp_path: str, stdio: bool, reload_: bool,
        inspector: bool) -> None:
    """Serve one module without packaging it: an mcphost plugin module, or a FastMCP / MCPServer module.

    FILE_OR_PACKAGE is a .py file, a package folder or a module name. Only that module is served
    (installed plugins are left out); the configuration file still applies.
    """
    import dataclasses

    from mcphost.dev import DevError, inspector_command, inspector_hint, resolve
    if stdio:
        from mcphost.transports.stdio import protect_stdout
        protect_stdout()
    try:
        found = resolve(target)  # import it now: a broken module is reported before anything starts
    except DevError as exc:
        raise click.ClickException(str(exc)) from None
    config = options.config()
    server = dataclasses.replace(config.server, host=bind_host, port=port, path=mcp_path, workers=1)
    config = dataclasses.replace(config, server=server)
    _setup_logging(config.server.log_level)
    url = f"http://{bind_host}:{port}{mcp_path}"
    child = bool(os.environ.get("MCPHOST_RELOAD_CHILD"))
    if reload_ and not stdio and not child:
        try:
            import watchfiles  # noqa: F401 - only whether it is there
        except ImportError:
            click.echo("(no reload: pip install 'mcphost[reload]' for watchfiles)", err=True)
        else:
            _check_address(bind_host, port)
            _announce_dev(found, url, inspector_hint(url))
            from mcphost.reload import run_with_reload
            with _inspector(inspector, inspector_command):
                raise SystemExit(run_with_reload(sys.argv[1:], extra_paths=list(found.watch)))
    from mcphost.host import Host
    from mcphost.plugins import PluginSelection
    selection = PluginSelection(entry_points=False)
    try:
        host = Host(config, plugins=[(found.name, found.plugin)], selection=selection)
        host.prepare()
    except (ConfigError, PluginError) as exc:
        raise click.ClickException(str(exc)) from None
    failed = [i for i in host.plugin_infos.values() if i.status == "failed"]
    if failed:
        raise click.ClickException(f"{target}: {failed[0].error}")
    if stdio:
        from mcphost.transports.stdio import serve_stdio
        runner = serve_stdio(host)
    else:
        if not child:
            _check_address(bind_host, port)
            _announce_dev(found, url, inspector_hint(url), host)
        from mcphost.serve import serve_http
        runner = serve_http(host)
    with _inspector(inspector and not child and not stdio, inspector_command):
        try:
            asyncio.run(runner)
        except KeyboardInterrupt:
            pass


def _announce_dev(found: Any, url: str, hint: str, host: Host | None = None) -> None:
    what = ""
    if host is not None:
        info = host.plugin_infos.get(found.name)
        what = f": {_provides(info.provides)}" if info is not None and info.provides else ""
    click.echo(f"Serving {found.name} ({found.style}-style{what}) on {url}", err=True)
    click.echo(hint, err=True)


class _inspector:
    """Start the MCP Inspector for the block's duration (when asked and npx is there); stop it by pid."""

    def __init__(self, wanted: bool, command: Any) -> None:
        self.wanted, self.command = wanted, command
        self.process: Any = None

    def __enter__(self) -> None:
        if not self.wanted:
            return
        import shutil
        import subprocess
        npx = shutil.which("npx")
        if npx is None:
            click.echo("--inspector needs npx (Node.js); serving without it", err=True)
            return
        self.process = subprocess.Popen(self.command(npx), stdin=subprocess.DEVNULL)

    def __exit__(self, *exc: object) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except Exception:
                process.kill()


@cli.command("rotate-state-key")
@click.pass_obj
def rotate_state_key(options: Options) -> None:
    """Rotate the requestState key every process of a cluster shares (a shared backend, no state_keys).

    The new key is verified everywhere at once and signs about a minute later, once every process
    has read it; the old one keeps verifying for a state_ttl after that.
    """
    from mcphost.sessions.backend import BackendUnavailable, KeyRingUnreadable
    from mcphost.sessions.cluster import KEY_ACTIVATION, STATE_RING

    host = options.host()
    if not host.backend.shared:
        raise click.ClickException("no shared backend is configured (e.g. [plugins.redis] url): each process "
                                   "has its own random key, which a restart replaces")
    if host.config.server.state_keys:
        click.echo("note: [server] state_keys is set, so processes seal with it, not with the shared ring", err=True)

    async def run() -> int:
        await host.backend.start()
        try:
            ring = await host.backend.rotate_keyring(STATE_RING, KEY_ACTIVATION,
                                                     host.config.server.state_ttl + KEY_ACTIVATION)
        finally:
            await host.backend.close()
        return len(ring)

    try:
        kept = asyncio.run(run())
    except (BackendUnavailable, KeyRingUnreadable) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"rotated: the new key signs in {KEY_ACTIVATION:.0f}s; {kept} key(s) in the ring")


@cli.group()
def pins() -> None:
    """Pinned tool, prompt and template definitions (docs/pinning.md): list, diff, approve, reject.

    The command reads the pin store directly: the backend's (the Redis of [plugins.redis] url or
    $MCPHOST_REDIS_URL), else the file under the platform's state directory that belongs to this
    configuration file. A running host notices a change within [plugins.proxy] pins_poll seconds.
    """


def _with_pins(options: Options, work: Callable[[PinStore], Awaitable[T]]) -> T:
    from mcphost.sessions.backend import BackendUnavailable

    host = options.host()

    async def run() -> T:
        await host.backend.start()
        try:
            return await work(host.pin_store())
        finally:
            await host.backend.close()

    try:
        return asyncio.run(run())
    except (BackendUnavailable, OSError) as exc:
        raise click.ClickException(f"the pin store cannot be used: {exc}") from None


@pins.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--upstream", metavar="U", help="Only the pins of upstream (provider) U.")
@click.pass_obj
def pins_list(options: Options, as_json: bool, upstream: str | None) -> None:
    """List every pin: served, or held and awaiting approval."""
    from mcphost import pins as pinning

    listed = [(scope, entry) for scope, entry in _with_pins(options, pinning.everything)
              if upstream is None or pinning.provider_of(scope) == upstream]
    if as_json:
        click.echo(json.dumps([{"upstream": pinning.provider_of(scope), **entry.to_json(),
                                "awaiting": entry.awaiting} for scope, entry in listed], indent=2))
        return
    rows = [[entry.name, entry.kind, pinning.provider_of(scope),
             "awaiting approval" if entry.awaiting else "rejected" if entry.pending is not None else "pinned",
             (entry.hash or "-")[:12]] for scope, entry in listed]
    click.echo(_table(rows, ["NAME", "KIND", "UPSTREAM", "STATE", "PIN"]) if rows else "no pins")


@pins.command("diff")
@click.argument("name")
@click.option("--upstream", metavar="U", help="Only upstream (provider) U's definition of NAME.")
@click.pass_obj
def pins_diff(options: Options, name: str, upstream: str | None) -> None:
    """The word diff of NAME's held definition against its pin ([-removed-] {+added+})."""
    from mcphost import pins as pinning

    found = [(scope, entry) for scope, entry in _with_pins(options, pinning.everything)
             if name in (entry.name, entry.key) and (upstream is None or pinning.provider_of(scope) == upstream)]
    if not found:
        raise click.ClickException(f"no pin named {name!r}")
    for scope, entry in found:
        click.echo(f"{entry.kind[:-1]} {entry.name} (upstream {pinning.provider_of(scope)}): "
                   + ("awaiting approval" if entry.awaiting else "nothing awaits approval"))
        if entry.pending is not None:
            click.echo(entry.diff())


def _decide(options: Options, name: str | None, upstream: str | None, every: bool, approve: bool) -> None:
    from mcphost import pins as pinning

    if (name is None) == (not every):
        raise click.UsageError("give NAME, or --all (with --upstream U for one upstream's)")
    changed = _with_pins(options, lambda store: pinning.decide(store, name, approve=approve, provider=upstream,
                                                               every=every))
    verb = "approved" if approve else "rejected"
    if not changed:
        raise click.ClickException(f"nothing awaiting approval matches {name or 'all'!r}")
    for scope, entry in changed:
        click.echo(f"{verb}: {entry.kind[:-1]} {entry.name} (upstream {pinning.provider_of(scope)})")


@pins.command("approve")
@click.argument("name", required=False)
@click.option("--upstream", metavar="U", help="Only upstream (provider) U's definitions.")
@click.option("--all", "every", is_flag=True, help="Every definition awaiting approval (of U with --upstream).")
@click.pass_obj
def pins_approve(options: Options, name: str | None, upstream: str | None, every: bool) -> None:
    """Approve NAME's new definition: it becomes the pin, and running hosts serve it again."""
    _decide(options, name, upstream, every, True)


@pins.command("reject")
@click.argument("name", required=False)
@click.option("--upstream", metavar="U", help="Only upstream (provider) U's definitions.")
@click.option("--all", "every", is_flag=True, help="Every definition awaiting approval (of U with --upstream).")
@click.pass_obj
def pins_reject(options: Options, name: str | None, upstream: str | None, every: bool) -> None:
    """Reject NAME's new definition: the pin stays, and the definition stays held (no longer awaiting)."""
    _decide(options, name, upstream, every, False)


@cli.command()
def version() -> None:
    """Print the mcphost version."""
    click.echo(f"mcphost {__version__}")


@cli.group()
def config() -> None:
    """Show the configuration, where it is read from, and the schemas plugins declare."""


@config.command("path")
@click.pass_obj
def config_path_cmd(options: Options) -> None:
    """Print the configuration file path in effect."""
    from mcphost.config import resolve_path
    path, _ = resolve_path(options.config_path)
    click.echo(str(path))


@config.command("show")
@click.pass_obj
def config_show(options: Options) -> None:
    """Print the effective configuration (file plus environment) as JSON."""
    import dataclasses
    cfg = options.config()
    data = {"server": dataclasses.asdict(cfg.server), "plugins": {k: dict(v) for k, v in cfg.plugins.items()},
            "block": list(cfg.block), "allow": None if cfg.allow is None else list(cfg.allow),
            "endpoints": {name: {**dict(e.table), "path": e.path} for name, e in cfg.endpoints.items()},
            "path": str(cfg.path) if cfg.path else None}
    from mcphost.redaction import redact
    click.echo(json.dumps(redact(data), indent=2, default=str))


@config.command("check")
@click.pass_obj
def config_check(options: Options) -> None:
    """Check the configuration as `mcphost serve` does (every problem at once); exit 1 on any."""
    config = options.checked()
    click.echo(f"{config.path or 'no configuration file (built-in defaults)'}: ok")


@config.command("schema")
@click.pass_obj
def config_schema(options: Options) -> None:
    """Print the JSON Schema each plugin declares for its [plugins.<name>] section."""
    from mcphost.config import Config
    try:
        config = options.config()
    except click.ClickException:  # the schemas are what one reads to fix a broken file
        config = Config()
    click.echo(json.dumps(options.host(config, prepare=False).config_schemas(), indent=2))


@cli.group()
def new() -> None:
    """Start a new project from a template."""


@new.command("plugin")
@click.argument("name")
@click.option("--directory", "-d", type=click.Path(file_okay=False), default=".", show_default=True,
              help="Where to create the mcphost-NAME folder.")
def new_plugin(name: str, directory: str) -> None:
    """Write a ready plugin package mcphost-NAME: entry point, a tool, a resource, a prompt, tests."""
    from pathlib import Path

    from mcphost.scaffold import ScaffoldError
    from mcphost.scaffold import new_plugin as scaffold_plugin
    try:
        root = scaffold_plugin(name, Path(directory))
    except (ScaffoldError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"Created {root}")
    # Its mcphost requirement is a version range the installed mcphost satisfies: pip keeps it.
    click.echo(f"Next: pip install -e '{root}[test]' && pytest {root} && mcphost plugins")


def main() -> None:
    """Entry point of the ``mcphost`` console script.

    Nothing is loaded up front: ``--version``, ``--help`` and ``version`` load no plugin, each
    command loads what it needs, and a command name mcphost does not know loads the plugins to
    look for one they add.
    """
    argv = sys.argv[1:]
    if "serve" in argv and "--stdio" in argv:
        # Before any plugin is imported: whatever they print must not reach the protocol stream.
        from mcphost.transports.stdio import protect_stdout
        protect_stdout()
    cli(prog_name="mcphost")
