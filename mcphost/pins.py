"""Pinned definitions: what an operator approved of a tool's (prompt's, template's) text, and where it is kept.

A pin is the hash and the text of a definition: the fields a model reads (name, title,
description, input and output schemas, annotations; a prompt's arguments; a template's URI
template and MIME type). A plugin that mounts records it did not write (mcphost-proxy) asks
:func:`judge` which of its definitions it may serve: under ``tofu`` the first definition seen
is pinned, under ``approve`` nothing new is served until approved, and a definition that
differs from its pin is **held** (not served) until an operator approves it (``mcphost pins``).

Pins live in a :class:`PinStore`: the state backend's (``Backend.pins()``: Redis with
mcphost-redis, shared by a cluster) or, with the in-memory backend, a JSON file under the
platform's state directory (:func:`default_path`), so a restart does not re-trust. A scope
groups one provider's pins (``proxy:NAME`` for an upstream); entries are keyed by kind and
name as served (``tools/vendor_lookup``).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import fcntl
import hashlib
import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import platformdirs

Mode = Literal["off", "tofu", "approve"]

#: The fields of a definition that are pinned, by record kind (the wire names).
FIELDS: dict[str, tuple[str, ...]] = {
    "tools": ("name", "title", "description", "inputSchema", "outputSchema", "annotations"),
    "prompts": ("name", "title", "description", "arguments"),
    "resourceTemplates": ("uriTemplate", "name", "title", "description", "mimeType", "annotations"),
}


def definition(kind: str, wire: Mapping[str, Any]) -> dict[str, Any]:
    """The pinned part of a record's wire form (fields absent or None are left out)."""
    return {key: wire[key] for key in FIELDS[kind] if wire.get(key) is not None}


def digest(defined: Mapping[str, Any]) -> str:
    """The hash of a definition: SHA-256 of its canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(defined, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def text_of(defined: Mapping[str, Any] | None) -> str:
    """A definition as an operator reads it (and as :func:`word_diff` compares it)."""
    return "" if defined is None else json.dumps(defined, sort_keys=True, indent=2, ensure_ascii=False)


_WORDS = re.compile(r"\s+|\w+|[^\w\s]+")


def word_diff(old: str, new: str) -> str:
    """A word diff: unchanged words as they are, removed ones as ``[-words-]``, added ones as ``{+words+}``
    (a change spanning several words, with only spaces unchanged between them, is shown as one)."""
    a, b = _WORDS.findall(old), _WORDS.findall(new)
    runs: list[list[Any]] = []  # [changed, old text, new text]
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        run: list[Any] = [op != "equal", "".join(a[i1:i2]), "".join(b[j1:j2])]
        if runs and runs[-1][0] and run[0]:
            runs[-1][1] += run[1]
            runs[-1][2] += run[2]
        else:
            runs.append(run)
    # unchanged spaces between two changes join them
    merged: list[list[Any]] = []
    for index, run in enumerate(runs):
        between = (not run[0] and not run[1].strip() and index + 1 < len(runs) and runs[index + 1][0]
                   and bool(merged) and merged[-1][0])
        if between or (run[0] and merged and merged[-1][0]):
            merged[-1][1] += run[1]
            merged[-1][2] += run[2]
        else:
            merged.append(list(run))
    out: list[str] = []
    for changed, before, after in merged:
        if not changed:
            out.append(before)
            continue
        if before:
            out.append("[-" + before + "-]")
        if after:
            out.append("{+" + after + "+}")
    return "".join(out)


@dataclass
class Entry:
    """One pin: the approved definition (None while nothing is approved yet) and the one awaiting approval."""

    kind: str
    name: str
    hash: str | None = None
    definition: dict[str, Any] | None = None
    #: The definition seen that differs from the pin (held until approved), and when it was first seen.
    pending: dict[str, Any] | None = None
    pending_hash: str | None = None
    since: float | None = None
    #: A pending hash the operator rejected: still held, no longer awaiting approval.
    rejected: str | None = None
    approved_at: float | None = None

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.name}"

    @property
    def awaiting(self) -> bool:
        return self.pending_hash is not None and self.pending_hash != self.rejected

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Entry:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    def diff(self) -> str:
        return word_diff(text_of(self.definition), text_of(self.pending))

    def approve(self) -> bool:
        """Make the pending definition the pin (False when nothing awaits approval)."""
        if self.pending is None:
            return False
        self.hash, self.definition = self.pending_hash, self.pending
        self.pending = self.pending_hash = self.since = self.rejected = None
        self.approved_at = time.time()
        return True

    def reject(self) -> bool:
        """Keep the pin; the pending definition stays held but no longer awaits approval."""
        if not self.awaiting:
            return False
        self.rejected = self.pending_hash
        return True


@dataclass
class Verdict:
    """What :func:`judge` decided for one provider's definitions."""

    served: set[str] = field(default_factory=set)
    #: Keys held (not served), and the entries to write (new pins, new pending definitions, cleared ones).
    held: dict[str, Entry] = field(default_factory=dict)
    writes: dict[str, Entry] = field(default_factory=dict)
    #: Keys newly held by this verdict (for one warning and one event each).
    newly_held: list[str] = field(default_factory=list)


