"""Scheduled jobs on three real daemon processes over one real PostgreSQL server: a job added
through one node's control socket is run by the node holding the ``scheduler`` role, each due
time once, each run's answer reaches the Telegram chat once (through the polling node when the
scheduler's node does not poll), every node's ``cron list`` shows its runs, and a pause or remove
made on yet another node reaches the scheduler's node at once (README, "Running several nodes")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from gateway.control.client import call
from storage.postgres import PgStore
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from .._telegram_process import telegram_daemon, until
from ._cluster import NODES, RECOVERED, answers, wait_cluster

CRON = {"timezone": "UTC", "min_interval": 1}


def _schedulers(view: dict[str, Any]) -> list[str]:
    return [n["node_id"] for n in view["nodes"] if n["alive"] and "scheduler" in n["roles"]]


async def _eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    done = False

    async def loop() -> None:
        nonlocal done
        while not await check():
            await asyncio.sleep(0.2)
        done = True

    task = asyncio.create_task(loop())
    try:
        await until(lambda: done or task.done(), what)
        task.result()
    finally:
        task.cancel()


async def _runs(pg_url: str) -> list[tuple[str, str, str, float | None, float]]:
    """(job, status, node, due time, start) of every run, oldest first."""
    async with PgStore(pg_url, min_size=1, max_size=1) as store:
        rows = await store.read(lambda c: c.execute(
            "SELECT job_id, status, node, due_at, started_at FROM gateway_cron_runs ORDER BY id").fetchall())
    return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]


async def _listed(home: Path) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = (await call(home, "cron.list", reply_within=5))["jobs"]
    return jobs


async def test_a_job_added_on_one_node_runs_once_per_due_time_on_the_scheduler_node_and_follows_changes(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str
) -> None:
    uid = fake_telegram.user["id"]
    async with AsyncExitStack() as stack:
        for node in NODES:
            await stack.enter_async_context(telegram_daemon(
                tmp_path / node, fake_telegram, fake_openai,
                storage={"url": pg_url}, cluster={"node_id": node, "failover_s": 3}, cron=CRON))
        view = await wait_cluster(tmp_path / "n1", "three live nodes, one scheduler", lambda v: (
            sorted(n["node_id"] for n in v["nodes"] if n["alive"]) == list(NODES) and len(_schedulers(v)) == 1))
        sched = _schedulers(view)[0]
        adder, changer = (n for n in NODES if n != sched)

        added = (await call(tmp_path / adder, "cron.add", {"name": "tick", "schedule": "every 2s",
                                                           "prompt": "Tick",
                                                           "deliver": f"telegram:{uid}"}))["job"]

        async def ran_twice() -> bool:
            return sum(1 for r in await _runs(pg_url) if r[1] == "ok") >= 2

        await _eventually(ran_twice, "the scheduler node to run the job added elsewhere, twice")
        runs = await _runs(pg_url)
        assert {r[0] for r in runs} == {added["id"]}
        assert {r[2] for r in runs} == {f"hermes-gateway/{sched}"}  # run by the scheduler role's holder only
        dues = [r[3] for r in runs]
        assert len(set(dues)) == len(dues)  # each due time once

        async def every_node_shows_a_run() -> bool:
            for node in NODES:
                jobs = await _listed(tmp_path / node)
                if len(jobs) != 1 or jobs[0]["last_status"] != "ok" or jobs[0]["last_run_at"] is None:
                    return False
            return True

        await _eventually(every_node_shows_a_run, "every node's cron list to show the runs")

        await call(tmp_path / changer, "cron.pause", {"ref": "tick"})
        paused_at = time.time()

        async def every_node_shows_paused() -> bool:
            return [[j["paused"] for j in await _listed(tmp_path / n)] for n in NODES] == [[True]] * len(NODES)

        await _eventually(every_node_shows_paused, "every node to see the pause")
        await asyncio.sleep(6)  # three due times of the job, had it not been paused
        after = await _runs(pg_url)
        assert [r for r in after if r[4] > paused_at] == []  # the scheduler node started nothing after it
        assert all(r[1] == "ok" for r in after)

        await call(tmp_path / adder, "cron.remove", {"ref": "tick"})

        async def every_node_lets_it_go() -> bool:
            return [await _listed(tmp_path / n) for n in NODES] == [[]] * len(NODES)

        await _eventually(every_node_lets_it_go, "every node to let the removed job go")
        assert len(await _runs(pg_url)) == len(after)

        async def every_answer_out() -> bool:  # the last may still be on its way from the scheduler's node
            return len(answers(fake_telegram, uid)) >= len(after)

        await _eventually(every_answer_out, "each run's answer in the chat")
        assert answers(fake_telegram, uid) == ["⏰ tick\n\necho: Tick"] * len(after)  # once each, unprefixed
        assert not any(a.startswith(RECOVERED) for a in answers(fake_telegram, uid))
