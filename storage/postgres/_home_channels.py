"""Home channels (``gateway_home_channels``): per platform, where proactive messages land.

One upsert per change: two nodes setting a platform's home at once leave the later commit's."""

from __future__ import annotations

from .._model import HomeChannelRow
from ._conn import PgConnection


def get(conn: PgConnection, platform: str) -> HomeChannelRow | None:
    row = conn.execute(
        "SELECT platform, chat_id, thread_id, chat_type, set_by, updated_at "
        "FROM gateway_home_channels WHERE platform = %s",
        (platform,),
    ).fetchone()
    if row is None:
        return None
    return HomeChannelRow(row["platform"], row["chat_id"], row["thread_id"], row["chat_type"], row["set_by"],
                          float(row["updated_at"]))


def put(conn: PgConnection, platform: str, *, chat_id: str, thread_id: str | None, chat_type: str,
        set_by: str | None, now: float) -> None:
    """Set (or replace) the platform's home channel."""
    conn.execute(
        """
        INSERT INTO gateway_home_channels (platform, chat_id, thread_id, chat_type, set_by, updated_at)
        VALUES (%s, %s, %s, %s, %s, %s)
        ON CONFLICT (platform) DO UPDATE SET chat_id = excluded.chat_id, thread_id = excluded.thread_id,
            chat_type = excluded.chat_type, set_by = excluded.set_by, updated_at = excluded.updated_at
        """,
        (platform, chat_id, thread_id, chat_type, set_by, now),
    )
