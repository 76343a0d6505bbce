"""Write operations: plain functions of a connection, run by the writer.

Each runs inside the writer's transaction and touches only the database, so
the writer may replay it. The same functions serve command-line tools that
write directly (holding the writer lock) when no daemon runs.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping
from typing import Any

from .._messages import BILLING_FIELDS, USAGE_FIELDS, json_or_none
from .._messages import message_columns as message_columns
from .._model import PruneResult
from .._text import clean_title, split_lineage_title
from ..errors import SessionNotFoundError, TitleConflictError
from ._attachments import delete_for_sessions, delete_rows, for_messages
from ._prune import prune_plan


def create_session(
    conn: sqlite3.Connection,
    session_id: str,
    source: str,
    *,
    model: str | None = None,
    user_id: str | None = None,
    parent_session_id: str | None = None,
    model_config: Mapping[str, Any] | str | None = None,
    system_prompt: str | None = None,
    started_at: float | None = None,
) -> bool:
    """Insert a session; False if it already existed (idempotent for retries)."""
    cur = conn.execute(
        "INSERT OR IGNORE INTO sessions (id, source, user_id, model, model_config, system_prompt, "
        "parent_session_id, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            session_id,
            source,
            user_id,
            model,
            json_or_none(model_config),
            system_prompt,
            parent_session_id,
            time.time() if started_at is None else started_at,
        ),
    )
    return cur.rowcount == 1


def _require_session(conn: sqlite3.Connection, session_id: str) -> None:
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
        raise SessionNotFoundError(f"No session with id {session_id}.")


def end_session(conn: sqlite3.Connection, session_id: str, end_reason: str, *, at: float | None = None) -> bool:
    """Mark a session ended; the first end wins. False if it was already ended."""
    _require_session(conn, session_id)
    cur = conn.execute(
        "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
        (time.time() if at is None else at, end_reason, session_id),
    )
    return cur.rowcount == 1


def reopen_session(conn: sqlite3.Connection, session_id: str) -> None:
    _require_session(conn, session_id)
    conn.execute("UPDATE sessions SET ended_at = NULL, end_reason = NULL WHERE id = ?", (session_id,))


def update_system_prompt(conn: sqlite3.Connection, session_id: str, system_prompt: str) -> None:
    _require_session(conn, session_id)
    conn.execute("UPDATE sessions SET system_prompt = ? WHERE id = ?", (system_prompt, session_id))


def update_session_model(
    conn: sqlite3.Connection, session_id: str, model: str | None, model_config: Mapping[str, Any] | str | None = None
) -> None:
    _require_session(conn, session_id)
    conn.execute(
        "UPDATE sessions SET model = ?, model_config = COALESCE(?, model_config) WHERE id = ?",
        (model, json_or_none(model_config), session_id),
    )


def append_message(
    conn: sqlite3.Connection,
    session_id: str,
    role: str,
    content: str | None = None,
    *,
    tool_name: str | None = None,
    tool_calls: Any = None,
    tool_call_id: str | None = None,
    token_count: int | None = None,
    finish_reason: str | None = None,
    reasoning: str | None = None,
    reasoning_content: str | None = None,
    reasoning_details: Any = None,
    codex_reasoning_items: Any = None,
    codex_message_items: Any = None,
    timestamp: float | None = None,
) -> int:
    """Append one message; returns its row id (the proof it was written)."""
    n_tool_calls = len(tool_calls) if isinstance(tool_calls, list) else 0
    row = (
        session_id,
        role,
        content,
        tool_call_id,
        json_or_none(tool_calls),
        tool_name,
        time.time() if timestamp is None else timestamp,
        token_count,
        finish_reason,
        reasoning,
        reasoning_content,
        json_or_none(reasoning_details),
        json_or_none(codex_reasoning_items),
        json_or_none(codex_message_items),
    )
    try:
        cur = conn.execute(
            "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, "
            "token_count, finish_reason, reasoning, reasoning_content, reasoning_details, "
            "codex_reasoning_items, codex_message_items) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            row,
        )
    except sqlite3.IntegrityError as exc:
        if "FOREIGN KEY" in str(exc):
            raise SessionNotFoundError(f"No session with id {session_id}; the message was not stored.") from exc
        raise
    updated = conn.execute(
        "UPDATE sessions SET message_count = COALESCE(message_count, 0) + 1, "
        "tool_call_count = COALESCE(tool_call_count, 0) + ? WHERE id = ?",
        (n_tool_calls, session_id),
    )
    if updated.rowcount != 1:  # the foreign key catches this first; kept for FK-less connections
        raise SessionNotFoundError(f"No session with id {session_id}; the message was not stored.")
    rowid = cur.lastrowid
    assert rowid is not None
    return rowid


def record_usage(conn: sqlite3.Connection, session_id: str, **usage: Any) -> None:
    """Add token counts and api calls; set billing fields; add costs."""
    _require_session(conn, session_id)
    sets: list[str] = []
    params: list[Any] = []
    for key in USAGE_FIELDS:
        if usage.get(key):
            sets.append(f"{key} = COALESCE({key}, 0) + ?")
            params.append(int(usage[key]))
    for key in ("estimated_cost_usd", "actual_cost_usd"):
        if usage.get(key) is not None:
            sets.append(f"{key} = COALESCE({key}, 0) + ?")
            params.append(float(usage[key]))
    for key in BILLING_FIELDS:
        if usage.get(key) is not None:
            sets.append(f"{key} = ?")
            params.append(str(usage[key]))
    unknown = set(usage) - set(USAGE_FIELDS) - set(BILLING_FIELDS) - {"estimated_cost_usd", "actual_cost_usd"}
    if unknown:
        raise ValueError(f"unknown usage fields: {sorted(unknown)}")
    if sets:
        conn.execute(f"UPDATE sessions SET {', '.join(sets)} WHERE id = ?", (*params, session_id))


# ------------------------------------------------------------------ titles


def next_title_in_lineage(conn: sqlite3.Connection, title: str) -> str:
    """``"X"`` -> ``"X #2"`` (or one past the highest number already used)."""
    base, _ = split_lineage_title(title)
    escaped = base.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    highest = 0
    for (existing,) in conn.execute(
        "SELECT title FROM sessions WHERE title = ? OR title LIKE ? ESCAPE '\\'", (base, f"{escaped} #%")
    ):
        b, n = split_lineage_title(existing)
        if b == base:
            highest = max(highest, n)
    return f"{base} #{max(highest, 1) + 1}"


def set_session_title(conn: sqlite3.Connection, session_id: str, title: str | None) -> str | None:
    """Set (or, with an empty title, clear) a title; unique among sessions."""
    _require_session(conn, session_id)
    cleaned = clean_title(title) if title is not None else None
    if cleaned is not None:
        other = conn.execute(
            "SELECT id FROM sessions WHERE title = ? AND id != ?", (cleaned, session_id)
        ).fetchone()
        if other is not None:
            raise TitleConflictError(cleaned, other[0], next_title_in_lineage(conn, cleaned))
    conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (cleaned, session_id))
    return cleaned


# ------------------------------------------------------------------ cleanup


def _delete_sessions(conn: sqlite3.Connection, ids: list[str]) -> int:
    deleted = 0
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        # Children keep living; they just lose the link to a parent that is gone (a
        # prune never gets here with a kept child: it skips the parents of kept sessions).
        conn.execute(f"UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id IN ({marks})", chunk)
        # A message's files go with it; their bytes, outside the transaction, go with MediaStore.sweep.
        delete_for_sessions(conn, chunk)
        conn.execute(f"DELETE FROM gateway_session_settings WHERE session_id IN ({marks})", chunk)
        # Who sent the messages goes with them (a row naming a person must not outlive its message).
        conn.execute(f"DELETE FROM gateway_message_senders WHERE session_id IN ({marks})", chunk)
        conn.execute(f"DELETE FROM gateway_superseded WHERE session_id IN ({marks})", chunk)
        conn.execute(f"DELETE FROM messages WHERE session_id IN ({marks})", chunk)
        deleted += conn.execute(f"DELETE FROM sessions WHERE id IN ({marks})", chunk).rowcount
    return deleted


def delete_sessions(conn: sqlite3.Connection, session_ids: list[str]) -> int:
    """Delete these sessions with their messages (the FTS index follows), files' rows and settings."""
    return _delete_sessions(conn, list(session_ids))


