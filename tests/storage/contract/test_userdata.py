"""One sender's data (``storage.userdata``) on both backends: which sessions are theirs (alone or
shared), and what an export reads. The history: ``_people.populate`` (alice and bob)."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from ._people import (
    ALICE,
    ALICE_WORD,
    BOB,
    DM_A,
    DM_B,
    GROUP_A,
    SHARED_SHA,
    T0,
    TOPIC,
    History,
    _pg_server_before_the_loop,  # noqa: F401
    one,
    populate,
    sql,
)
from .conftest import Db


@pytest.fixture
async def people(db: Db) -> Db:
    await db.write(partial(populate, db))
    return db


async def test_sessions_of_tells_alone_from_shared(people: Db) -> None:
    db = people
    mine = await db.read(partial(db.m.userdata.sessions_of, platform="telegram", user_id=ALICE))
    assert [(s.session_id, s.alone) for s in mine] == [
        ("s-alice-dm", True), ("s-alice-dm-2", True), ("s-alice-group", True), ("s-topic", False)]  # oldest first
    assert (mine[0].title, mine[0].source, mine[0].ended_at is not None) == ("alice plans", "telegram", True)
    bobs = await db.read(partial(db.m.userdata.sessions_of, platform="telegram", user_id=BOB))
    assert [(s.session_id, s.alone) for s in bobs] == [("s-bob-dm", True), ("s-topic", False)]
    # Another platform's user with the same id is someone else.
    assert await db.read(partial(db.m.userdata.sessions_of, platform="discord", user_id=ALICE)) == []


async def test_a_job_run_is_theirs_and_a_stale_binding_is_skipped(people: Db) -> None:
    db = people

    def op(conn: Any) -> None:
        h = History(db, conn)
        h.session("s-run", None)  # a run's session names nobody; its job names alice
        run = db.m.cron.claim_due(conn, f"job-{ALICE}-daily", due=T0 + 3600, next_due=None, missed=0,
                                  now=h.tick())
        assert run is not None
        db.m.cron.set_session(conn, run, "s-run")
        h.x("INSERT INTO gateway_session_bindings (session_key, session_id, platform, user_id, first_bound_at) "
            "VALUES (?, 's-gone', 'telegram', ?, ?)", DM_A, ALICE, h.tick())

    await db.write(op)
    mine = await db.read(partial(db.m.userdata.sessions_of, platform="telegram", user_id=ALICE))
    assert ("s-run", True) in [(s.session_id, s.alone) for s in mine]
    assert "s-gone" not in [s.session_id for s in mine]


async def test_export_reads_only_their_messages_in_a_shared_session(people: Db) -> None:
    db = people
    own = await db.read(lambda c: list(db.m.userdata.iter_messages(c, "s-topic", only=("telegram", ALICE))))
    assert [m["content"] for m in own] == [f"{ALICE_WORD} asks the room"]
    assert own[0]["attachments"][0]["sha256"] == SHARED_SHA
    assert own[0]["attachments"][0]["name"] == "a.txt"
    whole = await db.read(lambda c: list(db.m.userdata.iter_messages(c, "s-alice-dm")))
    assert [m["role"] for m in whole] == ["user", "assistant"] * 3
    first = whole[0]
    assert set(first) == {"id", "role", "timestamp", "content", "attachments"}
    assert first["attachments"] == [{"kind": "image", "mime": "image/png", "name": "me.png", "size": 10,
                                     "sha256": "a" * 64, "description": None,
                                     "created_at": first["attachments"][0]["created_at"]}]
    assert isinstance(first["timestamp"], float) and "attachments" not in whole[1]
    jobs = await db.read(partial(db.m.userdata.jobs_of, platform="telegram", user_id=ALICE))
    assert [j.id for j in jobs] == [f"job-{ALICE}-daily"]
    assert await db.read(partial(db.m.userdata.own_message_ids, session_id="s-topic", platform="telegram",
                                 user_id=BOB)) == [own[0]["id"] + 2]


async def test_an_export_reads_a_long_session_in_batches_in_order(db: Db) -> None:
    count = db.m.userdata.BATCH * 2 + 3

    def op(conn: Any) -> None:
        h = History(db, conn)
        h.session("s-long", ALICE)
        for i in range(count):
            h.message("s-long", "user" if i % 2 == 0 else "assistant", f"line {i}")
        h.x("UPDATE messages SET tool_name = 'terminal' WHERE content = 'line 1'")

    await db.write(op)
    got = await db.read(lambda c: list(db.m.userdata.iter_messages(c, "s-long")))
    assert [m["content"] for m in got] == [f"line {i}" for i in range(count)]
    assert got[1]["tool_name"] == "terminal" and "tool_name" not in got[0]


async def test_record_sender_names_the_latest_message_once_and_nobody_for_no_user(db: Db) -> None:
    def op(conn: Any) -> list[int]:
        h = History(db, conn)
        h.session("s1", ALICE)
        first = h.message("s1", "user", "hi")
        db.m.userdata.record_sender(conn, "s1", "telegram", ALICE)
        db.m.userdata.record_sender(conn, "s1", "telegram", BOB)  # the same message: the first stands
        second = h.message("s1", "user", "again")
        db.m.userdata.record_sender(conn, "s1", "telegram", None)
        db.m.userdata.record_sender(conn, "s1", "telegram", "")
        db.m.userdata.record_sender(conn, "no-such-session", "telegram", ALICE)
        return [first, second]

    first, _ = await db.write(op)
    assert await one(db, "SELECT COUNT(*) FROM gateway_message_senders") == 1
    assert await db.read(partial(db.m.userdata.own_message_ids, session_id="s1", platform="telegram",
                                 user_id=ALICE)) == [first]


def test_is_alone_key(db: Db) -> None:
    alone = db.m.userdata.is_alone_key
    assert alone(DM_A, "telegram", ALICE, ALICE)
    assert not alone(DM_A, "telegram", ALICE, None)  # bound by nobody (a compression's)
    assert not alone(DM_A, "telegram", ALICE, BOB)
    assert alone(GROUP_A, "telegram", ALICE, ALICE)
    assert not alone(TOPIC, "telegram", ALICE, ALICE)
    assert alone("agent:main:slack:channel:C1:U%3A1", "slack", "U:1", "U:1")  # escaped segments
    assert alone("cli:100", "cli", ALICE, ALICE)
    assert not alone("agent:main:discord:dm:100", "telegram", ALICE, ALICE)


async def test_dm_chat_and_keys_of(people: Db) -> None:
    db = people
    assert await db.read(partial(db.m.userdata.dm_chat, platform="telegram", user_id=ALICE)) == ALICE
    assert await db.read(partial(db.m.userdata.dm_chat, platform="telegram", user_id="nobody")) is None

    def later_dm(conn: Any) -> None:
        sql(db, conn, "UPDATE gateway_session_index SET chat_id = 'dm-new', updated_at = updated_at + 1000 "
                      "WHERE session_key = ?", (DM_A,))
        sql(db, conn, "INSERT INTO gateway_session_index (session_key, session_id, platform, chat_id, chat_type, "
                      "user_id, created_at, updated_at) VALUES ('k-old', 's-x', 'telegram', 'dm-old', 'dm', ?, 1, 1)",
            (ALICE,))

    await db.write(later_dm)
    assert await db.read(partial(db.m.userdata.dm_chat, platform="telegram", user_id=ALICE)) == "dm-new"
    keys = await db.read(partial(db.m.userdata.keys_of, platform="telegram", user_id=ALICE))
    assert sorted(keys) == sorted([DM_A, GROUP_A, TOPIC, "k-old"])
    assert sorted(await db.read(partial(db.m.userdata.keys_of, platform="telegram", user_id=BOB))) == [DM_B]
