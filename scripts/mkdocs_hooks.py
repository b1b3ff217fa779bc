"""MkDocs hooks for the documentation site (named under ``hooks:`` in mkdocs.yml).

* ``on_files`` adds ``configuration-reference.md``, generated at every build from the code: the
  ``[server]`` settings (``mcphost.config.ServerSettings``: names, types, defaults and the ``#:``
  comment above each field) and the JSON Schema of the settings model every plugin in ``plugins/``
  declares through ``mcphost_settings`` (or the schema of ``mcphost_config_schema``). The page is
  never written by hand, so it cannot go stale.
* ``on_page_markdown`` checks links that leave docs/: one to a file elsewhere in the repository
  (``../benchmarks/README.md``) must point at a file that exists, and becomes a link to it on
  ``repo_url`` when mkdocs.yml sets one (plain text otherwise, since the site does not hold it);
  one that leaves the repository is an error. Both are logged as warnings, which
  ``mkdocs build --strict`` turns into a failed build.

``python scripts/mkdocs_hooks.py`` prints the generated reference.
"""

from __future__ import annotations

import ast
import html
import json
import logging
import re
import tomllib
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
SETTINGS_SOURCE = REPO_ROOT / "mcphost" / "config.py"
REFERENCE_PAGE = "configuration-reference.md"

log = logging.getLogger("mkdocs.hooks.mcphost")


# -- the configuration reference --------------------------------------------------------------------


def _field_comments(source: Path, class_name: str) -> dict[str, str]:
    """Field name -> the ``#:`` comment lines just above it in ``class_name``'s body."""
    text = source.read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    [cls] = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == class_name]
    comments: dict[str, str] = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above: list[str] = []
            row = node.lineno - 2
            while row >= 0 and lines[row].strip().startswith("#:"):
                above.insert(0, lines[row].strip()[2:].strip())
                row -= 1
            comments[node.target.id] = " ".join(above)
    return comments


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _toml(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, tuple | list):
        return "`[" + ", ".join(json.dumps(v) for v in value) + "]`"
    return f"`{json.dumps(value)}`"


_PYTHON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
                 "tuple[str, ...]": "list of strings"}


def _server_section() -> list[str]:
    import dataclasses

    from mcphost.config import ServerSettings

    defaults = ServerSettings()
    comments = _field_comments(SETTINGS_SOURCE, "ServerSettings")
    out = [
        "## `[server]`",
        "",
        "The host's own settings. Each can also be set by the environment variable `MCPHOST_<KEY>`",
        "with the key in capitals (`MCPHOST_PORT=9000`, `MCPHOST_ALLOWED_HOSTS=a.example,b.example`),",
        "which wins over the file. The description is the comment above the field in",
        "`mcphost/config.py`.",
        "",
        "| key | type | default | description |",
        "|---|---|---|---|",
    ]
    for spec in dataclasses.fields(ServerSettings):
        kind = spec.type if isinstance(spec.type, str) else getattr(spec.type, "__name__", str(spec.type))
        kind = kind.replace(" | None", "")
        kind = _PYTHON_TYPES.get(kind, kind)
        description = re.sub(r"``([^`]+)``", r"`\1`", comments.get(spec.name) or "")
        if not description:
            log.warning("ServerSettings.%s has no #: comment in mcphost/config.py to describe it in %s",
                        spec.name, REFERENCE_PAGE)
        out.append(f"| `{spec.name}` | {kind} | {_toml(getattr(defaults, spec.name))} | {_cell(description)} |")
    return out


def _repository_plugins() -> dict[str, Path]:
    """Distribution name -> folder, for every package under plugins/."""
    found: dict[str, Path] = {}
    for pyproject in sorted(REPO_ROOT.glob("plugins/*/pyproject.toml")):
        name = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["name"]
        found[name] = pyproject.parent
    return found


def _constraints(prop: dict[str, Any]) -> str:
    parts = []
    for key, label in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<"),
                       ("minLength", "length >="), ("maxLength", "length <="), ("minItems", "items >="),
                       ("maxItems", "items <=")):
        if key in prop:
            parts.append(f"{label} {prop[key]}")
    if "pattern" in prop:
        # HTML rather than a code span: a table cell cannot hold a literal "|" inside backticks.
        parts.append(f"matches <code>{html.escape(prop['pattern']).replace('|', '&#124;')}</code>")
    if "enum" in prop:
        parts.append("one of " + ", ".join(f"`{v}`" for v in prop["enum"]))
    items = prop.get("items")
    if isinstance(items, dict) and "enum" in items:
        parts.append("each one of " + ", ".join(f"`{v}`" for v in items["enum"]))
    if prop.get("uniqueItems"):
        parts.append("no duplicates")
    return "; ".join(parts)


