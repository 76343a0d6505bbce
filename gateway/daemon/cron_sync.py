"""Every node's scheduled jobs follow the database (README, "Running several nodes").

``Jobs`` keeps the jobs in memory; on several nodes a job is changed on any node (a /cron
command, the control socket, the agent's cron tool) and run by the node holding the
``scheduler`` role, which writes its runs' marks (next due time, last run, status). Migration
0010's trigger NOTIFYs each change's job id at COMMIT; ``CronSync`` listens on a connection of
its own, reads each changed row again and hands it to ``Jobs.refresh``, whose watcher wakes the
scheduler, so a new or changed due time counts at once on the node that runs it. After every
(re)connect it reads every job (``Jobs.reload``): notifications sent meanwhile were lost.

Which node runs a due time stays the database's: ``cron.claim_due`` claims it once, whatever an
in-memory view said. A row read late (a change after it is on its way) is put right by that
change's own notification, read after it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from gateway.scheduler import Jobs
from storage import CronJobRow, cron
from storage.errors import StorageClosedError, StorageUnavailableError
from storage.postgres import PgStore
from storage.postgres import cron_changes as changes

__all__ = ["CronSync"]

log = structlog.get_logger("hermes.cron")

_DOWN = (StorageUnavailableError, StorageClosedError, TimeoutError)
#: the first wait before listening again; it doubles up to ``retry_max``
_RETRY_FIRST = 0.2


class CronSync:
    """Keeps ``jobs`` as the database has them: a listener, and one task that reads what it heard of."""

    def __init__(self, store: PgStore, jobs: Jobs, *, retry_max: float) -> None:
        self._store = store
        self._jobs = jobs
        self._retry_max = retry_max
        #: job ids heard of and not read yet (a burst of runs' writes is read in one transaction)
        self._pending: set[str] = set()
        #: read every job (set at each LISTEN, and after a read failed)
        self._reload = False
        self._heard = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        #: how many full reads completed (``status`` and tests: the listener is in place)
        self.reloads = 0

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._listen(), name="cron-listen"),
                       asyncio.create_task(self._apply(), name="cron-sync")]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _listen(self) -> None:
        backoff = _RETRY_FIRST
        while True:
            try:
                async for job_id in changes.cron_wakeups(self._store):
                    backoff = _RETRY_FIRST
                    if job_id:
                        self._pending.add(job_id)
                    else:
                        self._reload = True  # listening (again): what was said meanwhile is lost
                    self._heard.set()
            except _DOWN:
                pass
            except Exception:
                log.exception("cron.listen_failed")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self._retry_max)

    async def _apply(self) -> None:
        backoff = _RETRY_FIRST
        while True:
            await self._heard.wait()
            self._heard.clear()
            reload, ids = self._reload, sorted(self._pending)
            self._reload = False
            self._pending.clear()
            try:
                if reload:
                    await self._jobs.reload()  # read after the ids were heard: it has them too
                    self.reloads += 1
                elif ids:
                    await self._read(ids)
                backoff = _RETRY_FIRST
            except Exception as exc:
                if not isinstance(exc, _DOWN):
                    log.exception("cron.sync_failed")
                # everything again once the database answers: what was heard is not lost
                self._reload = True
                self._heard.set()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._retry_max)

    async def _read(self, ids: list[str]) -> None:
        def rows(conn: Any) -> list[tuple[str, CronJobRow | None]]:
            return [(job_id, cron.get(conn, job_id)) for job_id in ids]

        for job_id, row in await self._store.read(rows):
            if row is None:
                if self._jobs.row(job_id) is not None:
                    self._jobs.refresh(None, job_id)
            elif self._jobs.row(job_id) != row:
                self._jobs.refresh(row)  # its watcher wakes the scheduler
