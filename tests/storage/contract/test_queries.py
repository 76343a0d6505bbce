"""``queries`` on both backends: reads of sessions and messages, in the same order.

Rows are written with plain SQL (``_insert_session``, ``_insert_message``), not through
``ops``: these tests are about what the reads return, whoever wrote the rows.
"""

from __future__ import annotations

import asyncio
import json
import time
from functools import partial
from typing import Any

import pytest

from storage import AmbiguousSessionError, ChatOwner, SessionNotFoundError

from .conftest import Db

T0 = 1_700_000_000.0
DAY = 86400.0
#: the reference's v11 columns: a read returns these, on either backend, and nothing more
SESSION_COLUMNS = ["id", "source", "user_id", "model", "model_config", "system_prompt", "parent_session_id",
                   "started_at", "ended_at", "end_reason", "message_count", "tool_call_count", "input_tokens",
                   "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens",
                   "billing_provider", "billing_base_url", "billing_mode", "estimated_cost_usd", "actual_cost_usd",
                   "cost_status", "cost_source", "pricing_version", "title", "api_call_count"]
MESSAGE_COLUMNS = ["id", "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name", "timestamp",
                   "token_count", "finish_reason", "reasoning", "reasoning_content", "reasoning_details",
                   "codex_reasoning_items", "codex_message_items"]
TOOL_CALLS = [
    {"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": '{"cmd": "ls"}'}},
]


@pytest.fixture(autouse=True)
def _pg_server_outside_the_loop(request: pytest.FixtureRequest) -> None:
    # tests/pg/plugin.py migrates its template with asyncio.run: started first from the async
    # ``db`` fixture, that would run inside the test's loop and fail; a sync fixture starts it
    if getattr(request.node, "callspec", None) and request.node.callspec.params.get("db") == "postgresql":
        request.getfixturevalue("pg_server")


def _sql(db: Db, sql: str) -> str:
    return sql.replace("?", "%s") if db.name == "postgresql" else sql


async def _exec(db: Db, sql: str, params: tuple[Any, ...] = ()) -> None:
    await db.write(lambda conn: conn.execute(_sql(db, sql), params))


async def _insert_session(db: Db, session_id: str, source: str = "cli", *, started_at: float = T0,
                          **columns: Any) -> None:
    cols = {"id": session_id, "source": source, "started_at": started_at, **columns}
    marks = ", ".join("?" * len(cols))
    await _exec(db, f"INSERT INTO sessions ({', '.join(cols)}) VALUES ({marks})", tuple(cols.values()))


async def _insert_message(db: Db, session_id: str, role: str, content: str | None, *,
                          timestamp: float = T0, **columns: Any) -> int:
    cols = {"session_id": session_id, "role": role, "content": content, "timestamp": timestamp, **columns}
    for key in ("tool_calls", "reasoning_details", "codex_reasoning_items", "codex_message_items"):
        if key in cols and not isinstance(cols[key], str):
            cols[key] = json.dumps(cols[key])
    marks = ", ".join("?" * len(cols))
    sql = _sql(db, f"INSERT INTO messages ({', '.join(cols)}) VALUES ({marks}) RETURNING id")
    return int(await db.write(lambda conn: conn.execute(sql, tuple(cols.values())).fetchone()[0]))


async def _bind(db: Db, key: str, session_id: str, platform: str, user_id: str | None, at: float = T0) -> None:
    await _exec(db, "INSERT INTO gateway_session_bindings (session_key, session_id, platform, user_id, first_bound_at) "
                    "VALUES (?, ?, ?, ?, ?)", (key, session_id, platform, user_id, at))


async def _supersede(db: Db, session_id: str, message_id: int) -> None:
    await _exec(db, "INSERT INTO gateway_superseded (message_id, session_id, superseded_at) VALUES (?, ?, ?)",
                (message_id, session_id, T0))


def _ids(rows: list[dict[str, Any]]) -> list[str]:
    return [r["id"] for r in rows]


# ---------------------------------------------------------------- sessions


