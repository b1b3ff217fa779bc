"""Escapes refused with a clear error while the host stays healthy; two principals, each in its own budget."""

from __future__ import annotations

import asyncio
import textwrap

import httpx
import pytest
from codemode_support import CODE_ENDPOINT, Recorder, TokenAuth, serving, text_of

#: A program that computes until it is stopped (after telling the test it started).
BURN = "await call_tool('signal', {})\nn = 0\nwhile True:\n    n += 1"

ESCAPES = {
    "import os, read the environment": ("import os\nos.environ['HOME']",
                                        "ImportError at line 1, column 1: the sandbox refuses 'import os'"),
    "os.getenv": ("x = 1\nfrom os import getenv\ngetenv('PATH')",
                  "ImportError at line 2, column 1: the sandbox refuses 'import os'"),
    "os.system": ("import json, os.path\nos.system('id')", "the sandbox refuses 'import os.path'"),
    "import subprocess": ("import subprocess\nsubprocess.run(['id'])", "the sandbox refuses 'import subprocess'"),
    "import socket": ("import socket\nsocket.create_connection(('127.0.0.1', 80))",
                      "the sandbox refuses 'import socket'"),
    "open a file": ("open('/etc/passwd').read()", "PermissionError: Permission denied: '/etc/passwd'"),
    "pathlib": ("from pathlib import Path\nPath('/etc/hostname').read_text()", "the sandbox refuses 'import pathlib'"),
    "write a file": ("open('/tmp/escaped', 'w').write('x')", "PermissionError"),
    "__import__": ("__import__('os').system('id')", "Error"),
    "an infinite loop": ("while True:\n    pass", "Limit reached: the program computed for more than 1 s (time_limit)"),
    "a memory bomb": ("x = []\nwhile True:\n    x.append('a' * 1000000)",
                      "Limit reached: the program used more than 20 MB of memory (memory_limit_mb)"),
    "deep recursion": ("def down(n):\n    return down(n + 1)\ndown(0)", "Limit reached: recursion deeper than"),
    "a tool outside the endpoint": ("await call_tool('hidden_tool', {})", "ValueError: Unknown tool: hidden_tool"),
}


async def test_escapes_are_refused_with_a_clear_error_while_the_host_stays_healthy():
    tight = {**CODE_ENDPOINT, "code": {"time_limit": 1, "memory_limit_mb": 20}}
    async with serving(config={"endpoints": {"code": CODE_ENDPOINT, "tight": tight}}) as live:
        side = Recorder()
        async with side.client(live.code_url, "legacy") as burner, \
                side.client(live.url + "/tight", "legacy") as client, httpx.AsyncClient() as http:
            burn = asyncio.create_task(burner.call_tool("execute", {"code": BURN}))
            await asyncio.wait_for(live.tools.signalled.wait(), 60)
            healthy = []
            for label, (code, expected) in ESCAPES.items():
                result = await client.call_tool("execute", {"code": code})
                assert result.is_error, label
                assert expected in text_of(result), (label, text_of(result))
                healthy.append((await http.get(live.base + "/healthz")).status_code)
            assert healthy == [200] * len(ESCAPES)
            assert not burn.done()  # it computed all along, in its own process
            burn.cancel()
            with pytest.raises(asyncio.CancelledError):
                await burn
        # Nothing escaped: no file was written.
        assert not __import__("pathlib").Path("/tmp/escaped").exists()


async def test_two_principals_each_within_their_own_budget():
    config = {"plugins": {"codemode": {"runs_per_principal": 1}}, "server": {"allow_anonymous": False}}
    async with serving(TokenAuth(), config=config) as live:
        alice, bob = Recorder(), Recorder()
        async with alice.client(live.code_url, "legacy", token="alice") as as_alice, \
                alice.client(live.code_url, "2026-07-28", token="alice") as as_alice_again, \
                bob.client(live.code_url, "2026-07-28", token="bob") as as_bob, \
                bob.client(live.code_url, "legacy", token="carol.admin") as as_carol:
            runaway = asyncio.create_task(as_alice.call_tool("execute", {"code": BURN}))
            await asyncio.wait_for(live.tools.signalled.wait(), 60)
            # Alice's allowance is taken by her runaway program; a second one is refused, by name.
            second = await as_alice_again.call_tool("execute", {"code": "1 + 1"})
            assert second.is_error
            assert "Limit reached: 1 programs of yours are running already" in text_of(second)
            assert "runs_per_principal" in text_of(second)
            # Bob's program runs to its end while Alice's still computes.
            code = textwrap.dedent("""
                total = await call_tool("add", {"a": 20, "b": 22})
                try:
                    await call_tool("admin_only", {})
                except PermissionError as exc:
                    print("refused:", exc)
                total["sum"]
            """)
            done = await as_bob.call_tool("execute", {"code": code})
            assert not done.is_error, text_of(done)
            assert done.structured_content["result"] == 42
            assert "refused:" in done.structured_content["output"]
            assert "admin" in done.structured_content["output"]
            assert not runaway.done()
            # Carol holds the admin scope: the same call is hers to make.
            granted = await as_carol.call_tool("execute", {"code": "await call_tool('admin_only', {})"})
            assert granted.structured_content["result"] == "secret"
            runaway.cancel()
            with pytest.raises(asyncio.CancelledError):
                await runaway
