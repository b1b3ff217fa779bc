"""mcphost-demo: one of every kind of thing an mcphost plugin can provide.

Tools ``echo`` and ``progress`` are also what the benchmarks call, so keep their shape.
Files are served from ``[plugins.demo] root`` (default: the sample files shipped here),
never from outside it. Paths come from clients, so their handling is bounded: a path longer than
the system's PATH_MAX is not found before any file-system call (resolving it costs time quadratic
in its segments), and completion walks at most :data:`MAX_SCANNED` entries below the directory
the typed prefix names, for at most :data:`MAX_COMPLETION_SECONDS`. Both run in the host's thread
pool (they are synchronous), off the loop, within the caller's share of it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

import mcphost
from mcphost import Context

SAMPLE_ROOT = Path(__file__).parent / "data"
#: Longest path (in bytes) a read or a completion considers; Linux's PATH_MAX.
MAX_PATH_BYTES = 4096
#: Directory entries one completion looks at, at most; it answers with what it found by then.
MAX_SCANNED = 10_000
#: Seconds one completion walks at most; it answers with what it found by then.
MAX_COMPLETION_SECONDS = 0.5
#: Values one completion returns (the host sends 100 at most).
MAX_COMPLETIONS = 100
LANGUAGES = ["c", "cpp", "elixir", "go", "haskell", "java", "javascript", "python", "ruby", "rust", "typescript"]


@mcphost.tool(annotations={"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False})
async def echo(text: str) -> str:  # async: nothing to block on, so no trip to the thread pool
    """Return the text unchanged."""
    return text


@mcphost.tool(annotations={"readOnlyHint": True, "openWorldHint": False})
async def progress(steps: int = 5, delay_ms: int = 0, *, ctx: Context) -> str:
    """Report progress `steps` times, `delay_ms` apart, then say how many steps ran.

    Args:
        steps: How many progress notifications to send (0-10000).
        delay_ms: Milliseconds to wait before each step (0-60000).
    """
    steps = max(0, min(steps, 10_000))
    for step in range(1, steps + 1):
        if delay_ms > 0:
            await asyncio.sleep(min(delay_ms, 60_000) / 1000)
        await ctx.progress(step, total=steps, message=f"step {step} of {steps}")
    return f"completed {steps} steps"


@mcphost.tool(annotations={"readOnlyHint": True, "openWorldHint": False})
async def greet_user(*, ctx: Context) -> str:
    """Ask the user for their name (elicitation) and greet them."""
    answer = await ctx.elicit("What is your name?", {
        "type": "object",
        "properties": {"name": {"type": "string", "title": "Name", "minLength": 1}},
        "required": ["name"],
    })
    if not answer.accepted or answer.content is None:
        return f"No greeting: the user chose to {answer.action}."
    return f"Hello, {answer.content['name']}!"


@mcphost.tool(annotations={"readOnlyHint": True})
async def summarize(text: str, *, ctx: Context) -> str:
    """Ask the client's model to summarize the text in one sentence (sampling)."""
    reply = await ctx.sample(f"Summarize in one sentence:\n\n{text}", max_tokens=200)
    content = reply.get("content") or {}
    if isinstance(content, list):
        content = next((c for c in content if c.get("type") == "text"), {})
    return str(content.get("text", ""))


@mcphost.tool(annotations={"readOnlyHint": True, "openWorldHint": False})
async def list_roots(*, ctx: Context) -> list[str]:
    """List the client's roots (their URIs)."""
    return [root.get("uri", "") for root in await ctx.list_roots()]


class DemoSettings(mcphost.PluginSettings):
    """The demo plugin: the folder it serves."""

    root: Annotated[str | None, Field(description="Directory served as demo://files/ (default: the bundled "
                                                  "sample files)")] = None