async def test_get_session_returns_its_columns_and_none_when_missing(db: Db) -> None:
    await _insert_session(db, "s1", "telegram", model="m", user_id="u1", system_prompt="be brief",
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
        await _insert_session(db, sid, started_at=T0 + i)
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
        await _insert_session(db, sid, started_at=T0)
    for i in range(12):
        await _insert_session(db, f"ac{i:02d}", started_at=T0 + 1 + i)
    with pytest.raises(AmbiguousSessionError) as info:
        await db.read(partial(db.m.queries.resolve_session_id, id_or_prefix="ab"))
    assert info.value.candidates == ["ab3", "ab1", "ab2"]
    with pytest.raises(AmbiguousSessionError) as info:
        await db.read(partial(db.m.queries.resolve_session_id, id_or_prefix="a"))
    assert info.value.candidates == [f"ac{i:02d}" for i in range(11, 0, -1)]


async def test_resolve_session_by_title_finds_the_newest_of_a_lineage(db: Db) -> None:
    await _insert_session(db, "s1", title="Fix Docker Build", started_at=T0)
    await _insert_session(db, "s2", title="Fix Docker Build #2", started_at=T0 + 1)
    await _insert_session(db, "s3", title="Fix Docker Build #3", started_at=T0 + 2)
    await _insert_session(db, "other", title="fix docker build #9", started_at=T0 + 3)  # another lineage
    await _insert_session(db, "lone", title="Lone #4", started_at=T0 + 4)
    by_title = db.m.queries.resolve_session_by_title
    assert await db.read(partial(by_title, title="Fix Docker Build")) == "s3"
    assert await db.read(partial(by_title, title="Fix Docker Build #2")) == "s2"  # a numbered title is exact
    assert await db.read(partial(by_title, title="fix docker build")) == "other"
    assert await db.read(partial(by_title, title="Lone")) == "lone"
    assert await db.read(partial(by_title, title="Nothing")) is None
    assert await db.read(partial(by_title, title="100%_done")) is None


async def test_title_in_use_latest_session_and_counts(db: Db) -> None:
    await _insert_session(db, "c1", "cli", title="Plan", started_at=T0)
    await _insert_session(db, "c2", "cli", started_at=T0 + 5)
    await _insert_session(db, "t1", "telegram", started_at=T0 + 9)
    await _insert_session(db, "c3", "cli", started_at=T0 + 5)  # ties with c2, stored after it
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
    await _insert_session(db, "root", title="Plan", started_at=T0)
    await _insert_session(db, "child", parent_session_id="root", started_at=T0 + 1)
    await _insert_session(db, "sibling", parent_session_id="root", started_at=T0 + 2)
    await _insert_session(db, "grandchild", parent_session_id="child", started_at=T0 + 3)
    await _insert_session(db, "twin_b", parent_session_id="sibling", started_at=T0 + 4)
    await _insert_session(db, "twin_a", parent_session_id="sibling", started_at=T0 + 4)
    await _insert_session(db, "stranger", started_at=T0 + 5)
    q = db.m.queries

    ancestors = await db.read(partial(q.lineage_ancestors, session_id="grandchild"))
    assert _ids(ancestors) == ["grandchild", "child", "root"]
    assert ancestors[-1] == {"id": "root", "title": "Plan", "started_at": T0, "parent_session_id": None}
    assert ancestors[0]["parent_session_id"] == "child"
    descendants = await db.read(partial(q.lineage_descendants, session_id="root"))
    assert _ids(descendants) == ["root", "child", "sibling", "grandchild", "twin_b", "twin_a"]
    assert _ids(await db.read(partial(q.lineage_descendants, session_id="grandchild"))) == ["grandchild"]
    assert await db.read(partial(q.lineage_ancestors, session_id="missing")) == []
    assert await db.read(partial(q.lineage_descendants, session_id="missing")) == []


# ---------------------------------------------------------- recent sessions


async def test_recent_sessions_with_preview_and_last_active(db: Db) -> None:
    long_question = "Help me refactor the auth module please, it has grown far too large to reason about"
    await _insert_session(db, "old", "cli", user_id="u1", started_at=T0)
    await _insert_message(db, "old", "assistant", "greeting first", timestamp=T0 + 1)
    await _insert_message(db, "old", "user", long_question, timestamp=T0 + 2)
    await _insert_message(db, "old", "user", "second question", timestamp=T0 + 3)
    await _insert_message(db, "old", "assistant", "answer", timestamp=T0 + 50)
    await _insert_session(db, "mid", "telegram", user_id="u2", started_at=T0 + 100)
    await _insert_message(db, "mid", "user", None, timestamp=T0 + 101)
    await _insert_message(db, "mid", "user", "Wëather in Las Vegas? 🌵", timestamp=T0 + 102)
    await _insert_message(db, "mid", "user", "first by id, same instant", timestamp=T0 + 102)
    await _insert_session(db, "new", "cli", user_id="u2", started_at=T0 + 200)  # no messages yet
    recent = db.m.queries.recent_sessions

    rows = await db.read(partial(recent))
    assert _ids(rows) == ["new", "mid", "old"]
    by_id = {r["id"]: r for r in rows}
    assert by_id["old"]["preview"] == long_question[:63] and len(by_id["old"]["preview"]) == 63
    assert by_id["old"]["last_active"] == T0 + 50
    assert by_id["mid"]["preview"] == "Wëather in Las Vegas? 🌵"
    assert by_id["new"]["preview"] == "" and by_id["new"]["last_active"] == T0 + 200
    assert by_id["old"]["source"] == "cli" and by_id["old"]["user_id"] == "u1"
    assert sorted(by_id["old"]) == sorted([*SESSION_COLUMNS, "preview", "last_active"])

    assert _ids(await db.read(partial(recent, source="cli"))) == ["new", "old"]
    assert _ids(await db.read(partial(recent, user_id="u2"))) == ["new", "mid"]
    assert _ids(await db.read(partial(recent, source="cli", user_id="u2"))) == ["new"]
    assert _ids(await db.read(partial(recent, limit=1))) == ["new"]
    assert await db.read(partial(recent, limit=0)) == []
    assert _ids(await db.read(partial(recent, limit=-1))) == ["new", "mid", "old"]  # SQLite: no limit
    assert _ids(await db.read(partial(recent, session_ids=["old", "mid", "nope"]))) == ["mid", "old"]
    assert await db.read(partial(recent, session_ids=[])) == []


async def test_recent_sessions_of_one_chat(db: Db) -> None:
    await _insert_session(db, "mine", "telegram", user_id="7", started_at=T0)
    await _insert_session(db, "moved", "telegram", user_id="7", started_at=T0 + 1)
    await _insert_session(db, "theirs", "telegram", user_id="8", started_at=T0 + 2)
    await _insert_session(db, "term_a", "cli", user_id="alice", started_at=T0 + 3)
    await _insert_session(db, "term_b", "cli", user_id="alice", started_at=T0 + 4)
    await _insert_session(db, "term_bob", "cli", user_id="bob", started_at=T0 + 5)
    await _bind(db, "agent:main:telegram:dm:7", "mine", "telegram", "7")
    await _bind(db, "agent:main:telegram:dm:7", "moved", "telegram", "7")
    await _bind(db, "agent:main:telegram:dm:8", "theirs", "telegram", "8")
    await _bind(db, "agent:main:cli:dm:conn1", "term_a", "cli", "alice")
    recent = db.m.queries.recent_sessions

    chat = ChatOwner("agent:main:telegram:dm:7", "telegram", "7")
    assert _ids(await db.read(partial(recent, owner=chat))) == ["moved", "mine"]
    assert _ids(await db.read(partial(recent, owner=chat, limit=1))) == ["moved"]
    # a new terminal of alice's: the sessions of her terminals and the cli sessions she started
    terminal = ChatOwner("agent:main:cli:dm:conn2", "cli", "alice")
    assert _ids(await db.read(partial(recent, owner=terminal))) == ["term_b", "term_a"]
    assert await db.read(partial(recent, owner=ChatOwner("agent:main:slack:dm:9", "slack", "9"))) == []


async def test_sessions_that_started_together_list_in_the_order_they_were_stored(db: Db) -> None:
    for sid in ("b1", "a2", "c3", "a1"):
        await _insert_session(db, sid, "cli", user_id="u", started_at=T0)
    await _insert_session(db, "zz", "telegram", user_id="u", started_at=T0)
    await _insert_session(db, "later", "cli", user_id="u", started_at=T0 + 1)
    # an update moves a row within PostgreSQL's heap; it stays where it was stored in the order
    await _exec(db, "UPDATE sessions SET title = 'first' WHERE id = 'b1'")
    recent = db.m.queries.recent_sessions
    assert _ids(await db.read(partial(recent))) == ["later", "b1", "a2", "c3", "a1", "zz"]
    assert _ids(await db.read(partial(recent, source="cli"))) == ["later", "b1", "a2", "c3", "a1"]
    assert _ids(await db.read(partial(recent, limit=3))) == ["later", "b1", "a2"]
    top = (await db.read(partial(db.m.queries.token_stats)))["top_sessions"]
    assert _ids(top) == ["b1", "a2", "c3", "a1", "zz", "later"]  # all zero tokens: stored order


# --------------------------------------------------------------- token stats


async def test_token_stats_by_model_and_heaviest_sessions(db: Db) -> None:
    usage: dict[str, Any] = {"input_tokens": 2000, "output_tokens": 400, "cache_read_tokens": 100, "cache_write_tokens": 10,
             "reasoning_tokens": 14, "api_call_count": 2, "estimated_cost_usd": 0.5}
    await _insert_session(db, "a", model="m-big", started_at=T0, **usage)
    await _insert_session(db, "b", model="m-big", started_at=T0 + 1, input_tokens=10, output_tokens=5,
                          estimated_cost_usd=0.01, api_call_count=1)
    await _insert_session(db, "c", model="m-small", started_at=T0 + 2, input_tokens=3000, output_tokens=1,
                          estimated_cost_usd=0.05)
    await _insert_session(db, "d", started_at=T0 + 3)  # no model
    await _insert_session(db, "e", model="free-b", started_at=T0 + 4, input_tokens=1)  # no cost
    await _insert_session(db, "f", model="Free-a", started_at=T0 + 5, input_tokens=1)
    await _insert_session(db, "g", model="m-tie", started_at=T0 + 6, estimated_cost_usd=0.05)

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
    assert _ids(top[:3]) == ["c", "a", "b"]
    assert top[0] == {"id": "c", "title": None, "model": "m-small", "total_tokens": 3001, "estimated_cost_usd": 0.05}
    assert _ids((await db.read(partial(db.m.queries.token_stats, top=1)))["top_sessions"]) == ["c"]
    assert (await db.read(partial(db.m.queries.token_stats, top=0)))["top_sessions"] == []
    assert len((await db.read(partial(db.m.queries.token_stats, top=-1)))["top_sessions"]) == 7


async def test_stats_counts_sessions_messages_and_sources(db: Db) -> None:
    for i, source in enumerate(["cli", "cli", "telegram", "slack", "Slack"]):
        await _insert_session(db, f"s{i}", source, started_at=T0 + i)
        await _insert_message(db, f"s{i}", "user", "hello")
    await _insert_message(db, "s0", "assistant", "hi")
    stats = await db.read(partial(db.m.queries.stats, db_path=getattr(db.store, "path", None)))
    assert (stats["total_sessions"], stats["total_messages"]) == (5, 6)
    assert list(stats["by_source"].items()) == [("cli", 2), ("Slack", 1), ("slack", 1), ("telegram", 1)]
    assert stats["db_size_bytes"] > 0


# ----------------------------------------------------------------- messages


async def test_get_messages_decodes_json_fields_in_id_order(db: Db) -> None:
    await _insert_session(db, "s1")
    await _insert_session(db, "s2")
    first = await _insert_message(db, "s1", "user", "later in time", timestamp=T0 + 9)
    await _insert_message(db, "s2", "user", "elsewhere")
    mid = await _insert_message(
        db, "s1", "assistant", "Here's the answer...", timestamp=T0 + 1, tool_calls=TOOL_CALLS, token_count=150,
        finish_reason="stop", reasoning="thinking", reasoning_content="raw chain",
        reasoning_details=[{"type": "reasoning.text", "text": "step"}],
        codex_reasoning_items=[{"id": "rs_1", "summary": []}], codex_message_items=[{"id": "msg_1"}],
    )
    await _insert_message(db, "s1", "assistant", "bad json", tool_calls="{not json")
    messages = await db.read(partial(db.m.queries.get_messages, session_id="s1"))
    assert [m["id"] for m in messages] == sorted(m["id"] for m in messages) and messages[0]["id"] == first
    assert sorted(messages[0]) == sorted(MESSAGE_COLUMNS)
    m = messages[1]
    assert m["id"] == mid and m["session_id"] == "s1" and m["timestamp"] == T0 + 1
    assert m["tool_calls"] == TOOL_CALLS
    assert m["reasoning_details"] == [{"type": "reasoning.text", "text": "step"}]
    assert m["codex_reasoning_items"] == [{"id": "rs_1", "summary": []}]
    assert m["codex_message_items"] == [{"id": "msg_1"}]
    assert (m["token_count"], m["finish_reason"], m["reasoning"], m["reasoning_content"]) == (
        150, "stop", "thinking", "raw chain")
    assert messages[2]["tool_calls"] == "{not json"  # kept as stored, not an error
    assert messages[0]["tool_calls"] is None
    assert await db.read(partial(db.m.queries.get_messages, session_id="nope")) == []
    assert await db.read(partial(db.m.queries.message_count, session_id="s1")) == 3
    assert await db.read(partial(db.m.queries.message_count, session_id="nope")) == 0


async def test_conversation_is_openai_format_without_superseded_answers(db: Db) -> None:
    await _insert_session(db, "s1")
    await _insert_message(db, "s1", "session_meta", "not for the model")
    await _insert_message(db, "s1", "user", "list files")
    await _insert_message(db, "s1", "assistant", None, tool_calls=TOOL_CALLS, finish_reason="tool_calls",
                          reasoning="need ls", reasoning_details=[{"type": "reasoning.text", "text": "need ls"}])
    await _insert_message(db, "s1", "tool", "a.txt b.txt", tool_call_id="call_1", tool_name="terminal")
    old = await _insert_message(db, "s1", "assistant", "Two files, old answer.", finish_reason="stop")
    await _insert_message(db, "s1", "assistant", "Two files.", finish_reason="stop")
    await _supersede(db, "s1", old)

    conv = await db.read(partial(db.m.queries.get_messages_as_conversation, session_id="s1"))
    assert conv == [
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": None, "tool_calls": TOOL_CALLS, "finish_reason": "tool_calls",
         "reasoning": "need ls", "reasoning_details": [{"type": "reasoning.text", "text": "need ls"}]},
        {"role": "tool", "content": "a.txt b.txt", "tool_call_id": "call_1", "name": "terminal"},
        {"role": "assistant", "content": "Two files.", "finish_reason": "stop"},
    ]
    row = {"role": "tool", "content": "x", "tool_call_id": None, "tool_name": "t", "tool_calls": None}
    assert db.m.queries.to_conversation_message(row) == {"role": "tool", "content": "x", "name": "t"}


