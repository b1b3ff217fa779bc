"""Fair shares (RELIABILITY H4, H5, target 14): every budget is per principal, against a real
``mcphost serve`` on loopback.

Anonymous callers are told apart by address, so two clients bound to different loopback
addresses (127.0.0.1 and 127.0.0.2) are two principals. The ``httpunruly`` test plugin provides
a synchronous tool that blocks (``block``) and ``echo``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcphost.testing import app_client
from tests.support.http_plugins.harness import call, probe_env
from tests.support.http_support import INIT_PARAMS, HttpServer, modern, modern_call, quota_env, reply

REPO_ROOT = Path(__file__).resolve().parents[2]
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
    seconds = 3.0  # each call blocks a worker thread this long
    server = HttpServer(tmp_path, plugins=UNRULY, env=probe_env(tmp_path),
                        config=ANONYMOUS + "sync_workers = 4\nsync_workers_per_principal = 2\n")
    try:
        sent: dict[int, float] = {}
        ended: dict[int, float] = {}

        def slow(n: int) -> None:
            with client_from("127.0.0.1") as client:
                sent[n] = time.monotonic()
                reply(modern_call(server, client, call(n, "block", {"seconds": seconds})))
                ended[n] = time.monotonic()

        threads = [threading.Thread(target=slow, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        finished = sorted(end - min(sent.values()) for end in ended.values())
        longest = max(ended[n] - sent[n] for n in sent)
        # Two at a time, so the third call waits for one of the first two: it cannot end before twice
        # `seconds` after the first was sent (no load breaks that bound: sleeps only get longer). And two
        # do run side by side: no call waits for more than one other, so none takes much over twice
        # `seconds`, where one at a time the last would take four times. Both are measured from the
        # calls themselves: under load the threads took 7 s to send theirs, which failed bounds counted
        # from the test's start (the second call to end before 1.8 s, for 1 s calls).
        assert finished[2] >= 1.95 * seconds and longest < 3 * seconds, (finished, longest)
    finally:
        server.stop()



def initialize_status(server: HttpServer, client: httpx.Client) -> int:
    response = client.post(server.url, headers=server.headers(), json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS})
    return response.status_code


# -- requests in flight: GET streams count, whichever session they open on --------------------------

def test_get_streams_over_many_sessions_count_against_the_principals_requests(
        tmp_path: Path, greedy: httpx.Client, bystander: httpx.Client) -> None:
    """``max_requests_per_principal = 16``: one address opens 40 sessions with a GET stream each
    and holds 16 streams at most; the others get 429 naming the budget; another address goes on."""
    server = HttpServer(tmp_path, plugins="demo", config=ANONYMOUS + "max_requests_per_principal = 16\n")
    try:
        with contextlib.ExitStack() as streams:
            statuses: list[int] = []
            refusals: list[httpx.Response] = []
            sessions = [server.initialize(greedy) for _ in range(40)]
            for session_id in sessions:
                response = streams.enter_context(greedy.stream(
                    "GET", server.url, headers={**server.headers(session_id), "accept": "text/event-stream"}))
                statuses.append(response.status_code)
                if response.status_code != 200:
                    response.read()
                    refusals.append(response)
            assert statuses.count(200) == 16, statuses
            assert statuses.count(429) == 24, statuses
            refused = refusals[0]
            assert int(refused.headers["retry-after"]) >= 1
            error = refused.json()["error"]
            assert error["code"] == -32000 and "max_requests_per_principal" in error["message"], error
            assert error["data"]["budget"] == "requests" and error["data"]["perPrincipal"] is True
            # A call of the greedy address is refused the same way while its streams are open ...
            crowded = greedy.post(server.url, headers=server.headers(sessions[-1]), json=call(7, "echo", {"text": "x"}))
            assert crowded.status_code == 429, crowded.text
            assert initialize_status(server, greedy) == 429
            # ... while another address opens its stream and calls as usual.
            other = server.initialize(bystander)
            with bystander.stream("GET", server.url,
                                  headers={**server.headers(other), "accept": "text/event-stream"}) as response:
                assert response.status_code == 200
            sent = call(8, "echo", {"text": "y"})
            answer = reply(bystander.post(server.url, headers=server.headers(other), json=sent))
            assert answer["result"]["content"][0]["text"] == "y", answer
        # The streams closed: their slots are back.
        deadline = time.monotonic() + 5
        while True:
            again = greedy.post(server.url, headers=server.headers(sessions[0]), json=call(9, "echo", {"text": "z"}))
            if again.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert again.status_code == 200, again.text
    finally:
        server.stop()


# -- retained bytes: per principal over all its sessions -----------------------------------------------

def test_retained_bytes_are_bounded_per_principal_over_all_its_sessions(
        tmp_path: Path, greedy: httpx.Client, bystander: httpx.Client) -> None:
    """12 sessions of one principal each abandon a 60 kB reply: within a 200 kB per-principal
    budget only the newest three stay resumable (each session alone is far under its own)."""
    config = ANONYMOUS + "max_retained_bytes = 1000000\nmax_retained_bytes_per_principal = 200000\n"
    server = HttpServer(tmp_path, plugins="httpquota", env=quota_env(tmp_path), config=config)
    big = {"name": "big", "arguments": {"size": 60000, "delay": 0.3}}
    try:
        def abandon(client: httpx.Client) -> str:
            session_id = server.initialize(client)
            with client.stream("POST", server.url, headers=server.headers(session_id),
                               json=call(10, "big", big["arguments"])) as response:
                assert response.status_code == 200  # left before the reply is written
            return session_id

        bystanders = abandon(bystander)
        mine = [abandon(greedy) for _ in range(12)]
        time.sleep(0.8)  # every reply is stored (and retained, or dropped over the budget)

        def resumable(client: httpx.Client, session_id: str) -> bool:
            response = client.get(server.url, headers={**server.headers(session_id), "accept": "text/event-stream",
                                                       "last-event-id": "2.0"})
            return response.status_code == 200 and '"id":10' in response.text.replace(" ", "")

        kept = [resumable(greedy, session_id) for session_id in mine]
        assert kept == [False] * 9 + [True] * 3, kept  # the oldest went first
        assert resumable(bystander, bystanders)  # another principal's retained reply is untouched
        assert "over its principal's retention budget" in server.log()
    finally:
        server.stop()


# -- anonymous clients behind a reverse proxy ------------------------------------------------------------

def _behind_haproxy(tmp_path: Path, config: str) -> tuple[HttpServer, Any]:
    testing = pytest.importorskip("mcphost_redis.testing")  # the project's haproxy runner (no Redis needed)
    if testing.haproxy_path() is None:
        pytest.skip("haproxy is not installed")
    server = HttpServer(tmp_path, plugins="demo", config=config)
    try:
        template = (REPO_ROOT / "deploy" / "haproxy.cfg").read_text(encoding="utf-8")  # option forwardfor
        proxy = testing.Haproxy(tmp_path, template, [server.port])
    except BaseException:
        server.stop()
        raise
    return server, proxy


def _initialize_via(proxy: Any, client: httpx.Client) -> int:
    response = client.post(proxy.url, headers={"content-type": "application/json",
                                               "accept": "application/json, text/event-stream"},
                           json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS})
    return response.status_code


@pytest.mark.parametrize("trusted", [True, False])
def test_behind_haproxy_the_forwarded_address_tells_anonymous_clients_apart(tmp_path: Path, trusted: bool) -> None:
    """With ``forwarded_allow_ips`` naming the proxy, two anonymous clients behind it have their
    own session quotas; without it they share the proxy's address and so its quota."""
    config = ANONYMOUS + "max_sessions_per_principal = 2\n"
    if trusted:
        config += 'forwarded_allow_ips = ["127.0.0.1"]\n'
    server, proxy = _behind_haproxy(tmp_path, config)
    try:
        with client_from("127.0.0.2") as first, client_from("127.0.0.3") as second:
            assert [_initialize_via(proxy, first) for _ in range(3)] == [200, 200, 429]
            assert _initialize_via(proxy, second) == (200 if trusted else 429)
    finally:
        proxy.stop()
        server.stop()


