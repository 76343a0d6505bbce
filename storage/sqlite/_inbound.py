"""Inbound messages already seen (``gateway_inbound_seen``): the dedupe record, and for a
message that became a turn, its stored question and answer. Messages taken and not yet answered
(``gateway_parked``): what a crash or a stop must not lose."""

from __future__ import annotations

import sqlite3

from .._model import ParkedMessage, SeenMessage


def seen(conn: sqlite3.Connection, platform: str, delivery_key: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM gateway_inbound_seen WHERE platform = ? AND delivery_key = ?", (platform, delivery_key)
    ).fetchone()
    return row is not None


def record(conn: sqlite3.Connection, platform: str, delivery_key: str, *, now: float,
           session_id: str | None = None, user_id: str | None = None) -> None:
    """Record a message as seen; recording it twice keeps the first time.

    With ``session_id``, in the transaction that has just appended the message to that
    session: the session's latest row is remembered as its question. ``user_id``: its sender
    (a forget finds the row by it).
    """
    conn.execute(
        "INSERT OR IGNORE INTO gateway_inbound_seen (platform, delivery_key, seen_at, session_id, question_id, "
        "user_id) VALUES (?, ?, ?, ?, (SELECT id FROM messages WHERE session_id = ? ORDER BY id DESC LIMIT 1), ?)",
        (platform, delivery_key, now, session_id, session_id, user_id),
    )


def record_answer(conn: sqlite3.Connection, platform: str, delivery_key: str, answer: str) -> None:
    """The final word on a recorded message (the reply as sent), for its retries."""
    conn.execute(
        "UPDATE gateway_inbound_seen SET answer = ? WHERE platform = ? AND delivery_key = ?",
        (answer, platform, delivery_key),
    )


def get(conn: sqlite3.Connection, platform: str, delivery_key: str) -> SeenMessage | None:
    row = conn.execute(
        "SELECT seen_at, session_id, question_id, answer FROM gateway_inbound_seen "
        "WHERE platform = ? AND delivery_key = ?",
        (platform, delivery_key),
    ).fetchone()
    return None if row is None else SeenMessage(*tuple(row))


def question_open(conn: sqlite3.Connection, session_id: str, question_id: int) -> bool:
    """Whether message ``question_id`` is still in ``session_id`` and no user message came after it."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM messages WHERE id = ? AND session_id = ? AND role = 'user') "
        "AND NOT EXISTS (SELECT 1 FROM messages WHERE session_id = ? AND role = 'user' AND id > ?)",
        (question_id, session_id, session_id, question_id),
    ).fetchone()
    return bool(row[0])


def sweep(conn: sqlite3.Connection, *, seen_before: float) -> int:
    """Forget messages seen before ``seen_before``; how many were forgotten."""
    return conn.execute("DELETE FROM gateway_inbound_seen WHERE seen_at < ?", (seen_before,)).rowcount


def park(conn: sqlite3.Connection, session_key: str, platform: str, user_id: str | None, payload: str, *,
         now: float, node_id: str | None = None, token: int | None = None) -> int:
    """Keep a message taken from its platform until it is answered (``unpark``); the row's id.
    Written before the platform is told it was taken. ``node_id``/``token``: several nodes only."""
    cur = conn.execute(
        "INSERT INTO gateway_parked (session_key, platform, user_id, payload, parked_at) VALUES (?, ?, ?, ?, ?)",
        (session_key, platform, user_id, payload, now),
    )
    return int(cur.lastrowid or 0)


def unpark(conn: sqlite3.Connection, park_id: int) -> None:
    """The parked message was answered (in that answer's transaction where there is one)."""
    conn.execute("DELETE FROM gateway_parked WHERE id = ?", (park_id,))


def is_parked(conn: sqlite3.Connection, park_id: int) -> bool:
    """Whether the parked message is still unanswered."""
    return conn.execute("SELECT 1 FROM gateway_parked WHERE id = ?", (park_id,)).fetchone() is not None


def parked(conn: sqlite3.Connection) -> list[ParkedMessage]:
    """Every message still parked, oldest first: at start-up, what a crash or a stop cut off."""
    return [ParkedMessage(int(r[0]), str(r[1]), str(r[2]), float(r[3])) for r in conn.execute(
        "SELECT id, session_key, payload, parked_at FROM gateway_parked ORDER BY id")]
