"""The ``ops`` family on both backends: sessions and messages written, titles, deletes, prunes
(the behaviours of tests/storage/test_operations.py and test_prune_lineage.py, read back with
plain SQL on the shared tables rather than through another family)."""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import Any

import pytest

from storage import InvalidTitleError, PruneSkip, SessionNotFoundError, TitleConflictError

from ._peek import count, messages, pg_server_first, rows, run, session, values
from .conftest import Db

__all__ = ["pg_server_first"]  # the autouse fixture, imported to be found here

DAY = 86400.0
T0 = 1_700_000_000.0
SHA = "e" * 64
TOOL_CALLS = [
    {"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": '{"cmd": "ls"}'}},
    {"id": "call_2", "type": "function", "function": {"name": "web_search", "arguments": '{"q": "x"}'}},
]


async def _create(db: Db, sid: str, source: str = "cli", **kw: Any) -> bool:
    created: bool = await db.write(partial(db.m.ops.create_session, session_id=sid, source=source, **kw))
    return created


async def _append(db: Db, sid: str, role: str, content: str | None = None, **kw: Any) -> int:
    mid: int = await db.write(partial(db.m.ops.append_message, session_id=sid, role=role, content=content, **kw))
    return mid


async def _title(db: Db, sid: str, title: str | None) -> str | None:
    got: str | None = await db.write(partial(db.m.ops.set_session_title, session_id=sid, title=title))
    return got


# ----------------------------------------------------------------- sessions


async def test_create_session_stores_metadata_and_is_idempotent(db: Db) -> None:
    assert await _create(db, "s1", "telegram", model="anthropic/claude-sonnet-4.6", user_id="user_1",
                         model_config={"temperature": 0.2}, system_prompt="be brief", started_at=T0)
    assert not await _create(db, "s1", "cli", started_at=T0 + 5)
    s = await session(db, "s1")
    assert s is not None
    assert (s["source"], s["model"], s["user_id"], s["system_prompt"]) == (
        "telegram", "anthropic/claude-sonnet-4.6", "user_1", "be brief")
    assert s["started_at"] == T0 and s["model_config"] == '{"temperature":0.2}'
    assert s["ended_at"] is None and s["end_reason"] is None and s["parent_session_id"] is None
    assert (s["message_count"], s["tool_call_count"], s["input_tokens"], s["api_call_count"]) == (0, 0, 0, 0)
    assert s["title"] is None


async def test_end_session_first_end_wins_and_reopen_clears(db: Db) -> None:
    await _create(db, "s1", started_at=T0)
    assert await db.write(partial(db.m.ops.end_session, session_id="s1", end_reason="user_exit", at=T0 + 9))
    assert not await db.write(partial(db.m.ops.end_session, session_id="s1", end_reason="timeout"))
    s = await session(db, "s1")
    assert s is not None and (s["end_reason"], s["ended_at"]) == ("user_exit", T0 + 9)
    await db.write(partial(db.m.ops.reopen_session, session_id="s1"))
    s = await session(db, "s1")
    assert s is not None and s["ended_at"] is None and s["end_reason"] is None
    assert await db.write(partial(db.m.ops.end_session, session_id="s1", end_reason="reset"))


async def test_updates_of_a_session_and_unknown_sessions(db: Db) -> None:
    await _create(db, "s1", system_prompt="v1", model="m1", model_config={"a": 1}, started_at=T0)
    await db.write(partial(db.m.ops.update_system_prompt, session_id="s1", system_prompt="v2"))
    await db.write(partial(db.m.ops.update_session_model, session_id="s1", model="m2"))
    s = await session(db, "s1")
    assert s is not None and (s["system_prompt"], s["model"], s["model_config"]) == ("v2", "m2", '{"a":1}')
    await db.write(partial(db.m.ops.update_session_model, session_id="s1", model=None, model_config='{"b":2}'))
    s = await session(db, "s1")
    assert s is not None and (s["model"], s["model_config"]) == (None, '{"b":2}')
    for op in (partial(db.m.ops.end_session, session_id="nope", end_reason="x"),
               partial(db.m.ops.reopen_session, session_id="nope"),
               partial(db.m.ops.update_system_prompt, session_id="nope", system_prompt="x"),
               partial(db.m.ops.update_session_model, session_id="nope", model="x"),
               partial(db.m.ops.record_usage, session_id="nope", input_tokens=1),
               partial(db.m.ops.set_session_title, session_id="nope", title="x"),
               partial(db.m.ops.clear_messages, session_id="nope")):
        with pytest.raises(SessionNotFoundError):
            await db.write(op)


