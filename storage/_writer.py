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
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import structlog

from ._connection import JOURNAL_SIZE_LIMIT, open_writer_connection
from ._lock import WriterLock
from ._migrate import MigrationReport, check_sqlite_features, migrate
from .errors import (
    GatewayError,
    StorageBusyError,
    StorageClosedError,
    StorageError,
    StorageFullError,
)

T = TypeVar("T")
Op = Callable[[sqlite3.Connection], T]
CheckpointMode = Literal["PASSIVE", "TRUNCATE"]

log = structlog.get_logger("hermes.storage")


@dataclass(frozen=True)
class WriterSettings:
    batch_limit: int = 512
    queue_limit: int = 10_000
    checkpoint_every_commits: int = 50
    checkpoint_every_seconds: float = 30.0
    idle_truncate_after: float = 1.0
    busy_timeout_ms: int = 50
    busy_retry_budget: float = 15.0
    synchronous: Literal["FULL", "NORMAL"] = "FULL"
    take_lock: bool = True


@dataclass
class CheckpointResult:
    mode: str
    busy: int
    log_frames: int
    checkpointed_frames: int
    at: float


@dataclass
class WriterStats:
    """Counters for /status and metrics. Read from the event loop only."""

    submitted: int = 0
    committed_ops: int = 0
    failed_ops: int = 0
    commits: int = 0
    replays: int = 0
    busy_retries: int = 0
    busy_failures: int = 0
    full_failures: int = 0
    checkpoints: dict[str, int] = field(default_factory=lambda: {"PASSIVE": 0, "TRUNCATE": 0})
    last_checkpoint: CheckpointResult | None = None
    max_batch: int = 0
    recent_batch_sizes: deque[int] = field(default_factory=lambda: deque(maxlen=1024))
    recent_commit_ms: deque[float] = field(default_factory=lambda: deque(maxlen=1024))
    queue_depth: int = 0


@dataclass
class _Job:
    op: Callable[[sqlite3.Connection], Any]
    future: asyncio.Future[Any]
    transactional: bool = True


@dataclass
class _Outcome:
    ok: bool
    value: Any


_STOP = object()

# A commit count alone does not bound the WAL: one batch of a few hundred
# messages can log megabytes (FTS5 rewrites segments as it merges them). Once
# the -wal file reaches this size, the checkpoint after the batch is a TRUNCATE,
# which also empties the file, so its size keeps measuring the log. The WAL then
# peaks at about this plus one batch.
WAL_CHECKPOINT_BYTES = JOURNAL_SIZE_LIMIT // 4


def _is_busy(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)


def _is_full(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error) and "full" in str(exc).lower()


def _translate(exc: BaseException) -> BaseException:
    """Our errors pass through; SQLite's become errors a person can act on."""
    if isinstance(exc, GatewayError):
        return exc
    if _is_full(exc):
        err: StorageError = StorageFullError(
            "state.db could not grow: the disk (or the configured page budget) is full. "
            "Nothing from this operation was written; free space and retry."
        )
    elif _is_busy(exc):
        err = StorageBusyError(
            "state.db stayed locked by another process for longer than the retry budget "
            "(storage.busy_retry_budget); nothing was written. Find the process holding it "
            f"(a CLI, a backup) and retry. SQLite said: {exc}"
        )
    elif isinstance(exc, sqlite3.Error):
        err = StorageError(f"state.db rejected the operation: {exc}")
    else:
        return exc
    err.__cause__ = exc
    return err


