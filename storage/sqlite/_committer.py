"""The writer thread's side: the write connection, its transactions, checkpoints.

Everything here runs on the writer's one dedicated thread; ``Writer`` hands
batches of jobs to ``Committer.run_jobs`` and answers the callers with the
outcomes.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import structlog

from ..errors import StorageClosedError
from ._connection import JOURNAL_SIZE_LIMIT, open_writer_connection
from ._fault import is_busy, is_disk_fault, is_full, translate
from ._fts_index import index_pending
from ._fts_layout import convert_step, progress
from ._fts_merge import IDLE_PAGES, merge_step
from ._indexer import Indexer
from ._lock import WriterLock
from ._migrate import MigrationReport, check_sqlite_features, migrate
from ._writer_stats import CheckpointMode, CheckpointResult, WriterSettings, WriterStats

T = TypeVar("T")

log = structlog.get_logger("hermes.storage")

# A commit count alone does not bound the WAL: one batch of a few hundred
# messages can log megabytes (FTS5 rewrites segments as it merges them). Once
# the -wal file reaches this size, the checkpoint after the batch is a TRUNCATE,
# which also empties the file, so its size keeps measuring the log. The WAL then
# peaks at about this plus one batch.
WAL_CHECKPOINT_BYTES = JOURNAL_SIZE_LIMIT // 4


@dataclass
class Job:
    op: Callable[[sqlite3.Connection], Any]
    future: asyncio.Future[Any]
    transactional: bool = True


@dataclass
class Outcome:
    ok: bool
    value: Any


class Committer:
    """Owns the write connection; runs batches of jobs, replaying a failed batch one by one."""

    def __init__(self, path: Path, settings: WriterSettings, stats: WriterStats) -> None:
        self.path = path
        self.settings = settings
        self.stats = stats
        self.migration: MigrationReport | None = None
        #: commits not yet folded into the database by a TRUNCATE checkpoint
        self.dirty = False
        #: the checkpoint the last batch made due, decided on this thread after it
        self.checkpoint_after: CheckpointMode | None = None
        self._lock = WriterLock(path)
        self._conn: sqlite3.Connection | None = None
        self._commits_since_checkpoint = 0
        self._last_checkpoint = time.monotonic()
        self._wal_path = Path(str(path) + "-wal")
        self._wal_retry_at = WAL_CHECKPOINT_BYTES
        #: FTS indexer state, kept on this thread; whether the layout is still moving
        self.indexer = Indexer(settings, stats)
        self._converting = False
        self._index_retry_at = 0.0

    # ----------------------------------------------------------------- lifecycle

    def open(self) -> None:
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
            self._load_index_state(self._require_conn())
        except BaseException:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._lock.release()
            raise

    def close(self) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            result = self.checkpoint(conn, "TRUNCATE")
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

    # -------------------------------------------------------------- transactions

    def _with_busy_retry(self, fn: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.settings.busy_retry_budget
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or time.monotonic() >= deadline:
                    if is_busy(exc):
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

    def run_jobs(self, jobs: list[Job]) -> list[Outcome]:
        conn = self._require_conn()
        started = time.perf_counter()
        outcomes: list[Outcome] = []
        segment: list[Job] = []
        for job in [*jobs, None]:
            # Consecutive transactional ops share one transaction; order is kept.
            if job is not None and job.transactional:
                segment.append(job)
                continue
            if segment:
                outcomes += self._commit_batch(conn, segment)
                segment = []
            if job is not None:
                self._finish_ahead(conn)  # a plain op (VACUUM, a pragma) runs outside any transaction
                outcomes.append(self._run_plain(conn, job))
        self.stats.recent_commit_ms.append((time.perf_counter() - started) * 1000.0)
        self.stats.recent_batch_sizes.append(len(jobs))
        self.stats.max_batch = max(self.stats.max_batch, len(jobs))
        self.indexer.note_writes(conn)
        # Most batches need no checkpoint; deciding here spares the event loop
        # a round trip to this thread after each of them.
        self.checkpoint_after = self._due_checkpoint()
        return outcomes

    def _run_plain(self, conn: sqlite3.Connection, job: Job) -> Outcome:
        try:
            value = self._with_busy_retry(lambda: job.op(conn))
        except BaseException as exc:
            self._rollback(conn)
            self._count_failure(exc)
            return Outcome(False, translate(exc))
        self.stats.committed_ops += 1
        return Outcome(True, value)

    def _commit_batch(self, conn: sqlite3.Connection, batch: list[Job]) -> list[Outcome]:
        # The indexer may have opened the transaction already, in the gap before this batch
        # (``Indexer.ahead``): the batch joins it, and one COMMIT covers both.
        if not self.indexer.in_transaction:
            try:
                self._begin(conn)
            except sqlite3.Error as exc:
                err = translate(exc)
                for _ in batch:
                    self._count_failure(exc)
                return [Outcome(False, err) for _ in batch]
        try:
            values = [job.op(conn) for job in batch]
            conn.execute("COMMIT")
        except BaseException as exc:
            self._rollback(conn)
            self.indexer.rolled_back()  # the index work ahead is undone too: its rows wait again
            if len(batch) == 1:
                self._count_failure(exc)
                return [Outcome(False, translate(exc))]
            # Isolate and replay: every op in its own transaction, so only the
            # op that fails is reported as failed.
            self.stats.replays += 1
            return [self._run_alone(conn, job) for job in batch]
        self.indexer.committed()
        self._after_commit(len(batch))
        return [Outcome(True, value) for value in values]

    def _run_alone(self, conn: sqlite3.Connection, job: Job) -> Outcome:
        try:
            self._begin(conn)
            value = job.op(conn)
            conn.execute("COMMIT")
        except BaseException as exc:
            self._rollback(conn)
            self._count_failure(exc)
            return Outcome(False, translate(exc))
        self._after_commit(1)
        return Outcome(True, value)

    def _count_failure(self, exc: BaseException) -> None:
        self.stats.failed_ops += 1
        if is_full(exc):
            self.stats.full_failures += 1
        if is_disk_fault(exc):
            self.stats.last_disk_fault = (time.time(), str(translate(exc)))

    def _after_commit(self, n_ops: int) -> None:
        self.stats.commits += 1
        self.stats.committed_ops += n_ops
        self._commits_since_checkpoint += 1
        self.dirty = True

    # --------------------------------------------------------------- checkpoints

    def checkpoint(self, conn: sqlite3.Connection, mode: CheckpointMode) -> CheckpointResult:
        self._finish_ahead(conn)
        row = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        result = CheckpointResult(mode, int(row[0]), int(row[1]), int(row[2]), time.time())
        self.stats.checkpoints[mode] = self.stats.checkpoints.get(mode, 0) + 1
        self.stats.last_checkpoint = result
        self._commits_since_checkpoint = 0
        self._last_checkpoint = time.monotonic()
        if mode == "TRUNCATE" and result.busy == 0:
            self.dirty = False
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

    def periodic_checkpoint(self) -> None:
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

    def idle_checkpoint(self) -> None:
        result = self._safe_checkpoint("TRUNCATE")
        # A reader may keep TRUNCATE from finishing; try again on the next idle
        # tick rather than spinning.
        self.dirty = result is None or result.busy != 0

    def _safe_checkpoint(self, mode: CheckpointMode) -> CheckpointResult | None:
        conn = self._require_conn()
        try:
            return self.checkpoint(conn, mode)
        except sqlite3.Error as exc:
            log.warning("storage.checkpoint_failed", mode=mode, error=str(exc))
            return None

    # ------------------------------------------------------------- FTS indexing

    def _load_index_state(self, conn: sqlite3.Connection) -> None:
        conversion = progress(conn)
        self._converting = conversion.converting
        self.stats.fts_conversion = (conversion.done, conversion.total) if self._converting else None
        self.indexer.load(conn)

    def _finish_ahead(self, conn: sqlite3.Connection) -> None:
        if self.indexer.finish(conn):
            self._commits_since_checkpoint += 1  # not a caller's commit, but it grew the WAL
            self.dirty = True

    def index_due(self) -> bool:
        waiting = self.indexer.waiting() or self._converting or self.indexer.merging
        due = waiting and time.monotonic() >= self._index_retry_at
        return due or self.indexer.in_transaction

    def index_ahead(self) -> None:
        """Between batches: overdue rows, in a transaction the next batch commits (``Indexer.ahead``)."""
        self.indexer.ahead(self._require_conn())

    def poll_other_writers(self) -> None:
        """Idle: rows another process wrote wait for the indexer too."""
        self.indexer.note_writes(self._require_conn())

    def index_step(self, limit: int) -> int:
        """One indexing transaction of up to ``limit`` rows (then a conversion batch when caught
        up) and a merge step; returns the rows indexed, -1 when the step failed. Never raises: a locked or failing index step is logged and tried again later;
        the messages are committed already and search finds them through the tail."""
        conn = self._require_conn()
        self._finish_ahead(conn)
        if not self.indexer.waiting() and not self._converting and not self.indexer.merging:
            return 0
        try:
            conn.execute("BEGIN IMMEDIATE")
            n = index_pending(conn, limit)
            conversion = convert_step(conn, limit) if n < limit and self._converting else None
            merging = merge_step(conn, IDLE_PAGES)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback(conn)
            log.warning("storage.index_step_failed", error=str(exc))
            self._index_retry_at = time.monotonic() + self.settings.index_lag_max  # back off for one lag period
            return -1
        if n or merging or conversion is not None:  # a step that found nothing to do wrote nothing
            self._commits_since_checkpoint += 1  # not a caller's commit, but it grew the WAL
            self.dirty = True
        self.indexer.indexed(conn, n, merging=merging)
        if conversion is not None:
            self._converting = conversion.converting
            self.stats.fts_conversion = (conversion.done, conversion.total) if self._converting else None
        return n

    def catch_up(self) -> bool:
        """Index everything waiting and finish any layout move (tests, tools, the bench).

        False when a step failed (it was logged)."""
        self.indexer.note_writes(self._require_conn())  # rows another process wrote count too
        while self.index_due():
            if self.index_step(max(self.settings.index_batch, 1024)) < 0:
                return False
            self.periodic_checkpoint()
        return True
