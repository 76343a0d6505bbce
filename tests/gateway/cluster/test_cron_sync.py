"""Scheduled jobs on several nodes: two daemons over one real PostgreSQL database, one fake clock.

A job made, paused, resumed, asked to run or removed on the node without the ``scheduler`` role
reaches the node that holds it at once (migration 0010's NOTIFY, ``gateway.daemon.cron_sync``),
and that node's runs show in the other's ``/cron list``; a change the listener missed while the
database was away is read after it listens again."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg

from gateway.config import CronConfig
from gateway.daemon.cron_sync import CronSync
from gateway.routing.home_channels import HomeChannels
from gateway.scheduler import Jobs, JobSpec
from gateway.scheduler.clock import FakeClock
from storage.postgres import PgStore
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.cluster._nodes import until
from tests.gateway.conftest import Running, run_gateway
from tests.gateway.scheduler._helpers import OWNER, cron_texts, jobs, settle
from tests.pg.server import PgServer

HOUR = 3600.0


def _config(pg_url: str, node_id: str) -> dict[str, Any]:
    return {"storage": {"url": pg_url}, "cluster": {"node_id": node_id}, "cron": {"timezone": "Europe/Berlin"}}


def _sync(gw: Running) -> CronSync:
    cluster = gw.gateway.cluster
    assert cluster is not None and cluster.cron_sync is not None
    return cluster.cron_sync


def _schedules(gw: Running) -> bool:
    cluster = gw.gateway.cluster
    return cluster is not None and cluster.node.holds_role("scheduler")


@asynccontextmanager
async def _two_nodes(tmp_path: Path, fake_openai: FakeOpenAI, pg_url: str,
                     clock: FakeClock) -> AsyncIterator[tuple[Running, Running]]:
    """(the node holding the scheduler role, the other one), both listening."""
    async with (run_gateway(tmp_path / "a", fake_openai.base_url, config=_config(pg_url, "a"), cron_clock=clock) as a,
                run_gateway(tmp_path / "b", fake_openai.base_url, config=_config(pg_url, "b"), cron_clock=clock) as b):
        await until(lambda: _schedules(a) != _schedules(b), "one node holds the scheduler role")
        await until(lambda: _sync(a).reloads >= 1 and _sync(b).reloads >= 1, "both nodes listen")
        yield (a, b) if _schedules(a) else (b, a)


async def _runs(pg_url: str) -> list[tuple[str, str]]:
    async with PgStore(pg_url, min_size=1, max_size=1) as store:
        rows = await store.read(lambda c: c.execute(
            "SELECT job_id, status FROM gateway_cron_runs ORDER BY id").fetchall())
    return [(r[0], r[1]) for r in rows]


def _row_is(node: Jobs, job_id: str, **want: Any) -> bool:
    row = node.row(job_id)
    return row is not None and all(getattr(row, k) == v for k, v in want.items())


async def test_a_job_made_on_one_node_runs_on_the_scheduler_node_and_the_run_shows_on_both(
    tmp_path: Path, fake_openai: FakeOpenAI, pg_url: str,
) -> None:
    clock = FakeClock(time.time())
    async with _two_nodes(tmp_path, fake_openai, pg_url, clock) as (sched, other):
        view = await jobs(other).create(OWNER, JobSpec("inbox", "Summarise my inbox", "every 1h"))
        assert view.next_due is not None
        second_due = view.next_due + HOUR
        await until(lambda: jobs(sched).row(view.id) is not None, "the scheduler node has the new job")
        clock.advance(HOUR)
        await until(lambda: len(cron_texts(sched)) == 1, "the scheduler node ran the job at its due time")
        assert cron_texts(sched) == ["⏰ inbox\n\necho: Summarise my inbox"]
        # the other node's /cron list shows the run the scheduler node made
        await until(lambda: _row_is(jobs(other), view.id, last_status="ok", next_due=second_due),
                    "the other node sees the run")
        seen = await jobs(other).get(OWNER, view.id)
        assert seen.last_run_at == clock.now() and jobs(other).next_due() == seen
        assert (await jobs(other).list(OWNER))[0].last_status == "ok"
        # "run now" asked on the other node is run by the scheduler node, once
        await jobs(other).run_now(OWNER, "inbox")
        await until(lambda: len(cron_texts(sched)) == 2, "the scheduler node ran it when asked")
        await until(lambda: _row_is(jobs(other), view.id, run_requested=False), "the request is seen done")
        await settle()
        assert cron_texts(other) == [] and len(cron_texts(sched)) == 2
        # the other node's scheduler is not running: it heard of every change and holds none of them
        standby = other.gateway.runtime.scheduler if other.gateway.runtime is not None else None
        assert standby is not None and not standby.busy
    assert await _runs(pg_url) == [(view.id, "ok"), (view.id, "ok")]


async def test_a_pause_resume_edit_and_remove_on_one_node_reach_the_scheduler_node(
    tmp_path: Path, fake_openai: FakeOpenAI, pg_url: str,
) -> None:
    clock = FakeClock(time.time())
    async with _two_nodes(tmp_path, fake_openai, pg_url, clock) as (sched, other):
        view = await jobs(other).create(OWNER, JobSpec("ping", "Ping", "every 1h"))
        await until(lambda: jobs(sched).row(view.id) is not None, "the scheduler node has the job")
        await jobs(other).pause(OWNER, "ping")
        await until(lambda: _row_is(jobs(sched), view.id, paused=True), "the scheduler node sees the pause")
        assert jobs(sched).next_due() is None
        clock.advance(3 * HOUR)
        await settle()
        assert cron_texts(sched) == [] and await _runs(pg_url) == []

        resumed = await jobs(other).resume(OWNER, "ping")
        assert resumed.next_due == clock.now() + HOUR
        await until(lambda: _row_is(jobs(sched), view.id, paused=False, next_due=resumed.next_due),
                    "the scheduler node sees the resume")
        clock.advance(HOUR)
        await until(lambda: len(cron_texts(sched)) == 1, "the resumed job ran")

        # an edit of the schedule: the scheduler node honours the new due time, not the old one
        edited = await jobs(other).update(OWNER, "ping", schedule="every 2h")
        assert edited.next_due == clock.now() + 2 * HOUR
        await until(lambda: _row_is(jobs(sched), view.id, schedule=edited.schedule, next_due=edited.next_due),
                    "the scheduler node sees the edit")
        clock.advance(HOUR)
        await settle()
        assert len(cron_texts(sched)) == 1
        clock.advance(HOUR)
        await until(lambda: len(cron_texts(sched)) == 2, "the edited job ran at its new due time")

        await jobs(other).remove(OWNER, "ping")
        await until(lambda: jobs(sched).row(view.id) is None, "the scheduler node lets the job go")
        assert await jobs(sched).list(None) == []
        clock.advance(4 * HOUR)
        await settle()
        assert len(cron_texts(sched)) == 2 and cron_texts(other) == []
    assert await _runs(pg_url) == [(view.id, "ok"), (view.id, "ok")]


async def test_a_change_missed_while_the_database_was_away_is_read_after_the_listener_reconnects(
    tmp_path: Path, fake_openai: FakeOpenAI, pg_url: str, pg_server: PgServer,
) -> None:
    clock = FakeClock(time.time())
    database = pg_url.rsplit("/", 1)[1]
    async with _two_nodes(tmp_path, fake_openai, pg_url, clock) as (sched, other):
        view = await jobs(other).create(OWNER, JobSpec("late", "Ping", "every 1h"))
        await until(lambda: jobs(sched).row(view.id) is not None, "the scheduler node has the job")
        reloads = (_sync(sched).reloads, _sync(other).reloads)
        # A change whose notification never reaches the nodes (as one committed while their listeners
        # were away): made with the trigger off, then the server restarts under them.
        pg_server.psql("ALTER TABLE gateway_cron_jobs DISABLE TRIGGER gateway_cron_jobs_notify; "
                       f"UPDATE gateway_cron_jobs SET paused = 1, name = 'renamed' WHERE id = '{view.id}'; "
                       "ALTER TABLE gateway_cron_jobs ENABLE TRIGGER gateway_cron_jobs_notify", database=database)
        await settle()
        assert _row_is(jobs(sched), view.id, paused=False, name="late")  # nothing told them yet
        await asyncio.to_thread(pg_server.restart)
        await until(lambda: _sync(sched).reloads > reloads[0] and _sync(other).reloads > reloads[1],
                    "both listeners are back")
        for node in (sched, other):
            assert _row_is(jobs(node), view.id, paused=True, name="renamed")
        clock.advance(2 * HOUR)
        await settle()
        assert cron_texts(sched) == []
        # and the listener hears changes again
        resumed = await jobs(other).resume(OWNER, "renamed")
        await until(lambda: _row_is(jobs(sched), view.id, paused=False, next_due=resumed.next_due),
                    "the scheduler node hears of the resume after the restart")
        clock.advance(HOUR)
        await until(lambda: len(cron_texts(sched)) == 1, "the job runs again")


async def test_a_read_of_every_job_does_not_undo_a_change_taken_while_it_read(pg_url: str) -> None:
    """The scheduler's start (``load``) and a reconnect (``reload``) read every job; a change taken
    meanwhile (from the listener, or this node's own) may be newer than what that read saw, and
    stays: were it older, its own notification is read again after it."""
    async with PgStore(pg_url, min_size=1, max_size=4) as store:
        node = Jobs(store, CronConfig(), adapters={}, home_channels=HomeChannels(store))
        made = await node.create(OWNER, JobSpec("kept", "Ping", "every 1h", deliver="none"))
        for read_all in (node.load, node.reload):
            async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as locker:
                async with locker.transaction():
                    await locker.execute("LOCK TABLE gateway_cron_jobs IN ACCESS EXCLUSIVE MODE")
                    reading = asyncio.create_task(read_all())
                    await until(lambda: node.row(made.id) is not None, "the job is there")

                    async def blocked() -> bool:
                        waiting = await store.read(lambda c: c.execute(
                            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                            "AND wait_event_type = 'Lock'").fetchall())
                        return bool(waiting)

                    async with asyncio.timeout(60):
                        while not await blocked():
                            await asyncio.sleep(0.05)
                    row = node.row(made.id)
                    assert row is not None
                    node.refresh(dataclasses.replace(row, paused=not row.paused))
                    taken = node.row(made.id)
                await reading
            assert node.row(made.id) == taken  # not the older row the read returned
