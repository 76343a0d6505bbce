"""``inbound``: the dedupe record of platform messages, on both backends; and on PostgreSQL,
two nodes recording the same delivery at once."""

from __future__ import annotations

import asyncio
import threading
from functools import partial
from typing import Any

import pytest

from storage import SeenMessage
from storage.postgres import PgStore
from storage.postgres import inbound as pg_inbound

from ._routing_rows import T0, add_message, add_session, server_outside_the_loop, sql, until_lock_waiters
from .conftest import Db

_server_first = pytest.fixture(autouse=True)(server_outside_the_loop)


async def test_a_message_is_recorded_once_and_swept_by_age(db: Db) -> None:
    inbound = db.m.inbound
    assert not await db.read(partial(inbound.seen, platform="telegram", delivery_key="m1"))
    await db.write(partial(inbound.record, platform="telegram", delivery_key="m1", now=T0))
    await db.write(partial(inbound.record, platform="telegram", delivery_key="m1", now=T0 + 100))  # a copy: ignored
    await db.write(partial(inbound.record, platform="discord", delivery_key="m1", now=T0 + 100))
    assert await db.read(partial(inbound.seen, platform="telegram", delivery_key="m1"))
    got = await db.read(partial(inbound.get, platform="telegram", delivery_key="m1"))
    assert got == SeenMessage(T0, None, None, None)  # the first time is kept
    assert await db.write(partial(inbound.sweep, seen_before=T0 + 50)) == 1
    assert not await db.read(partial(inbound.seen, platform="telegram", delivery_key="m1"))
    assert await db.read(partial(inbound.seen, platform="discord", delivery_key="m1"))
    assert await db.write(partial(inbound.sweep, seen_before=T0 + 50)) == 0


async def test_a_turn_remembers_its_question_and_then_its_answer(db: Db) -> None:
    inbound = db.m.inbound
    await add_session(db, "s1")
    await add_message(db, "s1", "user", "earlier", timestamp=T0)
    question = await add_message(db, "s1", "user", "what time is it", timestamp=T0 + 1)
    # recorded in the transaction that stored the question: the session's latest row is it
    await db.write(partial(inbound.record, platform="api", delivery_key="req-1", now=T0 + 1, session_id="s1",
                           user_id="u1"))
    assert await db.read(partial(inbound.get, platform="api", delivery_key="req-1")) == SeenMessage(
        T0 + 1, "s1", question, None)
    await db.write(partial(inbound.record_answer, platform="api", delivery_key="req-1", answer="noon"))
    assert await db.read(partial(inbound.get, platform="api", delivery_key="req-1")) == SeenMessage(
        T0 + 1, "s1", question, "noon")
    rows = await db.read(lambda c: sql(db, c, "SELECT user_id FROM gateway_inbound_seen WHERE delivery_key = %s",
                                       ("req-1",)).fetchall())
    assert [r[0] for r in rows] == ["u1"]
    # an answer for a message never recorded changes nothing, and creates nothing
    await db.write(partial(inbound.record_answer, platform="api", delivery_key="nope", answer="x"))
    assert await db.read(partial(inbound.get, platform="api", delivery_key="nope")) is None


async def test_a_session_without_messages_gives_no_question(db: Db) -> None:
    await add_session(db, "empty")
    await db.write(partial(db.m.inbound.record, platform="api", delivery_key="r", now=T0, session_id="empty"))
    assert await db.read(partial(db.m.inbound.get, platform="api", delivery_key="r")) == SeenMessage(
        T0, "empty", None, None)


async def test_a_question_is_open_until_another_user_message_comes(db: Db) -> None:
    question_open = db.m.inbound.question_open
    await add_session(db, "s1")
    await add_session(db, "s2")
    q = await add_message(db, "s1", "user", "q", timestamp=T0)
    await add_message(db, "s1", "assistant", "thinking aloud", timestamp=T0 + 1)
    assert await db.read(partial(question_open, session_id="s1", question_id=q))  # an answer does not close it
    assert not await db.read(partial(question_open, session_id="s2", question_id=q))  # not that session's
    reply = await add_message(db, "s1", "assistant", "a", timestamp=T0 + 2)
    assert not await db.read(partial(question_open, session_id="s1", question_id=reply))  # not a user's message
    elsewhere = await add_message(db, "s2", "user", "other chat", timestamp=T0 + 3)
    assert await db.read(partial(question_open, session_id="s1", question_id=q))
    assert await db.read(partial(question_open, session_id="s2", question_id=elsewhere))
    await add_message(db, "s1", "user", "next", timestamp=T0 + 4)
    assert not await db.read(partial(question_open, session_id="s1", question_id=q))
    assert not await db.read(partial(question_open, session_id="s1", question_id=10_000))