# ----------------------------------------------------------------- messages


async def test_append_message_returns_increasing_ids_and_counts(db: Db) -> None:
    await _create(db, "s1", started_at=T0)
    await _create(db, "s2", started_at=T0)
    ids = [
        await _append(db, "s1", "user", "hello"),
        await _append(db, "s2", "user", "other session"),
        await _append(db, "s1", "assistant", None, tool_calls=TOOL_CALLS),
        await _append(db, "s1", "tool", "ok", tool_call_id="call_1", tool_name="terminal"),
        await _append(db, "s1", "assistant", "done", tool_calls=TOOL_CALLS[:1]),
    ]
    assert all(isinstance(i, int) for i in ids)
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    s1, s2 = await session(db, "s1"), await session(db, "s2")
    assert s1 is not None and (s1["message_count"], s1["tool_call_count"]) == (4, 3)
    assert s2 is not None and (s2["message_count"], s2["tool_call_count"]) == (1, 0)
    assert [m["id"] for m in await messages(db, "s1")] == [ids[0], ids[2], ids[3], ids[4]]


async def test_append_message_to_an_unknown_session_stores_nothing(db: Db) -> None:
    with pytest.raises(SessionNotFoundError):
        await _append(db, "ghost", "user", "lost?")
    assert await count(db, "messages") == 0


async def test_a_caller_that_catches_the_unknown_session_goes_on_in_its_transaction(db: Db) -> None:
    def op(conn: Any) -> None:
        try:
            db.m.ops.append_message(conn, "ghost", "user", "lost?")
        except SessionNotFoundError:
            db.m.ops.create_session(conn, "ghost", "cli", started_at=T0)
            db.m.ops.append_message(conn, "ghost", "user", "found")

    await db.write(op)
    assert [m["content"] for m in await messages(db, "ghost")] == ["found"]


async def test_json_fields_are_stored_as_json_text(db: Db) -> None:
    await _create(db, "s1", started_at=T0)
    mid = await _append(db, "s1", "assistant", "Here's the answer...", tool_calls=TOOL_CALLS, token_count=150,
                        finish_reason="stop", reasoning="Let me think", reasoning_content="raw chain",
                        reasoning_details=[{"type": "reasoning.text", "text": "step"}],
                        codex_reasoning_items=[{"id": "rs_1", "summary": []}],
                        codex_message_items='[{"id":"msg_1"}]', timestamp=T0 + 1)
    (m,) = await messages(db, "s1")
    assert m["id"] == mid and (m["session_id"], m["role"], m["content"]) == ("s1", "assistant", "Here's the answer...")
    assert m["tool_calls"] == '[{"id":"call_1","type":"function","function":{"name":"terminal","arguments":' \
                              '"{\\"cmd\\": \\"ls\\"}"}},{"id":"call_2","type":"function","function":' \
                              '{"name":"web_search","arguments":"{\\"q\\": \\"x\\"}"}}]'
    assert m["reasoning_details"] == '[{"type":"reasoning.text","text":"step"}]'
    assert m["codex_reasoning_items"] == '[{"id":"rs_1","summary":[]}]'
    assert m["codex_message_items"] == '[{"id":"msg_1"}]'  # a string is stored as it is
    assert (m["token_count"], m["finish_reason"], m["reasoning"], m["reasoning_content"], m["timestamp"]) == (
        150, "stop", "Let me think", "raw chain", T0 + 1)


