"""Versioned migrations: ``migrations/NNNN_name.sql``, applied in order, each once.

Every node runs ``migrate`` at start. The run holds a transaction-scoped advisory lock, so when
three nodes start together one migrates and the others wait, then find nothing to do.
PostgreSQL's DDL is transactional: a migration that fails leaves no half-built table. A
migration is never edited once released (its checksum is recorded and compared); a database
migrated by a newer release is refused rather than written with older assumptions.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import SchemaError
from ._conn import PgConnection

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
#: pg_advisory_xact_lock key: the first 8 bytes of sha256("hermes-gateway migrate")
LOCK_KEY = int.from_bytes(hashlib.sha256(b"hermes-gateway migrate").digest()[:8], "big", signed=True)
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    found: list[Migration] = []
    for path in sorted(directory.glob("*.sql")):
        match = _NAME.match(path.name)
        if match is None:
            raise SchemaError(f"migration file {path.name} is not named NNNN_name.sql")
        found.append(Migration(int(match.group(1)), match.group(2), path.read_text(encoding="utf-8")))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise SchemaError(f"two migrations share a version: {versions}")
    return found


def latest_pg_version() -> int:
    return max((m.version for m in load_migrations()), default=0)


def migrate(conn: PgConnection) -> list[int]:
    """Apply what is missing, inside the caller's transaction; return the versions applied now."""
    migrations = load_migrations()
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
    conn.execute(
        "CREATE TABLE IF NOT EXISTS hermes_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL,"
        " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
    )
    done = {
        version: checksum
        for version, checksum in conn.execute("SELECT version, checksum FROM hermes_migrations").fetchall()
    }
    known = {m.version for m in migrations}
    newer = sorted(v for v in done if v not in known)
    if newer:
        raise SchemaError(
            f"the database was migrated by a newer hermes-gateway (migrations {newer}); "
            "upgrade this node instead of running an older release against it"
        )
    applied_now: list[int] = []
    for m in migrations:
        if m.version in done:
            if done[m.version] != m.checksum:
                raise SchemaError(f"migration {m.version:04d}_{m.name} differs from the one applied")
            continue
        conn.execute(m.sql.encode())  # bytes: no parameter parsing, several statements at once
        conn.execute(
            "INSERT INTO hermes_migrations (version, name, checksum) VALUES (%s, %s, %s)",
            (m.version, m.name, m.checksum),
        )
        applied_now.append(m.version)
    return applied_now


def applied_versions(conn: PgConnection) -> list[int]:
    row = conn.execute("SELECT to_regclass('hermes_migrations') IS NOT NULL").fetchone()
    if row is None or not row[0]:
        return []
    return [v for (v,) in conn.execute("SELECT version FROM hermes_migrations ORDER BY version").fetchall()]
