"""Reading rows back in a contract test without another family's read functions: one SQL text
for both backends (``?`` placeholders, turned into psycopg's ``%s`` on PostgreSQL).

For checking what a write left in the tables that both backends share (v11 and the gateway's),
never for what differs between them (SQLite's FTS tables, PostgreSQL's search columns).
"""

from __future__ import annotations

import sqlite3
from functools import partial
from typing import Any

import pytest

from .conftest import Db


@pytest.fixture(autouse=True)
def pg_server_first(request: pytest.FixtureRequest) -> None:
    """Start the test server from a plain (sync) fixture: ``db`` is async, and the server's
    fixture migrates its template with ``asyncio.run``, which cannot run inside a running loop."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("db") == "postgresql":
        request.getfixturevalue("pg_server")


def _run(conn: Any, text: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
    if not isinstance(conn, sqlite3.Connection):
        text = text.replace("%", "%%").replace("?", "%s")
    cur = conn.execute(text, params)
    if cur.description is None:  # a statement that returns no rows
        return []
    return [dict(zip(r.keys(), tuple(r), strict=True)) for r in cur.fetchall()]


def run(conn: Any, text: str, *params: Any) -> list[dict[str, Any]]:
    """The rows of ``text`` inside a function of a connection (a write composing it)."""
    return _run(conn, text, params)


async def rows(db: Db, text: str, *params: Any) -> list[dict[str, Any]]:
    """The rows of ``text`` as dicts, in one read."""
    return await db.read(partial(_run, text=text, params=params))


async def values(db: Db, text: str, *params: Any) -> list[Any]:
    """The first column of each row."""
    return [next(iter(r.values())) for r in await rows(db, text, *params)]


async def session(db: Db, session_id: str) -> dict[str, Any] | None:
    found = await rows(db, "SELECT * FROM sessions WHERE id = ?", session_id)
    return found[0] if found else None


async def messages(db: Db, session_id: str) -> list[dict[str, Any]]:
    return await rows(db, "SELECT * FROM messages WHERE session_id = ? ORDER BY id", session_id)


async def count(db: Db, table: str) -> int:
    return int((await values(db, f"SELECT COUNT(*) FROM {table}"))[0])
