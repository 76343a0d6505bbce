"""The group-commit writer against a real state.db: batching, isolation,
checkpoints, stop semantics, and read-only readers. No mocks.

Batches are made deterministic with a *stall*: an op that parks the writer
thread while the test queues work, so everything queued lands in one batch.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from storage import (
    StateStore,
    StorageClosedError,
    StorageError,
    TitleConflictError,
    WriterSettings,
)

from ._support import WAIT, Stall, integrity_check, plain_db, queued, stalled, wait_until, wal_size

FAST = WriterSettings(synchronous="NORMAL")


@pytest.fixture
def db_path(db_path: Path) -> Path:
    """conftest's path in a home that already exists (see test_durability for why)."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    return db_path


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[StateStore]:
    async with StateStore(db_path, writer_settings=FAST) as st:
        await st.create_session("s", "telegram")
        yield st


def stored_contents(db: Path, session_id: str) -> dict[int, str]:
    with plain_db(db) as conn:
        return dict(conn.execute("SELECT id, content FROM messages WHERE session_id = ?", (session_id,)).fetchall())


# --------------------------------------------------------------------------------------
# 7. Group commit and isolation
# --------------------------------------------------------------------------------------


async def test_concurrent_appends_share_commits(store: StateStore, db_path: Path) -> None:
    w = store.writer
    n = 100
    commits = w.stats.commits
    ids = await asyncio.wait_for(
        asyncio.gather(*(store.append_message("s", "user", f"m{i}") for i in range(n))), WAIT
    )
    assert w.stats.commits - commits < n, "concurrent appends were not grouped"
    assert len(set(ids)) == n, "each caller must get its own row id"
    assert stored_contents(db_path, "s") == {rid: f"m{i}" for i, rid in enumerate(ids)}


async def test_one_batch_one_commit(store: StateStore, db_path: Path) -> None:
    w = store.writer
    n = 40
    async with stalled(w) as stall:
        commits, before = w.stats.commits, w.stats.submitted
        tasks = [asyncio.create_task(store.append_message("s", "user", f"b{i}")) for i in range(n)]
        await queued(w, before, n)
        await stall.let_go()
        ids = await asyncio.wait_for(asyncio.gather(*tasks), WAIT)
    assert w.stats.commits - commits == 1
    assert n in w.stats.recent_batch_sizes
    assert ids == sorted(ids) and len(set(ids)) == n  # queue order is commit order
    assert stored_contents(db_path, "s") == {rid: f"b{i}" for i, rid in enumerate(ids)}