def replace_with_marker(conn: sqlite3.Connection, message_ids: list[int], marker: str) -> int:
    """Replace these messages' words by ``marker`` in place (a shared conversation keeps its
    shape, its FTS rows follow by trigger); how many were replaced."""
    replaced = 0
    for start in range(0, len(message_ids), 500):
        chunk = message_ids[start : start + 500]
        replaced += conn.execute(
            "UPDATE messages SET content = ?, tool_calls = NULL, tool_name = NULL, reasoning = NULL, "
            "reasoning_content = NULL, reasoning_details = NULL, codex_reasoning_items = NULL, "
            f"codex_message_items = NULL WHERE id IN ({','.join('?' * len(chunk))})", (marker, *chunk)).rowcount
    return replaced


def delete_session(conn: sqlite3.Connection, session_id: str) -> bool:
    return _delete_sessions(conn, [session_id]) == 1


def clear_messages(conn: sqlite3.Connection, session_id: str) -> int:
    _require_session(conn, session_id)
    delete_for_sessions(conn, [session_id])
    conn.execute("DELETE FROM gateway_message_senders WHERE session_id = ?", (session_id,))
    conn.execute("DELETE FROM gateway_superseded WHERE session_id = ?", (session_id,))
    n = conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,)).rowcount
    conn.execute("UPDATE sessions SET message_count = 0, tool_call_count = 0 WHERE id = ?", (session_id,))
    return n


