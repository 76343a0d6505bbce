"""A state.db left by any reference version (v1..v10) is upgraded in place.

Each legacy file comes from ``legacy.build_legacy_db``. Expected values are
never taken from the builder's constants: every row is read back from the
legacy file before ``StateStore`` touches it, and compared afterwards.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import storage.sqlite._migrate as migrate_module
from storage import MigrationReport, SchemaError, StateStore, WriterSettings, latest_version

from . import legacy

SETTINGS = WriterSettings(synchronous="NORMAL")
FTS_TABLES = ("messages_fts", "messages_fts_trigram")
FTS_COLUMNS = ["content", "tool_name", "tool_calls"]
V11_TRIGGERS = {"messages_fts_insert", "messages_fts_delete", "messages_fts_update"}


# ------------------------------------------------------------------ helpers


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain connection for looking (and, where a test says so, tampering)."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.row_factory = sqlite3.Row
    try:
        yield conn
    finally:
        conn.close()


def rows(conn: sqlite3.Connection, table: str, order: str = "id") -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY {order}")]


@dataclass
class Snapshot:
    sessions: list[dict[str, Any]]
    messages: list[dict[str, Any]]


def snapshot(path: Path) -> Snapshot:
    with connect(path) as conn:
        return Snapshot(rows(conn, "sessions"), rows(conn, "messages"))


def logical_dump(path: Path) -> list[str]:
    """Schema and every row, shadow tables included, in a stable order."""
    with connect(path) as conn:
        return list(conn.iterdump())


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fts_rowids(conn: sqlite3.Connection, table: str, query: str) -> set[int]:
    return {r[0] for r in conn.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", (query,))}


def shadow_data(conn: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
    return {
        t: [tuple(r) for r in conn.execute(f"SELECT id, block FROM {t}_data ORDER BY id")] for t in FTS_TABLES
    }


def expected_title(version: int, before: Snapshot, session_id: str) -> str | None:
    """Titles survive; before v4 a repeated title gets a lineage number."""
    if version < 3:
        return None
    by_id = {s["id"]: s for s in before.sessions}
    title = by_id[session_id]["title"]
    if title is None:
        return None
    same = sorted((s for s in before.sessions if s["title"] == title), key=lambda s: (s["started_at"], s["id"]))
    n = [s["id"] for s in same].index(session_id) + 1
    return title if n == 1 else f"{title} #{n}"


@dataclass
class Upgraded:
    version: int
    path: Path
    before: Snapshot
    store: StateStore
    report: MigrationReport


@pytest.fixture(params=legacy.VERSIONS, ids=lambda v: f"v{v}")
async def upgraded(request: pytest.FixtureRequest, db_path: Path) -> AsyncIterator[Upgraded]:
    version: int = request.param
    legacy.build_legacy_db(db_path, version)
    before = snapshot(db_path)
    # The legacy file must not already look like the target, or nothing is proved.
    assert len(before.messages) > 10 and len(before.sessions) == 4
    async with StateStore(db_path, writer_settings=SETTINGS) as store:
        assert store.writer.migration is not None
        yield Upgraded(version, db_path, before, store, store.writer.migration)


# ------------------------------------------------------------ the upgrade


async def test_report_says_what_was_upgraded(upgraded: Upgraded) -> None:
    report = upgraded.report
    assert report.from_version == upgraded.version
    assert report.to_version == latest_version()
    assert report.created is False
    assert report.fts_rebuilt is True
    added = {c.split(".", 1)[1] for c in report.added_columns}
    new_session_cols = set(legacy.session_columns(legacy.NEWEST)) - set(legacy.session_columns(upgraded.version))
    new_message_cols = set(legacy.message_columns(legacy.NEWEST)) - set(legacy.message_columns(upgraded.version))
    assert added == new_session_cols | new_message_cols


async def test_schema_version_is_latest(upgraded: Upgraded) -> None:
    with connect(upgraded.path) as conn:
        assert [tuple(r) for r in conn.execute("SELECT version FROM schema_version")] == [(latest_version(),)]


async def test_every_session_row_is_kept(upgraded: Upgraded) -> None:
    version, before = upgraded.version, upgraded.before
    old_cols = legacy.session_columns(version)
    new_cols = [c for c in legacy.session_columns(legacy.NEWEST) if c not in old_cols]
    with connect(upgraded.path) as conn:
        after = rows(conn, "sessions")
    assert [s["id"] for s in after] == [s["id"] for s in before.sessions]
    for old, new in zip(before.sessions, after, strict=True):
        for col in old_cols:
            if col == "title":
                assert new["title"] == expected_title(version, before, old["id"])
            else:
                assert new[col] == old[col], (old["id"], col)
        for col in new_cols:
            assert new[col] == legacy.V11_DEFAULTS.get(col), (old["id"], col)


async def test_every_message_row_is_kept(upgraded: Upgraded) -> None:
    old_cols = legacy.message_columns(upgraded.version)
    new_cols = [c for c in legacy.message_columns(legacy.NEWEST) if c not in old_cols]
    with connect(upgraded.path) as conn:
        after = rows(conn, "messages")
    assert [m["id"] for m in after] == [m["id"] for m in upgraded.before.messages]
    for old, new in zip(upgraded.before.messages, after, strict=True):
        assert {c: new[c] for c in old_cols} == old
        assert {c: new[c] for c in new_cols} == dict.fromkeys(new_cols)


async def test_database_is_consistent(upgraded: Upgraded) -> None:
    with connect(upgraded.path) as conn:
        assert [r[0] for r in conn.execute("PRAGMA integrity_check")] == ["ok"]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {"idx_sessions_title_unique", "idx_sessions_source", "idx_sessions_parent",
            "idx_sessions_started", "idx_messages_session", "state_meta"} <= names  # fmt: skip


async def test_lineage_survives(upgraded: Upgraded) -> None:
    child = next(s for s in upgraded.before.sessions if s["parent_session_id"] is not None)
    ancestors = await upgraded.store.lineage_ancestors(child["id"])
    assert [a["id"] for a in ancestors] == [child["id"], child["parent_session_id"]]


async def test_messages_read_back_through_the_store(upgraded: Upgraded) -> None:
    for session in upgraded.before.sessions:
        got = await upgraded.store.get_messages(session["id"])
        want = [m for m in upgraded.before.messages if m["session_id"] == session["id"]]
        assert [m["id"] for m in got] == [m["id"] for m in want]
        assert [m["content"] for m in got] == [m["content"] for m in want]


# -------------------------------------------------------------------- titles


async def test_titles_kept_and_repeats_numbered(upgraded: Upgraded) -> None:
    version, before = upgraded.version, upgraded.before
    for session in before.sessions:
        got = await upgraded.store.get_session(session["id"])
        assert got is not None
        assert got["title"] == expected_title(version, before, session["id"])
    if version == 3:
        # The legacy file really had the same title twice...
        dupes = [s for s in before.sessions if s["title"] == legacy.DUPLICATE_TITLE]
        assert len(dupes) == 2
        assert upgraded.report.renamed_titles == 1
        first, second = sorted(dupes, key=lambda s: s["started_at"])
        # ...and now they read "X" and "X #2".
        assert (await upgraded.store.get_session(first["id"]) or {})["title"] == legacy.DUPLICATE_TITLE
        assert (await upgraded.store.get_session(second["id"]) or {})["title"] == f"{legacy.DUPLICATE_TITLE} #2"
        assert await upgraded.store.resolve_session_by_title(legacy.DUPLICATE_TITLE) is not None
    else:
        assert upgraded.report.renamed_titles == 0
    # The unique index now holds, whatever the version.
    if version >= 3:
        with connect(upgraded.path) as conn, pytest.raises(sqlite3.IntegrityError):
            conn.execute("UPDATE sessions SET title = 'Fix Docker Build' WHERE title IS NOT 'Fix Docker Build'")


# ----------------------------------------------------------------------- FTS


async def test_fts_tables_are_external_content_over_three_columns(upgraded: Upgraded) -> None:
    with connect(upgraded.path) as conn:
        for table in FTS_TABLES:
            (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
            assert re.search(r"content\s*=\s*'messages'", sql, re.I), sql
            assert re.search(r"content_rowid\s*=\s*'id'", sql, re.I), sql
            assert [r[1] for r in conn.execute(f"PRAGMA table_info({table})")] == FTS_COLUMNS
        (trigram_sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'messages_fts_trigram'").fetchone()
        assert "trigram" in trigram_sql


async def test_fts_backfilled_with_every_message(upgraded: Upgraded) -> None:
    # The old tables are replaced at once and refilled in the background.
    assert upgraded.report.fts_rebuilt
    assert await upgraded.store.catch_up_index()
    want = {m["id"] for m in upgraded.before.messages}
    with connect(upgraded.path) as conn:
        # _docsize has one row per indexed message: the index's own record, not the messages table.
        assert {r[0] for r in conn.execute("SELECT id FROM messages_fts_docsize")} == want
        trigram = {m["id"] for m in upgraded.before.messages if m["role"] != "tool"}
        assert {r[0] for r in conn.execute("SELECT id FROM messages_fts_trigram_docsize")} == trigram


async def test_search_finds_old_messages_by_content_tool_name_and_tool_calls(upgraded: Upgraded) -> None:
    store, before = upgraded.store, upgraded.before

    def ids_where(pred: Any) -> set[int]:
        return {m["id"] for m in before.messages if pred(m)}

    in_content = ids_where(lambda m: legacy.WORD_IN_CONTENT in (m["content"] or ""))
    by_tool_name = ids_where(lambda m: m["tool_name"] == legacy.TOOL_NAME)
    in_tool_calls = ids_where(lambda m: legacy.WORD_IN_TOOL_CALLS in (m["tool_calls"] or ""))
    cjk = ids_where(lambda m: legacy.CJK_SUBSTRING in (m["content"] or ""))
    accented = ids_where(lambda m: legacy.ACCENTED_WORD in (m["content"] or ""))
    # Only content was indexed before: these words must not be in any content.
    assert not any(legacy.TOOL_NAME in (m["content"] or "") for m in before.messages)
    assert not any(legacy.WORD_IN_TOOL_CALLS in (m["content"] or "") for m in before.messages)
    assert all(len(s) == 1 for s in (in_content, by_tool_name, in_tool_calls, cjk, accented))

    async def found(query: str) -> set[int]:
        return {r["id"] for r in await store.search_messages(query)}

    assert in_content <= await found(legacy.WORD_IN_CONTENT)
    assert accented <= await found(legacy.ACCENTED_WORD)
    assert by_tool_name <= await found(legacy.TOOL_NAME)
    assert in_tool_calls <= await found(legacy.WORD_IN_TOOL_CALLS)
    assert cjk == await found(legacy.CJK_SUBSTRING)

    await store.catch_up_index()
    with connect(upgraded.path) as conn:
        assert fts_rowids(conn, "messages_fts", f"tool_name:{legacy.TOOL_NAME}") == by_tool_name
        assert fts_rowids(conn, "messages_fts", f"tool_calls:{legacy.WORD_IN_TOOL_CALLS}") == in_tool_calls
        assert fts_rowids(conn, "messages_fts_trigram", f'"{legacy.CJK_SUBSTRING}"') == cjk
        # Substring search over tool_calls, in any script.
        assert in_tool_calls <= fts_rowids(conn, "messages_fts_trigram", '"h && dmesg"')


async def test_old_triggers_replaced(upgraded: Upgraded) -> None:
    with connect(upgraded.path) as conn:
        triggers = {r[0]: r[1] for r in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")}
    # The reference's names, so a reference writer's CREATE TRIGGER IF NOT EXISTS adds none of its own.
    assert set(triggers) == V11_TRIGGERS
    # New rows are indexed after their commit, by the indexer: the insert trigger never fires.
    assert "WHEN 0" in triggers["messages_fts_insert"]
    for name in ("messages_fts_delete", "messages_fts_update"):
        assert "fts_indexed_through" in triggers[name]  # only rows the indexer reached are in the index
        assert "messages_fts_trigram" in triggers[name]  # one trigger per event serves both tables
    assert "new.tool_name" in triggers["messages_fts_update"] and "new.tool_calls" in triggers["messages_fts_update"]


async def test_new_messages_follow_into_fts_after_upgrade(upgraded: Upgraded) -> None:
    store = upgraded.store
    sid = "20240501_120000_c0ffee00"
    await store.create_session(sid, "cli")
    mid = await store.append_message(sid, "user", "The axolotl said 北海道の雪まつり again")
    tool_mid = await store.append_message(sid, "tool", "done", tool_name="spreadsheet_edit", tool_call_id="c9")
    assert mid > max(m["id"] for m in upgraded.before.messages)

    async def found(query: str) -> set[int]:
        return {r["id"] for r in await store.search_messages(query)}

    assert await found("axolotl") == {mid}
    assert await found("雪まつり") == {mid}
    assert tool_mid in await found("spreadsheet_edit")

    def rewrite(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE messages SET content = 'The narwhal said hello' WHERE id = ?", (mid,))

    await store.write(rewrite)
    assert await found("axolotl") == set()
    assert await found("雪まつり") == set()
    assert await found("narwhal") == {mid}

    assert await store.delete_session(sid)
    with connect(upgraded.path) as conn:
        for table in FTS_TABLES:
            n = conn.execute(f"SELECT COUNT(*) FROM {table} WHERE rowid IN (?, ?)", (mid, tool_mid)).fetchone()[0]
            assert n == 0, table
    assert await found("narwhal") == set()
    # Old rows are untouched by all of this.
    assert legacy.WORD_IN_CONTENT and await found(legacy.WORD_IN_CONTENT)


async def test_fts_integrity_after_upgrade_and_writes(upgraded: Upgraded) -> None:
    store = upgraded.store
    first = upgraded.before.messages[0]
    await store.append_message(first["session_id"], "assistant", "One more reply after the upgrade")
    await store.clear_messages(upgraded.before.sessions[-1]["id"])
    await store.catch_up_index()
    await store.close()
    with connect(upgraded.path) as conn:
        for table in FTS_TABLES:
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
        n_word = conn.execute("SELECT COUNT(*) FROM messages_fts_docsize").fetchone()[0]
        assert n_word == conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        n_trigram = conn.execute("SELECT COUNT(*) FROM messages_fts_trigram_docsize").fetchone()[0]
        assert n_trigram == conn.execute("SELECT COUNT(*) FROM messages WHERE role != 'tool'").fetchone()[0]


# ------------------------------------------------------- opening again


@pytest.mark.parametrize("version", [*legacy.VERSIONS, None], ids=lambda v: f"v{v}" if v else "fresh")
async def test_second_open_does_not_rebuild_fts(db_path: Path, version: int | None) -> None:
    if version is None:
        db_path.parent.mkdir(parents=True, exist_ok=True)
    else:
        legacy.build_legacy_db(db_path, version)
    async with StateStore(db_path, writer_settings=SETTINGS) as store:
        first = store.writer.migration
        assert first is not None and (first.fts_rebuilt or first.created)
        sid = "20240501_120000_feedface"
        await store.create_session(sid, "cli")
        for word in ("alpha", "bravo", "charlie"):  # one commit each: several FTS segments
            await store.append_message(sid, "user", f"{word} message")
    # A row only a rebuild from messages would lose.
    with connect(db_path) as conn:
        for table in FTS_TABLES:
            conn.execute(f"INSERT INTO {table}(rowid, content) VALUES (987654321, 'sentinelword')")
        before_data = shadow_data(conn)
        before_schema = [tuple(r) for r in conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name")]

    async with StateStore(db_path, writer_settings=SETTINGS) as store:
        report = store.writer.migration
    assert report is not None
    assert report.from_version == report.to_version == latest_version()
    assert report.fts_rebuilt is False
    assert report.created is False
    assert report.applied == []
    assert report.added_columns == []
    assert report.renamed_titles == 0
    with connect(db_path) as conn:
        assert shadow_data(conn) == before_data
        assert [tuple(r) for r in conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name")] == before_schema
        for table in FTS_TABLES:
            assert fts_rowids(conn, table, "sentinelword") == {987654321}


# ------------------------------------------------------- refusing, failing


async def test_newer_schema_is_refused_and_left_byte_identical(db_path: Path) -> None:
    legacy.build_legacy_db(db_path, legacy.NEWEST)
    async with StateStore(db_path, writer_settings=SETTINGS):
        pass
    newer = latest_version() + 1
    with connect(db_path) as conn:
        conn.execute("UPDATE schema_version SET version = ?", (newer,))
    digest, dump = file_digest(db_path), logical_dump(db_path)

    with pytest.raises(SchemaError, match=str(newer)):
        async with StateStore(db_path, writer_settings=SETTINGS):
            pytest.fail("a newer schema must not open")

    assert file_digest(db_path) == digest
    assert logical_dump(db_path) == dump
    wal = db_path.with_name(db_path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


@pytest.mark.parametrize("version", [3, 9])
async def test_conflicting_object_fails_the_upgrade_and_changes_nothing(db_path: Path, version: int) -> None:
    """A view already named like the v10+ trigram table makes the FTS step fail.

    That step runs after the columns were added, the titles renumbered and the
    indexes created: all of it must be rolled back.
    """
    legacy.build_legacy_db(db_path, version)
    with connect(db_path) as conn:
        conn.execute("CREATE VIEW messages_fts_trigram AS SELECT id, content FROM messages")
    digest, dump = file_digest(db_path), logical_dump(db_path)
    assert any("messages_fts_trigram" in line for line in dump)

    with pytest.raises(SchemaError, match="messages_fts_trigram"):
        async with StateStore(db_path, writer_settings=SETTINGS):
            pytest.fail("the upgrade must fail")

    assert logical_dump(db_path) == dump
    assert file_digest(db_path) == digest
    with connect(db_path) as conn:
        assert [r[0] for r in conn.execute("SELECT version FROM schema_version")] == [version]
        assert [r[1] for r in conn.execute("PRAGMA table_info(sessions)")] == legacy.session_columns(version)

    # Once the conflict is gone the same file upgrades (the lock was released too).
    with connect(db_path) as conn:
        conn.execute("DROP VIEW messages_fts_trigram")
    before = snapshot(db_path)
    async with StateStore(db_path, writer_settings=SETTINGS) as store:
        assert store.writer.migration is not None
        assert store.writer.migration.from_version == version
    assert [m["id"] for m in snapshot(db_path).messages] == [m["id"] for m in before.messages]


async def test_failure_at_the_last_step_changes_nothing(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Everything but the version bump has run when this step raises."""
    legacy.build_legacy_db(db_path, 3)
    digest, dump = file_digest(db_path), logical_dump(db_path)
    calls: list[int] = []

    def broken_set_version(conn: sqlite3.Connection, version: int) -> None:
        calls.append(version)
        # Prove the work really was done inside the transaction before failing.
        assert conn.execute("SELECT COUNT(*) FROM messages_fts_trigram").fetchone()[0] > 0
        raise RuntimeError("power cut")

    monkeypatch.setattr(migrate_module, "_set_version", broken_set_version)
    with pytest.raises(RuntimeError, match="power cut"):
        async with StateStore(db_path, writer_settings=SETTINGS):
            pytest.fail("the upgrade must fail")
    assert calls == [latest_version()]
    assert logical_dump(db_path) == dump
    assert file_digest(db_path) == digest


