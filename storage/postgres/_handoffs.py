"""Handoff rows (``gateway_handoffs``) and their compare-and-set state changes.

Every change is one ``UPDATE ... WHERE state IN (...) RETURNING id``: whoever loses a race
changes nothing and learns it from the result. Which changes are allowed is
the gateway's state machine (``gateway.handoff.store``).

Several nodes: PostgreSQL re-checks an ``UPDATE``'s ``WHERE`` on the row as the winner committed
it, so when two nodes move one row at once (claim it, or fail it) the second finds it no longer
in the state it expected and moves nothing. One live handoff per session is the partial unique
index; ``insert_pending`` meets it with ``ON CONFLICT DO NOTHING`` (not an error, which would
abort the caller's whole transaction here), so of two nodes inserting at once one gets the id
and the other None.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .._model import HandoffRow
from ._conn import PgConnection

#: the columns a state change may also set
TARGET_COLUMNS = ("target_chat_id", "target_thread_id", "target_key")
#: a ``HandoffRow``'s columns, in its order
_COLUMNS = ("id, session_id, source_key, source_platform, target_platform, state, error, target_chat_id, "
            "target_thread_id, target_key")


def insert_pending(conn: PgConnection, *, session_id: str, source_key: str, source_platform: str,
                   source_chat_id: str | None, source_thread_id: str | None, target_platform: str,
                   target_chat_id: str | None, now: float) -> int | None:
    """A new ``pending`` row; its id, or None when the session already has a live
    (pending or claimed) handoff."""
    row = conn.execute(
        "INSERT INTO gateway_handoffs (session_id, source_key, source_platform, source_chat_id, "
        "source_thread_id, target_platform, target_chat_id, state, created_at, updated_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, 'pending', %s, %s) "
        "ON CONFLICT (session_id) WHERE state IN ('pending', 'claimed') DO NOTHING RETURNING id",
        (session_id, source_key, source_platform, source_chat_id, source_thread_id, target_platform,
         target_chat_id, now, now),
    ).fetchone()
    return None if row is None else int(row[0])


def set_state(conn: PgConnection, handoff_id: int, *, to: str, only_from: Iterable[str], error: str | None,
              now: float, fields: Mapping[str, str | None] | None = None) -> bool:
    """Move a row to ``to`` if it is in one of ``only_from``, setting its error and the
    ``TARGET_COLUMNS`` given in ``fields``; True if this call moved it."""
    allowed = list(only_from)
    fields = fields or {}
    sets = ["state = %s", "updated_at = %s", "error = %s"]
    params: list[Any] = [to, now, error]
    for column in TARGET_COLUMNS:  # the column names come from this list, never from the caller
        if column in fields:
            sets.append(f"{column} = %s")
            params.append(fields[column])
    row = conn.execute(
        f"UPDATE gateway_handoffs SET {', '.join(sets)} WHERE id = %s AND state = ANY(%s::text[]) RETURNING id",
        (*params, handoff_id, allowed),
    ).fetchone()
    return row is not None


def set_state_of_all(conn: PgConnection, *, to: str, only_from: Iterable[str], error: str | None,
                     now: float) -> int:
    """Move every row in one of ``only_from`` to ``to``; how many moved."""
    cur = conn.execute(
        "UPDATE gateway_handoffs SET state = %s, error = %s, updated_at = %s WHERE state = ANY(%s::text[])",
        (to, error, now, list(only_from)),
    )
    return cur.rowcount


def pending_for(conn: PgConnection, target_platform: str) -> list[HandoffRow]:
    """The rows waiting for a node connected to ``target_platform`` to claim them, oldest first."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM gateway_handoffs WHERE target_platform = %s AND state = 'pending' ORDER BY id",
        (target_platform,),
    ).fetchall()
    return [HandoffRow(*tuple(r)) for r in rows]


def live_target(conn: PgConnection, source_key: str) -> str | None:
    """The platform a handoff from this chat's key is under way to (pending or claimed), if any."""
    row = conn.execute(
        "SELECT target_platform FROM gateway_handoffs WHERE source_key = %s AND state IN ('pending', 'claimed') "
        "ORDER BY id DESC LIMIT 1",
        (source_key,),
    ).fetchone()
    return None if row is None else str(row[0])


def get(conn: PgConnection, handoff_id: int) -> HandoffRow | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM gateway_handoffs WHERE id = %s",
        (handoff_id,),
    ).fetchone()
    return None if row is None else HandoffRow(*tuple(row))