# ------------------------------------------------------------------ several nodes (PostgreSQL)


def _user_of(conn: Any, key: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(
        "SELECT seen_at, user_id FROM gateway_inbound_seen WHERE platform = 'telegram' AND delivery_key = %s",
        (key,)).fetchall()]


async def _race(pg_url: str, *, first_commits: bool) -> list[tuple[Any, ...]]:
    """Node A records a delivery and holds its transaction open until node B, recording the same
    delivery, waits for it; then A commits (or fails). Both writes must end without an error."""
    inserted, release = threading.Event(), threading.Event()

    def first(conn: Any) -> None:
        pg_inbound.record(conn, "telegram", "m1", now=T0, user_id="a")
        inserted.set()
        if not release.wait(120):
            raise AssertionError("node B never came to wait")
        if not first_commits:
            raise RuntimeError("node A's turn failed after recording")

    async with PgStore(pg_url) as node_a, PgStore(pg_url) as node_b:
        task_a = asyncio.create_task(node_a.write(first))
        assert await asyncio.to_thread(inserted.wait, 120)
        task_b = asyncio.create_task(node_b.write(partial(pg_inbound.record, platform="telegram",
                                                          delivery_key="m1", now=T0 + 1, user_id="b")))
        await until_lock_waiters(node_b, 1)  # B's insert waits on A's row: a real race, not one after the other
        release.set()
        if first_commits:
            await task_a
        else:
            with pytest.raises(RuntimeError):
                await task_a
        await task_b  # it raised no unique violation
        return await node_a.read(lambda c: _user_of(c, "m1"))


async def test_two_nodes_recording_one_delivery_at_once_the_first_wins_quietly(pg_url: str) -> None:
    assert await _race(pg_url, first_commits=True) == [(T0, "a")]


async def test_when_the_first_node_rolls_back_the_second_records_the_delivery(pg_url: str) -> None:
    assert await _race(pg_url, first_commits=False) == [(T0 + 1, "b")]


async def test_many_deliveries_recorded_by_three_nodes_at_once_are_each_recorded_once(pg_url: str) -> None:
    keys = [f"u{n}" for n in range(60)]
    async with PgStore(pg_url) as a, PgStore(pg_url) as b, PgStore(pg_url) as c:
        nodes = [a, b, c]
        await asyncio.gather(*(node.write(partial(pg_inbound.record, platform="telegram", delivery_key=key,
                                                  now=T0 + i, user_id=f"node{i}"))
                               for key in keys for i, node in enumerate(nodes)))
        rows = await a.read(lambda conn: conn.execute(
            "SELECT delivery_key, count(*) FROM gateway_inbound_seen GROUP BY delivery_key").fetchall())
        assert sorted((r[0], r[1]) for r in rows) == sorted((key, 1) for key in keys)
        # each row is one node's whole record, never a mix of two
        whole = await a.read(lambda conn: conn.execute(
            "SELECT count(*) FROM gateway_inbound_seen WHERE user_id = 'node' || (seen_at - %s)::int",
            (T0,)).fetchone())
        assert whole is not None and whole[0] == len(keys)


async def test_a_parked_message_is_kept_until_it_is_unparked(db: Db) -> None:
    """SQLite's ``gateway_parked``: what a start takes again, oldest first (PostgreSQL's parked rows
    belong to lanes and go to their next owner: ``tests/gateway/cluster/test_pg_leases.py``)."""
    inbound = db.m.inbound
    if db.name != "sqlite":
        assert await db.read(inbound.parked) == []
        return
    ids = [await db.write(partial(inbound.park, session_key=f"k{i % 2}", platform="telegram", user_id="7",
                                  payload=f"p{i}", now=T0 + i)) for i in range(3)]
    assert [(r.id, r.session_key, r.payload, r.parked_at) for r in await db.read(inbound.parked)] == [
        (ids[0], "k0", "p0", T0), (ids[1], "k1", "p1", T0 + 1), (ids[2], "k0", "p2", T0 + 2)]
    await db.write(partial(inbound.unpark, park_id=ids[1]))
    await db.write(partial(inbound.unpark, park_id=ids[1]))  # twice: nothing more
    assert [r.payload for r in await db.read(inbound.parked)] == ["p0", "p2"]
    assert [await db.read(partial(inbound.is_parked, park_id=i)) for i in ids] == [True, False, True]