async def test_recent_dialogue_is_the_last_visible_exchanges_oldest_first(db: Db) -> None:
    await _insert_session(db, "s1")
    await _insert_message(db, "s1", "user", "q1")
    await _insert_message(db, "s1", "assistant", "a1")
    await _insert_message(db, "s1", "user", "q2")
    await _insert_message(db, "s1", "tool", "tool output")
    await _insert_message(db, "s1", "assistant", None, tool_calls=TOOL_CALLS)
    replaced = await _insert_message(db, "s1", "assistant", "a2 (replaced)")
    await _insert_message(db, "s1", "assistant", "a2")
    await _supersede(db, "s1", replaced)
    dialogue = await db.read(partial(db.m.queries.recent_dialogue, session_id="s1", limit=3))
    assert dialogue == [
        {"role": "user", "content": "q2", "tool_calls": None},
        {"role": "assistant", "content": None, "tool_calls": json.dumps(TOOL_CALLS)},
        {"role": "assistant", "content": "a2", "tool_calls": None},
    ]
    assert await db.read(partial(db.m.queries.recent_dialogue, session_id="s1", limit=0)) == []
    assert len(await db.read(partial(db.m.queries.recent_dialogue, session_id="s1", limit=50))) == 5


# -------------------------------------------------------------------- export


