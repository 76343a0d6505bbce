"""Rows for the search contract, written the same way on both backends.

Search reads sessions and messages; how they got there is other families' business. The rows
are written with plain INSERTs (one statement per row, in the backend's own placeholder style)
so these tests depend on the search family only, and ``db.settle()`` then lets state.db's
indexer catch up, as a write through ``ops`` would need too.
"""

from __future__ import annotations

import itertools
import json
from functools import partial
from typing import Any

from .conftest import Db

T0 = 1_700_000_000.0
_clock = itertools.count()


def _sql(db: Db, sql: str) -> str:
    return sql.replace("?", "%s") if db.name == "postgresql" else sql


def _exec(conn: Any, sql: str, params: tuple[Any, ...]) -> Any:
    return conn.execute(sql, params).fetchone()


async def session(db: Db, sid: str, source: str, *, started_at: float = T0, parent: str | None = None,
                  title: str | None = None, user_id: str | None = None, model: str | None = None) -> None:
    sql = _sql(db, "INSERT INTO sessions (id, source, user_id, model, parent_session_id, started_at, title) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id")
    await db.write(partial(_exec, sql=sql, params=(sid, source, user_id, model, parent, started_at, title)))


async def message(db: Db, sid: str, role: str, content: str | None, *, tool_name: str | None = None,
                  tool_calls: list[dict[str, Any]] | None = None, tool_call_id: str | None = None) -> int:
    sql = _sql(db, "INSERT INTO messages (session_id, role, content, tool_name, tool_calls, tool_call_id, timestamp) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id")
    calls = None if tool_calls is None else json.dumps(tool_calls, ensure_ascii=False, separators=(",", ":"))
    row = await db.write(partial(_exec, sql=sql, params=(sid, role, content, tool_name, calls, tool_call_id,
                                                        T0 + next(_clock))))
    return int(row[0])


async def bind(db: Db, key: str, sid: str, platform: str, user_id: str) -> None:
    sql = _sql(db, "INSERT INTO gateway_session_bindings (session_key, session_id, platform, user_id, first_bound_at) "
                   "VALUES (?, ?, ?, ?, ?) RETURNING session_id")
    await db.write(partial(_exec, sql=sql, params=(key, sid, platform, user_id, T0)))


async def supersede(db: Db, sid: str, message_id: int) -> None:
    sql = _sql(db, "INSERT INTO gateway_superseded (message_id, session_id, superseded_at) VALUES (?, ?, ?) "
                   "RETURNING message_id")
    await db.write(partial(_exec, sql=sql, params=(message_id, sid, T0)))


async def search_messages(db: Db, query: str, **kw: Any) -> list[dict[str, Any]]:
    await db.settle()
    result: list[dict[str, Any]] = await db.read(partial(db.m.search.search_messages, query=query, **kw))
    return result


async def ids(db: Db, query: str, **kw: Any) -> set[int]:
    return {r["id"] for r in await search_messages(db, query, **kw)}


async def search_sessions(db: Db, query: str, **kw: Any) -> list[dict[str, Any]]:
    await db.settle()
    result: list[dict[str, Any]] = await db.read(partial(db.m.search.search_sessions, query=query, **kw))
    return result


async def messages_around(db: Db, session_id: str, around: int, **kw: Any) -> dict[str, Any]:
    result: dict[str, Any] = await db.read(partial(db.m.search.messages_around, session_id=session_id,
                                                   around_message_id=around, **kw))
    return result

