"""The one task that runs jobs when they fall due.

It sleeps until the earliest due time of a heap (no polling of the jobs), woken early by any
change of a job (``Jobs.watch``) or the end of a run. On each wake it looks at the clock
again, so a clock set forward runs what fell due and a clock set back waits; a due time is
claimed in the transaction that starts its run (``storage.cron.claim_due``), so no wake-up,
clock jump or restart runs one due time twice. A job never runs twice at once, and at most
``cron.max_concurrent`` runs go together.

Due times older than ``MISSED_AFTER`` when first seen passed while the daemon was down (or
the clock jumped): ``catch_up: once`` runs the job once for all of them, saying how many,
``skip`` moves on to the next due time. A run cut off by a crash is retried once at start-up.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import sqlite3
from collections import deque
from dataclasses import dataclass

import structlog

from gateway.routing.metrics import GatewayMetrics
from gateway.scheduler.clock import Clock
from gateway.scheduler.jobs import Jobs
from gateway.scheduler.model import JobView
from gateway.scheduler.run import RunOutcome, RunStarter
from storage import CronJobRow, Store, cron

__all__ = ["MISSED_AFTER", "Scheduler"]

log = structlog.get_logger("hermes.cron")

#: a due time this much in the past when the scheduler first sees it was missed, not merely late
MISSED_AFTER = 60.0
#: how long stopped runs get to end before the daemon goes on without them
STOP_GRACE = 5.0


@dataclass(frozen=True)
class _Start:
    job_id: str
    due: float | None  # None: "run now", or the retry of an interrupted run
    run_id: int | None = None  # the retry's run row, already written
    #: due times that passed while the daemon was down (0: on time); one run stands for them
    missed: int = 0


class Scheduler:
    def __init__(self, jobs: Jobs, runs: RunStarter, store: Store, *, clock: Clock,
                 max_concurrent: int, metrics: GatewayMetrics | None = None) -> None:
        self._jobs = jobs
        self._runs = runs
        self._store = store
        self.clock = clock
        self._max = max_concurrent
        self._metrics = metrics
        self._heap: list[tuple[float, str]] = []
        #: due (or asked for) and waiting for a free slot or for the job's own run to end
        self._ready: deque[_Start] = deque()
        self._running: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: between start and stop: a node not running the scheduler (another holds the role) keeps
        #: no heap of the changes it hears of; its start reads every job anyway
        self._active = False
        jobs.watch(self._changed)

    @property
    def running(self) -> int:
        return len(self._running)

    def next_due(self) -> JobView | None:
        return self._jobs.next_due()

    async def start(self) -> None:
        """Load the jobs, mark the runs a crash cut off (and queue their one retry), start the task."""
        now = self.clock.now()
        self._active = True
        # started again after a stop (a cluster's scheduler role, taken anew): nothing of before
        self._heap.clear()
        self._ready.clear()
        for row in await self._jobs.load():
            self._push(row)
            if row.run_requested:
                self._ready.append(_Start(row.id, None))
        for run, retry in await self._store.write(lambda c: cron.interrupted_runs(c, now=now)):
            log.warning("cron.run_interrupted", job_id=run.job_id, run_id=run.id, retry_run_id=retry)
            if self._metrics is not None:
                self._metrics.cron_runs.labels("interrupted").inc()
            if retry is not None:
                self._ready.append(_Start(run.job_id, run.due_at, retry, run.missed))
        self._task = asyncio.create_task(self._loop(), name="cron-scheduler")

    async def stop(self, drain: float = 0.0) -> None:
        """No new runs from now; the runs under way get ``drain`` seconds to end, then are
        stopped (a run stopped here is retried once at the next start)."""
        self._active = False
        if self._task is not None:
            self._task.cancel()
        running = list(self._running.values())
        if running and drain > 0:
            await asyncio.wait(running, timeout=drain)
        left = [t for t in (self._task, *running) if t is not None and not t.done()]
        for task in left:
            task.cancel()
        if left:
            # Bounded: a run that does not end when told to must not hold the daemon's exit.
            _, stuck = await asyncio.wait(left, timeout=STOP_GRACE)
            if stuck:
                log.warning("cron.runs_not_stopped", runs=len(stuck))
        self._task = None

    @property
    def busy(self) -> bool:
        """Something runs or waits for a slot (tests wait for it to settle)."""
        return bool(self._running or self._ready or self._wake.is_set())

    # ------------------------------------------------------------------ the loop

    def _changed(self, row: CronJobRow) -> None:
        if not self._active:
            return
        self._push(row)
        if row.run_requested and not any(s.job_id == row.id and s.due is None and s.run_id is None
                                         for s in self._ready):
            self._ready.append(_Start(row.id, None))
        self._wake.set()

    def _push(self, row: CronJobRow) -> None:
        if not row.paused and row.next_due is not None:
            heapq.heappush(self._heap, (row.next_due, row.id))

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self._tick()
            except Exception:
                log.exception("cron.tick_failed")  # the next wake tries again
            top = self._heap[0][0] if self._heap else math.inf
            await self.clock.sleep_until(top, self._wake)

    async def _tick(self) -> None:
        now = self.clock.now()
        while self._heap and self._heap[0][0] <= now:
            due, job_id = heapq.heappop(self._heap)
            row = self._jobs.row(job_id)
            if row is None or row.paused or row.next_due != due:
                continue  # changed since it was pushed: its current due time has its own entry
            if any(s.job_id == job_id and s.due == due for s in self._ready):
                continue
            if now - due > MISSED_AFTER and row.kind != "once":
                schedule = self._jobs.schedule_of(row)
                missed = schedule.missed_between(due, now) + 1  # ``due`` itself, and those after it
                if row.catch_up == "skip":
                    await self._skip(row, due, schedule.next_after(due, now), missed)
                    continue
                self._ready.append(_Start(job_id, due, missed=missed))
            else:
                self._ready.append(_Start(job_id, due))
        await self._start_ready()

    async def _skip(self, row: CronJobRow, due: float, next_due: float | None, missed: int) -> None:
        now = self.clock.now()

        def op(conn: sqlite3.Connection) -> CronJobRow | None:
            if cron.move_due(conn, row.id, due=due, next_due=next_due, now=now):
                return cron.get(conn, row.id)
            return None

        changed = await self._store.write(op)
        log.info("cron.skipped_missed", job_id=row.id, missed=missed)
        if changed is not None:
            self._jobs.refresh(changed)

    async def _start_ready(self) -> None:
        waiting: deque[_Start] = deque()
        while self._ready:
            start = self._ready.popleft()
            if len(self._running) >= self._max or start.job_id in self._running:
                waiting.append(start)
                continue
            # The slot is taken now; the claim is the task's first step, so that many jobs due
            # together claim in the writer's batches rather than one commit after another.
            task = asyncio.create_task(self._execute(start), name=f"cron:{start.job_id}")
            self._running[start.job_id] = task
        self._ready = waiting

    async def _claim(self, start: _Start) -> tuple[CronJobRow, int] | None:
        row = self._jobs.row(start.job_id)
        if row is None:
            return None
        job_id, due, missed = row.id, start.due, start.missed
        now = self.clock.now()
        nxt = None if due is None else self._jobs.schedule_of(row).next_after(due, now)

        def op(conn: sqlite3.Connection) -> tuple[CronJobRow, int] | None:
            if start.run_id is not None:
                run_id: int | None = start.run_id
            elif due is None:
                run_id = cron.claim_requested(conn, job_id, now=now)
            else:
                run_id = cron.claim_due(conn, job_id, due=due, next_due=nxt, missed=missed, now=now)
            fresh = cron.get(conn, job_id)
            return None if run_id is None or fresh is None else (fresh, run_id)

        claimed = await self._store.write(op)
        if claimed is None:
            return None  # claimed before (or changed meanwhile): nothing to run for it
        self._jobs.refresh(claimed[0])
        if due is not None and self._metrics is not None:
            self._metrics.cron_lateness.observe(max(0.0, now - due))
        log.info("cron.run_started", job_id=job_id, run_id=claimed[1], missed=missed,
                 late=None if due is None else round(now - due, 3))
        return claimed

    async def _execute(self, start: _Start) -> None:
        outcome: RunOutcome | None = None
        claimed = None
        try:
            claimed = await self._claim(start)
            if claimed is not None:
                outcome = await self._runs.run(claimed[0], claimed[1], missed=start.missed)
        except Exception:
            log.exception("cron.run_crashed", job_id=start.job_id)
        finally:
            if asyncio.current_task() is self._running.get(start.job_id):
                del self._running[start.job_id]
            self._wake.set()
        if claimed is None:
            return
        if self._metrics is not None:
            self._metrics.cron_runs.labels(outcome.status if outcome else "failed").inc()
        if outcome is None:  # a run that ended settled its job's row (RunStarter); one that crashed did not
            job_id = start.job_id
            self._jobs.refresh(await self._store.read(lambda c: cron.get(c, job_id)), job_id)