async def test_export_session_and_export_all(db: Db) -> None:
    await _insert_session(db, "c1", "cli", title="Greeting", started_at=T0)
    await _insert_session(db, "t2", "telegram", started_at=T0 + 2)
    await _insert_session(db, "t1", "telegram", started_at=T0 + 2)  # same instant: by id
    await _insert_message(db, "c1", "user", "hi")
    mid = await _insert_message(db, "c1", "assistant", "hello", tool_calls=TOOL_CALLS)
    await _insert_message(db, "t1", "user", "from telegram")
    await _exec(db, "INSERT INTO gateway_attachments (message_id, session_id, kind, mime, name, size, sha256, "
                    "description, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (mid, "c1", "image", "image/png", "cat.png", 12, "ab" * 32, "a cat", T0 + 5))
    q = db.m.queries

    exported = await db.read(partial(q.export_session, session_id="c1"))
    assert exported is not None
    assert (exported["id"], exported["source"], exported["title"]) == ("c1", "cli", "Greeting")
    assert sorted(exported) == sorted([*SESSION_COLUMNS, "messages", "attachments"])
    assert [(m["role"], m["content"]) for m in exported["messages"]] == [("user", "hi"), ("assistant", "hello")]
    assert exported["messages"][1]["tool_calls"] == TOOL_CALLS
    assert exported["attachments"] == [{"message_id": mid, "kind": "image", "mime": "image/png", "name": "cat.png",
                                        "size": 12, "sha256": "ab" * 32, "description": "a cat",
                                        "created_at": T0 + 5}]
    assert await db.read(partial(q.export_session, session_id="missing")) is None

    assert _ids(await db.read(partial(q.export_all))) == ["c1", "t1", "t2"]
    telegram = await db.read(partial(q.export_all, source="telegram"))
    assert _ids(telegram) == ["t1", "t2"]
    assert [m["content"] for m in telegram[0]["messages"]] == ["from telegram"]
    assert telegram[1]["messages"] == [] and telegram[1]["attachments"] == []
    streamed = await db.read(lambda conn: [s["id"] for s in q.iter_export(conn, source="cli")])
    assert streamed == ["c1"]


async def test_a_snapshot_does_not_see_what_commits_during_it(db: Db) -> None:
    await _insert_session(db, "s1")
    loop = asyncio.get_running_loop()
    q = db.m.queries

    def insert(sid: str) -> None:  # another transaction, committed while this read runs
        asyncio.run_coroutine_threadsafe(_insert_session(db, sid), loop).result()

    def read(conn: Any) -> tuple[int, ...]:
        with q.snapshot(conn):
            before = q.count_sessions(conn)
            insert("s2")
            return before, q.count_sessions(conn)

    assert await db.read(read) == (1, 1)

    def read_around(conn: Any) -> tuple[int, ...]:
        outside = q.count_sessions(conn)  # a read before the snapshot sees its own state
        insert("s3")
        with q.snapshot(conn):
            first = q.count_sessions(conn)
            insert("s4")
            second = q.count_sessions(conn)
        return outside, first, second, q.count_sessions(conn)  # and one after it the newest

    assert await db.read(read_around) == (2, 3, 3, 4)

    def load(conn: Any) -> tuple[Any, int]:  # as StateStore.load_conversation reads, again and again
        with q.snapshot(conn):
            return q.get_session(conn, "s1"), len(q.get_messages_as_conversation(conn, "s1"))

    for _ in range(12):  # past psycopg's threshold for preparing a statement it has seen
        session, _n = await db.read(load)
        assert session is not None and session["id"] == "s1"


async def test_a_lookup_with_a_nul_character_finds_nothing(db: Db) -> None:
    await _insert_session(db, "abc", title="Named")
    q = db.m.queries
    assert await db.read(partial(q.get_session, session_id="abc\x00")) is None
    assert await db.read(partial(q.title_in_use, title="Named\x00")) is False
    assert await db.read(partial(q.resolve_session_by_title, title="Named\x00")) is None
    with pytest.raises(SessionNotFoundError):
        await db.read(partial(q.resolve_session_id, id_or_prefix="\x00abc"))


# --------------------------------------------------------------------- prune


async def _aged(db: Db, sid: str, *, days: float, ended: bool, now: float, source: str = "telegram",
                parent: str | None = None, title: str | None = None) -> None:
    await _insert_session(db, sid, source, started_at=now - days * DAY, parent_session_id=parent, title=title,
                          ended_at=now - days * DAY + 60 if ended else None, end_reason="compression" if ended else None)


async def test_prune_plan_keeps_the_ancestors_of_a_kept_session_and_says_which(db: Db) -> None:
    now = time.time()
    await _aged(db, "root", days=200, ended=True, now=now, title="X")
    await _aged(db, "middle", days=150, ended=True, now=now, parent="root", title="X #2")
    await _aged(db, "live", days=1, ended=False, now=now, parent="middle", title="X #3")
    await _aged(db, "lonely", days=200, ended=True, now=now)
    await _aged(db, "young", days=10, ended=True, now=now)
    await _aged(db, "old_cli", days=300, ended=True, now=now, source="cli")
    plan = await db.read(partial(db.m.queries.prune_plan, older_than_days=100, now=now))
    assert plan.delete == ("old_cli", "lonely")  # oldest first
    assert [(s.session_id, s.title, s.continued_by) for s in plan.skipped] == [
        ("root", "X", "live"), ("middle", "X #2", "live")]
    assert await db.read(partial(db.m.queries.prunable_session_ids, older_than_days=100, source="telegram",
                                 now=now)) == ["lonely"]
    assert await db.read(partial(db.m.queries.prunable_session_ids, older_than_days=100, source="",
                                 now=now)) == ["old_cli", "lonely"]
    assert await db.read(partial(db.m.queries.prunable_session_ids, older_than_days=0.5, now=now)) == [
        "old_cli", "lonely", "young"]


async def test_prune_plan_follows_branches_other_sources_and_cycles(db: Db) -> None:
    now = time.time()
    await _aged(db, "tg_parent", days=200, ended=True, now=now)
    await _aged(db, "cli_child", days=200, ended=True, now=now, parent="tg_parent", source="cli")
    plan = await db.read(partial(db.m.queries.prune_plan, older_than_days=100, source="telegram", now=now))
    assert (plan.delete, [s.session_id for s in plan.skipped]) == ((), ["tg_parent"])

    await _aged(db, "trunk", days=300, ended=True, now=now)
    await _aged(db, "dead_branch", days=250, ended=True, now=now, parent="trunk")
    await _aged(db, "live_b", days=2, ended=False, now=now, parent="trunk")
    await _aged(db, "live_a", days=3, ended=False, now=now, parent="trunk")
    await _aged(db, "a", days=200, ended=True, now=now)
    await _aged(db, "b", days=200, ended=True, now=now, parent="a")
    await _exec(db, "UPDATE sessions SET parent_session_id = 'b' WHERE id = 'a'")
    await _aged(db, "c", days=1, ended=False, now=now, parent="b")
    plan = await db.read(partial(db.m.queries.prune_plan, older_than_days=100, now=now))
    assert set(plan.delete) == {"dead_branch", "tg_parent", "cli_child"}
    skipped = {s.session_id: s.continued_by for s in plan.skipped}
    assert skipped == {"trunk": "live_a", "a": "c", "b": "c"}  # the smallest id of those that keep it