def _type(prop: dict[str, Any]) -> str:
    kind = prop.get("type", "any")
    if kind == "array":
        item = prop.get("items", {}).get("type", "value") if isinstance(prop.get("items"), dict) else "value"
        return f"list of {item}s"
    return " or ".join(kind) if isinstance(kind, list) else str(kind)


def _flat(prop: dict[str, Any]) -> dict[str, Any]:
    """A property as the table shows it: an optional value (pydantic's ``anyOf`` with null) as its
    type, one of several types as "A or B", a nested model (``$ref``) as a table."""
    members = [m for m in prop.get("anyOf", []) if m.get("type") != "null"]
    if len(members) == 1:
        prop = {**members[0], **{k: v for k, v in prop.items() if k != "anyOf"}}
    elif members:
        prop = {**{k: v for k, v in prop.items() if k != "anyOf"}, "type": " or ".join(_type(m) for m in members)}
    extra = prop.get("additionalProperties")
    patterns = list((prop.get("patternProperties") or {}).values())
    if not isinstance(extra, dict) and len(patterns) == 1:  # a map with its keys' pattern
        extra = patterns[0]
        prop = {k: v for k, v in prop.items() if k != "patternProperties"}
    if "$ref" in prop:
        prop = {**{k: v for k, v in prop.items() if k != "$ref"}, "type": "table"}
    elif isinstance(extra, dict) and "$ref" in extra:
        prop = {**{k: v for k, v in prop.items() if k != "additionalProperties"}, "type": "tables by name",
                "rows": extra["$ref"].rsplit("/", 1)[-1]}
    return prop


def _plugin_section(plugin: str, distribution: str, folder: Path, schema: dict[str, Any]) -> list[str]:
    out = [f"### `[plugins.{plugin}]`", "",
           f"From `{distribution}` (`plugins/{folder.name}`)." + (f" {schema['description']}"
                                                                    if schema.get("description") else ""), ""]
    properties: dict[str, Any] = schema.get("properties", {})
    if properties:
        out += ["| key | type | default | allowed | description |", "|---|---|---|---|---|"]
        rows = list(properties.items())
        while rows:
            key, prop = rows.pop(0)
            prop = _flat(prop)
            default = _toml(prop["default"]) if "default" in prop else ""
            out.append(f"| `{key}` | {_type(prop)} | {default} | {_cell(_constraints(prop))} "
                       f"| {_cell(prop.get('description', ''))} |")
            if "rows" in prop:  # the keys of each table under it, as <key>.NAME.<sub>
                nested = schema.get("$defs", {}).get(prop["rows"], {}).get("properties", {})
                rows[:0] = [(f"{key}.NAME.{sub}", value) for sub, value in nested.items()]
        out.append("")
    rules = []
    if schema.get("additionalProperties") is False:
        rules.append("Any other key is refused.")
    required = schema.get("required") or []
    if required:
        rules.append("Required: " + ", ".join(f"`{k}`" for k in required) + ".")
    if schema.get("if") == {"minProperties": 1} and schema.get("then", {}).get("required"):
        rules.append("Once the section has any key, it needs "
                     + ", ".join(f"`{k}`" for k in schema["then"]["required"]) + ".")
    for key, needs in (schema.get("dependentRequired") or {}).items():
        rules.append(f"`{key}` needs " + ", ".join(f"`{k}`" for k in needs) + ".")
    if rules:
        out += [" ".join(rules), ""]
    return out


def _plugin_sections() -> list[str]:
    from mcphost.config import Config
    from mcphost.host import Host
    from mcphost.plugins import PluginSelection

    host = Host(Config(), selection=PluginSelection())
    schemas = host.config_schemas()
    ours = _repository_plugins()
    out = [
        "## `[plugins.<name>]`",
        "",
        "One section per plugin, named after its entry point and checked against the settings model the",
        "plugin declares (`mcphost_settings`) before the host starts. `mcphost config schema`",
        "prints the schemas of the plugins installed where it runs; below are those of the plugins in",
        "this repository.",
        "",
    ]
    seen = set()
    for plugin, info in sorted(host.plugin_infos.items()):
        if info.distribution not in ours:
            continue
        seen.add(info.distribution)
        if plugin in schemas:
            out += _plugin_section(plugin, info.distribution, ours[info.distribution], schemas[plugin])
        else:
            out += [f"### `[plugins.{plugin}]`", "", f"`{info.distribution}` takes no configuration.", ""]
    for missing in sorted(set(ours) - seen):
        log.warning("%s is not installed here, so %s leaves out its settings (make setup installs it)",
                    missing, REFERENCE_PAGE)
    return out


