"""Fuzzing ``mcphost serve --stdio`` (RELIABILITY.md target figure 1, the stdio side).

The arbitrary-JSON and envelope-mutation strategies of ``tests/fuzz/test_fuzz_http.py``, a few hundred
examples, each sent as one line to a 2025-11-25 session with the demo and conformance plugins.
After every line a ``ping`` with a fresh id follows; everything the server writes up to its
reply must be one JSON-RPC message per line (strict JSON), and the ping must be answered, so
the process is alive and in step. At the end stderr shows no crash.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, seed
from hypothesis import strategies as st

from tests.support.fuzz_support import (
    A11_BODIES,
    LEGACY,
    NIGHTLY,
    SEED,
    budget,
    check_message,
    fuzz_settings,
    json_bytes,
    log_problems,
    mutated,
    seed_note,
    strict_json,
)
from tests.support.stdio_support import RawServer, server_env

pytestmark = pytest.mark.timeout(0 if NIGHTLY else 600)

#: Examples per strategy in CI (scaled like the HTTP shares by MCPHOST_FUZZ_EXAMPLES).
SHARE = 250
_sentinels = itertools.count(1)


@pytest.fixture(scope="module")
def stdio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    root: Path = tmp_path_factory.mktemp("fuzz-stdio")
    server = RawServer(server_env(root, extra={"MCPHOST_PLUGINS": "demo,conformance"}))
    try:
        server.initialize(LEGACY)
        yield server
    finally:
        server.close()


def one_line(data: bytes) -> bytes:
    """``data`` as one stdio line (a raw newline would split it in two messages)."""
    return data.replace(b"\r", b" ").replace(b"\n", b" ") + b"\n"


def send_and_sync(server: RawServer, line: bytes) -> list[Any]:
    """Send one line, then a ping; return what the server wrote before the ping's reply."""
    sentinel = f"sync-{next(_sentinels)}"
    server.send_bytes(line)
    server.send_bytes(json.dumps({"jsonrpc": "2.0", "id": sentinel, "method": "ping"}).encode() + b"\n")
    written = []
    while True:
        raw = server._queue.get(timeout=10)
        assert raw is not None, f"the server closed stdout; stderr:\n{server.stderr[-3000:]}"
        assert raw.endswith(b"\n"), raw[:200]
        message = strict_json(raw)
        if isinstance(message, dict) and message.get("id") == sentinel:
            assert message.get("result") == {}, message
            return written
        if isinstance(message, list):  # a batch reply (no batches in 2025-11-25: never expected)
            raise AssertionError(f"a batch reply on a 2025-11-25 session: {raw[:300]!r}")
        check_message(message, LEGACY)
        written.append(message)


def assert_clean(server: RawServer) -> None:
    assert server.proc.poll() is None, server.stderr[-3000:]
    problems = log_problems(server.stderr)
    assert not problems, "\n".join(problems[:40])
    assert server.result("tools/list")["tools"]


def test_fuzz_stdio_arbitrary_json(stdio: RawServer) -> None:
    print(seed_note())

    @fuzz_settings(budget(SHARE))
    @given(body=st.one_of(json_bytes(), st.binary(max_size=300)))
    def fuzz(body: bytes) -> None:
        send_and_sync(stdio, one_line(body))

    for body in A11_BODIES:
        if len(body) < 200_000:
            fuzz = example(body=body)(fuzz)
    seed(SEED)(fuzz)()
    assert_clean(stdio)


def test_fuzz_stdio_envelope_mutations(stdio: RawServer) -> None:
    print(seed_note())

    @fuzz_settings(budget(SHARE))
    @given(case=mutated().filter(lambda case: case[0] == "session"))
    def fuzz(case: tuple[str, Any, bytes, Any]) -> None:
        _, message, body, _ = case
        if isinstance(message, dict) and message.get("method") == "initialize":
            body = body.replace(b'"initialize"', b'"ping"')  # a second initialize is its own test
        send_and_sync(stdio, one_line(body))

    seed(SEED)(fuzz)()
    assert_clean(stdio)
