"""The layering of ARCHITECTURE.md, checked on the source.

The contract itself is import-linter's ``layers`` contract in pyproject.toml (``lint-imports``,
which ``make test`` runs before pytest); this test runs it too, and checks that no import cycle
exists among ``mcphost`` modules, TYPE_CHECKING and function-level imports included.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "mcphost"


def _module(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Every mcphost module and the mcphost modules it imports (anywhere in its source)."""
    files = {_module(path): path for path in ROOT.rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                source = ".".join([*base, *([node.module] if node.module else [])])
                names = [f"{source}.{alias.name}" for alias in node.names] + [source]
            for name in names:
                target = resolve(name) if name.split(".")[0] == "mcphost" else None
                if target and target != "mcphost" and target != module and not module.startswith(target + "."):
                    found.add(target)
        graph[module] = found
    return graph


def test_no_import_cycles_among_mcphost_modules() -> None:
    graph = _imports()
    assert len(graph) > 40
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    assert cycles == []


@pytest.mark.skipif(shutil.which("lint-imports", path=str(Path(sys.executable).parent)) is None,
                    reason="import-linter is not installed (pip install -e '.[test]')")
def test_the_import_linter_contracts_are_kept() -> None:
    command = str(Path(sys.executable).parent / "lint-imports")
    done = subprocess.run([command, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "BROKEN" not in done.stdout
