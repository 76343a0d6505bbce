"""``PgStore``: the async door to a PostgreSQL database, the same shape as SQLite's ``StateStore``.

``write(op)`` runs ``op(conn)`` inside one transaction on a pooled connection and resolves after
COMMIT; ``read(fn)`` runs ``fn(conn)`` in a read-only transaction (one snapshot, as SQLite's readers
see). The functions of a connection are ``async`` here (asyncpg), named as SQLite's are, so a
caller composes them the same way. Unlike SQLite there is no single writer: several nodes write
at once, and PostgreSQL's row locks, unique constraints and ``SKIP LOCKED`` claims do what the
one writer task does for state.db. A transaction that loses a serialization race or a deadlock
is run again (bounded); a server that cannot be reached raises ``StorageUnavailableError`` —
nothing half-written, the caller decides (an inbound update stays unacknowledged).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import asyncpg
import structlog

from .._url import StorageURL, parse_storage_url
from ..errors import StorageClosedError, StorageFullError, StorageUnavailableError
from ._conn import PgConnection
from ._migrate import migrate

T = TypeVar("T")
log = structlog.get_logger("hermes.storage.postgres")

#: errors after which the same transaction, run again, may well succeed
_RETRYABLE = (asyncpg.SerializationError, asyncpg.DeadlockDetectedError)
#: errors that mean the server is gone or not answering (not that the statement was wrong)
_UNREACHABLE: tuple[type[BaseException], ...] = (
    OSError,
    asyncio.TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.InterfaceError,
)
_CLOSE_ERRORS: tuple[type[BaseException], ...] = (TimeoutError, *_UNREACHABLE)
_HEALTH_ERRORS: tuple[type[BaseException], ...] = (StorageClosedError, *_UNREACHABLE)
_ATTEMPTS = 5



class PgStore:
    """One pool per process. ``open()`` connects and migrates (every node may: migrations take an
    advisory lock), ``close()`` drains the pool."""

    def __init__(
        self,
        url: StorageURL | str,
        *,
        min_size: int = 1,
        max_size: int = 10,
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
        self._statement_timeout = statement_timeout
        self._application_name = application_name
        self._pool: asyncpg.Pool | None = None
        self.migrated: list[int] = []

    async def __aenter__(self) -> PgStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        try:
            self._pool = await asyncpg.create_pool(
                self.url.dsn,
                min_size=self._min_size,
                max_size=self._max_size,
                timeout=self._connect_timeout,
                command_timeout=self._statement_timeout,
                server_settings={"application_name": self._application_name},
            )
        except _UNREACHABLE as exc:
            raise StorageUnavailableError(f"cannot reach the database at {self.url.redacted}: {_why(exc)}") from None
        except asyncpg.InvalidPasswordError:
            raise StorageUnavailableError(
                f"the database at {self.url.redacted} refused the user or password in storage.url"
            ) from None
        async with self._pool.acquire() as conn:
            self.migrated = await migrate(conn)
        if self.migrated:
            log.info("storage.migrated", url=self.url.redacted, versions=self.migrated)

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), timeout=10)
            except _CLOSE_ERRORS:
                pool.terminate()

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise StorageClosedError("the database pool is closed")
        return self._pool

    async def write(self, op: Callable[[PgConnection], Awaitable[T]]) -> T:
        """``op`` in one transaction; run again on a serialization failure or deadlock."""
        return await self._run(op, readonly=False)

    async def read(self, fn: Callable[[PgConnection], Awaitable[T]]) -> T:
        return await self._run(fn, readonly=True)

    async def _run(self, fn: Callable[[PgConnection], Awaitable[T]], *, readonly: bool) -> T:
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                async with self.pool.acquire() as conn, conn.transaction(readonly=readonly):
                    return await fn(conn)
            except _RETRYABLE:
                if attempt == _ATTEMPTS:
                    raise
                await asyncio.sleep(random.uniform(0, 0.01 * 2**attempt))
            except asyncpg.DiskFullError:
                raise StorageFullError("the database server's disk is full; nothing was written") from None
            except _UNREACHABLE as exc:
                if isinstance(exc, asyncpg.InterfaceError) and "pool is closing" in str(exc):
                    raise StorageClosedError("the database pool is closing") from None
                raise StorageUnavailableError(
                    f"the database at {self.url.redacted} is unavailable: {_why(exc)}"
                ) from None
        raise AssertionError("unreachable")

    async def healthy(self) -> bool:
        """True when a round trip to the server succeeds now (``/readyz``)."""
        try:
            async with self.pool.acquire(timeout=2) as conn:
                return bool(await conn.fetchval("SELECT 1", timeout=2) == 1)
        except _HEALTH_ERRORS:
            return False

    async def connect_listener(self) -> asyncpg.Connection:
        """A connection of its own (outside the pool) for ``LISTEN``: it must stay open and idle."""
        try:
            conn: asyncpg.Connection = await asyncpg.connect(
                self.url.dsn, timeout=self._connect_timeout,
                server_settings={"application_name": f"{self._application_name}/listen"},
            )
        except _UNREACHABLE as exc:
            raise StorageUnavailableError(f"cannot reach the database at {self.url.redacted}: {_why(exc)}") from None
        return conn


def _why(exc: BaseException) -> str:
    """What went wrong, in words that never carry the DSN."""
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]
