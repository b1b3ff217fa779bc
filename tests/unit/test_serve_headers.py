"""The headers ``mcphost serve`` has Hypercorn add to every response: made once a second, always current."""

from __future__ import annotations

import time

import hypercorn.config
import pytest
from hypercorn.config import Config

from mcphost.serve import _Config


def test_response_headers_are_hypercorns_for_the_current_second(monkeypatch: pytest.MonkeyPatch) -> None:
    ours, stock = _Config(), Config()
    for config in (ours, stock):
        config.include_server_header = False
    now = [1_790_000_000.25]
    monkeypatch.setattr(time, "time", lambda: now[0])
    monkeypatch.setattr(hypercorn.config, "time", lambda: now[0])  # Hypercorn's own clock
    first = ours.response_headers("h11")
    assert first == stock.response_headers("h11") == [(b"date", b"Mon, 21 Sep 2026 14:13:20 GMT")]
    first.append((b"x-mutated", b"by a caller"))  # each caller gets its own list
    now[0] += 0.5
    assert ours.response_headers("h11") == stock.response_headers("h11")
    now[0] += 1
    assert ours.response_headers("h11") == stock.response_headers("h11") == [
        (b"date", b"Mon, 21 Sep 2026 14:13:21 GMT")]
    ours.include_server_header = stock.include_server_header = True
    now[0] += 1
    assert ours.response_headers("h2") == stock.response_headers("h2")
    assert (b"server", b"hypercorn-h2") in ours.response_headers("h2")
