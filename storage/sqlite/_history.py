"""Edits of a session's history: answers a /retry superseded, exchanges /undo takes back.

A superseded message stays a row of ``messages`` (valid v11; readers of the reference
schema still see it) and gets a row in ``gateway_superseded``; the history a model is
given (``_queries.get_messages_as_conversation``) and the session's search leave it out.
An exchange is a user message and everything after it up to the next user message.
"""

from __future__ import annotations

import sqlite3

from .._records import Exchange, Undone
from ._ops import delete_messages_from

__all__ = ["Exchange", "Undone", "last_exchange", "restore_if_unanswered", "supersede", "superseded_ids", "undo"]

#: a query of the ids of a session's superseded messages (one ``?``: the session id)
HIDDEN_SQL = "SELECT message_id FROM gateway_superseded WHERE session_id = ?"


def superseded_ids(conn: sqlite3.Connection, session_id: str) -> set[int]:
    try:
        return {int(r[0]) for r in conn.execute(HIDDEN_SQL, (session_id,))}
    except sqlite3.OperationalError:  # a file no gateway has opened since before the table existed
        return set()


def last_exchange(conn: sqlite3.Connection, session_id: str) -> Exchange | None:
    """None when the session has no user message."""
    hidden = superseded_ids(conn, session_id)
    row = conn.execute(
        "SELECT id, content FROM messages WHERE session_id = ? AND role = 'user' ORDER BY id DESC LIMIT 1",
        (session_id,),
    ).fetchone()
    if row is None:
        return None
    after = [(int(r[0]), str(r[1])) for r in conn.execute(
        "SELECT id, role FROM messages WHERE session_id = ? AND id > ? AND role IN ('assistant', 'tool') "
        "ORDER BY id", (session_id, int(row[0])))]
    visible = [(i, role) for i, role in after if i not in hidden]
    return Exchange(int(row[0]), str(row[1] or ""), tuple(i for i, _ in visible),
                    any(role == "assistant" for _, role in visible), len(visible) < len(after))


def supersede(conn: sqlite3.Connection, session_id: str, message_ids: tuple[int, ...], *, now: float) -> int:
    """Mark these messages of the session superseded; how many were marked."""
    n = 0
    for mid in message_ids:
        n += conn.execute(
            "INSERT OR IGNORE INTO gateway_superseded (message_id, session_id, superseded_at) "
            "SELECT id, session_id, ? FROM messages WHERE id = ? AND session_id = ?", (now, mid, session_id),
        ).rowcount
    return n


def restore_if_unanswered(conn: sqlite3.Connection, session_id: str, question_id: int,
                          old_ids: tuple[int, ...], *, now: float) -> bool:
    """A /retry that stored no new answer (the model failed, it was stopped): the old answer
    comes back, and what the failed attempt left (tool calls on the way) is superseded in its
    place. True when it was restored; False when a new answer stands (or the exchange is gone)."""
    current = last_exchange(conn, session_id)
    if current is None or current.question_id != question_id:
        return False
    final = conn.execute(
        f"SELECT 1 FROM messages WHERE session_id = ? AND id > ? AND role = 'assistant' "
        f"AND (tool_calls IS NULL OR tool_calls IN ('', '[]')) AND id NOT IN ({HIDDEN_SQL}) LIMIT 1",
        (session_id, question_id, session_id),
    ).fetchone()
    if final is not None:
        return False
    supersede(conn, session_id, current.answer_ids, now=now)
    marks = ",".join("?" * len(old_ids))
    if old_ids:
        conn.execute(f"DELETE FROM gateway_superseded WHERE session_id = ? AND message_id IN ({marks})",
                     (session_id, *old_ids))
    return True


def undo(conn: sqlite3.Connection, session_id: str, exchanges: int) -> Undone:
    """Delete the last ``exchanges`` exchanges (as many as there are, when fewer)."""
    firsts = [int(r[0]) for r in conn.execute(
        "SELECT id FROM messages WHERE session_id = ? AND role = 'user' ORDER BY id DESC LIMIT ?",
        (session_id, max(exchanges, 0)))]
    if not firsts:
        return Undone(0, 0)
    return Undone(len(firsts), delete_messages_from(conn, session_id, firsts[-1]))