async def test_a_forwarded_header_from_an_untrusted_peer_is_ignored() -> None:
    """A client that is not a trusted proxy cannot pick its own quota with X-Forwarded-For."""
    config = {"server": {"allow_anonymous": True, "max_sessions_per_principal": 1,
                         "forwarded_allow_ips": ["10.0.0.0/8"], "log_level": "warning"},
              "plugins": {"allow": ["demo"]}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    async with app_client(config, client=("127.0.0.1", 50000)) as client:  # the peer: not a trusted proxy
        statuses = [(await client.post("/mcp", headers={**headers, "x-forwarded-for": f"192.0.2.{n}"},
                                       json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                             "params": INIT_PARAMS})).status_code for n in range(2)]
    assert statuses == [200, 429]


async def test_sessions_whose_idle_window_ended_return_their_slots_at_once() -> None:
    """An address at its session cap gets its slots back the moment its sessions' idle time runs
    out, not at the reaper's next round. In process: plain requests from one address, and the
    reaper runs in the app's lifespan as it does in ``mcphost serve``."""
    config = {"server": {"allow_anonymous": True, "max_sessions_per_principal": 2, "session_idle_timeout": 6,
                         "log_level": "warning"},
              "plugins": {"allow": ["demo"]}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS}
    async with app_client(config, client=("127.0.0.1", 50000)) as client:

        async def initialize_status() -> int:
            return (await client.post("/mcp", headers=headers, json=initialize)).status_code

        assert [await initialize_status() for _ in range(3)] == [200, 200, 429]
        started = time.monotonic()
        await asyncio.sleep(6.2)  # the reaper checks every 1.5 s: it has most likely not run since they expired
        assert await initialize_status() == 200
        assert time.monotonic() - started < 7.5


