"""Scheduled jobs and their runs (``storage.cron``) on both backends; and on PostgreSQL, several
nodes' schedulers taking due runs at once: each due run starts exactly once."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from functools import partial
from typing import Any

import pytest

from storage import CronJobRow
from storage.postgres import PgStore

from ._people import _pg_server_before_the_loop  # noqa: F401
from .conftest import Db

T0 = 1_700_000_000.0


def job(job_id: str, name: str = "daily", *, key: str = "agent:main:telegram:dm:100", user: str | None = "100",
        next_due: float | None = T0 + 60, paused: bool = False, toolsets: tuple[str, ...] | None = None,
        created_at: float = T0) -> CronJobRow:
    return CronJobRow(job_id, name, "say hi", "every 1h", "every", "origin", toolsets, "once", "telegram", "100",
                      None, user, key, "dm", paused, next_due, False, None, None, 0, created_at, created_at)


async def test_insert_get_and_all_jobs_round_trip(db: Db) -> None:
    a = job("j1", toolsets=("web", "files"), created_at=T0 + 1)
    b = job("j0", "weekly", created_at=T0 + 1)
    c = job("J2", "hourly", created_at=T0)
    for row in (a, b, c):
        assert await db.write(partial(db.m.cron.insert, job=row))
    assert await db.read(partial(db.m.cron.get, job_id="j1")) == a
    assert await db.read(partial(db.m.cron.get, job_id="nope")) is None
    # By creation time, then id (binary order: upper case first).
    assert [j.id for j in await db.read(db.m.cron.all_jobs)] == ["J2", "j0", "j1"]


async def test_a_second_job_of_the_same_name_for_one_owner_is_refused_and_the_transaction_goes_on(db: Db) -> None:
    assert await db.write(partial(db.m.cron.insert, job=job("j1")))

    def op(conn: Any) -> tuple[bool, bool, bool]:
        same_name = db.m.cron.insert(conn, job("j2"))
        same_id = db.m.cron.insert(conn, job("j1", "other"))
        elsewhere = db.m.cron.insert(conn, job("j3", key="agent:main:telegram:dm:200", user="200"))
        return same_name, same_id, elsewhere

    assert await db.write(op) == (False, False, True)
    assert sorted(j.id for j in await db.read(db.m.cron.all_jobs)) == ["j1", "j3"]


async def test_count_owned_counts_the_chat_and_the_user_anywhere_on_the_platform(db: Db) -> None:
    await db.write(partial(db.m.cron.insert, job=job("j1")))
    await db.write(partial(db.m.cron.insert, job=job("j2", key="agent:main:telegram:group:-5", user="100")))
    await db.write(partial(db.m.cron.insert, job=job("j3", "other", key="agent:main:telegram:group:-5", user="300")))
    count = db.m.cron.count_owned
    assert await db.read(partial(count, session_key="agent:main:telegram:dm:100", platform="telegram",
                                 user_id="100")) == 2
    assert await db.read(partial(count, session_key="agent:main:telegram:group:-5", platform="telegram",
                                 user_id=None)) == 2
    assert await db.read(partial(count, session_key="x", platform="discord", user_id="100")) == 0


async def test_update_sets_fields_and_refuses_a_taken_name_without_ending_the_transaction(db: Db) -> None:
    await db.write(partial(db.m.cron.insert, job=job("j1")))
    await db.write(partial(db.m.cron.insert, job=job("j2", "weekly")))
    assert await db.write(partial(db.m.cron.update, job_id="j1", fields={"paused": True, "toolsets": ("web",),
                                                                         "prompt": "new"}, now=T0 + 5))
    got = await db.read(partial(db.m.cron.get, job_id="j1"))
    assert got is not None
    assert (got.paused, got.toolsets, got.prompt, got.updated_at) == (True, ("web",), "new", T0 + 5)
    assert not await db.write(partial(db.m.cron.update, job_id="gone", fields={"name": "x"}, now=T0))
    with pytest.raises(ValueError, match="not updatable"):
        await db.write(partial(db.m.cron.update, job_id="j1", fields={"owner_user_id": "evil"}, now=T0))

    def clash(conn: Any) -> str:
        try:
            db.m.cron.update(conn, "j2", {"name": "daily"}, now=T0)
        except sqlite3.IntegrityError:
            db.m.cron.update(conn, "j2", {"name": "monthly"}, now=T0)  # the transaction is still usable
            return "refused"
        return "taken"

    assert await db.write(clash) == "refused"
    assert sorted(j.name for j in await db.read(db.m.cron.all_jobs)) == ["daily", "monthly"]
    assert await db.write(partial(db.m.cron.delete, job_id="j2"))
    assert not await db.write(partial(db.m.cron.delete, job_id="j2"))


async def test_a_due_time_is_claimed_once_and_moves_the_job_on(db: Db) -> None:
    await db.write(partial(db.m.cron.insert, job=job("j1", next_due=T0 + 60)))
    claim = partial(db.m.cron.claim_due, job_id="j1", due=T0 + 60, next_due=T0 + 3660, missed=2, now=T0 + 61)
    run_id = await db.write(claim)
    assert run_id is not None
    assert await db.write(claim) is None  # a second wake-up for the same due time
    run = await db.read(partial(db.m.cron.get_run, run_id=run_id))
    assert run is not None
    assert (run.job_id, run.due_at, run.started_at, run.status, run.attempt, run.missed) == \
        ("j1", T0 + 60, T0 + 61, "running", 1, 2)
    got = await db.read(partial(db.m.cron.get, job_id="j1"))
    assert got is not None and (got.next_due, got.last_run_at) == (T0 + 3660, T0 + 61)
    # A paused job's due time is not claimed, nor skipped.
    await db.write(partial(db.m.cron.update, job_id="j1", fields={"paused": True}, now=T0))
    assert await db.write(partial(db.m.cron.claim_due, job_id="j1", due=T0 + 3660, next_due=None, missed=0,
                                  now=T0)) is None
    assert not await db.write(partial(db.m.cron.move_due, job_id="j1", due=T0 + 3660, next_due=T0 + 7260, now=T0))


async def test_move_due_skips_a_due_time_only_while_it_is_unclaimed(db: Db) -> None:
    await db.write(partial(db.m.cron.insert, job=job("j1", next_due=T0 + 60)))
    assert await db.write(partial(db.m.cron.move_due, job_id="j1", due=T0 + 60, next_due=T0 + 120, now=T0))
    assert not await db.write(partial(db.m.cron.move_due, job_id="j1", due=T0 + 60, next_due=T0 + 180, now=T0))
    assert await db.read(partial(db.m.cron.runs_of, job_id="j1")) == []
    got = await db.read(partial(db.m.cron.get, job_id="j1"))
    assert got is not None and got.next_due == T0 + 120


async def test_run_now_is_claimed_once(db: Db) -> None:
    await db.write(partial(db.m.cron.insert, job=job("j1")))
    assert await db.write(partial(db.m.cron.claim_requested, job_id="j1", now=T0)) is None  # nothing asked
    await db.write(partial(db.m.cron.update, job_id="j1", fields={"run_requested": True}, now=T0))
    run_id = await db.write(partial(db.m.cron.claim_requested, job_id="j1", now=T0 + 1))
    assert run_id is not None
    assert await db.write(partial(db.m.cron.claim_requested, job_id="j1", now=T0 + 2)) is None
    run = await db.read(partial(db.m.cron.get_run, run_id=run_id))
    assert run is not None and (run.due_at, run.attempt, run.missed, run.status) == (None, 1, 0, "running")
    got = await db.read(partial(db.m.cron.get, job_id="j1"))
    assert got is not None and not got.run_requested


async def test_finish_counts_failures_in_a_row_and_pauses_at_the_limit(db: Db) -> None:
    await db.write(partial(db.m.cron.insert, job=job("j1")))

    async def run_and_finish(status: str, due: float, **kw: Any) -> tuple[int, bool]:
        await db.write(partial(db.m.cron.update, job_id="j1", fields={"next_due": due}, now=T0))
        run_id = await db.write(partial(db.m.cron.claim_due, job_id="j1", due=due, next_due=due + 1, missed=0,
                                        now=due))
        assert run_id is not None
        result: tuple[int, bool] = await db.write(partial(db.m.cron.finish, run_id=run_id, status=status,
                                                          now=due + 0.5, **kw))
        return result

    assert await run_and_finish("failed", T0 + 1, error="boom", pause_after=3) == (1, False)
    assert await run_and_finish("ok", T0 + 2, ledger_id=7, pause_after=3) == (0, False)
    assert await run_and_finish("failed", T0 + 3, pause_after=2) == (1, False)
    assert await run_and_finish("failed", T0 + 4, pause_after=2) == (2, True)
    got = await db.read(partial(db.m.cron.get, job_id="j1"))
    assert got is not None and (got.paused, got.failures, got.last_status) == (True, 2, "failed")
    runs = await db.read(partial(db.m.cron.runs_of, job_id="j1"))
    assert [r.status for r in runs] == ["failed", "failed", "ok", "failed"]  # newest first
    assert (runs[2].ledger_id, runs[3].error, runs[3].finished_at) == (7, "boom", T0 + 1.5)
    assert len(await db.read(partial(db.m.cron.runs_of, job_id="j1", limit=2))) == 2
    assert await db.write(partial(db.m.cron.finish, run_id=999_999, status="ok", now=T0)) == (0, False)


async def test_interrupted_runs_are_marked_and_a_first_attempt_retried_once(db: Db) -> None:
    await db.write(partial(db.m.cron.insert, job=job("j1", next_due=T0)))
    await db.write(partial(db.m.cron.insert, job=job("j2", "other", next_due=T0)))
    first = await db.write(partial(db.m.cron.claim_due, job_id="j1", due=T0, next_due=T0 + 60, missed=1, now=T0))
    gone = await db.write(partial(db.m.cron.claim_due, job_id="j2", due=T0, next_due=None, missed=0, now=T0))
    await db.write(partial(db.m.cron.set_session, run_id=first, session_id="s-run"))
    await db.write(partial(db.m.cron.delete, job_id="j2"))

    cut = await db.write(partial(db.m.cron.interrupted_runs, now=T0 + 10))
    assert [(run.id, run.status, run.session_id) for run, _ in cut] == [(first, "running", "s-run"),
                                                                        (gone, "running", None)]
    retry = cut[0][1]
    assert retry is not None and cut[1][1] is None  # the deleted job gets no retry
    again = await db.read(partial(db.m.cron.get_run, run_id=retry))
    assert again is not None and (again.attempt, again.due_at, again.missed, again.status) == (2, T0, 1, "running")
    old = await db.read(partial(db.m.cron.get_run, run_id=first))
    assert old is not None and (old.status, old.finished_at, old.error) == ("interrupted", T0 + 10,
                                                                            "cut off by a restart")
    got = await db.read(partial(db.m.cron.get, job_id="j1"))
    assert got is not None and got.last_status == "interrupted"
    # A second crash: the retry is interrupted, not retried again.
    cut = await db.write(partial(db.m.cron.interrupted_runs, now=T0 + 20))
    assert [(run.id, r) for run, r in cut] == [(retry, None)]
    assert await db.write(partial(db.m.cron.interrupted_runs, now=T0 + 30)) == []


async def test_remember_owner_records_the_binding_once(db: Db) -> None:
    for now in (T0, T0 + 1):
        await db.write(partial(db.m.cron.remember_owner, session_key="agent:main:telegram:dm:100", session_id="s1",
                               platform="telegram", user_id="100", now=now))
    rows = await db.read(lambda c: [tuple(r) for r in c.execute(
        "SELECT session_key, session_id, platform, user_id, first_bound_at FROM gateway_session_bindings")])
    assert rows == [("agent:main:telegram:dm:100", "s1", "telegram", "100", T0)]


# --- several nodes (PostgreSQL only) ---------------------------------------------------------

JOBS = 40


async def _two_nodes(pg_url: str) -> tuple[PgStore, PgStore]:
    a, b = PgStore(pg_url, max_size=6), PgStore(pg_url, max_size=6)
    await asyncio.gather(a.open(), b.open())
    return a, b


async def test_two_nodes_taking_the_same_due_runs_at_once_start_each_exactly_once(pg_url: str) -> None:
    import storage.postgres as pg

    a, b = await _two_nodes(pg_url)
    try:
        for i in range(JOBS):
            await a.write(partial(pg.cron.insert, job=job(f"j{i:02d}", f"n{i}", next_due=T0 + i)))

        due = {j.id: j.next_due or 0.0 for j in await a.read(pg.cron.all_jobs)}

        async def scheduler(node: PgStore, tries: int) -> list[int]:
            # Each node's scheduler wakes for every due time, several times (clock jumps, restarts).
            calls = [node.write(partial(pg.cron.claim_due, job_id=job_id, due=at, next_due=at + 3600, missed=0,
                                        now=T0 + 100)) for job_id, at in due.items() for _ in range(tries)]
            return [r for r in await asyncio.gather(*calls) if r is not None]

        got_a, got_b = await asyncio.gather(scheduler(a, 3), scheduler(b, 3))
        assert len(got_a) + len(got_b) == JOBS
        assert not set(got_a) & set(got_b)
        runs = await a.read(lambda c: [tuple(r) for r in c.execute(
            "SELECT job_id, COUNT(*) FROM gateway_cron_runs GROUP BY job_id ORDER BY job_id")])
        assert runs == [(f"j{i:02d}", 1) for i in range(JOBS)]
        assert all(j.next_due == T0 + i + 3600 for i, j in enumerate(await b.read(pg.cron.all_jobs)))
    finally:
        await asyncio.gather(a.close(), b.close())


async def test_two_nodes_run_now_and_recover_interrupted_runs_once(pg_url: str) -> None:
    import storage.postgres as pg

    a, b = await _two_nodes(pg_url)
    try:
        for i in range(JOBS):
            row = replace(job(f"j{i:02d}", f"n{i}"), run_requested=True)
            await a.write(partial(pg.cron.insert, job=row))
        ids = [f"j{i:02d}" for i in range(JOBS)]
        claims = await asyncio.gather(*(node.write(partial(pg.cron.claim_requested, job_id=j, now=T0))
                                        for j in ids for node in (a, b, a, b)))
        started = [r for r in claims if r is not None]
        assert len(started) == JOBS

        # Both nodes restart at once: each cut-off run is interrupted, and retried, by one of them.
        # (A node starting after the other committed may find the other's retries 'running' and
        # interrupt them too: the rows name no node; telling a live node's runs apart is cluster work.)
        cut_a, cut_b = await asyncio.gather(a.write(partial(pg.cron.interrupted_runs, now=T0 + 5)),
                                            b.write(partial(pg.cron.interrupted_runs, now=T0 + 5)))
        firsts = [(run.id, retry) for run, retry in cut_a + cut_b if run.attempt == 1]
        assert sorted(run_id for run_id, _ in firsts) == sorted(started)
        retries = {retry for _, retry in firsts}
        assert None not in retries and len(retries) == JOBS
        attempts = await a.read(lambda c: [tuple(r) for r in c.execute(
            "SELECT attempt, COUNT(*), COUNT(DISTINCT job_id) FROM gateway_cron_runs GROUP BY attempt ORDER BY attempt")])
        assert attempts == [(1, JOBS, JOBS), (2, JOBS, JOBS)]
    finally:
        await asyncio.gather(a.close(), b.close())


async def _until_gone(store: PgStore, application_name: str) -> None:
    """Until the server has no connection of that name left (a closed pool's backends exit)."""
    def alive(conn: Any) -> bool:
        row = conn.execute("SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND application_name = %s", (application_name,)).fetchone()
        return row is not None and int(row[0]) > 0

    deadline = asyncio.get_running_loop().time() + 30
    while await store.read(alive):
        assert asyncio.get_running_loop().time() < deadline, f"{application_name} still connected"
        await asyncio.sleep(0.01)


async def test_a_starting_node_cuts_off_only_the_runs_of_nodes_that_are_gone(pg_url: str) -> None:
    """Node b restarts while node a runs jobs: b takes its own cut-off runs and /bg tasks, not a's.
    Then a goes, and node c starts: it takes a's, each once, and leaves b's retries to b."""
    import storage.postgres as pg

    def node(name: str) -> PgStore:
        return PgStore(pg_url, application_name=f"hermes-gateway/{name}")

    a, b = node("a"), node("b")
    await asyncio.gather(a.open(), b.open())
    later: list[PgStore] = []
    try:
        for i in range(5):
            await a.write(partial(pg.cron.insert, job=job(f"j{i}", f"n{i}", next_due=T0)))
        runs: dict[str, list[int]] = {"a": [], "b": []}
        for i, (name, store) in enumerate((("a", a), ("a", a), ("a", a), ("b", b), ("b", b))):
            run_id = await store.write(partial(pg.cron.claim_due, job_id=f"j{i}", due=T0, next_due=None, missed=0,
                                               now=T0))
            assert run_id is not None
            runs[name].append(run_id)
            await store.write(partial(pg.background.insert, task=pg.background.BackgroundTask(
                f"bg-{name}-{i}", "k", "telegram", "1", None, "1", None, "p", None, "running", None, None, T0 + i,
                None)))
        await b.close()
        await _until_gone(a, "hermes-gateway/b")
        b_again = node("b")
        later.append(b_again)
        await b_again.open()
        cut = await b_again.write(partial(pg.cron.interrupted_runs, now=T0 + 1))
        assert sorted(run.id for run, _ in cut) == runs["b"]
        b_retries = sorted(r for _, r in cut if r is not None)
        assert len(b_retries) == 2
        tasks = await b_again.write(partial(pg.background.interrupt_running, now=T0 + 1))
        assert [t.id for t in tasks] == ["bg-b-3", "bg-b-4"]

        await a.close()
        await _until_gone(b_again, "hermes-gateway/a")
        c = node("c")
        later.append(c)
        await c.open()
        cut = await c.write(partial(pg.cron.interrupted_runs, now=T0 + 3))
        assert sorted(run.id for run, _ in cut) == runs["a"]
        tasks = await c.write(partial(pg.background.interrupt_running, now=T0 + 3))
        assert [t.id for t in tasks] == ["bg-a-0", "bg-a-1", "bg-a-2"]
        left = await c.read(lambda conn: [int(r[0]) for r in conn.execute(
            "SELECT id FROM gateway_cron_runs WHERE status = 'running' AND node = 'hermes-gateway/b' ORDER BY id")])
        assert left == b_retries
    finally:
        for store in (a, b, *later):
            await store.close()
