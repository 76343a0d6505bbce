"""Write operations on sessions and messages, as ``storage.sqlite``'s ``ops``: plain functions of
a connection, run inside the caller's transaction (``PgStore.write``), which the store may run
again after a serialization failure or a deadlock.

Several nodes write to one database, where SQLite has one writer. What that changes here:
counters move by ``x = x + n`` in one UPDATE (atomic under concurrent appends); a function that
reads and then writes a session's rows (clearing, deleting, /undo, a prune) first locks the
session rows (``FOR UPDATE``, in id order so two of them never deadlock), so a message appended
by another node meanwhile is either already visible to it or waits and then finds the session
gone; a title's uniqueness is the database's unique index, whose violation (another node took
the title between our check and our write) is the same ``TitleConflictError``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from psycopg import errors as pg_errors

from .._messages import BILLING_FIELDS, USAGE_FIELDS, json_or_none
from .._messages import message_columns as message_columns
from .._model import PruneResult
from .._text import clean_title, split_lineage_title
from ..errors import SessionNotFoundError, TitleConflictError
from ._attachments import delete_for_sessions, delete_rows, for_messages
from ._conn import PgConnection
from ._prune import prune_plan


def _n_tool_calls(text: str | None) -> int:
    """How many calls a stored ``tool_calls`` holds: the length of a JSON array, else 0 (as
    SQLite's ``json_valid``/``json_type``/``json_array_length`` count them)."""
    if not text:
        return 0
    try:
        value = json.loads(text)
    except ValueError:
        return 0
    return len(value) if isinstance(value, list) else 0


def create_session(
    conn: PgConnection,
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
        "INSERT INTO sessions (id, source, user_id, model, model_config, system_prompt, parent_session_id, "
        "started_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
        (
            session_id,
            source,
            user_id,
            model,
            json_or_none(model_config),
            system_prompt,
            parent_session_id,
            time.time() if started_at is None else float(started_at),
        ),
    )
    return cur.rowcount == 1


def _require_session(conn: PgConnection, session_id: str, *, lock: bool = False) -> None:
    sql = "SELECT 1 FROM sessions WHERE id = %s" + (" FOR UPDATE" if lock else "")
    if conn.execute(sql, (session_id,)).fetchone() is None:
        raise SessionNotFoundError(f"No session with id {session_id}.")


def _lock_sessions(conn: PgConnection, ids: list[str]) -> None:
    """Lock these sessions' rows (those that exist), in one order whoever locks them."""
    conn.execute('SELECT id FROM sessions WHERE id = ANY(%s::text[]) ORDER BY id COLLATE "C" FOR UPDATE', (ids,))


def end_session(conn: PgConnection, session_id: str, end_reason: str, *, at: float | None = None) -> bool:
    """Mark a session ended; the first end wins. False if it was already ended."""
    _require_session(conn, session_id)
    cur = conn.execute(
        "UPDATE sessions SET ended_at = %s, end_reason = %s WHERE id = %s AND ended_at IS NULL",
        (time.time() if at is None else float(at), end_reason, session_id),
    )
    return cur.rowcount == 1


def reopen_session(conn: PgConnection, session_id: str) -> None:
    _require_session(conn, session_id)
    conn.execute("UPDATE sessions SET ended_at = NULL, end_reason = NULL WHERE id = %s", (session_id,))


def update_system_prompt(conn: PgConnection, session_id: str, system_prompt: str) -> None:
    _require_session(conn, session_id)
    conn.execute("UPDATE sessions SET system_prompt = %s WHERE id = %s", (system_prompt, session_id))


def update_session_model(
    conn: PgConnection, session_id: str, model: str | None, model_config: Mapping[str, Any] | str | None = None
) -> None:
    _require_session(conn, session_id)
    conn.execute(
        "UPDATE sessions SET model = %s, model_config = COALESCE(%s::text, model_config) WHERE id = %s",
        (model, json_or_none(model_config), session_id),
    )


def append_message(
    conn: PgConnection,
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
    # The counters first: a missing session is found without a failed statement (which would
    # abort the caller's whole transaction), and the session's row stays locked until COMMIT,
    # so a delete on another node cannot slip between this message and its session.
    updated = conn.execute(
        "UPDATE sessions SET message_count = COALESCE(message_count, 0) + 1, "
        "tool_call_count = COALESCE(tool_call_count, 0) + %s WHERE id = %s",
        (n_tool_calls, session_id),
    )
    if updated.rowcount != 1:
        raise SessionNotFoundError(f"No session with id {session_id}; the message was not stored.")
    row = conn.execute(
        "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, "
        "token_count, finish_reason, reasoning, reasoning_content, reasoning_details, codex_reasoning_items, "
        "codex_message_items) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (
            session_id,
            role,
            _no_nul(content),
            _no_nul(tool_call_id),
            json_or_none(tool_calls),
            _no_nul(tool_name),
            time.time() if timestamp is None else float(timestamp),
            token_count,
            _no_nul(finish_reason),
            _no_nul(reasoning),
            _no_nul(reasoning_content),
            json_or_none(reasoning_details),
            json_or_none(codex_reasoning_items),
            json_or_none(codex_message_items),
        ),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _no_nul(text: str | None) -> str | None:
    """PostgreSQL's text cannot hold a NUL character (state.db can): a NUL a message carries becomes
    U+FFFD, the replacement character, rather than failing the turn that stores it."""
    return text.replace("\x00", "\ufffd") if text is not None and "\x00" in text else text


def record_usage(conn: PgConnection, session_id: str, **usage: Any) -> None:
    """Add token counts and api calls; set billing fields; add costs."""
    _require_session(conn, session_id)
    sets: list[str] = []
    params: list[Any] = []
    for key in USAGE_FIELDS:
        if usage.get(key):
            sets.append(f"{key} = COALESCE({key}, 0) + %s")
            params.append(int(usage[key]))
    for key in ("estimated_cost_usd", "actual_cost_usd"):
        if usage.get(key) is not None:
            sets.append(f"{key} = COALESCE({key}, 0) + %s")
            params.append(float(usage[key]))
    for key in BILLING_FIELDS:
        if usage.get(key) is not None:
            sets.append(f"{key} = %s")
            params.append(str(usage[key]))
    unknown = set(usage) - set(USAGE_FIELDS) - set(BILLING_FIELDS) - {"estimated_cost_usd", "actual_cost_usd"}
    if unknown:
        raise ValueError(f"unknown usage fields: {sorted(unknown)}")
    if sets:
        conn.execute(f"UPDATE sessions SET {', '.join(sets)} WHERE id = %s", (*params, session_id))


# ------------------------------------------------------------------ titles


def next_title_in_lineage(conn: PgConnection, title: str) -> str:
    """``"X"`` -> ``"X #2"`` (or one past the highest number already used)."""
    base, _ = split_lineage_title(title)
    escaped = base.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    highest = 0
    # LIKE is case-sensitive here and not in SQLite; the exact comparison below decides either way.
    for (existing,) in conn.execute(
        "SELECT title FROM sessions WHERE title = %s OR title LIKE %s ESCAPE '\\'", (base, f"{escaped} #%")
    ):
        b, n = split_lineage_title(existing)
        if b == base:
            highest = max(highest, n)
    return f"{base} #{max(highest, 1) + 1}"


def _title_holder(conn: PgConnection, title: str, session_id: str) -> str | None:
    row = conn.execute("SELECT id FROM sessions WHERE title = %s AND id != %s", (title, session_id)).fetchone()
    return None if row is None else str(row[0])


def set_session_title(conn: PgConnection, session_id: str, title: str | None) -> str | None:
    """Set (or, with an empty title, clear) a title; unique among sessions."""
    _require_session(conn, session_id)
    cleaned = clean_title(title) if title is not None else None
    if cleaned is not None:
        other = _title_holder(conn, cleaned, session_id)
        if other is not None:
            raise TitleConflictError(cleaned, other, next_title_in_lineage(conn, cleaned))
    # A savepoint: callers catch the conflict and go on in the same transaction, which a failed
    # statement would otherwise have aborted.
    conn.execute("SAVEPOINT hermes_set_title")
    try:
        conn.execute("UPDATE sessions SET title = %s WHERE id = %s", (cleaned, session_id))
    except pg_errors.UniqueViolation:
        conn.execute("ROLLBACK TO SAVEPOINT hermes_set_title")
        conn.execute("RELEASE SAVEPOINT hermes_set_title")
        assert cleaned is not None  # NULL titles never conflict
        other = _title_holder(conn, cleaned, session_id) or "(another session)"
        raise TitleConflictError(cleaned, other, next_title_in_lineage(conn, cleaned)) from None
    conn.execute("RELEASE SAVEPOINT hermes_set_title")
    return cleaned


# ------------------------------------------------------------------ cleanup


def _delete_sessions(conn: PgConnection, ids: list[str]) -> int:
    if not ids:
        return 0
    _lock_sessions(conn, ids)
    # Children keep living; they just lose the link to a parent that is gone (a prune never
    # gets here with a kept child: it skips the parents of kept sessions).
    conn.execute("UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id = ANY(%s::text[])", (ids,))
    # A message's files go with it; their bytes, outside the transaction, go with MediaStore.sweep.
    delete_for_sessions(conn, ids)
    conn.execute("DELETE FROM gateway_session_settings WHERE session_id = ANY(%s::text[])", (ids,))
    # Who sent the messages goes with them (a row naming a person must not outlive its message).
    conn.execute("DELETE FROM gateway_message_senders WHERE session_id = ANY(%s::text[])", (ids,))
    conn.execute("DELETE FROM gateway_superseded WHERE session_id = ANY(%s::text[])", (ids,))
    conn.execute("DELETE FROM messages WHERE session_id = ANY(%s::text[])", (ids,))
    return conn.execute("DELETE FROM sessions WHERE id = ANY(%s::text[])", (ids,)).rowcount


def delete_sessions(conn: PgConnection, session_ids: list[str]) -> int:
    """Delete these sessions with their messages (their search columns go with the rows), files'
    rows and settings."""
    return _delete_sessions(conn, sorted({str(s) for s in session_ids}))


def replace_with_marker(conn: PgConnection, message_ids: list[int], marker: str) -> int:
    """Replace these messages' words by ``marker`` in place (a shared conversation keeps its
    shape); how many were replaced."""
    return conn.execute(
        "UPDATE messages SET content = %s, tool_calls = NULL, tool_name = NULL, reasoning = NULL, "
        "reasoning_content = NULL, reasoning_details = NULL, codex_reasoning_items = NULL, "
        "codex_message_items = NULL WHERE id = ANY(%s::bigint[])", (marker, sorted({int(m) for m in message_ids})),
    ).rowcount


def delete_session(conn: PgConnection, session_id: str) -> bool:
    return _delete_sessions(conn, [session_id]) == 1


def clear_messages(conn: PgConnection, session_id: str) -> int:
    _require_session(conn, session_id, lock=True)
    delete_for_sessions(conn, [session_id])
    conn.execute("DELETE FROM gateway_message_senders WHERE session_id = %s", (session_id,))
    conn.execute("DELETE FROM gateway_superseded WHERE session_id = %s", (session_id,))
    n = conn.execute("DELETE FROM messages WHERE session_id = %s", (session_id,)).rowcount
    conn.execute("UPDATE sessions SET message_count = 0, tool_call_count = 0 WHERE id = %s", (session_id,))
    return n


def delete_messages_from(conn: PgConnection, session_id: str, first_id: int) -> int:
    """Delete the session's messages from row ``first_id`` on (/undo); how many went.

    The one place single messages are deleted: their files' rows, /retry marks and senders go
    with them, and the session's counters are lowered by what went (counted from the rows
    deleted, so they stay right whatever another node appended before the lock).
    """
    _require_session(conn, session_id, lock=True)
    ids = [int(r[0]) for r in conn.execute(
        "SELECT id FROM messages WHERE session_id = %s AND id >= %s", (session_id, first_id))]
    if not ids:
        return 0
    files = for_messages(conn, ids)
    delete_rows(conn, [a.id for rows in files.values() for a in rows])
    conn.execute("DELETE FROM gateway_superseded WHERE session_id = %s AND message_id >= %s", (session_id, first_id))
    conn.execute("DELETE FROM gateway_message_senders WHERE session_id = %s AND message_id >= %s",
                 (session_id, first_id))
    gone = conn.execute("DELETE FROM messages WHERE session_id = %s AND id >= %s RETURNING tool_calls",
                        (session_id, first_id)).fetchall()
    calls = sum(_n_tool_calls(r[0]) for r in gone)
    conn.execute(
        "UPDATE sessions SET message_count = GREATEST(COALESCE(message_count, 0) - %s, 0), "
        "tool_call_count = GREATEST(COALESCE(tool_call_count, 0) - %s, 0) WHERE id = %s",
        (len(gone), calls, session_id),
    )
    return len(gone)


def prune(
    conn: PgConnection, older_than_days: float = 90, source: str | None = None, *, now: float | None = None
) -> PruneResult:
    """Delete ended sessions that started more than N days ago. Active ones never, nor
    an ended one a kept session continues from (``PruneResult.skipped`` says which)."""
    now = time.time() if now is None else now  # one cutoff for both plans
    first = prune_plan(conn, older_than_days, source, now=now)
    if not first.delete:
        return PruneResult(0, first.skipped)
    # Planned, then locked, then planned again: a child another node created (or a session it
    # reopened) before the lock is seen by the second plan, and none can be created after it (its
    # foreign key would wait for our lock). Only what both plans delete goes.
    _lock_sessions(conn, list(first.delete))
    plan = prune_plan(conn, older_than_days, source, now=now)
    locked = set(first.delete)
    return PruneResult(_delete_sessions(conn, [sid for sid in plan.delete if sid in locked]), plan.skipped)


def prune_sessions(
    conn: PgConnection, older_than_days: float = 90, source: str | None = None, *, now: float | None = None
) -> int:
    """``prune``, counting what it deleted (the reference's ``prune_sessions``)."""
    return prune(conn, older_than_days, source, now=now).deleted


def set_meta(conn: PgConnection, key: str, value: str) -> None:
    conn.execute("INSERT INTO state_meta (key, value) VALUES (%s, %s) "
                 "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value))


def get_meta(conn: PgConnection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM state_meta WHERE key = %s", (key,)).fetchone()
    return None if row is None else str(row[0])
