"""Which session each chat key is bound to: the routing index
(``gateway_session_index``, a key's current session), the binding history
(``gateway_session_bindings``, every session a key was ever bound to) and
titles queued for a session not started yet (``gateway_pending_titles``).

What the gateway does with them (reset policies, healing stale entries,
/handoff's undo) is in ``gateway.routing.session_index``.

Several nodes: the gateway reads a key's entry again inside the write that then changes it
("again, under the write lock": create a session and bind it, or end one that is due). SQLite's
one writer makes that read-then-write atomic; here ``lookup`` inside a read-write transaction
first takes a transaction advisory lock on the key, so two nodes resolving one key queue up and
the second reads what the first committed instead of binding a second session. Reads (read-only
transactions) take no lock and never wait. Every other change is one statement: an upsert, or a
compare-and-set whose loser changes nothing.
"""

from __future__ import annotations

from .._model import IndexEntry
from ._conn import PgConnection

#: the first of the two int4 keys of the advisory locks taken here (the second: the session key's
#: hash). Two-key advisory locks are a key space apart from single bigint keys, which stay free
#: for lane ownership and elections.
ROUTING_LOCK_CLASS = 0x48474249  # "HGBI"


def _lock_key_in_a_write(conn: PgConnection, key: str) -> None:
    conn.execute(
        "SELECT pg_advisory_xact_lock(%s::int4, hashtext(%s)) WHERE current_setting('transaction_read_only') = 'off'",
        (ROUTING_LOCK_CLASS, key),
    )


def lookup(conn: PgConnection, key: str) -> IndexEntry | None:
    """The key's entry with its session's state and last message time, in one read."""
    _lock_key_in_a_write(conn, key)
    row = conn.execute(
        "SELECT i.session_id, i.updated_at, s.id AS live_id, s.ended_at, "
        "(SELECT MAX(m.timestamp) FROM messages m WHERE m.session_id = i.session_id) AS last_message_at "
        "FROM gateway_session_index i LEFT JOIN sessions s ON s.id = i.session_id "
        "WHERE i.session_key = %s",
        (key,),
    ).fetchone()
    if row is None:
        return None
    return IndexEntry(
        session_id=str(row["session_id"]),
        updated_at=float(row["updated_at"]),
        session_exists=row["live_id"] is not None,
        ended_at=None if row["ended_at"] is None else float(row["ended_at"]),
        last_message_at=None if row["last_message_at"] is None else float(row["last_message_at"]),
    )


def live_entries(conn: PgConnection) -> list[tuple[str, IndexEntry]]:
    """Every key bound to a session that exists and has not ended, with its entry (the
    reset sweep: which chats a policy may rotate now)."""
    rows = conn.execute(
        "SELECT i.session_key, i.session_id, i.updated_at, s.ended_at, "
        "(SELECT MAX(m.timestamp) FROM messages m WHERE m.session_id = i.session_id) AS last_message_at "
        "FROM gateway_session_index i JOIN sessions s ON s.id = i.session_id WHERE s.ended_at IS NULL"
    ).fetchall()
    return [
        (str(row["session_key"]), IndexEntry(
            session_id=str(row["session_id"]),
            updated_at=float(row["updated_at"]),
            session_exists=True,
            ended_at=None,
            last_message_at=None if row["last_message_at"] is None else float(row["last_message_at"]),
        ))
        for row in rows
    ]


def bound_session(conn: PgConnection, key: str) -> tuple[str, float] | None:
    """The session the key points at now and when it was bound there, without looking at the session."""
    row = conn.execute(
        "SELECT session_id, updated_at FROM gateway_session_index WHERE session_key = %s", (key,)
    ).fetchone()
    return None if row is None else (str(row["session_id"]), float(row["updated_at"]))


def bind(conn: PgConnection, key: str, session_id: str, *, platform: str, chat_id: str | None,
         chat_type: str | None, thread_id: str | None, user_id: str | None, now: float) -> None:
    """Point ``key`` at ``session_id`` and remember the binding for good.

    A key already in the index keeps the chat details it was created with;
    only its session and ``updated_at`` change.
    """
    conn.execute(
        """
        INSERT INTO gateway_session_index
            (session_key, session_id, platform, chat_id, chat_type, thread_id, user_id, created_at, updated_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
        ON CONFLICT (session_key) DO UPDATE SET session_id = excluded.session_id, updated_at = excluded.updated_at
        """,
        (key, session_id, platform, chat_id, chat_type, thread_id, user_id, now, now),
    )
    # Remembered for good, so /resume can tell which chats a session belongs to
    # after the key moved on (/new, /handoff).
    conn.execute(
        "INSERT INTO gateway_session_bindings (session_key, session_id, platform, user_id, first_bound_at) "
        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (session_key, session_id) DO NOTHING",
        (key, session_id, platform, user_id, now),
    )


def unbind(conn: PgConnection, key: str, session_id: str) -> bool:
    """Remove the key's entry if it still points at ``session_id``; True if it did."""
    cur = conn.execute(
        "DELETE FROM gateway_session_index WHERE session_key = %s AND session_id = %s", (key, session_id)
    )
    return cur.rowcount == 1


def repoint(conn: PgConnection, key: str, from_session: str, to_session: str,
            updated_at: float | None) -> bool:
    """Point the key back at ``to_session`` (as bound at ``updated_at``) if it still points at
    ``from_session``; True if it did."""
    cur = conn.execute(
        "UPDATE gateway_session_index SET session_id = %s, updated_at = %s WHERE session_key = %s AND session_id = %s",
        (to_session, updated_at, key, from_session),
    )
    return cur.rowcount == 1


def was_bound(conn: PgConnection, key: str, session_id: str) -> bool:
    """Whether the key was ever bound to the session (its binding history)."""
    row = conn.execute(
        "SELECT 1 FROM gateway_session_bindings WHERE session_key = %s AND session_id = %s", (key, session_id)
    ).fetchone()
    return row is not None


def forget_binding(conn: PgConnection, key: str, session_id: str) -> None:
    """Drop one binding from the history: the key never had the session after all."""
    conn.execute("DELETE FROM gateway_session_bindings WHERE session_key = %s AND session_id = %s", (key, session_id))


# ---------------------------------------------------------------- queued titles


def pending_title(conn: PgConnection, key: str, *, queued_since: float) -> str | None:
    """The title queued for the key's next session, if queued at ``queued_since`` or later."""
    row = conn.execute(
        "SELECT title FROM gateway_pending_titles WHERE session_key = %s AND created_at >= %s", (key, queued_since)
    ).fetchone()
    return None if row is None else str(row["title"])


def queue_title(conn: PgConnection, key: str, title: str, *, now: float) -> None:
    """Queue (or replace) the title for the key's next session."""
    conn.execute(
        "INSERT INTO gateway_pending_titles (session_key, title, created_at) VALUES (%s, %s, %s) "
        "ON CONFLICT (session_key) DO UPDATE SET title = excluded.title, created_at = excluded.created_at",
        (key, title, now),
    )


def forget_pending_title(conn: PgConnection, key: str) -> None:
    conn.execute("DELETE FROM gateway_pending_titles WHERE session_key = %s", (key,))


def sweep_pending_titles(conn: PgConnection, *, queued_before: float) -> None:
    """Forget every title queued before ``queued_before``."""
    conn.execute("DELETE FROM gateway_pending_titles WHERE created_at < %s", (queued_before,))
