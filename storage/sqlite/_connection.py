"""Opening connections to state.db: one writer, any number of read-only readers;
and the quick integrity check ``doctor`` runs on one."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

from ..errors import StorageError

# WAL growth is bounded by our own checkpoints; this caps what SQLite leaves
# on disk after a checkpoint resets the log.
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024


def open_writer_connection(path: Path, *, busy_timeout_ms: int, synchronous: str) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(
        str(path),
        timeout=busy_timeout_ms / 1000.0,
        isolation_level=None,  # we issue BEGIN IMMEDIATE / COMMIT ourselves
        check_same_thread=False,
        cached_statements=256,
    )
    try:
        path.chmod(0o600)
    except OSError:
        pass
    conn.row_factory = sqlite3.Row
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        conn.close()
        raise sqlite3.OperationalError(f"could not switch {path} to WAL mode (got {mode})")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("PRAGMA foreign_keys=ON")
    # Checkpoints are the writer's decision, not a side effect of some commit.
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
    conn.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
    return conn


def open_readonly_connection(path: Path, *, busy_timeout_ms: int = 5000) -> sqlite3.Connection:
    uri = f"file:{quote(str(path))}?mode=ro"
    conn = sqlite3.connect(
        uri, uri=True, timeout=busy_timeout_ms / 1000.0, isolation_level=None, check_same_thread=False
    )
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
    return conn


def quick_check(path: Path) -> list[str]:
    """``PRAGMA quick_check`` on a read-only connection: ``["ok"]``, or the problems found.

    Raises StorageError when the file cannot be read as a database at all.
    """
    try:
        conn = open_readonly_connection(path)
        try:
            return [str(r[0]) for r in conn.execute("PRAGMA quick_check").fetchall()]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise StorageError(str(exc)) from exc