def _endpoint_section() -> list[str]:
    from mcphost.endpoints import ENDPOINT_SCHEMA

    out = ["## `[endpoints.<name>]`", "",
           "One section per curated endpoint, served at `/mcp/<name>` (see [Endpoints](endpoints.md)). "
           "Any other key is refused.", "",
           "| key | type | default | allowed | description |", "|---|---|---|---|---|"]
    defaults = {"discovery": "list", "search_limit": 10}
    for key, prop in ENDPOINT_SCHEMA["properties"].items():
        rows = [(key, prop)]
        if prop.get("type") == "object":
            rows = [(f"{key}.{sub}", subprop) for sub, subprop in prop["properties"].items()]
        for name, row in rows:
            default = _toml(defaults[name]) if name in defaults else ""
            out.append(f"| `{name}` | {_type(row)} | {default} | {_cell(_constraints(row))} "
                       f"| {_cell(row.get('description', ''))} |")
    return [*out, ""]


def configuration_reference() -> str:
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated by scripts/mkdocs_hooks.py at every build: edit mcphost/config.py or the",
        "plugin's settings model (mcphost_settings), not this page. -->",
        "",
        "Every key `mcphost.toml` accepts, generated from the code at each build of this site. Where",
        "the file is found and how it is checked: [Configuration](configuration.md).",
        "",
        '<div class="config-reference" markdown>',  # docs/assets/extra.css lays its tables out
        "",
        *_server_section(),
        "",
        "## `[plugins]`",
        "",
        "| key | type | default | description |",
        "|---|---|---|---|",
        "| `block` | list of strings | `[]` | entry-point or distribution names never loaded "
        "(also `--disable-plugin`, `MCPHOST_DISABLE_PLUGINS`) |",
        "| `allow` | list of strings | unset | load only these (built-ins always load; also `--plugins`) |",
        "| `strict` | boolean | `false` | a plugin that fails to load stops startup instead of being "
        "reported as failed |",
        "",
        *_plugin_sections(),
        *_endpoint_section(),
        "</div>",
    ]
    return "\n".join(lines).rstrip() + "\n"


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    files.append(File.generated(config, REFERENCE_PAGE, content=configuration_reference()))
    return files


# -- links that leave docs/ --------------------------------------------------------------------------

_FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]+)\]\((?P<target>[^)\s]+)\)")


def _outside_link(match: re.Match[str], page_dir: Path, docs_dir: Path, repo_url: str | None, where: str) -> str:
    target = match.group("target")
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith(("#", "/")):
        return match.group(0)
    path_part = target.split("#", 1)[0]
    resolved = (page_dir / path_part).resolve()
    if resolved == docs_dir or docs_dir in resolved.parents:
        return match.group(0)  # mkdocs checks links inside docs/ itself
    if REPO_ROOT not in resolved.parents:
        log.warning("%s links to %s, outside the repository", where, target)
        return match.group("text")
    if not resolved.exists():
        log.warning("%s links to %s, which does not exist in the repository", where, target)
        return match.group(0)
    relative = resolved.relative_to(REPO_ROOT).as_posix()
    if repo_url:
        kind = "tree" if resolved.is_dir() else "blob"
        return f"[{match.group('text')}]({repo_url.rstrip('/')}/{kind}/main/{relative})"
    text = match.group("text")
    if text.strip("`").rstrip("/") in (relative, path_part.rstrip("/")):
        return f"`{relative}`"
    return f"{text} (`{relative}` in the repository)"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.abs_src_path is None:
        return markdown
    page_dir = Path(page.file.abs_src_path).parent
    docs_dir = Path(config["docs_dir"]).resolve()
    repo_url = config.get("repo_url")
    where = f"Doc file '{page.file.src_uri}'"

    def rewrite(chunk: str) -> str:
        return _LINK.sub(lambda m: _outside_link(m, page_dir, docs_dir, repo_url, where), chunk)

    out, last = [], 0
    for fence in _FENCE.finditer(markdown):  # links inside code blocks are code, not links
        out += [rewrite(markdown[last:fence.start()]), fence.group(0)]
        last = fence.end()
    out.append(rewrite(markdown[last:]))
    return "".join(out)


if __name__ == "__main__":
    print(configuration_reference(), end="")