# ------------------------------------------- migrate() on a bare connection


def _bare(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


def test_failed_upgrade_rolls_back_on_the_callers_connection(db_path: Path) -> None:
    """The connection that ran the failed upgrade is left usable, outside any transaction."""
    legacy.build_legacy_db(db_path, 3)
    with connect(db_path) as conn:
        conn.execute("CREATE VIEW messages_fts_trigram AS SELECT id FROM messages")
    dump = logical_dump(db_path)
    conn = _bare(db_path)
    try:
        with pytest.raises(SchemaError, match="from schema version 3") as info:
            migrate_module.migrate(conn)
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
        assert not conn.in_transaction
        # Seen through the same connection: still the v3 schema.
        assert [r[1] for r in conn.execute("PRAGMA table_info(sessions)")] == legacy.session_columns(3)
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(3,)]
    finally:
        conn.close()
    assert logical_dump(db_path) == dump


def test_disk_full_midway_changes_nothing_and_a_retry_succeeds(db_path: Path) -> None:
    """SQLITE_FULL (simulated with max_page_count) during the upgrade."""
    legacy.build_legacy_db(db_path, 5)
    digest, dump = file_digest(db_path), logical_dump(db_path)
    conn = _bare(db_path)
    try:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + 1}")
        with pytest.raises(SchemaError, match="full") as info:
            migrate_module.migrate(conn)
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
        assert not conn.in_transaction
        assert logical_dump(db_path) == dump
        assert file_digest(db_path) == digest
        conn.execute("PRAGMA max_page_count = 1073741823")
        report = migrate_module.migrate(conn)
        assert report.from_version == 5 and report.fts_rebuilt
    finally:
        conn.close()
    assert file_digest(db_path) != digest
    with connect(db_path) as conn:
        assert [r[0] for r in conn.execute("SELECT version FROM schema_version")] == [latest_version()]
        assert len(rows(conn, "messages")) == sum(1 for line in dump if line.startswith('INSERT INTO "messages"'))


