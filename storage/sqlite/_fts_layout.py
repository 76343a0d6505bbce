"""The FTS layout of a file, and the online move from the reference's inline layout to ours.

At open (``ensure_layout``, a few reads and, once per file, a few DDL
statements, never a re-index): a file whose FTS tables were filled by
insert triggers (the reference's, or this gateway's before deferred
indexing) gets our triggers, its watermark at its last message (every row is
already indexed) and stays ``inline`` until converted. A file whose triggers
are not ours (a reference writer dropped and recreated them) gets ours back
and is re-indexed from scratch by the indexer.

The conversion (``convert_step``, called by the writer in small batches in its
idle time) builds the external-content tables beside the live ones
(``*_next``, maintained by their own delete/update triggers up to the
conversion cursor ``state_meta.fts_convert_through``), and when the cursor
reaches the watermark swaps them in, in one transaction. Until then search
uses the live inline tables, so it stays complete. Each batch is its own
transaction, so a ``kill -9`` loses at most the batch in flight and the next
start resumes at the cursor.

Our external tables merge their segments when the writer says so (``_fts_merge``):
they are created that way, and an external file from before is tuned at open.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from ._fts_index import index_rows, indexed_through, last_message_id, layout, set_indexed_through
from ._fts_merge import merging_tuned, tune_merging
from ._schema import (
    FTS_LAYOUT_KEY,
    INLINE_FTS_DDL,
    LAYOUT_EXTERNAL,
    LAYOUT_INLINE,
    LEGACY_FTS_TRIGGERS,
    REFERENCE_FTS_TRIGGERS_DDL,
    WATERMARK_KEY,
    external_fts_ddl,
    fts_triggers_ddl,
)

CONVERT_KEY = "fts_convert_through"
_NEXT = "_next"
_LIVE_TABLES = ("messages_fts", "messages_fts_trigram")


@dataclass(frozen=True)
class ConversionProgress:
    """Where the move to the external layout is: ``done`` of ``total`` messages."""

    layout: str
    done: int
    total: int

    @property
    def converting(self) -> bool:
        return self.layout != LAYOUT_EXTERNAL


def _set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO state_meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def _meta_int(conn: sqlite3.Connection, key: str) -> int:
    row = conn.execute("SELECT CAST(value AS INTEGER) FROM state_meta WHERE key = ?", (key,)).fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0


def _trigger_sql(conn: sqlite3.Connection) -> dict[str, str]:
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'messages'")
    return {str(r[0]): str(r[1]) for r in rows}


def _install_triggers(conn: sqlite3.Connection, name: str) -> None:
    for trigger in LEGACY_FTS_TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    for ddl in fts_triggers_ddl(name):
        conn.execute(ddl)


def install_reference_layout(conn: sqlite3.Connection) -> None:
    """Turn this file's FTS into the reference's v11 layout, indexed on insert (benchmarks, tests).

    What the reference, or this gateway before deferred indexing, leaves; the
    next open converts it online. Every message already in the file is indexed."""
    for trigger in LEGACY_FTS_TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    _drop_next(conn)
    for table in _LIVE_TABLES:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    for ddl in INLINE_FTS_DDL:
        conn.execute(ddl)
    for table in _LIVE_TABLES:
        conn.execute(f"INSERT INTO {table}(rowid, content, tool_name, tool_calls) "
                     "SELECT id, content, tool_name, tool_calls FROM messages")
    for ddl in REFERENCE_FTS_TRIGGERS_DDL:
        conn.execute(ddl)
    conn.execute("DELETE FROM state_meta WHERE key IN (?, ?)", (FTS_LAYOUT_KEY, WATERMARK_KEY))


def create_fresh(conn: sqlite3.Connection) -> None:
    """A new file, or one whose old FTS tables were dropped: external tables, indexed by the indexer from 0."""
    for trigger in LEGACY_FTS_TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    for table in _LIVE_TABLES:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    for ddl in external_fts_ddl():
        conn.execute(ddl)
    tune_merging(conn)
    _install_triggers(conn, LAYOUT_EXTERNAL)
    _set_meta(conn, FTS_LAYOUT_KEY, LAYOUT_EXTERNAL)
    set_indexed_through(conn, 0)


def layout_is_settled(conn: sqlite3.Connection) -> bool:
    """True when opening needs no change (cheap: two reads)."""
    stored = conn.execute("SELECT value FROM state_meta WHERE key = ?", (FTS_LAYOUT_KEY,)).fetchone()
    if stored is None:
        return False
    return _triggers_settled(conn, str(stored[0])) and (str(stored[0]) != LAYOUT_EXTERNAL or merging_tuned(conn))


def _triggers_settled(conn: sqlite3.Connection, name: str) -> bool:
    want = {_ddl_name(d): d for d in fts_triggers_ddl(name)}
    have = _trigger_sql(conn)
    return all(_same(have.get(name), ddl) for name, ddl in want.items())


def _ddl_name(ddl: str) -> str:
    return ddl.split("IF NOT EXISTS ", 1)[1].split()[0]


def _same(stored: str | None, ddl: str) -> bool:
    return stored is not None and stored == ddl.replace("IF NOT EXISTS ", "")


def ensure_layout(conn: sqlite3.Connection) -> bool:
    """In the caller's transaction: make the file's triggers ours. True when it changed anything."""
    if layout_is_settled(conn):
        return False
    stored = conn.execute("SELECT value FROM state_meta WHERE key = ?", (FTS_LAYOUT_KEY,)).fetchone()
    tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not all(t in tables for t in _LIVE_TABLES):
        create_fresh(conn)
        return True
    if stored is not None and _triggers_settled(conn, str(stored[0])):
        tune_merging(conn)  # an external file from before the writer did the merging
        return True
    if stored is None:
        # Filled by insert triggers: every row is in the index already.
        _install_triggers(conn, LAYOUT_INLINE)
        _set_meta(conn, FTS_LAYOUT_KEY, LAYOUT_INLINE)
        set_indexed_through(conn, last_message_id(conn))
        return True
    # Someone else's triggers on our tables: what they indexed cannot be told
    # apart from what we did, so the index starts over.
    name = str(stored[0])
    _install_triggers(conn, name)
    if name == LAYOUT_EXTERNAL:
        tune_merging(conn)
    for table in _LIVE_TABLES:
        if name == LAYOUT_EXTERNAL:
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('delete-all')")
        else:
            conn.execute(f"DELETE FROM {table}")
    set_indexed_through(conn, 0)
    _drop_next(conn)
    return True


def _drop_next(conn: sqlite3.Connection) -> None:
    for ddl in fts_triggers_ddl(LAYOUT_EXTERNAL, _NEXT, CONVERT_KEY):
        conn.execute(f"DROP TRIGGER IF EXISTS {_ddl_name(ddl)}")
    for table in _LIVE_TABLES:
        conn.execute(f"DROP TABLE IF EXISTS {table}{_NEXT}")
    conn.execute("DELETE FROM state_meta WHERE key = ?", (CONVERT_KEY,))


def progress(conn: sqlite3.Connection) -> ConversionProgress:
    name = layout(conn) or LAYOUT_INLINE
    total = indexed_through(conn)
    done = total if name == LAYOUT_EXTERNAL else _meta_int(conn, CONVERT_KEY)
    return ConversionProgress(name, done, total)


def convert_step(conn: sqlite3.Connection, limit: int) -> ConversionProgress:
    """In the caller's transaction: move up to ``limit`` messages into the new tables; swap when done."""
    if layout(conn) == LAYOUT_EXTERNAL:
        return progress(conn)
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (f"messages_fts{_NEXT}",)).fetchone()
    if exists is None:
        for ddl in external_fts_ddl(_NEXT):
            conn.execute(ddl)
        tune_merging(conn, _NEXT)
        for ddl in fts_triggers_ddl(LAYOUT_EXTERNAL, _NEXT, CONVERT_KEY):
            conn.execute(ddl)
        _set_meta(conn, CONVERT_KEY, "0")
    cursor, target = _meta_int(conn, CONVERT_KEY), indexed_through(conn)
    if cursor < target:
        top = conn.execute(
            "SELECT max(id) FROM (SELECT id FROM messages WHERE id > ? AND id <= ? ORDER BY id LIMIT ?)",
            (cursor, target, limit),
        ).fetchone()[0]
        top = target if top is None else int(top)
        index_rows(conn, cursor + 1, top, LAYOUT_EXTERNAL, suffix=_NEXT)
        _set_meta(conn, CONVERT_KEY, str(top))
        cursor = top
    if cursor >= target:
        _swap(conn)
    return progress(conn)


def _swap(conn: sqlite3.Connection) -> None:
    for ddl in fts_triggers_ddl(LAYOUT_INLINE):
        conn.execute(f"DROP TRIGGER IF EXISTS {_ddl_name(ddl)}")
    for ddl in fts_triggers_ddl(LAYOUT_EXTERNAL, _NEXT, CONVERT_KEY):
        conn.execute(f"DROP TRIGGER IF EXISTS {_ddl_name(ddl)}")
    for table in _LIVE_TABLES:
        conn.execute(f"DROP TABLE {table}")
        conn.execute(f"ALTER TABLE {table}{_NEXT} RENAME TO {table}")
    _install_triggers(conn, LAYOUT_EXTERNAL)
    _set_meta(conn, FTS_LAYOUT_KEY, LAYOUT_EXTERNAL)
    conn.execute("DELETE FROM state_meta WHERE key = ?", (CONVERT_KEY,))
