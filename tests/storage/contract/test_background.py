"""/bg tasks (``storage.background``) on both backends: a task settles once, a crash's
leftovers are interrupted once."""

from __future__ import annotations

import asyncio
from functools import partial

from storage.postgres import PgStore

from ._people import _pg_server_before_the_loop  # noqa: F401
from .conftest import Db

T0 = 1_700_000_000.0


def task(db: Db, task_id: str, *, created_at: float = T0, thread: str | None = None) -> object:
    return db.m.background.BackgroundTask(task_id, "agent:main:telegram:dm:100", "telegram", "100", thread, "100",
                                          "42", "look this up", None, "running", None, None, created_at, None)


async def test_insert_get_and_set_session(db: Db) -> None:
    row = task(db, "bg1", thread="7")
    await db.write(partial(db.m.background.insert, task=row))
    assert await db.read(partial(db.m.background.get, task_id="bg1")) == row
    assert await db.read(partial(db.m.background.get, task_id="nope")) is None
    await db.write(partial(db.m.background.set_session, task_id="bg1", session_id="s-bg"))
    got = await db.read(partial(db.m.background.get, task_id="bg1"))
    assert got is not None and got.session_id == "s-bg"


async def test_a_task_settles_once_and_keeps_its_ledger_row(db: Db) -> None:
    await db.write(partial(db.m.background.insert, task=task(db, "bg1")))
    assert await db.write(partial(db.m.background.finish, task_id="bg1", status="done", now=T0 + 5, ledger_id=9))
    # /stop came second: the answer stands.
    assert not await db.write(partial(db.m.background.finish, task_id="bg1", status="stopped", now=T0 + 6,
                                      error="stopped with /stop"))
    got = await db.read(partial(db.m.background.get, task_id="bg1"))
    assert got is not None
    assert (got.status, got.finished_at, got.ledger_id, got.error) == ("done", T0 + 5, 9, None)
    assert not await db.write(partial(db.m.background.finish, task_id="nope", status="done", now=T0))
    # A failure without a ledger row of its own keeps whatever the row had.
    await db.write(partial(db.m.background.insert, task=task(db, "bg2")))
    assert await db.write(partial(db.m.background.finish, task_id="bg2", status="failed", now=T0 + 1, error="x"))
    got = await db.read(partial(db.m.background.get, task_id="bg2"))
    assert got is not None and (got.status, got.ledger_id, got.error) == ("failed", None, "x")


async def test_interrupt_running_reports_the_cut_off_tasks_as_they_were(db: Db) -> None:
    for i, tid in enumerate(("bg-b", "bg-a", "bg-c")):
        await db.write(partial(db.m.background.insert, task=task(db, tid, created_at=T0 + i)))
    await db.write(partial(db.m.background.finish, task_id="bg-c", status="done", now=T0 + 9))
    cut = await db.write(partial(db.m.background.interrupt_running, now=T0 + 10))
    assert [(t.id, t.status, t.finished_at) for t in cut] == [("bg-b", "running", None), ("bg-a", "running", None)]
    for tid in ("bg-a", "bg-b"):
        got = await db.read(partial(db.m.background.get, task_id=tid))
        assert got is not None
        assert (got.status, got.finished_at, got.error) == ("interrupted", T0 + 10, "cut off by a restart")
    done = await db.read(partial(db.m.background.get, task_id="bg-c"))
    assert done is not None and done.status == "done"
    assert await db.write(partial(db.m.background.interrupt_running, now=T0 + 11)) == []


async def test_two_nodes_settling_and_recovering_at_once_settle_each_task_once(pg_url: str) -> None:
    import storage.postgres as pg

    a, b = PgStore(pg_url, max_size=4), PgStore(pg_url, max_size=4)
    await asyncio.gather(a.open(), b.open())
    try:
        ids = [f"bg{i:02d}" for i in range(30)]
        for tid in ids:
            await a.write(partial(pg.background.insert, task=pg.background.BackgroundTask(
                tid, "k", "telegram", "1", None, "1", None, "p", None, "running", None, None, T0, None)))
        # Half answered on one node while the other stops them.
        settled = await asyncio.gather(*(node.write(partial(pg.background.finish, task_id=tid, status=status, now=T0))
                                         for tid in ids[:15] for node, status in ((a, "done"), (b, "stopped"))))
        assert settled.count(True) == 15
        cut_a, cut_b = await asyncio.gather(a.write(partial(pg.background.interrupt_running, now=T0)),
                                            b.write(partial(pg.background.interrupt_running, now=T0)))
        assert sorted(t.id for t in cut_a + cut_b) == ids[15:]
    finally:
        await asyncio.gather(a.close(), b.close())
