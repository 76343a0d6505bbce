"""Every operation of the reference (session-storage.md, "Common Operations" and
the query sections), against a real state.db through StateStore."""

from __future__ import annotations

import re
import sqlite3
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from storage import (
    AmbiguousSessionError,
    AutoPruneSettings,
    InvalidTitleError,
    SessionNotFoundError,
    StateStore,
    StorageError,
    TitleConflictError,
    WriterSettings,
    new_session_id,
)

DAY = 86400.0
T0 = 1_700_000_000.0  # a fixed "started_at" so ordering never depends on the clock


async def _fts_count(store: StateStore, session_id: str | None = None) -> dict[str, int]:
    def count(conn: sqlite3.Connection) -> dict[str, int]:
        ids = [r[0] for r in conn.execute(
            "SELECT id FROM messages" + (" WHERE session_id = ?" if session_id else ""),
            (session_id,) if session_id else (),
        )]
        out = {}
        for table in ("messages_fts", "messages_fts_trigram"):
            if session_id is None:
                out[table] = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            else:
                marks = ",".join("?" * len(ids)) or "NULL"
                out[table] = conn.execute(f"SELECT COUNT(*) FROM {table} WHERE rowid IN ({marks})", ids).fetchone()[0]
        return out

    return await store.read(count)


# ------------------------------------------------------------------ opening


async def test_store_opens_in_a_home_directory_that_does_not_exist_yet(tmp_path: Path) -> None:
    """A first start on a new HERMES_HOME must create the directory, lock file and db.

    (The shared ``store`` fixture in tests/conftest.py relies on this.)
    """
    path = tmp_path / "brand-new-home" / "state.db"
    async with StateStore(path, writer_settings=WriterSettings(synchronous="NORMAL")) as store:
        assert await store.create_session("s1", "cli")
    assert path.exists()


# ----------------------------------------------------------------- sessions


async def test_session_ids_have_the_reference_format() -> None:
    gateway_ids = {new_session_id() for _ in range(50)}
    assert len(gateway_ids) == 50
    for sid in gateway_ids:
        assert re.fullmatch(r"\d{8}_\d{6}_[0-9a-f]{8}", sid), sid
    terminal = new_session_id("terminal")
    assert re.fullmatch(r"\d{8}_\d{6}_[0-9a-f]{6}", terminal), terminal
    fixed = new_session_id(now=datetime(2025, 3, 5, 9, 15, 23))
    assert fixed.startswith("20250305_091523_")


async def test_create_session_stores_metadata_and_is_idempotent(store: StateStore) -> None:
    created = await store.create_session(
        "s1",
        "telegram",
        model="anthropic/claude-sonnet-4.6",
        user_id="user_1",
        model_config={"temperature": 0.2},
        system_prompt="be brief",
        started_at=T0,
    )
    assert created is True
    assert await store.create_session("s1", "cli", started_at=T0 + 5) is False
    s = await store.get_session("s1")
    assert s is not None
    assert (s["source"], s["model"], s["user_id"], s["system_prompt"]) == (
        "telegram", "anthropic/claude-sonnet-4.6", "user_1", "be brief",
    )
    assert s["started_at"] == T0
    assert s["model_config"] == '{"temperature":0.2}'
    assert s["ended_at"] is None and s["end_reason"] is None and s["parent_session_id"] is None
    assert (s["message_count"], s["tool_call_count"], s["input_tokens"], s["api_call_count"]) == (0, 0, 0, 0)
    assert s["title"] is None
    assert await store.get_session("missing") is None


async def test_end_session_first_end_wins_and_reopen_clears(store: StateStore) -> None:
    await store.create_session("s1", "cli", started_at=T0)
    assert await store.end_session("s1", "user_exit") is True
    first = await store.get_session("s1")
    assert first is not None and first["end_reason"] == "user_exit" and first["ended_at"] is not None

    assert await store.end_session("s1", "timeout") is False
    again = await store.get_session("s1")
    assert again is not None
    assert (again["end_reason"], again["ended_at"]) == ("user_exit", first["ended_at"])

    await store.reopen_session("s1")
    reopened = await store.get_session("s1")
    assert reopened is not None and reopened["ended_at"] is None and reopened["end_reason"] is None

    assert await store.end_session("s1", "reset") is True
    ended = await store.get_session("s1")
    assert ended is not None and ended["end_reason"] == "reset"


