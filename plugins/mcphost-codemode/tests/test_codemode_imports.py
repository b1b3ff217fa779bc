"""The import check that runs before a program reaches the sandbox."""

from __future__ import annotations

import pytest
from mcphost_codemode.sandbox import refused_import


@pytest.mark.parametrize("code", [
    "import json, math\nresult = math.pi",
    "from datetime import datetime\nresult = str(datetime(2026, 1, 1))",
    "x = 'import os'  # a string and a comment are not imports: import os",
    "def f(:\n    pass",  # not Python: Monty reports the syntax error itself
])
def test_programs_without_a_refused_import_pass(code: str) -> None:
    assert refused_import(code) is None


@pytest.mark.parametrize(("code", "where", "name"), [
    ("import os", "line 1, column 1", "os"),
    ("import json\nimport sys as s", "line 2, column 1", "sys"),
    ("async def f():\n    from subprocess import run\n    return run", "line 2, column 5", "subprocess"),
    ("import math, os.path", "line 1, column 1", "os.path"),
    ("if True:\n  from urllib.request import urlopen", "line 2, column 3", "urllib.request"),
])
def test_a_refused_import_is_named_with_its_line_and_column(code: str, where: str, name: str) -> None:
    message = refused_import(code)
    assert message is not None
    assert message.startswith(f"ImportError at {where}: the sandbox refuses 'import {name}'")
