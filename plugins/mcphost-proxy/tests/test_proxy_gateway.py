"""Gateway grade: a clashing or odd upstream costs only its own records; list_changed re-derives one upstream."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import sys
import textwrap
import time
from typing import Any

import pytest
from mcp import MCPError
from mcphost_proxy.logs import BURST, RATE
from proxy_support import EVERYTHING, RAW_SERVER, Side, front, raw_upstream, sdk_http_upstream, sdk_upstream

import mcphost
from tests.support.http_support import HttpServer, free_port
from tests.support.js.run import ensure_ts_client, node_executable


def _text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


class Local:
    """A local plugin serving a tool named ``add`` and the resource ``sdk://motd``."""

    @mcphost.hookimpl
    def mcphost_tools(self):
        @mcphost.tool(name="add")
        def add(a: int, b: int) -> str:
            """The local add."""
            return f"local {a + b}"
        return [add]

    @mcphost.hookimpl
    def mcphost_resources(self):
        @mcphost.resource("sdk://motd")
        def motd() -> str:
            return "local motd"
        return [motd]


async def test_an_upstream_clashing_with_a_local_plugin_loses_only_the_clashing_records(side, caplog):
    # "bare" mounts the SDK server without a prefix: its add and its sdk://motd clash with the local
    # plugin's; "other" mounts the same server under its prefix and clashes with nothing.
    servers = {"bare": sdk_upstream(prefix=""), "other": sdk_upstream()}
    with caplog.at_level(logging.WARNING):
        async with front(servers, ("local", Local())) as live, side.client(live.url) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"add", "pid", "ask_name", "slow", "other_add", "other_pid", "other_slow"} <= names
            # The local plugin wins the clash; every other record of both upstreams is served.
            assert _text(await client.call_tool("add", {"a": 1, "b": 2})) == "local 3"
            assert _text(await client.call_tool("other_add", {"a": 1, "b": 2})) == "3"
            assert _text(await client.call_tool("pid", {})).isdigit()
            prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
            assert {"greet", "other_greet"} <= prompts
            contents = (await client.read_resource("sdk://motd")).contents
            assert contents[0].text == "local motd"
            # mcphost plugins (the proxy's PROVIDES) and the log name the upstream, the record and the holder.
            info = live.host.plugin_infos["proxy"]
            assert "tool 'add' from upstream 'bare' (plugin 'proxy') is not served: plugin 'local' already " \
                   "serves it" in info.provides["clashes"]
            assert any("resource 'sdk://motd' from upstream 'bare'" in line for line in info.provides["clashes"])
            assert "add" not in info.provides["tools"] and "pid" in info.provides["tools"]
            assert live.host.plugin_infos["local"].status != "failed"
    assert "tool 'add' from upstream 'bare' (plugin 'proxy') is not served: plugin 'local' already serves it" \
        in caplog.text


async def test_upstream_names_and_sizes_are_checked(side, tmp_path, caplog):
    schema = {"type": "object", "properties": {}}
    tools = [{"name": "fine", "description": "ok", "inputSchema": schema},
             {"name": "esc\x1b[31m", "inputSchema": schema}, {"name": "new\nline", "inputSchema": schema},
             {"name": "nul\x00", "inputSchema": schema}, {"name": "x" * 100_000, "inputSchema": schema},
             {"name": "huge_description", "description": "d" * 5_000_000, "inputSchema": schema},
             {"name": "huge_schema", "inputSchema": {"type": "object", "properties": {
                 f"p{i}": {"type": "string", "description": "x" * 100} for i in range(5000)}}}]
    with caplog.at_level(logging.WARNING):
        async with front({"odd": raw_upstream(tmp_path, tools, prefix="")}) as live, \
                side.client(live.url) as client:
            listed = (await client.list_tools()).tools
            assert [tool.name for tool in listed] == ["fine"]
            assert _text(await client.call_tool("fine", {})) == "called fine"
            assert len(json.dumps([tool.model_dump(mode="json") for tool in listed])) < 1000
    text = caplog.text
    assert "tool 'esc\\x1b[31m' is not mounted" in text and "tool 'new\\nline' is not mounted" in text
    assert "tool 'nul\\x00' is not mounted" in text
    assert "over max_description_chars" in text and "over max_schema_bytes" in text
    assert "x" * 100 not in text  # a 100 000-character name is shown cut short


