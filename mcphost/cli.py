"""The ``mcphost`` command line: serve, inspect plugins and the catalog, run a tool, show config."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Iterable
from typing import Any

import click

from mcphost import __version__
from mcphost.config import Config, config_from_dict, load_config, resolve_path
from mcphost.errors import ConfigError, McpError, PluginError
from mcphost.host import Host
from mcphost.plugins import PluginInfo, PluginSelection, load_plugins, make_plugin_manager

#: The plugin manager ``main`` loaded (to let plugins add commands), by the selection it honoured:
#: the command then uses it instead of loading the plugins a second time.
_loaded: tuple[PluginSelection, Any, dict[str, PluginInfo]] | None = None


def _selection(config: Config, block: Iterable[str], allow: list[str] | None, strict: bool) -> PluginSelection:
    """Which plugins to load: the flags, the environment and the config file, in one place."""
    return PluginSelection.from_env(block=(*config.block, *block), allow=allow, config_allow=config.allow,
                                    strict=strict or config.strict)


class Options:
    """Global options shared by every subcommand."""

    def __init__(self, config_path: str | None, block: tuple[str, ...], allow: str | None, strict: bool) -> None:
        self.config_path = config_path
        self.block = block
        self.allow = _names(allow)
        self.strict = strict

    def config(self) -> Config:
        try:
            return load_config(self.config_path)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from None

    def selection(self, config: Config) -> PluginSelection:
        return _selection(config, self.block, self.allow, self.strict)

    def host(self, config: Config | None = None, *, prepare: bool = True) -> Host:
        config = config or self.config()
        selection = self.selection(config)
        loaded = _loaded[1:] if _loaded is not None and _loaded[0] == selection else None
        try:
            host = Host(config, selection=selection, loaded=loaded)
            if prepare:
                host.prepare()
        except (ConfigError, PluginError) as exc:
            raise click.ClickException(str(exc)) from None
        return host


def _names(value: str | None) -> list[str] | None:
    return [a.strip() for a in value.split(",") if a.strip()] if value else None


def _setup_logging(level: str) -> None:
    logging.basicConfig(stream=sys.stderr, level=level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
    config = options.config()
    overrides = {k: v for k, v in (("host", bind_host), ("port", port), ("path", mcp_path),
                                   ("workers", workers)) if v is not None}
    if overrides:
        try:
            config = config_from_dict({"server": {**_server_dict(config), **overrides},
                                       "plugins": {**config.plugins, "block": list(config.block),
                                                   **({"allow": list(config.allow)} if config.allow is not None
                                                      else {}), "strict": config.strict}},
                                      path=config.path)
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
        from mcphost.serve import check_bind, run_workers, serve_http
        try:
            check_bind(host, allow_remote=allow_remote)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from None
        if worker_fd is not None:  # a fresh worker: plugins loaded now, the supervisor's socket
            import socket as socket_module
            runner = serve_http(host, sock=socket_module.socket(fileno=worker_fd), ready_fd=ready_fd)
        elif config.server.workers > 1:
            host.prepare()  # plugins and catalog once, before forking
            raise SystemExit(run_workers(host, config.server.workers))
        else:
            runner = serve_http(host)
    try:
        asyncio.run(runner)
    except KeyboardInterrupt:
        pass


def _server_dict(config: Config) -> dict[str, Any]:
    import dataclasses
    return {k: v for k, v in dataclasses.asdict(config.server).items() if v is not None}


def _table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows, strict=False)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths, strict=False))]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)) for row in rows]
    return "\n".join(line.rstrip() for line in lines)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--all", "show_all", is_flag=True, help="Include built-in plugins.")
@click.pass_obj
def plugins(options: Options, as_json: bool, show_all: bool) -> None:
    """List plugins: name, version, status, hooks and what each provides."""
    host = options.host()
    infos = [i for i in host.plugin_infos.values() if show_all or not i.builtin]
    if as_json:
        click.echo(json.dumps([info.to_json() for info in infos], indent=2))
        return
    rows = [[i.name, i.distribution or "-", i.version or "-", i.status + (f" ({i.error})" if i.error else ""),
             ", ".join(h.removeprefix("mcphost_") for h in i.hooks) or "-",
             "; ".join(f"{k}: {', '.join(v)}" for k, v in i.provides.items()) or "-"] for i in infos]
    click.echo(_table(rows, ["NAME", "DISTRIBUTION", "VERSION", "STATUS", "HOOKS", "PROVIDES"])
               if rows else "No plugins installed.")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def tools(options: Options, as_json: bool) -> None:
    """List every tool in the merged catalog, with the plugin that provides it."""
    host = options.host()
    entries = [entry.record for entry in host.catalog.tools.values()]
    if as_json:
        from mcphost.kernel.handlers import tool_descriptor
        data = [{**tool_descriptor(t, "2025-11-25"),
                 "plugin": t.provenance.plugin if t.provenance else None,
                 "distribution": t.provenance.distribution if t.provenance else None} for t in entries]
        click.echo(json.dumps(data, indent=2))
        return
    rows = [[t.name, t.provenance.plugin if t.provenance else "-", (t.description or "").split("\n")[0][:70]]
            for t in entries]
    click.echo(_table(rows, ["TOOL", "PLUGIN", "DESCRIPTION"]) if rows else "No tools.")


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
@click.pass_obj
def call(options: Options, tool_name: str, args: tuple[str, ...], json_args: str | None) -> None:
    """Run a tool locally and print its result as JSON (exit 1 on an error result)."""
    try:
        arguments: dict[str, Any] = json.loads(json_args) if json_args else {}
    except ValueError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--json-args") from None
    if not isinstance(arguments, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--json-args")
    host = options.host()
    entry = host.catalog.tools.get(tool_name)
    schema = dict(entry.record.input_schema) if entry is not None else {}
    arguments.update(_parse_arg(pair, schema) for pair in args)
    from mcphost.transports.memory import MemoryTransport

    async def run() -> dict[str, Any]:
        async with MemoryTransport(host) as client:
            return await client.call_tool(tool_name, arguments)

    try:
        result = asyncio.run(run())
    except McpError as exc:
        raise click.ClickException(f"{tool_name}: {exc.message}") from None
    click.echo(json.dumps(result, indent=2))
    if result.get("isError"):
        sys.exit(1)


@cli.command("rotate-state-key")
@click.pass_obj
def rotate_state_key(options: Options) -> None:
    """Rotate the requestState key every process of a cluster shares (a shared backend, no state_keys).

    The new key is verified everywhere at once and signs about a minute later, once every process
    has read it; the old one keeps verifying for a state_ttl after that.
    """
    from mcphost.sessions.backend import BackendUnavailable
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
    except BackendUnavailable as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"rotated: the new key signs in {KEY_ACTIVATION:.0f}s; {kept} key(s) in the ring")


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
            "path": str(cfg.path) if cfg.path else None}
    click.echo(json.dumps(data, indent=2, default=str))


@config.command("schema")
@click.pass_obj
def config_schema(options: Options) -> None:
    """Print the JSON Schema each plugin declares for its [plugins.<name>] section."""
    click.echo(json.dumps(options.host(prepare=False).config_schemas(), indent=2))


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
    click.echo(f"Next: pip install -e '{root}[test]' && pytest {root}")


def main() -> None:
    """Entry point of the ``mcphost`` console script: plugins may add commands first."""
    if "serve" in sys.argv[1:] and "--stdio" in sys.argv[1:]:
        # Before any plugin is imported: whatever they print must not reach the protocol stream.
        from mcphost.transports.stdio import protect_stdout
        protect_stdout()
    global _loaded
    # One plugin manager for the whole command, honouring --config, --disable-plugin, --plugins
    # and --strict-plugins (read here, before click runs, since plugins may add commands): a
    # plugin those block is never imported.
    config_path, block, allow, strict = _global_options(sys.argv[1:])
    try:
        config = load_config(config_path)
    except ConfigError:
        config = Config()  # the command itself reports the broken file
    selection = _selection(config, block, _names(allow), strict)
    pm = make_plugin_manager()
    try:
        infos = load_plugins(pm, selection)
        _loaded = (selection, pm, infos)
        pm.hook.mcphost_register_commands(cli=cli)
    except Exception as exc:  # a plugin's commands must not make the whole CLI unusable
        logging.getLogger("mcphost.cli").warning("plugin commands unavailable: %s", exc)
    cli(prog_name="mcphost")


def _global_options(argv: list[str]) -> tuple[str | None, tuple[str, ...], str | None, bool]:
    """The group's own options as click will read them (whatever follows is left alone)."""
    try:
        ctx = cli.make_context("mcphost", list(argv), resilient_parsing=True)
    except (click.ClickException, click.exceptions.Exit):
        return None, (), None, False
    params = ctx.params
    return (params.get("config_path"), tuple(params.get("block") or ()), params.get("allow"),
            bool(params.get("strict")))
