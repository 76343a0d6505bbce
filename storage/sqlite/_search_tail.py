"""The unindexed tail: messages committed but not yet reached by the FTS indexer.

Search must find a message the moment its write returns, before the indexer
(``_fts_index``) has indexed it. The rows above the watermark are indexed into
a temporary FTS5 table of the reading connection, with the same tokenizer and
the same row filter as the table the plan uses, and the query runs on both.
The scan is bounded (``TAIL_MAX`` newest rows): the writer keeps the tail to
about ``index_lag_max`` seconds of writes, far below that, except while it
rebuilds a whole index (an upgrade from a reference version before 11, or
after another writer's triggers), when the older rows are found once indexed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ._fts_index import indexed_through, layout
from ._schema import LAYOUT_EXTERNAL, trigram_source
from ._search_plan import TRIGRAM_TABLE

TAIL_MAX = 5000


@dataclass(frozen=True)
class Source:
    """Where an FTS plan's hits come from: the index, plus a tail table when rows wait."""

    table: str
    tail: str | None
    watermark: int

    def hits_sql(self) -> str:
        """``(rowid, rank)`` of every hit; takes the MATCH query once per table."""
        main = f"SELECT rowid, rank FROM {self.table} WHERE {self.table} MATCH ?"
        if self.tail is None:
            return main
        return f"{main} UNION ALL SELECT rowid, rank FROM {self.tail} WHERE {self.tail} MATCH ?"

    def params(self, fts_query: str) -> tuple[str, ...]:
        return (fts_query,) if self.tail is None else (fts_query, fts_query)

    def table_of(self, message_id: int) -> str:
        return self.tail if self.tail is not None and message_id > self.watermark else self.table


@contextmanager
def read_snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One state of the database for the watermark, the index and the tail."""
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def source(conn: sqlite3.Connection, table: str) -> Source:
    """The plan's table and, when messages wait for the indexer, a temp table holding them."""
    name = layout(conn)
    if name is None:  # indexed by insert triggers: no tail
        return Source(table, None, 0)
    watermark = indexed_through(conn)
    trigram = table == TRIGRAM_TABLE
    where = trigram_source("", external=True)[1] if trigram and name == LAYOUT_EXTERNAL else "1"
    rows: list[Any] = conn.execute(
        f"SELECT id, content, tool_name, tool_calls FROM messages WHERE id > ? AND {where} ORDER BY id DESC LIMIT ?",
        (watermark, TAIL_MAX),
    ).fetchall()
    if not rows:
        return Source(table, None, watermark)
    # Unqualified below: nothing in main is called tail_*, and FTS5's MATCH and
    # auxiliary functions take the table's bare name.
    tail = f"tail_{table}"
    tokenize = ", tokenize='trigram'" if trigram else ""
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{tail} USING fts5(content, tool_name, tool_calls{tokenize})")
    conn.execute(f"DELETE FROM {tail}")
    conn.executemany(f"INSERT INTO {tail}(rowid, content, tool_name, tool_calls) VALUES (?, ?, ?, ?)",
                     [tuple(r) for r in rows])
    return Source(table, tail, watermark)
