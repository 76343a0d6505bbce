"""Read-only connections on worker threads, so reads never block the event loop
and never write or checkpoint (only the writer does)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from ..errors import StorageClosedError, StorageError
from ._connection import open_readonly_connection

T = TypeVar("T")


class Reader:
    def __init__(self, path: Path, *, workers: int = 4) -> None:
        self.path = Path(path)
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="state-reader")
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._guard = threading.Lock()
        self._closed = False

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = open_readonly_connection(self.path)
            self._local.conn = conn
            with self._guard:
                self._conns.append(conn)
        return conn

    def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return fn(self._conn())
        except sqlite3.Error as exc:
            raise StorageError(f"reading state.db failed: {exc}") from exc

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise StorageClosedError("the state.db reader is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._call, fn)

    def run_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """For command-line tools without an event loop."""
        return self._call(fn)

    def close(self) -> None:
        self._closed = True
        self._executor.shutdown(wait=True)
        with self._guard:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