def test_upgrade_done_by_another_process_meanwhile_is_not_redone(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The version is read again under the write lock before anything is rebuilt."""
    legacy.build_legacy_db(db_path, 4)
    conn = _bare(db_path)
    try:
        migrate_module.migrate(conn)  # "the other process"
        data = shadow_data(conn)
        real = migrate_module._stored_version
        looks: list[int | None] = []

        def stale_first(c: sqlite3.Connection) -> int | None:
            looks.append(4 if not looks else real(c))  # the unlocked look saw the old file
            return looks[-1]

        monkeypatch.setattr(migrate_module, "_stored_version", stale_first)
        report = migrate_module.migrate(conn)
        assert looks == [4, latest_version()]
        assert report.fts_rebuilt is False
        assert report.renamed_titles == 0 and report.added_columns == []
        assert shadow_data(conn) == data
    finally:
        conn.close()


async def test_the_bindings_table_is_backfilled_from_a_v13_database(db_path: Path) -> None:
    # A v13 database is today's schema without gateway_session_bindings (added by the step
    # counted as 14 then, gateway step 3 now) and without the question and answer of a seen
    # message (gateway step 5), and without the message ids of a streamed reply (gateway step 6).
    store = StateStore(db_path, writer_settings=SETTINGS)
    await store.open()
    await store.close()
    with connect(db_path) as conn:
        conn.execute("DROP TABLE gateway_session_bindings")
        conn.execute("ALTER TABLE gateway_outbound DROP COLUMN message_ids")
        for column in ("session_id", "question_id", "answer"):
            conn.execute(f"ALTER TABLE gateway_inbound_seen DROP COLUMN {column}")
        conn.execute("INSERT INTO gateway_inbound_seen (platform, delivery_key, seen_at) VALUES ('telegram', 'm', 1)")
        # That release counted its steps on the reference's counter and had no key of its own.
        conn.execute("DELETE FROM state_meta WHERE key = 'gateway_schema_version'")
        conn.execute("DELETE FROM schema_version")
        conn.execute("INSERT INTO schema_version(version) VALUES (13)")
        for sid in ("s1", "s2", "s3"):
            conn.execute("INSERT INTO sessions (id, source, started_at) VALUES (?, 'telegram', 1.0)", (sid,))
        # s1 is a chat's current session; s2 was one before /new (only its replies remember where).
        conn.execute("INSERT INTO gateway_session_index (session_key, session_id, platform, user_id, created_at, "
                     "updated_at) VALUES ('k:dm:1', 's1', 'telegram', '1', 5.0, 6.0)")
        for sid, at in (("s2", 3.0), ("s2", 2.0), ("s1", 7.0)):
            conn.execute("INSERT INTO gateway_outbound (session_key, session_id, platform, chat_id, text, "
                         "created_at) VALUES ('k:dm:1', ?, 'telegram', '1', 'hi', ?)", (sid, at))
        conn.execute("INSERT INTO gateway_outbound (session_key, session_id, platform, chat_id, text, created_at) "
                     "VALUES (NULL, 's3', 'telegram', '1', 'notice', 1.0)")  # no key: nothing to learn
    store = StateStore(db_path, writer_settings=SETTINGS)
    await store.open()
    try:
        assert store.writer.migration is not None
        assert (store.writer.migration.from_version, store.writer.migration.to_version) == (13, latest_version())
        assert store.writer.migration.gateway_from == 2
    finally:
        await store.close()
    with connect(db_path) as conn:
        bindings = [tuple(r) for r in conn.execute(
            "SELECT session_key, session_id, platform, user_id, first_bound_at FROM gateway_session_bindings "
            "ORDER BY session_id")]
    assert bindings == [("k:dm:1", "s1", "telegram", "1", 5.0), ("k:dm:1", "s2", "telegram", None, 2.0)]
    with connect(db_path) as conn:
        seen = [tuple(r) for r in conn.execute(
            "SELECT delivery_key, session_id, question_id, answer FROM gateway_inbound_seen")]
    assert seen == [("m", None, None, None)]  # what was seen before is kept, with nothing to replay
