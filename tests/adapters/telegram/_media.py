"""What the media tests share: the real adapter polling ``FakeTelegram``, its messages taken by a
recording handler in place of the router."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Callable
from typing import Any

from PIL import Image

from adapters.base import Disposition, InboundMessage
from adapters.media import Attachment
from adapters.telegram import TelegramAdapter, TelegramSettings
from tests.emulators.fake_telegram import FakeTelegram

__all__ = ["WAIT", "Inbox", "Running", "fetched", "jpeg", "next_message", "start"]

WAIT = 15.0


class Inbox:
    """The router's seat: records every message the adapter dispatches."""

    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []
        #: ``time.monotonic()`` of each message's arrival (the fake's clock)
        self.times: list[float] = []
        self._changed = asyncio.Event()

    async def handle(self, message: InboundMessage) -> Disposition:
        self.messages.append(message)
        self.times.append(time.monotonic())
        self._changed.set()
        return Disposition.ACCEPTED

    async def wait(self, n: int) -> list[InboundMessage]:
        async def reached() -> None:
            while len(self.messages) < n:
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(reached(), WAIT)
        return self.messages[:n]

    async def wait_for(self, match: Callable[[InboundMessage], bool]) -> InboundMessage:
        async def found() -> InboundMessage:
            while True:
                for m in self.messages:
                    if match(m):
                        return m
                self._changed.clear()
                await self._changed.wait()

        return await asyncio.wait_for(found(), WAIT)


class Running:
    def __init__(self, adapter: TelegramAdapter, inbox: Inbox, task: asyncio.Task[None]) -> None:
        self.adapter, self.inbox, self.task = adapter, inbox, task

    async def stop(self) -> None:
        await self.adapter.disconnect()
        await asyncio.wait_for(self.task, WAIT)


async def start(fake: FakeTelegram, *, window: float = 0.05, **settings: Any) -> Running:
    values: dict[str, Any] = {"base_file_url": fake.base_file_url, "poll_timeout": 5, "watchdog_grace": 3.0,
                              **settings}
    adapter = TelegramAdapter(TelegramSettings(token=fake.token, base_url=fake.base_url, **values))
    adapter.media_group_window = window
    inbox = Inbox()
    adapter.bind(inbox.handle)
    task = asyncio.create_task(adapter.connect())
    await asyncio.wait_for(adapter.ready.wait(), WAIT)
    return Running(adapter, inbox, task)


def jpeg(width: int, height: int, seed: int = 0) -> bytes:
    img = Image.new("RGB", (width, height))
    img.putdata([((x * 7 + seed) % 256, (x * 13) % 256, (x // 3) % 256) for x in range(width * height)])
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=90)
    return buf.getvalue()


async def fetched(adapter: TelegramAdapter, attachment: Attachment, limit: int = 20 * 2**20) -> bytes:
    return b"".join([chunk async for chunk in adapter.fetch(attachment, limit=limit)])


async def next_message(tg: Running, fake: FakeTelegram, media: dict[str, Any], **kw: Any) -> InboundMessage:
    before = len(tg.inbox.messages)
    await fake.user_sends(media, **kw)
    return (await tg.inbox.wait(before + 1))[-1]