async def test_message_columns_maps_an_openai_message(db: Db) -> None:
    tool = db.m.ops.message_columns({"role": "tool", "content": "ok", "name": "terminal", "tool_call_id": "c1"})
    assert tool == {"role": "tool", "content": "ok", "tool_call_id": "c1", "tool_name": "terminal"}
    parts = db.m.ops.message_columns({"role": "user", "content": [{"type": "text", "text": "hi"}], "name": "x"})
    assert parts == {"role": "user", "content": '[{"type":"text","text":"hi"}]'}


async def test_concurrent_appends_to_one_session_keep_the_counters_right(db: Db) -> None:
    await _create(db, "s1", started_at=T0)
    await asyncio.gather(*(_append(db, "s1", "assistant", f"m{i}", tool_calls=TOOL_CALLS[: i % 3])
                           for i in range(30)))
    s = await session(db, "s1")
    assert s is not None and (s["message_count"], s["tool_call_count"]) == (30, 30)
    assert await count(db, "messages") == 30


async def test_record_usage_accumulates(db: Db) -> None:
    await _create(db, "a", model="m-big", started_at=T0)
    usage = {"input_tokens": 1000, "output_tokens": 200, "cache_read_tokens": 50, "cache_write_tokens": 5,
             "reasoning_tokens": 7, "api_call_count": 1, "estimated_cost_usd": 0.25,
             "billing_provider": "openrouter", "billing_mode": "official"}
    await db.write(partial(db.m.ops.record_usage, session_id="a", **usage))
    await db.write(partial(db.m.ops.record_usage, session_id="a", **usage))
    await db.write(partial(db.m.ops.record_usage, session_id="a", input_tokens=0, actual_cost_usd=0.5,
                           cost_status="final"))
    a = await session(db, "a")
    assert a is not None
    assert (a["input_tokens"], a["output_tokens"], a["cache_read_tokens"], a["cache_write_tokens"]) == (
        2000, 400, 100, 10)
    assert (a["reasoning_tokens"], a["api_call_count"]) == (14, 2)
    assert a["estimated_cost_usd"] == pytest.approx(0.5) and a["actual_cost_usd"] == pytest.approx(0.5)
    assert (a["billing_provider"], a["billing_mode"], a["cost_status"]) == ("openrouter", "official", "final")
    with pytest.raises(ValueError):
        await db.write(partial(db.m.ops.record_usage, session_id="a", bogus_tokens=1))


async def test_state_meta_round_trip(db: Db) -> None:
    assert await db.read(partial(db.m.ops.get_meta, key="x")) is None
    await db.write(partial(db.m.ops.set_meta, key="x", value="1"))
    await db.write(partial(db.m.ops.set_meta, key="x", value="2"))
    assert await db.read(partial(db.m.ops.get_meta, key="x")) == "2"


# ------------------------------------------------------------------- titles


async def test_set_session_title_and_conflict(db: Db) -> None:
    await _create(db, "s1", started_at=T0)
    await _create(db, "s2", started_at=T0 + 1)
    assert await _title(db, "s1", "Fix Docker Build") == "Fix Docker Build"
    assert await _title(db, "s1", "Fix Docker Build") == "Fix Docker Build"  # its own title again
    with pytest.raises(TitleConflictError) as info:
        await _title(db, "s2", "Fix Docker Build")
    assert (info.value.other_session_id, info.value.suggestion) == ("s1", "Fix Docker Build #2")
    assert (await session(db, "s2") or {})["title"] is None
    assert await _title(db, "s2", info.value.suggestion) == "Fix Docker Build #2"
    with pytest.raises(TitleConflictError) as info:
        await _title(db, "s2", "Fix Docker Build")
    assert info.value.suggestion == "Fix Docker Build #3"
    with pytest.raises(TitleConflictError):
        await _title(db, "s2", "Fix\u200b Docker Build\u202e")  # invisible characters make no twin