async def test_update_system_prompt(store: StateStore) -> None:
    await store.create_session("s1", "cli", system_prompt="v1", started_at=T0)
    await store.update_system_prompt("s1", "v2")
    assert (await store.get_session("s1") or {})["system_prompt"] == "v2"
    with pytest.raises(SessionNotFoundError):
        await store.update_system_prompt("nope", "x")


async def test_end_and_reopen_unknown_session_raise(store: StateStore) -> None:
    with pytest.raises(SessionNotFoundError):
        await store.end_session("nope", "user_exit")
    with pytest.raises(SessionNotFoundError):
        await store.reopen_session("nope")


# ----------------------------------------------------------------- messages

TOOL_CALLS = [
    {"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": '{"cmd": "ls"}'}},
    {"id": "call_2", "type": "function", "function": {"name": "web_search", "arguments": '{"q": "x"}'}},
]


async def test_append_message_returns_increasing_ids_and_updates_counters(store: StateStore) -> None:
    await store.create_session("s1", "cli", started_at=T0)
    await store.create_session("s2", "cli", started_at=T0)
    ids = [
        await store.append_message("s1", "user", "hello"),
        await store.append_message("s2", "user", "other session"),
        await store.append_message("s1", "assistant", None, tool_calls=TOOL_CALLS),
        await store.append_message("s1", "tool", "ok", tool_call_id="call_1", tool_name="terminal"),
        await store.append_message("s1", "assistant", "done", tool_calls=TOOL_CALLS[:1]),
    ]
    assert all(isinstance(i, int) for i in ids)
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    s1 = await store.get_session("s1")
    s2 = await store.get_session("s2")
    assert s1 is not None and s2 is not None
    assert (s1["message_count"], s1["tool_call_count"]) == (4, 3)
    assert (s2["message_count"], s2["tool_call_count"]) == (1, 0)
    assert [m["id"] for m in await store.get_messages("s1")] == [ids[0], ids[2], ids[3], ids[4]]


async def test_append_message_to_unknown_session_fails_and_stores_nothing(store: StateStore) -> None:
    with pytest.raises(StorageError):
        await store.append_message("ghost", "user", "lost?")
    assert await store.read(lambda c: c.execute("SELECT COUNT(*) FROM messages").fetchone()[0]) == 0


async def test_get_messages_decodes_json_fields(store: StateStore) -> None:
    await store.create_session("s1", "cli", started_at=T0)
    mid = await store.append_message(
        "s1",
        "assistant",
        "Here's the answer...",
        tool_calls=TOOL_CALLS,
        token_count=150,
        finish_reason="stop",
        reasoning="Let me think about this...",
        reasoning_content="raw chain",
        reasoning_details=[{"type": "reasoning.text", "text": "step"}],
        codex_reasoning_items=[{"id": "rs_1", "summary": []}],
        codex_message_items=[{"id": "msg_1", "phase": "final"}],
        timestamp=T0 + 1,
    )
    (m,) = await store.get_messages("s1")
    assert m["id"] == mid and m["session_id"] == "s1" and m["role"] == "assistant"
    assert m["content"] == "Here's the answer..."
    assert m["tool_calls"] == TOOL_CALLS
    assert m["reasoning_details"] == [{"type": "reasoning.text", "text": "step"}]
    assert m["codex_reasoning_items"] == [{"id": "rs_1", "summary": []}]
    assert m["codex_message_items"] == [{"id": "msg_1", "phase": "final"}]
    assert (m["token_count"], m["finish_reason"], m["reasoning"], m["reasoning_content"]) == (
        150, "stop", "Let me think about this...", "raw chain",
    )
    assert m["timestamp"] == T0 + 1
    # Stored as JSON text, as the reference specifies.
    raw = await store.read(lambda c: c.execute("SELECT tool_calls FROM messages WHERE id = ?", (mid,)).fetchone()[0])
    assert isinstance(raw, str)


