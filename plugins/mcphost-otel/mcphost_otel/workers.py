"""One Prometheus ``/metrics`` for every worker of ``mcphost serve --workers N``.

Each worker records into its own registry (metrics are per process) and whichever worker accepts
a scrape answers it, so each worker writes a snapshot of its registry (the text exposition) to a
directory the workers share, every ``interval`` seconds, and the worker answering a scrape writes a
fresh one of its own, then merges them all: counters, histogram buckets, sums and counts and
up-down counters (gauges here) add up; ``target_info`` is the same in every worker and is kept once.
Snapshots of workers that are gone are dropped. Another worker's figures are at most ``interval``
seconds old; Prometheus scrapes every 15 s or more.

The directory is per supervisor (``mcphost-metrics-<uid>-<supervisor pid>`` in the temporary
directory): the supervisor forks or starts every worker, so their parent pid names it, including
workers started fresh on SIGHUP. Nothing binds a port: the scrape is served on the host's own port.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

log = logging.getLogger("mcphost.otel")

SUFFIX = ".prom"
#: Families whose value is the same in every process (kept once, not added up).
SAME_IN_EVERY_PROCESS = frozenset({"target_info", "otel_scope_info"})


def shared_directory(base: str | None = None) -> Path:
    """The directory the workers of this supervisor share (created private to this user)."""
    root = Path(base or tempfile.gettempdir())
    path = root / f"mcphost-metrics-{os.getuid()}-{os.getppid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise RuntimeError(f"{path} is not a private directory of this user; metrics snapshots are not shared")
    return path


def merge(texts: Iterable[str]) -> list[Metric]:
    """The families of several text expositions, their samples added up by name and labels."""
    families: dict[str, tuple[Metric, dict[tuple[str, tuple[tuple[str, str], ...]], float]]] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            entry = families.get(family.name)
            if entry is None:
                entry = families[family.name] = (Metric(family.name, family.documentation, family.type,
                                                        family.unit), {})
            values = entry[1]
            once = family.name in SAME_IN_EVERY_PROCESS or family.type == "info"
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                if key in values and once:
                    continue
                values[key] = values.get(key, 0.0) + sample.value
    merged = []
    for metric, values in families.values():
        for (name, labels), value in values.items():
            metric.add_sample(name, dict(labels), value)
        merged.append(metric)
    return merged


class _Merged:
    """A collector yielding given families (for prometheus_client's encoders)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        yield from self.families


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Snapshots:
    """This worker's snapshots in the shared directory, and the merged view a scrape answers with."""

    def __init__(self, registry: Any, directory: Path, interval: float = 1.0) -> None:
        self.registry = registry
        self.directory = directory
        self.interval = interval
        self.path = directory / f"{os.getpid()}{SUFFIX}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._writing = threading.Lock()  # the snapshot thread and a scrape both write the one file

    def start(self) -> None:
        self.write()
        self._thread = threading.Thread(target=self._run, name="mcphost-otel-snapshots", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.write()
            except Exception:  # a full disk must not stop the worker; the next round tries again
                log.warning("could not write the metrics snapshot %s", self.path, exc_info=True)

    def write(self) -> None:
        """Replace this worker's snapshot atomically (readers never see half a file).

        One writer at a time: the snapshot thread and a scrape share the temporary file, and a
        second writer's replace would find it already moved (the scrape answered 500).
        """
        temporary = self.path.with_suffix(".tmp")
        with self._writing:
            temporary.write_bytes(generate_latest(self.registry))
            os.replace(temporary, self.path)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.path.unlink(missing_ok=True)

    def merged_registry(self) -> CollectorRegistry:
        """Every live worker's snapshot merged (this worker's fresh); gone workers' files removed."""
        self.write()
        texts = []
        for path in sorted(self.directory.glob(f"*{SUFFIX}")):
            try:
                pid = int(path.stem)
            except ValueError:
                continue
            if not _alive(pid):
                path.unlink(missing_ok=True)
                continue
            try:
                texts.append(path.read_text(encoding="utf-8"))
            except FileNotFoundError:  # that worker just stopped
                continue
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Merged(merge(texts)))
        return registry