@pytest.mark.parametrize("count", [300])
async def test_list_changed_re_derives_only_that_upstream(side, tmp_path, count):
    """Tools a second upstream adds after list_changed appear; the first upstream's entries are kept as they were."""
    script = tmp_path / "growing.py"
    script.write_text(textwrap.dedent(f'''
        import os
        from mcp.server.mcpserver import Context, MCPServer
        server = MCPServer("growing")
        for i in range({count}):
            server.add_tool(lambda i=i: i, name=f"t{{i}}", description=f"tool {{i}}")

        @server.tool()
        async def grow(ctx: Context) -> str:
            server.add_tool(lambda: "new", name="added_later")
            await ctx.session.send_tool_list_changed()
            return "grown"

        server.run("stdio")
    '''))
    servers = {"grow": {"command": sys.executable, "args": [str(script)]}, "sdk": sdk_upstream()}
    async with front(servers) as live, side.client(live.url) as client:
        catalog = live.host.catalog
        assert len([n for n in catalog.tools if n.startswith("grow_t")]) == count
        kept = catalog.tools["sdk_add"]
        kept_grow = catalog.tools["grow_t7"]
        assert _text(await client.call_tool("grow_grow", {})) == "grown"
        for _ in range(200):
            if "grow_added_later" in live.host.catalog.tools:
                break
            await asyncio.sleep(0.05)
        catalog = live.host.catalog
        assert "grow_added_later" in catalog.tools
        assert catalog.tools["sdk_add"] is kept  # the other upstream's entry was not rebuilt
        assert catalog.tools["grow_t7"] is not kept_grow  # this upstream's were
        assert _text(await client.call_tool("grow_added_later", {})) == "new"


async def test_a_message_over_max_message_bytes_fails_only_its_call(side, tmp_path):
    """A 40 MiB reply line (max_message_bytes 1 MiB here) is dropped as it arrives: that call gets a clear
    error, and the upstream, still running, answers the next call."""
    server = raw_upstream(tmp_path, [{"name": "big", "inputSchema": {"type": "object", "properties": {}}},
                                     {"name": "echo", "inputSchema": {"type": "object", "properties": {}}}],
                          max_message_bytes=1024 * 1024)
    async with front({"raw": server}) as live, side.client(live.url) as client:
        upstream = live.plugin.upstreams["raw"]
        with pytest.raises(MCPError, match=r"over this server's max_message_bytes \(1048576\)"):
            await client.call_tool("raw_big", {"mib": 40})
        assert _text(await client.call_tool("raw_echo", {})) == "called echo"
        assert upstream.restarts == 0 and upstream.state == "running"
        # Under the bound, a long reply passes whole (parsed in the worker thread).
        assert len(_text(await client.call_tool("raw_big", {"mib": 0.5}))) == 512 * 1024


@pytest.mark.parametrize("max_starting", [1, 3])
async def test_stdio_upstreams_start_max_starting_at_a_time(side, tmp_path, max_starting):
    """Each upstream takes 0.4 s before its first answer: with max_starting = 1 the next one is started
    only after that (a queue, not a crowd, on a small machine); with 3 they start together."""
    started = tmp_path / "started"
    slow = (f"import sys, time; open({str(started)!r}, 'a').write(f'{{time.time()}}\\n'); time.sleep(0.4); "
            f"sys.argv = [{str(RAW_SERVER)!r}]; exec(open({str(RAW_SERVER)!r}).read())")
    servers = {f"r{i}": {"command": sys.executable, "args": ["-c", slow]} for i in range(3)}
    async with front(servers, proxy={"max_starting": max_starting}) as live, side.client(live.url) as client:
        assert {"r0_echo", "r1_echo", "r2_echo"} <= {tool.name for tool in (await client.list_tools()).tools}
        times = sorted(float(line) for line in started.read_text().split())
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        if max_starting == 1:
            assert min(gaps) >= 0.35, gaps
        else:
            assert max(gaps) < 0.35, gaps
        assert not any(u.restarts for u in live.plugin.upstreams.values())


