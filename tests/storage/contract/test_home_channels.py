"""``home_channels``: one home channel per platform, on both backends; on PostgreSQL, nodes
setting one at once never fail and leave one whole row."""

from __future__ import annotations

import asyncio
from functools import partial

import pytest

import storage.postgres as pg_backend
from storage import HomeChannelRow
from storage.postgres import PgStore

from ._routing_rows import T0, server_outside_the_loop
from .conftest import Db

_server_first = pytest.fixture(autouse=True)(server_outside_the_loop)


async def test_a_platform_has_one_home_channel_replaced_whole(db: Db) -> None:
    hc = db.m.home_channels
    assert await db.read(partial(hc.get, platform="telegram")) is None
    await db.write(partial(hc.put, platform="telegram", chat_id="1", thread_id="t", chat_type="group",
                           set_by="u1", now=T0))
    assert await db.read(partial(hc.get, platform="telegram")) == HomeChannelRow(
        "telegram", "1", "t", "group", "u1", T0)
    await db.write(partial(hc.put, platform="telegram", chat_id="2", thread_id=None, chat_type="dm",
                           set_by=None, now=T0 + 1))
    assert await db.read(partial(hc.get, platform="telegram")) == HomeChannelRow(
        "telegram", "2", None, "dm", None, T0 + 1)
    await db.write(partial(hc.put, platform="slack", chat_id="C1", thread_id=None, chat_type="channel",
                           set_by="U1", now=T0 + 2))
    assert await db.read(partial(hc.get, platform="telegram")) == HomeChannelRow(
        "telegram", "2", None, "dm", None, T0 + 1)
    assert await db.read(partial(hc.get, platform="slack")) == HomeChannelRow(
        "slack", "C1", None, "channel", "U1", T0 + 2)
    assert await db.read(partial(hc.get, platform="discord")) is None


async def test_nodes_setting_a_home_at_once_leave_one_whole_row(pg_url: str) -> None:
    async with PgStore(pg_url) as a, PgStore(pg_url) as b:
        await asyncio.gather(*(node.write(partial(pg_backend.home_channels.put, platform="telegram",
                                                  chat_id=f"chat{n}", thread_id=f"thread{n}", chat_type="group",
                                                  set_by=f"user{n}", now=T0 + n))
                               for n in range(30) for node in (a, b)))
        row = await b.read(partial(pg_backend.home_channels.get, platform="telegram"))
        assert row is not None
        n = int(row.updated_at - T0)
        assert row == HomeChannelRow("telegram", f"chat{n}", f"thread{n}", "group", f"user{n}", T0 + n)
        count = await a.read(lambda c: c.execute("SELECT count(*) FROM gateway_home_channels").fetchone())
        assert count is not None and count[0] == 1
