"""``storage.copy``: a state.db copied into a real PostgreSQL server and back, every row equal."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import psycopg
import pytest

from storage import StateStore, StorageURL, WriterSettings, inbound, ops, parse_storage_url, sqlite_url
from storage.copy import CopyError, CopyEvent, CopyRefusedError, copy_storage
from storage.postgres import PgStore
from tests.storage._copy_fixture import (
    CJK_WORD,
    LARGE,
    UNICODE,
    make_state_db,
    pg_rows,
    sqlite_rows,
    sqlite_sequence,
)


def _pg(url: str) -> StorageURL:
    return parse_storage_url(url, default_path=Path("unused.db"))


async def test_round_trip_sqlite_to_postgres_and_back_keeps_every_row(pg_url: str, tmp_path: Path) -> None:
    original = tmp_path / "a" / "state.db"
    back = tmp_path / "b" / "state.db"
    await make_state_db(original, extra_sessions=6, messages_each=5)
    before = sqlite_rows(original)
    assert len(before["messages"]) > 40 and len(before["sessions"]) >= 14

    events: list[CopyEvent] = []
    there = await copy_storage(sqlite_url(original), _pg(pg_url), batch_rows=4, on_event=events.append)
    assert there.verified, there.counts
    assert {c.table for c in there.counts} >= {"sessions", "messages", "state_meta", "gateway_pairing_codes"}
    assert any(e.kind == "batch" and e.table == "messages" for e in events)
    # in PostgreSQL: the same rows, value for value (bytes, floats, NULLs, unicode, 400 kB of text)
    in_pg = pg_rows(pg_url, list(before))
    assert in_pg == before
    # the identities go on after the highest id the source ever handed out (one was deleted)
    top = sqlite_sequence(original, "messages")
    assert top > max(r["id"] for r in before["messages"])
    with psycopg.connect(pg_url) as conn:
        new_id = conn.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('z-root', 'user', 'x', 1)"
            " RETURNING id").fetchone()
        assert new_id is not None and new_id[0] == top + 1
        conn.rollback()

    home = await copy_storage(_pg(pg_url), sqlite_url(back), batch_rows=7)
    assert home.verified, home.counts
    assert sqlite_rows(back) == before
    assert sqlite_sequence(back, "messages") >= top
    async with StateStore(back, writer_settings=WriterSettings(synchronous="NORMAL")) as store:
        # the copy's own indexer indexed every message: search finds words, CJK, the large one
        assert await store.read(lambda c: int(c.execute(
            "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'zorbalicious'").fetchone()[0])) >= 3
        found = await store.search_messages(CJK_WORD)
        assert [m["session_id"] for m in found] == ["z-root"]
        assert [m["session_id"] for m in await store.search_messages("tail-marker-zq")] == ["m-middle"]
        session = await store.get_session("a-leaf")
        assert session is not None and session["parent_session_id"] == "m-middle"
        history = await store.get_messages("z-root")
        assert history[0]["content"] == UNICODE and history[1]["content"] is None
        assert (await store.get_messages("m-middle"))[0]["content"] == LARGE
        # and the file goes on as any state.db does; the probe above used top + 1 in PostgreSQL's
        # sequence (a rollback does not give a sequence value back), and the copy carried that too
        new = await store.append_message("a-leaf", "user", "after the copy")
        assert new == top + 2


async def test_a_second_run_resumes_and_finds_nothing_left(pg_url: str, tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    await make_state_db(db)
    batches: list[CopyEvent] = []
    # a byte budget smaller than most rows: batches stop early, and nothing is skipped or doubled
    first = await copy_storage(sqlite_url(db), _pg(pg_url), batch_bytes=300, on_event=batches.append)
    assert len([e for e in batches if e.kind == "batch" and e.table == "messages"]) >= 5
    assert pg_rows(pg_url, ["messages"]) == {"messages": sqlite_rows(db)["messages"]}
    assert first.verified and not first.resumed and first.rows_copied > 0
    notes: list[str] = []
    again = await copy_storage(sqlite_url(db), _pg(pg_url), on_event=lambda e: notes.append(e.message))
    assert again.verified and again.resumed and again.rows_copied == 0
    with psycopg.connect(pg_url) as conn:  # done: no key kept (a key may be a person's id)
        keys = conn.execute("SELECT DISTINCT last_key, done FROM hermes_copy_progress").fetchall()
        assert keys == [(None, 1)]
    assert any("resuming" in n for n in notes)


async def test_a_target_holding_other_data_is_refused_unless_forced(pg_url: str, tmp_path: Path) -> None:
    one, two = tmp_path / "one" / "state.db", tmp_path / "two" / "state.db"
    await make_state_db(one)
    await make_state_db(two, extra_sessions=3, messages_each=2)
    assert (await copy_storage(sqlite_url(one), _pg(pg_url))).verified
    with pytest.raises(CopyRefusedError, match="another source") as refused:
        await copy_storage(sqlite_url(two), _pg(pg_url))
    assert "--force" in str(refused.value)
    forced = await copy_storage(sqlite_url(two), _pg(pg_url), force=True)
    assert forced.verified
    assert pg_rows(pg_url, ["sessions"]) == {"sessions": sqlite_rows(two)["sessions"]}

    # a state.db the gateway already wrote to is not a copy of anything: refused too
    used = tmp_path / "used" / "state.db"
    async with StateStore(used) as store:
        await store.write(lambda c: ops.create_session(c, "mine", "cli"))
    with pytest.raises(CopyRefusedError, match="already holds 1 rows"):
        await copy_storage(_pg(pg_url), sqlite_url(used))
    with sqlite3.connect(used) as conn:  # a refusal leaves nothing behind in that state.db
        assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'hermes_copy_progress'").fetchone() is None
    conn.close()
    forced_back = await copy_storage(_pg(pg_url), sqlite_url(used), force=True)
    assert forced_back.verified
    assert sqlite_rows(used)["sessions"] == sqlite_rows(two)["sessions"]
    async with StateStore(used) as store:
        assert await store.search_messages("quaxbobbly")


async def test_a_source_a_daemon_holds_is_refused(pg_url: str, tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    await make_state_db(db)
    async with StateStore(db):  # a daemon holds the writer lock while it runs
        with pytest.raises(CopyRefusedError, match="in use by process") as refused:
            await copy_storage(sqlite_url(db), _pg(pg_url))
    assert "stop it" in str(refused.value)
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT count(*) FROM sessions").fetchone()
        assert row is not None and row[0] == 0


async def test_a_source_with_messages_not_yet_answered_is_refused(pg_url: str, tmp_path: Path) -> None:
    """A parked message (taken from its platform, not answered) lives only in its backend's own
    inbox: a copy would leave it behind, so it is refused until a gateway answered it."""
    db = tmp_path / "state.db"
    await make_state_db(db)
    async with StateStore(db) as store:
        parked = await store.write(lambda c: inbound.park(c, "agent:main:telegram:dm:1", "telegram", "1", "{}",
                                                          now=1.0))
    with pytest.raises(CopyRefusedError, match=r"1 message.* wait for an answer") as refused:
        await copy_storage(sqlite_url(db), _pg(pg_url))
    assert "start the gateway on it once" in str(refused.value)
    with psycopg.connect(pg_url) as conn:  # nothing was copied
        row = conn.execute("SELECT count(*) FROM sessions").fetchone()
        assert row is not None and row[0] == 0
    async with StateStore(db) as store:
        await store.write(lambda c: inbound.unpark(c, parked))
    assert (await copy_storage(sqlite_url(db), _pg(pg_url))).verified


async def test_the_same_database_on_both_sides_and_a_missing_file_are_refused(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    with pytest.raises(CopyRefusedError, match="same database"):
        await copy_storage(sqlite_url(db), sqlite_url(db))
    with pytest.raises(CopyError, match=r"no state\.db at"):
        await copy_storage(sqlite_url(db), sqlite_url(tmp_path / "other.db"))
    assert not await asyncio.to_thread(db.exists)


async def test_a_nul_character_is_named_and_the_copy_resumes_once_the_source_is_mended(
        pg_url: str, tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    await make_state_db(db)

    def bad(conn: sqlite3.Connection) -> int:
        return ops.append_message(conn, "z-root", "user", "before\x00after")

    async with StateStore(db) as store:
        bad_id = await store.write(bad)
    with pytest.raises(CopyError, match=f"the row id={bad_id} has a NUL character in content"):
        await copy_storage(sqlite_url(db), _pg(pg_url), batch_rows=3)
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT count(*) FROM messages").fetchone()
        assert row is not None and 0 < row[0] < bad_id  # the batches before it are committed
    async with StateStore(db) as store:
        await store.write(lambda c: c.execute("UPDATE messages SET content = 'mended' WHERE id = ?", (bad_id,)))
    notes: list[str] = []
    resumed = await copy_storage(sqlite_url(db), _pg(pg_url), batch_rows=3, on_event=lambda e: notes.append(e.message))
    assert resumed.verified and resumed.resumed
    assert pg_rows(pg_url, ["messages"]) == {"messages": sqlite_rows(db)["messages"]}


async def test_gateway_nodes_connected_to_postgresql_are_pointed_out(pg_url: str, tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    await make_state_db(db)
    notes: list[str] = []
    async with PgStore(pg_url):  # a node, running against the target
        result = await copy_storage(sqlite_url(db), _pg(pg_url), on_event=lambda e: notes.append(e.message))
    assert result.verified
    assert any("hermes-gateway connection(s) are open on the target" in n for n in notes), notes


async def test_a_table_without_a_key_comes_whole_and_sqlite_to_sqlite_works(tmp_path: Path) -> None:
    source, target = tmp_path / "a" / "state.db", tmp_path / "b" / "state.db"
    await make_state_db(source)
    async with StateStore(target):
        pass  # a new state.db, as the gateway makes one
    for db, rows in ((source, [("x" * 50, i) for i in range(40)]), (target, [])):
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE keyless_extra (body TEXT, n INTEGER)")
            conn.executemany("INSERT INTO keyless_extra VALUES (?, ?)", rows)
        conn.close()
    result = await copy_storage(sqlite_url(source), sqlite_url(target), batch_rows=3, batch_bytes=100)
    assert result.verified
    assert sqlite_rows(target) == sqlite_rows(source)
    assert len(sqlite_rows(target)["keyless_extra"]) == 40


async def test_every_table_and_column_of_state_db_has_a_place_in_postgresql(pg_url: str, tmp_path: Path) -> None:
    """A gateway schema step on SQLite without its PostgreSQL migration would lose data in a copy:
    this is where it shows."""
    db = tmp_path / "state.db"
    async with StateStore(db):
        pass
    notes: list[str] = []
    result = await copy_storage(sqlite_url(db), _pg(pg_url), on_event=lambda e: notes.append(e.message))
    assert result.verified
    assert [n for n in notes if "not in the target" in n] == []
    assert all(c.copied for c in result.counts)
    copied = {c.table for c in result.counts}
    with sqlite3.connect(db) as conn:
        tables = {str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " AND name NOT LIKE 'messages_fts%'")}
    conn.close()
    assert tables - {"schema_version", "gateway_parked"} == copied  # parked: refused when not empty (below)