# -- issue items 5-9 ----------------------------------------------------------------------------------

def _large_root(root: Path, depth: int = 40, files: int = 150) -> Path:
    """A deep tree: ``depth`` nested folders with ``files`` files each (6 000 entries)."""
    folder = root
    for level in range(depth):
        folder = folder / f"d{level}"
        folder.mkdir(parents=True)
        for n in range(files):
            (folder / f"f{n}.txt").touch()
    return root


async def test_completion_over_a_large_root_is_budgeted_in_time_and_in_pool_share(tmp_path: Path) -> None:
    """In process: eight completions from one address and one from another, side by side (the
    walks run in the app's thread pool, as in ``mcphost serve``)."""
    root = _large_root(tmp_path / "root")
    config = {"server": {"allow_anonymous": True, "sync_workers": 4, "log_level": "warning"},
              "plugins": {"allow": ["demo"], "demo": {"root": str(root)}}}
    complete = {"ref": {"type": "ref/resource", "uri": "demo://files/{+path}"},
                "argument": {"name": "path", "value": "d0/d1/d2/"}}
    async with app_client(config, client=("127.0.0.1", 50000)) as greedy, \
            httpx.AsyncClient(transport=httpx.ASGITransport(app=greedy.app, client=("127.0.0.2", 50000)),  # type: ignore[attr-defined]
                              base_url=str(greedy.base_url)) as bystander:
        times: list[float] = []

        async def completion(client: httpx.AsyncClient, n: int) -> dict[str, Any]:
            began = time.monotonic()
            payload, headers = modern("completion/complete", complete, request_id=n)
            answer = reply(await client.post("/mcp", headers=headers, json=payload))
            times.append(time.monotonic() - began)
            return answer

        greedy_calls = [asyncio.ensure_future(completion(greedy, n)) for n in range(8)]
        await asyncio.sleep(0.2)
        began = time.monotonic()
        answer = await completion(bystander, 100)
        took = time.monotonic() - began
        await asyncio.gather(*greedy_calls)
    values = answer["result"]["completion"]["values"]
    assert values and all(value.startswith("d0/d1/d2/") for value in values), answer
    assert took < 1.5, f"another address's completion waited {took:.2f}s"
    assert max(times) < 8 * 1.0, times  # each walk is bounded in time (0.5 s), one at a time per address
