"""When the FTS5 b-trees are merged: a little after each slice, the rest in idle time.

Every FTS5 transaction writes a new segment (b-tree); segments are merged to keep
search fast. FTS5's own ``automerge`` does that inside whichever write happens to
cross its threshold: every 64 leaf pages written, a merge of 64 × levels pages,
12–20 ms on the bench's writer@16 mix. Under load that write is a slice the next
batch waits for, so those merges were the top of the commit p99 (bench/README.md).

In our (external) tables automerge is off, and the writer merges instead:

* after each slice under load, ``SLICE_PAGES`` pages (``merge_step``): about what
  the slice wrote, so the work is even and small instead of rare and large;
* in idle time, ``IDLE_PAGES`` per transaction until FTS5 finds nothing left to
  merge (fewer than ``usermerge``, 4, segments on every level).

``crisismerge`` (``CRISIS_SEGMENTS``) stays as FTS5's safety valve: a level that
still reaches that many segments (a burst longer than the slices' merging keeps
up with, and no idle time) is merged by the write that reaches it.
"""

from __future__ import annotations

import sqlite3

__all__ = ["CRISIS_SEGMENTS", "IDLE_PAGES", "SLICE_PAGES", "merge_all", "merge_step", "merging_tuned", "tune_merging"]

#: pages merged per table after a slice of index_slice rows (a few pages each)
SLICE_PAGES = 8
#: pages merged per table per idle transaction
IDLE_PAGES = 256
#: segments on one level at which FTS5 merges them within the write (its default is 16)
CRISIS_SEGMENTS = 64

_TABLES = ("messages_fts", "messages_fts_trigram")


def tune_merging(conn: sqlite3.Connection, suffix: str = "") -> None:
    """In the caller's transaction: our tables merge only when the writer says so."""
    for table in _TABLES:
        name = f"{table}{suffix}"
        conn.execute(f"INSERT INTO {name}({name}, rank) VALUES ('automerge', 0)")
        conn.execute(f"INSERT INTO {name}({name}, rank) VALUES ('crisismerge', ?)", (CRISIS_SEGMENTS,))


def merging_tuned(conn: sqlite3.Connection) -> bool:
    """True when both live tables have automerge off (one read each); False where a table is missing
    (``ensure_layout`` then builds them afresh)."""
    try:
        for table in _TABLES:
            row = conn.execute(f"SELECT v FROM {table}_config WHERE k = 'automerge'").fetchone()
            if row is None or row[0] != 0:
                return False
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise  # a busy or broken file is not a missing table
        return False
    return True


def merge_step(conn: sqlite3.Connection, pages: int) -> bool:
    """In the caller's transaction: merge up to about ``pages`` pages in each table.

    True when FTS5 found something to merge (it changes two or more rows then: its documented
    way to tell), so more may wait."""
    worked = False
    for table in _TABLES:
        before = conn.total_changes
        conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('merge', ?)", (pages,))
        worked = worked or conn.total_changes - before >= 2
    return worked


def merge_all(conn: sqlite3.Connection, pages: int = IDLE_PAGES) -> None:
    """In the caller's transaction: merge steps until FTS5 finds nothing left to merge (what the
    writer's idle time does in steps; for a bulk load that has no idle time, such as the benches')."""
    while merge_step(conn, pages):
        pass