class Writer:
    """One owner of the write connection, a queue of work, errors routed back."""

    def __init__(self, path: Path, settings: WriterSettings | None = None) -> None:
        self.path = Path(path)
        self.settings = settings or WriterSettings()
        self.stats = WriterStats()
        self.migration: MigrationReport | None = None
        self._lock = WriterLock(self.path)
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._queue: asyncio.Queue[_Job | object] = asyncio.Queue()
        self._slots = asyncio.Semaphore(self.settings.queue_limit)
        self._closing = False
        self._started = asyncio.Event()
        self._stopped = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._commits_since_checkpoint = 0
        self._last_checkpoint = time.monotonic()
        self._dirty = False
        self._wal_path = Path(str(self.path) + "-wal")
        self._wal_retry_at = WAL_CHECKPOINT_BYTES
        self._checkpoint_after: CheckpointMode | None = None

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

    def request_stop(self) -> None:
        """Stop accepting work; what is queued still commits."""
        if not self._closing:
            self._closing = True
            self._queue.put_nowait(_STOP)

    @property
    def running(self) -> bool:
        return self._started.is_set() and not self._stopped.is_set()

    async def serve(self) -> None:
        """The task body: open, then commit batches until asked to stop."""
        loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="state-writer")
        try:
            await loop.run_in_executor(self._executor, self._open)
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
        )
        try:
            await self._loop()
        finally:
            await loop.run_in_executor(self._executor, self._close)
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
        self._queue.put_nowait(_Job(op, fut, transactional))
        self.stats.submitted += 1
        self.stats.queue_depth = self._queue.qsize()
        return await fut

    async def checkpoint(self, mode: CheckpointMode = "TRUNCATE") -> CheckpointResult:
        return await self.submit(lambda conn: self._checkpoint(conn, mode), transactional=False)

    # --------------------------------------------------------------- event loop

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._executor is not None
        while True:
            item = await self._next_item()
            if item is None:  # idle: leave the WAL small
                await loop.run_in_executor(self._executor, self._idle_checkpoint)
                continue
            stop = item is _STOP
            jobs: list[_Job] = [] if stop else [item]  # type: ignore[list-item]
            while len(jobs) < self.settings.batch_limit and not self._queue.empty():
                nxt = self._queue.get_nowait()
                if nxt is _STOP:
                    stop = True
                    continue
                jobs.append(nxt)  # type: ignore[arg-type]
            self.stats.queue_depth = self._queue.qsize()
            if jobs:
                await self._commit(loop, jobs)
                if self._checkpoint_after is not None:  # decided on the writer thread, after the batch
                    await loop.run_in_executor(self._executor, self._periodic_checkpoint)
            if stop and self._queue.empty():
                return

    async def _commit(self, loop: asyncio.AbstractEventLoop, jobs: list[_Job]) -> None:
        """Run ``jobs`` on the writer thread and answer their callers.

        The thread hands the outcomes back in one callback that answers every
        caller and wakes this task together: under load each pass of the event
        loop waits behind the other chats' work, and an executor future would
        add two more passes (its own, then this task's) before a caller heard.
        """
        assert self._executor is not None
        done: asyncio.Future[None] = loop.create_future()

        def answer(outcomes: list[_Outcome] | BaseException) -> None:
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
            outcomes: list[_Outcome] | BaseException
            try:
                outcomes = self._run_jobs(jobs)
            except BaseException as exc:
                outcomes = exc
            loop.call_soon_threadsafe(answer, outcomes)

        self._executor.submit(work)
        await done

    async def _next_item(self) -> _Job | object | None:
        if not self._queue.empty():
            return self._queue.get_nowait()
        if not self._dirty:
            return await self._queue.get()
        try:
            async with asyncio.timeout(self.settings.idle_truncate_after):
                return await self._queue.get()
        except TimeoutError:
            return None

    def _fail_pending(self, exc: StorageError) -> None:
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, _Job):
                self._slots.release()
                if not item.future.done():
                    item.future.set_exception(exc)

    # ------------------------------------------------------------ writer thread

    def _open(self) -> None:
        check_sqlite_features()
        # A new home is private: it will hold the conversations.
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.settings.take_lock:
            self._lock.acquire()
        try:
            self._conn = open_writer_connection(
                self.path,
                busy_timeout_ms=self.settings.busy_timeout_ms,
                synchronous=self.settings.synchronous,
            )
            self.migration = self._with_busy_retry(lambda: migrate(self._require_conn()))
        except BaseException:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._lock.release()
            raise

    def _close(self) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            result = self._checkpoint(conn, "TRUNCATE")
            if result.busy:
                log.warning("storage.final_checkpoint_busy", hint="another process held a read lock; "
                            "the WAL is folded in on the next start")
        except sqlite3.Error as exc:
            log.warning("storage.final_checkpoint_failed", error=str(exc))
        finally:
            conn.close()
            self._conn = None
            self._lock.release()

    def _require_conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StorageClosedError("the storage writer is not open")
        return self._conn

    def _with_busy_retry(self, fn: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.settings.busy_retry_budget
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() >= deadline:
                    if _is_busy(exc):
                        self.stats.busy_failures += 1
                    raise
                self.stats.busy_retries += 1
                # Jitter breaks the convoy of writers retrying in lockstep.
                time.sleep(random.uniform(0.020, 0.150))

    def _begin(self, conn: sqlite3.Connection) -> None:
        self._with_busy_retry(lambda: conn.execute("BEGIN IMMEDIATE"))

    def _rollback(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error as exc:  # SQLite may already have rolled back
                log.warning("storage.rollback_failed", error=str(exc))

    def _run_jobs(self, jobs: list[_Job]) -> list[_Outcome]:
        conn = self._require_conn()
        started = time.perf_counter()
        outcomes: list[_Outcome] = []
        segment: list[_Job] = []
        for job in [*jobs, None]:
            # Consecutive transactional ops share one transaction; order is kept.
            if job is not None and job.transactional:
                segment.append(job)
                continue
            if segment:
                outcomes += self._commit_batch(conn, segment)
                segment = []
            if job is not None:
                outcomes.append(self._run_plain(conn, job))
        self.stats.recent_commit_ms.append((time.perf_counter() - started) * 1000.0)
        self.stats.recent_batch_sizes.append(len(jobs))
        self.stats.max_batch = max(self.stats.max_batch, len(jobs))
        # Most batches need no checkpoint; deciding here spares the event loop
        # a round trip to this thread after each of them.
        self._checkpoint_after = self._due_checkpoint()
        return outcomes

    def _run_plain(self, conn: sqlite3.Connection, job: _Job) -> _Outcome:
        try:
            value = self._with_busy_retry(lambda: job.op(conn))
        except BaseException as exc:
            self._rollback(conn)
            self._count_failure(exc)
            return _Outcome(False, _translate(exc))
        self.stats.committed_ops += 1
        return _Outcome(True, value)

    def _commit_batch(self, conn: sqlite3.Connection, batch: list[_Job]) -> list[_Outcome]:
        try:
            self._begin(conn)
        except sqlite3.Error as exc:
            err = _translate(exc)
            for _ in batch:
                self._count_failure(exc)
            return [_Outcome(False, err) for _ in batch]
        try:
            values = [job.op(conn) for job in batch]
            conn.execute("COMMIT")
        except BaseException as exc:
            self._rollback(conn)
            if len(batch) == 1:
                self._count_failure(exc)
                return [_Outcome(False, _translate(exc))]
            # Isolate and replay: every op in its own transaction, so only the
            # op that fails is reported as failed.
            self.stats.replays += 1
            return [self._run_alone(conn, job) for job in batch]
        self._after_commit(len(batch))
        return [_Outcome(True, value) for value in values]

    def _run_alone(self, conn: sqlite3.Connection, job: _Job) -> _Outcome:
        try:
            self._begin(conn)
            value = job.op(conn)
            conn.execute("COMMIT")
        except BaseException as exc:
            self._rollback(conn)
            self._count_failure(exc)
            return _Outcome(False, _translate(exc))
        self._after_commit(1)
        return _Outcome(True, value)

    def _count_failure(self, exc: BaseException) -> None:
        self.stats.failed_ops += 1
        if _is_full(exc):
            self.stats.full_failures += 1

    def _after_commit(self, n_ops: int) -> None:
        self.stats.commits += 1
        self.stats.committed_ops += n_ops
        self._commits_since_checkpoint += 1
        self._dirty = True

    def _checkpoint(self, conn: sqlite3.Connection, mode: CheckpointMode) -> CheckpointResult:
        row = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        result = CheckpointResult(mode, int(row[0]), int(row[1]), int(row[2]), time.time())
        self.stats.checkpoints[mode] = self.stats.checkpoints.get(mode, 0) + 1
        self.stats.last_checkpoint = result
        self._commits_since_checkpoint = 0
        self._last_checkpoint = time.monotonic()
        if mode == "TRUNCATE" and result.busy == 0:
            self._dirty = False
        return result

    def _wal_bytes(self) -> int:
        try:
            return self._wal_path.stat().st_size
        except OSError:
            return 0

    def _due_checkpoint(self) -> CheckpointMode | None:
        """The checkpoint to run after a batch, if any."""
        wal = self._wal_bytes()
        if wal < WAL_CHECKPOINT_BYTES:
            self._wal_retry_at = WAL_CHECKPOINT_BYTES
        elif wal >= self._wal_retry_at:
            return "TRUNCATE"
        due = self._commits_since_checkpoint >= self.settings.checkpoint_every_commits or (
            self._commits_since_checkpoint > 0
            and time.monotonic() - self._last_checkpoint >= self.settings.checkpoint_every_seconds
        )
        return "PASSIVE" if due else None

    def _periodic_checkpoint(self) -> None:
        mode = self._due_checkpoint()
        if mode == "TRUNCATE":
            wal = self._wal_bytes()
            result = self._safe_checkpoint("TRUNCATE")
            # A reader still on the log keeps TRUNCATE from emptying it (after
            # busy_timeout); try again once the log has grown by another budget,
            # not after every batch.
            emptied = result is not None and result.busy == 0
            self._wal_retry_at = WAL_CHECKPOINT_BYTES if emptied else wal + WAL_CHECKPOINT_BYTES
        elif mode == "PASSIVE":
            self._safe_checkpoint("PASSIVE")

    def _idle_checkpoint(self) -> None:
        result = self._safe_checkpoint("TRUNCATE")
        # A reader may keep TRUNCATE from finishing; try again on the next idle
        # tick rather than spinning.
        self._dirty = result is None or result.busy != 0

    def _safe_checkpoint(self, mode: CheckpointMode) -> CheckpointResult | None:
        conn = self._require_conn()
        try:
            return self._checkpoint(conn, mode)
        except sqlite3.Error as exc:
            log.warning("storage.checkpoint_failed", mode=mode, error=str(exc))
            return None
