"""FTS5 segments are merged by the writer (storage/sqlite/_fts_merge.py), not by whichever write
crosses FTS5's automerge threshold: our tables are created, converted and reopened with automerge
off, and the many small segments of small index transactions are merged in idle time."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from storage import StateStore, WriterSettings, fts_layout, ops
from storage.sqlite._fts_merge import CRISIS_SEGMENTS

TABLES = ("messages_fts", "messages_fts_trigram")
#: idle index steps of one row each: one FTS segment per message
ONE_ROW_STEPS = WriterSettings(synchronous="NORMAL", index_batch=1, index_idle_after=0.0)


def config(path: Path) -> dict[str, tuple[object, object]]:
    """Each table's (automerge, crisismerge); None where the table keeps FTS5's default."""
    with sqlite3.connect(path) as conn:
        def value(table: str, key: str) -> object:
            row = conn.execute(f"SELECT v FROM {table}_config WHERE k = ?", (key,)).fetchone()
            return None if row is None else row[0]

        return {t: (value(t, "automerge"), value(t, "crisismerge")) for t in TABLES}


def segments(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        return {t: conn.execute(f"SELECT count(DISTINCT segid) FROM {t}_idx").fetchone()[0] for t in TABLES}


async def write_messages(store: StateStore, n: int) -> None:
    def write(conn: sqlite3.Connection) -> None:
        ops.create_session(conn, "s1", "cli", started_at=1000.0)
        for i in range(n):
            ops.append_message(conn, "s1", ("user", "assistant")[i % 2], f"uniq{i} docker latency 機械学習 {i % 7}")

    await store.write(write)


async def test_small_index_transactions_leave_few_segments_once_idle(db_path: Path) -> None:
    n = 240
    async with StateStore(db_path, writer_settings=ONE_ROW_STEPS) as store:
        await write_messages(store, n)
        for _ in range(600):  # idle steps of one row each (about 1 ms apiece here)
            if store.writer.stats.indexed_rows >= n:
                break
            await asyncio.sleep(0.02)
        assert store.writer.stats.indexed_rows == n
        assert await store.catch_up_index()  # and whatever merging is left
        found = {r["id"] for r in await store.search_messages("docker latency", limit=500)}
        assert len(found) == n
        assert len(await store.search_messages("機械学習", limit=500)) == n
    assert config(db_path) == {t: (0, CRISIS_SEGMENTS) for t in TABLES}
    # 240 one-row segments per table, merged four at a time: a handful per level is left. FTS5's
    # crisis merge alone (no merging by the writer) would leave dozens.
    assert all(count <= 8 for count in segments(db_path).values()), segments(db_path)


async def test_an_external_file_from_before_is_tuned_at_open(db_path: Path) -> None:
    async with StateStore(db_path) as store:
        await write_messages(store, 10)
    with sqlite3.connect(db_path) as conn:  # what an older gateway left: FTS5's defaults
        for t in TABLES:
            conn.execute(f"INSERT INTO {t}({t}, rank) VALUES ('automerge', 4)")
            conn.execute(f"INSERT INTO {t}({t}, rank) VALUES ('crisismerge', 16)")
    async with StateStore(db_path) as store:
        assert store.writer.migration is not None and store.writer.migration.fts_triggers_replaced
        assert len(await store.search_messages("docker", limit=50)) == 10
    assert config(db_path) == {t: (0, CRISIS_SEGMENTS) for t in TABLES}


async def test_the_tables_a_conversion_builds_are_tuned(db_path: Path) -> None:
    async with StateStore(db_path) as store:
        await write_messages(store, 30)
        assert await store.catch_up_index()
        await store.write(fts_layout.install_reference_layout)
    assert config(db_path) == {t: (None, None) for t in TABLES}  # the reference's tables: FTS5's defaults
    async with StateStore(db_path) as store:
        assert store.writer.stats.fts_conversion == (0, 30)
        assert await store.catch_up_index()
        assert store.writer.stats.fts_conversion is None
        assert len(await store.search_messages("docker", limit=50)) == 30
    assert config(db_path) == {t: (0, CRISIS_SEGMENTS) for t in TABLES}


async def test_a_file_whose_fts_tables_were_dropped_opens_and_is_indexed_again(db_path: Path) -> None:
    async with StateStore(db_path) as store:
        await write_messages(store, 12)
        assert await store.catch_up_index()
    with sqlite3.connect(db_path) as conn:  # someone dropped the search tables, not our triggers
        for t in TABLES:
            conn.execute(f"DROP TABLE {t}")
    async with StateStore(db_path) as store:
        assert await store.catch_up_index()
        assert len(await store.search_messages("docker", limit=50)) == 12
    assert config(db_path) == {t: (0, CRISIS_SEGMENTS) for t in TABLES}
