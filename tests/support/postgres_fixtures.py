"""pytest fixtures for a real PostgreSQL server (:mod:`tests.support.postgres_server`), shared by
``tests/`` and ``integration/``: each conftest imports them.

``postgres_server`` starts one throwaway server per test run (or uses
``AGENT_META_POSTGRES_URL``) and stops it at the end; ``postgres_url`` gives each test an empty
schema of its own on it. Without a server the tests that need one skip with the reason, or fail
when ``AGENT_META_POSTGRES_REQUIRED=1``.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

import pytest

from agent_meta._install_hint import install_hint
from tests.support.postgres_server import (
    REQUIRED_VARIABLE,
    PostgresServer,
    ServerUnavailableError,
    required,
)
from tests.support.postgres_server import start as start_server

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["postgres_server", "postgres_url", "skip_module_without_psycopg"]


POSTGRES_MODULES = ("psycopg", "psycopg_pool")
"""What the ``postgres`` extra installs, and :class:`~agent_meta.PostgresStore` imports."""


def skip_module_without_psycopg() -> None:
    """Skip the calling test module when a module of the ``postgres`` extra (psycopg, or
    psycopg_pool) is not installed, unless a server is required: then its import fails the
    run."""
    missing = [name for name in POSTGRES_MODULES if importlib.util.find_spec(name) is None]
    if missing and not required():
        pytest.skip(
            f"{', '.join(missing)} not installed: {install_hint('postgres')}",
            allow_module_level=True,
        )


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole run, with a role that logs in with a password.

    Skips (unless a server is required) without a server, and without the ``postgres`` extra:
    a test that gets a server goes on to open a :class:`~agent_meta.PostgresStore`."""
    skip_module_without_psycopg()
    try:
        server = start_server()
    except ServerUnavailableError as exc:
        if required():
            pytest.fail(f"{REQUIRED_VARIABLE}=1, but no PostgreSQL server: {exc}")
        pytest.skip(f"no PostgreSQL server: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL (with its password) of an empty schema of this test's own."""
    return postgres_server.fresh_url()