class Demo:
    """The plugin object: holds the configured file root."""

    def __init__(self) -> None:
        self.root = SAMPLE_ROOT

    @mcphost.hookimpl
    def mcphost_settings(self) -> type[DemoSettings]:
        return DemoSettings

    @mcphost.hookimpl
    def mcphost_tools(self, host: mcphost.Host) -> list[mcphost.Tool]:
        return [echo, progress, greet_user, summarize, list_roots]

    @mcphost.hookimpl
    def mcphost_resources(self, host: mcphost.Host) -> list[mcphost.Resource]:
        self.root = configured_root(host)

        @mcphost.resource("demo://readme", name="readme", title="About this server", mime_type="text/markdown")
        def readme() -> str:
            """What the demo plugin offers."""
            return (SAMPLE_ROOT / "README.md").read_text(encoding="utf-8")

        return [readme]

    @mcphost.hookimpl
    def mcphost_resource_templates(self, host: mcphost.Host) -> list[mcphost.ResourceTemplate]:
        # The template keeps the root of *this* host: another Host built in the same process
        # (tests, embedding) must not retarget it through the shared plugin object.
        root = self.root = configured_root(host)

        def complete(value: str, context: Mapping[str, str]) -> list[str]:
            return self.complete_path(value, context, root)

        @mcphost.resource_template("demo://files/{+path}", name="file", title="A file under the demo root",
                                   completions={"path": complete})
        def read_file(path: str) -> str | bytes:
            """A file below the configured root; paths outside it are not found."""
            target = self.resolve(path, root)
            data = target.read_bytes()
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                return data

        return [read_file]

    @mcphost.hookimpl
    def mcphost_prompts(self, host: mcphost.Host) -> list[mcphost.Prompt]:
        return [review_code]

    def resolve(self, path: str, root: Path | None = None) -> Path:
        """The file ``path`` names under the root; FileNotFoundError for anything else."""
        if not path or "\x00" in path or path.startswith(("/", "\\")) or len(path) > MAX_PATH_BYTES or \
                len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
            raise FileNotFoundError(path[:200])
        root = (root or self.root).resolve()
        try:
            target = (root / path).resolve()
            if not target.is_relative_to(root) or not target.is_file():
                raise FileNotFoundError(path)
        except OSError:  # a name too long, a loop of links...: nothing a client may read
            raise FileNotFoundError(path[:200]) from None
        return target

    def complete_path(self, value: str, context: Mapping[str, str], root: Path | None = None) -> list[str]:
        """Paths under the root starting with ``value``: only files a read would serve.

        Walks breadth-first from the directory ``value`` names (``notes/t`` starts in ``notes``),
        looking at no more than :data:`MAX_SCANNED` entries for no longer than
        :data:`MAX_COMPLETION_SECONDS`; sorted, at most :data:`MAX_COMPLETIONS`.
        """
        give_up = time.monotonic() + MAX_COMPLETION_SECONDS
        root = (root or self.root).resolve()
        if "\x00" in value or value.startswith(("/", "\\")) or len(value.encode("utf-8", "surrogatepass")) > \
                MAX_PATH_BYTES:
            return []
        directory = value.rpartition("/")[0]
        try:
            start = (root / directory).resolve() if directory else root
        except OSError:
            return []
        if not start.is_relative_to(root) or not start.is_dir():
            return []
        found: list[str] = []
        pending = [start]
        scanned = 0
        while pending and scanned < MAX_SCANNED and time.monotonic() < give_up:
            folder = pending.pop(0)
            try:
                entries = os.scandir(folder)
            except OSError:
                continue
            with entries:
                for entry in entries:
                    scanned += 1
                    if scanned > MAX_SCANNED:
                        break
                    if scanned % 256 == 0 and time.monotonic() >= give_up:
                        break
                    path = Path(entry.path)
                    name = str(path.relative_to(root))
                    try:
                        if entry.is_symlink():
                            # Only a link may lead out of the root (the folders walked are real
                            # paths below it), so only a link is resolved: resolving every entry of
                            # a deep tree costs a system call per segment of each.
                            real = path.resolve()
                            if not real.is_relative_to(root):
                                continue  # a link out of the root: never offered
                            if real.is_dir():
                                continue  # a linked directory could lead back up: not walked
                            if real.is_file() and name.startswith(value):
                                found.append(name)
                        elif entry.is_dir():
                            if name.startswith(value) or value.startswith(name + "/"):
                                pending.append(path)
                        elif entry.is_file() and name.startswith(value):
                            found.append(name)
                    except OSError:
                        continue
        return sorted(found)[:MAX_COMPLETIONS]


def configured_root(host: mcphost.Host) -> Path:
    """``[plugins.demo] root`` of ``host``, resolved; the bundled sample files when unset."""
    configured = host.settings(DemoSettings).root
    return Path(configured).resolve() if configured else SAMPLE_ROOT.resolve()


def complete_language(value: str, context: Mapping[str, str]) -> list[str]:
    return [language for language in LANGUAGES if language.startswith(value.lower())]


@mcphost.prompt(title="Review code", completions={"language": complete_language})
def review_code(code: str, language: str = "python") -> list[dict[str, Any]]:
    """Ask for a careful review of a piece of code.

    Args:
        code: The code to review.
        language: The programming language of the code.
    """
    return [mcphost.message("user", f"Please review this {language} code for bugs and clarity:\n\n{code}")]


plugin = Demo()
mcphost_settings = plugin.mcphost_settings
mcphost_tools = plugin.mcphost_tools
mcphost_resources = plugin.mcphost_resources
mcphost_resource_templates = plugin.mcphost_resource_templates
mcphost_prompts = plugin.mcphost_prompts
