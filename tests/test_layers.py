"""The layer rule of ARCHITECTURE.md, checked on the source: the protocol kernel never imports the
web stack or the stdio transport.

``mcphost/protocol``, ``mcphost/kernel``, ``mcphost/sessions``, the catalog, records, signatures
and the auth helpers are pure: they may import the standard library, pure libraries (orjson,
jsonschema, pluggy) and each other, but not Quart, Hypercorn, ASGI servers or
``mcphost.transports``/``mcphost.app``/``mcphost.serve``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "mcphost"
PURE = sorted([*ROOT.joinpath("protocol").rglob("*.py"), *ROOT.joinpath("kernel").rglob("*.py"),
               *ROOT.joinpath("sessions").rglob("*.py"),
               *(ROOT / name for name in ("catalog.py", "records.py", "signature.py", "auth.py", "context.py"))])
FORBIDDEN = ("quart", "hypercorn", "uvicorn", "starlette", "h11", "h2", "mcphost.transports", "mcphost.app",
             "mcphost.serve", "mcphost.cli")


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_pure_layers_exist():
    assert len(PURE) > 10 and all(path.is_file() for path in PURE)


@pytest.mark.parametrize("path", PURE, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_pure_module_imports_no_web_stack_or_transport(path: Path):
    bad = sorted(name for name in imported(path) for prefix in FORBIDDEN
                 if name == prefix or name.startswith(prefix + "."))
    assert bad == [], f"{path.relative_to(ROOT)} imports {bad}"