def test_line_reader_is_linear_and_bounded():
    from mcphost_proxy.framing import LineReader

    reader = LineReader(limit=10)
    assert reader.feed(b'{"a"') == []
    assert reader.feed(b':1}\n{"b":2}\n{"i') == [(b'{"a":1}', None), (b'{"b":2}', None)]
    lines = reader.feed(b'd":7,"x":"' + b"y" * 50)
    assert lines == []
    [(head, size)] = reader.feed(b'"}\n')
    assert size == len(b'{"id":7,"x":"' + b"y" * 50 + b'"}') and head.startswith(b'{"id":7')
    assert reader.feed(b"{}\n") == [(b"{}", None)]


async def test_an_http_upstream_restarted_while_idle_is_initialized_again(side, tmp_path):
    """mcphost itself as the upstream, restarted on the same port while the proxy is idle: its old
    Mcp-Session-Id now gets 404, so the proxy initializes a new session and sends the call again."""
    upstream = await asyncio.to_thread(HttpServer, tmp_path, plugins="demo")
    try:
        async with front({"up": {"url": upstream.url}}) as live, side.client(live.url) as client:
            assert _text(await client.call_tool("up_echo", {"text": "before"})) == "before"
            old = live.plugin.upstreams["up"]._session
            port = upstream.port
            await asyncio.to_thread(upstream.stop)
            upstream = await asyncio.to_thread(HttpServer, tmp_path, plugins="demo", port=port)
            await asyncio.sleep(0.5)  # idle: nothing in flight while the upstream restarted
            assert _text(await client.call_tool("up_echo", {"text": "after"})) == "after"
            assert live.plugin.upstreams["up"]._session is not old
            for n in range(3):
                assert _text(await client.call_tool("up_echo", {"text": f"again {n}"})) == f"again {n}"
    finally:
        upstream.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_per_session_instances_are_capped_and_idle_ones_reaped(side):
    """40 sessions, max_instances = 8: 8 get their own upstream process, the others a clear error;
    instances idle past idle_timeout stop, and their places serve new sessions."""
    # idle_timeout 3 s: the 40 calls all reach the host (and get an instance or a refusal) before the
    # first instance to answer has been idle that long, even on a loaded machine; with 1 s, one was
    # reaped and its place given to a later session first.
    # The 8 start max_starting (the CPUs) at a time, each slow on a loaded machine: the calls waiting for
    # the last ones may take minutes (timeout and read_timeout 180 s, not 60 s).
    server = sdk_upstream(per_session=True, max_instances=8, idle_timeout=3, timeout=180)
    async with front({"py": server}) as live, contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Side().client(live.url, read_timeout=180)) for _ in range(40)]
        results = await asyncio.gather(*(client.call_tool("py_pid", {}) for client in clients))
        pids = {int(_text(r)) for r in results if not r.is_error}
        refused = [_text(r) for r in results if r.is_error]
        assert len(pids) == 8 and len(refused) == 32
        assert "already runs its max_instances (8) instances" in refused[0]
        # The 8 start max_starting (the CPUs) at a time: on a small or busy machine the first ones may be
        # idle past idle_timeout, and reaped, before the last answers; those still bound run.
        assert len(live.plugin.bound) <= 8 and sum(_alive(pid) for pid in pids) >= len(live.plugin.bound)
        # Idle for longer than idle_timeout: reaped, their processes gone.
        deadline = time.monotonic() + 60
        while live.plugin.bound or any(_alive(pid) for pid in pids):
            assert time.monotonic() < deadline, (live.plugin.bound, [pid for pid in pids if _alive(pid)])
            await asyncio.sleep(0.05)
        # A session refused before gets an instance now.
        assert not (await clients[-1].call_tool("py_pid", {})).is_error


async def test_per_session_share_per_principal(side):
    server = sdk_upstream(per_session=True, max_instances=8, max_instances_per_principal=2)
    async with front({"py": server}) as live, contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Side().client(live.url)) for _ in range(3)]
        results = [await client.call_tool("py_pid", {}) for client in clients]
        assert [r.is_error for r in results] == [False, False, True]  # one principal (this address)
        assert "max_instances_per_principal = 2" in _text(results[2])
        assert len(live.plugin.bound) == 2