async def test_a_caught_title_conflict_leaves_the_transaction_usable(db: Db) -> None:
    await _create(db, "s1", started_at=T0)
    await _create(db, "s2", started_at=T0 + 1)
    await _title(db, "s1", "Plan")

    def op(conn: Any) -> str:
        try:
            db.m.ops.set_session_title(conn, "s2", "Plan")
        except TitleConflictError as exc:
            return str(db.m.ops.set_session_title(conn, "s2", exc.suggestion))
        raise AssertionError("no conflict")

    assert await db.write(op) == "Plan #2"
    assert (await session(db, "s2") or {})["title"] == "Plan #2"


@pytest.mark.parametrize(("raw", "expected"), [
    ("my\x00 research\x07 project", "my research project"),
    ("\u202eevil\u202c title", "evil title"),
    ("  tabs\tand\nnewlines  ", "tabs and newlines"),
    ("naïve 日本語 title 🚀", "naïve 日本語 title 🚀"),
])
async def test_a_title_is_cleaned(db: Db, raw: str, expected: str) -> None:
    await _create(db, "s1", started_at=T0)
    assert await _title(db, "s1", raw) == expected
    assert (await session(db, "s1") or {})["title"] == expected


async def test_title_limits_and_empty_titles(db: Db) -> None:
    for i in range(3):
        await _create(db, f"s{i}", started_at=T0 + i)
    assert await _title(db, "s0", "y" * 100 + "\u200b" * 20) == "y" * 100
    with pytest.raises(InvalidTitleError):
        await _title(db, "s0", "z" * 101)
    assert (await session(db, "s0") or {})["title"] == "y" * 100
    for sid, empty in (("s0", "\u200b\u202e"), ("s1", ""), ("s2", None)):
        assert await _title(db, sid, empty) is None
    assert await values(db, "SELECT title FROM sessions ORDER BY id") == [None, None, None]


async def test_next_title_in_lineage(db: Db) -> None:
    async def nxt(title: str) -> str:
        got: str = await db.read(partial(db.m.ops.next_title_in_lineage, title=title))
        return got

    assert await nxt("Fix Docker Build") == "Fix Docker Build #2"
    for i, (sid, title) in enumerate([("s1", "Fix Docker Build"), ("s2", "Fix Docker Build #2"),
                                      ("s3", "Fix Docker Build #3"), ("x1", "fix docker build #9"),
                                      ("w1", "50%_off"), ("w2", "50%_off #2"), ("w3", "50xyoff #3")]):
        await _create(db, sid, started_at=T0 + i)
        await _title(db, sid, title)
    assert await nxt("Fix Docker Build") == "Fix Docker Build #4"
    assert await nxt("Fix Docker Build #2") == "Fix Docker Build #4"
    assert await nxt("fix docker build") == "fix docker build #10"
    assert await nxt("50%_off") == "50%_off #3"


# ------------------------------------------------------------------ cleanup


def _full_session(conn: Any, db: Db, sid: str) -> None:
    """A message with a file, a sender, a /retry mark and a setting: what a delete must take along."""
    mid = db.m.ops.append_message(conn, sid, "user", f"quokka {sid}")
    db.m.attachments.add(conn, message_id=mid, session_id=sid, kind="image", mime="image/png", name="a.png",
                         size=3, sha256=SHA, created_at=T0)
    answer = db.m.ops.append_message(conn, sid, "assistant", "answer", tool_calls=TOOL_CALLS)
    run(conn, "INSERT INTO gateway_message_senders (message_id, session_id, platform, user_id) VALUES (?, ?, ?, ?)",
        mid, sid, "telegram", "42")
    run(conn, "INSERT INTO gateway_superseded (message_id, session_id, superseded_at) VALUES (?, ?, ?)",
        answer, sid, T0)
    run(conn, "INSERT INTO gateway_session_settings (session_id, name, value, updated_at) VALUES (?, ?, ?, ?)",
        sid, "model", "m", T0)


