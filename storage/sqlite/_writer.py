"""The writer task: the only connection of the process that writes or checkpoints.

Callers ``await writer.submit(op)``; ``op`` is a function of a sqlite3
connection. The writer drains its queue into one ``BEGIN IMMEDIATE``
transaction (group commit), resolves each caller after COMMIT, and routes an
operation's error back to that caller alone: when anything in a batch fails,
the batch is rolled back and replayed one operation per transaction, so the
others still commit. SQLite work runs on one dedicated thread, never on the
event loop.

Operations must only touch the database (they can run twice: once in the
failed batch, once in the replay).

This module is the event loop's side (queue, batching, answering callers);
``_committer`` is the writer thread's (transactions, replays, checkpoints).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import structlog

from ..errors import StorageClosedError, StorageError
from ._committer import Committer, Job, Outcome
from ._migrate import MigrationReport
from ._writer_stats import CheckpointMode, CheckpointResult, WriterSettings, WriterStats

T = TypeVar("T")
Op = Callable[[sqlite3.Connection], T]

log = structlog.get_logger("hermes.storage")

_STOP = object()


class Writer:
    """One owner of the write connection, a queue of work, errors routed back."""

    def __init__(self, path: Path, settings: WriterSettings | None = None) -> None:
        self.path = Path(path)
        self.settings = settings or WriterSettings()
        self.stats = WriterStats()
        self._committer = Committer(self.path, self.settings, self.stats)
        self._executor: ThreadPoolExecutor | None = None
        self._queue: asyncio.Queue[Job | object] = asyncio.Queue()
        self._slots = asyncio.Semaphore(self.settings.queue_limit)
        self._closing = False
        self._started = asyncio.Event()
        self._stopped = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ----------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Writer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Open, migrate, and run the serving loop as a task of its own.

        After a failed start (a held lock, a bad file) ``start`` may be called
        again: it begins afresh rather than pretending to run.
        """
        if self._task is not None and not self._task.done():
            return
        if self._task is not None:
            self._reset()
        self._task = asyncio.create_task(self.serve(), name="storage-writer")
        started = asyncio.create_task(self._started.wait())
        done, _ = await asyncio.wait({self._task, started}, return_when=asyncio.FIRST_COMPLETED)
        if self._task in done:
            started.cancel()
            self._task.result()  # re-raises the opening error

    async def aclose(self) -> None:
        self.request_stop()
        if self._task is None:
            return
        if not self._started.is_set() and self._task.done():
            return  # it never opened: nothing to drain, the error was raised by start()
        await asyncio.shield(self._task)

    def _reset(self) -> None:
        self._queue = asyncio.Queue()
        self._slots = asyncio.Semaphore(self.settings.queue_limit)
        self._closing = False
        self._started = asyncio.Event()
        self._stopped = asyncio.Event()
        self._task = None
        self.stats = WriterStats()
        self._committer.stats = self.stats

    def request_stop(self) -> None:
        """Stop accepting work; what is queued still commits."""
        if not self._closing:
            self._closing = True
            self._queue.put_nowait(_STOP)

    @property
    def migration(self) -> MigrationReport | None:
        """What opening did to the schema (None before the first open)."""
        return self._committer.migration

    @property
    def running(self) -> bool:
        return self._started.is_set() and not self._stopped.is_set()

    async def serve(self) -> None:
        """The task body: open, then commit batches until asked to stop."""
        loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="state-writer")
        try:
            await loop.run_in_executor(self._executor, self._committer.open)
        except BaseException:
            self._executor.shutdown(wait=True)
            self._stopped.set()
            raise
        self._started.set()
        log.info(
            "storage.writer_started",
            path=str(self.path),
            sqlite_version=sqlite3.sqlite_version,
            schema_from=self.migration.from_version if self.migration else None,
            schema_to=self.migration.to_version if self.migration else None,
            gateway_schema_from=self.migration.gateway_from if self.migration else None,
            gateway_schema_to=self.migration.gateway_to if self.migration else None,
        )
        try:
            await self._loop()
        finally:
            await loop.run_in_executor(self._executor, self._committer.close)
            self._executor.shutdown(wait=True)
            self._fail_pending(StorageClosedError("the storage writer has stopped"))
            self._stopped.set()
            log.info("storage.writer_stopped", commits=self.stats.commits)

    # ------------------------------------------------------------------- submit

    async def submit(self, op: Op[T], *, transactional: bool = True) -> T:
        """Run ``op`` on the write connection; returns after its COMMIT.

        ``transactional=False`` runs the op outside a transaction (VACUUM, pragmas).
        """
        if self._closing or self._stopped.is_set():
            raise StorageClosedError("the storage writer is not running; the write was not accepted")
        await self._slots.acquire()
        if self._closing:
            self._slots.release()
            raise StorageClosedError("the storage writer is stopping; the write was not accepted")
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(Job(op, fut, transactional))
        self.stats.submitted += 1
        self.stats.queue_depth = self._queue.qsize()
        return await fut

    async def checkpoint(self, mode: CheckpointMode = "TRUNCATE") -> CheckpointResult:
        return await self.submit(lambda conn: self._committer.checkpoint(conn, mode), transactional=False)

    # --------------------------------------------------------------- event loop

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._executor is not None
        while True:
            item = await self._next_item()
            if item is None:  # idle: index what waits, then leave the WAL small
                await loop.run_in_executor(self._executor, self._idle_work)
                continue
            stop = item is _STOP
            jobs: list[Job] = [] if stop else [item]  # type: ignore[list-item]
            while len(jobs) < self.settings.batch_limit and not self._queue.empty():
                nxt = self._queue.get_nowait()
                if nxt is _STOP:
                    stop = True
                    continue
                jobs.append(nxt)  # type: ignore[arg-type]
            self.stats.queue_depth = self._queue.qsize()
            if jobs:
                await self._commit(loop, jobs)
                if self._committer.checkpoint_after is not None:  # decided on the writer thread, after the batch
                    await loop.run_in_executor(self._executor, self._committer.periodic_checkpoint)
            if stop and self._queue.empty():
                return

    async def _commit(self, loop: asyncio.AbstractEventLoop, jobs: list[Job]) -> None:
        """Run ``jobs`` on the writer thread and answer their callers.

        The thread hands the outcomes back in one callback that answers every
        caller and wakes this task together: under load each pass of the event
        loop waits behind the other chats' work, and an executor future would
        add two more passes (its own, then this task's) before a caller heard.
        """
        assert self._executor is not None
        done: asyncio.Future[None] = loop.create_future()

        def answer(outcomes: list[Outcome] | BaseException) -> None:
            for i, job in enumerate(jobs):
                self._slots.release()
                if job.future.done():  # the caller gave up waiting; the write stands
                    continue
                if isinstance(outcomes, BaseException):
                    job.future.set_exception(StorageError(f"the storage writer failed: {outcomes!r}"))
                elif outcomes[i].ok:
                    job.future.set_result(outcomes[i].value)
                else:
                    job.future.set_exception(outcomes[i].value)
            if done.done():
                return
            if isinstance(outcomes, BaseException):
                done.set_exception(outcomes)  # a bug in the writer itself: it stops, loudly
            else:
                done.set_result(None)

        def work() -> None:
            outcomes: list[Outcome] | BaseException
            try:
                outcomes = self._committer.run_jobs(jobs)
            except BaseException as exc:
                outcomes = exc
            loop.call_soon_threadsafe(answer, outcomes)
            # The callers are answered. Under steady load, once rows wait too long (Indexer.overdue),
            # a small slice of them is indexed here, in a transaction the next batch joins: one
            # COMMIT and one fsync for both. Small, because the next batch's callers wait for it:
            # a slice in a transaction of its own, or of twice the batch, tripled their p99 at
            # 16 producers (bench/README.md). Above index_slice rows per batch the lag grows,
            # and idle time catches up.
            self._committer.index_ahead()

        self._executor.submit(work)
        await done

    async def _next_item(self) -> Job | object | None:
        """The next job, or None after a quiet spell: then the writer indexes,
        checkpoints, or looks for rows another process wrote."""
        if not self._queue.empty():
            return self._queue.get_nowait()
        if self._committer.index_due():
            wait = self.settings.index_idle_after
        elif self._committer.dirty:
            wait = self.settings.idle_truncate_after
        else:
            wait = self.settings.index_lag_max
        try:
            async with asyncio.timeout(wait):
                return await self._queue.get()
        except TimeoutError:
            return None

    def _idle_work(self) -> None:
        """On the writer thread, when no job waits."""
        committer = self._committer
        if committer.index_due():
            committer.index_step(self.settings.index_batch)
            # A long catch-up or conversion is many transactions in a row: keep the WAL bounded.
            committer.periodic_checkpoint()
        elif committer.dirty:
            committer.idle_checkpoint()
        else:
            committer.poll_other_writers()

    async def catch_up_index(self) -> bool:
        """Index every waiting message and finish a layout move; False if a step failed."""
        if not self.running or self._executor is None:
            raise StorageClosedError("the storage writer is not running")
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._committer.catch_up)

    def _fail_pending(self, exc: StorageError) -> None:
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, Job):
                self._slots.release()
                if not item.future.done():
                    item.future.set_exception(exc)