def delete_messages_from(conn: sqlite3.Connection, session_id: str, first_id: int) -> int:
    """Delete the session's messages from row ``first_id`` on (/undo); how many went.

    The one place single messages are deleted: their full-text rows go with them (the FTS
    triggers of the reference schema), their files' rows, /retry marks and senders too, and the
    session's counters are lowered by what went.
    """
    _require_session(conn, session_id)
    where = "WHERE session_id = ? AND id >= ?"
    ids = [int(r[0]) for r in conn.execute(f"SELECT id FROM messages {where}", (session_id, first_id))]
    if not ids:
        return 0
    files = for_messages(conn, ids)
    delete_rows(conn, [a.id for rows in files.values() for a in rows])
    calls = conn.execute(
        "SELECT COALESCE(SUM(CASE WHEN json_valid(tool_calls) AND json_type(tool_calls) = 'array' "
        f"THEN json_array_length(tool_calls) ELSE 0 END), 0) FROM messages {where}", (session_id, first_id),
    ).fetchone()[0]
    conn.execute("DELETE FROM gateway_superseded WHERE session_id = ? AND message_id >= ?", (session_id, first_id))
    conn.execute("DELETE FROM gateway_message_senders WHERE session_id = ? AND message_id >= ?", (session_id, first_id))
    n = conn.execute(f"DELETE FROM messages {where}", (session_id, first_id)).rowcount
    conn.execute(
        "UPDATE sessions SET message_count = MAX(COALESCE(message_count, 0) - ?, 0), "
        "tool_call_count = MAX(COALESCE(tool_call_count, 0) - ?, 0) WHERE id = ?",
        (n, int(calls), session_id),
    )
    return int(n)


def prune(
    conn: sqlite3.Connection, older_than_days: float = 90, source: str | None = None, *, now: float | None = None
) -> PruneResult:
    """Delete ended sessions that started more than N days ago. Active ones never, nor
    an ended one a kept session continues from (``PruneResult.skipped`` says which)."""
    plan = prune_plan(conn, older_than_days, source, now=now)
    return PruneResult(_delete_sessions(conn, list(plan.delete)), plan.skipped)


def prune_sessions(
    conn: sqlite3.Connection, older_than_days: float = 90, source: str | None = None, *, now: float | None = None
) -> int:
    """``prune``, counting what it deleted (the reference's ``prune_sessions``)."""
    return prune(conn, older_than_days, source, now=now).deleted


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT INTO state_meta(key, value) VALUES (?, ?) "
                 "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value))


def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM state_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])
