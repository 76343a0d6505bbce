"""The full-text indexer: messages commit unindexed, and are indexed afterwards in batches.

A message's write does no FTS work: its caller is answered as soon as the row
is committed. The writer then indexes the rows above the *watermark*
(``state_meta.fts_indexed_through``: every message with an id at or below it is
in both FTS tables) in its idle time, or in small slices between batches once
the oldest unindexed row has waited ``index_lag_max`` seconds. Ids only grow
(``AUTOINCREMENT``, one writer at a time), so the rows above the watermark are
exactly the unindexed ones, whoever wrote them: this daemon, another process,
or the reference's own ``SessionDB`` (whose ``CREATE TRIGGER IF NOT EXISTS
messages_fts_insert`` finds our trigger of that name and adds none of its own).

Search stays complete: ``_search_tail`` finds the rows above the watermark by
indexing them into a temporary table on the reader's connection, so a message
is findable the moment its write returns.

Deleting FTS rows has exactly one place: the ``messages_fts_delete`` and
``messages_fts_update`` triggers (DDL in ``_schema``). Any ``DELETE FROM
messages`` (a session deleted or pruned, /undo, /forget-me, another process)
removes the row's index entries in the same statement when the row was
indexed, and does nothing to the index when it was not. Storage code that
deletes messages therefore needs nothing beyond its DELETE; it must never
write to the FTS tables itself.
"""

from __future__ import annotations

import sqlite3

from ._schema import FTS_LAYOUT_KEY, LAYOUT_EXTERNAL, LAYOUT_INLINE, WATERMARK_KEY, trigram_source


def indexed_through(conn: sqlite3.Connection) -> int:
    """The watermark: every message with an id at or below it is indexed."""
    row = conn.execute("SELECT CAST(value AS INTEGER) FROM state_meta WHERE key = ?", (WATERMARK_KEY,)).fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0


def set_indexed_through(conn: sqlite3.Connection, message_id: int) -> None:
    conn.execute(
        "INSERT INTO state_meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (WATERMARK_KEY, str(message_id)),
    )


def layout(conn: sqlite3.Connection) -> str | None:
    """``inline`` or ``external``; None for a file our writer never opened (the reference's own,
    indexed by its insert triggers: nothing waits for an indexer there)."""
    row = conn.execute("SELECT value FROM state_meta WHERE key = ?", (FTS_LAYOUT_KEY,)).fetchone()
    return str(row[0]) if row is not None and row[0] is not None else None


def last_message_id(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT max(id) FROM messages").fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0


def pending(conn: sqlite3.Connection) -> int:
    """How many messages wait to be indexed."""
    w = indexed_through(conn)
    return int(conn.execute("SELECT count(*) FROM messages WHERE id > ?", (w,)).fetchone()[0])


def index_rows(conn: sqlite3.Connection, first: int, last: int, layout_name: str, suffix: str = "") -> None:
    """Index messages ``first``..``last`` into both tables (no watermark change)."""
    conn.execute(
        f"INSERT INTO messages_fts{suffix}(rowid, content, tool_name, tool_calls) "
        "SELECT id, content, tool_name, tool_calls FROM messages WHERE id BETWEEN ? AND ? ORDER BY id",
        (first, last),
    )
    cols, where = trigram_source("", external=layout_name == LAYOUT_EXTERNAL)
    conn.execute(
        f"INSERT INTO messages_fts_trigram{suffix}(rowid, content, tool_name, tool_calls) "
        f"SELECT id, {cols} FROM messages WHERE id BETWEEN ? AND ? AND {where} ORDER BY id",
        (first, last),
    )


def index_pending(conn: sqlite3.Connection, limit: int) -> int:
    """Index up to ``limit`` unindexed messages, in the caller's transaction; returns how many."""
    w = indexed_through(conn)
    top = conn.execute(
        "SELECT max(id), count(*) FROM (SELECT id FROM messages WHERE id > ? ORDER BY id LIMIT ?)", (w, limit)
    ).fetchone()
    if top is None or top[0] is None:
        return 0
    index_rows(conn, w + 1, int(top[0]), layout(conn) or LAYOUT_INLINE)
    set_indexed_through(conn, int(top[0]))
    return int(top[1])
