"""Bring any state.db (fresh, reference v1..v10, current) to the latest schema.

Runs once, on the writer's connection, before the writer accepts work. An
already-current database costs a handful of cheap reads: nothing is
re-indexed on an ordinary open.

The reference's counter (``schema_version``) and the gateway's
(``state_meta.gateway_schema_version``) are upgraded independently. A file
from before the gateway had its own counter (``schema_version`` 12..14 and no
gateway key) is reference 11 at gateway step 1..3, and upgrades on from there.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from ..errors import SchemaError
from ._fault import is_busy
from ._fts_layout import create_fresh, ensure_layout, layout_is_settled
from ._gateway_schema import GATEWAY_MIGRATIONS
from ._schema import (
    BASE_TABLES_DDL,
    GATEWAY_VERSION_KEY,
    INDEXES_DDL,
    MESSAGE_COLUMNS,
    REFERENCE_VERSION,
    SESSION_COLUMNS,
    SHARED_COUNTER_OFFSET,
    SHARED_COUNTER_VERSIONS,
    latest_gateway_version,
)


@dataclass
class MigrationReport:
    """What opening did. ``*_version``: the reference's counter; ``gateway_*``: the gateway's."""

    from_version: int
    to_version: int
    gateway_from: int = 0
    gateway_to: int = 0
    created: bool = False
    added_columns: list[str] = field(default_factory=list)
    renamed_titles: int = 0
    #: the FTS tables were recreated empty; the indexer fills them in the background
    fts_rebuilt: bool = False
    #: the FTS triggers were (re)made ours: deferred indexing (see ``_fts_index``)
    fts_triggers_replaced: bool = False
    #: the gateway steps that ran
    applied: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class _Stored:
    """Where a file is: ``counter`` as ``schema_version`` says (None: an empty database),
    ``reference`` the reference version that really is, ``gateway`` the gateway's step."""

    counter: int | None
    reference: int | None
    gateway: int

    def is_current(self) -> bool:
        return self.counter == REFERENCE_VERSION and self.gateway == latest_gateway_version()


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


def _gateway_version(conn: sqlite3.Connection) -> int | None:
    if not _table_exists(conn, "state_meta"):
        return None
    row = conn.execute("SELECT value FROM state_meta WHERE key = ?", (GATEWAY_VERSION_KEY,)).fetchone()
    if row is None:
        return None
    try:
        return int(row[0])
    except (TypeError, ValueError):
        raise SchemaError(f"state.db has an unreadable {GATEWAY_VERSION_KEY} ({row[0]!r}) in state_meta; "
                          "the database was left untouched.") from None


def _stored(conn: sqlite3.Connection) -> _Stored:
    counter = _stored_version(conn)
    if counter is None:
        return _Stored(None, None, 0)
    gateway = _gateway_version(conn)
    # Only the gateway ever wrote 12..14 together with its own tables and without
    # its own key; a reference release past 11 leaves neither of those behind.
    if gateway is None and counter in SHARED_COUNTER_VERSIONS and _table_exists(conn, "gateway_session_index"):
        return _Stored(counter, REFERENCE_VERSION, counter - SHARED_COUNTER_OFFSET)
    return _Stored(counter, counter, gateway or 0)


def _set_version(conn: sqlite3.Connection, version: int) -> None:
    conn.execute("DELETE FROM schema_version")
    conn.execute("INSERT INTO schema_version(version) VALUES (?)", (version,))


def _set_gateway_version(conn: sqlite3.Connection, version: int) -> None:
    conn.execute("INSERT INTO state_meta(key, value) VALUES (?, ?) "
                 "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (GATEWAY_VERSION_KEY, str(version)))


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


def _apply_gateway_migrations(conn: sqlite3.Connection, current: int, report: MigrationReport) -> None:
    for step in GATEWAY_MIGRATIONS:
        if step.version > current:
            for statement in step.statements:
                conn.execute(statement)
            if step.run is not None:
                step.run(conn)
            report.applied.append(step.version)


def _refuse_newer(stored: _Stored) -> None:
    if stored.reference is not None and stored.reference > REFERENCE_VERSION:
        raise SchemaError(
            f"state.db has schema version {stored.reference}, newer than this hermes-gateway understands "
            f"({REFERENCE_VERSION}). Upgrade hermes-gateway; the database was left untouched."
        )
    if stored.gateway > latest_gateway_version():
        raise SchemaError(
            f"state.db has gateway schema version {stored.gateway}, newer than this hermes-gateway "
            f"understands ({latest_gateway_version()}). Upgrade hermes-gateway; the database was left untouched."
        )


def _current_report(conn: sqlite3.Connection) -> MigrationReport:
    gateway = latest_gateway_version()
    return MigrationReport(from_version=REFERENCE_VERSION, to_version=REFERENCE_VERSION, gateway_from=gateway,
                           gateway_to=gateway, added_columns=reconcile(conn))


def migrate(conn: sqlite3.Connection) -> MigrationReport:
    """Upgrade in one transaction; on any failure nothing changes.

    SQLite errors other than busy/locked (which the writer retries) become a
    ``SchemaError`` naming the cause; the transaction is rolled back first.
    """
    version: int | None = None
    try:
        stored = _stored(conn)
        version = stored.counter
        _refuse_newer(stored)
        if stored.is_current() and layout_is_settled(conn):
            return _current_report(conn)
        return _upgrade(conn)
    except sqlite3.Error as exc:
        if is_busy(exc):
            raise
        raise SchemaError(
            f"state.db could not be upgraded from schema version {version or 0} to {REFERENCE_VERSION} "
            f"(gateway {latest_gateway_version()}): {exc}. "
            "The upgrade runs in one transaction and was rolled back; the database is unchanged."
        ) from exc


def _upgrade(conn: sqlite3.Connection) -> MigrationReport:
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Read again under the write lock: another process may have upgraded
        # (or created) the database since the unlocked look above.
        stored = _stored(conn)
        _refuse_newer(stored)
        version = stored.reference
        report = MigrationReport(from_version=stored.counter or 0, to_version=REFERENCE_VERSION,
                                 gateway_from=stored.gateway, gateway_to=latest_gateway_version())
        if stored.is_current():
            report.added_columns = reconcile(conn)
        elif version is None:
            report.created = True
            for ddl in BASE_TABLES_DDL:
                conn.execute(ddl)
            for ddl in INDEXES_DDL:
                conn.execute(ddl)
            create_fresh(conn)
            _apply_gateway_migrations(conn, 0, report)
        else:
            for ddl in BASE_TABLES_DDL:
                conn.execute(ddl)
            if version < REFERENCE_VERSION:
                report.added_columns += _reconcile_columns(conn, "sessions", SESSION_COLUMNS)
                report.added_columns += _reconcile_columns(conn, "messages", MESSAGE_COLUMNS)
                report.renamed_titles = _dedupe_titles(conn)
                for ddl in INDEXES_DDL:
                    conn.execute(ddl)
                # The old tables cover fewer columns: new ones, indexed in the
                # background, so a big file does not hold the start.
                create_fresh(conn)
                report.fts_rebuilt = True
            _apply_gateway_migrations(conn, stored.gateway, report)
        if not report.created and not report.fts_rebuilt:
            report.fts_triggers_replaced = ensure_layout(conn)
        _set_version(conn, REFERENCE_VERSION)
        _set_gateway_version(conn, latest_gateway_version())
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
