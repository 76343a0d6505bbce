"""The attachments table on a real state.db: its migration (fresh, from the gateway step
before it, still readable as the reference's v11), its queries, and rows (then files)
going with the conversation they belong to."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from storage import (
    GATEWAY_VERSION_KEY,
    AttachmentRow,
    MediaStore,
    StateStore,
    WriterSettings,
    attachments,
    latest_gateway_version,
    ops,
)

SETTINGS = WriterSettings(synchronous="NORMAL")
REFERENCE_SQL = Path(__file__).with_name("reference_schema.sql")
T0 = 1_700_000_000.0
DAY = 86400.0
SHA_A, SHA_B, SHA_C = "a" * 64, "b" * 64, "c" * 64
ATTACHMENT_INDEXES = {
    "idx_gateway_attachments_message": ["message_id"],
    "idx_gateway_attachments_session": ["session_id"],
    "idx_gateway_attachments_sha256": ["sha256"],
    "idx_gateway_attachments_created": ["created_at"],
}


def _plain(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(str(path), isolation_level=None)


def _message_with(conn: sqlite3.Connection, session_id: str, shas: list[str], *, at: float = T0,
                  size: int = 10) -> int:
    """A user message carrying one file per digest, in one transaction, as a turn stores it."""
    mid = ops.append_message(conn, session_id, "user", "[image] look", timestamp=at)
    for sha in shas:
        attachments.add(conn, message_id=mid, session_id=session_id, kind="image", mime="image/png",
                        name="../../.env", size=size, sha256=sha, description=None, created_at=at)
    return mid


async def _session(store: StateStore, sid: str, *, started_at: float = T0, ended: bool = False) -> None:
    await store.write(lambda c: ops.create_session(c, sid, "telegram", started_at=started_at))
    if ended:
        await store.write(lambda c: ops.end_session(c, sid, "done", at=started_at + 1))


async def _rows(store: StateStore) -> list[tuple[str, str]]:
    return await store.read(lambda c: [(r[0], r[1]) for r in c.execute(
        "SELECT session_id, sha256 FROM gateway_attachments ORDER BY id")])


# ------------------------------------------------------------------ migration


def _attachment_schema(path: Path) -> tuple[list[tuple[object, ...]], dict[str, list[str]]]:
    conn = _plain(path)
    try:
        columns = [tuple(r[1:4]) for r in conn.execute("PRAGMA table_info(gateway_attachments)")]
        indexes = {name: [r[2] for r in conn.execute(f"PRAGMA index_info({name})")]
                   for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' "
                                               "AND tbl_name = 'gateway_attachments'")}
        return columns, indexes
    finally:
        conn.close()


WANT_COLUMNS = [("id", "INTEGER", 0), ("message_id", "INTEGER", 1), ("session_id", "TEXT", 1),
                ("kind", "TEXT", 1), ("mime", "TEXT", 0), ("name", "TEXT", 0), ("size", "INTEGER", 1),
                ("sha256", "TEXT", 1), ("description", "TEXT", 0), ("created_at", "REAL", 1)]


async def test_a_fresh_database_has_the_table_and_its_indexes(db_path: Path) -> None:
    async with StateStore(db_path, writer_settings=SETTINGS) as store:
        report = store.writer.migration
        assert report is not None and 7 in report.applied and latest_gateway_version() >= 7
    assert _attachment_schema(db_path) == (WANT_COLUMNS, ATTACHMENT_INDEXES)


async def test_the_step_before_upgrades_keeping_every_row(db_path: Path) -> None:
    async with StateStore(db_path, writer_settings=SETTINGS) as store:
        await _session(store, "s1")
        await store.write(lambda c: ops.append_message(c, "s1", "user", "before media"))
    # The file as gateway step 6 left it: every later step's objects gone, its counter at 6.
    conn = _plain(db_path)
    conn.execute("DROP TABLE gateway_attachments")  # its indexes go with it
    conn.execute("UPDATE state_meta SET value = '6' WHERE key = ?", (GATEWAY_VERSION_KEY,))
    conn.close()
    assert _attachment_schema(db_path) == ([], {})
    async with StateStore(db_path, writer_settings=SETTINGS) as store:
        report = store.writer.migration
        assert report is not None
        assert (report.gateway_from, report.applied) == (6, list(range(7, latest_gateway_version() + 1)))
        assert [m["content"] for m in await store.get_messages("s1")] == ["before media"]
        mid = await store.read(lambda c: c.execute("SELECT id FROM messages").fetchone()[0])
        await store.write(lambda c: attachments.add(c, message_id=mid, session_id="s1", kind="voice", mime=None,
                                                    name=None, size=3, sha256=SHA_A, description="hi"))
    assert _attachment_schema(db_path) == (WANT_COLUMNS, ATTACHMENT_INDEXES)


async def test_a_reader_of_the_reference_v11_schema_still_reads_and_deletes(db_path: Path, tmp_path: Path) -> None:
    async with StateStore(db_path, writer_settings=SETTINGS) as store:
        await _session(store, "s1")
        await _session(store, "s2")
        await store.write(lambda c: _message_with(c, "s1", [SHA_A]))
        await store.write(lambda c: _message_with(c, "s2", [SHA_B]))
    reference = _plain(tmp_path / "reference.db")
    reference.executescript(REFERENCE_SQL.read_text())
    ours = _plain(db_path)
    ours.execute("PRAGMA foreign_keys = ON")  # as the reference opens it
    try:
        for table in ("sessions", "messages", "state_meta", "schema_version"):
            assert (ours.execute(f"PRAGMA table_info({table})").fetchall()
                    == reference.execute(f"PRAGMA table_info({table})").fetchall()), table
        assert ours.execute("SELECT version FROM schema_version").fetchall() == [(11,)]
        assert ours.execute("SELECT content FROM messages WHERE session_id = 's1'").fetchall() == [("[image] look",)]
        # The reference's delete_session knows nothing of our table; no foreign key stops it.
        ours.execute("BEGIN")
        ours.execute("DELETE FROM messages WHERE session_id = 's1'")
        ours.execute("DELETE FROM sessions WHERE id = 's1'")
        ours.execute("COMMIT")
    finally:
        ours.close()
        reference.close()
    async with StateStore(db_path, writer_settings=SETTINGS) as store:
        assert await _rows(store) == [("s1", SHA_A), ("s2", SHA_B)]
        assert await store.write(attachments.delete_dangling) == [SHA_A]
        assert await _rows(store) == [("s2", SHA_B)]


# ------------------------------------------------------------------ queries


async def test_rows_come_back_by_session_message_and_digest(store: StateStore) -> None:
    await _session(store, "s1")
    await _session(store, "s2")
    m1 = await store.write(lambda c: _message_with(c, "s1", [SHA_A, SHA_B], at=T0))
    m2 = await store.write(lambda c: _message_with(c, "s1", [SHA_A], at=T0 + 10))
    m3 = await store.write(lambda c: _message_with(c, "s2", [SHA_C], at=T0 + 20))
    rows = await store.read(lambda c: attachments.for_session(c, "s1"))
    assert [(r.message_id, r.sha256, r.created_at) for r in rows] == [(m1, SHA_A, T0), (m1, SHA_B, T0),
                                                                        (m2, SHA_A, T0 + 10)]
    assert rows[0] == AttachmentRow(rows[0].id, m1, "s1", "image", "image/png", "../../.env", 10, SHA_A, None, T0)
    by_message = await store.read(lambda c: attachments.for_messages(c, [m3, m1, 999_999]))
    assert {mid: [r.sha256 for r in found] for mid, found in by_message.items()} == {m1: [SHA_A, SHA_B], m3: [SHA_C]}
    newest = await store.read(lambda c: attachments.by_digest(c, "s1", SHA_A[:12]))
    assert newest is not None and newest.message_id == m2  # the newest of the session's rows
    assert await store.read(lambda c: attachments.by_digest(c, "s2", SHA_A[:12])) is None  # not that session's
    for bad in ("aaaa", "a" * 11, "%" * 12, "A" * 12, "a" * 12 + "'", "a" * 65):
        assert await store.read(lambda c, p=bad: attachments.by_digest(c, "s1", p)) is None, bad
    full = await store.read(lambda c: attachments.by_digest(c, "s1", SHA_B))
    assert full is not None and full.sha256 == SHA_B


async def test_a_description_is_recorded_later(store: StateStore) -> None:
    await _session(store, "s1")
    await store.write(lambda c: _message_with(c, "s1", [SHA_A]))
    (row,) = await store.read(lambda c: attachments.for_session(c, "s1"))
    assert await store.write(lambda c: attachments.set_description(c, row.id, "a whiteboard with a plan"))
    assert not await store.write(lambda c: attachments.set_description(c, row.id + 1, "nothing"))
    (again,) = await store.read(lambda c: attachments.for_session(c, "s1"))
    assert again.description == "a whiteboard with a plan"


async def test_a_digest_that_is_not_one_is_refused(store: StateStore) -> None:
    await _session(store, "s1")
    with pytest.raises(ValueError):
        await store.write(lambda c: _message_with(c, "s1", ["../../.env"]))
    assert await _rows(store) == []


async def test_referenced_orphans_expired_and_sizes(store: StateStore) -> None:
    await _session(store, "s1")
    await store.write(lambda c: _message_with(c, "s1", [SHA_A], at=T0, size=100))
    await store.write(lambda c: _message_with(c, "s1", [SHA_A, SHA_B], at=T0 + DAY, size=100))
    many = [f"{i:064x}" for i in range(1200)] + [SHA_B]  # more than one statement's worth
    assert await store.read(lambda c: attachments.referenced(c, many)) == {SHA_B}
    assert await store.read(lambda c: attachments.orphans(c, [SHA_A, SHA_C])) == {SHA_C}
    old = await store.read(lambda c: attachments.expired(c, T0 + 1))
    assert [(r.sha256, r.created_at) for r in old] == [(SHA_A, T0)]
    assert await store.read(attachments.total_bytes_by_sha) == {SHA_A: 100, SHA_B: 100}
    gone = await store.write(lambda c: attachments.delete_rows(c, [r.id for r in old]))
    assert gone == [SHA_A]
    assert await store.read(lambda c: attachments.orphans(c, gone)) == set()  # a newer row still names it
    assert len(await store.read(attachments.all_rows)) == 2


# ------------------------------------------------------------------ deletion


async def test_deleting_a_session_deletes_its_rows_in_the_same_transaction(store: StateStore) -> None:
    await _session(store, "s1")
    await _session(store, "s2")
    await store.write(lambda c: _message_with(c, "s1", [SHA_A, SHA_B]))
    await store.write(lambda c: _message_with(c, "s2", [SHA_B]))
    assert await store.delete_session("s1")
    assert await _rows(store) == [("s2", SHA_B)]


async def test_a_failed_delete_keeps_the_rows(store: StateStore) -> None:
    await _session(store, "s1")
    await store.write(lambda c: _message_with(c, "s1", [SHA_A]))

    def delete_then_fail(conn: sqlite3.Connection) -> None:
        ops.delete_session(conn, "s1")
        raise RuntimeError("the caller's next step failed")

    with pytest.raises(RuntimeError):
        await store.write(delete_then_fail)
    assert await _rows(store) == [("s1", SHA_A)]


async def test_clearing_messages_deletes_their_rows(store: StateStore) -> None:
    await _session(store, "s1")
    await _session(store, "s2")
    await store.write(lambda c: _message_with(c, "s1", [SHA_A]))
    await store.write(lambda c: _message_with(c, "s2", [SHA_B]))
    assert await store.clear_messages("s1") == 1
    assert await _rows(store) == [("s2", SHA_B)]


async def test_a_prune_deletes_the_rows_of_the_sessions_it_deletes(store: StateStore) -> None:
    now = time.time()
    await _session(store, "old", started_at=now - 200 * DAY, ended=True)
    await _session(store, "kept_parent", started_at=now - 200 * DAY, ended=True)
    await store.write(lambda c: ops.create_session(c, "live", "telegram", parent_session_id="kept_parent",
                                                   started_at=now - DAY))
    await _session(store, "recent", started_at=now - DAY, ended=True)
    for sid, sha in (("old", SHA_A), ("kept_parent", SHA_B), ("live", SHA_C), ("recent", SHA_A)):
        await store.write(lambda c, s=sid, h=sha: _message_with(c, s, [h], at=now - DAY))
    result = await store.prune(older_than_days=100)
    assert result.deleted == 1 and [s.session_id for s in result.skipped] == ["kept_parent"]
    assert await _rows(store) == [("kept_parent", SHA_B), ("live", SHA_C), ("recent", SHA_A)]
    await store.write(lambda c: ops.end_session(c, "live", "done"))
    assert await store.write(lambda c: ops.prune_sessions(c, 0.5)) == 3
    assert await _rows(store) == []


async def test_after_a_delete_the_sweep_removes_only_files_no_row_names(store: StateStore, tmp_path: Path) -> None:
    media = MediaStore(tmp_path / "home" / "media")
    shared, own = await media.put_bytes(b"forwarded to two chats"), await media.put_bytes(b"only in s1")
    await _session(store, "s1")
    await _session(store, "s2")
    await store.write(lambda c: _message_with(c, "s1", [shared.sha256, own.sha256]))
    await store.write(lambda c: _message_with(c, "s2", [shared.sha256]))
    media.release(shared.sha256, own.sha256)  # their rows are committed

    async def referenced(digests: set[str]) -> set[str]:
        return await store.read(lambda c: attachments.referenced(c, digests))

    def delete(conn: sqlite3.Connection) -> list[str]:
        let_go = [r.sha256 for r in attachments.for_session(conn, "s1")]
        ops.delete_session(conn, "s1")
        return let_go

    let_go = await store.write(delete)
    assert await media.sweep(referenced, only=let_go) == (1, own.size)
    assert not own.path.exists() and shared.path.exists()
    assert await store.read(lambda c: attachments.orphans(c, let_go)) == {own.sha256}
    assert await media.sweep(referenced) == (0, 0)  # everything left is named by some row
