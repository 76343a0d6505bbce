"""``outbound.relay`` / ``take_relayed``: a reply written on a node that does not hold its
platform's connection is left for the node that does; it is neither expired nor recovered
meanwhile, and (PostgreSQL) the node taking it is woken by a NOTIFY at COMMIT and never takes a
row another node is taking."""

from __future__ import annotations

import asyncio
import threading
from functools import partial
from typing import Any

import pytest

import storage.postgres as _PG
from storage.postgres import PgStore
from storage.postgres import cluster as pc
from storage.postgres import outbound as pg_outbound

from ._routing_rows import T0, server_outside_the_loop
from .conftest import Db
from .test_outbound import PDF, _claim, _record, _statuses

_server_first = pytest.fixture(autouse=True)(server_outside_the_loop)


async def test_a_relayed_row_waits_for_its_platforms_node_and_is_taken_once(db: Db) -> None:
    outbound = db.m.outbound
    first = await db.write(lambda c: _record(db.m, c, "first", T0, files=(PDF,)))
    second = await db.write(lambda c: _record(db.m, c, "second", T0 + 1))
    slack = await db.write(lambda c: _record(db.m, c, "slack's", T0 + 2, platform="slack"))
    sent = await db.write(lambda c: _record(db.m, c, "sent already", T0 + 3))
    await db.write(partial(outbound.mark, ledger_id=sent, status="sent", error=None, now=T0 + 4))
    assert [await db.write(partial(outbound.relay, ledger_id=i)) for i in (first, second, slack)] == [True] * 3
    assert await db.write(partial(outbound.relay, ledger_id=second)) is False  # relayed already
    assert await db.write(partial(outbound.relay, ledger_id=sent)) is False  # not pending
    assert await db.write(partial(outbound.relay, ledger_id=999_999)) is False

    # neither a crash's recovery nor the expiry of old leftovers touches them
    assert await db.write(lambda c: _claim(db.m, c, "telegram", cutoff=T0 + 1_000_000)) == []
    assert await db.read(partial(outbound.pending, platform="telegram")) == []
    assert [s[1] for s in await _statuses(db)] == ["relay", "relay", "relay", "sent"]

    taken = await db.write(partial(outbound.take_relayed, platform="telegram", limit=1))
    assert [(r.id, r.text, r.chat_id, r.reply_to, r.files, r.files_sent, r.interrupted) for r in taken] == [
        (first, "first", "c1", "r1", (PDF,), None, False)]
    rest = await db.write(partial(outbound.take_relayed, platform="telegram", limit=10))
    assert [r.id for r in rest] == [second]
    assert await db.write(partial(outbound.take_relayed, platform="telegram", limit=10)) == []
    assert [s[1] for s in await _statuses(db)] == ["relaying", "relaying", "relay", "sent"]
    await db.write(partial(outbound.mark, ledger_id=first, status="sent", error=None, now=T0 + 9))
    assert (await _statuses(db))[0][1:4] == ("sent", 1, T0 + 9)
    assert [r.id for r in await db.write(partial(outbound.take_relayed, platform="slack", limit=10))] == [slack]


# ------------------------------------------------------------------ several nodes (PostgreSQL)


async def test_a_relay_wakes_the_listener_at_commit_and_a_rolled_back_one_does_not(pg_url: str) -> None:
    async with PgStore(pg_url) as store:
        heard: asyncio.Queue[str] = asyncio.Queue()

        async def listen() -> None:
            async for platform in pc.relay_wakeups(store):
                await heard.put(platform)

        listener = asyncio.create_task(listen())
        try:
            assert await asyncio.wait_for(heard.get(), 30) == ""  # LISTEN is in place
            row = await store.write(partial(_record, _PG, text="t", now=T0))

            def relay_then_fail(conn: Any) -> None:
                assert pg_outbound.relay(conn, row)
                raise RuntimeError("rolled back")

            with pytest.raises(RuntimeError):
                await store.write(relay_then_fail)
            slack = await store.write(partial(_record, _PG, text="s", now=T0, platform="slack"))
            assert await store.write(partial(pg_outbound.relay, ledger_id=slack))
            assert await asyncio.wait_for(heard.get(), 30) == "slack"  # the rolled-back one said nothing
            assert await store.write(partial(pg_outbound.relay, ledger_id=row))
            assert await asyncio.wait_for(heard.get(), 30) == "telegram"
        finally:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)


async def test_a_node_taking_relayed_rows_skips_those_another_node_is_taking(pg_url: str) -> None:
    a_took, b_done = threading.Event(), threading.Event()

    def take_slowly(conn: Any) -> list[int]:
        rows = pg_outbound.take_relayed(conn, "telegram", 3)
        a_took.set()
        if not b_done.wait(120):
            raise AssertionError("node B's take waited for node A's")
        return [r.id for r in rows]

    async with PgStore(pg_url) as node_a, PgStore(pg_url) as node_b:
        ids = [await node_a.write(partial(_record, _PG, text=f"r{n}", now=T0 + n)) for n in range(5)]
        for i in ids:
            await node_a.write(partial(pg_outbound.relay, ledger_id=i))
        task_a = asyncio.create_task(node_a.write(take_slowly))
        assert await asyncio.to_thread(a_took.wait, 120)
        taken_b = [r.id for r in await node_b.write(partial(pg_outbound.take_relayed, platform="telegram", limit=10))]
        b_done.set()
        assert await task_a == ids[:3]
        assert taken_b == ids[3:]
        assert await node_b.write(partial(pg_outbound.take_relayed, platform="telegram", limit=10)) == []


async def test_three_nodes_taking_while_replies_are_relayed_take_each_row_once(pg_url: str) -> None:
    total = 90
    relayed: list[int] = []
    done = asyncio.Event()

    def record_and_relay(conn: Any, n: int) -> int:
        row = _record(_PG, conn, f"r{n}", T0 + n)
        assert pg_outbound.relay(conn, row)
        return row

    async def writer(store: PgStore) -> None:
        for n in range(total):
            relayed.append(await store.write(partial(record_and_relay, n=n)))
        done.set()

    async def taker(store: PgStore) -> list[int]:
        got: list[int] = []
        while True:
            finished = done.is_set()
            got.extend(r.id for r in await store.write(partial(pg_outbound.take_relayed, platform="telegram", limit=4)))
            if finished:
                return got
            await asyncio.sleep(0)

    async with PgStore(pg_url) as a, PgStore(pg_url) as b, PgStore(pg_url) as c:
        results = await asyncio.gather(taker(a), taker(b), taker(c), writer(a))
        every = sorted(i for ids in results if ids is not None for i in ids)
        assert every == sorted(relayed) and len(relayed) == total
