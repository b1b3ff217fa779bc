"""``mcphost serve --reload``: serve from a child process and restart it when a plugin's source changes.

For plugin authors: edit, save, call the tool again. This process imports no plugin and serves
nothing; it finds where each installed plugin's code lives (from the ``mcphost`` entry points,
without importing them), runs ``mcphost serve`` without ``--reload`` as a child, and watches those
folders with watchfiles. On a change it stops the child (SIGTERM, as a normal shutdown) and starts
a new one with the same arguments, so the new code is served on the same port. A child that
exits by itself (say, a syntax error in the plugin) is started again after the next change.
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata as md
import importlib.util
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType

from mcphost.plugins import ENTRY_POINT_GROUP

log = logging.getLogger("mcphost.reload")

#: Set in the child's environment so that its ``serve --reload`` serves instead of supervising.
CHILD_ENV = "MCPHOST_RELOAD_CHILD"
#: What counts as source: Python files and the data files plugins commonly read.
WATCHED_SUFFIXES = (".py", ".toml", ".json", ".yaml", ".yml", ".txt", ".md", ".html", ".jinja", ".j2")
_SITE_DIRS = ("site-packages", "dist-packages")


def plugin_source_paths() -> list[Path]:
    """Folders (or, for a module installed straight into site-packages, files) holding plugin code."""
    paths: set[Path] = set()
    for spec in _plugin_specs(warn=True):
        if spec.submodule_search_locations:
            paths.update(Path(location) for location in spec.submodule_search_locations)
        elif spec.origin and spec.origin not in ("built-in", "frozen"):
            origin = Path(spec.origin)
            # A single-module plugin: watch its folder (editors replace files when saving) unless that
            # folder is site-packages itself.
            paths.add(origin if origin.parent.name in _SITE_DIRS else origin.parent)
    return sorted(paths)


def plugin_module_roots() -> list[Path]:
    """The folders the plugins' top-level modules are imported from (a package's parent, a module's
    folder), outside site-packages (which is on the module path anyway)."""
    roots: list[Path] = []
    for spec in _plugin_specs():
        if spec.submodule_search_locations:
            folders = [Path(location).parent for location in spec.submodule_search_locations]
        elif spec.origin and spec.origin not in ("built-in", "frozen"):
            folders = [Path(spec.origin).parent]
        else:
            folders = []
        roots.extend(f for f in folders if f.name not in _SITE_DIRS and f not in roots)
    return roots


def _plugin_specs(*, warn: bool = False) -> list[importlib.machinery.ModuleSpec]:
    """The module spec of each installed plugin's top-level module (those that cannot be found are
    skipped, with a warning where ``warn``)."""
    specs = []
    for ep in md.entry_points(group=ENTRY_POINT_GROUP):
        top = ep.value.split(":", 1)[0].strip().split(".", 1)[0]
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            spec = None
        if spec is not None:
            specs.append(spec)
        elif warn:
            log.warning("plugin %s: cannot find module %s to watch", ep.name, top)
    return specs


def child_command(argv: Sequence[str]) -> list[str]:
    """``mcphost`` with ``argv`` minus ``--reload``, run by this interpreter.

    ``-P``: the current directory does not go first on the child's module path (``-c`` would put
    it there), so a folder that happens to be named like a plugin's module never replaces it.
    """
    return [sys.executable, "-P", "-c", "from mcphost.cli import main; main()",
            *(a for a in argv if a != "--reload")]


def child_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The child's environment: the watched plugin folders first on its module path."""
    env = {**environ, CHILD_ENV: "1"}
    paths = [str(root) for root in plugin_module_roots()]
    if environ.get("PYTHONPATH"):
        paths.append(environ["PYTHONPATH"])
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _source_change(change: object, path: str) -> bool:
    return path.endswith(WATCHED_SUFFIXES) and "__pycache__" not in path


def watch_targets(paths: Sequence[Path]) -> tuple[list[Path], Callable[[object, str], bool]]:
    """The folders to watch for ``paths`` and the filter of the changes that count.

    A file is watched through its folder, never by itself: a save that replaces the file (``sed -i``,
    an editor's write-then-rename) gives the name a new inode, and a watch on the old one would never
    hear of a change again. In such a folder only the file itself counts (not the editor's swap and
    backup files beside it); in a plugin's own folder every source file does.
    """
    folders: list[Path] = []
    files: set[str] = set()
    trees: list[str] = []
    for path in paths:
        if path.is_file():
            files.add(str(path.resolve()))
            folder = path.resolve().parent
        else:
            folder = path.resolve()
            trees.append(str(folder) + os.sep)
        if folder not in folders:
            folders.append(folder)

    def counts(change: object, path: str) -> bool:
        if path in files:
            return True
        return any(path.startswith(tree) for tree in trees) and _source_change(change, path)

    return folders, counts


def run_with_reload(argv: Sequence[str], *, extra_paths: Sequence[Path] = ()) -> int:
    """Supervise ``mcphost <argv>`` (without --reload) until SIGTERM/SIGINT; return an exit status."""
    try:
        import watchfiles
    except ImportError:
        log.error("--reload needs watchfiles: pip install 'mcphost[reload]'")
        return 2
    paths = [p for p in (*plugin_source_paths(), *extra_paths) if p.exists()]
    if not paths:
        log.error("--reload: no installed plugin source to watch")
        return 2
    log.info("watching %s", ", ".join(str(p) for p in paths))
    folders, counts = watch_targets(paths)
    command = child_command(argv)
    env = child_env(os.environ)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    child = subprocess.Popen(command, env=env)
    exited_reported = False
    try:
        for changes in watchfiles.watch(*folders, watch_filter=counts, stop_event=stop,
                                        rust_timeout=500, yield_on_timeout=True, raise_interrupt=False):
            if not changes:
                if child.poll() is not None and not exited_reported:
                    log.warning("the server exited with status %s; waiting for a change to start it again",
                                child.returncode)
                    exited_reported = True
                continue
            changed = sorted({Path(path).name for _, path in changes})
            log.warning("%s changed; restarting", ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else ""))
            _stop(child)
            child = subprocess.Popen(command, env=env)
            exited_reported = False
    finally:
        _stop(child)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def _stop(child: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    if child.poll() is not None:
        return
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(5)
