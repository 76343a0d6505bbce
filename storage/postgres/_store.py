"""``PgStore``: the door to a PostgreSQL database, the same shape as SQLite's ``StateStore``.

``write(op)`` runs ``op(conn)`` inside one transaction on a pooled connection, in a worker
thread, and resolves after COMMIT; ``read(fn)`` runs ``fn(conn)`` in a read-only transaction
(one snapshot, as SQLite's readers see). The functions of a connection are plain functions, as
SQLite's are, so the gateway composes them into one ``write`` the same way whichever backend
is configured (psycopg 3: a sync driver keeps that one shape; its pool and automatic prepared
statements do what a driver for asyncio would).

Unlike SQLite there is no single writer: several nodes write at once, and PostgreSQL's row
locks, unique constraints and ``SKIP LOCKED`` claims do what the one writer task does for
state.db. A transaction that loses a serialization race or a deadlock is run again (bounded);
a connection found dead before the transaction began is replaced and the transaction run on a
fresh one; a server that cannot be reached raises ``StorageUnavailableError`` — nothing half
written, and the caller decides (an inbound update stays unacknowledged). Once the pool could
not get a connection in time, later transactions wait a second for one, not the whole connect
timeout, until one gets through: the server's absence is answered quickly, a blip is waited out.
"""

from __future__ import annotations

import asyncio
import importlib
import random
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import psycopg
import structlog
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from .._door import StoreDoor
from .._url import StorageURL, parse_storage_url
from ..errors import StorageClosedError, StorageFullError, StorageUnavailableError
from ..sqlite import WriterStats
from ._conn import PgConnection, sqlite_like_row
from ._migrate import migrate

T = TypeVar("T")
log = structlog.get_logger("hermes.storage.postgres")

_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
_ATTEMPTS = 5
#: how long a transaction waits for a connection once the pool could not get one in time
_AWAY_WAIT = 1.0
#: how long the pool retries one lost connection before giving it up (psycopg_pool's default is
#: 5 minutes, with pauses that double: after an outage of 20 s its next try could be 15 s after
#: the server was back). Given up, the next request that finds no connection grows the pool at once.
_RECONNECT_FOR = 2.0


