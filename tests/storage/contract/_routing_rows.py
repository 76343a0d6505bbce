"""Sessions and messages written with plain SQL, for the contract tests of the routing families
(inbound, bindings, ownership) that read them: those tests hold their own family to its promise
without leaning on ``ops``, which is ported on its own. ``%s`` placeholders, ``?`` on SQLite."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from .conftest import Db

T0 = 1_700_000_000.0


def sql(db: Db, conn: Any, text: str, params: tuple[Any, ...] = ()) -> Any:
    """``conn.execute`` with the backend's placeholders."""
    return conn.execute(text.replace("%s", "?") if db.name == "sqlite" else text, params)


async def add_session(db: Db, session_id: str, source: str = "telegram", *, user_id: str | None = None,
                      started_at: float = T0, title: str | None = None, ended_at: float | None = None) -> None:
    await db.write(lambda c: sql(db, c, "INSERT INTO sessions (id, source, user_id, started_at, title, ended_at) "
                                        "VALUES (%s, %s, %s, %s, %s, %s)",
                                 (session_id, source, user_id, started_at, title, ended_at)))


async def add_message(db: Db, session_id: str, role: str, content: str, *, timestamp: float) -> int:
    """A message row; its id."""
    def op(conn: Any) -> int:
        row = sql(db, conn, "INSERT INTO messages (session_id, role, content, timestamp) VALUES (%s, %s, %s, %s) "
                            "RETURNING id", (session_id, role, content, timestamp)).fetchone()
        return int(row[0])

    return await db.write(op)



async def lock_waiters(store: Any) -> int:
    """How many of the database's sessions wait for a lock now (PostgreSQL only)."""
    def count(conn: Any) -> int:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND wait_event_type = 'Lock'").fetchone()
        return int(row[0])

    result: int = await store.read(count)
    return result


async def until_lock_waiters(store: Any, n: int) -> None:
    """Return once ``n`` sessions wait for a lock (a write of another node is blocked on ours)."""
    while await lock_waiters(store) < n:
        await asyncio.sleep(0.005)


def server_outside_the_loop(request: pytest.FixtureRequest) -> None:
    """Start the PostgreSQL server before ``db`` (an async fixture) asks for it: its template is
    migrated with ``asyncio.run``, which cannot run inside the test's event loop. A test module
    uses it as ``_server_first = pytest.fixture(autouse=True)(server_outside_the_loop)``."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("db") == "postgresql":
        request.getfixturevalue("pg_server")
