"""The reference's counter stays the reference's; the gateway counts its own tables.

``schema_version`` says 11 (the reference's version) so a later reference
release that migrates 11 -> 12 runs on our file; the gateway's steps are in
``state_meta.gateway_schema_version``. A file the previous release left (its
steps counted as 12..14 on the reference's counter, thread keys as
``:thread:``) upgrades to that, losing nothing, with every session key in the
documented format.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from storage import (
    GATEWAY_VERSION_KEY,
    REFERENCE_VERSION,
    SchemaError,
    StateStore,
    WriterSettings,
    latest_gateway_version,
)

from . import gateway_release as release

SETTINGS = WriterSettings(synchronous="NORMAL")
NOW = 1_790_000_000.0

# Every gateway table with the columns that hold session keys.
KEY_COLUMNS: dict[str, tuple[str, ...]] = {
    "gateway_session_index": ("session_key",),
    "gateway_session_bindings": ("session_key",),
    "gateway_pending_titles": ("session_key",),
    "gateway_outbound": ("session_key",),
    "gateway_handoffs": ("source_key", "target_key"),
    "state_meta": ("key",),
    "gateway_home_channels": (),
    "gateway_inbound_seen": (),
    "sessions": (),
    "messages": (),
}


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.row_factory = sqlite3.Row
    try:
        yield conn
    finally:
        conn.close()


def table_rows(path: Path) -> dict[str, list[dict[str, Any]]]:
    with connect(path) as conn:
        return {t: sorted((dict(r) for r in conn.execute(f"SELECT * FROM {t}")), key=repr) for t in KEY_COLUMNS}


def renamed(key: Any) -> Any:
    if isinstance(key, str) and key.startswith("learning:"):
        return "learning:" + release.RENAMED.get(key[len("learning:"):], key[len("learning:"):])
    return release.RENAMED.get(key, key)


def schema_version(path: Path) -> list[int]:
    with connect(path) as conn:
        return [r[0] for r in conn.execute("SELECT version FROM schema_version")]


def gateway_version(path: Path) -> str | None:
    with connect(path) as conn:
        row = conn.execute("SELECT value FROM state_meta WHERE key = ?", (GATEWAY_VERSION_KEY,)).fetchone()
        return None if row is None else str(row[0])


@pytest.fixture
def release_db(db_path: Path) -> Path:
    return release.build_release_db(db_path, now=NOW)


async def test_a_fresh_file_says_11_and_counts_the_gateway_apart(db_path: Path) -> None:
    async with StateStore(db_path, writer_settings=SETTINGS) as store:
        report = store.writer.migration
        assert report is not None and report.created
        assert (report.to_version, report.gateway_to) == (11, latest_gateway_version())
    assert schema_version(db_path) == [REFERENCE_VERSION] == [11]
    assert gateway_version(db_path) == str(latest_gateway_version())


async def test_a_later_reference_release_runs_its_migration_on_our_file(db_path: Path) -> None:
    async with StateStore(db_path, writer_settings=SETTINGS):
        pass
    # What a reference release with SCHEMA_VERSION = 12 does on open (hermes_state.py's chain).
    ran: list[int] = []
    with connect(db_path) as conn:
        (current,) = conn.execute("SELECT version FROM schema_version").fetchone()
        if current < 12:
            conn.execute("ALTER TABLE sessions ADD COLUMN some_future_column TEXT")
            conn.execute("UPDATE schema_version SET version = 12")
            ran.append(12)
    assert ran == [12]
    # That file is newer than this gateway understands: refused, not mistaken for an old gateway file.
    with pytest.raises(SchemaError, match="schema version 12, newer"):
        async with StateStore(db_path, writer_settings=SETTINGS):
            pytest.fail("a newer reference schema must not open")
    assert schema_version(db_path) == [12]


async def test_a_newer_gateway_step_is_refused(db_path: Path) -> None:
    async with StateStore(db_path, writer_settings=SETTINGS):
        pass
    newer = latest_gateway_version() + 1
    with connect(db_path) as conn:
        conn.execute("UPDATE state_meta SET value = ? WHERE key = ?", (str(newer), GATEWAY_VERSION_KEY))
    with pytest.raises(SchemaError, match=f"gateway schema version {newer}"):
        async with StateStore(db_path, writer_settings=SETTINGS):
            pytest.fail("a newer gateway schema must not open")
    assert gateway_version(db_path) == str(newer)


async def test_the_previous_release_file_becomes_11_plus_the_gateway_counter(release_db: Path) -> None:
    before = table_rows(release_db)
    assert schema_version(release_db) == [14] and gateway_version(release_db) is None
    async with StateStore(release_db, writer_settings=SETTINGS) as store:
        report = store.writer.migration
        assert report is not None
        assert (report.from_version, report.to_version) == (14, 11)
        assert (report.gateway_from, report.gateway_to) == (3, latest_gateway_version())
        assert report.applied == list(range(4, latest_gateway_version() + 1))
        assert not report.fts_rebuilt and not report.created
    assert schema_version(release_db) == [11]
    assert gateway_version(release_db) == str(latest_gateway_version())
    after = table_rows(release_db)
    for table, key_columns in KEY_COLUMNS.items():
        # Columns that later gateway steps add start empty on every old row.
        added = {c: None for c in (after[table][0] if after[table] else {}) if before[table] and c not in before[table][0]}
        want = [{**{c: (renamed(v) if c in key_columns else v) for c, v in row.items()}, **added}
                for row in before[table]]
        if table == "state_meta":
            want.append({"key": GATEWAY_VERSION_KEY, "value": str(latest_gateway_version())})
            # Its FTS tables stay as they are, every row indexed; our triggers index later rows.
            with connect(release_db) as conn:
                last = conn.execute("SELECT COALESCE(max(id), 0) FROM messages").fetchone()[0]
            want += [{"key": "fts_layout", "value": "inline"}, {"key": "fts_indexed_through", "value": str(last)}]
        assert after[table] == sorted(want, key=repr), table
    with connect(release_db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


async def test_every_key_is_in_the_documented_format_after_the_upgrade(release_db: Path) -> None:
    async with StateStore(release_db, writer_settings=SETTINGS):
        pass
    with connect(release_db) as conn:
        keys = {r[0] for t, cols in KEY_COLUMNS.items() for c in cols
                for r in conn.execute(f"SELECT {c} FROM {t}") if r[0] is not None}
    assert not [k for k in keys if ":thread:" in k]
    assert set(release.RENAMED.values()) | set(release.UNCHANGED) <= keys
    assert not set(release.RENAMED) & keys


async def test_reopening_the_upgraded_release_file_changes_nothing(release_db: Path) -> None:
    async with StateStore(release_db, writer_settings=SETTINGS):
        pass
    upgraded = table_rows(release_db)
    async with StateStore(release_db, writer_settings=SETTINGS) as store:
        report = store.writer.migration
        assert report is not None and report.applied == []
        assert (report.from_version, report.gateway_from) == (11, latest_gateway_version())
    assert table_rows(release_db) == upgraded


async def test_when_both_forms_of_a_key_exist_the_newer_binding_wins(release_db: Path) -> None:
    # Not something the old release wrote; a file is never trusted to be tidy.
    with connect(release_db) as conn:
        conn.execute("INSERT INTO sessions (id, source, started_at) VALUES ('stale', 'discord', 1.0)")
        conn.execute("INSERT INTO gateway_session_index (session_key, session_id, platform, created_at, updated_at) "
                     "VALUES (?, 'stale', 'discord', 1.0, 2.0)", (release.DISCORD_THREAD_NEW,))
        conn.execute("INSERT INTO gateway_pending_titles (session_key, title, created_at) VALUES (?, 'kept', 1.0)",
                     (release.SLACK_THREAD_NEW,))
    async with StateStore(release_db, writer_settings=SETTINGS):
        pass
    with connect(release_db) as conn:
        index = dict(conn.execute("SELECT session_key, session_id FROM gateway_session_index").fetchall())
        titles = dict(conn.execute("SELECT session_key, title FROM gateway_pending_titles").fetchall())
    assert index[release.DISCORD_THREAD_NEW] == release.DISCORD_SESSION
    assert release.DISCORD_THREAD_OLD not in index
    assert titles == {release.SLACK_THREAD_NEW: "kept"}
