"""Fair shares (RELIABILITY H4, H5, target 14): every budget is per principal, against a real
``mcphost serve`` on loopback.

Anonymous callers are told apart by address, so two clients bound to different loopback
addresses (127.0.0.1 and 127.0.0.2) are two principals. The ``httpunruly`` test plugin provides
a synchronous tool that blocks (``block``) and ``echo``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.interaction.test_isolation import modern_call, reply
from tests.support.http_plugins.harness import call, probe_env
from tests.support.http_support import HttpServer

UNRULY = "demo,httpunruly"
ANONYMOUS = "[server]\nallow_anonymous = true\n"


def client_from(address: str, timeout: float = 30) -> httpx.Client:
    """An HTTP client whose connections come from ``address`` (a loopback address: another principal)."""
    return httpx.Client(timeout=timeout, transport=httpx.HTTPTransport(local_address=address))


@pytest.fixture
def greedy() -> Iterator[httpx.Client]:
    with client_from("127.0.0.1") as client:
        yield client


@pytest.fixture
def bystander() -> Iterator[httpx.Client]:
    with client_from("127.0.0.2") as client:
        yield client


def test_one_address_holding_every_sync_worker_delays_only_itself(tmp_path: Path, bystander: httpx.Client) -> None:
    """``sync_workers = 4``: one address holds 8 slow ``def`` calls; another address's ``def``
    call still answers at once, and the greedy address's extra calls queue behind its own."""
    server = HttpServer(tmp_path, plugins=UNRULY, env=probe_env(tmp_path), config=ANONYMOUS + "sync_workers = 4\n")
    try:
        finished: list[float] = []
        started = time.monotonic()

        def slow(n: int) -> None:
            with client_from("127.0.0.1") as client:
                answer = reply(modern_call(server, client, call(n, "block", {"seconds": 2})))
                assert answer["result"]["content"][0]["text"] == "slept 2", answer
                finished.append(time.monotonic() - started)

        threads = [threading.Thread(target=slow, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        time.sleep(0.5)  # all eight are in: the greedy address holds its share, the rest queue
        began = time.monotonic()
        answer = reply(modern_call(server, bystander, call(100, "block", {"seconds": 0})))
        took = time.monotonic() - began
        assert answer["result"]["content"][0]["text"] == "slept 0", answer
        assert took < 1.5, f"the bystander's def call waited {took:.2f}s behind another address's calls"
        for thread in threads:
            thread.join()
        assert len(finished) == 8
        # Its share (a quarter of 4 workers: one) at a time: the greedy address waited for itself.
        assert max(finished) >= 8 * 2 - 0.5, sorted(finished)
    finally:
        server.stop()


def test_a_principal_may_use_a_configured_share_of_the_pool(tmp_path: Path) -> None:
    server = HttpServer(tmp_path, plugins=UNRULY, env=probe_env(tmp_path),
                        config=ANONYMOUS + "sync_workers = 4\nsync_workers_per_principal = 2\n")
    try:
        finished: list[float] = []
        started = time.monotonic()

        def slow(n: int) -> None:
            with client_from("127.0.0.1") as client:
                reply(modern_call(server, client, call(n, "block", {"seconds": 1})))
                finished.append(time.monotonic() - started)

        threads = [threading.Thread(target=slow, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        finished.sort()
        # Two at a time: two finish after about one second, two after about two.
        assert finished[1] < 1.8 and finished[2] >= 1.9, finished
    finally:
        server.stop()

