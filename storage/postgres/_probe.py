"""Looking at a PostgreSQL database without changing it (``doctor``, the command line).

``probe`` connects once, reads the server's version and the migrations applied, and never
migrates (only a node's ``PgStore.open()`` does). ``read_once`` runs one function of a connection
in a read-only transaction, for a command that reads without a daemon.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg

from .._url import StorageURL
from ..errors import StorageUnavailableError
from ._conn import PgConnection, sqlite_like_row
from ._migrate import applied_versions, load_migrations

T = TypeVar("T")


@dataclass(frozen=True)
class PgProbe:
    server_version: str
    #: migrations this database has, and those this release knows
    applied: tuple[int, ...]
    known: tuple[int, ...]

    @property
    def pending(self) -> tuple[int, ...]:
        return tuple(v for v in self.known if v not in self.applied)

    @property
    def newer(self) -> tuple[int, ...]:
        return tuple(v for v in self.applied if v not in self.known)


def _connect(url: StorageURL, timeout: float) -> PgConnection:
    try:
        return psycopg.connect(url.dsn, autocommit=True, connect_timeout=max(1, int(timeout)),
                               row_factory=sqlite_like_row, application_name="hermes-gateway/cli")
    except psycopg.OperationalError as exc:
        why = " ".join(str(exc).split())[:240]
        raise StorageUnavailableError(f"cannot reach the database at {url.redacted}: {why}") from None


def probe(url: StorageURL, *, timeout: float = 5.0) -> PgProbe:
    with _connect(url, timeout) as conn:
        row = conn.execute("SHOW server_version").fetchone()
        applied = tuple(applied_versions(conn))
    return PgProbe(str(row[0]) if row else "?", applied, tuple(m.version for m in load_migrations()))


def read_once(url: StorageURL, fn: Callable[[Any], T], *, timeout: float = 5.0) -> T:
    """``fn`` gets the connection as the families' functions take it (typed as SQLite's, routed by type)."""
    with _connect(url, timeout) as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            return fn(conn)
        finally:
            conn.execute("ROLLBACK")