def judge(mode: Mode, pins: Mapping[str, Entry], offered: Mapping[str, tuple[str, str, dict[str, Any]]],
          now: float | None = None) -> Verdict:
    """Which of ``offered`` (key -> (kind, name, definition)) may be served under ``mode`` and ``pins``.

    ``tofu``: a definition without a pin is pinned and served; ``approve``: it is held until
    approved. One that matches its pin is served; one that differs is held (its new text kept as
    pending for the operator to see). Definitions no longer offered keep their pins.
    """
    verdict = Verdict()
    now = time.time() if now is None else now
    for key, (kind, name, defined) in offered.items():
        if mode == "off":
            verdict.served.add(key)
            continue
        hashed = digest(defined)
        entry = pins.get(key)
        if entry is None:
            entry = Entry(kind=kind, name=name)
            if mode == "tofu":
                entry.hash, entry.definition, entry.approved_at = hashed, defined, now
                verdict.writes[key] = entry
                verdict.served.add(key)
                continue
        if entry.hash == hashed:
            verdict.served.add(key)
            if entry.pending is not None:  # the upstream went back to the approved text
                entry = Entry(kind=kind, name=name, hash=entry.hash, definition=entry.definition,
                              approved_at=entry.approved_at)
                verdict.writes[key] = entry
            continue
        if entry.pending_hash != hashed:
            entry = Entry(kind=kind, name=name, hash=entry.hash, definition=entry.definition,
                          approved_at=entry.approved_at, pending=defined, pending_hash=hashed, since=now)
            verdict.writes[key] = entry
            verdict.newly_held.append(key)
        verdict.held[key] = entry
    return verdict


class PinStore(Protocol):
    """Where pins live. Every method may raise ``OSError`` or the backend's own unavailability."""

    #: Where, in words (a file path or a Redis key prefix), for the CLI and the logs.
    where: str

    async def load(self, scope: str) -> dict[str, Entry]: ...

    async def save(self, scope: str, entries: Mapping[str, Entry]) -> None:
        """Write (add or replace) ``entries`` in ``scope``."""
        ...

    async def scopes(self) -> list[str]: ...

    async def version(self) -> str:
        """Changes whenever any pin is written (a process polls it to notice the CLI's approvals)."""
        ...


def default_path(config_path: str | os.PathLike[str] | None = None) -> Path:
    """The pins file of the in-memory backend: under the platform's state directory (never the working
    directory), one per configuration file (so two hosts with other configs keep their pins apart)."""
    base = Path(platformdirs.user_state_dir("mcphost"))
    if config_path is None:
        return base / "pins.json"
    tag = hashlib.sha256(str(Path(config_path).resolve()).encode()).hexdigest()[:12]
    return base / f"pins-{tag}.json"


class FilePinStore:
    """Pins in one JSON file (``{"scopes": {scope: {key: entry}}}``), written whole through a
    temporary file and a rename, under an advisory lock (the CLI and the host write it alike)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        scopes = data.get("scopes") if isinstance(data, dict) else None
        return scopes if isinstance(scopes, dict) else {}

    def _load(self, scope: str) -> dict[str, Entry]:
        return {key: Entry.from_json(value) for key, value in self._read().get(scope, {}).items()}

    def _save(self, scope: str, entries: Mapping[str, Entry]) -> None:
        with self._locked():
            scopes = self._read()
            scopes.setdefault(scope, {}).update({key: entry.to_json() for key, entry in entries.items()})
            temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            temporary.write_text(json.dumps({"scopes": scopes}, indent=1, ensure_ascii=False), encoding="utf-8")
            os.replace(temporary, self.path)

    async def load(self, scope: str) -> dict[str, Entry]:
        return await asyncio.to_thread(self._load, scope)

    async def save(self, scope: str, entries: Mapping[str, Entry]) -> None:
        if entries:
            await asyncio.to_thread(self._save, scope, entries)

    async def scopes(self) -> list[str]:
        return sorted(await asyncio.to_thread(self._read))

    async def version(self) -> str:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return ""
        return f"{stat.st_mtime_ns}:{stat.st_size}:{stat.st_ino}"


class MemoryPinStore:
    """Pins in this process only (tests, and plugins that want no persistence)."""

    where = "memory"

    def __init__(self) -> None:
        self._scopes: dict[str, dict[str, dict[str, Any]]] = {}
        self._version = 0

    async def load(self, scope: str) -> dict[str, Entry]:
        return {key: Entry.from_json(value) for key, value in self._scopes.get(scope, {}).items()}

    async def save(self, scope: str, entries: Mapping[str, Entry]) -> None:
        self._scopes.setdefault(scope, {}).update({key: entry.to_json() for key, entry in entries.items()})
        self._version += 1

    async def scopes(self) -> list[str]:
        return sorted(self._scopes)

    async def version(self) -> str:
        return str(self._version)


def find(entries: Mapping[str, Entry], name: str) -> list[Entry]:
    """The entries of ``name`` as served (any kind), or of key ``kind/name``."""
    return [entry for key, entry in entries.items() if name in (entry.name, key)]


async def everything(store: PinStore) -> list[tuple[str, Entry]]:
    """Every pin of every scope, as (scope, entry), in scope and key order."""
    out: list[tuple[str, Entry]] = []
    for scope in await store.scopes():
        entries = await store.load(scope)
        out += [(scope, entries[key]) for key in sorted(entries)]
    return out


def provider_of(scope: str) -> str:
    """The provider a scope names (``proxy:vendor`` -> ``vendor``)."""
    return scope.split(":", 1)[-1]


async def decide(store: PinStore, name: str | None, *, approve: bool, provider: str | None = None,
                 every: bool = False) -> list[tuple[str, Entry]]:
    """Approve (or reject) what awaits approval: the definition served as ``name`` (any kind), or
    with ``every`` all of them (of ``provider`` when given). Returns what changed, written."""
    changed: list[tuple[str, Entry]] = []
    for scope in await store.scopes():
        if provider is not None and provider_of(scope) != provider:
            continue
        entries = await store.load(scope)
        chosen = list(entries.values()) if every else find(entries, name or "")
        decided = {entry.key: entry for entry in chosen if (entry.approve() if approve else entry.reject())}
        if decided:
            await store.save(scope, decided)
            changed += [(scope, entry) for entry in decided.values()]
    return changed
