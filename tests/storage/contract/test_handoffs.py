"""``handoffs``: handoff rows and their compare-and-set state changes, on both backends; and on
PostgreSQL, nodes racing to claim one handoff or to open one for a session: one wins."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import Any

import pytest

import storage.postgres as pg_backend
from storage import HandoffRow
from storage.postgres import PgStore

from ._routing_rows import T0, server_outside_the_loop, until_lock_waiters
from .conftest import Db

_server_first = pytest.fixture(autouse=True)(server_outside_the_loop)


def _insert(m: ModuleType, conn: Any, session_id: str, *, now: float = T0) -> int | None:
    result: int | None = m.handoffs.insert_pending(
        conn, session_id=session_id, source_key="src", source_platform="cli", source_chat_id="c",
        source_thread_id=None, target_platform="telegram", target_chat_id=None, now=now)
    return result


def _claim(m: ModuleType, conn: Any, handoff_id: int, key: str = "t") -> bool:
    result: bool = m.handoffs.set_state(conn, handoff_id, to="claimed", only_from=("pending",), error=None,
                                        now=T0 + 1, fields={"target_key": key})
    return result


async def test_a_handoff_changes_state_only_from_the_states_given(db: Db) -> None:
    h = db.m.handoffs
    hid = await db.write(partial(_insert, db.m, session_id="s1"))
    assert hid is not None and hid > 0
    assert await db.write(partial(_insert, db.m, session_id="s1")) is None  # one live handoff per session
    assert await db.read(partial(h.get, handoff_id=hid)) == HandoffRow(
        hid, "s1", "src", "cli", "telegram", "pending", None, None, None, None)
    assert await db.write(partial(_claim, db.m, handoff_id=hid))
    assert not await db.write(partial(_claim, db.m, handoff_id=hid))  # claimed once
    assert not await db.write(partial(h.set_state, handoff_id=hid, to="failed", only_from=("pending",),
                                      error="late", now=T0 + 2))
    assert await db.read(partial(h.get, handoff_id=hid)) == HandoffRow(
        hid, "s1", "src", "cli", "telegram", "claimed", None, None, None, "t")
    assert await db.write(partial(_insert, db.m, session_id="s1")) is None  # claimed is live too
    other = await db.write(partial(_insert, db.m, session_id="s2"))
    assert other is not None and other != hid
    assert await db.write(partial(h.set_state_of_all, to="failed", only_from=("pending", "claimed"),
                                  error="restarted", now=T0 + 3)) == 2
    row = await db.read(partial(h.get, handoff_id=other))
    assert row is not None and (row.state, row.error) == ("failed", "restarted")
    assert await db.read(partial(h.get, handoff_id=999)) is None
    assert not await db.write(partial(h.set_state, handoff_id=999, to="failed", only_from=("pending",),
                                      error=None, now=T0))


async def test_a_session_may_hand_off_again_once_its_handoff_ended(db: Db) -> None:
    h = db.m.handoffs
    first = await db.write(partial(_insert, db.m, session_id="s1"))
    assert first is not None
    assert await db.write(partial(h.set_state, handoff_id=first, to="claimed", only_from=("pending",), error=None,
                                  now=T0 + 1, fields={"target_chat_id": "42", "target_thread_id": "7",
                                                      "target_key": "agent:main:telegram:dm:42"}))
    assert await db.write(partial(h.set_state, handoff_id=first, to="completed", only_from=("claimed",),
                                  error=None, now=T0 + 2))
    row = await db.read(partial(h.get, handoff_id=first))
    assert row == HandoffRow(first, "s1", "src", "cli", "telegram", "completed", None, "42", "7",
                             "agent:main:telegram:dm:42")  # fields not given keep their values
    second = await db.write(partial(_insert, db.m, session_id="s1", now=T0 + 3))
    assert second is not None and second != first
    assert await db.write(partial(h.set_state, handoff_id=second, to="failed", only_from=("pending", "claimed"),
                                  error="no home channel", now=T0 + 4, fields={"target_chat_id": None}))
    assert await db.write(partial(h.set_state_of_all, to="failed", only_from=("pending", "claimed"),
                                  error="restarted", now=T0 + 5)) == 0
    row = await db.read(partial(h.get, handoff_id=second))
    assert row is not None and (row.state, row.error, row.target_chat_id) == ("failed", "no home channel", None)
    third = await db.write(partial(_insert, db.m, session_id="s1", now=T0 + 6))
    assert third is not None


async def test_pending_rows_per_target_and_the_live_target_of_a_source_key(db: Db) -> None:
    h = db.m.handoffs
    assert await db.read(partial(h.pending_for, target_platform="telegram")) == []
    assert await db.read(partial(h.live_target, source_key="src")) is None
    first = await db.write(partial(_insert, db.m, session_id="s1"))
    second = await db.write(partial(_insert, db.m, session_id="s2"))
    assert first is not None and second is not None
    other = await db.write(lambda c: h.insert_pending(
        c, session_id="s3", source_key="elsewhere", source_platform="api-server", source_chat_id="a",
        source_thread_id=None, target_platform="discord", target_chat_id="9", now=T0))
    assert [r.id for r in await db.read(partial(h.pending_for, target_platform="telegram"))] == [first, second]
    assert [r.id for r in await db.read(partial(h.pending_for, target_platform="discord"))] == [other]
    assert await db.read(partial(h.live_target, source_key="src")) == "telegram"
    assert await db.read(partial(h.live_target, source_key="elsewhere")) == "discord"
    assert await db.write(partial(_claim, db.m, handoff_id=first))
    # claimed: no longer waiting for a claim, still live for its source
    assert [r.id for r in await db.read(partial(h.pending_for, target_platform="telegram"))] == [second]
    assert await db.write(partial(h.set_state_of_all, to="failed", only_from=("pending", "claimed"),
                                  error="x", now=T0 + 2)) == 3
    assert await db.read(partial(h.pending_for, target_platform="telegram")) == []
    assert await db.read(partial(h.live_target, source_key="src")) is None


# ------------------------------------------------------------------ several nodes (PostgreSQL)


async def test_a_handoff_row_notifies_its_news_at_commit(pg_url: str) -> None:
    """Migration 0011's trigger: an insert and every change of state wake the listeners, once
    committed; a rolled-back insert says nothing."""
    async with PgStore(pg_url) as listener, PgStore(pg_url) as store:
        notes = pg_backend.cluster.handoff_wakeups(listener)
        first = await anext(notes)
        assert first == pg_backend.cluster.HandoffNote("", 0, "")  # listening: poll now

        def rolled_back(conn: Any) -> None:
            _insert(pg_backend, conn, "gone")
            raise RuntimeError("rolled back")

        with pytest.raises(RuntimeError):
            await store.write(rolled_back)
        hid = await store.write(partial(_insert, pg_backend, session_id="s1"))
        assert hid is not None
        assert await asyncio.wait_for(anext(notes), 10) == pg_backend.cluster.HandoffNote("telegram", hid, "pending")
        assert await store.write(partial(_claim, pg_backend, handoff_id=hid))
        assert await asyncio.wait_for(anext(notes), 10) == pg_backend.cluster.HandoffNote("telegram", hid, "claimed")
        await notes.aclose()


async def _second_waits_for_first(pg_url: str, first_op: Callable[[Any], Any],
                                  second_op: Callable[[Any], Any]) -> tuple[Any, Any]:
    """Node A runs ``first_op`` and holds its transaction open until node B, running ``second_op``,
    waits for it; then A commits. The results of both."""
    done_first, release = threading.Event(), threading.Event()

    def first(conn: Any) -> Any:
        result = first_op(conn)
        done_first.set()
        if not release.wait(120):
            raise AssertionError("node B never came to wait")
        return result

    async with PgStore(pg_url) as node_a, PgStore(pg_url) as node_b:
        task_a = asyncio.create_task(node_a.write(first))
        assert await asyncio.to_thread(done_first.wait, 120)
        task_b = asyncio.create_task(node_b.write(second_op))
        await until_lock_waiters(node_b, 1)
        release.set()
        return await task_a, await task_b


async def test_two_nodes_claiming_one_handoff_at_once_one_wins(pg_url: str) -> None:
    async with PgStore(pg_url) as store:
        hid = await store.write(partial(_insert, pg_backend, session_id="s1"))
    assert hid is not None
    claim_a = partial(_claim, pg_backend, handoff_id=hid, key="node-a")
    claim_b = partial(_claim, pg_backend, handoff_id=hid, key="node-b")
    assert await _second_waits_for_first(pg_url, claim_a, claim_b) == (True, False)
    async with PgStore(pg_url) as store:
        row = await store.read(partial(pg_backend.handoffs.get, handoff_id=hid))
    assert row is not None and (row.state, row.target_key) == ("claimed", "node-a")


async def test_two_nodes_opening_a_handoff_for_one_session_at_once_one_gets_it(pg_url: str) -> None:
    a, b = await _second_waits_for_first(pg_url, partial(_insert, pg_backend, session_id="s1"),
                                         partial(_insert, pg_backend, session_id="s1"))
    assert a is not None and b is None


async def test_three_nodes_racing_for_many_handoffs_claim_each_once(pg_url: str) -> None:
    async with PgStore(pg_url) as a, PgStore(pg_url) as b, PgStore(pg_url) as c:
        inserted = [await a.write(partial(_insert, pg_backend, session_id=f"s{n}")) for n in range(40)]
        ids = [hid for hid in inserted if hid is not None]
        assert len(ids) == 40
        nodes = {"a": a, "b": b, "c": c}
        wins = await asyncio.gather(*(node.write(partial(_claim, pg_backend, handoff_id=hid, key=name))
                                      for hid in ids for name, node in nodes.items()))
        per_handoff = [wins[i:i + 3] for i in range(0, len(wins), 3)]
        assert all(sum(tries) == 1 for tries in per_handoff)
        for hid, tries in zip(ids, per_handoff, strict=True):
            row = await a.read(partial(pg_backend.handoffs.get, handoff_id=hid))
            assert row is not None and row.target_key == list(nodes)[tries.index(True)]
