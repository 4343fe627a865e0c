"""Integration tests: real ACP clients drive the reference agent as a real subprocess.

Run them with ``pytest integration`` from the repository root (or ``nox -s integration``). They
are plain synchronous tests: each runs its asyncio client with ``asyncio.run`` (the Python SDK)
or a Node subprocess (the TypeScript SDK, acpx), so pytest-trio's ``trio_mode`` leaves them
alone. The Node clients need ``npm ci`` in ``integration/node``; without it they are skipped
with that reason.

A module that uses the ``agent_runtime`` fixture runs each test against both runtimes of
``agent-meta agent``: trio and the official Python SDK (``--runtime sdk``). Tests marked
``acp_v2`` skip on the SDK runtime where the installed SDK has no ACP v2 side (before 1.0).

A test that takes the ``store`` fixture runs once per kind of lifetime store in
:data:`STORE_KINDS`, each given fresh to the test.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import pytest

from integration.harness import (
    AGENT_RUNTIMES,
    SDK_V1_ONLY,
    node_ready,
    sdk_speaks_v2,
    use_runtime,
)
from integration.replicas import PostgresDatabase, SQLiteFile, StoreUnderTest
from tests.support.postgres_fixtures import postgres_server, postgres_url  # noqa: F401 (fixtures)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

STORE_KINDS = ("sqlite_store", "postgres_store")
"""The lifetime stores the replica tests run on: each names a fixture that gives a fresh
:class:`~integration.replicas.StoreUnderTest` (what ``--store`` takes, and how to read a stored
row): a SQLite file, and an empty schema on the run's PostgreSQL server (skipped without one,
unless ``AGENT_META_POSTGRES_REQUIRED=1``)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "acp_v2: needs ACP v2 from the agent (skipped on the sdk runtime before SDK 1.0)",
    )


@pytest.fixture
def node() -> None:
    """Skip when the Node clients cannot run here (no node, or no ``npm ci`` yet)."""
    reason = node_ready()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(params=AGENT_RUNTIMES)
def agent_runtime(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test against ``agent-meta agent`` on each runtime (``agent_command()``)."""
    runtime: str = request.param
    v2 = request.node.get_closest_marker("acp_v2") is not None
    if runtime == "sdk" and v2 and not sdk_speaks_v2():
        pytest.skip(SDK_V1_ONLY)
    with use_runtime(runtime):
        yield runtime


@pytest.fixture
def sqlite_store(tmp_path: Path) -> SQLiteFile:
    """A fresh SQLite file (``--store /path/file.sqlite``)."""
    return SQLiteFile(tmp_path / "lifetimes.sqlite")


@pytest.fixture
def postgres_store(postgres_url: str) -> PostgresDatabase:  # noqa: F811 (the fixture)
    """An empty schema of this test's own on the run's server (``--store postgresql://...``)."""
    return PostgresDatabase(postgres_url)


@pytest.fixture(params=STORE_KINDS, ids=lambda kind: str(kind).removesuffix("_store"))
def store(request: pytest.FixtureRequest) -> StoreUnderTest:
    """A fresh lifetime store of each kind in :data:`STORE_KINDS`."""
    return cast("StoreUnderTest", request.getfixturevalue(request.param))
