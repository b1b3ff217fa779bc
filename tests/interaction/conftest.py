"""The interaction matrix: the ``connect`` fixture, parametrized over every transport and era.

A test that takes ``connect`` runs once per cell (``memory``, ``stdio``, ``http`` x ``2025-11-25``,
``2026-07-28``); the test id names the cell, e.g. ``test_echo[http-2026-07-28]``. Inside it,
``async with connect() as client:`` opens a client of that cell (see :mod:`tests.support.matrix`).
A behaviour that exists in some cells only says which with ``@pytest.mark.cells(eras=...,
transports=..., reason=...)``; the other cells are not generated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.http_support import HttpServer
from tests.support.matrix import CELLS, PLUGINS, Cell, StdioPool, open_client


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cells(eras=None, transports=None, reason): the matrix cells a test "
                                       "applies to (the others are not generated); reason says why")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "connect" not in metafunc.fixturenames:
        return
    cells = list(CELLS)
    for marker in metafunc.definition.iter_markers("cells"):
        assert marker.kwargs.get("reason"), f"{metafunc.definition.nodeid}: @pytest.mark.cells needs a reason"
        eras, transports = marker.kwargs.get("eras"), marker.kwargs.get("transports")
        cells = [c for c in cells if (eras is None or c.era in eras) and
                 (transports is None or c.transport in transports)]
    metafunc.parametrize("cell", cells, ids=[c.id for c in cells])


@pytest.fixture(scope="session")
def matrix_stdio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], StdioPool]]:
    """The shared stdio servers of the matrix, started on first use and ended (exit 0) at the end."""
    pools: list[StdioPool] = []

    def get() -> StdioPool:
        if not pools:
            pools.append(StdioPool(tmp_path_factory.mktemp("matrix-stdio")))
        return pools[0]

    yield get
    for pool in pools:
        pool.close()


@pytest.fixture(scope="session")
def matrix_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], HttpServer]]:
    """The one ``mcphost serve`` of the matrix's HTTP cells, started on first use."""
    servers: list[HttpServer] = []

    def get() -> HttpServer:
        if not servers:
            servers.append(HttpServer(tmp_path_factory.mktemp("matrix-http"), plugins=PLUGINS))
        return servers[0]

    yield get
    for server in servers:
        assert server.stop() == 0, server.log()


@pytest.fixture
def connect(cell: Cell, matrix_stdio: Callable[[], StdioPool], matrix_http: Callable[[], HttpServer]
            ) -> Callable[..., Any]:
    """``async with connect(capabilities=None, tasks=True, answer=None) as client:`` in this test's cell."""

    def open_(**options: Any) -> Any:
        return open_client(cell, stdio=matrix_stdio, http_server=matrix_http, **options)

    return open_
