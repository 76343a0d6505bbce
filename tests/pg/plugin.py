"""Pytest fixtures for a real PostgreSQL server: ``pg_server`` (one per test process) and
``pg_url`` (a fresh, migrated database per test).

Where the machine has no server binaries the tests that need one are skipped with the reason,
except under ``CI=true``: CI has them, and must run those tests rather than skip them.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from .server import PgServer, find_bindir

TEMPLATE = "hermes_template"
_counter = itertools.count(1)


def _migrate_template(url: str) -> None:
    # plain psycopg, no event loop: the first test to need the server may be async (a loop runs)
    import psycopg

    from storage.postgres import migrate

    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        migrate(conn)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    bindir = find_bindir()
    if bindir is None:
        reason = "no PostgreSQL server binaries (initdb, pg_ctl) on this machine"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI must run the PostgreSQL tests")
        pytest.skip(reason)
    server = PgServer(bindir)
    server.start()
    try:
        server.psql(f"CREATE DATABASE {TEMPLATE}")
        _migrate_template(server.url(TEMPLATE))
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A new database cloned from the migrated template; dropped after the test."""
    name = f"t{os.getpid()}_{next(_counter)}"
    pg_server.psql(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    try:
        yield pg_server.url(name)
    finally:
        pg_server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
