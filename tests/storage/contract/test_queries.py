"""``queries`` on both backends: sessions (by id, prefix, title, lineage), recent sessions, token stats;
in the same order. Rows are written with plain SQL (``_query_rows``)."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from storage import AmbiguousSessionError, ChatOwner, SessionNotFoundError

from ._query_rows import (
    SESSION_COLUMNS,
    T0,
    bind,
    exec_sql,
    ids_of,
    insert_message,
    insert_session,
)
from .conftest import Db


@pytest.fixture(autouse=True)
def _pg_server_outside_the_loop(request: pytest.FixtureRequest) -> None:
    # tests/pg/plugin.py migrates its template with asyncio.run: started first from the async
    # ``db`` fixture, that would run inside the test's loop and fail; a sync fixture starts it
    if getattr(request.node, "callspec", None) and request.node.callspec.params.get("db") == "postgresql":
        request.getfixturevalue("pg_server")


# ---------------------------------------------------------------- sessions


async def test_get_session_returns_its_columns_and_none_when_missing(db: Db) -> None:
    await insert_session(db, "s1", "telegram", model="m", user_id="u1", system_prompt="be brief",
                          model_config='{"temperature":0.2}', input_tokens=5, estimated_cost_usd=0.5)
    s = await db.read(partial(db.m.queries.get_session, session_id="s1"))
    assert s is not None
    assert sorted(s) == sorted(SESSION_COLUMNS)
    assert (s["id"], s["source"], s["model"], s["user_id"], s["system_prompt"]) == ("s1", "telegram", "m", "u1",
                                                                                   "be brief")
    assert s["started_at"] == T0 and isinstance(s["started_at"], float)
    assert s["model_config"] == '{"temperature":0.2}'
    assert (s["message_count"], s["input_tokens"], s["output_tokens"]) == (0, 5, 0)
    assert type(s["input_tokens"]) is int and s["estimated_cost_usd"] == 0.5
    assert s["ended_at"] is None and s["title"] is None and s["parent_session_id"] is None
    assert await db.read(partial(db.m.queries.get_session, session_id="missing")) is None


async def test_resolve_session_id_by_full_id_and_prefix(db: Db) -> None:
    ids = ["20250305_091523_a1b2c3d4", "20250305_091523_a1ffffff", "20250306_100000_0000aa"]
    for i, sid in enumerate(ids):
        await insert_session(db, sid, started_at=T0 + i)
    resolve = db.m.queries.resolve_session_id
    for sid in ids:
        assert await db.read(partial(resolve, id_or_prefix=sid)) == sid
    assert await db.read(partial(resolve, id_or_prefix="20250306")) == ids[2]
    assert await db.read(partial(resolve, id_or_prefix="20250305_091523_a1b")) == ids[0]
    # SQLite's LIKE ignores the case of ASCII letters: so does the prefix on both
    assert await db.read(partial(resolve, id_or_prefix="20250305_091523_A1B")) == ids[0]

    with pytest.raises(AmbiguousSessionError) as info:
        await db.read(partial(resolve, id_or_prefix="20250305"))
    assert info.value.prefix == "20250305"
    assert info.value.candidates == [ids[1], ids[0]]  # newest first

    for missing in ("2099", "%", "2025030_", "_", "x", "\\"):
        with pytest.raises(SessionNotFoundError):
            await db.read(partial(resolve, id_or_prefix=missing))
    with pytest.raises(SessionNotFoundError, match="No session id given"):
        await db.read(partial(resolve, id_or_prefix=""))


async def test_an_ambiguous_prefix_lists_at_most_eleven_and_ties_in_stored_order(db: Db) -> None:
    for sid in ("ab3", "ab1", "ab2"):  # the same instant: the order they were stored in
        await insert_session(db, sid, started_at=T0)
    for i in range(12):
        await insert_session(db, f"ac{i:02d}", started_at=T0 + 1 + i)
    with pytest.raises(AmbiguousSessionError) as info:
        await db.read(partial(db.m.queries.resolve_session_id, id_or_prefix="ab"))
    assert info.value.candidates == ["ab3", "ab1", "ab2"]
    with pytest.raises(AmbiguousSessionError) as info:
        await db.read(partial(db.m.queries.resolve_session_id, id_or_prefix="a"))
    assert info.value.candidates == [f"ac{i:02d}" for i in range(11, 0, -1)]


async def test_resolve_session_by_title_finds_the_newest_of_a_lineage(db: Db) -> None:
    await insert_session(db, "s1", title="Fix Docker Build", started_at=T0)
    await insert_session(db, "s2", title="Fix Docker Build #2", started_at=T0 + 1)
    await insert_session(db, "s3", title="Fix Docker Build #3", started_at=T0 + 2)
    await insert_session(db, "other", title="fix docker build #9", started_at=T0 + 3)  # another lineage
    await insert_session(db, "lone", title="Lone #4", started_at=T0 + 4)
    by_title = db.m.queries.resolve_session_by_title
    assert await db.read(partial(by_title, title="Fix Docker Build")) == "s3"
    assert await db.read(partial(by_title, title="Fix Docker Build #2")) == "s2"  # a numbered title is exact
    assert await db.read(partial(by_title, title="fix docker build")) == "other"
    assert await db.read(partial(by_title, title="Lone")) == "lone"
    assert await db.read(partial(by_title, title="Nothing")) is None
    assert await db.read(partial(by_title, title="100%_done")) is None


async def test_title_in_use_latest_session_and_counts(db: Db) -> None:
    await insert_session(db, "c1", "cli", title="Plan", started_at=T0)
    await insert_session(db, "c2", "cli", started_at=T0 + 5)
    await insert_session(db, "t1", "telegram", started_at=T0 + 9)
    await insert_session(db, "c3", "cli", started_at=T0 + 5)  # ties with c2, stored after it
    q = db.m.queries
    assert await db.read(partial(q.title_in_use, title="Plan")) is True
    assert await db.read(partial(q.title_in_use, title="plan")) is False
    assert await db.read(partial(q.latest_session_id, source="cli")) == "c2"
    assert await db.read(partial(q.latest_session_id, source="telegram")) == "t1"
    assert await db.read(partial(q.latest_session_id, source="slack")) is None
    assert await db.read(partial(q.count_sessions)) == 4
    assert await db.read(partial(q.count_sessions, source="cli")) == 3
    assert await db.read(partial(q.count_sessions, source="")) == 4


async def test_lineage_ancestors_and_descendants(db: Db) -> None:
    await insert_session(db, "root", title="Plan", started_at=T0)
    await insert_session(db, "child", parent_session_id="root", started_at=T0 + 1)
    await insert_session(db, "sibling", parent_session_id="root", started_at=T0 + 2)
    await insert_session(db, "grandchild", parent_session_id="child", started_at=T0 + 3)
    await insert_session(db, "twin_b", parent_session_id="sibling", started_at=T0 + 4)
    await insert_session(db, "twin_a", parent_session_id="sibling", started_at=T0 + 4)
    await insert_session(db, "stranger", started_at=T0 + 5)
    q = db.m.queries

    ancestors = await db.read(partial(q.lineage_ancestors, session_id="grandchild"))
    assert ids_of(ancestors) == ["grandchild", "child", "root"]
    assert ancestors[-1] == {"id": "root", "title": "Plan", "started_at": T0, "parent_session_id": None}
    assert ancestors[0]["parent_session_id"] == "child"
    descendants = await db.read(partial(q.lineage_descendants, session_id="root"))
    assert ids_of(descendants) == ["root", "child", "sibling", "grandchild", "twin_b", "twin_a"]
    assert ids_of(await db.read(partial(q.lineage_descendants, session_id="grandchild"))) == ["grandchild"]
    assert await db.read(partial(q.lineage_ancestors, session_id="missing")) == []
    assert await db.read(partial(q.lineage_descendants, session_id="missing")) == []


# ---------------------------------------------------------- recent sessions


async def test_recent_sessions_with_preview_and_last_active(db: Db) -> None:
    long_question = "Help me refactor the auth module please, it has grown far too large to reason about"
    await insert_session(db, "old", "cli", user_id="u1", started_at=T0)
    await insert_message(db, "old", "assistant", "greeting first", timestamp=T0 + 1)
    await insert_message(db, "old", "user", long_question, timestamp=T0 + 2)
    await insert_message(db, "old", "user", "second question", timestamp=T0 + 3)
    await insert_message(db, "old", "assistant", "answer", timestamp=T0 + 50)
    await insert_session(db, "mid", "telegram", user_id="u2", started_at=T0 + 100)
    await insert_message(db, "mid", "user", None, timestamp=T0 + 101)
    await insert_message(db, "mid", "user", "Wëather in Las Vegas? 🌵", timestamp=T0 + 102)
    await insert_message(db, "mid", "user", "first by id, same instant", timestamp=T0 + 102)
    await insert_session(db, "new", "cli", user_id="u2", started_at=T0 + 200)  # no messages yet
    recent = db.m.queries.recent_sessions

    rows = await db.read(partial(recent))
    assert ids_of(rows) == ["new", "mid", "old"]
    by_id = {r["id"]: r for r in rows}
    assert by_id["old"]["preview"] == long_question[:63] and len(by_id["old"]["preview"]) == 63
    assert by_id["old"]["last_active"] == T0 + 50
    assert by_id["mid"]["preview"] == "Wëather in Las Vegas? 🌵"
    assert by_id["new"]["preview"] == "" and by_id["new"]["last_active"] == T0 + 200
    assert by_id["old"]["source"] == "cli" and by_id["old"]["user_id"] == "u1"
    assert sorted(by_id["old"]) == sorted([*SESSION_COLUMNS, "preview", "last_active"])

    assert ids_of(await db.read(partial(recent, source="cli"))) == ["new", "old"]
    assert ids_of(await db.read(partial(recent, user_id="u2"))) == ["new", "mid"]
    assert ids_of(await db.read(partial(recent, source="cli", user_id="u2"))) == ["new"]
    assert ids_of(await db.read(partial(recent, limit=1))) == ["new"]
    assert await db.read(partial(recent, limit=0)) == []
    assert ids_of(await db.read(partial(recent, limit=-1))) == ["new", "mid", "old"]  # SQLite: no limit
    assert ids_of(await db.read(partial(recent, session_ids=["old", "mid", "nope"]))) == ["mid", "old"]
    assert await db.read(partial(recent, session_ids=[])) == []


async def test_recent_sessions_of_one_chat(db: Db) -> None:
    await insert_session(db, "mine", "telegram", user_id="7", started_at=T0)
    await insert_session(db, "moved", "telegram", user_id="7", started_at=T0 + 1)
    await insert_session(db, "theirs", "telegram", user_id="8", started_at=T0 + 2)
    await insert_session(db, "term_a", "cli", user_id="alice", started_at=T0 + 3)
    await insert_session(db, "term_b", "cli", user_id="alice", started_at=T0 + 4)
    await insert_session(db, "term_bob", "cli", user_id="bob", started_at=T0 + 5)
    await bind(db, "agent:main:telegram:dm:7", "mine", "telegram", "7")
    await bind(db, "agent:main:telegram:dm:7", "moved", "telegram", "7")
    await bind(db, "agent:main:telegram:dm:8", "theirs", "telegram", "8")
    await bind(db, "agent:main:cli:dm:conn1", "term_a", "cli", "alice")
    recent = db.m.queries.recent_sessions

    chat = ChatOwner("agent:main:telegram:dm:7", "telegram", "7")
    assert ids_of(await db.read(partial(recent, owner=chat))) == ["moved", "mine"]
    assert ids_of(await db.read(partial(recent, owner=chat, limit=1))) == ["moved"]
    # a new terminal of alice's: the sessions of her terminals and the cli sessions she started
    terminal = ChatOwner("agent:main:cli:dm:conn2", "cli", "alice")
    assert ids_of(await db.read(partial(recent, owner=terminal))) == ["term_b", "term_a"]
    assert await db.read(partial(recent, owner=ChatOwner("agent:main:slack:dm:9", "slack", "9"))) == []


async def test_sessions_that_started_together_list_in_the_order_they_were_stored(db: Db) -> None:
    for sid in ("b1", "a2", "c3", "a1"):
        await insert_session(db, sid, "cli", user_id="u", started_at=T0)
    await insert_session(db, "zz", "telegram", user_id="u", started_at=T0)
    await insert_session(db, "later", "cli", user_id="u", started_at=T0 + 1)
    # an update moves a row within PostgreSQL's heap; it stays where it was stored in the order
    await exec_sql(db, "UPDATE sessions SET title = 'first' WHERE id = 'b1'")
    recent = db.m.queries.recent_sessions
    assert ids_of(await db.read(partial(recent))) == ["later", "b1", "a2", "c3", "a1", "zz"]
    assert ids_of(await db.read(partial(recent, source="cli"))) == ["later", "b1", "a2", "c3", "a1"]
    assert ids_of(await db.read(partial(recent, limit=3))) == ["later", "b1", "a2"]
    top = (await db.read(partial(db.m.queries.token_stats)))["top_sessions"]
    assert ids_of(top) == ["b1", "a2", "c3", "a1", "zz", "later"]  # all zero tokens: stored order


# --------------------------------------------------------------- token stats


async def test_token_stats_by_model_and_heaviest_sessions(db: Db) -> None:
    usage: dict[str, Any] = {"input_tokens": 2000, "output_tokens": 400, "cache_read_tokens": 100, "cache_write_tokens": 10,
             "reasoning_tokens": 14, "api_call_count": 2, "estimated_cost_usd": 0.5}
    await insert_session(db, "a", model="m-big", started_at=T0, **usage)
    await insert_session(db, "b", model="m-big", started_at=T0 + 1, input_tokens=10, output_tokens=5,
                          estimated_cost_usd=0.01, api_call_count=1)
    await insert_session(db, "c", model="m-small", started_at=T0 + 2, input_tokens=3000, output_tokens=1,
                          estimated_cost_usd=0.05)
    await insert_session(db, "d", started_at=T0 + 3)  # no model
    await insert_session(db, "e", model="free-b", started_at=T0 + 4, input_tokens=1)  # no cost
    await insert_session(db, "f", model="Free-a", started_at=T0 + 5, input_tokens=1)
    await insert_session(db, "g", model="m-tie", started_at=T0 + 6, estimated_cost_usd=0.05)

    stats = await db.read(partial(db.m.queries.token_stats))
    # by cost, descending; no cost last; ties by model name (code points: "F" before "f")
    assert [r["model"] for r in stats["by_model"]] == ["m-big", "m-small", "m-tie", "Free-a", "free-b"]
    big = stats["by_model"][0]
    assert big == {"model": "m-big", "session_count": 2, "total_input": 2010, "total_output": 405,
                   "total_cache_read": 100, "total_cache_write": 10, "total_reasoning": 14,
                   "total_api_calls": 3, "total_cost": pytest.approx(0.51)}
    assert all(type(big[k]) is int for k in ("session_count", "total_input", "total_output", "total_api_calls"))
    assert stats["by_model"][-1]["total_cost"] is None

    top = stats["top_sessions"]
    assert ids_of(top[:3]) == ["c", "a", "b"]
    assert top[0] == {"id": "c", "title": None, "model": "m-small", "total_tokens": 3001, "estimated_cost_usd": 0.05}
    assert ids_of((await db.read(partial(db.m.queries.token_stats, top=1)))["top_sessions"]) == ["c"]
    assert (await db.read(partial(db.m.queries.token_stats, top=0)))["top_sessions"] == []
    assert len((await db.read(partial(db.m.queries.token_stats, top=-1)))["top_sessions"]) == 7


async def test_stats_counts_sessions_messages_and_sources(db: Db) -> None:
    for i, source in enumerate(["cli", "cli", "telegram", "slack", "Slack"]):
        await insert_session(db, f"s{i}", source, started_at=T0 + i)
        await insert_message(db, f"s{i}", "user", "hello")
    await insert_message(db, "s0", "assistant", "hi")
    stats = await db.read(partial(db.m.queries.stats, db_path=getattr(db.store, "path", None)))
    assert (stats["total_sessions"], stats["total_messages"]) == (5, 6)
    assert list(stats["by_source"].items()) == [("cli", 2), ("Slack", 1), ("slack", 1), ("telegram", 1)]
    assert stats["db_size_bytes"] > 0
