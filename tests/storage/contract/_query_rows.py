"""Rows for the ``queries`` contract tests, written with plain SQL on either backend (``?`` for
SQLite, ``%s`` for PostgreSQL): the tests are about what the reads return, whoever wrote the rows."""

from __future__ import annotations

import json
from typing import Any

from .conftest import Db

T0 = 1_700_000_000.0
DAY = 86400.0
#: the reference's v11 columns: a read returns these, on either backend, and nothing more
SESSION_COLUMNS = ["id", "source", "user_id", "model", "model_config", "system_prompt", "parent_session_id",
                   "started_at", "ended_at", "end_reason", "message_count", "tool_call_count", "input_tokens",
                   "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens",
                   "billing_provider", "billing_base_url", "billing_mode", "estimated_cost_usd", "actual_cost_usd",
                   "cost_status", "cost_source", "pricing_version", "title", "api_call_count"]
MESSAGE_COLUMNS = ["id", "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name", "timestamp",
                   "token_count", "finish_reason", "reasoning", "reasoning_content", "reasoning_details",
                   "codex_reasoning_items", "codex_message_items"]
TOOL_CALLS = [
    {"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": '{"cmd": "ls"}'}},
]


def sql_for(db: Db, sql: str) -> str:
    return sql.replace("?", "%s") if db.name == "postgresql" else sql


async def exec_sql(db: Db, sql: str, params: tuple[Any, ...] = ()) -> None:
    await db.write(lambda conn: conn.execute(sql_for(db, sql), params))


async def insert_session(db: Db, session_id: str, source: str = "cli", *, started_at: float = T0,
                          **columns: Any) -> None:
    cols = {"id": session_id, "source": source, "started_at": started_at, **columns}
    marks = ", ".join("?" * len(cols))
    await exec_sql(db, f"INSERT INTO sessions ({', '.join(cols)}) VALUES ({marks})", tuple(cols.values()))


async def insert_message(db: Db, session_id: str, role: str, content: str | None, *,
                          timestamp: float = T0, **columns: Any) -> int:
    cols = {"session_id": session_id, "role": role, "content": content, "timestamp": timestamp, **columns}
    for key in ("tool_calls", "reasoning_details", "codex_reasoning_items", "codex_message_items"):
        if key in cols and not isinstance(cols[key], str):
            cols[key] = json.dumps(cols[key])
    marks = ", ".join("?" * len(cols))
    sql = sql_for(db, f"INSERT INTO messages ({', '.join(cols)}) VALUES ({marks}) RETURNING id")
    return int(await db.write(lambda conn: conn.execute(sql, tuple(cols.values())).fetchone()[0]))


async def bind(db: Db, key: str, session_id: str, platform: str, user_id: str | None, at: float = T0) -> None:
    await exec_sql(db, "INSERT INTO gateway_session_bindings (session_key, session_id, platform, user_id, first_bound_at) "
                    "VALUES (?, ?, ?, ?, ?)", (key, session_id, platform, user_id, at))


async def supersede(db: Db, session_id: str, message_id: int) -> None:
    await exec_sql(db, "INSERT INTO gateway_superseded (message_id, session_id, superseded_at) VALUES (?, ?, ?)",
                (message_id, session_id, T0))


def ids_of(rows: list[dict[str, Any]]) -> list[str]:
    return [r["id"] for r in rows]
