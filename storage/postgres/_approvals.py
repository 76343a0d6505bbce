"""Approvals answered "always" (``gateway_approvals_always``): the SQLite backend's ``approvals``
in PostgreSQL. Per session, the exact action patterns that run without asking again."""

from __future__ import annotations

from ._conn import PgConnection

__all__ = ["patterns", "remember"]


def remember(conn: PgConnection, session_id: str, pattern: str, *, tool: str, approved_by: str | None,
             now: float) -> None:
    """``pattern`` runs unasked in ``session_id`` from now on (the first "always" of it stands).

    The primary key decides between two nodes remembering the same pattern at once: one row
    is kept, the other insert does nothing."""
    conn.execute(
        "INSERT INTO gateway_approvals_always (session_id, pattern, tool, approved_by, created_at) "
        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (session_id, pattern) DO NOTHING",
        (session_id, pattern, tool, approved_by, now),
    )


def patterns(conn: PgConnection, session_id: str) -> set[str]:
    """Every pattern approved "always" in ``session_id``."""
    rows = conn.execute("SELECT pattern FROM gateway_approvals_always WHERE session_id = %s", (session_id,))
    return {str(row[0]) for row in rows}