async def test_get_messages_as_conversation_is_openai_format(store: StateStore) -> None:
    await store.create_session("s1", "cli", started_at=T0)
    await store.append_message("s1", "user", "list files")
    await store.append_message(
        "s1",
        "assistant",
        None,
        tool_calls=TOOL_CALLS[:1],
        finish_reason="tool_calls",
        reasoning="need ls",
        reasoning_content="raw",
        reasoning_details=[{"type": "reasoning.text", "text": "need ls"}],
    )
    await store.append_message("s1", "tool", "a.txt b.txt", tool_call_id="call_1", tool_name="terminal")
    await store.append_message("s1", "assistant", "Two files.", finish_reason="stop")

    conv = await store.get_messages_as_conversation("s1")
    assert conv == [
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": TOOL_CALLS[:1],
            "finish_reason": "tool_calls",
            "reasoning": "need ls",
            "reasoning_content": "raw",
            "reasoning_details": [{"type": "reasoning.text", "text": "need ls"}],
        },
        {"role": "tool", "content": "a.txt b.txt", "tool_call_id": "call_1", "name": "terminal"},
        {"role": "assistant", "content": "Two files.", "finish_reason": "stop"},
    ]


async def test_clear_messages_keeps_the_session(store: StateStore) -> None:
    await store.create_session("s1", "cli", started_at=T0)
    await store.create_session("s2", "cli", started_at=T0)
    await store.append_message("s1", "user", "zanzibar one")
    await store.append_message("s1", "assistant", "zanzibar two", tool_calls=TOOL_CALLS)
    await store.append_message("s2", "user", "zanzibar kept")
    assert await store.clear_messages("s1") == 2
    s1 = await store.get_session("s1")
    assert s1 is not None and (s1["message_count"], s1["tool_call_count"]) == (0, 0)
    assert await store.get_messages("s1") == []
    assert [r["session_id"] for r in await store.search_messages("zanzibar")] == ["s2"]
    assert await _fts_count(store) == {"messages_fts": 1, "messages_fts_trigram": 1}
    with pytest.raises(SessionNotFoundError):
        await store.clear_messages("nope")


async def test_delete_session_removes_messages_and_unlinks_children(store: StateStore) -> None:
    await store.create_session("parent", "cli", started_at=T0)
    await store.create_session("child", "cli", parent_session_id="parent", started_at=T0 + 1)
    await store.append_message("parent", "user", "quokka")
    await store.append_message("child", "user", "quokka child")
    assert await store.delete_session("parent") is True
    assert await store.get_session("parent") is None
    assert await store.get_messages("parent") == []
    child = await store.get_session("child")
    assert child is not None and child["parent_session_id"] is None
    assert [r["session_id"] for r in await store.search_messages("quokka")] == ["child"]
    assert await _fts_count(store) == {"messages_fts": 1, "messages_fts_trigram": 1}
    assert await store.delete_session("parent") is False


# ------------------------------------------------------------------- titles


async def test_set_session_title_and_conflict(store: StateStore) -> None:
    await store.create_session("s1", "cli", started_at=T0)
    await store.create_session("s2", "cli", started_at=T0 + 1)
    assert await store.set_session_title("s1", "Fix Docker Build") == "Fix Docker Build"
    assert (await store.get_session("s1") or {})["title"] == "Fix Docker Build"
    # Setting the same title on its own session again is not a conflict.
    assert await store.set_session_title("s1", "Fix Docker Build") == "Fix Docker Build"

    with pytest.raises(TitleConflictError) as info:
        await store.set_session_title("s2", "Fix Docker Build")
    err = info.value
    assert err.other_session_id == "s1"
    assert err.suggestion == "Fix Docker Build #2"
    assert "s1" in str(err) and "Fix Docker Build #2" in str(err)
    assert (await store.get_session("s2") or {})["title"] is None

    assert await store.set_session_title("s2", err.suggestion) == "Fix Docker Build #2"
    with pytest.raises(TitleConflictError) as info:
        await store.set_session_title("s2", "Fix Docker Build")
    assert info.value.suggestion == "Fix Docker Build #3"


