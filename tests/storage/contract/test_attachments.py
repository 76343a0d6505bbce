"""The ``attachments`` family on both backends: rows of the files that came with messages, their
queries, and rows (then files) going with the conversation they belong to (the behaviours of
tests/storage/test_attachments.py; its migration tests stay there, they are about state.db)."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from storage import AttachmentRow, MediaStore

from ._peek import pg_server_first, rows, run
from .conftest import Db

__all__ = ["pg_server_first"]  # the autouse fixture, imported to be found here

T0 = 1_700_000_000.0
DAY = 86400.0
SHA_A, SHA_B, SHA_C = "a" * 64, "b" * 64, "c" * 64


def _message_with(conn: Any, db: Db, session_id: str, shas: list[str], *, at: float = T0, size: int = 10) -> int:
    """A user message carrying one file per digest, in one transaction, as a turn stores it."""
    mid: int = db.m.ops.append_message(conn, session_id, "user", "[image] look", timestamp=at)
    for sha in shas:
        db.m.attachments.add(conn, message_id=mid, session_id=session_id, kind="image", mime="image/png",
                             name="../../.env", size=size, sha256=sha, description=None, created_at=at)
    return mid


async def _with(db: Db, session_id: str, shas: list[str], *, at: float = T0, size: int = 10) -> int:
    mid: int = await db.write(lambda c: _message_with(c, db, session_id, shas, at=at, size=size))
    return mid


async def _session(db: Db, sid: str, *, started_at: float = T0, ended: bool = False,
                   parent: str | None = None) -> None:
    await db.write(partial(db.m.ops.create_session, session_id=sid, source="telegram", started_at=started_at,
                           parent_session_id=parent))
    if ended:
        await db.write(partial(db.m.ops.end_session, session_id=sid, end_reason="done", at=started_at + 1))


async def _rows(db: Db) -> list[tuple[str, str]]:
    return [(r["session_id"], r["sha256"]) for r in
            await rows(db, "SELECT session_id, sha256 FROM gateway_attachments ORDER BY id")]


async def test_rows_come_back_by_session_message_and_digest(db: Db) -> None:
    await _session(db, "s1")
    await _session(db, "s2")
    m1 = await _with(db, "s1", [SHA_A, SHA_B], at=T0)
    m2 = await _with(db, "s1", [SHA_A], at=T0 + 10)
    m3 = await _with(db, "s2", [SHA_C], at=T0 + 20)
    found = await db.read(partial(db.m.attachments.for_session, session_id="s1"))
    assert [(r.message_id, r.sha256, r.created_at) for r in found] == [(m1, SHA_A, T0), (m1, SHA_B, T0),
                                                                         (m2, SHA_A, T0 + 10)]
    assert found[0] == AttachmentRow(found[0].id, m1, "s1", "image", "image/png", "../../.env", 10, SHA_A, None, T0)
    assert await db.read(partial(db.m.attachments.for_session, session_id="nobody")) == []
    by_message = await db.read(partial(db.m.attachments.for_messages, message_ids=[m3, m1, 999_999, m1]))
    assert list(by_message) == sorted([m1, m3])
    assert {mid: [r.sha256 for r in got] for mid, got in by_message.items()} == {m1: [SHA_A, SHA_B], m3: [SHA_C]}
    assert await db.read(partial(db.m.attachments.for_messages, message_ids=[])) == {}
    newest = await db.read(partial(db.m.attachments.by_digest, session_id="s1", prefix=SHA_A[:12]))
    assert newest is not None and newest.message_id == m2  # the newest of the session's rows
    assert await db.read(partial(db.m.attachments.by_digest, session_id="s2", prefix=SHA_A[:12])) is None
    for bad in ("aaaa", "a" * 11, "%" * 12, "A" * 12, "a" * 12 + "'", "a" * 65, "b" * 11 + "_"):
        assert await db.read(partial(db.m.attachments.by_digest, session_id="s1", prefix=bad)) is None, bad
    full = await db.read(partial(db.m.attachments.by_digest, session_id="s1", prefix=SHA_B))
    assert full is not None and full.sha256 == SHA_B


async def test_a_prefix_matches_only_digests_that_start_with_it(db: Db) -> None:
    await _session(db, "s1")
    near = ["0" * 63 + "1", "0" * 12 + "f" * 52, "1" + "0" * 63, "f" * 64]
    for i, sha in enumerate(near):
        await _with(db, "s1", [sha], at=T0 + i)

    async def digest(prefix: str) -> str | None:
        row = await db.read(partial(db.m.attachments.by_digest, session_id="s1", prefix=prefix))
        return None if row is None else str(row.sha256)

    assert await digest("0" * 12) == near[1]  # both start with it; the newest
    assert await digest("0" * 13) == near[0]
    assert await digest("1" + "0" * 11) == near[2]
    assert await digest("f" * 12) == near[3]
    assert await digest("e" * 12) is None


async def test_a_description_is_recorded_later(db: Db) -> None:
    await _session(db, "s1")
    await _with(db, "s1", [SHA_A])
    (row,) = await db.read(partial(db.m.attachments.for_session, session_id="s1"))
    assert await db.write(partial(db.m.attachments.set_description, attachment_id=row.id,
                                  text="a whiteboard with a plan"))
    assert not await db.write(partial(db.m.attachments.set_description, attachment_id=row.id + 1, text="nothing"))
    (again,) = await db.read(partial(db.m.attachments.for_session, session_id="s1"))
    assert again.description == "a whiteboard with a plan"


async def test_a_digest_that_is_not_one_is_refused(db: Db) -> None:
    await _session(db, "s1")
    for bad in ("../../.env", "A" * 64, "a" * 63):
        with pytest.raises(ValueError):
            await _with(db, "s1", [bad])
    assert await _rows(db) == []
    assert await rows(db, "SELECT id FROM messages") == []  # the whole transaction went


async def test_add_without_a_time_stamps_now(db: Db) -> None:
    await _session(db, "s1")
    before = time.time()
    mid = await db.write(partial(db.m.ops.append_message, session_id="s1", role="user", content="x"))
    aid = await db.write(partial(db.m.attachments.add, message_id=mid, session_id="s1", kind="voice", mime=None,
                                 name=None, size=3, sha256=SHA_A))
    (row,) = await db.read(partial(db.m.attachments.for_session, session_id="s1"))
    assert row.id == aid and (row.kind, row.mime, row.name, row.description) == ("voice", None, None, None)
    assert before <= row.created_at <= time.time()


async def test_referenced_orphans_expired_and_sizes(db: Db) -> None:
    await _session(db, "s1")
    await _with(db, "s1", [SHA_A], at=T0, size=100)
    await _with(db, "s1", [SHA_A, SHA_B], at=T0 + DAY, size=100)
    many = [f"{i:064x}" for i in range(1200)] + [SHA_B]  # more than one SQLite statement's worth
    assert await db.read(partial(db.m.attachments.referenced, sha256s=many)) == {SHA_B}
    assert await db.read(partial(db.m.attachments.referenced, sha256s=[])) == set()
    assert await db.read(partial(db.m.attachments.orphans, sha256s=[SHA_A, SHA_C])) == {SHA_C}
    old = await db.read(partial(db.m.attachments.expired, before=T0 + 1))
    assert [(r.sha256, r.created_at) for r in old] == [(SHA_A, T0)]
    assert await db.read(db.m.attachments.total_bytes_by_sha) == {SHA_A: 100, SHA_B: 100}
    gone = await db.write(partial(db.m.attachments.delete_rows, ids=[r.id for r in old]))
    assert gone == [SHA_A]
    assert await db.read(partial(db.m.attachments.orphans, sha256s=gone)) == set()  # a newer row still names it
    assert [r.sha256 for r in await db.read(db.m.attachments.all_rows)] == [SHA_A, SHA_B]
    assert await db.write(partial(db.m.attachments.delete_rows, ids=[])) == []


async def test_rows_of_sessions_and_dangling_rows_are_deleted(db: Db) -> None:
    for sid in ("s1", "s2", "s3"):
        await _session(db, sid)
    await _with(db, "s1", [SHA_B, SHA_A])
    await _with(db, "s2", [SHA_B])
    kept = await _with(db, "s3", [SHA_C])
    assert await db.write(partial(db.m.attachments.delete_for_sessions, session_ids=["s1", "nobody"])) == [SHA_A,
                                                                                                             SHA_B]
    assert await _rows(db) == [("s2", SHA_B), ("s3", SHA_C)]
    # a tool that knows only the reference schema deleted s2's message: its row dangles
    await db.write(lambda c: run(c, "DELETE FROM messages WHERE session_id = 's2'"))
    assert await db.write(db.m.attachments.delete_dangling) == [SHA_B]
    assert await _rows(db) == [("s3", SHA_C)]
    assert [r.message_id for r in await db.read(db.m.attachments.all_rows)] == [kept]


async def test_deleting_or_clearing_a_session_deletes_its_rows(db: Db) -> None:
    for sid in ("s1", "s2", "s3"):
        await _session(db, sid)
    await _with(db, "s1", [SHA_A, SHA_B])
    await _with(db, "s2", [SHA_B])
    await _with(db, "s3", [SHA_C])
    assert await db.write(partial(db.m.ops.delete_session, session_id="s1"))
    assert await _rows(db) == [("s2", SHA_B), ("s3", SHA_C)]
    assert await db.write(partial(db.m.ops.clear_messages, session_id="s3")) == 1
    assert await _rows(db) == [("s2", SHA_B)]

    def delete_then_fail(conn: Any) -> None:
        db.m.ops.delete_session(conn, "s2")
        raise RuntimeError("the caller's next step failed")

    with pytest.raises(RuntimeError):
        await db.write(delete_then_fail)
    assert await _rows(db) == [("s2", SHA_B)]


async def test_a_prune_deletes_the_rows_of_the_sessions_it_deletes(db: Db) -> None:
    now = time.time()
    await _session(db, "old", started_at=now - 200 * DAY, ended=True)
    await _session(db, "kept_parent", started_at=now - 200 * DAY, ended=True)
    await _session(db, "live", started_at=now - DAY, parent="kept_parent")
    await _session(db, "recent", started_at=now - DAY, ended=True)
    for sid, sha in (("old", SHA_A), ("kept_parent", SHA_B), ("live", SHA_C), ("recent", SHA_A)):
        await _with(db, sid, [sha], at=now - DAY)
    result = await db.write(partial(db.m.ops.prune, older_than_days=100))
    assert result.deleted == 1 and [s.session_id for s in result.skipped] == ["kept_parent"]
    assert await _rows(db) == [("kept_parent", SHA_B), ("live", SHA_C), ("recent", SHA_A)]
    await db.write(partial(db.m.ops.end_session, session_id="live", end_reason="done"))
    assert await db.write(partial(db.m.ops.prune_sessions, older_than_days=0.5)) == 3
    assert await _rows(db) == []


async def test_after_a_delete_the_sweep_removes_only_files_no_row_names(db: Db, tmp_path: Path) -> None:
    media = MediaStore(tmp_path / "home" / "media")
    shared, own = await media.put_bytes(b"forwarded to two chats"), await media.put_bytes(b"only in s1")
    await _session(db, "s1")
    await _session(db, "s2")
    await _with(db, "s1", [shared.sha256, own.sha256])
    await _with(db, "s2", [shared.sha256])
    media.release(shared.sha256, own.sha256)  # their rows are committed

    async def referenced(digests: set[str]) -> set[str]:
        found: set[str] = await db.read(partial(db.m.attachments.referenced, sha256s=digests))
        return found

    def delete(conn: Any) -> list[str]:
        let_go = [r.sha256 for r in db.m.attachments.for_session(conn, "s1")]
        db.m.ops.delete_session(conn, "s1")
        return let_go

    let_go = await db.write(delete)
    assert await media.sweep(referenced, only=let_go) == (1, own.size)
    assert not own.path.exists() and shared.path.exists()
    assert await db.read(partial(db.m.attachments.orphans, sha256s=let_go)) == {own.sha256}
    assert await media.sweep(referenced) == (0, 0)  # everything left is named by some row
