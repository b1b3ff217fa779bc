"""The official MCP conformance suite scores a real ``mcphost serve`` (Streamable HTTP).

Each test starts ``mcphost serve`` with the demo and conformance plugins and runs
``scripts/conformance`` against it, which installs what it needs through npm
(``@modelcontextprotocol/conformance`` at the version asked for and, when the system node lacks
``fs.globSync``, Node 22) into ``$CONFORMANCE_CACHE`` (default here: ``<tmp>/conformance-cache``,
kept between runs so reruns do not download anything). The figures are exact: a new scenario
or a regression changes them. The URL uses ``localhost``: ``dns-rebinding-protection`` needs it.

Without npm the tests are skipped locally and fail in CI (``CI`` set).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.support.conformance_support import ALPHA, ALPHA_SUITE_ALL_SCENARIOS, expect_pass, run_suite, scenarios
from tests.support.http_support import HttpServer


@pytest.fixture(scope="module")
def conformance_tools() -> None:
    reason = "" if shutil.which("npm") else "npm is not on PATH"
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"the conformance suite is required in CI but cannot run: {reason}")
        pytest.skip(f"conformance suite unavailable: {reason}")


@pytest.fixture(scope="module")
def conformance_server(tmp_path_factory: pytest.TempPathFactory, conformance_tools) -> Iterator[HttpServer]:
    """One running server for every run in this module: both eras and every suite version score the
    same process, as a client population would meet it."""
    server = HttpServer(tmp_path_factory.mktemp("conformance"), plugins="demo,conformance")
    yield server
    assert server.process.poll() is None, f"the server died during the suite:\n{server.log()[-3000:]}"
    server.stop()


def test_conformance_0_1_16_suite_all(conformance_server, record_property):
    lines, log = run_suite(conformance_server, record_property)
    expect_pass(lines, log, "PASS 32/32")
    assert len(scenarios(log)) == 32


def test_conformance_alpha_requirements_2025_11_25(conformance_server, record_property):
    lines, log = run_suite(conformance_server, record_property, ALPHA, "--", "--requirements", "2025-11-25")
    expect_pass(lines, log, "SCORED PASS 30/30")
    scored = next(line for line in lines if line.startswith("SCORED PASS"))
    unscored = set(scored.split("(unscored: ", 1)[1].rstrip(")").split())
    # Not scored in this revision, but run (and passing) all the same.
    assert unscored == {"server-session-lifecycle", "json-schema-2020-12", "server-sse-polling"}, scored
    summary = scenarios(log)
    assert all(summary.values()) and len(summary) == 33, summary


def test_conformance_alpha_suite_all_2025_11_25(conformance_server, record_property):
    lines, log = run_suite(conformance_server, record_property, ALPHA, "--", "--suite", "all",
                      "--spec-version", "2025-11-25")
    expect_pass(lines, log, "PASS 33/33")
    summary = scenarios(log)
    assert summary.get("server-sse-polling") is True, summary
    assert summary.get("server-session-lifecycle") is True, summary
    assert summary.get("dns-rebinding-protection") is True, summary


# -- 2026-07-28 (stateless) ------------------------------------------------------------------------
# Every scenario passes, the tasks extension's included, and so do http-header-validation and
# http-custom-header-server-validation (mcphost-conformance's test_custom_header tool carries the
# x-mcp-header annotation that scenario needs).


def test_conformance_alpha_requirements_2026_07_28(conformance_server, record_property):
    lines, log = run_suite(conformance_server, record_property, ALPHA, "--", "--requirements", "2026-07-28")
    scored = next((line for line in lines if line.startswith("SCORED PASS")), "")
    assert scored.split(" (", 1)[0] == "SCORED PASS 37/37", "\n".join(lines)
    summary = scenarios(log)
    # The pending SEP-2243 scenarios are run though unscored, and pass.
    assert summary.get("http-header-validation") is True, summary
    assert summary.get("http-custom-header-server-validation") is True, summary
    assert summary.get("server-stateless") is True, summary


def test_conformance_alpha_suite_all(conformance_server, record_property):
    """``--suite all`` (2026-07-28 default): all 65 scenarios pass, the ten tasks-* ones included."""
    lines, log = run_suite(conformance_server, record_property, ALPHA, "--", "--suite", "all")
    expect_pass(lines, log, f"PASS {ALPHA_SUITE_ALL_SCENARIOS}/{ALPHA_SUITE_ALL_SCENARIOS}")
    summary = scenarios(log)
    assert len(summary) == ALPHA_SUITE_ALL_SCENARIOS and all(summary.values()), summary
    tasks = [name for name in summary if name.startswith("tasks-")]
    assert len(tasks) == 10, tasks
    assert summary.get("http-custom-header-server-validation") is True, summary