async def test_title_conflict_ignores_invisible_characters(store: StateStore) -> None:
    """Two titles that look the same must be the same title (no zero-width twins)."""
    await store.create_session("s1", "cli", started_at=T0)
    await store.create_session("s2", "cli", started_at=T0 + 1)
    await store.set_session_title("s1", "Report")
    with pytest.raises(TitleConflictError):
        await store.set_session_title("s2", "Re\u200bport\u202e")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("my\x00 research\x07 project", "my research project"),
        ("\u202eevil\u202c title", "evil title"),
        ("zero\u200bwidth\u200c\u200d\ufeff", "zerowidth"),
        ("bidi \u2066isolate\u2069 \u200fmark", "bidi isolate mark"),
        ("  tabs\tand\nnewlines  ", "tabs and newlines"),
        ("naïve 日本語 title 🚀", "naïve 日本語 title 🚀"),
    ],
)
async def test_title_is_cleaned(store: StateStore, raw: str, expected: str) -> None:
    await store.create_session("s1", "cli", started_at=T0)
    assert await store.set_session_title("s1", raw) == expected
    assert (await store.get_session("s1") or {})["title"] == expected


async def test_title_length_limit_is_100_characters(store: StateStore) -> None:
    await store.create_session("s1", "cli", started_at=T0)
    assert await store.set_session_title("s1", "x" * 100) == "x" * 100
    # The limit applies to what is kept, not to the invisible characters stripped.
    assert await store.set_session_title("s1", "y" * 100 + "\u200b" * 20) == "y" * 100
    with pytest.raises(InvalidTitleError):
        await store.set_session_title("s1", "z" * 101)
    assert (await store.get_session("s1") or {})["title"] == "y" * 100


@pytest.mark.parametrize("empty", ["", "   ", "\u200b\u202e", "\x00\t", None])
async def test_empty_title_clears_to_null(store: StateStore, empty: str | None) -> None:
    await store.create_session("s1", "cli", started_at=T0)
    await store.set_session_title("s1", "something")
    assert await store.set_session_title("s1", empty) is None
    assert (await store.get_session("s1") or {})["title"] is None


async def test_several_sessions_may_have_no_title(store: StateStore) -> None:
    for i in range(3):
        await store.create_session(f"s{i}", "cli", started_at=T0 + i)
        await store.set_session_title(f"s{i}", "")
    titles = await store.read(lambda c: c.execute("SELECT title FROM sessions").fetchall())
    assert [t[0] for t in titles] == [None, None, None]


async def test_set_title_of_unknown_session_raises(store: StateStore) -> None:
    with pytest.raises(SessionNotFoundError):
        await store.set_session_title("nope", "x")


async def _titled(store: StateStore, sid: str, title: str, started_at: float) -> None:
    await store.create_session(sid, "cli", started_at=started_at)
    await store.set_session_title(sid, title)


async def test_resolve_session_by_title_picks_the_most_recent_in_lineage(store: StateStore) -> None:
    await _titled(store, "s1", "my project", T0)
    await _titled(store, "s2", "my project #2", T0 + 10)
    await _titled(store, "s3", "my project #3", T0 + 20)
    # Not part of the lineage, even though LIKE 'my project%' would match some.
    await _titled(store, "d1", "my project extra", T0 + 30)
    await _titled(store, "d2", "my projects #9", T0 + 40)
    await _titled(store, "d3", "my project #x", T0 + 50)

    assert await store.resolve_session_by_title("my project") == "s3"
    assert await store.resolve_session_by_title("my project #2") == "s2"
    assert await store.resolve_session_by_title("my project #3") == "s3"
    assert await store.resolve_session_by_title("my project extra") == "d1"
    assert await store.resolve_session_by_title("nothing like it") is None


