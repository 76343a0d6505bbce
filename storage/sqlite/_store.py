"""``StateStore``: the async door to state.db (one writer, read-only readers)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from .._door import StoreDoor
from . import _ops, _queries, _search
from ._reader import Reader
from ._writer import Writer
from ._writer_stats import WriterSettings

T = TypeVar("T")


class StateStore(StoreDoor):
    """state.db behind one writer task and read-only readers; the operations are ``StoreDoor``'s."""

    _ops = _ops
    _queries = _queries
    _search = _search
    path: Path
    writer: Writer

    def __init__(self, path: Path, *, writer_settings: WriterSettings | None = None, readers: int = 4) -> None:
        self.path = Path(path)
        self.writer = Writer(self.path, writer_settings)
        self._readers = readers
        self._reader: Reader | None = None

    # ---------------------------------------------------------------- lifecycle

    async def open(self) -> None:
        await self.writer.start()
        self._reader = Reader(self.path, workers=self._readers)

    async def close(self) -> None:
        await self.writer.aclose()
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    @property
    def reader(self) -> Reader:
        if self._reader is None:
            raise RuntimeError("StateStore is not open")
        return self._reader

    async def catch_up_index(self) -> bool:
        """Wait until every committed message is in the FTS tables (a reference reader then finds it)."""
        return await self.writer.catch_up_index()

    async def write(self, op: Callable[[sqlite3.Connection], T]) -> T:
        return await self.writer.submit(op)

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self.reader.run(fn)

    async def vacuum(self) -> None:
        await self.writer.submit(lambda conn: conn.execute("VACUUM"), transactional=False)

    async def stats(self) -> dict[str, Any]:
        return await self.read(partial(_queries.stats, db_path=self.path))
