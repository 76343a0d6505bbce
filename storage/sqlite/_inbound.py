"""Inbound messages already seen (``gateway_inbound_seen``): the dedupe record."""

from __future__ import annotations

import sqlite3


def seen(conn: sqlite3.Connection, platform: str, delivery_key: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM gateway_inbound_seen WHERE platform = ? AND delivery_key = ?", (platform, delivery_key)
    ).fetchone()
    return row is not None


def record(conn: sqlite3.Connection, platform: str, delivery_key: str, *, now: float) -> None:
    """Record a message as seen; recording it twice keeps the first time."""
    conn.execute(
        "INSERT OR IGNORE INTO gateway_inbound_seen (platform, delivery_key, seen_at) VALUES (?, ?, ?)",
        (platform, delivery_key, now),
    )


def sweep(conn: sqlite3.Connection, *, seen_before: float) -> int:
    """Forget messages seen before ``seen_before``; how many were forgotten."""
    return conn.execute("DELETE FROM gateway_inbound_seen WHERE seen_at < ?", (seen_before,)).rowcount