async def test_resolve_session_by_title_with_like_wildcards(store: StateStore) -> None:
    await _titled(store, "s1", "50%_off", T0)
    await _titled(store, "s2", "50%_off #2", T0 + 10)
    await _titled(store, "d1", "50xyoff #3", T0 + 20)  # would match an unescaped LIKE
    assert await store.resolve_session_by_title("50%_off") == "s2"
    assert await store.get_next_title_in_lineage("50%_off") == "50%_off #3"


async def test_get_next_title_in_lineage(store: StateStore) -> None:
    assert await store.get_next_title_in_lineage("Fix Docker Build") == "Fix Docker Build #2"
    await _titled(store, "s1", "Fix Docker Build", T0)
    assert await store.get_next_title_in_lineage("Fix Docker Build") == "Fix Docker Build #2"
    await _titled(store, "s2", "Fix Docker Build #2", T0 + 1)
    await _titled(store, "s3", "Fix Docker Build #3", T0 + 2)
    assert await store.get_next_title_in_lineage("Fix Docker Build") == "Fix Docker Build #4"
    assert await store.get_next_title_in_lineage("Fix Docker Build #2") == "Fix Docker Build #4"
    await _titled(store, "s7", "Fix Docker Build #7", T0 + 3)
    assert await store.get_next_title_in_lineage("Fix Docker Build") == "Fix Docker Build #8"


# ------------------------------------------------------------- resolve ids


async def test_resolve_session_id_by_full_id_and_prefix(store: StateStore) -> None:
    ids = ["20250305_091523_a1b2c3d4", "20250305_091523_a1ffffff", "20250306_100000_0000aa"]
    for i, sid in enumerate(ids):
        await store.create_session(sid, "cli", started_at=T0 + i)
    for sid in ids:
        assert await store.resolve_session_id(sid) == sid
    assert await store.resolve_session_id("20250306") == ids[2]
    assert await store.resolve_session_id("20250305_091523_a1b") == ids[0]

    with pytest.raises(AmbiguousSessionError) as info:
        await store.resolve_session_id("20250305")
    assert info.value.prefix == "20250305"
    assert sorted(info.value.candidates) == sorted(ids[:2])
    assert ids[0] in str(info.value) and ids[1] in str(info.value)

    for missing in ("2099", "%", "2025030_", "_", "x"):
        with pytest.raises(SessionNotFoundError):
            await store.resolve_session_id(missing)


# ------------------------------------------------------------------ lineage


async def test_lineage_ancestors_and_descendants(store: StateStore) -> None:
    await store.create_session("root", "cli", started_at=T0)
    await store.create_session("child", "cli", parent_session_id="root", started_at=T0 + 1)
    await store.create_session("sibling", "cli", parent_session_id="root", started_at=T0 + 2)
    await store.create_session("grandchild", "cli", parent_session_id="child", started_at=T0 + 3)
    await store.create_session("stranger", "cli", started_at=T0 + 4)
    await store.set_session_title("root", "Plan")

    ancestors = await store.lineage_ancestors("grandchild")
    assert [a["id"] for a in ancestors] == ["grandchild", "child", "root"]
    assert ancestors[-1]["title"] == "Plan" and ancestors[-1]["parent_session_id"] is None
    assert ancestors[0]["parent_session_id"] == "child"

    descendants = await store.lineage_descendants("root")
    assert [d["id"] for d in descendants] == ["root", "child", "sibling", "grandchild"]
    assert [d["id"] for d in await store.lineage_descendants("grandchild")] == ["grandchild"]
    assert await store.lineage_ancestors("missing") == []


# ---------------------------------------------------------- recent sessions


