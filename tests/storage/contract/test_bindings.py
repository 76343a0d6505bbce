"""``bindings``: the routing index, the binding history and queued titles, on both backends; and
on PostgreSQL, two nodes resolving one chat key at once bind one session, not two."""

from __future__ import annotations

import asyncio
import threading
from functools import partial
from types import ModuleType
from typing import Any

import pytest

import storage.postgres as pg_backend
from storage import IndexEntry
from storage.postgres import PgStore

from ._routing_rows import T0, add_message, add_session, lock_waiters, server_outside_the_loop, sql
from .conftest import Db

_server_first = pytest.fixture(autouse=True)(server_outside_the_loop)


def _bind(m: ModuleType, conn: Any, key: str, session_id: str, now: float, *, chat_id: str = "c1",
          user_id: str | None = "u1") -> None:
    m.bindings.bind(conn, key, session_id, platform="telegram", chat_id=chat_id, chat_type="dm", thread_id=None,
                    user_id=user_id, now=now)


async def test_a_key_points_at_a_session_and_every_binding_is_remembered(db: Db) -> None:
    b = db.m.bindings
    await add_session(db, "s1")
    await add_message(db, "s1", "user", "hi", timestamp=T0 + 50)
    assert await db.read(partial(b.lookup, key="k")) is None
    assert await db.read(partial(b.bound_session, key="k")) is None
    await db.write(partial(_bind, db.m, key="k", session_id="s1", now=T0 + 10))
    assert await db.read(partial(b.lookup, key="k")) == IndexEntry("s1", T0 + 10, True, None, T0 + 50)
    await db.write(partial(_bind, db.m, key="k", session_id="gone", now=T0 + 20))  # a session that does not exist
    assert await db.read(partial(b.lookup, key="k")) == IndexEntry("gone", T0 + 20, False, None, None)
    assert await db.read(partial(b.bound_session, key="k")) == ("gone", T0 + 20)
    assert await db.read(partial(b.was_bound, key="k", session_id="s1"))
    # compare-and-set: only while the key still points where the caller thinks
    assert not await db.write(partial(b.repoint, key="k", from_session="s1", to_session="s1", updated_at=T0 + 10))
    assert await db.write(partial(b.repoint, key="k", from_session="gone", to_session="s1", updated_at=T0 + 10))
    assert await db.read(partial(b.bound_session, key="k")) == ("s1", T0 + 10)
    assert not await db.write(partial(b.unbind, key="k", session_id="gone"))
    assert await db.write(partial(b.unbind, key="k", session_id="s1"))
    assert await db.read(partial(b.lookup, key="k")) is None
    assert await db.read(partial(b.was_bound, key="k", session_id="s1"))  # unbinding keeps the history
    await db.write(partial(b.forget_binding, key="k", session_id="s1"))
    assert not await db.read(partial(b.was_bound, key="k", session_id="s1"))
    assert await db.read(partial(b.was_bound, key="k", session_id="gone"))


async def test_a_key_keeps_the_chat_it_was_created_with_and_its_first_binding_time(db: Db) -> None:
    await db.write(partial(_bind, db.m, key="k", session_id="s1", now=T0, chat_id="first"))
    await db.write(partial(_bind, db.m, key="k", session_id="s2", now=T0 + 5, chat_id="second", user_id="u2"))
    await db.write(partial(_bind, db.m, key="k", session_id="s1", now=T0 + 9, chat_id="third"))
    index = await db.read(lambda c: sql(db, c, "SELECT session_id, chat_id, user_id, created_at, updated_at "
                                               "FROM gateway_session_index").fetchall())
    assert [tuple(r) for r in index] == [("s1", "first", "u1", T0, T0 + 9)]
    history = await db.read(lambda c: sql(db, c, "SELECT session_id, user_id, first_bound_at "
                                                 "FROM gateway_session_bindings ORDER BY session_id").fetchall())
    assert [tuple(r) for r in history] == [("s1", "u1", T0), ("s2", "u2", T0 + 5)]