async def test_failing_op_fails_only_its_caller(store: StateStore, db_path: Path) -> None:
    w = store.writer
    await store.create_session("titled", "telegram")
    await store.create_session("other", "telegram")
    await store.set_session_title("titled", "Taken")
    replays, failed = w.stats.replays, w.stats.failed_ops

    async with stalled(w) as stall:
        before = w.stats.submitted
        good_a = [asyncio.create_task(store.append_message("s", "user", f"a{i}")) for i in range(5)]
        ghost = asyncio.create_task(store.append_message("no-such-session", "user", "lost?"))
        conflict = asyncio.create_task(store.set_session_title("other", "Taken"))
        bad_usage = asyncio.create_task(store.record_usage("s", no_such_counter=1))
        good_b = [asyncio.create_task(store.append_message("s", "assistant", f"b{i}")) for i in range(5)]
        await queued(w, before, 13)
        await stall.let_go()
        ids_a = await asyncio.wait_for(asyncio.gather(*good_a), WAIT)
        ids_b = await asyncio.wait_for(asyncio.gather(*good_b), WAIT)
        with pytest.raises(StorageError):
            await asyncio.wait_for(ghost, WAIT)
        with pytest.raises(TitleConflictError) as excinfo:
            await asyncio.wait_for(conflict, WAIT)
        with pytest.raises(ValueError, match="no_such_counter"):
            await asyncio.wait_for(bad_usage, WAIT)

    assert excinfo.value.other_session_id == "titled"
    assert excinfo.value.suggestion == "Taken #2"
    assert w.stats.replays == replays + 1
    assert w.stats.failed_ops == failed + 3
    assert w.running

    expected = {rid: f"a{i}" for i, rid in enumerate(ids_a)} | {rid: f"b{i}" for i, rid in enumerate(ids_b)}
    assert stored_contents(db_path, "s") == expected
    with plain_db(db_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM messages WHERE session_id = 'no-such-session'").fetchone()[0] == 0
        assert conn.execute("SELECT title FROM sessions WHERE id = 'other'").fetchone()[0] is None
        # The rolled-back first attempt left no trace: counters match the rows exactly once.
        count = conn.execute("SELECT message_count FROM sessions WHERE id = 's'").fetchone()[0]
    assert count == len(expected)


async def test_an_op_that_breaks_the_writer_answers_every_caller_and_stops_it(db_path: Path) -> None:
    """An op that closes the write connection leaves the writer unable to roll back: a bug, not
    a failed write. Every caller in that batch still gets an error (none waits forever), and
    the writer stops and refuses further work instead of pretending to run."""
    store = StateStore(db_path, writer_settings=FAST)
    await store.open()
    await store.create_session("s", "telegram")
    w = store.writer
    async with stalled(w) as stall:
        before = w.stats.submitted
        innocent = asyncio.create_task(store.append_message("s", "user", "queued with it"))
        breaker = asyncio.create_task(store.write(lambda conn: conn.close()))
        await queued(w, before, 2)
        await stall.let_go()
        for task in (innocent, breaker):
            with pytest.raises(StorageError, match="the storage writer failed"):
                await asyncio.wait_for(task, WAIT)
    await wait_until(lambda: not w.running, "the writer to stop")
    with pytest.raises(StorageClosedError):
        await asyncio.wait_for(store.append_message("s", "user", "after"), WAIT)
    with pytest.raises(Exception, match="closed database"):  # the writer's own failure, at close
        await asyncio.wait_for(store.close(), WAIT)


# --------------------------------------------------------------------------------------
# 8. Checkpoints
# --------------------------------------------------------------------------------------


async def test_passive_every_n_commits_and_truncate_on_close(db_path: Path) -> None:
    settings = WriterSettings(
        synchronous="NORMAL", checkpoint_every_commits=5, checkpoint_every_seconds=3600, idle_truncate_after=3600
    )
    async with StateStore(db_path, writer_settings=settings) as store:
        w = store.writer
        await store.create_session("s", "cli")
        for i in range(12):
            await store.append_message("s", "user", f"m{i}")  # one commit each
        assert w.stats.commits == 13
        assert w.stats.checkpoints["PASSIVE"] == w.stats.commits // 5
        assert w.stats.checkpoints["TRUNCATE"] == 0
        assert wal_size(db_path) > 0, "PASSIVE must not truncate the WAL"
    assert w.stats.checkpoints["TRUNCATE"] == 1
    last = w.stats.last_checkpoint
    assert last is not None and last.mode == "TRUNCATE" and last.busy == 0
    assert wal_size(db_path) == 0
    assert integrity_check(db_path) == "ok"


async def test_idle_truncates_the_wal(db_path: Path) -> None:
    settings = WriterSettings(synchronous="NORMAL", idle_truncate_after=0.1)
    async with StateStore(db_path, writer_settings=settings) as store:
        w = store.writer
        await store.create_session("s", "cli")
        await store.get_messages("s")  # a reader connection exists too (and is idle)
        parked = Stall()
        async with stalled(w) as stall:
            before = w.stats.submitted
            burst = [asyncio.create_task(store.append_message("s", "user", "x" * 2000)) for _ in range(200)]
            # Queued behind the burst: parks the writer thread right after the burst's COMMIT,
            # so no checkpoint can run while we look at the WAL.
            engaged = asyncio.create_task(parked.engage(w))
            await queued(w, before, 201)
            await stall.let_go()
            await asyncio.wait_for(engaged, WAIT)
        try:
            assert wal_size(db_path) > 0, "the burst should be sitting in the WAL"
            truncates = w.stats.checkpoints["TRUNCATE"]
        finally:
            await parked.let_go()
        ids = await asyncio.wait_for(asyncio.gather(*burst), WAIT)

        await wait_until(lambda: w.stats.checkpoints["TRUNCATE"] > truncates and wal_size(db_path) == 0,
                         "the idle TRUNCATE checkpoint to empty the WAL")
        last = w.stats.last_checkpoint
        assert last is not None and last.mode == "TRUNCATE" and last.busy == 0

        # Writing after the truncation works and is visible.
        rid = await store.append_message("s", "user", "after idle")
        assert (await store.get_messages("s"))[-1]["id"] == rid
    assert len(stored_contents(db_path, "s")) == len(ids) + 1
    assert wal_size(db_path) == 0
    assert integrity_check(db_path) == "ok"


# --------------------------------------------------------------------------------------
# 9. Stop semantics
# --------------------------------------------------------------------------------------


async def test_queued_writes_commit_before_close(db_path: Path) -> None:
    store = StateStore(db_path, writer_settings=FAST)
    await store.open()
    closer: asyncio.Task[None] | None = None
    try:
        await store.create_session("s", "cli")
        w = store.writer
        async with stalled(w) as stall:
            before = w.stats.submitted
            tasks = [asyncio.create_task(store.append_message("s", "user", f"q{i}")) for i in range(30)]
            await queued(w, before, 30)
            w.request_stop()
            closer = asyncio.create_task(store.close())
            with pytest.raises(StorageClosedError):
                await store.append_message("s", "user", "too late (closing)")
            await stall.let_go()
            ids = await asyncio.wait_for(asyncio.gather(*tasks), WAIT)
        await asyncio.wait_for(closer, WAIT)
        assert not w.running
        with pytest.raises(StorageClosedError):
            await w.submit(lambda c: c.execute("SELECT 1").fetchone())
    finally:
        if closer is None:
            await store.close()
    assert stored_contents(db_path, "s") == {rid: f"q{i}" for i, rid in enumerate(ids)}


async def test_cancelled_caller_while_queued_write_stands(store: StateStore, db_path: Path) -> None:
    w = store.writer
    async with stalled(w) as stall:
        before = w.stats.submitted
        task = asyncio.create_task(store.append_message("s", "user", "cancelled while queued"))
        await queued(w, before, 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await stall.let_go()
    after = await store.append_message("s", "user", "after")  # FIFO: the cancelled one ran first
    contents = stored_contents(db_path, "s")
    assert sorted(contents.values()) == ["after", "cancelled while queued"]
    assert max(contents) == after
    assert w.running


async def test_cancelled_caller_while_in_flight_write_stands(store: StateStore, db_path: Path) -> None:
    w = store.writer
    inside = threading.Event()
    proceed = threading.Event()

    def blocker(conn: object) -> str:  # a transactional op that holds the batch open
        inside.set()
        if not proceed.wait(WAIT):
            raise TimeoutError("never released")
        return "done"

    async with stalled(w) as stall:
        before = w.stats.submitted
        holder = asyncio.create_task(w.submit(blocker))
        task = asyncio.create_task(store.append_message("s", "user", "cancelled in flight"))
        await queued(w, before, 2)
        await stall.let_go()
    try:
        assert await asyncio.to_thread(inside.wait, WAIT), "the batch never started"
        task.cancel()  # the batch [blocker, append] is executing on the writer thread right now
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        proceed.set()
    assert await asyncio.wait_for(holder, WAIT) == "done"
    assert list(stored_contents(db_path, "s").values()) == ["cancelled in flight"]


# --------------------------------------------------------------------------------------
# 10. Readers are read-only
# --------------------------------------------------------------------------------------


async def test_reader_connections_cannot_write(store: StateStore, db_path: Path) -> None:
    with pytest.raises(StorageError) as excinfo:
        await store.reader.run(lambda c: c.execute("INSERT INTO state_meta (key, value) VALUES ('k', 'v')"))
    assert "readonly" in str(excinfo.value).lower()
    with pytest.raises(StorageError):
        await store.reader.run(lambda c: c.execute("UPDATE sessions SET title = 'x' WHERE id = 's'"))
    assert await store.get_meta("k") is None
    session = await store.get_session("s")
    assert session is not None and session["title"] is None