def _full_sessions(conn: Any, db: Db, *sids: str) -> None:
    for sid in sids:
        _full_session(conn, db, sid)


async def _per_session(db: Db) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for table in ("messages", "gateway_attachments", "gateway_message_senders", "gateway_superseded",
                  "gateway_session_settings"):
        out[table] = await values(db, f"SELECT session_id FROM {table} ORDER BY session_id")
    return out


async def test_delete_session_takes_everything_of_it_and_unlinks_children(db: Db) -> None:
    await _create(db, "parent", started_at=T0)
    await _create(db, "child", parent_session_id="parent", started_at=T0 + 1)
    await db.write(lambda c: _full_sessions(c, db, "parent", "child"))
    assert await db.write(partial(db.m.ops.delete_session, session_id="parent"))
    assert await session(db, "parent") is None
    assert (await session(db, "child") or {})["parent_session_id"] is None
    assert await _per_session(db) == {"messages": ["child", "child"], "gateway_attachments": ["child"],
                                      "gateway_message_senders": ["child"], "gateway_superseded": ["child"],
                                      "gateway_session_settings": ["child"]}
    assert not await db.write(partial(db.m.ops.delete_session, session_id="parent"))


async def test_delete_sessions_counts_what_it_deleted(db: Db) -> None:
    for sid in ("a", "b", "c"):
        await _create(db, sid, started_at=T0)
        await _append(db, sid, "user", "x")
    assert await db.write(partial(db.m.ops.delete_sessions, session_ids=["a", "c", "missing", "a"])) == 2
    assert await values(db, "SELECT id FROM sessions") == ["b"]
    assert await db.write(partial(db.m.ops.delete_sessions, session_ids=[])) == 0


async def test_a_failed_transaction_deletes_nothing(db: Db) -> None:
    await _create(db, "s1", started_at=T0)
    await db.write(lambda c: _full_session(c, db, "s1"))

    def delete_then_fail(conn: Any) -> None:
        db.m.ops.delete_session(conn, "s1")
        raise RuntimeError("the caller's next step failed")

    with pytest.raises(RuntimeError):
        await db.write(delete_then_fail)
    assert await session(db, "s1") is not None
    assert all(v == ["s1"] * (2 if t == "messages" else 1) for t, v in (await _per_session(db)).items())


async def test_clear_messages_keeps_the_session(db: Db) -> None:
    await _create(db, "s1", started_at=T0)
    await _create(db, "s2", started_at=T0)
    await db.write(lambda c: _full_sessions(c, db, "s1", "s2"))
    assert await db.write(partial(db.m.ops.clear_messages, session_id="s1")) == 2
    s1 = await session(db, "s1")
    assert s1 is not None and (s1["message_count"], s1["tool_call_count"]) == (0, 0)
    got = await _per_session(db)
    assert got["messages"] == ["s2", "s2"] and got["gateway_attachments"] == ["s2"]
    assert got["gateway_message_senders"] == ["s2"] and got["gateway_superseded"] == ["s2"]
    assert got["gateway_session_settings"] == ["s1", "s2"]  # settings belong to the session, not its messages


async def test_delete_messages_from_lowers_the_counters_by_what_went(db: Db) -> None:
    await _create(db, "s1", started_at=T0)
    await db.write(lambda c: _full_session(c, db, "s1"))
    first = await _append(db, "s1", "user", "second")
    await _append(db, "s1", "assistant", None, tool_calls=TOOL_CALLS[:1])
    await _append(db, "s1", "assistant", "odd", tool_calls="not json")
    await db.write(lambda c: run(c, "UPDATE messages SET tool_calls = '{\"a\": 1}' WHERE content = 'odd'"))
    assert await db.write(partial(db.m.ops.delete_messages_from, session_id="s1", first_id=first)) == 3
    s = await session(db, "s1")
    assert s is not None and (s["message_count"], s["tool_call_count"]) == (2, 2)
    assert await db.write(partial(db.m.ops.delete_messages_from, session_id="s1", first_id=first)) == 0
    mid = (await messages(db, "s1"))[0]["id"]
    assert await db.write(partial(db.m.ops.delete_messages_from, session_id="s1", first_id=mid)) == 2
    assert await _per_session(db) == {"messages": [], "gateway_attachments": [], "gateway_message_senders": [],
                                      "gateway_superseded": [], "gateway_session_settings": ["s1"]}
    s = await session(db, "s1")
    assert s is not None and (s["message_count"], s["tool_call_count"]) == (0, 0)


