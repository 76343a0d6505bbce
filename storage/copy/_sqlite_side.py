"""state.db's end of a copy.

As a source: the file is read on a read-only connection while this process holds its writer lock
(the sidecar flock every daemon takes), so no daemon writes it during the copy, and a file a
running daemon holds is refused. As a target: the file is opened the normal way, through
``StateStore``: a new file gets the whole schema, an older one is migrated, the writer lock is held
for the copy, and the writer's indexer indexes the copied messages (its watermark is the target's
own; see ``_plan.SKIPPED_META_KEYS``). Each batch is one ``StateStore.write``: the rows and their
``hermes_copy_progress`` row commit together.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from typing import Any, TypeVar

from .._url import StorageURL
from ..errors import StorageLockedError
from ..sqlite import StateStore, WriterLock, WriterSettings, fts_index, open_readonly_connection
from ._model import CopyError, CopyRefusedError, Progress
from ._plan import TablePlan, TableShape
from ._sql import batch_sql, count_sql, ident, row_bytes

T = TypeVar("T")

PROGRESS_DDL = (
    "CREATE TABLE IF NOT EXISTS hermes_copy_progress ("
    " table_name TEXT PRIMARY KEY, source TEXT NOT NULL, last_key TEXT,"
    " rows_copied INTEGER NOT NULL DEFAULT 0, done INTEGER NOT NULL DEFAULT 0, updated_at REAL NOT NULL)"
)
_UPSERT_PROGRESS = (
    "INSERT INTO hermes_copy_progress (table_name, source, last_key, rows_copied, done, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (table_name) DO UPDATE SET"
    " source = excluded.source, last_key = excluded.last_key, rows_copied = excluded.rows_copied,"
    " done = excluded.done, updated_at = excluded.updated_at"
)


class SqliteSide:
    def __init__(self, url: StorageURL) -> None:
        assert url.path is not None
        self.path = url.path.expanduser().resolve()
        self.redacted = f"sqlite://{self.path}"
        self._lock: WriterLock | None = None
        self._conn: sqlite3.Connection | None = None
        self._store: StateStore | None = None

    # ---------------------------------------------------------------- lifecycle

    async def open_source(self) -> None:
        if not self.path.is_file():
            raise CopyError(f"there is no state.db at {self.path}")
        lock = WriterLock(self.path)
        try:
            lock.acquire()
        except StorageLockedError as exc:
            who = f"process {exc.holder_pid}" if exc.holder_pid else "another process"
            raise CopyRefusedError(
                f"{self.path} is in use by {who} (a running hermes-gateway daemon holds its lock); "
                "stop it before copying from this file, so that nothing it writes is left behind"
            ) from None
        except OSError as exc:
            raise CopyError(f"cannot lock {self.path} for reading: {exc.strerror or exc}") from None
        self._lock = lock
        try:
            self._conn = open_readonly_connection(self.path)
        except sqlite3.Error as exc:
            lock.release()
            raise CopyError(f"cannot read {self.path}: {exc}") from None

    async def open_target(self) -> None:
        store = StateStore(self.path, writer_settings=WriterSettings(synchronous="NORMAL"), readers=1)
        try:
            await store.open()
        except StorageLockedError as exc:
            who = f"process {exc.holder_pid}" if exc.holder_pid else "another process"
            raise CopyRefusedError(
                f"{self.path} is in use by {who} (a running hermes-gateway daemon); stop it before copying into it"
            ) from None
        self._store = store

    async def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        if self._store is not None:
            store, self._store = self._store, None
            await store.close()

    async def identity(self) -> str:
        st = self.path.stat()
        return f"sqlite:{st.st_dev}:{st.st_ino}"

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._store is not None:
            return await self._store.read(fn)
        conn = self._conn
        assert conn is not None
        return await asyncio.to_thread(fn, conn)

    @property
    def store(self) -> StateStore:
        assert self._store is not None, "not opened as a target"
        return self._store

    # ------------------------------------------------------------------ reading

    async def gateway_connections(self) -> int:
        return 0  # the writer lock is held for the copy: no daemon runs on the file meanwhile

    async def unanswered(self) -> int:
        def count(conn: sqlite3.Connection) -> int:
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'gateway_parked'").fetchone() is None:
                return 0  # a file of an older release
            return int(conn.execute("SELECT count(*) FROM gateway_parked").fetchone()[0])

        return await self._read(count)

    async def shapes(self) -> dict[str, TableShape]:
        return await self._read(_shapes)

    async def count(self, table: TablePlan) -> int:
        sql = count_sql(table)
        return await self._read(lambda conn: int(conn.execute(sql).fetchone()[0]))

    async def read_batch(self, table: TablePlan, after: list[Any] | None, limit: int,
                         max_bytes: int) -> list[tuple[Any, ...]]:
        sql, params = batch_sql(table, "?", after, limit)

        def read(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            rows: list[tuple[Any, ...]] = []
            size = 0
            for row in conn.execute(sql, params):
                rows.append(tuple(row))
                size += row_bytes(row)
                if size >= max_bytes:  # a batch of large messages stops early; the next starts after it
                    break
            return rows

        return await self._read(read)

    async def sequence_floor(self, table: TablePlan) -> int:
        def read(conn: sqlite3.Connection) -> int:
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'").fetchone() is None:
                return 0
            row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table.name,)).fetchone()
            return int(row[0]) if row is not None and row[0] is not None else 0

        return await self._read(read)

    # ------------------------------------------------------------------ writing

    async def progress(self) -> dict[str, Progress]:
        def read(conn: sqlite3.Connection) -> dict[str, Progress]:
            # made by the first batch, so a refused copy leaves nothing behind in someone's state.db
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'hermes_copy_progress'").fetchone() is None:
                return {}
            rows = conn.execute("SELECT table_name, source, last_key, rows_copied, done FROM hermes_copy_progress")
            return {str(r[0]): Progress(str(r[0]), str(r[1]), r[2], int(r[3]), bool(r[4])) for r in rows}

        return await self.store.read(read)

    async def write_batch(self, table: TablePlan, rows: list[tuple[Any, ...]], progress: Progress) -> None:
        cols = ", ".join(ident(c) for c in table.columns)
        marks = ", ".join("?" for _ in table.columns)
        sql = f"INSERT INTO {ident(table.name)} ({cols}) VALUES ({marks})"
        width = len(table.columns)

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(PROGRESS_DDL)
            if rows:
                conn.executemany(sql, (r[:width] for r in rows))
            conn.execute(_UPSERT_PROGRESS, (progress.table, progress.source, progress.last_key,
                                            progress.rows, int(progress.done), time.time()))

        try:
            await self.store.write(op)
        except sqlite3.Error as exc:
            raise CopyError(f"cannot write a batch of {table.name} into {self.path}: {exc}") from None

    async def clear(self, tables: list[TablePlan]) -> None:
        def op(conn: sqlite3.Connection) -> None:
            for table in reversed(tables):  # referrers before what they reference
                where = f" WHERE {table.where}" if table.where else ""
                conn.execute(f"DELETE FROM {ident(table.name)}{where}")
            conn.execute("DROP TABLE IF EXISTS hermes_copy_progress")
            # no message is left, so none is indexed: the indexer starts again from the first copied
            fts_index.set_indexed_through(conn, 0)

        await self.store.write(op)

    async def finish(self, tables: list[TablePlan], floors: dict[str, int]) -> None:
        """Ids an AUTOINCREMENT table handed out at the source are never handed out again here;
        then every copied message is indexed, so search finds it."""

        def op(conn: sqlite3.Connection) -> None:
            for table in tables:
                floor = floors.get(table.name, 0)
                if table.serial is None or floor <= 0 or not _autoincrement(conn, table.name):
                    continue
                updated = conn.execute("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = ?",
                                       (floor, table.name)).rowcount
                if not updated:
                    conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", (table.name, floor))

        await self.store.write(op)
        if not await self.store.catch_up_index():
            raise CopyError(f"the copied messages in {self.path} could not all be indexed for search; "
                            "the gateway's writer indexes them at its next start")


def _autoincrement(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
    return row is not None and "AUTOINCREMENT" in str(row[0]).upper()


def _shapes(conn: sqlite3.Connection) -> dict[str, TableShape]:
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    virtual = [str(r[0]) for r in rows if str(r[1] or "").upper().startswith("CREATE VIRTUAL TABLE")]
    shapes: dict[str, TableShape] = {}
    for r in rows:
        name = str(r[0])
        # SQLite's own tables, the FTS5 tables and their shadow tables: the search index, not data
        if name.startswith("sqlite_") or name in virtual or any(name.startswith(v + "_") for v in virtual):
            continue
        info = conn.execute(f"PRAGMA table_xinfo({ident(name)})").fetchall()
        columns = tuple(str(c[1]) for c in info if int(c[6]) == 0)  # hidden != 0: generated columns
        key = tuple(str(c[1]) for c in sorted((c for c in info if int(c[5]) > 0), key=lambda c: int(c[5])))
        types = {str(c[1]): str(c[2]).upper() for c in info}
        references: set[str] = set()
        parent: str | None = None
        for fk in conn.execute(f"PRAGMA foreign_key_list({ident(name)})").fetchall():
            ref_table, from_col = str(fk[2]), str(fk[3])
            if ref_table == name:
                parent = from_col
            else:
                references.add(ref_table)
        serial = key[0] if len(key) == 1 and types.get(key[0]) == "INTEGER" else None  # a rowid alias
        shapes[name] = TableShape(name, columns, key, frozenset(references), parent, serial)
    return shapes
