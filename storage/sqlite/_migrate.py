"""Bring any state.db (fresh, reference v1..v10, current) to the latest schema.

Runs once, on the writer's connection, before the writer accepts work. An
already-current database costs a handful of cheap pragma reads: nothing is
re-indexed on an ordinary open.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from ..errors import SchemaError
from ._schema import (
    BASE_TABLES_DDL,
    FTS_DDL,
    FTS_TRIGGERS_DDL,
    GATEWAY_MIGRATIONS,
    INDEXES_DDL,
    LEGACY_FTS_TRIGGERS,
    MESSAGE_COLUMNS,
    REFERENCE_VERSION,
    SESSION_COLUMNS,
    latest_version,
)

_FTS_TABLES = ("messages_fts", "messages_fts_trigram")


@dataclass
class MigrationReport:
    from_version: int
    to_version: int
    created: bool = False
    added_columns: list[str] = field(default_factory=list)
    renamed_titles: int = 0
    fts_rebuilt: bool = False
    applied: list[int] = field(default_factory=list)


def check_sqlite_features() -> None:
    """Refuse to run on a SQLite without FTS5 or its trigram tokenizer."""
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute("CREATE VIRTUAL TABLE t USING fts5(a)")
        probe.execute("CREATE VIRTUAL TABLE t3 USING fts5(a, tokenize='trigram')")
    except sqlite3.OperationalError as exc:
        raise SchemaError(
            f"SQLite {sqlite3.sqlite_version} lacks FTS5 or its trigram tokenizer ({exc}); "
            "hermes-gateway needs SQLite >= 3.34 built with FTS5."
        ) from exc
    finally:
        probe.close()


def _table_exists(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ? AND type = 'table'", (name,)).fetchone()
    return row is not None


def _stored_version(conn: sqlite3.Connection) -> int | None:
    """None for an empty database; 0 for tables without a version row."""
    if not _table_exists(conn, "sessions"):
        return None
    if not _table_exists(conn, "schema_version"):
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _set_version(conn: sqlite3.Connection, version: int) -> None:
    conn.execute("DELETE FROM schema_version")
    conn.execute("INSERT INTO schema_version(version) VALUES (?)", (version,))


def _reconcile_columns(conn: sqlite3.Connection, table: str, wanted: tuple[tuple[str, str], ...]) -> list[str]:
    have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    added = []
    for name, decl in wanted:
        if name not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")
            added.append(f"{table}.{name}")
    return added


def _dedupe_titles(conn: sqlite3.Connection) -> int:
    """Before v4 titles were not unique; keep every title by numbering repeats."""
    dupes = conn.execute(
        "SELECT title FROM sessions WHERE title IS NOT NULL GROUP BY title HAVING COUNT(*) > 1"
    ).fetchall()
    renamed = 0
    for (title,) in dupes:
        rows = conn.execute(
            "SELECT id FROM sessions WHERE title = ? ORDER BY started_at, id", (title,)
        ).fetchall()
        n = 1
        for (sid,) in rows[1:]:
            while True:
                n += 1
                candidate = f"{title} #{n}"
                if conn.execute("SELECT 1 FROM sessions WHERE title = ?", (candidate,)).fetchone() is None:
                    break
            conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (candidate, sid))
            renamed += 1
    return renamed


def _rebuild_fts(conn: sqlite3.Connection) -> None:
    for trigger in LEGACY_FTS_TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    for table in _FTS_TABLES:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    for ddl in FTS_DDL:
        conn.execute(ddl)
    for table in _FTS_TABLES:
        conn.execute(
            f"INSERT INTO {table}(rowid, content, tool_name, tool_calls) "
            "SELECT id, content, tool_name, tool_calls FROM messages ORDER BY id"
        )
    for ddl in FTS_TRIGGERS_DDL:
        conn.execute(ddl)


def _apply_gateway_migrations(conn: sqlite3.Connection, current: int, report: MigrationReport) -> None:
    for step in GATEWAY_MIGRATIONS:
        if step.version > current:
            for statement in step.statements:
                conn.execute(statement)
            report.applied.append(step.version)


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return True
    msg = str(exc).lower()
    return "locked" in msg or "busy" in msg


def _refuse_newer(version: int | None, target: int) -> None:
    if version is not None and version > target:
        raise SchemaError(
            f"state.db has schema version {version}, newer than this hermes-gateway understands "
            f"({target}). Upgrade hermes-gateway; the database was left untouched."
        )


def migrate(conn: sqlite3.Connection) -> MigrationReport:
    """Upgrade in one transaction; on any failure nothing changes.

    SQLite errors other than busy/locked (which the writer retries) become a
    ``SchemaError`` naming the cause; the transaction is rolled back first.
    """
    target = latest_version()
    version = _stored_version(conn)
    try:
        _refuse_newer(version, target)
        if version == target:
            return MigrationReport(from_version=target, to_version=target, added_columns=reconcile(conn))
        return _upgrade(conn, target)
    except sqlite3.Error as exc:
        if _is_busy(exc):
            raise
        raise SchemaError(
            f"state.db could not be upgraded from schema version {version or 0} to {target}: {exc}. "
            "The upgrade runs in one transaction and was rolled back; the database is unchanged."
        ) from exc


def _upgrade(conn: sqlite3.Connection, target: int) -> MigrationReport:
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Read again under the write lock: another process may have upgraded
        # (or created) the database since the unlocked look above.
        version = _stored_version(conn)
        _refuse_newer(version, target)
        report = MigrationReport(from_version=version or 0, to_version=target)
        if version == target:
            report.added_columns = reconcile(conn)
        elif version is None:
            report.created = True
            for ddl in BASE_TABLES_DDL:
                conn.execute(ddl)
            for ddl in INDEXES_DDL:
                conn.execute(ddl)
            for ddl in FTS_DDL + FTS_TRIGGERS_DDL:
                conn.execute(ddl)
            _apply_gateway_migrations(conn, REFERENCE_VERSION, report)
        else:
            for ddl in BASE_TABLES_DDL:
                conn.execute(ddl)
            if version < REFERENCE_VERSION:
                report.added_columns += _reconcile_columns(conn, "sessions", SESSION_COLUMNS)
                report.added_columns += _reconcile_columns(conn, "messages", MESSAGE_COLUMNS)
                report.renamed_titles = _dedupe_titles(conn)
                for ddl in INDEXES_DDL:
                    conn.execute(ddl)
                _rebuild_fts(conn)
                report.fts_rebuilt = True
            _apply_gateway_migrations(conn, max(version, REFERENCE_VERSION), report)
        _set_version(conn, target)
        conn.execute("COMMIT")
    except BaseException:
        # SQLite may already have rolled back by itself (it is allowed to after
        # SQLITE_FULL, IOERR, NOMEM); a ROLLBACK then would raise and hide the cause.
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return report


def reconcile(conn: sqlite3.Connection) -> list[str]:
    """Declarative column check for a current database (cheap: two pragma reads)."""
    added = _reconcile_columns(conn, "sessions", SESSION_COLUMNS)
    added += _reconcile_columns(conn, "messages", MESSAGE_COLUMNS)
    return added
