"""Forgetting one sender (``storage.forget``) on both backends: one transaction that leaves no row
of theirs and every row of the other person as it was; the request row until the files are
dealt with; and on PostgreSQL, a turn stored by another node meanwhile leaves nothing behind."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from functools import partial
from typing import Any

import psycopg
import pytest
from psycopg import errors as pg_errors

from storage import FORGOTTEN_MARKER
from storage.postgres import PgStore
from storage.postgres._conn import sqlite_like_row

from ._people import (
    ALICE,
    ALICE_SHA,
    ALICE_WORD,
    BOB,
    BOB_SHA,
    BOB_WORD,
    DM_A,
    EXPORT_SHA,
    SHARED_SHA,
    T0,
    TOPIC,
    History,
    _pg_server_before_the_loop,  # noqa: F401
    one,
    populate,
    rows,
    rows_naming,
)
from .conftest import Db


@pytest.fixture
async def people(db: Db) -> Db:
    await db.write(partial(populate, db))
    return db


def forget(db: Db, *, by: str = "telegram:100", memory: bool = False, who: str = ALICE) -> Any:
    return partial(db.m.forget.forget_sender, platform="telegram", user_id=who, requested_by=by,
                   forget_memory=memory, now=T0 + 10_000)


async def snapshot(db: Db, session: str) -> list[tuple[Any, ...]]:
    return await rows(db, "SELECT id, session_id, role, content, timestamp FROM messages WHERE session_id = ? "
                          "ORDER BY id", (session,))


async def naming(db: Db, value: str, *, inside: bool = False) -> list[str]:
    return await db.read(lambda c: rows_naming(db, c, value, inside=inside))


async def test_forget_leaves_nothing_of_theirs_and_everything_of_the_others(people: Db) -> None:
    db = people
    before_bob = await snapshot(db, "s-bob-dm")
    topic_before = await snapshot(db, "s-topic")
    assert await naming(db, ALICE_WORD, inside=True)

    outcome = await db.write(forget(db))
    assert outcome.counts["sessions deleted"] == 3  # her DM, its continuation, her own in the group
    assert outcome.counts["messages deleted"] == 9
    assert outcome.counts["messages replaced by a marker in shared sessions"] == 1
    assert outcome.counts["scheduled jobs"] == 1
    assert outcome.counts["delivery records"] == 1  # the export sent to her DM
    assert outcome.counts["dedupe records"] == 5  # her five messages
    assert outcome.counts["pairing records"] == 0
    # Her files: her DM's image, the export sent to her; the shared file is still named by bob's row.
    assert set(outcome.digests) == {ALICE_SHA, EXPORT_SHA, SHARED_SHA} and outcome.counts["files"] == 3
    assert await db.read(partial(db.m.forget.referenced_digests, digests=outcome.digests)) == {SHARED_SHA}

    assert await naming(db, ALICE_WORD, inside=True) == []
    # Her id is left only in the request row, until the files are dealt with.
    assert await naming(db, ALICE) == ["gateway_forget_requests.user_id"]
    assert await snapshot(db, "s-bob-dm") == before_bob
    topic = await snapshot(db, "s-topic")
    assert len(topic) == len(topic_before)  # the conversation keeps its shape
    assert [r[3] for r in topic] == [FORGOTTEN_MARKER, *[r[3] for r in topic_before[1:]]]
    assert await one(db, "SELECT COUNT(*) FROM gateway_cron_jobs WHERE owner_user_id = ?", (BOB,)) == 1
    assert await one(db, "SELECT COUNT(*) FROM gateway_attachments WHERE sha256 = ?", (BOB_SHA,)) == 1
    assert await one(db, "SELECT COUNT(*) FROM gateway_outbound WHERE chat_id = ?", (BOB,)) == 1
    assert await one(db, "SELECT COUNT(*) FROM gateway_session_index") == 2  # bob's DM, the topic
    assert await one(db, "SELECT approved_by FROM gateway_approvals_always WHERE session_id = 's-topic'") is None
    assert await one(db, "SELECT COUNT(*) FROM messages WHERE content LIKE ?", (f"%{BOB_WORD}%",)) == 2
    if db.name == "sqlite":  # state.db's full-text tables have rows of their own
        from tests.storage._userdata_fixture import fts_hits

        await db.settle()
        conn = sqlite3.connect(str(db.store.path))
        try:
            assert fts_hits(conn, ALICE_WORD) == 0 and fts_hits(conn, BOB_WORD) == 4
        finally:
            conn.close()

    assert [r.id for r in await db.read(db.m.forget.unfinished)] == [outcome.request_id]
    request = await db.read(partial(db.m.forget.get_request, request_id=outcome.request_id))
    assert request is not None
    assert (request.platform, request.user_id, request.requested_by, request.state, request.forget_memory) == \
        ("telegram", ALICE, "telegram:100", "files", False)
    assert set(request.digests) == set(outcome.digests) and request.report == {"counts": outcome.counts}
    assert await db.write(partial(db.m.forget.finish, request_id=outcome.request_id,
                                  report={"counts": outcome.counts, "files": 2}, now=T0 + 20_000))
    assert not await db.write(partial(db.m.forget.finish, request_id=outcome.request_id, report={}, now=T0))
    done = await db.read(partial(db.m.forget.get_request, request_id=outcome.request_id))
    assert done is not None
    assert (done.state, done.user_id, done.digests, done.finished_at) == ("done", None, (), T0 + 20_000)
    assert done.report["files"] == 2
    assert await naming(db, ALICE) == []
    assert await db.read(db.m.forget.unfinished) == []
    assert await db.read(partial(db.m.forget.get_request, request_id=999_999)) is None
    # Forgetting again finds nothing.
    again = await db.write(forget(db, by="cli", memory=True))
    assert sum(again.counts.values()) == 0 and again.forget_memory and again.digests == ()


async def test_a_failed_forget_deletes_nothing(people: Db, monkeypatch: pytest.MonkeyPatch) -> None:
    """One transaction: a forgetter of another table failing rolls every deletion back."""
    db = people

    def boom(conn: Any, platform: str, user_id: str) -> int:
        raise RuntimeError("pairing table broke")

    monkeypatch.setattr(db.m.forget, "TABLE_FORGETTERS", (*db.m.forget.TABLE_FORGETTERS, ("broken", boom)))
    before = await naming(db, ALICE)
    with pytest.raises(RuntimeError):
        await db.write(forget(db))
    assert await naming(db, ALICE) == before
    assert len(await db.read(partial(db.m.userdata.sessions_of, platform="telegram", user_id=ALICE))) == 4
    assert await one(db, "SELECT COUNT(*) FROM messages WHERE content LIKE ?", (f"%{ALICE_WORD}%",)) == 6
    assert await db.read(db.m.forget.unfinished) == []


async def test_a_shared_message_stored_before_senders_were_recorded_is_not_hers(people: Db) -> None:
    """The documented limit: a message of a shared session without a sender row (written before
    gateway step 13) names nobody, so neither her export nor her forget finds it."""
    db = people
    old = await db.write(lambda c: History(db, c).message("s-topic", "user", f"{ALICE_WORD} long ago"))
    mine = await db.read(lambda c: list(db.m.userdata.iter_messages(c, "s-topic", only=("telegram", ALICE))))
    assert old not in [m["id"] for m in mine]
    await db.write(forget(db))
    assert await one(db, "SELECT content FROM messages WHERE id = ?", (old,)) == f"{ALICE_WORD} long ago"


async def test_their_pairing_notes_titles_and_old_dedupe_rows_go_and_others_stay(people: Db) -> None:
    db = people

    def more(conn: Any) -> None:
        h = History(db, conn)
        db.m.pairing.add_code(conn, platform="telegram", account_id="bot", user_id=ALICE, user_name=None,
                              chat_id=ALICE, code_hash=b"\x01" * 32, now=T0, ttl=60.0)
        db.m.pairing.allow(conn, platform="telegram", account_id="bot", user_id=ALICE, user_name="alice",
                           approved_by="o", now=T0)
        db.m.pairing.allow(conn, platform="discord", account_id="app", user_id=ALICE, user_name=None,
                           approved_by="o", now=T0)
        # Dedupe rows of before step 13 (no sender): her DM's are found by the chat; chat 1000 is not hers.
        for key in (f"{ALICE}:9001", f"{ALICE}0:9002", f"{BOB}:9003"):
            h.x("INSERT INTO gateway_inbound_seen (platform, delivery_key, seen_at) VALUES ('telegram', ?, ?)",
                key, h.tick())
        h.x("INSERT INTO gateway_pending_titles (session_key, title, created_at) VALUES (?, 'hers', ?)", DM_A, h.now)
        h.x("INSERT INTO gateway_pending_titles (session_key, title, created_at) VALUES (?, 'room', ?)", TOPIC, h.now)
        h.x("INSERT INTO gateway_home_channels (platform, chat_id, set_by, updated_at) VALUES ('telegram', '-5', ?, ?)",
            ALICE, h.now)
        h.x("INSERT INTO gateway_settings (name, value, updated_by, updated_at) VALUES ('a', '1', ?, ?)",
            f"telegram:{ALICE}", h.now)
        h.x("INSERT INTO gateway_settings (name, value, updated_by, updated_at) VALUES ('b', '1', ?, ?)", BOB, h.now)
        h.x("INSERT INTO gateway_session_settings (session_id, name, value, updated_at) VALUES ('s-alice-dm', 'm', "
            "'x', ?)", h.now)
        h.x("INSERT INTO gateway_handoffs (session_id, source_key, source_platform, target_platform, created_at, "
            "updated_at) VALUES ('s-alice-group', ?, 'telegram', 'discord', ?, ?)", DM_A, h.now, h.now)
        h.x("INSERT INTO gateway_superseded (message_id, session_id, superseded_at) SELECT MAX(id), session_id, ? "
            "FROM messages WHERE session_id = 's-alice-dm' GROUP BY session_id", h.now)
        # messages taken and not yet answered (parked): hers go, Bob's stays
        for who in (ALICE, BOB):
            payload = json.dumps({"platform": "telegram", "user_id": who, "text": f"{who} waits"})
            db.m.inbound.park(conn, f"key-{who}", "telegram", who, payload, now=h.now, node_id="n1", token=1)

    await db.write(more)
    outcome = await db.write(forget(db))
    assert outcome.counts["pairing records"] == 2  # her code and telegram allowlist row; discord's is not hers
    assert outcome.counts["dedupe records"] == 7  # and her DM's old row, and her parked message
    parked = "gateway_parked" if db.name == "sqlite" else "cluster_inbox"
    assert await rows(db, f"SELECT session_key FROM {parked}") == [(f"key-{BOB}",)]
    assert sorted(r[0] for r in await rows(db, "SELECT delivery_key FROM gateway_inbound_seen")) == \
        [f"{ALICE}0:9002", f"{BOB}:9003", *sorted(r[0] for r in await rows(
            db, "SELECT delivery_key FROM gateway_inbound_seen WHERE user_id = ?", (BOB,)))]
    assert await rows(db, "SELECT session_key, title FROM gateway_pending_titles") == [(TOPIC, "room")]
    assert await rows(db, "SELECT platform, set_by FROM gateway_home_channels") == [("telegram", None)]
    assert await rows(db, "SELECT name, updated_by FROM gateway_settings ORDER BY name") == [("a", None), ("b", BOB)]
    for table in ("gateway_session_settings", "gateway_handoffs", "gateway_superseded"):
        assert await one(db, f"SELECT COUNT(*) FROM {table}") == 0, table
    assert await rows(db, "SELECT platform, user_id FROM gateway_pairing_allowed") == [("discord", ALICE)]
    assert await naming(db, ALICE) == ["gateway_forget_requests.user_id", "gateway_pairing_allowed.user_id"]


async def _until_someone_waits_for_a_lock(store: PgStore) -> None:
    """Until a transaction of this database waits for a row lock (a condition, not a time)."""
    def waiting(conn: Any) -> bool:
        row = conn.execute("SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND wait_event_type = 'Lock'").fetchone()
        return row is not None and int(row[0]) > 0

    deadline = time.monotonic() + 30
    while not await store.read(waiting):
        assert time.monotonic() < deadline, "nobody waited for the lock"
        await asyncio.sleep(0.01)


def _turn(db: Db, i: int, conn: Any) -> int:
    """Her next message stored into her DM's current session, with its sender row."""
    mid = History(db, conn).message("s-alice-dm-2", "user", f"{ALICE_WORD} late word {i}")
    db.m.userdata.record_sender(conn, "s-alice-dm-2", "telegram", ALICE)
    return int(mid)