async def test_an_upstream_log_outside_a_call_reaches_the_sessions_that_set_a_log_level(tmp_path, caplog):
    tools = [{"name": name, "inputSchema": {"type": "object", "properties": {}}} for name in ("later", "echo")]
    listening, silent = Side(), Side()
    with caplog.at_level(logging.INFO, logger="mcphost.proxy"):
        async with front({"raw": raw_upstream(tmp_path, tools)}) as live, listening.client(live.url) as one, \
                silent.client(live.url) as other:
            await one.set_logging_level("info")
            assert _text(await other.call_tool("raw_later", {})) == "called later"
            for _ in range(100):
                if _logs(listening):
                    break
                await asyncio.sleep(0.05)
            [params] = _logs(listening)
            assert (params.level, params.data, params.logger) == ("warning", "after the call", "raw/later")
            assert _logs(silent) == []  # it set no log level
    assert "upstream raw logs outside a call (warning): after the call" in caplog.text


def _logs(side: Side) -> list:
    out = []
    for message in side.notifications:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/message":
            out.append(root.params)
    return out


async def test_a_log_flood_costs_little(side, tmp_path, caplog):
    """200 000 log notifications: the host log gets a few lines, the upstream answers the next call."""
    tools = [{"name": name, "inputSchema": {"type": "object", "properties": {}}} for name in ("flood", "echo")]
    with caplog.at_level(logging.DEBUG, logger="mcphost.proxy"):
        # 200 000 lines took over a minute on a loaded CI machine: the call and the client wait 3 minutes.
        async with front({"raw": raw_upstream(tmp_path, tools, timeout=180)}) as live, \
                side.client(live.url, read_timeout=180) as client:
            caplog.clear()
            started = time.monotonic()
            assert _text(await client.call_tool("raw_flood", {"count": 200_000})) == "called flood"
            assert _text(await client.call_tool("raw_echo", {})) == "called echo"
            elapsed = time.monotonic() - started
            # The rest were dropped before they were parsed: no more than the token bucket admits in the
            # time the flood took (BURST, then RATE a second). A bound in messages alone (2 000) held only
            # while the flood took under 18 s, which a loaded machine exceeds; this is the limit itself.
            relayed = len(_logs(side))
            assert 0 < relayed <= BURST + RATE * elapsed, (relayed, elapsed)
            assert live.plugin.upstreams["raw"].restarts == 0
    assert sum(len(record.getMessage()) for record in caplog.records) < 1_000_000


async def test_questions_of_concurrent_calls_reach_their_own_callers_over_http():
    """A session-era client and a 2026-07-28 client call an eliciting tool of one shared session-era
    HTTP upstream at the same moment: each question reaches the call that caused it."""
    ada, bob = Side("Ada"), Side("Bob")
    async with sdk_http_upstream() as url, front({"sdk": {"url": url}}) as live, \
            ada.client(live.url, "legacy") as old, bob.client(live.url, "auto") as new:
        for _ in range(3):
            first, second = await asyncio.gather(old.call_tool("sdk_ask_name", {}),
                                                 new.call_tool("sdk_ask_name", {}))
            assert (_text(first), _text(second)) == ("Hello, Ada!", "Hello, Bob!")
        assert len(ada.elicitations) == 3 and len(bob.elicitations) == 3




