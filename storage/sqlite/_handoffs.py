"""Handoff rows (``gateway_handoffs``) and their compare-and-set state changes.

Every change is one ``UPDATE ... WHERE state IN (...)``: whoever loses a race
changes nothing and learns it from the result. Which changes are allowed is
the gateway's state machine (``gateway.handoff.store``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any

from .._model import HandoffRow

#: the columns a state change may also set
TARGET_COLUMNS = ("target_chat_id", "target_thread_id", "target_key")
#: a ``HandoffRow``'s columns, in its order
_COLUMNS = ("id, session_id, source_key, source_platform, target_platform, state, error, target_chat_id, "
            "target_thread_id, target_key")


def insert_pending(conn: sqlite3.Connection, *, session_id: str, source_key: str, source_platform: str,
                   source_chat_id: str | None, source_thread_id: str | None, target_platform: str,
                   target_chat_id: str | None, now: float) -> int | None:
    """A new ``pending`` row; its id, or None when the session already has a live
    (pending or claimed) handoff."""
    try:
        cur = conn.execute(
            "INSERT INTO gateway_handoffs (session_id, source_key, source_platform, source_chat_id, "
            "source_thread_id, target_platform, target_chat_id, state, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
            (session_id, source_key, source_platform, source_chat_id, source_thread_id, target_platform,
             target_chat_id, now, now),
        )
    except sqlite3.IntegrityError:  # the partial unique index: one live handoff per session
        return None
    return int(cur.lastrowid or 0)


def set_state(conn: sqlite3.Connection, handoff_id: int, *, to: str, only_from: Iterable[str], error: str | None,
              now: float, fields: Mapping[str, str | None] | None = None) -> bool:
    """Move a row to ``to`` if it is in one of ``only_from``, setting its error and the
    ``TARGET_COLUMNS`` given in ``fields``; True if this call moved it."""
    allowed = tuple(only_from)
    fields = fields or {}
    sets = ["state = ?", "updated_at = ?", "error = ?"]
    params: list[Any] = [to, now, error]
    for column in TARGET_COLUMNS:
        if column in fields:
            sets.append(f"{column} = ?")
            params.append(fields[column])
    marks = ",".join("?" * len(allowed))
    cur = conn.execute(
        f"UPDATE gateway_handoffs SET {', '.join(sets)} WHERE id = ? AND state IN ({marks})",
        (*params, handoff_id, *allowed),
    )
    return cur.rowcount == 1


def set_state_of_all(conn: sqlite3.Connection, *, to: str, only_from: Iterable[str], error: str | None,
                     now: float) -> int:
    """Move every row in one of ``only_from`` to ``to``; how many moved."""
    allowed = tuple(only_from)
    marks = ",".join("?" * len(allowed))
    cur = conn.execute(
        f"UPDATE gateway_handoffs SET state = ?, error = ?, updated_at = ? WHERE state IN ({marks})",
        (to, error, now, *allowed),
    )
    return cur.rowcount


def pending_for(conn: sqlite3.Connection, target_platform: str) -> list[HandoffRow]:
    """The rows waiting for a node connected to ``target_platform`` to claim them, oldest first
    (several nodes only; one daemon claims its own rows at once)."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM gateway_handoffs WHERE target_platform = ? AND state = 'pending' ORDER BY id",
        (target_platform,),
    ).fetchall()
    return [HandoffRow(*tuple(r)) for r in rows]


def live_target(conn: sqlite3.Connection, source_key: str) -> str | None:
    """The platform a handoff from this chat's key is under way to (pending or claimed), if any."""
    row = conn.execute(
        "SELECT target_platform FROM gateway_handoffs WHERE source_key = ? AND state IN ('pending', 'claimed') "
        "ORDER BY id DESC LIMIT 1",
        (source_key,),
    ).fetchone()
    return None if row is None else str(row[0])


def get(conn: sqlite3.Connection, handoff_id: int) -> HandoffRow | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM gateway_handoffs WHERE id = ?",
        (handoff_id,),
    ).fetchone()
    return None if row is None else HandoffRow(*tuple(row))
