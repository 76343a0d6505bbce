"""``queries`` on both backends: messages, the conversation a model is given, exports, snapshots,
what a prune deletes. Rows are written with plain SQL (``_query_rows``)."""

from __future__ import annotations

import asyncio
import json
import time
from functools import partial
from typing import Any

import pytest

from storage import SessionNotFoundError

from ._query_rows import (
    DAY,
    MESSAGE_COLUMNS,
    SESSION_COLUMNS,
    T0,
    TOOL_CALLS,
    exec_sql,
    ids_of,
    insert_message,
    insert_session,
    supersede,
)
from .conftest import Db


@pytest.fixture(autouse=True)
def _pg_server_outside_the_loop(request: pytest.FixtureRequest) -> None:
    # tests/pg/plugin.py migrates its template with asyncio.run: started first from the async
    # ``db`` fixture, that would run inside the test's loop and fail; a sync fixture starts it
    if getattr(request.node, "callspec", None) and request.node.callspec.params.get("db") == "postgresql":
        request.getfixturevalue("pg_server")


# ----------------------------------------------------------------- messages


async def test_get_messages_decodes_json_fields_in_id_order(db: Db) -> None:
    await insert_session(db, "s1")
    await insert_session(db, "s2")
    first = await insert_message(db, "s1", "user", "later in time", timestamp=T0 + 9)
    await insert_message(db, "s2", "user", "elsewhere")
    mid = await insert_message(
        db, "s1", "assistant", "Here's the answer...", timestamp=T0 + 1, tool_calls=TOOL_CALLS, token_count=150,
        finish_reason="stop", reasoning="thinking", reasoning_content="raw chain",
        reasoning_details=[{"type": "reasoning.text", "text": "step"}],
        codex_reasoning_items=[{"id": "rs_1", "summary": []}], codex_message_items=[{"id": "msg_1"}],
    )
    await insert_message(db, "s1", "assistant", "bad json", tool_calls="{not json")
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
    await insert_session(db, "s1")
    await insert_message(db, "s1", "session_meta", "not for the model")
    await insert_message(db, "s1", "user", "list files")
    await insert_message(db, "s1", "assistant", None, tool_calls=TOOL_CALLS, finish_reason="tool_calls",
                          reasoning="need ls", reasoning_details=[{"type": "reasoning.text", "text": "need ls"}])
    await insert_message(db, "s1", "tool", "a.txt b.txt", tool_call_id="call_1", tool_name="terminal")
    old = await insert_message(db, "s1", "assistant", "Two files, old answer.", finish_reason="stop")
    await insert_message(db, "s1", "assistant", "Two files.", finish_reason="stop")
    await supersede(db, "s1", old)

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
    await insert_session(db, "s1")
    await insert_message(db, "s1", "user", "q1")
    await insert_message(db, "s1", "assistant", "a1")
    await insert_message(db, "s1", "user", "q2")
    await insert_message(db, "s1", "tool", "tool output")
    await insert_message(db, "s1", "assistant", None, tool_calls=TOOL_CALLS)
    replaced = await insert_message(db, "s1", "assistant", "a2 (replaced)")
    await insert_message(db, "s1", "assistant", "a2")
    await supersede(db, "s1", replaced)
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
    await insert_session(db, "c1", "cli", title="Greeting", started_at=T0)
    await insert_session(db, "t2", "telegram", started_at=T0 + 2)
    await insert_session(db, "t1", "telegram", started_at=T0 + 2)  # same instant: by id
    await insert_message(db, "c1", "user", "hi")
    mid = await insert_message(db, "c1", "assistant", "hello", tool_calls=TOOL_CALLS)
    await insert_message(db, "t1", "user", "from telegram")
    await exec_sql(db, "INSERT INTO gateway_attachments (message_id, session_id, kind, mime, name, size, sha256, "
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

    assert ids_of(await db.read(partial(q.export_all))) == ["c1", "t1", "t2"]
    telegram = await db.read(partial(q.export_all, source="telegram"))
    assert ids_of(telegram) == ["t1", "t2"]
    assert [m["content"] for m in telegram[0]["messages"]] == ["from telegram"]
    assert telegram[1]["messages"] == [] and telegram[1]["attachments"] == []
    streamed = await db.read(lambda conn: [s["id"] for s in q.iter_export(conn, source="cli")])
    assert streamed == ["c1"]


async def test_a_snapshot_does_not_see_what_commits_during_it(db: Db) -> None:
    await insert_session(db, "s1")
    loop = asyncio.get_running_loop()
    q = db.m.queries

    def insert(sid: str) -> None:  # another transaction, committed while this read runs
        asyncio.run_coroutine_threadsafe(insert_session(db, sid), loop).result()

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
    await insert_session(db, "abc", title="Named")
    q = db.m.queries
    assert await db.read(partial(q.get_session, session_id="abc\x00")) is None
    assert await db.read(partial(q.title_in_use, title="Named\x00")) is False
    assert await db.read(partial(q.resolve_session_by_title, title="Named\x00")) is None
    with pytest.raises(SessionNotFoundError):
        await db.read(partial(q.resolve_session_id, id_or_prefix="\x00abc"))


# --------------------------------------------------------------------- prune


async def _aged(db: Db, sid: str, *, days: float, ended: bool, now: float, source: str = "telegram",
                parent: str | None = None, title: str | None = None) -> None:
    await insert_session(db, sid, source, started_at=now - days * DAY, parent_session_id=parent, title=title,
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
    await exec_sql(db, "UPDATE sessions SET parent_session_id = 'b' WHERE id = 'a'")
    await _aged(db, "c", days=1, ended=False, now=now, parent="b")
    plan = await db.read(partial(db.m.queries.prune_plan, older_than_days=100, now=now))
    assert set(plan.delete) == {"dead_branch", "tg_parent", "cli_child"}
    skipped = {s.session_id: s.continued_by for s in plan.skipped}
    assert skipped == {"trunk": "live_a", "a": "c", "b": "c"}  # the smallest id of those that keep it