async def test_replace_with_marker(db: Db) -> None:
    await _create(db, "s1", started_at=T0)
    a = await _append(db, "s1", "assistant", "secret", tool_calls=TOOL_CALLS, reasoning="r", reasoning_details=[1])
    b = await _append(db, "s1", "user", "kept")
    assert await db.write(partial(db.m.ops.replace_with_marker, message_ids=[a, a, 999_999], marker="[gone]")) == 1
    got = await rows(db, "SELECT id, content, tool_calls, reasoning, reasoning_details FROM messages ORDER BY id")
    assert got == [{"id": a, "content": "[gone]", "tool_calls": None, "reasoning": None, "reasoning_details": None},
                   {"id": b, "content": "kept", "tool_calls": None, "reasoning": None, "reasoning_details": None}]


# --------------------------------------------------------------------- prune


async def _aged(db: Db, sid: str, *, days: float, ended: bool, now: float, source: str = "cli",
                parent: str | None = None, title: str | None = None) -> None:
    await _create(db, sid, source, parent_session_id=parent, started_at=now - days * DAY)
    await _append(db, sid, "user", f"wombat {sid}", timestamp=now - days * DAY + 1)
    if title is not None:
        await _title(db, sid, title)
    if ended:
        await db.write(partial(db.m.ops.end_session, session_id=sid, end_reason="compression"))


async def _prune(db: Db, days: float | None = None, source: str | None = None) -> Any:
    if days is None:
        return await db.write(db.m.ops.prune)
    return await db.write(partial(db.m.ops.prune, older_than_days=days, source=source))


async def test_prune_only_deletes_old_ended_sessions(db: Db) -> None:
    now = time.time()
    await _aged(db, "old_ended", days=40, ended=True, now=now)
    await _aged(db, "old_active", days=400, ended=False, now=now)
    await _aged(db, "young_ended", days=10, ended=True, now=now)
    await _aged(db, "old_tg", days=40, ended=True, now=now, source="telegram")
    await _aged(db, "old_parent", days=50, ended=True, now=now)
    await _aged(db, "young_child", days=1, ended=False, now=now, parent="old_parent")
    assert await db.write(partial(db.m.ops.prune_sessions, older_than_days=30, source="telegram")) == 1
    assert await session(db, "old_tg") is None and await session(db, "old_ended") is not None
    assert (await _prune(db, 30)).deleted == 1
    kept = {"old_active", "young_ended", "young_child", "old_parent"}
    assert set(await values(db, "SELECT id FROM sessions")) == kept
    assert set(await values(db, "SELECT session_id FROM messages")) == kept
    assert (await session(db, "young_child") or {})["parent_session_id"] == "old_parent"
    assert await db.write(partial(db.m.ops.prune_sessions, older_than_days=30)) == 0


async def test_prune_default_is_90_days_and_a_chain_goes_together(db: Db) -> None:
    now = time.time()
    await _aged(db, "d89", days=89, ended=True, now=now)
    await _aged(db, "d91", days=91, ended=True, now=now)
    assert (await _prune(db)).deleted == 1
    assert await session(db, "d91") is None and await session(db, "d89") is not None
    await _aged(db, "p", days=60, ended=True, now=now)
    await _aged(db, "c", days=59, ended=True, now=now, parent="p")
    await _aged(db, "g", days=40, ended=True, now=now, parent="c")
    assert (await _prune(db, 30)).deleted == 4
    assert await count(db, "sessions") == 0