async def test_recent_sessions_with_preview_and_last_active(store: StateStore) -> None:
    long_question = "Help me refactor the auth module please, it has grown far too large to reason about"
    await store.create_session("old", "cli", user_id="u1", started_at=T0)
    await store.append_message("old", "assistant", "greeting first", timestamp=T0 + 1)
    await store.append_message("old", "user", long_question, timestamp=T0 + 2)
    await store.append_message("old", "user", "second question", timestamp=T0 + 3)
    await store.append_message("old", "assistant", "answer", timestamp=T0 + 50)
    await store.create_session("mid", "telegram", user_id="u2", started_at=T0 + 100)
    await store.append_message("mid", "user", "What's the weather in Las Vegas?", timestamp=T0 + 101)
    await store.create_session("new", "cli", user_id="u2", started_at=T0 + 200)  # no messages yet

    recent = await store.recent_sessions()
    assert [r["id"] for r in recent] == ["new", "mid", "old"]
    by_id = {r["id"]: r for r in recent}
    assert by_id["old"]["preview"] == long_question[:63]
    assert len(by_id["old"]["preview"]) == 63
    assert by_id["old"]["last_active"] == T0 + 50
    assert by_id["mid"]["preview"] == "What's the weather in Las Vegas?"
    assert by_id["new"]["preview"] == ""
    assert by_id["new"]["last_active"] == T0 + 200
    assert by_id["old"]["source"] == "cli"  # the session's own columns come along

    assert [r["id"] for r in await store.recent_sessions(source="cli")] == ["new", "old"]
    assert [r["id"] for r in await store.recent_sessions(user_id="u2")] == ["new", "mid"]
    assert [r["id"] for r in await store.recent_sessions(source="cli", user_id="u2")] == ["new"]
    assert [r["id"] for r in await store.recent_sessions(limit=1)] == ["new"]


# --------------------------------------------------------------- token stats


async def test_record_usage_accumulates_and_token_stats(store: StateStore) -> None:
    await store.create_session("a", "cli", model="m-big", started_at=T0)
    await store.create_session("b", "cli", model="m-big", started_at=T0 + 1)
    await store.create_session("c", "cli", model="m-small", started_at=T0 + 2)
    await store.create_session("d", "cli", started_at=T0 + 3)  # no model

    usage = {
        "input_tokens": 1000, "output_tokens": 200, "cache_read_tokens": 50, "cache_write_tokens": 5,
        "reasoning_tokens": 7, "api_call_count": 1, "estimated_cost_usd": 0.25,
        "billing_provider": "openrouter", "billing_mode": "official",
    }  # fmt: skip
    await store.record_usage("a", **usage)
    await store.record_usage("a", **usage)
    await store.record_usage("b", input_tokens=10, output_tokens=5, estimated_cost_usd=0.01, api_call_count=1)
    await store.record_usage("c", input_tokens=3000, output_tokens=1, estimated_cost_usd=0.05)

    a = await store.get_session("a")
    assert a is not None
    assert (a["input_tokens"], a["output_tokens"], a["cache_read_tokens"], a["cache_write_tokens"]) == (
        2000, 400, 100, 10,
    )
    assert (a["reasoning_tokens"], a["api_call_count"]) == (14, 2)
    assert a["estimated_cost_usd"] == pytest.approx(0.5)
    assert (a["billing_provider"], a["billing_mode"]) == ("openrouter", "official")

    stats = await store.token_stats()
    by_model = {r["model"]: r for r in stats["by_model"]}
    assert set(by_model) == {"m-big", "m-small"}
    big = by_model["m-big"]
    assert (big["session_count"], big["total_input"], big["total_output"]) == (2, 2010, 405)
    assert big["total_cost"] == pytest.approx(0.51)
    assert [r["model"] for r in stats["by_model"]] == ["m-big", "m-small"]  # by cost, descending

    top = stats["top_sessions"]
    assert [r["id"] for r in top[:3]] == ["c", "a", "b"]
    assert top[0]["total_tokens"] == 3001
    assert [r["id"] for r in (await store.token_stats(top=1))["top_sessions"]] == ["c"]

    with pytest.raises(ValueError):
        await store.record_usage("a", bogus_tokens=1)
    with pytest.raises(SessionNotFoundError):
        await store.record_usage("nope", input_tokens=1)


