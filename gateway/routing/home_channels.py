"""Home channels: per platform, the chat (and thread) where handed-off
sessions and other proactive messages land. Set with /sethome, kept in state.db."""

from __future__ import annotations

import time
from dataclasses import dataclass

from adapters.base import ChatType
from storage import HomeChannelRow, Store, home_channels

__all__ = ["HomeChannel", "HomeChannels"]


@dataclass(frozen=True)
class HomeChannel:
    platform: str
    chat_id: str
    thread_id: str | None
    chat_type: ChatType
    set_by: str | None
    updated_at: float


def _row_to_home(row: HomeChannelRow | None) -> HomeChannel | None:
    if row is None:
        return None
    try:
        chat_type = ChatType(row.chat_type or ChatType.DM)
    except ValueError:  # written by a newer version: the safest reading
        chat_type = ChatType.GROUP
    return HomeChannel(row.platform, row.chat_id, row.thread_id, chat_type, row.set_by, row.updated_at)


class HomeChannels:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def get(self, platform: str) -> HomeChannel | None:
        return await self._store.read(lambda c: _row_to_home(home_channels.get(c, platform)))

    async def set(self, platform: str, chat_id: str, thread_id: str | None, chat_type: ChatType,
                  set_by: str | None) -> HomeChannel:
        now = time.time()
        await self._store.write(
            lambda c: home_channels.put(c, platform, chat_id=chat_id, thread_id=thread_id, chat_type=str(chat_type),
                                        set_by=set_by, now=now)
        )
        return HomeChannel(platform, chat_id, thread_id, chat_type, set_by, now)