async def _chain(db: Db, now: float) -> None:
    """X (200 days, compressed) -> X #2 (150 days, compressed) -> X #3 (live)."""
    await _aged(db, "root", days=200, ended=True, now=now, title="X")
    await _aged(db, "middle", days=150, ended=True, now=now, parent="root", title="X #2")
    await _aged(db, "live", days=1, ended=False, now=now, parent="middle", title="X #3")


async def test_prune_keeps_the_ancestors_of_a_live_session_and_says_so(db: Db) -> None:
    now = time.time()
    await _chain(db, now)
    await _aged(db, "lonely", days=200, ended=True, now=now)
    result = await _prune(db, 100)
    assert result.deleted == 1
    assert result.skipped == (PruneSkip("root", "X", "live"), PruneSkip("middle", "X #2", "live"))
    assert await values(db, "SELECT id FROM sessions ORDER BY started_at") == ["root", "middle", "live"]
    assert await db.read(partial(db.m.ops.next_title_in_lineage, title="X")) == "X #4"
    await _create(db, "newcomer")
    with pytest.raises(TitleConflictError):
        await _title(db, "newcomer", "X")


async def test_a_lineage_goes_as_a_whole_once_its_newest_part_may_go(db: Db) -> None:
    now = time.time()
    await _chain(db, now)
    await db.write(partial(db.m.ops.end_session, session_id="live", end_reason="session_reset"))
    assert (await _prune(db, 100)).deleted == 0
    result = await _prune(db, 0.5)
    assert (result.deleted, result.skipped) == (3, ())
    assert await count(db, "sessions") == 0 and await count(db, "messages") == 0


async def test_kept_sessions_of_another_source_or_branch_keep_their_parents(db: Db) -> None:
    now = time.time()
    await _aged(db, "tg_parent", days=200, ended=True, now=now, source="telegram")
    await _aged(db, "cli_child", days=200, ended=True, now=now, parent="tg_parent")
    result = await _prune(db, 100, "telegram")
    assert (result.deleted, [s.session_id for s in result.skipped]) == (0, ["tg_parent"])
    await _aged(db, "trunk", days=300, ended=True, now=now)
    await _aged(db, "dead_branch", days=250, ended=True, now=now, parent="trunk")
    await _aged(db, "live_branch", days=2, ended=False, now=now, parent="trunk")
    result = await _prune(db, 100)
    assert result.deleted == 3 and await session(db, "dead_branch") is None  # with tg_parent and cli_child
    assert [s.session_id for s in result.skipped] == ["trunk"]


async def test_a_cycle_of_parents_does_not_hang_the_prune(db: Db) -> None:
    now = time.time()
    await _aged(db, "a", days=200, ended=True, now=now)
    await _aged(db, "b", days=200, ended=True, now=now, parent="a")
    await db.write(lambda c: run(c, "UPDATE sessions SET parent_session_id = 'b' WHERE id = 'a'"))
    await _aged(db, "c", days=1, ended=False, now=now, parent="b")
    result = await _prune(db, 100)
    assert result.deleted == 0 and {s.session_id for s in result.skipped} == {"a", "b"}
    await db.write(lambda c: run(c, "UPDATE sessions SET parent_session_id = NULL WHERE id = 'c'"))
    result = await _prune(db, 100)
    assert (result.deleted, result.skipped) == (2, ())  # the cycle itself goes whole


async def test_a_message_with_a_nul_character_is_stored(db: Db) -> None:
    """state.db keeps a NUL as it is; PostgreSQL's text cannot, so it stores U+FFFD instead."""
    await db.write(partial(db.m.ops.create_session, session_id="nul", source="cli"))
    mid = await db.write(partial(db.m.ops.append_message, session_id="nul", role="user", content="a\x00b"))
    row = await db.read(lambda c: c.execute(
        "SELECT content FROM messages WHERE id = " + str(int(mid))).fetchone())
    assert row[0] == ("a\x00b" if db.name == "sqlite" else "a\ufffdb")