async def test_an_entry_tells_its_sessions_state_and_the_sweep_sees_live_ones(db: Db) -> None:
    b = db.m.bindings
    await add_session(db, "live", started_at=T0)
    await add_session(db, "quiet", started_at=T0)
    await add_session(db, "ended", started_at=T0, ended_at=T0 + 7)
    await add_message(db, "live", "user", "one", timestamp=T0 + 1)
    await add_message(db, "live", "assistant", "two", timestamp=T0 + 3)
    await add_message(db, "ended", "user", "x", timestamp=T0 + 2)
    for key, sid in (("k-live", "live"), ("k-quiet", "quiet"), ("k-ended", "ended"), ("k-gone", "gone")):
        await db.write(partial(_bind, db.m, key=key, session_id=sid, now=T0))
    assert await db.read(partial(b.lookup, key="k-ended")) == IndexEntry("ended", T0, True, T0 + 7, T0 + 2)
    live = sorted(await db.read(b.live_entries))
    assert live == [("k-live", IndexEntry("live", T0, True, None, T0 + 3)),
                    ("k-quiet", IndexEntry("quiet", T0, True, None, None))]


async def test_queued_titles_expire_and_are_replaced(db: Db) -> None:
    b = db.m.bindings
    await db.write(partial(b.queue_title, key="k", title="first", now=T0))
    await db.write(partial(b.queue_title, key="k", title="second", now=T0 + 5))
    await db.write(partial(b.queue_title, key="old", title="stale", now=T0 - 100))
    assert await db.read(partial(b.pending_title, key="k", queued_since=T0)) == "second"
    assert await db.read(partial(b.pending_title, key="k", queued_since=T0 + 5)) == "second"
    assert await db.read(partial(b.pending_title, key="k", queued_since=T0 + 6)) is None
    await db.write(partial(b.sweep_pending_titles, queued_before=T0))
    assert await db.read(partial(b.pending_title, key="old", queued_since=0.0)) is None
    assert await db.read(partial(b.pending_title, key="k", queued_since=0.0)) == "second"
    await db.write(partial(b.forget_pending_title, key="k"))
    assert await db.read(partial(b.pending_title, key="k", queued_since=0.0)) is None


# ------------------------------------------------------------------ several nodes (PostgreSQL)


def _resolve(conn: Any, key: str, session_id: str, now: float) -> str:
    """What the gateway's resolve does in its write: read the key again, bind a new session if none."""
    entry = pg_backend.bindings.lookup(conn, key)
    if entry is not None:
        return entry.session_id
    _bind(pg_backend, conn, key, session_id, now)
    return session_id


async def test_two_nodes_resolving_one_key_at_once_bind_one_session(pg_url: str) -> None:
    """Node A has read "no entry" in its write and not yet bound; node B resolves the same key
    meanwhile. B must wait for A and then find A's session, not bind a second one; a read of the
    key meanwhile must not wait."""
    a_read, release = threading.Event(), threading.Event()

    def first(conn: Any) -> str:
        assert pg_backend.bindings.lookup(conn, "agent:main:telegram:dm:42") is None
        a_read.set()
        if not release.wait(120):
            raise AssertionError("never released")
        _bind(pg_backend, conn, "agent:main:telegram:dm:42", "s-a", T0)
        return "s-a"

    async with PgStore(pg_url) as node_a, PgStore(pg_url) as node_b:
        task_a = asyncio.create_task(node_a.write(first))
        assert await asyncio.to_thread(a_read.wait, 120)
        # a read never waits for a write's lock
        assert await node_b.read(partial(pg_backend.bindings.lookup, key="agent:main:telegram:dm:42")) is None
        task_b = asyncio.create_task(node_b.write(partial(_resolve, key="agent:main:telegram:dm:42",
                                                          session_id="s-b", now=T0 + 1)))
        while not task_b.done() and await lock_waiters(node_b) < 1:
            await asyncio.sleep(0.005)
        release.set()
        assert await task_a == "s-a"
        assert await task_b == "s-a"
        assert await node_b.read(partial(pg_backend.bindings.bound_session, key="agent:main:telegram:dm:42")) == (
            "s-a", T0)
        assert not await node_b.read(partial(pg_backend.bindings.was_bound, key="agent:main:telegram:dm:42",
                                             session_id="s-b"))


async def test_other_keys_do_not_wait_for_a_key_being_resolved(pg_url: str) -> None:
    a_read, release = threading.Event(), threading.Event()

    def first(conn: Any) -> None:
        pg_backend.bindings.lookup(conn, "k1")
        a_read.set()
        if not release.wait(120):
            raise AssertionError("never released")

    async with PgStore(pg_url) as node_a, PgStore(pg_url) as node_b:
        task_a = asyncio.create_task(node_a.write(first))
        try:
            assert await asyncio.to_thread(a_read.wait, 120)
            # completes while node A still holds k1
            assert await node_b.write(partial(_resolve, key="k2", session_id="s2", now=T0)) == "s2"
        finally:
            release.set()
            await task_a