async def _start_everything(node: str, port: int) -> asyncio.subprocess.Process:
    """The npm @modelcontextprotocol/server-everything (pinned in tests/support/js) in its HTTP mode."""
    process = await asyncio.create_subprocess_exec(node, str(EVERYTHING), "streamableHttp",
                                                   env={**os.environ, "PORT": str(port)},
                                                   stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    for _ in range(600):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return process
        except OSError:
            await asyncio.sleep(0.05)
    process.kill()
    raise RuntimeError("server-everything did not listen")


async def test_the_typescript_server_everything_over_http_restarted_while_idle(side):
    status = await asyncio.to_thread(ensure_ts_client)
    if not status:
        pytest.skip(status.reason)
    node = node_executable()
    port = free_port()
    process = await _start_everything(node, port)
    try:
        async with front({"every": {"url": f"http://127.0.0.1:{port}/mcp"}}) as live, \
                side.client(live.url) as client:
            assert "every_echo" in {tool.name for tool in (await client.list_tools()).tools}
            assert "before" in _text(await client.call_tool("every_echo", {"message": "before"}))
            process.terminate()
            await process.wait()
            process = await _start_everything(node, port)
            await asyncio.sleep(0.5)  # idle while it restarted: its sessions are gone
            assert "after" in _text(await client.call_tool("every_echo", {"message": "after"}))
    finally:
        if process.returncode is None:
            process.terminate()
            await process.wait()


async def test_mounting_another_mcphost_that_serves_the_same_plugin_costs_only_its_clashing_records(side, tmp_path):
    """The accident of the issue: mcphost mounted (prefix "") next to a local plugin it also serves.
    Every clashing record stays the local one; the other upstream and the local plugin serve on."""
    from mcphost_demo import Demo

    upstream = await asyncio.to_thread(HttpServer, tmp_path, plugins="demo")
    try:
        servers = {"twin": {"url": upstream.url, "prefix": ""}, "sdk": sdk_upstream()}
        async with front(servers, ("demo", Demo())) as live, side.client(live.url) as client:
            catalog = live.host.catalog
            assert catalog.tools["echo"].record.provenance.plugin == "demo"  # the local plugin wins
            assert {c.loser.origin for c in catalog.clashes} == {"twin"}
            assert any(c.key == "echo" for c in catalog.clashes)
            assert _text(await client.call_tool("echo", {"text": "local"})) == "local"
            assert _text(await client.call_tool("sdk_add", {"a": 2, "b": 3})) == "5"
            assert live.host.plugin_infos["demo"].status != "failed"
    finally:
        await asyncio.to_thread(upstream.stop)


async def test_an_http_reply_over_max_message_bytes_fails_only_its_call(side):
    """The SDK server over Streamable HTTP answers with a 3 MiB SSE event (max_message_bytes 1 MiB):
    that call gets a clear error; the connection stays and answers the next call."""
    async with sdk_http_upstream() as url, \
            front({"sdk": {"url": url, "max_message_bytes": 1024 * 1024}}) as live, side.client(live.url) as client:
        with pytest.raises(MCPError, match=r"over this server's max_message_bytes \(1048576\)"):
            await client.call_tool("sdk_big", {"mib": 3})
        assert _text(await client.call_tool("sdk_add", {"a": 1, "b": 2})) == "3"
        # Under the bound (the text travels twice: content and structuredContent) it passes whole.
        assert len(_text(await client.call_tool("sdk_big", {"mib": 0.25}))) == 256 * 1024
        assert live.plugin.upstreams["sdk"].restarts == 0


async def test_an_http_json_body_over_max_message_bytes_fails_only_its_call(side):
    """The SDK server over Streamable HTTP with JSON replies answers with a 3 MiB body (max_message_bytes
    1 MiB): the body is cut off as it arrives, that call gets a clear error, and the upstream serves on
    over the same session (no restart, no re-initialize)."""
    async with sdk_http_upstream(json_response=True) as url, \
            front({"sdk": {"url": url, "max_message_bytes": 1024 * 1024}}) as live, side.client(live.url) as client:
        upstream = live.plugin.upstreams["sdk"]
        session = upstream._session
        with pytest.raises(MCPError, match=r"over this server's max_message_bytes \(1048576\)"):
            await client.call_tool("sdk_big", {"mib": 3})
        assert _text(await client.call_tool("sdk_add", {"a": 1, "b": 2})) == "3"
        assert len(_text(await client.call_tool("sdk_big", {"mib": 0.25}))) == 256 * 1024
        assert upstream.restarts == 0 and upstream._session is session


async def test_resource_subscriptions_reach_the_upstream_counted(tmp_path):
    """Two sessions subscribe to a mounted resource: the upstream is subscribed once, its update
    reaches both, and it is unsubscribed when the last session unsubscribes."""
    log_file = tmp_path / "subscribes"
    server = raw_upstream(tmp_path)
    server["env"]["RAW_SUBSCRIBES"] = str(log_file)
    first, second = Side(), Side()

    def sent() -> list[str]:
        return log_file.read_text().splitlines() if log_file.exists() else []

    def updates(side: Side) -> int:
        return sum(1 for m in side.notifications
                   if getattr(getattr(m, "root", m), "method", None) == "notifications/resources/updated")

    async with front({"raw": server}) as live, first.client(live.url) as one, second.client(live.url) as two:
        assert "raw://status" in {str(r.uri) for r in (await one.list_resources()).resources}
        await one.subscribe_resource("raw://status")
        await two.subscribe_resource("raw://status")
        for _ in range(100):
            if updates(first) and updates(second):
                break
            await asyncio.sleep(0.05)
        assert updates(first) >= 1 and updates(second) >= 1
        assert sent() == ["resources/subscribe raw://status"]
        await one.unsubscribe_resource("raw://status")
        assert sent() == ["resources/subscribe raw://status"]  # the other session still follows it
        await two.unsubscribe_resource("raw://status")
        assert sent() == ["resources/subscribe raw://status", "resources/unsubscribe raw://status"]


class Silent(Side):
    """A client that is asked and never answers (its questions stay parked on the host)."""

    def __init__(self) -> None:
        super().__init__()
        self.never = asyncio.Event()

    async def elicit(self, context, params):
        self.elicitations.append(params)
        await self.never.wait()
        raise AssertionError("unreachable")


async def test_parked_calls_are_capped_per_principal():
    """A 2026-07-28 client that never answers: past max_parked_calls its next question is refused with a
    clear error (the upstream is a shared session-era HTTP SDK server, so every question finds its call)."""
    silent = Silent()
    async with sdk_http_upstream() as url, front({"sdk": {"url": url}}, proxy={"max_parked_calls": 2}) as live, \
            silent.client(live.url, "auto") as client:
        parked = [asyncio.ensure_future(client.call_tool("sdk_ask_name", {})) for _ in range(2)]
        for _ in range(200):
            if len(silent.elicitations) == 2:
                break
            await asyncio.sleep(0.05)
        assert len(silent.elicitations) == 2
        refused = await asyncio.wait_for(client.call_tool("sdk_ask_name", {}), 30)
        assert refused.is_error
        assert "max_parked_calls is 2" in _text(refused), _text(refused)
        assert sum(calls for calls, _ in live.plugin.parking.held.values()) == 2
        for task in parked:
            task.cancel()
        await asyncio.gather(*parked, return_exceptions=True)


async def test_stdout_lines_hand_a_waited_reply_over_where_it_arrives_and_keep_order_behind_others():
    import orjson
    from mcphost_proxy.framing import Switch, _Lines

    switch = Switch()
    loop = asyncio.get_running_loop()
    reply: asyncio.Future[Any] = loop.create_future()
    other: asyncio.Future[Any] = loop.create_future()
    switch._pending.update({"~1": (reply, None), "~2": (other, None)})
    lines = _Lines(1000, switch.reply)
    # A reply alone: taken at once, nothing queued for the reader task.
    lines.data_received(b'{"jsonrpc":"2.0","id":"~1","result":{"ok":1}}\n')
    assert reply.result() == {"jsonrpc": "2.0", "id": "~1", "result": {"ok": 1}}
    # A notification first: the reply behind it waits in the queue too, in order.
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "~2", "progress": 1}}
    lines.data_received(orjson.dumps(progress) + b'\n{"jsonrpc":"2.0","id":"~2","result":{}}\n{"jsonrpc"')
    assert not other.done()
    first = await lines.next()
    assert first is not None and orjson.loads(first[0]) == progress
    # While the reader is on a line, replies still queue behind it.
    lines.data_received(b':"2.0","id":"~9","result":{}}\n')
    second, third = await lines.next(), await lines.next()
    assert second == (b'{"jsonrpc":"2.0","id":"~2","result":{}}', None) and not other.done()
    assert third == (b'{"jsonrpc":"2.0","id":"~9","result":{}}', None)
    # An over-long line is never taken here; the end of the pipe ends the reader.
    lines.data_received(b'{"id":"~2",' + b'"x":"' + b"y" * 2000 + b'"}\n')
    fourth = await lines.next()
    assert fourth is not None and fourth[1] is not None and not other.done()
    lines.connection_lost(None)
    assert await lines.next() is None