# -------------------------------------------------------------------- export


async def test_export_session_and_export_all(store: StateStore) -> None:
    await store.create_session("c1", "cli", started_at=T0)
    await store.create_session("t1", "telegram", started_at=T0 + 1)
    await store.create_session("t2", "telegram", started_at=T0 + 2)
    await store.append_message("c1", "user", "hi")
    await store.append_message("c1", "assistant", "hello", tool_calls=TOOL_CALLS[:1])
    await store.append_message("t1", "user", "from telegram")
    await store.set_session_title("c1", "Greeting")

    exported = await store.export_session("c1")
    assert exported is not None
    assert exported["id"] == "c1" and exported["source"] == "cli" and exported["title"] == "Greeting"
    assert [(m["role"], m["content"]) for m in exported["messages"]] == [("user", "hi"), ("assistant", "hello")]
    assert exported["messages"][1]["tool_calls"] == TOOL_CALLS[:1]
    assert await store.export_session("missing") is None

    everything = await store.export_all()
    assert [s["id"] for s in everything] == ["c1", "t1", "t2"]
    telegram = await store.export_all(source="telegram")
    assert [s["id"] for s in telegram] == ["t1", "t2"]
    assert [m["content"] for m in telegram[0]["messages"]] == ["from telegram"]
    assert telegram[1]["messages"] == []


# --------------------------------------------------------------------- prune


async def _aged(store: StateStore, sid: str, *, days: float, ended: bool, source: str = "cli",
                parent: str | None = None, now: float | None = None) -> None:
    now = time.time() if now is None else now
    await store.create_session(sid, source, parent_session_id=parent, started_at=now - days * DAY)
    await store.append_message(sid, "user", f"wombat {sid}", timestamp=now - days * DAY + 1)
    if ended:
        await store.end_session(sid, "user_exit")


async def test_prune_sessions_only_deletes_old_ended_sessions(store: StateStore) -> None:
    await _aged(store, "old_ended", days=40, ended=True)
    await _aged(store, "old_active", days=400, ended=False)
    await _aged(store, "young_ended", days=10, ended=True)
    await _aged(store, "old_tg", days=40, ended=True, source="telegram")
    await _aged(store, "old_parent", days=50, ended=True)
    await _aged(store, "young_child", days=1, ended=False, parent="old_parent")

    assert await store.prune_sessions(older_than_days=30, source="telegram") == 1
    assert await store.get_session("old_tg") is None
    assert await store.get_session("old_ended") is not None

    # old_parent is old and ended, but young_child continues it: the lineage is kept.
    assert await store.prune_sessions(older_than_days=30) == 1
    remaining = {r["id"] for r in await store.recent_sessions(limit=100)}
    assert remaining == {"old_active", "young_ended", "young_child", "old_parent"}
    child = await store.get_session("young_child")
    assert child is not None and child["parent_session_id"] == "old_parent"
    # Their messages and index rows are gone too.
    assert await store.get_messages("old_ended") == []
    assert {r["session_id"] for r in await store.search_messages("wombat")} == remaining
    assert await _fts_count(store) == {"messages_fts": 4, "messages_fts_trigram": 4}

    assert await store.prune_sessions(older_than_days=30) == 0


async def test_prune_default_is_90_days(store: StateStore) -> None:
    await _aged(store, "d89", days=89, ended=True)
    await _aged(store, "d91", days=91, ended=True)
    assert await store.prune_sessions() == 1
    assert await store.get_session("d91") is None
    assert await store.get_session("d89") is not None


async def test_prune_parent_and_child_together(store: StateStore) -> None:
    await _aged(store, "p", days=60, ended=True)
    await _aged(store, "c", days=59, ended=True, parent="p")
    await _aged(store, "g", days=40, ended=True, parent="c")
    assert await store.prune_sessions(older_than_days=30) == 3
    assert await store.recent_sessions(limit=10) == []


