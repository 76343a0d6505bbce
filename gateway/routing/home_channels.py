"""Home channels: per platform, the chat (and thread) where handed-off
sessions and other proactive messages land. Set with /sethome, kept in state.db."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from adapters.base import ChatType
from storage import StateStore

__all__ = ["HomeChannel", "HomeChannels"]


@dataclass(frozen=True)
class HomeChannel:
    platform: str
    chat_id: str
    thread_id: str | None
    chat_type: ChatType
    set_by: str | None
    updated_at: float


def _row_to_home(row: sqlite3.Row | None) -> HomeChannel | None:
    if row is None:
        return None
    try:
        chat_type = ChatType(row["chat_type"] or ChatType.DM)
    except ValueError:  # written by a newer version: the safest reading
        chat_type = ChatType.GROUP
    return HomeChannel(row["platform"], row["chat_id"], row["thread_id"], chat_type, row["set_by"],
                       float(row["updated_at"]))


class HomeChannels:
    def __init__(self, store: StateStore) -> None:
        self._store = store

    async def get(self, platform: str) -> HomeChannel | None:
        return await self._store.read(
            lambda c: _row_to_home(c.execute(
                "SELECT platform, chat_id, thread_id, chat_type, set_by, updated_at "
                "FROM gateway_home_channels WHERE platform = ?",
                (platform,),
            ).fetchone())
        )

    async def set(self, platform: str, chat_id: str, thread_id: str | None, chat_type: ChatType,
                  set_by: str | None) -> HomeChannel:
        now = time.time()
        await self._store.write(
            lambda c: c.execute(
                """
                INSERT INTO gateway_home_channels (platform, chat_id, thread_id, chat_type, set_by, updated_at)
                VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT(platform) DO UPDATE SET chat_id = excluded.chat_id, thread_id = excluded.thread_id,
                    chat_type = excluded.chat_type, set_by = excluded.set_by, updated_at = excluded.updated_at
                """,
                (platform, chat_id, thread_id, str(chat_type), set_by, now),
            )
        )
        return HomeChannel(platform, chat_id, thread_id, chat_type, set_by, now)
