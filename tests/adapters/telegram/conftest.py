"""``tg``: the Telegram adapter polling ``fake_telegram``, its messages recorded (``_media``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.emulators.fake_telegram import FakeTelegram

from ._media import Running, start


@pytest.fixture
async def tg(fake_telegram: FakeTelegram) -> AsyncIterator[Running]:
    running = await start(fake_telegram)
    yield running
    await running.stop()
