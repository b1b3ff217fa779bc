"""``mcphost new plugin``: the package it writes installs, and its generated tests pass as written.

The install goes into a throwaway virtual environment that sees this environment's packages (mcphost,
pytest, pydantic) through a ``.pth`` file, so nothing is added to, or left in, the shared one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcphost.cli import cli
from mcphost.scaffold import ScaffoldError, mcphost_requirement, new_plugin

MCPHOST = Path(sys.executable).parent / "mcphost"


def test_writes_the_package(tmp_path: Path) -> None:
    root = new_plugin("demo2", tmp_path)
    assert root == tmp_path / "mcphost-demo2"
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == ["README.md", "mcphost_demo2/__init__.py", "mcphost_demo2/py.typed", "pyproject.toml",
                     "tests/test_plugin.py"]
    pyproject = (root / "pyproject.toml").read_text()
    assert '[project.entry-points.mcphost]\ndemo2 = "mcphost_demo2"' in pyproject
    compile((root / "mcphost_demo2/__init__.py").read_text(), "module", "exec")
    compile((root / "tests/test_plugin.py").read_text(), "tests", "exec")


def test_hyphenated_name_and_prefix(tmp_path: Path) -> None:
    root = new_plugin("mcphost-github-issues", tmp_path)
    assert root.name == "mcphost-github-issues"
    assert (root / "mcphost_github_issues/__init__.py").is_file()
    assert 'github_issues = "mcphost_github_issues"' in (root / "pyproject.toml").read_text()


@pytest.mark.parametrize("name", ["", "Demo", "2demo", "de mo", "demo-", "de--mo", "demo/x", "x" * 61])
def test_bad_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ScaffoldError, match="lowercase letters"):
        new_plugin(name, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_folder_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "mcphost-demo2").mkdir()
    (tmp_path / "mcphost-demo2" / "keep.txt").write_text("mine")
    result = CliRunner().invoke(cli, ["new", "plugin", "demo2", "--directory", str(tmp_path)])
    assert result.exit_code == 1
    assert "already exists" in result.output
    assert (tmp_path / "mcphost-demo2" / "keep.txt").read_text() == "mine"


def test_generated_package_installs_and_its_tests_pass(tmp_path: Path) -> None:
    """Installed next to every shipped plugin (the test environment has them all): its own tests
    pass, and `mcphost plugins` lists it as active, none of its names taken."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPHOST_", "OTEL_"))}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    made = subprocess.run([str(MCPHOST), "new", "plugin", "weather"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    assert "Created mcphost-weather" in made.stdout

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    ours = sysconfig.get_paths()["purelib"]
    (site / "shared-env.pth").write_text(f"import site; site.addsitedir({ours!r})\n")

    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                              "--no-deps", "-e", "mcphost-weather"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr
    tests = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "mcphost-weather"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "5 passed" in tests.stdout, tests.stdout
    listed = subprocess.run([str(python), "-c", "import sys; sys.argv[0] = 'mcphost'; "
                             "from mcphost.cli import main; main()", "plugins", "--json"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    plugins = {info["name"]: info for info in json.loads(listed.stdout)}
    assert {"conformance", "demo", "jwt", "otel", "proxy", "redis"} <= set(plugins)
    weather = plugins["weather"]
    assert (weather["status"], weather["error"]) == ("active", None)
    assert weather["provides"] == {"prompts": ["weather_review"], "resources": ["weather://about"],
                                   "tools": ["weather_hello"]}
    # The shared environment did not get the package.
    frozen = subprocess.run([sys.executable, "-m", "pip", "list", "--format=freeze"], capture_output=True,
                            text=True, timeout=120)
    assert "mcphost-weather" not in frozen.stdout


@pytest.mark.parametrize("name", ["demo", "jwt", "redis", "otel", "proxy", "conformance", "memory"])
def test_a_name_a_shipped_plugin_uses_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ScaffoldError, match=f"plugin name '{name}' is already used by"):
        new_plugin(name, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_names_derive_from_the_plugin_name_and_mcphost_is_not_fetched_from_the_index(tmp_path: Path) -> None:
    root = new_plugin("sea_level", tmp_path)
    module = (root / "mcphost_sea_level/__init__.py").read_text()
    assert 'name="sea_level_hello"' in module and 'name="sea_level_review"' in module
    assert '"sea-level://about"' in module  # a URI scheme has no underscore
    pyproject = (root / "pyproject.toml").read_text()
    [dependencies] = [line for line in pyproject.splitlines() if line.startswith("dependencies")]
    # A plain version range the installed mcphost satisfies: never a file:// pin, which beside the
    # editable checkout made pip install it twice (ResolutionImpossible under plugins/).
    assert dependencies == f'dependencies = ["{mcphost_requirement()}"]'
    assert mcphost_requirement() == "mcphost>=0.1,<0.2"
    assert not [path for path in root.rglob("*") if path.is_file() and "file://" in path.read_text()]
