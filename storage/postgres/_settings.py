"""Settings changed at run time (``gateway_session_settings``, ``gateway_settings``): the SQLite
backend's ``settings`` in PostgreSQL. Values are text; callers that need structure store JSON.

Each write is one ``INSERT … ON CONFLICT`` or ``DELETE``: two nodes setting the same name at once
leave one of the two values, never an error or two rows.
"""

from __future__ import annotations

from ._conn import PgConnection

__all__ = [
    "clear_session",
    "get_global",
    "get_session",
    "session_settings",
    "set_global",
    "set_session",
]


def set_session(conn: PgConnection, session_id: str, name: str, value: str | None, *, now: float) -> None:
    """Set (``value`` None: remove) one setting of ``session_id``."""
    if value is None:
        conn.execute("DELETE FROM gateway_session_settings WHERE session_id = %s AND name = %s", (session_id, name))
        return
    conn.execute(
        "INSERT INTO gateway_session_settings (session_id, name, value, updated_at) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (session_id, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        (session_id, name, value, now),
    )


def get_session(conn: PgConnection, session_id: str, name: str) -> str | None:
    row = conn.execute("SELECT value FROM gateway_session_settings WHERE session_id = %s AND name = %s",
                       (session_id, name)).fetchone()
    return None if row is None else str(row[0])


def session_settings(conn: PgConnection, session_id: str) -> dict[str, str]:
    """Every setting of ``session_id``, by name (in the order of their names, as state.db's key gives them)."""
    rows = conn.execute('SELECT name, value FROM gateway_session_settings WHERE session_id = %s '
                        'ORDER BY name COLLATE "C"', (session_id,))
    return {str(name): str(value) for name, value in rows}


def clear_session(conn: PgConnection, session_id: str) -> int:
    """Drop every setting of ``session_id`` (its session was deleted); returns how many went."""
    return conn.execute("DELETE FROM gateway_session_settings WHERE session_id = %s", (session_id,)).rowcount


def set_global(conn: PgConnection, name: str, value: str | None, *, updated_by: str | None,
               now: float) -> None:
    """Set (``value`` None: remove) one of the gateway's global settings."""
    if value is None:
        conn.execute("DELETE FROM gateway_settings WHERE name = %s", (name,))
        return
    conn.execute(
        "INSERT INTO gateway_settings (name, value, updated_by, updated_at) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_by = excluded.updated_by, "
        "updated_at = excluded.updated_at",
        (name, value, updated_by, now),
    )


def get_global(conn: PgConnection, name: str) -> str | None:
    row = conn.execute("SELECT value FROM gateway_settings WHERE name = %s", (name,)).fetchone()
    return None if row is None else str(row[0])
