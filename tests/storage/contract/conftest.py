"""The storage contract: every test here runs against SQLite (state.db) and PostgreSQL (a real
server), through the same function names, and must see the same behaviour.

A test takes the ``db`` fixture and calls a family's function the way the gateway does::

    await db.write(partial(db.m.ops.create_session, session_id="s1", source="cli"))
    rows = await db.read(partial(db.m.queries.get_messages, session_id="s1"))

``db.m`` is the backend's package (``storage.sqlite`` or ``storage.postgres``), whose families
(``ops``, ``queries``, ``inbound``, …) have the same functions with the same parameters.
``await db.settle()`` waits for work a backend does after COMMIT (SQLite's search indexer).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest

from storage import StateStore, WriterSettings

T = TypeVar("T")


@dataclass
class Db:
    name: str
    store: Any
    m: ModuleType

    async def write(self, op: Callable[[Any], T]) -> T:
        result: T = await self.store.write(op)
        return result

    async def read(self, fn: Callable[[Any], T]) -> T:
        result: T = await self.store.read(fn)
        return result

    async def settle(self) -> None:
        if self.name == "sqlite":
            await self.store.catch_up_index()


@pytest.fixture(params=["sqlite", "postgresql"])
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Db]:
    if request.param == "sqlite":
        import storage.sqlite

        async with StateStore(tmp_path / "state.db", writer_settings=WriterSettings(synchronous="NORMAL")) as st:
            yield Db("sqlite", st, storage.sqlite)
    else:
        import storage.postgres

        url = request.getfixturevalue("pg_url")
        async with storage.postgres.PgStore(url) as pg:
            yield Db("postgresql", pg, storage.postgres)