async def test_a_turn_another_node_is_storing_is_forgotten_with_her(pg_url: str) -> None:
    """PostgreSQL only: node B is storing her next message when node A's forget begins. A waits for
    B's COMMIT (its lock on her sessions), so what it counts and deletes includes that message."""
    import storage.postgres as pg

    async with PgStore(pg_url, max_size=4) as a:
        pa = Db("postgresql", a, pg)
        await pa.write(partial(populate, pa))
        with psycopg.connect(pg_url, autocommit=True, row_factory=sqlite_like_row) as node_b:
            node_b.execute("BEGIN")
            _turn(pa, 1, node_b)
            forgetting = asyncio.create_task(a.write(forget(pa)))
            await _until_someone_waits_for_a_lock(a)
            node_b.execute("COMMIT")
        outcome = await forgetting
        assert outcome.counts["messages deleted"] == 10  # her nine and the late one
        assert await pa.read(lambda c: rows_naming(pa, c, ALICE_WORD, inside=True)) == []
        assert await pa.read(lambda c: rows_naming(pa, c, ALICE)) == ["gateway_forget_requests.user_id"]


async def test_a_turn_stored_after_a_forget_began_fails_and_leaves_nothing(pg_url: str) -> None:
    """PostgreSQL only: node A's forget holds her sessions; node B's turn into one of them waits,
    then fails (the session is gone): nothing of hers is stored after her forget."""
    import storage.postgres as pg

    async with PgStore(pg_url, max_size=4) as b:
        pb = Db("postgresql", b, pg)
        await pb.write(partial(populate, pb))
        with psycopg.connect(pg_url, autocommit=True, row_factory=sqlite_like_row) as node_a:
            node_a.execute("BEGIN")
            pg.forget.forget_sender(node_a, "telegram", ALICE, requested_by="cli", forget_memory=False, now=T0)
            storing = asyncio.create_task(b.write(partial(_turn, pb, 1)))
            await _until_someone_waits_for_a_lock(b)
            node_a.execute("COMMIT")
        with pytest.raises(pg_errors.ForeignKeyViolation):
            await storing
        assert await pb.read(lambda c: rows_naming(pb, c, ALICE_WORD, inside=True)) == []
