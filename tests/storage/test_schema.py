"""The schema StateStore creates is the reference's v11 schema, table for table.

``reference_schema.sql`` is the reference DDL, loaded into an empty SQLite
file; every comparison below is between that file and a real state.db made by
``StateStore``.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from storage import MigrationReport, StateStore, WriterSettings, latest_version

REFERENCE_SQL = Path(__file__).with_name("reference_schema.sql")
BASE_TABLES = ("sessions", "messages", "state_meta", "schema_version")
FTS_TABLES = ("messages_fts", "messages_fts_trigram")

SESSION_COLUMNS = [
    "id", "source", "user_id", "model", "model_config", "system_prompt", "parent_session_id",
    "started_at", "ended_at", "end_reason", "message_count", "tool_call_count", "input_tokens",
    "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens",
    "billing_provider", "billing_base_url", "billing_mode", "estimated_cost_usd",
    "actual_cost_usd", "cost_status", "cost_source", "pricing_version", "title", "api_call_count",
]  # fmt: skip
MESSAGE_COLUMNS = [
    "id", "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name", "timestamp",
    "token_count", "finish_reason", "reasoning", "reasoning_content", "reasoning_details",
    "codex_reasoning_items", "codex_message_items",
]  # fmt: skip


def _connect_ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


@pytest.fixture
def reference(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(tmp_path / "reference.db")
    conn.executescript(REFERENCE_SQL.read_text())
    yield conn
    conn.close()


@pytest.fixture
async def ours(store: StateStore, db_path: Path) -> AsyncIterator[sqlite3.Connection]:
    conn = _connect_ro(db_path)
    yield conn
    conn.close()


def _norm_sql(sql: str) -> str:
    sql = " ".join(sql.split())
    sql = re.sub(r"\s*\(\s*", "(", sql)
    sql = re.sub(r"\s*\)\s*", ")", sql)
    return sql.replace(" IF NOT EXISTS", "")


def _table_info(conn: sqlite3.Connection, table: str) -> list[tuple[object, ...]]:
    # (cid, name, type, notnull, dflt_value, pk): pk is the position in the primary key.
    return [tuple(r) for r in conn.execute(f"PRAGMA table_info({table})")]


def _foreign_keys(conn: sqlite3.Connection, table: str) -> list[tuple[object, ...]]:
    return sorted(tuple(r) for r in conn.execute(f"PRAGMA foreign_key_list({table})"))


def _indexes(conn: sqlite3.Connection, table: str) -> dict[str, tuple[object, ...]]:
    """name -> (unique, origin, partial, columns with sort order, normalized CREATE sql)."""
    out: dict[str, tuple[object, ...]] = {}
    for _seq, name, unique, origin, partial in conn.execute(f"PRAGMA index_list({table})"):
        cols = tuple(
            (r[2], r[3], r[4])  # column name, desc, collation
            for r in conn.execute(f"PRAGMA index_xinfo({name})")
            if r[5]  # key columns only (not the rowid tail)
        )
        row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?", (name,)).fetchone()
        sql = _norm_sql(row[0]) if row and row[0] else None
        out[name] = (unique, origin, partial, cols, sql)
    return out


def _object_sql(conn: sqlite3.Connection, name: str) -> str | None:
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    return None if row is None else str(row[0])


# ------------------------------------------------------------------ tables


@pytest.mark.parametrize("table", BASE_TABLES)
async def test_table_columns_match_reference(
    reference: sqlite3.Connection, ours: sqlite3.Connection, table: str
) -> None:
    assert _table_info(ours, table), f"{table} is missing"
    assert _table_info(ours, table) == _table_info(reference, table)


@pytest.mark.parametrize("table", BASE_TABLES)
async def test_foreign_keys_match_reference(
    reference: sqlite3.Connection, ours: sqlite3.Connection, table: str
) -> None:
    assert _foreign_keys(ours, table) == _foreign_keys(reference, table)


@pytest.mark.parametrize("table", BASE_TABLES)
async def test_indexes_match_reference(reference: sqlite3.Connection, ours: sqlite3.Connection, table: str) -> None:
    want = _indexes(reference, table)
    have = _indexes(ours, table)
    for name, definition in want.items():
        assert have.get(name) == definition, name
    # Later gateway migrations may add indexes of their own to these tables,
    # but never a constraint the reference does not have.
    extra = {name: d for name, d in have.items() if name not in want}
    assert not [name for name, d in extra.items() if d[0]], f"extra UNIQUE indexes: {extra}"


async def test_sessions_has_all_27_columns_in_reference_order(ours: sqlite3.Connection) -> None:
    info = _table_info(ours, "sessions")
    assert [r[1] for r in info] == SESSION_COLUMNS
    assert len(info) == 27
    by_name = {r[1]: r for r in info}
    assert by_name["id"][2:] == ("TEXT", 0, None, 1)
    assert by_name["source"][2:] == ("TEXT", 1, None, 0)
    assert by_name["started_at"][2:] == ("REAL", 1, None, 0)
    for counter in ("message_count", "tool_call_count", "input_tokens", "output_tokens",
                    "cache_read_tokens", "cache_write_tokens", "reasoning_tokens", "api_call_count"):
        assert by_name[counter][2:] == ("INTEGER", 0, "0", 0), counter
    assert by_name["estimated_cost_usd"][2] == "REAL"
    assert by_name["actual_cost_usd"][2] == "REAL"


async def test_messages_has_all_15_columns_in_reference_order(ours: sqlite3.Connection) -> None:
    info = _table_info(ours, "messages")
    assert [r[1] for r in info] == MESSAGE_COLUMNS
    assert len(info) == 15
    by_name = {r[1]: r for r in info}
    assert by_name["id"][2:] == ("INTEGER", 0, None, 1)
    assert by_name["session_id"][2:] == ("TEXT", 1, None, 0)
    assert by_name["role"][2:] == ("TEXT", 1, None, 0)
    assert by_name["timestamp"][2:] == ("REAL", 1, None, 0)
    # AUTOINCREMENT: ids are never reused after a delete.
    assert "AUTOINCREMENT" in (_object_sql(ours, "messages") or "").upper()


async def test_foreign_keys_to_parent_session_and_session(ours: sqlite3.Connection) -> None:
    (parent_fk,) = _foreign_keys(ours, "sessions")
    assert parent_fk[2:5] == ("sessions", "parent_session_id", "id")
    (msg_fk,) = _foreign_keys(ours, "messages")
    assert msg_fk[2:5] == ("sessions", "session_id", "id")


async def test_every_reference_index_exists(ours: sqlite3.Connection) -> None:
    sessions = _indexes(ours, "sessions")
    messages = _indexes(ours, "messages")
    assert sessions["idx_sessions_source"][3] == (("source", 0, "BINARY"),)
    assert sessions["idx_sessions_parent"][3] == (("parent_session_id", 0, "BINARY"),)
    assert sessions["idx_sessions_started"][3] == (("started_at", 1, "BINARY"),)  # DESC
    assert messages["idx_messages_session"][3] == (("session_id", 0, "BINARY"), ("timestamp", 0, "BINARY"))


async def test_title_index_is_unique_and_partial(ours: sqlite3.Connection) -> None:
    unique, origin, partial, cols, sql = _indexes(ours, "sessions")["idx_sessions_title_unique"]
    assert (unique, origin, partial) == (1, "c", 1)
    assert cols == (("title", 0, "BINARY"),)
    assert sql is not None and sql.endswith("WHERE title IS NOT NULL")


# --------------------------------------------------------------------- FTS5


@pytest.mark.parametrize("table", FTS_TABLES)
async def test_fts_tables_keep_the_reference_names_and_columns_over_external_content(
    ours: sqlite3.Connection, table: str
) -> None:
    sql = _object_sql(ours, table)
    assert sql is not None, f"{table} is missing"
    assert re.search(r"USING\s+fts5\s*\(", sql, re.IGNORECASE)
    # A v11 reader's MATCH and snippet() see the same three columns...
    assert [r[1] for r in ours.execute(f"PRAGMA table_info({table})")] == ["content", "tool_name", "tool_calls"]
    # ...read from messages: no second copy of the text (bench/README.md, "Fewer bytes").
    assert "content='messages'" in sql.replace(" ", "") and "content_rowid='id'" in sql.replace(" ", "")
    assert _object_sql(ours, f"{table}_content") is None


async def test_trigram_table_uses_trigram_tokenizer(ours: sqlite3.Connection) -> None:
    sql = _object_sql(ours, "messages_fts_trigram") or ""
    assert re.search(r"tokenize\s*=\s*['\"]trigram['\"]", sql), sql
    plain = _object_sql(ours, "messages_fts") or ""
    assert "tokenize" not in plain


async def test_fts_indexes_follow_inserts_updates_and_deletes(store: StateStore, db_path: Path) -> None:
    await store.create_session("s1", "cli")
    mid = await store.append_message(
        "s1",
        "assistant",
        "dockerfile layers",
        tool_name="shellrunner",
        tool_calls=[{"id": "c1", "type": "function", "function": {"name": "quuxcall", "arguments": "{}"}}],
    )
    await store.catch_up_index()  # appends are indexed after their commit (storage/sqlite/_fts_index.py)
    conn = _connect_ro(db_path)
    try:

        def hits(table: str, query: str) -> list[int]:
            return [r[0] for r in conn.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", (query,))]

        for table in FTS_TABLES:
            assert hits(table, '"dockerfile"') == [mid]
            assert hits(table, "tool_name:shellrunner") == [mid]
            assert hits(table, "tool_calls:quuxcall") == [mid]
        # Substrings only through the trigram index.
        assert hits("messages_fts_trigram", '"ockerfil"') == [mid]
        assert hits("messages_fts", '"ockerfil"') == []

        await store.write(lambda c: c.execute("UPDATE messages SET content = 'podman volumes' WHERE id = ?", (mid,)))
        for table in FTS_TABLES:
            assert hits(table, '"dockerfile"') == []
            assert hits(table, '"podman"') == [mid]

        await store.clear_messages("s1")
        for table in FTS_TABLES:
            assert hits(table, '"podman"') == []
            assert conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0
            # The index itself holds nothing of the row any more, not only the messages table.
            await store.write(lambda c, t=table: c.execute(f"INSERT INTO {t}({t}) VALUES ('integrity-check')"))
            assert conn.execute(f"SELECT count(*) FROM {table}_docsize").fetchone()[0] == 0
    finally:
        conn.close()


# ------------------------------------------------------- version, meta, reopen


async def test_schema_version_holds_latest_version(ours: sqlite3.Connection) -> None:
    assert ours.execute("SELECT version FROM schema_version").fetchall() == [(latest_version(),)]
    assert latest_version() >= 11


async def test_state_meta_is_a_key_value_table(store: StateStore) -> None:
    assert await store.get_meta("k") is None
    await store.set_meta("k", "v1")
    await store.set_meta("k", "v2")
    assert await store.get_meta("k") == "v2"


def _schema_snapshot(path: Path) -> list[tuple[object, ...]]:
    conn = _connect_ro(path)
    try:
        return sorted(tuple(r) for r in conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
    finally:
        conn.close()


async def test_second_open_is_a_no_op(db_path: Path) -> None:
    settings = WriterSettings(synchronous="NORMAL")
    async with StateStore(db_path, writer_settings=settings) as first:
        report = first.writer.migration
        assert isinstance(report, MigrationReport)
        assert report.created is True
        assert report.to_version == latest_version()
        await first.create_session("s1", "cli")
        await first.append_message("s1", "user", "kept across opens")
    before = _schema_snapshot(db_path)

    async with StateStore(db_path, writer_settings=settings) as second:
        report = second.writer.migration
        assert report is not None
        assert report.from_version == report.to_version == latest_version()
        assert report.created is False
        assert report.added_columns == []
        assert report.renamed_titles == 0
        assert report.fts_rebuilt is False
        assert report.applied == []
        assert [m["content"] for m in await second.get_messages("s1")] == ["kept across opens"]
        assert len(await second.search_messages("kept")) == 1
    assert _schema_snapshot(db_path) == before
