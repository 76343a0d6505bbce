"""When the writer indexes: the FTS indexer's state on the writer thread.

Messages commit unindexed (``_fts_index``); this decides when the rows above the
watermark get indexed:

* **Idle.** After ``index_idle_after`` with no job, ``Committer.index_step``
  indexes ``index_batch`` rows per transaction, then moves the layout on.
* **Overdue, under load.** Once rows were committed more than ``index_lag_max``
  ago and writes keep coming, the writer indexes ``index_slice`` of them after
  each batch, once its callers are answered, in a transaction it leaves open: the
  next batch's ops join it, and one COMMIT (one fsync) covers both. A slice in a
  transaction of its own made the next batch wait for the slice and its own
  fsync: most of the commit p99 at 16 producers (bench/README.md).

Each slice also merges a few FTS pages (``_fts_merge``: our tables do not merge
on their own), and idle steps merge until nothing is left to merge.

The watermark advances by ``index_slice`` rows per batch however hard the
writes come, so the lag stays bounded while writes average at most that many
rows per commit; above that the backlog grows (search still finds it, through
``_search_tail``, up to its ``TAIL_MAX`` newest rows) and idle time catches up.
"""

from __future__ import annotations

import sqlite3
import time
from collections import deque

import structlog

from ._fts_index import index_pending, indexed_through, last_message_id
from ._fts_merge import SLICE_PAGES, merge_step
from ._writer_stats import WriterSettings, WriterStats

log = structlog.get_logger("hermes.storage")


class Indexer:
    """The watermark as last seen, when each waiting row was seen committed, the open ahead transaction."""

    def __init__(self, settings: WriterSettings, stats: WriterStats) -> None:
        self.settings = settings
        self.stats = stats
        #: every message at or below this id is indexed (as committed, not counting the open transaction)
        self.watermark = 0
        #: the newest message id seen
        self.last_id = 0
        #: (newest id, monotonic time) when those rows were first seen committed, oldest first
        self._seen: deque[tuple[int, float]] = deque()
        #: every row up to this id has waited index_lag_max or longer
        self._due_through = 0
        #: an ahead transaction is open on the connection: the next batch commits it
        self.in_transaction = False
        self._ahead_through = 0
        self._ahead_rows = 0
        #: FTS segments may wait to be merged (idle steps merge until FTS5 finds none); true at
        #: start, when nobody knows
        self.merging = True

    # ------------------------------------------------------------- bookkeeping

    def load(self, conn: sqlite3.Connection) -> None:
        self.watermark = indexed_through(conn)
        self.note_writes(conn)

    def note_writes(self, conn: sqlite3.Connection) -> None:
        """After a commit (ours or, seen when idle, another process's): start the clock of new rows."""
        last = last_message_id(conn)
        if last > self.last_id:
            self._seen.append((last, time.monotonic()))
        self.last_id = max(last, self.watermark)
        self._forget_indexed()
        self.stats.index_pending = max(0, self.last_id - self.watermark)

    def _forget_indexed(self) -> None:
        while self._seen and self._seen[0][0] <= self.watermark:
            self._seen.popleft()

    def indexed(self, conn: sqlite3.Connection, rows: int, *, merging: bool) -> None:
        """An indexing transaction committed ``rows`` rows (idle steps, catch-up); ``merging``: its
        merge step found work, so more may wait."""
        self.merging = merging
        self.watermark = indexed_through(conn)
        self.stats.index_steps += 1
        self.stats.indexed_rows += rows
        if self.watermark >= self.last_id:
            self._seen.clear()
        self.note_writes(conn)

    def waiting(self) -> bool:
        return self.last_id > self.watermark or self.in_transaction

    def overdue(self, now: float) -> int:
        """Rows that must be indexed now: committed over ``index_lag_max`` ago.

        Once overdue, an entry leaves ``_seen`` for ``_due_through``: under a backlog this runs
        after every batch, and must not walk the thousand entries a second of writes leaves."""
        while self._seen and now - self._seen[0][1] >= self.settings.index_lag_max:
            self._due_through = max(self._due_through, self._seen.popleft()[0])
        return max(0, self._due_through - max(self.watermark, self._ahead_through))

    # ------------------------------------------------------ the ahead transaction

    def ahead(self, conn: sqlite3.Connection) -> None:
        """In the gap after a batch: index up to ``index_slice`` overdue rows, in a transaction
        the next batch joins (or ``finish`` commits).

        Never raises: the rows are committed already and search finds them through the tail."""
        must = min(self.overdue(time.monotonic()), self.settings.index_slice)
        if must <= 0 or self.in_transaction:
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
            self.in_transaction = True
            self._ahead_rows = index_pending(conn, must)
            self._ahead_through = indexed_through(conn)
            merge_step(conn, SLICE_PAGES)
        except sqlite3.Error as exc:
            log.warning("storage.index_ahead_failed", error=str(exc))
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            self.rolled_back()

    def committed(self) -> None:
        """The transaction the ahead work was in has committed (with a batch, or by ``finish``)."""
        if not self.in_transaction:
            return
        self.watermark = max(self.watermark, self._ahead_through)
        self.merging = True  # the slice's segment, and what its small merge left
        self.stats.index_steps += 1
        self.stats.indexed_rows += self._ahead_rows
        self.in_transaction = False
        self._ahead_rows = 0
        self._forget_indexed()
        self.stats.index_pending = max(0, self.last_id - self.watermark)

    def rolled_back(self) -> None:
        """The transaction was rolled back: the ahead work is undone with it (the rows wait again)."""
        self.in_transaction = False
        self._ahead_through = self.watermark
        self._ahead_rows = 0

    def finish(self, conn: sqlite3.Connection) -> bool:
        """Commit the ahead transaction on its own (before a checkpoint, a plain op, idle work).

        True when it committed anything (the WAL grew)."""
        if not self.in_transaction:
            return False
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            log.warning("storage.index_ahead_failed", error=str(exc))
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            self.rolled_back()
            return False
        self.committed()
        return True
