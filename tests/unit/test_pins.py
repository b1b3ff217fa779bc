"""mcphost.pins: what tofu and approve serve, the word diff, and the file store (no host needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcphost import pins
from mcphost.pins import Entry, FilePinStore, MemoryPinStore, decide, default_path, judge, word_diff


def _offer(description: str) -> dict[str, tuple[str, str, dict[str, object]]]:
    defined = pins.definition("tools", {"name": "t", "description": description, "title": None,
                                        "inputSchema": {"type": "object"}})
    return {"tools/t": ("tools", "t", defined)}


def test_tofu_pins_the_first_definition_and_holds_a_changed_one() -> None:
    first = judge("tofu", {}, _offer("one"))
    assert first.served == {"tools/t"} and first.writes["tools/t"].definition is not None
    stored = dict(first.writes)
    assert judge("tofu", stored, _offer("one")).served == {"tools/t"}
    changed = judge("tofu", stored, _offer("two"))
    assert not changed.served and changed.newly_held == ["tools/t"]
    entry = changed.held["tools/t"]
    assert entry.awaiting and entry.definition == {"name": "t", "description": "one",
                                                   "inputSchema": {"type": "object"}}
    again = judge("tofu", {"tools/t": entry}, _offer("two"))
    assert not again.served and not again.newly_held and not again.writes  # one warning, one write
    back = judge("tofu", {"tools/t": entry}, _offer("one"))
    assert back.served == {"tools/t"} and back.writes["tools/t"].pending is None


def test_approve_holds_what_has_no_pin_and_approving_makes_it_the_pin() -> None:
    verdict = judge("approve", {}, _offer("one"))
    assert not verdict.served and verdict.held["tools/t"].hash is None
    entry = verdict.held["tools/t"]
    assert entry.approve() and not entry.awaiting
    assert judge("approve", {"tools/t": entry}, _offer("one")).served == {"tools/t"}
    assert judge("off", {"tools/t": entry}, _offer("other")).served == {"tools/t"}


def test_word_diff_marks_removed_and_added_words() -> None:
    assert word_diff("read the file", "read the file and mail it") == "read the file{+ and mail it+}"
    assert word_diff("a b c d", "a X c Y") == "a [-b-]{+X+} c [-d-]{+Y+}"
    assert word_diff("same", "same") == "same"


@pytest.mark.parametrize("kind", ["file", "memory"])
async def test_stores_keep_entries_by_scope_and_decide_approves_by_name(tmp_path: Path, kind: str) -> None:
    store = FilePinStore(tmp_path / "pins.json") if kind == "file" else MemoryPinStore()
    before = await store.version()
    held = judge("approve", {}, _offer("one")).held
    await store.save("proxy:a", held)
    await store.save("proxy:b", {"tools/u": Entry(kind="tools", name="u", hash="h", definition={"name": "u"})})
    assert await store.version() != before
    assert await store.scopes() == ["proxy:a", "proxy:b"]
    assert (await store.load("proxy:a"))["tools/t"].awaiting
    assert await decide(store, "t", approve=True, provider="b") == []
    [(scope, entry)] = await decide(store, "t", approve=True)
    assert scope == "proxy:a" and entry.hash is not None
    assert not (await store.load("proxy:a"))["tools/t"].awaiting


def test_the_default_file_is_under_the_state_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    path = default_path(tmp_path / "mcphost.toml")
    assert path.parent == tmp_path / "state" / "mcphost" and path.name.startswith("pins-")
    assert default_path(tmp_path / "other.toml") != path and default_path(None).name == "pins.json"
