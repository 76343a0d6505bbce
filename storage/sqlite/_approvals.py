"""Approvals answered "always" (``gateway_approvals_always``): per session, the exact action
patterns that run without asking again (the gateway's ``Approvals`` keeps them across restarts)."""

from __future__ import annotations

import sqlite3

__all__ = ["patterns", "remember"]


def remember(conn: sqlite3.Connection, session_id: str, pattern: str, *, tool: str, approved_by: str | None,
             now: float) -> None:
    """``pattern`` runs unasked in ``session_id`` from now on (the first "always" of it stands)."""
    conn.execute(
        "INSERT INTO gateway_approvals_always (session_id, pattern, tool, approved_by, created_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT(session_id, pattern) DO NOTHING",
        (session_id, pattern, tool, approved_by, now),
    )


def patterns(conn: sqlite3.Connection, session_id: str) -> set[str]:
    """Every pattern approved "always" in ``session_id``."""
    rows = conn.execute("SELECT pattern FROM gateway_approvals_always WHERE session_id = ?", (session_id,))
    return {str(row[0]) for row in rows}
