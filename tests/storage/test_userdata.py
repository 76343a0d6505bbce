"""One sender's data on a real state.db: which sessions are theirs (alone or shared), what an
export reads, and a forget that leaves no row of theirs (FTS tables included) and every row of
the other person as it was."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

import storage.sqlite
from storage import FORGOTTEN_MARKER, StateStore, WriterSettings, forget, ops, userdata

from ._userdata_fixture import (
    ALICE,
    ALICE_SHA,
    ALICE_WORD,
    BOB,
    BOB_SHA,
    BOB_WORD,
    EXPORT_SHA,
    SHARED_SHA,
    fts_hits,
    populate,
    rows_naming,
)

SETTINGS = WriterSettings(synchronous="NORMAL")


@pytest.fixture
async def store(tmp_path: Path) -> StateStore:
    s = StateStore(tmp_path / "state.db", writer_settings=SETTINGS)
    await s.open()
    await s.write(populate)
    await s.catch_up_index()  # the tests count index entries
    yield s  # type: ignore[misc]
    await s.close()


def _snapshot(conn: sqlite3.Connection, sessions: tuple[str, ...]) -> list[tuple[object, ...]]:
    marks = ",".join("?" * len(sessions))
    return [tuple(r) for r in conn.execute(
        f"SELECT id, session_id, role, content, timestamp FROM messages WHERE session_id IN ({marks}) ORDER BY id",
        sessions)]


async def test_sessions_of_tells_alone_from_shared(store: StateStore) -> None:
    mine = await store.read(lambda c: userdata.sessions_of(c, "telegram", ALICE))
    assert {(s.session_id, s.alone) for s in mine} == {
        ("s-alice-dm", True), ("s-alice-dm-2", True), ("s-alice-group", True), ("s-topic", False)}
    bobs = await store.read(lambda c: userdata.sessions_of(c, "telegram", BOB))
    assert {(s.session_id, s.alone) for s in bobs} == {("s-bob-dm", True), ("s-topic", False)}
    # Another platform's user with the same id is someone else.
    assert await store.read(lambda c: userdata.sessions_of(c, "discord", ALICE)) == []


async def test_export_reads_only_their_messages_in_a_shared_session(store: StateStore) -> None:
    own = await store.read(lambda c: list(userdata.iter_messages(c, "s-topic", only=("telegram", ALICE))))
    assert [m["content"] for m in own] == [f"{ALICE_WORD} asks the room"]
    assert own[0]["attachments"][0]["sha256"] == SHARED_SHA
    whole = await store.read(lambda c: list(userdata.iter_messages(c, "s-alice-dm")))
    assert [m["role"] for m in whole] == ["user", "assistant"] * 3
    assert whole[0]["attachments"][0]["name"] == "me.png"
    jobs = await store.read(lambda c: userdata.jobs_of(c, "telegram", ALICE))
    assert [j.id for j in jobs] == [f"job-{ALICE}-daily"]


async def test_forget_leaves_nothing_of_theirs_and_everything_of_the_others(store: StateStore) -> None:
    before_bob = await store.read(lambda c: _snapshot(c, ("s-bob-dm",)))
    topic_before = await store.read(lambda c: _snapshot(c, ("s-topic",)))
    assert await store.read(lambda c: fts_hits(c, ALICE_WORD)) > 0

    outcome = await store.write(lambda c: forget.forget_sender(c, "telegram", ALICE, requested_by="telegram:100",
                                                               forget_memory=False, now=time.time()))
    assert outcome.counts["sessions deleted"] == 3  # her DM, its continuation, her own in the group
    assert outcome.counts["messages deleted"] == 9
    assert outcome.counts["messages replaced by a marker in shared sessions"] == 1
    assert outcome.counts["scheduled jobs"] == 1
    # Her files: her DM's image, the export sent to her; the shared file is still named by bob's row.
    assert set(outcome.digests) == {ALICE_SHA, EXPORT_SHA, SHARED_SHA}
    kept = await store.read(lambda c: forget.referenced_digests(c, outcome.digests))
    assert kept == {SHARED_SHA}

    await store.catch_up_index()
    conn = sqlite3.connect(str(store.path))
    try:
        assert fts_hits(conn, ALICE_WORD) == 0
        assert rows_naming(conn, ALICE_WORD, inside=True) == []
        # Her id is left only in the request row, until the files are dealt with.
        assert rows_naming(conn, ALICE) == ["gateway_forget_requests.user_id"]
        assert _snapshot(conn, ("s-bob-dm",)) == before_bob
        assert fts_hits(conn, BOB_WORD) == 4  # bob's two messages, in both FTS tables
        topic = _snapshot(conn, ("s-topic",))
        assert len(topic) == len(topic_before)  # the conversation keeps its shape
        assert [r[3] for r in topic] == [FORGOTTEN_MARKER, *[r[3] for r in topic_before[1:]]]
        assert conn.execute("SELECT COUNT(*) FROM gateway_cron_jobs WHERE owner_user_id = ?", (BOB,)).fetchone()[0] == 1
        assert conn.execute("SELECT COUNT(*) FROM gateway_attachments WHERE sha256 = ?", (BOB_SHA,)).fetchone()[0] == 1
        assert conn.execute("SELECT COUNT(*) FROM gateway_outbound WHERE chat_id = ?", (BOB,)).fetchone()[0] == 1
        assert conn.execute("SELECT COUNT(*) FROM gateway_session_index").fetchone()[0] == 2  # bob's DM, the topic
    finally:
        conn.close()

    rows = await store.read(forget.unfinished)
    assert [r.id for r in rows] == [outcome.request_id]
    assert await store.write(lambda c: forget.finish(c, outcome.request_id, {"counts": outcome.counts},
                                                     now=time.time()))
    conn = sqlite3.connect(str(store.path))
    try:
        assert rows_naming(conn, ALICE) == []
    finally:
        conn.close()
    assert await store.read(forget.unfinished) == []
    # Forgetting again finds nothing.
    again = await store.write(lambda c: forget.forget_sender(c, "telegram", ALICE, requested_by="cli",
                                                             forget_memory=False, now=time.time()))
    assert sum(again.counts.values()) == 0


async def test_a_failed_forget_deletes_nothing(store: StateStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """One transaction: a forgetter of another table failing rolls every deletion back."""
    def boom(conn: sqlite3.Connection, platform: str, user_id: str) -> int:
        raise RuntimeError("pairing table broke")

    # the SQLite family's own module: ``storage.forget`` routes calls to it (and holds a copy of its names)
    monkeypatch.setattr(storage.sqlite.forget, "TABLE_FORGETTERS", (*forget.TABLE_FORGETTERS, ("broken", boom)))
    with pytest.raises(RuntimeError):
        await store.write(lambda c: forget.forget_sender(c, "telegram", ALICE, requested_by="cli",
                                                         forget_memory=False, now=time.time()))
    assert await store.read(lambda c: fts_hits(c, ALICE_WORD)) == 12  # 6 messages, both FTS tables
    assert len(await store.read(lambda c: userdata.sessions_of(c, "telegram", ALICE))) == 4
    assert await store.read(forget.unfinished) == []


async def test_a_shared_message_stored_before_senders_were_recorded_is_not_hers(store: StateStore) -> None:
    """The documented limit: a message of a shared session without a sender row (written before
    gateway step 13) names nobody, so neither her export nor her forget finds it."""
    old = await store.write(lambda c: ops.append_message(c, "s-topic", "user", f"{ALICE_WORD} long ago"))
    mine = await store.read(lambda c: list(userdata.iter_messages(c, "s-topic", only=("telegram", ALICE))))
    assert old not in [m["id"] for m in mine]
    await store.write(lambda c: forget.forget_sender(c, "telegram", ALICE, requested_by="cli", forget_memory=False,
                                                     now=time.time()))
    row = await store.read(lambda c: c.execute("SELECT content FROM messages WHERE id = ?", (old,)).fetchone())
    assert row[0] == f"{ALICE_WORD} long ago"


async def test_deleting_a_session_takes_its_sender_rows_along(store: StateStore) -> None:
    """``sessions delete`` and a prune: no row saying who wrote a message outlives the message."""
    def count(conn: sqlite3.Connection) -> int:
        return int(conn.execute("SELECT COUNT(*) FROM gateway_message_senders WHERE session_id = 's-topic'")
                   .fetchone()[0])

    assert await store.read(count) == 2
    assert await store.delete_session("s-topic")
    assert await store.read(count) == 0
