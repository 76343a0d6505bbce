"""``ownership``: which sessions a chat may see and resume, on both backends."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from storage import ChatOwner

from ._routing_rows import T0, add_session, server_outside_the_loop, sql
from .conftest import Db

_server_first = pytest.fixture(autouse=True)(server_outside_the_loop)

CHAT = ChatOwner("k", "telegram", "u1")


def _bind(db: Db, conn: Any, key: str, session_id: str, *, platform: str = "telegram",
          user_id: str | None = "u1") -> None:
    db.m.bindings.bind(conn, key, session_id, platform=platform, chat_id="c1", chat_type="dm", thread_id=None,
                       user_id=user_id, now=T0)


async def _sessions(db: Db) -> None:
    await add_session(db, "mine_1", started_at=T0, title="Plan")
    await add_session(db, "mine_2", started_at=T0 + 1, title="Plan #2")
    await add_session(db, "theirs", started_at=T0 + 2, title="Plan #3")
    await add_session(db, "minex", started_at=T0 + 3, title="Other")
    await add_session(db, "term_1", "cli", user_id="alice", started_at=T0 + 4)
    await add_session(db, "term_2", "cli", user_id="alice", started_at=T0 + 5)
    await add_session(db, "term_bob", "cli", user_id="bob", started_at=T0 + 6)

    def op(conn: Any) -> None:
        _bind(db, conn, "k", "mine_1")
        _bind(db, conn, "k", "mine_2")
        _bind(db, conn, "k", "minex")
        _bind(db, conn, "k", "gone")  # bound once, deleted since: never listed
        _bind(db, conn, "other", "theirs")
        # a session bob's terminal lived in, later resumed by alice in another terminal
        _bind(db, conn, "agent:main:cli:dm:old", "term_bob", platform="cli", user_id="alice")

    await db.write(op)


async def test_a_chat_owns_the_sessions_it_lived_in(db: Db) -> None:
    own = db.m.ownership
    await _sessions(db)
    assert await db.read(partial(own.owned_ids, chat=CHAT, limit=10)) == ["minex", "mine_2", "mine_1"]
    assert await db.read(partial(own.owned_ids, chat=CHAT, limit=1)) == ["minex"]
    assert await db.read(partial(own.owns, chat=CHAT, session_id="mine_1"))
    assert not await db.read(partial(own.owns, chat=CHAT, session_id="theirs"))
    assert not await db.read(partial(own.owns, chat=CHAT, session_id="gone"))
    assert await db.read(partial(own.owned_ids_by_prefix, chat=CHAT, prefix="mine_")) == ["mine_2", "mine_1"]
    assert await db.read(partial(own.owned_ids_by_prefix, chat=CHAT, prefix="mine")) == ["minex", "mine_2", "mine_1"]
    assert await db.read(partial(own.owned_ids_by_prefix, chat=CHAT, prefix="mine", limit=2)) == ["minex", "mine_2"]
    assert await db.read(partial(own.owned_ids_by_prefix, chat=CHAT, prefix="mine%")) == []  # LIKE is escaped
    assert await db.read(partial(own.owned_ids_by_prefix, chat=CHAT, prefix="the")) == []  # not this chat's
    nobody = ChatOwner("nobody", "telegram", None)
    assert await db.read(partial(own.owned_ids, chat=nobody, limit=10)) == []


async def test_prefix_and_title_lineage_ignore_case_as_sqlite_like_does(db: Db) -> None:
    own = db.m.ownership
    await _sessions(db)
    assert await db.read(partial(own.owned_ids_by_prefix, chat=CHAT, prefix="MINE_")) == ["mine_2", "mine_1"]
    titled = await db.read(partial(own.owned_titled, chat=CHAT, title="Plan", base="Plan"))
    assert sorted((t.id, t.title, t.started_at) for t in titled) == [("mine_1", "Plan", T0),
                                                                      ("mine_2", "Plan #2", T0 + 1)]
    # the exact titles compare with case; the "<base> #<n>" lineage does not
    lower = await db.read(partial(own.owned_titled, chat=CHAT, title="plan", base="plan"))
    assert [(t.id, t.title) for t in lower] == [("mine_2", "Plan #2")]
    assert await db.read(partial(own.owned_titled, chat=CHAT, title="Plan #2", base="Nothing")) != []
    assert await db.read(partial(own.owned_titled, chat=CHAT, title="P_an", base="P%")) == []  # escaped


async def test_a_terminal_owns_what_its_login_lived_in_and_started(db: Db) -> None:
    own = db.m.ownership
    await _sessions(db)
    alice = ChatOwner("agent:main:cli:dm:new", "cli", "alice")
    assert await db.read(partial(own.owned_ids, chat=alice, limit=10)) == ["term_bob", "term_2", "term_1"]
    bob = ChatOwner("agent:main:cli:dm:xyz", "cli", "bob")
    assert await db.read(partial(own.owned_ids, chat=bob, limit=10)) == ["term_bob"]  # he started it
    stranger = ChatOwner("agent:main:cli:dm:xyz", "cli", "carol")
    assert await db.read(partial(own.owned_ids, chat=stranger, limit=10)) == []
    # the login rule is the terminal's only: alice on telegram owns nothing of her terminals
    elsewhere = ChatOwner("agent:main:telegram:dm:alice", "telegram", "alice")
    assert await db.read(partial(own.owned_ids, chat=elsewhere, limit=10)) == []


async def test_the_owned_subquery_filters_another_query(db: Db) -> None:
    await _sessions(db)
    subquery, params = db.m.ownership.owned_ids_sql(CHAT)
    marks = "?" if db.name == "sqlite" else "%s"
    rows = await db.read(lambda c: c.execute(
        f"SELECT id FROM sessions WHERE title IS NOT NULL AND id IN ({subquery}) AND started_at >= {marks} "
        "ORDER BY id", [*params, T0 + 1]).fetchall())
    assert [r[0] for r in rows] == ["mine_2", "minex"]
    count = await db.read(lambda c: sql(db, c, "SELECT count(*) FROM sessions").fetchone())
    assert count[0] == 7
