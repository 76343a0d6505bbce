"""PostgreSQL's end of a copy.

Opened the normal way (``PgStore.open()`` migrates), with a long statement timeout: counting or
reading a batch of a large table may take longer than a turn's query should. A batch is written
with ``COPY … FROM STDIN`` (PostgreSQL parses each value as its column's type, as a dump would:
a value SQLite typed loosely still lands as the column's type), and its ``hermes_copy_progress``
row (migration 0009) in the same transaction. Reading uses a server-side cursor, so a batch of
large messages stops at a byte budget without the server sending the rest.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

from .._url import StorageURL
from ..errors import StorageUnavailableError
from ..postgres import PgConnection, PgStore
from ._model import CopyError, Progress
from ._plan import TablePlan, TableShape
from ._sql import batch_sql, count_sql, ident, row_bytes

_UPSERT_PROGRESS = (
    "INSERT INTO hermes_copy_progress (table_name, source, last_key, rows_copied, done, updated_at)"
    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (table_name) DO UPDATE SET"
    " source = excluded.source, last_key = excluded.last_key, rows_copied = excluded.rows_copied,"
    " done = excluded.done, updated_at = excluded.updated_at"
)
_STATEMENT_TIMEOUT = 3600.0
_APP = "hermes-gateway storage copy"


class PgSide:
    def __init__(self, url: StorageURL) -> None:
        self.url = url
        self.redacted = url.redacted
        self._store: PgStore | None = None

    async def _open(self) -> None:
        store = PgStore(self.url, min_size=1, max_size=2, statement_timeout=_STATEMENT_TIMEOUT,
                        application_name=_APP)
        await store.open()
        self._store = store

    async def open_source(self) -> None:
        await self._open()

    async def open_target(self) -> None:
        await self._open()

    async def close(self) -> None:
        if self._store is not None:
            store, self._store = self._store, None
            await store.close()

    async def identity(self) -> str:
        # the same server (its start time) and the same database (its oid): whatever host name,
        # port spelling or user the URL used
        sql = ("SELECT pg_postmaster_start_time()::text || '/' || oid::text FROM pg_database"
               " WHERE datname = current_database()")
        return "postgresql:" + str(await self.store.read(lambda conn: _one(conn, sql)))

    @property
    def store(self) -> PgStore:
        assert self._store is not None, "not opened"
        return self._store

    # ------------------------------------------------------------------ reading

    async def gateway_connections(self) -> int:
        sql = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
               " AND application_name LIKE 'hermes-gateway%%' AND application_name <> %s")
        return int(await self.store.read(lambda conn: _one(conn, sql, (_APP,))))

    async def unanswered(self) -> int:
        sql = "SELECT count(*) FROM cluster_inbox WHERE done_at IS NULL"
        return int(await self.store.read(lambda conn: _one(conn, sql)))

    async def shapes(self) -> dict[str, TableShape]:
        return await self.store.read(_shapes)

    async def count(self, table: TablePlan) -> int:
        sql = count_sql(table)
        return await self.store.read(lambda conn: int(_one(conn, sql)))

    async def read_batch(self, table: TablePlan, after: list[Any] | None, limit: int,
                         max_bytes: int) -> list[tuple[Any, ...]]:
        sql, params = batch_sql(table, "%s", after, limit)

        def read(conn: PgConnection) -> list[tuple[Any, ...]]:
            rows: list[tuple[Any, ...]] = []
            size = 0
            with conn.cursor(name="hermes_copy_batch") as cur:
                cur.itersize = 200
                cur.execute(sql.encode(), params)
                for row in cur:
                    rows.append(tuple(row))
                    size += row_bytes(row)
                    if size >= max_bytes:
                        break
            return rows

        return await self.store.read(read)

    async def sequence_floor(self, table: TablePlan) -> int:
        if table.serial is None:
            return 0

        def read(conn: PgConnection) -> int:
            value = _one(conn, "SELECT pg_sequence_last_value(pg_get_serial_sequence(%s, %s))",
                         (ident(table.name), table.serial))
            return int(value) if value is not None else 0

        return await self.store.read(read)

    # ------------------------------------------------------------------ writing

    async def progress(self) -> dict[str, Progress]:
        def read(conn: PgConnection) -> dict[str, Progress]:
            rows = conn.execute("SELECT table_name, source, last_key, rows_copied, done FROM hermes_copy_progress")
            return {str(r[0]): Progress(str(r[0]), str(r[1]), r[2], int(r[3]), bool(r[4])) for r in rows}

        return await self.store.read(read)

    async def write_batch(self, table: TablePlan, rows: list[tuple[Any, ...]], progress: Progress) -> None:
        cols = ", ".join(ident(c) for c in table.columns)
        copy_sql = f"COPY {ident(table.name)} ({cols}) FROM STDIN"
        width = len(table.columns)

        def op(conn: PgConnection) -> None:
            if rows:
                with conn.cursor() as cur, cur.copy(copy_sql.encode()) as copy:
                    for row in rows:
                        copy.write_row(row[:width])
            conn.execute(_UPSERT_PROGRESS, (progress.table, progress.source, progress.last_key,
                                            progress.rows, int(progress.done), time.time()))

        try:
            await self.store.write(op)
        except (StorageUnavailableError, psycopg.OperationalError):
            raise
        except psycopg.Error as exc:
            raise CopyError(f"cannot write a batch of {table.name} into {self.redacted}: "
                            f"{_nul_row(table, rows) or ' '.join(str(exc).split())[:400]}") from None

    async def clear(self, tables: list[TablePlan]) -> None:
        def op(conn: PgConnection) -> None:
            for table in reversed(tables):
                where = f" WHERE {table.where}" if table.where else ""
                conn.execute(f"DELETE FROM {ident(table.name)}{where}".encode())
            conn.execute("DELETE FROM hermes_copy_progress")

        await self.store.write(op)

    async def finish(self, tables: list[TablePlan], floors: dict[str, int]) -> None:
        """Each identity goes past the highest id copied, and past the highest the source ever
        handed out (SQLite's AUTOINCREMENT never reuses a deleted message's id; neither will this)."""

        def op(conn: PgConnection) -> None:
            for table in tables:
                if table.serial is None:
                    continue
                name, col = ident(table.name), ident(table.serial)
                top = _one(conn, f"SELECT COALESCE(max({col}), 0) FROM {name}".encode())
                value = max(int(top), floors.get(table.name, 0))
                conn.execute("SELECT setval(pg_get_serial_sequence(%s, %s), %s, %s)",
                             (name, table.serial, max(value, 1), value > 0))

        await self.store.write(op)


def _nul_row(table: TablePlan, rows: list[tuple[Any, ...]]) -> str | None:
    """Which row holds a NUL character (SQLite text may; PostgreSQL text cannot), or None."""
    for row in rows:
        for col, value in zip(table.columns, row, strict=False):
            if isinstance(value, str) and "\x00" in value:
                key = ", ".join(f"{k}={row[table.columns.index(k)]!r}" for k in table.key)
                return (f"the row {key or '(no key)'} has a NUL character in {col}, which PostgreSQL text cannot "
                        "hold; remove it in the source (or delete that row) and run the copy again")
    return None


def _one(conn: PgConnection, sql: str | bytes, params: tuple[Any, ...] = ()) -> Any:
    row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]


def _shapes(conn: PgConnection) -> dict[str, TableShape]:
    tables = [str(r[0]) for r in conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition")]
    columns: dict[str, list[str]] = {t: [] for t in tables}
    serial: dict[str, str] = {}
    # pg_catalog only: information_schema's views call functions that lock each table they
    # describe, and a copy must not wait on a table some session holds while it only reflects
    for t, col, generated, identity, owns_sequence in conn.execute(
        "SELECT c.relname, a.attname, a.attgenerated, a.attidentity,"
        " EXISTS (SELECT 1 FROM pg_depend d JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'"
        "  WHERE d.classid = 'pg_class'::regclass AND d.refobjid = c.oid AND d.refobjsubid = a.attnum)"
        " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped"
        " ORDER BY c.relname, a.attnum"
    ):
        if t not in columns or generated:
            continue
        columns[t].append(col)
        if identity or owns_sequence:
            serial[t] = col
    keys: dict[str, list[str]] = {t: [] for t in tables}
    for t, col in conn.execute(
        "SELECT c.relname, a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"
        " WHERE i.indisprimary AND n.nspname = current_schema()"
        " ORDER BY c.relname, array_position(i.indkey::int2[], a.attnum)"
    ):
        if t in keys:
            keys[t].append(col)
    references: dict[str, set[str]] = {t: set() for t in tables}
    parents: dict[str, str] = {}
    for t, ref, col, width in conn.execute(
        "SELECT c.relname, f.relname, a.attname, array_length(con.conkey, 1)"
        " FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid"
        " JOIN pg_class f ON f.oid = con.confrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
        " JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = con.conkey[1]"
        " WHERE con.contype = 'f' AND n.nspname = current_schema()"
    ):
        if t not in references:
            continue
        if ref == t and width == 1:
            parents[t] = col
        elif ref != t:
            references[t].add(ref)
    return {
        t: TableShape(t, tuple(columns[t]), tuple(keys[t]), frozenset(references[t]), parents.get(t),
                      serial.get(t) if serial.get(t) in keys[t] and len(keys[t]) == 1 else None)
        for t in tables
    }