# --------------------------------------------------------------------- stats


async def test_stats(store: StateStore) -> None:
    for i, source in enumerate(["cli", "cli", "telegram"]):
        await store.create_session(f"s{i}", source, started_at=T0 + i)
        await store.append_message(f"s{i}", "user", "hello")
    await store.append_message("s0", "assistant", "hi")
    stats = await store.stats()
    assert stats["total_sessions"] == 3
    assert stats["total_messages"] == 4
    assert stats["by_source"] == {"cli": 2, "telegram": 1}
    assert stats["db_size_bytes"] > 0


# ---------------------------------------------------------------- auto prune


async def test_auto_prune_is_off_by_default(store: StateStore) -> None:
    assert AutoPruneSettings().auto_prune is False
    now = time.time()
    await _aged(store, "ancient", days=1000, ended=True, now=now)
    assert await store.maybe_auto_prune(AutoPruneSettings(), now=now) is None
    assert await store.get_session("ancient") is not None
    assert await store.get_meta("last_auto_prune") is None


async def test_auto_prune_runs_then_waits_min_interval(store: StateStore) -> None:
    now = time.time()
    settings = AutoPruneSettings(auto_prune=True, retention_days=30, vacuum_after_prune=False, min_interval_hours=24)
    await _aged(store, "old", days=40, ended=True, now=now)
    await _aged(store, "old_active", days=40, ended=False, now=now)
    await _aged(store, "young", days=5, ended=True, now=now)

    assert await store.maybe_auto_prune(settings, now=now) == 1
    assert await store.get_session("old") is None
    assert await store.get_session("old_active") is not None
    assert await store.get_session("young") is not None
    last = await store.get_meta("last_auto_prune")
    assert last is not None and float(last) == pytest.approx(now)

    await _aged(store, "old2", days=40, ended=True, now=now)
    assert await store.maybe_auto_prune(settings, now=now + 23 * 3600) is None
    assert await store.get_session("old2") is not None
    assert float(await store.get_meta("last_auto_prune") or 0) == pytest.approx(now)

    later = now + 25 * 3600
    assert await store.maybe_auto_prune(settings, now=later) == 1
    assert await store.get_session("old2") is None
    assert float(await store.get_meta("last_auto_prune") or 0) == pytest.approx(later)


async def _freelist_after_prune(store: StateStore, vacuum: bool) -> int:
    now = time.time()
    blob = "lorem ipsum dolor " * 200
    for i in range(20):
        await store.create_session(f"big{i}", "cli", started_at=now - 100 * DAY)
        for _ in range(10):
            await store.append_message(f"big{i}", "user", blob)
        await store.end_session(f"big{i}", "user_exit")
    settings = AutoPruneSettings(auto_prune=True, retention_days=30, vacuum_after_prune=vacuum)
    assert await store.maybe_auto_prune(settings, now=now) == 20
    freelist: int = await store.read(lambda c: c.execute("PRAGMA freelist_count").fetchone()[0])
    return freelist


async def test_auto_prune_vacuums_after_prune(store: StateStore) -> None:
    assert await _freelist_after_prune(store, vacuum=True) == 0


async def test_auto_prune_without_vacuum_leaves_free_pages(store: StateStore) -> None:
    # The counterpart of the test above: proves freelist_count sees the difference.
    assert await _freelist_after_prune(store, vacuum=False) > 0


async def test_state_meta_round_trip(store: StateStore) -> None:
    await store.set_meta("x", "1")
    await store.set_meta("x", "2")
    # The gateway's schema counter lives here too (the reference's is schema_version).
    got: list[Any] = await store.read(lambda c: c.execute(
        "SELECT key, value FROM state_meta WHERE key NOT IN ('gateway_schema_version', 'fts_layout', "
        "'fts_indexed_through')").fetchall())
    assert [tuple(r) for r in got] == [("x", "2")]