class PgStore(StoreDoor):
    """One pool per process. ``open()`` connects and migrates (every node may: migrations take an
    advisory lock), ``close()`` drains the pool."""

    def __init__(
        self,
        url: StorageURL | str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        connect_timeout: float = 10.0,
        statement_timeout: float = 30.0,
        application_name: str = "hermes-gateway",
    ) -> None:
        self.url = url if isinstance(url, StorageURL) else parse_storage_url(url, default_path=Path("state.db"))
        if self.url.backend != "postgresql":
            raise ValueError("PgStore needs a postgresql:// URL")
        self._min_size = min_size
        self._max_size = max_size
        self._connect_timeout = connect_timeout
        self._conn_kwargs: dict[str, Any] = {
            "autocommit": True,  # transactions are explicit: BEGIN … COMMIT around each op
            "connect_timeout": max(1, int(connect_timeout)),
            "application_name": application_name,
            "options": f"-c statement_timeout={int(statement_timeout * 1000)}",
            "row_factory": sqlite_like_row,
        }
        self.path = None  # no file: the database server holds the state
        self.writer = _Counters()
        self._pool: ConnectionPool | None = None
        self._executor: ThreadPoolExecutor | None = None
        self.migrated: list[int] = []
        #: the last wait for a connection timed out (the server is away): wait ``_AWAY_WAIT`` only
        self._away = False
        #: connections handed out so far: a wait that began before the latest one and timed out
        #: says nothing of the server now (the pool was getting its connections back)
        self._served = 0

    async def open(self) -> None:
        await asyncio.to_thread(self._open_sync)
        self._executor = ThreadPoolExecutor(max_workers=self._max_size, thread_name_prefix="hermes-pg")
        if self.migrated:
            log.info("storage.migrated", url=self.url.redacted, versions=self.migrated)

    def _open_sync(self) -> None:
        # one plain connection first: a wrong password or a closed port is a clear error now,
        # where a pool would only keep retrying in the background
        try:
            with psycopg.connect(self.url.dsn, **self._conn_kwargs) as conn:
                with conn.transaction():
                    self.migrated = migrate(conn)
        except psycopg.OperationalError as exc:
            raise StorageUnavailableError(f"cannot use the database at {self.url.redacted}: {_why(exc)}") from None
        self._pool = ConnectionPool(
            self.url.dsn,
            min_size=self._min_size,
            max_size=self._max_size,
            kwargs=self._conn_kwargs,
            timeout=self._connect_timeout,
            name="hermes",
            reconnect_timeout=_RECONNECT_FOR,
            open=False,
        )
        self._pool.open(wait=True, timeout=self._connect_timeout)

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        if pool is not None:
            await asyncio.to_thread(pool.close, 10.0)

    @property
    def pool(self) -> ConnectionPool:
        if self._pool is None:
            raise StorageClosedError("the database pool is closed")
        return self._pool

    async def write(self, op: Callable[[PgConnection], T]) -> T:
        """``op`` in one transaction; run again on a serialization failure or deadlock."""
        return await self._submit(op, readonly=False)

    async def read(self, fn: Callable[[PgConnection], T]) -> T:
        return await self._submit(fn, readonly=True)

    def run_sync(self, fn: Callable[[PgConnection], T], *, readonly: bool = False) -> T:
        """The same transaction, from a thread that may block (the command line, a copy)."""
        return self._transaction(fn, readonly)

    async def _submit(self, fn: Callable[[PgConnection], T], *, readonly: bool) -> T:
        if self._executor is None:
            raise StorageClosedError("the database pool is closed")
        loop = asyncio.get_running_loop()
        if readonly:
            return await loop.run_in_executor(self._executor, self._transaction, fn, readonly)
        stats = self.writer.stats
        stats.submitted += 1
        stats.queue_depth += 1
        started = time.perf_counter()
        try:
            result = await loop.run_in_executor(self._executor, self._transaction, fn, readonly)
        except StorageFullError as exc:
            stats.failed_ops += 1
            stats.full_failures += 1
            stats.last_disk_fault = (time.time(), str(exc))
            raise
        except BaseException:
            stats.failed_ops += 1
            raise
        finally:
            stats.queue_depth -= 1
        stats.commits += 1
        stats.committed_ops += 1
        stats.recent_batch_sizes.append(1)
        stats.recent_commit_ms.append((time.perf_counter() - started) * 1000.0)
        return result

    async def vacuum(self) -> None:
        """VACUUM runs outside a transaction, on a connection of its own."""
        def run() -> None:
            with psycopg.connect(self.url.dsn, **self._conn_kwargs) as conn:
                conn.execute("VACUUM (ANALYZE)")
        try:
            await asyncio.to_thread(run)
        except psycopg.OperationalError as exc:
            raise StorageUnavailableError(f"the database at {self.url.redacted} is unavailable: {_why(exc)}") from None

    async def stats(self) -> dict[str, Any]:
        return await self.read(partial(self._queries.stats, db_path=None))

    @property
    def _ops(self) -> ModuleType:  # type: ignore[override]
        return _family("ops")

    @property
    def _queries(self) -> ModuleType:  # type: ignore[override]
        return _family("queries")

    @property
    def _search(self) -> ModuleType:  # type: ignore[override]
        return _family("search")

    def _transaction(self, fn: Callable[[PgConnection], T], readonly: bool) -> T:
        # a read sees one snapshot for all its statements, as SQLite's readers do
        begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" if readonly else "BEGIN"
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                # while the pool cannot reach the server, a transaction waits a second for a
                # connection, not the whole connect timeout: a request makes several, and its
                # caller (an HTTP client, a webhook) gives up long before they all time out
                served = self._served
                with self.pool.connection(timeout=_AWAY_WAIT if self._away else None) as conn:
                    try:
                        conn.execute(begin)
                    except psycopg.OperationalError:
                        # dead before anything of ours ran (the server restarted): so are the
                        # others it had idle then; they are checked (and replaced) at once, rather
                        # than each costing a transaction one of its attempts
                        if attempt == _ATTEMPTS:
                            raise
                        if attempt == 1:
                            self.pool.check()
                        continue
                    self._away = False
                    self._served += 1
                    try:
                        result = fn(conn)
                        conn.execute("COMMIT")
                        return result
                    except BaseException:
                        if not conn.broken:
                            conn.execute("ROLLBACK")
                        raise
            except _RETRYABLE:
                if attempt == _ATTEMPTS:
                    raise
                time.sleep(random.uniform(0, 0.01 * 2**attempt))
            except pg_errors.DiskFull:
                raise StorageFullError("the database server's disk is full; nothing was written") from None
            except PoolClosed:
                raise StorageClosedError("the database pool is closed") from None
            except (psycopg.OperationalError, PoolTimeout) as exc:
                if isinstance(exc, PoolTimeout) and served == self._served:
                    self._away = True
                raise StorageUnavailableError(f"the database at {self.url.redacted} is unavailable: {_why(exc)}") from None
        raise AssertionError("unreachable")

    async def healthy(self) -> bool:
        """True when a round trip to the server succeeds now (``/readyz``)."""
        try:
            return bool(await self.read(_select_one))
        except (StorageUnavailableError, StorageClosedError):
            return False

    async def notifications(self, channel: str) -> AsyncIterator[str | None]:
        """Each NOTIFY payload on ``channel``, on a connection of its own. The first item is None,
        once LISTEN is in place: what was sent before it may have been missed, so the caller
        polls (or reads everything) then. Raises ``StorageUnavailableError`` when the connection
        is lost: the caller listens again, and polls again."""
        conn = await self.listen_connection()
        try:
            await conn.execute(f"LISTEN {channel}")
            yield None
            async for note in conn.notifies():
                yield note.payload
            raise StorageUnavailableError("the database closed the listening connection")
        except psycopg.OperationalError as exc:
            raise StorageUnavailableError(f"lost the listening connection: {_why(exc)[:200]}") from None
        finally:
            try:
                await conn.close()
            except psycopg.Error:
                pass

    async def listen_connection(self) -> psycopg.AsyncConnection[Any]:
        """A connection of its own, outside the pool, for ``LISTEN`` (it stays open and idle)."""
        try:
            return await psycopg.AsyncConnection.connect(self.url.dsn, **self._conn_kwargs)
        except psycopg.OperationalError as exc:
            raise StorageUnavailableError(f"cannot reach the database at {self.url.redacted}: {_why(exc)}") from None


class _Counters:
    """What ``status`` and ``/metrics`` read as ``store.writer.stats``: writes submitted, in flight
    (``queue_depth``), committed, failed, their latency. Touched from the event loop only."""

    def __init__(self) -> None:
        self.stats = WriterStats()


def _family(name: str) -> ModuleType:
    # the families are this package's modules; imported by name so that this module loads first
    return importlib.import_module(f"storage.postgres._{name}")


def _select_one(conn: PgConnection) -> bool:
    row = conn.execute("SELECT 1").fetchone()
    return row is not None and row[0] == 1


def _why(exc: BaseException) -> str:
    """What went wrong, in words that never carry the DSN (libpq's messages name host and user only)."""
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())[:240]
