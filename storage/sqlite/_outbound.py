"""The outbound delivery ledger (``gateway_outbound``): every reply is a row
before it is sent, and is marked when it was (or could not be)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from .._model import PendingReply


def record(conn: sqlite3.Connection, *, session_key: str | None, session_id: str | None, platform: str,
           chat_id: str, thread_id: str | None, reply_to: str | None, text: str, now: float) -> int:
    """A new ``pending`` row; its id."""
    cur = conn.execute(
        "INSERT INTO gateway_outbound (session_key, session_id, platform, chat_id, thread_id, reply_to, "
        "text, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (session_key, session_id, platform, chat_id, thread_id, reply_to, text, now),
    )
    return int(cur.lastrowid or 0)


def mark(conn: sqlite3.Connection, ledger_id: int, status: str, error: str | None, *, now: float) -> None:
    """Set a row's status and error and count the attempt; ``sent`` and ``recovered`` also set ``sent_at``."""
    conn.execute(
        "UPDATE gateway_outbound SET status = ?, attempts = attempts + 1, error = ?, "
        "sent_at = CASE WHEN ? IN ('sent', 'recovered') THEN ? ELSE sent_at END WHERE id = ?",
        (status, error, status, now, ledger_id),
    )


def expire_pending(conn: sqlite3.Connection, platform: str, *, created_before: float) -> None:
    """Mark the platform's ``pending`` rows written before ``created_before`` as ``expired``."""
    conn.execute(
        "UPDATE gateway_outbound SET status = 'expired' WHERE platform = ? AND status = 'pending' "
        "AND created_at < ?",
        (platform, created_before),
    )


def pending(conn: sqlite3.Connection, platform: str) -> list[PendingReply]:
    """The platform's ``pending`` rows, oldest first."""
    rows = conn.execute(
        "SELECT id, platform, chat_id, thread_id, reply_to, text, created_at FROM gateway_outbound "
        "WHERE platform = ? AND status = 'pending' ORDER BY id",
        (platform,),
    ).fetchall()
    return [PendingReply(*tuple(r)) for r in rows]


def mark_recovering(conn: sqlite3.Connection, ledger_ids: Iterable[int]) -> None:
    conn.executemany("UPDATE gateway_outbound SET status = 'recovering' WHERE id = ?",
                     [(ledger_id,) for ledger_id in ledger_ids])


def last_failure(conn: sqlite3.Connection, session_key: str) -> str | None:
    """The error of the key's latest ``failed`` row (None when there is none, or it has no error)."""
    row = conn.execute(
        "SELECT error FROM gateway_outbound WHERE session_key = ? AND status = 'failed' ORDER BY id DESC LIMIT 1",
        (session_key,),
    ).fetchone()
    return None if row is None or row["error"] is None else str(row["error"])
