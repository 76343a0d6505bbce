"""Edits of a session's history, as ``storage.sqlite``'s ``history``: answers a /retry superseded
(rows of ``gateway_superseded``; the message stays a ``messages`` row), exchanges /undo takes back.

An exchange is a user message and everything after it up to the next user message. ``Exchange``
and ``Undone`` are the SQLite backend's classes, so a caller gets the same values either way.
Two nodes marking the same message is harmless (``ON CONFLICT DO NOTHING``); /undo locks the
session's row before it reads which messages to delete (``ops.delete_messages_from``).
"""

from __future__ import annotations

from .._records import Exchange as Exchange
from .._records import Undone as Undone
from ._conn import PgConnection
from ._ops import delete_messages_from

__all__ = ["Exchange", "Undone", "last_exchange", "restore_if_unanswered", "supersede", "superseded_ids", "undo"]


#: a query of the ids of a session's superseded messages (one ``%s``: the session id)
HIDDEN_SQL = "SELECT message_id FROM gateway_superseded WHERE session_id = %s"


def superseded_ids(conn: PgConnection, session_id: str) -> set[int]:
    # (the table is always there: migration 0002 made it; SQLite's may predate it)
    return {int(r[0]) for r in conn.execute(HIDDEN_SQL, (session_id,))}


def last_exchange(conn: PgConnection, session_id: str) -> Exchange | None:
    """None when the session has no user message."""
    hidden = superseded_ids(conn, session_id)
    row = conn.execute(
        "SELECT id, content FROM messages WHERE session_id = %s AND role = 'user' ORDER BY id DESC LIMIT 1",
        (session_id,),
    ).fetchone()
    if row is None:
        return None
    after = [(int(r[0]), str(r[1])) for r in conn.execute(
        "SELECT id, role FROM messages WHERE session_id = %s AND id > %s AND role IN ('assistant', 'tool') "
        "ORDER BY id", (session_id, int(row[0])))]
    visible = [(i, role) for i, role in after if i not in hidden]
    return Exchange(int(row[0]), str(row[1] or ""), tuple(i for i, _ in visible),
                    any(role == "assistant" for _, role in visible), len(visible) < len(after))


def supersede(conn: PgConnection, session_id: str, message_ids: tuple[int, ...], *, now: float) -> int:
    """Mark these messages of the session superseded; how many were marked."""
    if not message_ids:
        return 0
    return conn.execute(
        "INSERT INTO gateway_superseded (message_id, session_id, superseded_at) "
        "SELECT id, session_id, %s::double precision FROM messages WHERE id = ANY(%s::bigint[]) AND session_id = %s "
        "ORDER BY id ON CONFLICT (message_id) DO NOTHING",
        (float(now), sorted({int(m) for m in message_ids}), session_id),
    ).rowcount


def restore_if_unanswered(conn: PgConnection, session_id: str, question_id: int,
                          old_ids: tuple[int, ...], *, now: float) -> bool:
    """A /retry that stored no new answer (the model failed, it was stopped): the old answer
    comes back, and what the failed attempt left (tool calls on the way) is superseded in its
    place. True when it was restored; False when a new answer stands (or the exchange is gone)."""
    current = last_exchange(conn, session_id)
    if current is None or current.question_id != question_id:
        return False
    final = conn.execute(
        "SELECT 1 FROM messages WHERE session_id = %s AND id > %s AND role = 'assistant' "
        f"AND (tool_calls IS NULL OR tool_calls IN ('', '[]')) AND id NOT IN ({HIDDEN_SQL}) LIMIT 1",
        (session_id, question_id, session_id),
    ).fetchone()
    if final is not None:
        return False
    supersede(conn, session_id, current.answer_ids, now=now)
    if old_ids:
        conn.execute("DELETE FROM gateway_superseded WHERE session_id = %s AND message_id = ANY(%s::bigint[])",
                     (session_id, sorted({int(m) for m in old_ids})))
    return True


def undo(conn: PgConnection, session_id: str, exchanges: int) -> Undone:
    """Delete the last ``exchanges`` exchanges (as many as there are, when fewer)."""
    # The session's row first, so the exchanges counted are the ones deleted even while another
    # node appends (an append waits for this transaction).
    conn.execute("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (session_id,))
    firsts = [int(r[0]) for r in conn.execute(
        "SELECT id FROM messages WHERE session_id = %s AND role = 'user' ORDER BY id DESC LIMIT %s",
        (session_id, max(exchanges, 0)))]
    if not firsts:
        return Undone(0, 0)
    return Undone(len(firsts), delete_messages_from(conn, session_id, firsts[-1]))
