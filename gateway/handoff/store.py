"""The handoff rows in state.db and their compare-and-set transitions.

``pending -> claimed -> completed | failed``. Every transition is one
``UPDATE ... WHERE id = ? AND state IN (...)``: whoever loses a race changes
nothing and learns it from the row count, so a late timeout can never
overwrite a claimed or completed handoff.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gateway.errors import HandoffInFlightError

ERROR_MAX_CHARS = 500

PENDING = "pending"
CLAIMED = "claimed"
COMPLETED = "completed"
FAILED = "failed"


@dataclass(frozen=True)
class HandoffRow:
    id: int
    session_id: str
    source_key: str
    source_platform: str
    target_platform: str
    state: str
    error: str | None
    target_chat_id: str | None
    target_thread_id: str | None
    target_key: str | None


def insert_pending(conn: sqlite3.Connection, *, session_id: str, source_key: str, source_platform: str,
                   source_chat_id: str | None, source_thread_id: str | None, target_platform: str,
                   target_chat_id: str | None) -> int:
    now = time.time()
    try:
        cur = conn.execute(
            "INSERT INTO gateway_handoffs (session_id, source_key, source_platform, source_chat_id, "
            "source_thread_id, target_platform, target_chat_id, state, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
            (session_id, source_key, source_platform, source_chat_id, source_thread_id, target_platform,
             target_chat_id, now, now),
        )
    except sqlite3.IntegrityError as exc:  # the partial unique index: one live handoff per session
        raise HandoffInFlightError(session_id) from exc
    return int(cur.lastrowid or 0)


def transition(conn: sqlite3.Connection, handoff_id: int, *, to: str, only_from: Iterable[str],
               error: str | None = None, **fields: str | None) -> bool:
    """Move a row to ``to`` if it is in one of ``only_from``; True if this call moved it."""
    allowed = tuple(only_from)
    sets = ["state = ?", "updated_at = ?", "error = ?"]
    params: list[Any] = [to, time.time(), None if error is None else error[:ERROR_MAX_CHARS]]
    for column in ("target_chat_id", "target_thread_id", "target_key"):
        if column in fields:
            sets.append(f"{column} = ?")
            params.append(fields[column])
    marks = ",".join("?" * len(allowed))
    cur = conn.execute(
        f"UPDATE gateway_handoffs SET {', '.join(sets)} WHERE id = ? AND state IN ({marks})",
        (*params, handoff_id, *allowed),
    )
    return cur.rowcount == 1


def claim(conn: sqlite3.Connection, handoff_id: int) -> bool:
    return transition(conn, handoff_id, to=CLAIMED, only_from=(PENDING,))


def complete(conn: sqlite3.Connection, handoff_id: int, **fields: str | None) -> bool:
    return transition(conn, handoff_id, to=COMPLETED, only_from=(CLAIMED,), **fields)


def fail(conn: sqlite3.Connection, handoff_id: int, error: str, *, only_from: Iterable[str] = (CLAIMED,)) -> bool:
    return transition(conn, handoff_id, to=FAILED, only_from=only_from, error=error)


def fail_if_pending(conn: sqlite3.Connection, handoff_id: int, error: str) -> bool:
    """The timeout's transition: it may only ever fail a row nobody claimed."""
    return fail(conn, handoff_id, error, only_from=(PENDING,))


def fail_interrupted(conn: sqlite3.Connection, error: str) -> int:
    """At start-up: rows a previous process left live can never finish now."""
    cur = conn.execute(
        "UPDATE gateway_handoffs SET state = 'failed', error = ?, updated_at = ? "
        "WHERE state IN ('pending', 'claimed')",
        (error[:ERROR_MAX_CHARS], time.time()),
    )
    return cur.rowcount


def get(conn: sqlite3.Connection, handoff_id: int) -> HandoffRow | None:
    row = conn.execute(
        "SELECT id, session_id, source_key, source_platform, target_platform, state, error, target_chat_id, "
        "target_thread_id, target_key FROM gateway_handoffs WHERE id = ?",
        (handoff_id,),
    ).fetchone()
    return None if row is None else HandoffRow(*tuple(row))
