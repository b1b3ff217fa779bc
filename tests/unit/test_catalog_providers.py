"""Mounted providers in the catalog: per-record clashes (local plugins win) and per-provider replacement."""

from __future__ import annotations

import logging

import pytest

import mcphost
from mcphost.catalog import Catalog, compile_validator
from mcphost.errors import PluginError
from mcphost.records import Provenance


def _tool(name: str, origin: str | None = None, schema: dict | None = None) -> mcphost.Tool:
    def handler() -> str:
        return name

    record = mcphost.tool(name=name, input_schema=schema or {"type": "object", "properties": {}})(handler)
    if origin is None:
        return record
    import dataclasses
    return dataclasses.replace(record, provenance=Provenance(plugin="proxy", origin=origin))


def _upstream(origin: str, *names: str) -> list[tuple[str, mcphost.Tool]]:
    return [("tools", _tool(name, origin)) for name in names]


def _descriptor(record, version):
    return {"name": record.name}


def test_a_mounted_record_that_clashes_with_a_local_plugin_loses_only_itself(caplog):
    catalog = Catalog()
    catalog.admit([("tools", _tool("echo"))], Provenance(plugin="local"))
    with caplog.at_level(logging.WARNING, logger="mcphost.catalog"):
        catalog.admit(_upstream("a", "echo", "a_one") + _upstream("b", "b_one"), Provenance(plugin="proxy"))
    assert set(catalog.tools) == {"echo", "a_one", "b_one"}
    assert catalog.tools["echo"].record.provenance.plugin == "local"
    [clash] = catalog.clashes
    assert (clash.key, clash.loser.origin, clash.holder.plugin) == ("echo", "a", "local")
    assert "tool 'echo' from upstream 'a' (plugin 'proxy') is not served: plugin 'local' already serves it" \
        in caplog.text


def test_a_local_plugin_admitted_after_the_mounts_still_wins():
    catalog = Catalog()
    catalog.admit(_upstream("a", "echo", "a_one"), Provenance(plugin="proxy"))
    catalog.admit([("tools", _tool("echo"))], Provenance(plugin="local"))
    assert catalog.tools["echo"].record.provenance.plugin == "local"
    assert "a_one" in catalog.tools
    assert [(c.key, c.loser.origin, c.holder.plugin) for c in catalog.clashes] == [("echo", "a", "local")]


def test_two_local_plugins_with_one_name_still_refuse_the_second_whole():
    catalog = Catalog()
    catalog.admit([("tools", _tool("echo"))], Provenance(plugin="one"))
    with pytest.raises(PluginError, match="provided by both"):
        catalog.admit([("tools", _tool("other")), ("tools", _tool("echo"))], Provenance(plugin="two"))
    assert set(catalog.tools) == {"echo"}


def test_an_invalid_mounted_record_is_skipped_alone():
    catalog = Catalog()
    bad = _tool("bad", "a", schema={"type": "object", "properties": {"x": {"type": 12}}})
    catalog.admit([("tools", bad), *_upstream("a", "good")], Provenance(plugin="proxy"))
    assert set(catalog.tools) == {"good"}


def test_with_provider_replaces_one_provider_and_leaves_the_old_catalog_as_it_was():
    catalog = Catalog()
    catalog.admit([("tools", _tool("local"))], Provenance(plugin="local"))
    catalog.admit(_upstream("a", "a_1", "a_2") + _upstream("b", "b_1"), Provenance(plugin="proxy"))
    before = catalog.descriptors("tools", "2025-11-25", _descriptor)
    kept_entry = catalog.tools["b_1"]

    new, change = catalog.with_provider(Provenance(plugin="proxy", origin="a"), _upstream("a", "a_2", "a_3"))
    assert set(catalog.tools) == {"local", "a_1", "a_2", "b_1"}  # untouched
    assert set(new.tools) == {"local", "a_2", "a_3", "b_1"}
    assert new.tools["b_1"] is kept_entry  # other providers' entries are shared, not rebuilt
    assert change.removed["tools"] == {"a_1", "a_2"} and change.added["tools"] == {"a_2", "a_3"}
    assert change.lists == {"tools"}
    after = new.descriptors("tools", "2025-11-25", _descriptor)
    assert [d["name"] for d in after] == ["local", "b_1", "a_2", "a_3"]
    assert after[1] is before[3]  # b_1's descriptor was built once

    emptied, change = new.with_provider(Provenance(plugin="proxy", origin="a"), [])
    assert set(emptied.tools) == {"local", "b_1"} and change.added["tools"] == frozenset()


def test_a_tool_that_stays_across_a_replacement_keeps_counting_into_the_same_counters():
    catalog = Catalog()
    catalog.admit(_upstream("a", "a_1", "a_2"), Provenance(plugin="proxy"))
    catalog.tools["a_1"].stats.add(1.0, 1.01, False)

    new, _ = catalog.with_provider(Provenance(plugin="proxy", origin="a"), _upstream("a", "a_1", "a_3"))
    catalog.tools["a_1"].stats.add(1.0, 1.02, True)  # a call still finishing on the old catalog
    assert new.tools["a_1"].stats.calls == 2 and new.tools["a_1"].stats.errors == 1
    assert new.tools["a_3"].stats.calls == 0


def test_a_shadowed_record_is_served_once_its_name_is_free():
    catalog = Catalog()
    catalog.admit(_upstream("a", "shared"), Provenance(plugin="proxy"))
    catalog, _ = catalog.with_provider(Provenance(plugin="proxy", origin="b"), _upstream("b", "shared", "b_1"))
    assert catalog.tools["shared"].record.provenance.origin == "a"
    assert [(c.key, c.loser.origin, c.holder.origin) for c in catalog.clashes] == [("shared", "b", "a")]
    catalog, change = catalog.with_provider(Provenance(plugin="proxy", origin="a"), [])
    assert catalog.tools["shared"].record.provenance.origin == "b"
    assert catalog.clashes == [] and "shared" in change.added["tools"]


def test_with_provider_needs_an_origin():
    with pytest.raises(ValueError, match="origin"):
        Catalog().with_provider(Provenance(plugin="proxy"), [])


def test_validators_are_compiled_once_per_schema_content():
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}}
    first = compile_validator(schema)
    assert compile_validator({"properties": {"n": {"minimum": 3, "type": "integer"}}, "type": "object"}) is first
    assert not first.is_valid({"n": 1}) and first.is_valid({"n": 4})
