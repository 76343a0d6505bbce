"""Every chat command through the real daemon and its OpenAI-compatible HTTP API.

The API's ``user`` field names a chat, so two ``user`` values are two chats (and two
owners). Replies are read from the HTTP answer; state is checked in state.db.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

from adapters.base import ChatType
from gateway.routing.session_index import PENDING_TITLE_TTL
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway.conftest import Running, run_gateway

WAIT = 15.0
ALLOW = {"TESTCHAT_ALLOWED_USERS": "u1"}


def rows(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


async def say(run: Running, text: str, user: str = "alice") -> str:
    resp = await run.ask(text, user=user)
    assert resp.status_code == 200, resp.text
    return str(resp.json()["choices"][0]["message"]["content"])


def key_of(user: str) -> str:
    return f"agent:main:api-server:dm:{user}"


def bound(db: Path, key: str) -> str | None:
    found = rows(db, "SELECT session_id FROM gateway_session_index WHERE session_key = ?", key)
    return found[0][0] if found else None


async def test_every_command_answers_over_http(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        help_text = await say(run, "/help")
        for name in ("title", "new", "reset", "resume", "sessions", "status", "stop", "queue", "compress",
                     "sethome", "handoff", "help"):
            assert f"/{name}" in help_text
        assert "none yet" in await say(run, "/status")
        assert "No session yet" in await say(run, "/title")
        assert await say(run, "/sessions") == "No sessions yet: your next message starts one."
        assert "Nothing is waiting" in await say(run, "/queue")
        # "not available yet" until the agent core provides compression; either way no crash.
        assert await say(run, "/compress") in (
            "Compression is not available yet in this gateway.", "Nothing to compress yet: this chat has no session."
        )
        assert "only answers requests" in await say(run, "/sethome")
        assert (await say(run, "/handoff")).startswith("Usage: /handoff <platform>")
        assert "Nothing is running" in await say(run, "/stop")
        assert "No named sessions yet" in await say(run, "/resume")
        assert (await say(run, "hello")) == "echo: hello"
        status = await say(run, "/status")
        sid = bound(run.db_path, key_of("alice"))
        assert sid is not None and f"Session: {sid}" in status and "Messages: 2" in status
        assert "No title set" in await say(run, "/title")
        assert (await say(run, "/title  First\u200b steps ")) == "✏️ Session title set: First steps"
        assert "Title: First steps" in await say(run, "/title")
        listing = await say(run, "/sessions")
        assert "First steps (current) — hello" in listing and sid in listing
        assert "Unknown command /nope" in await say(run, "/nope")
        fresh = await say(run, "/new Second")
        assert fresh.startswith("✨ New session started: Second.") and "/resume" in fresh
        second = bound(run.db_path, key_of("alice"))
        assert second not in (None, sid)
        assert (await say(run, "/reset")).startswith("✨ New session started.")
        third = bound(run.db_path, key_of("alice"))
        assert third not in (None, sid, second)
        names = await say(run, "/resume")
        assert "• First steps — hello" in names and "• Second" in names
        assert (await say(run, "/resume First steps")).startswith('↻ Resumed session "First steps" (2 messages)')
        assert bound(run.db_path, key_of("alice")) == sid
        assert "Already on session" in await say(run, "/resume First steps")
        assert (await say(run, "and again")) == "echo: and again"
    # /new ended the first session (reason "new"), /resume reopened it; /reset ended the second.
    ended = dict(rows(run.db_path, "SELECT id, end_reason FROM sessions"))
    assert ended == {sid: None, second: "reset", third: None}
    assert rows(run.db_path, "SELECT parent_session_id FROM sessions WHERE parent_session_id IS NOT NULL") == []
    assert rows(run.db_path, "SELECT content FROM messages WHERE session_id = ? ORDER BY id", sid) == [
        ("hello",), ("echo: hello",), ("and again",), ("echo: and again",)
    ]


async def test_new_ends_the_old_session_with_reason_new(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        await say(run, "one")
        first = bound(run.db_path, key_of("alice"))
        await say(run, "/new")
        assert rows(run.db_path, "SELECT end_reason FROM sessions WHERE id = ?", first) == [("new",)]


async def test_title_before_the_first_message_is_applied_on_creation(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        reply = await say(run, "/title Early bird")
        assert 'Title "Early bird" saved' in reply
        assert rows(run.db_path, "SELECT title FROM sessions") == []
        assert 'titled "Early bird"' in await say(run, "/title")
        # A queued title reserves nothing: another chat may queue it too; the first session to start wins.
        assert 'Title "Early bird" saved' in await say(run, "/title Early bird", user="bob")
        assert await say(run, "first message") == "echo: first message"
        sid = bound(run.db_path, key_of("alice"))
        assert rows(run.db_path, "SELECT title FROM sessions WHERE id = ?", sid) == [("Early bird",)]
        # Bob was told it was saved: his first reply says it could not be applied, and why.
        late = await say(run, "me too", user="bob")
        assert late.startswith("echo: me too\n\n⚠️ The title \"Early bird\" you set with /title is now used by "
                               "another session")
        assert "/title Early bird #2" in late
        bobs = bound(run.db_path, key_of("bob"))
        assert rows(run.db_path, "SELECT title FROM sessions WHERE id = ?", bobs) == [(None,)]
        assert rows(run.db_path, "SELECT COUNT(*) FROM gateway_pending_titles") == [(0,)]
        # Only the first reply carries the note.
        assert await say(run, "again", user="bob") == "echo: again"


async def test_queued_titles_expire(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        conn = sqlite3.connect(run.db_path)  # a second writer, as another process would be
        try:
            old = time.time() - PENDING_TITLE_TTL - 60
            conn.executemany("INSERT INTO gateway_pending_titles (session_key, title, created_at) VALUES (?, ?, ?)",
                             [(key_of("alice"), "Stale", old), ("agent:main:cli:dm:term-gone", "Left behind", old)])
            conn.commit()
        finally:
            conn.close()
        assert "No session yet. Usage" in await say(run, "/title")  # expired: not shown, not applied
        assert 'Title "Left behind" saved' in await say(run, "/title Left behind", user="bob")
        # Queuing swept the expired rows.
        assert rows(run.db_path, "SELECT session_key, title FROM gateway_pending_titles") == [
            (key_of("bob"), "Left behind")
        ]
        assert await say(run, "hello") == "echo: hello"
        assert rows(run.db_path, "SELECT title FROM sessions WHERE id = ?", bound(run.db_path, key_of("alice"))) == [
            (None,)
        ]


async def test_titles_are_unique_and_cleaned(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        await say(run, "hi", user="alice")
        await say(run, "hi", user="bob")
        assert "set: Project" in await say(run, "/title Project", user="alice")
        clash = await say(run, "/title Project", user="bob")
        assert clash == '⚠️ The title "Project" is already in use. Pick another, for example "Project #2".'
        assert "set: Project #2" in await say(run, "/title Project #2", user="bob")
        assert "Project #3" in await say(run, "/title Project", user="bob")
        # Control, zero-width and bidi-override characters are removed; 100 characters at most.
        assert "set: Clean title" in await say(run, "/title Cl\u202eean\x07 ti\u200dtle", user="bob")
        assert "at most 100 characters" in await say(run, "/title " + "x" * 101, user="bob")
        assert "empty once control" in await say(run, "/title \u200b\u202e\u2066", user="bob")
        assert sorted(r[0] for r in rows(run.db_path, "SELECT title FROM sessions")) == ["Clean title", "Project"]
        # /new with a taken title still starts the session and says why the title was not set.
        reply = await say(run, "/new Project", user="bob")
        assert reply.startswith("✨ New session started.") and '"Project #2"' in reply


async def test_resume_by_title_follows_the_lineage(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        await say(run, "/new Research")
        await say(run, "part one")
        first = bound(run.db_path, key_of("alice"))
        await say(run, "/new Research #2")
        await say(run, "part two")
        second = bound(run.db_path, key_of("alice"))
        await say(run, "/new elsewhere")
        assert "Resumed session \"Research #2\"" in await say(run, "/resume Research")
        assert bound(run.db_path, key_of("alice")) == second
        assert 'Resumed session "Research"' in await say(run, f"/resume {first}")
        assert bound(run.db_path, key_of("alice")) == first


async def test_resume_by_id_prefix_and_ambiguous_prefix(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        await say(run, "a")
        first = bound(run.db_path, key_of("alice"))
        await say(run, "/new")
        await say(run, "b")
        second = bound(run.db_path, key_of("alice"))
        assert first and second
        reply = await say(run, f"/resume {first[:-2]}")  # a unique prefix
        assert reply.startswith(f"↻ Resumed session {first} (2 messages)")
        common = first[:8]  # the date: both ids start with it
        assert second.startswith(common)
        ambiguous = await say(run, f"/resume {common}")
        assert "matches 2 sessions" in ambiguous and first in ambiguous and second in ambiguous
        assert bound(run.db_path, key_of("alice")) == first
        assert "No session of this chat matches" in await say(run, "/resume 1999_nothing")
        assert await say(run, f"/resume {second}") == f"↻ Resumed session {second} (2 messages). " \
            "The conversation continues from there."


async def test_resume_refuses_another_chats_session(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        await say(run, "secret plans", user="alice")
        await say(run, "/title Alice private", user="alice")
        theirs = bound(run.db_path, key_of("alice"))
        await say(run, "hi", user="mallory")
        mine = bound(run.db_path, key_of("mallory"))
        for how in (theirs, "Alice private"):
            reply = await say(run, f"/resume {how}", user="mallory")
            assert reply == ("⚠️ /resume refused: that session belongs to a different user or chat. "
                             "You can only resume sessions from this chat."), reply
        # A prefix only ever matches among one's own sessions: someone else's is "not found".
        reply = await say(run, f"/resume {theirs[:-1]}", user="mallory")
        assert reply.startswith("No session of this chat matches") and "private" not in reply.lower()
        assert theirs not in reply
        assert bound(run.db_path, key_of("mallory")) == mine
        # A prefix shared with someone else's session resolves among one's own only.
        reply = await say(run, f"/resume {theirs[:8]}", user="mallory")
        assert reply.startswith(f"📌 Already on session {mine}")
        listing = await say(run, "/sessions", user="mallory")
        assert theirs not in listing and "Alice private" not in listing


async def test_a_prefix_resolves_among_ones_own_sessions_however_many_others_share_it(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        await say(run, "one", user="mallory")
        first = bound(run.db_path, key_of("mallory"))
        assert first is not None
        prefix = first[:17]  # date, time and the first hex digit
        # Twelve newer sessions of someone else share the prefix (more than any lookup limit).
        conn = sqlite3.connect(run.db_path)
        try:
            now = time.time()
            foreign = [f"{prefix}{n:07x}" for n in range(12)]
            conn.executemany(
                "INSERT INTO sessions (id, source, user_id, started_at, title) VALUES (?, 'api-server', 'alice', ?, ?)",
                [(sid, now + n, f"Alice secret {n}") for n, sid in enumerate(foreign)],
            )
            conn.commit()
        finally:
            conn.close()
        reply = await say(run, f"/resume {prefix}", user="mallory")
        assert reply.startswith(f"📌 Already on session {first}"), reply  # resolved to one's own
        assert not any(sid in reply for sid in foreign) and "Alice" not in reply
        # Two of one's own share a shorter prefix: the candidates listed are one's own only.
        await say(run, "/new", user="mallory")
        await say(run, "two", user="mallory")
        second = bound(run.db_path, key_of("mallory"))
        assert second is not None and second[:9] == first[:9]
        ambiguous = await say(run, f"/resume {first[:9]}", user="mallory")
        assert "matches 2 sessions" in ambiguous and first in ambiguous and second in ambiguous
        assert not any(sid in ambiguous for sid in foreign)


async def test_a_session_is_resumable_only_where_it_lived(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    """Same chat, and the same person where the chat is per person: a DM session cannot be
    pulled into a group (its replies would be public), nor one member's group session by another."""
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env={"TESTCHAT_ALLOWED_USERS": "u1,u2"}):
        async def in_chat(text: str, *, user: str = "u1", room: str | None = None) -> str:
            where = room or user
            before = len(chat.to(where))
            await chat.say(text, user=user, chat=room, chat_type=ChatType.GROUP if room else ChatType.DM)
            return (await chat.wait_sent(before + 1, chat=where))[before].text

        await in_chat("private matters")
        await in_chat("/title Private notes")
        await in_chat("group matters", room="room")
        await in_chat("/title Group notes", room="room")
        refused = "⚠️ /resume refused: that session belongs to a different user or chat."
        assert (await in_chat("/resume Private notes", room="room")).startswith(refused)
        assert "Private notes" not in await in_chat("/sessions", room="room")
        assert (await in_chat("/resume Group notes", user="u2", room="room")).startswith(refused)
        assert (await in_chat("/resume Group notes")).startswith(refused)  # nor the group's into the DM
        # Where it lived, it comes back, also after the chat moved on.
        await in_chat("/new", room="room")
        assert (await in_chat("/resume Group notes", room="room")).startswith('↻ Resumed session "Group notes"')
        await in_chat("/new")
        assert (await in_chat("/resume Private notes")).startswith('↻ Resumed session "Private notes"')


async def test_cross_user_resume_when_configured(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url,
                           config={"sessions": {"allow_cross_user_resume": True}}) as run:
        await say(run, "shared work", user="alice")
        theirs = bound(run.db_path, key_of("alice"))
        assert (await say(run, f"/resume {theirs}", user="bob")).startswith("↻ Resumed session")
        assert bound(run.db_path, key_of("bob")) == theirs


# -- /queue and /handoff refusals through a second platform -------------------------------------


async def test_queue_shows_waiting_messages_and_handoff_refuses_mid_turn(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env=ALLOW) as run:
        assert (await chat.say("/sethome", user="u1", chat="room", chat_type=ChatType.GROUP)) == "answered"
        await say(run, "hello")  # a session to hand off
        fake_openai.hang()
        slow = asyncio.create_task(say(run, "think slowly"))
        lanes = run.gateway.services.lanes  # type: ignore[union-attr]
        key = key_of("alice")

        async def running() -> None:
            while not lanes.is_running(key):
                await asyncio.sleep(0.01)

        await asyncio.wait_for(running(), WAIT)
        queued = asyncio.create_task(say(run, "a follow-up question"))

        async def waiting() -> None:
            while lanes.waiting(key) < 1:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(waiting(), WAIT)
        shown = await say(run, "/queue")
        assert "A reply is being written now." in shown and "1. a follow-up question" in shown
        refused = await say(run, "/handoff testchat")
        assert refused.startswith("⚠️ A reply is still being written")
        assert rows(run.db_path, "SELECT COUNT(*) FROM gateway_handoffs") == [(0,)]
        assert (await say(run, "/stop")).startswith("⚡ Stopped")
        await asyncio.wait_for(queued, WAIT)
        slow.cancel()


async def test_handoff_refusals_name_the_reason(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env=ALLOW) as run:
        await say(run, "hello")
        assert "'discord' is not a platform this gateway can hand off to (enabled: testchat)" in await say(
            run, "/handoff discord")
        assert "not a platform" in await say(run, "/handoff api-server")
        no_home = await say(run, "/handoff testchat")
        assert "testchat has no home channel yet" in no_home and "/sethome" in no_home
        await chat.say("/sethome", user="u1", chat="room", chat_type=ChatType.GROUP)
        await chat.wait_sent(1, chat="room")
        assert "nothing to hand off" in await say(run, "/handoff testchat", user="newcomer")
        assert rows(run.db_path, "SELECT COUNT(*) FROM gateway_handoffs") == [(0,)]


async def test_handoff_over_http_to_a_home_without_threads(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    """A platform with no threads: the home chat itself continues the session."""
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env=ALLOW) as run:
        await chat.say("/sethome", user="u1", chat="room", chat_type=ChatType.GROUP)
        await chat.wait_sent(1, chat="room")
        await say(run, "plan the trip")
        sid = bound(run.db_path, key_of("alice"))
        done = await say(run, "/handoff testchat")
        assert done.startswith("Handoff complete: handed off to testchat.")
        title = f"handoff-{sid.rsplit('_', 1)[-1]}"  # type: ignore[union-attr]
        assert done.endswith(f"/resume {title}")
        summary = (await chat.wait_sent(2, chat="room"))[1]
        assert summary.text.startswith("echo: [This session") and title in summary.text
        # No thread: the session is the key of the one who chose the home, which their
        # own messages in that group get (the reference's Limitation for such homes).
        room_u1 = "agent:main:testchat:group:room:u1"
        assert rows(run.db_path, "SELECT state, target_key FROM gateway_handoffs") == [("completed", room_u1)]
        assert bound(run.db_path, room_u1) == sid
        assert bound(run.db_path, key_of("alice")) is None  # the source starts afresh
        # The next real message there continues the session, with its history.
        await chat.say("and the hotel?", user="u1", chat="room", chat_type=ChatType.GROUP)
        assert (await chat.wait_sent(3, chat="room"))[2].text == "echo: and the hotel?"
        assert rows(run.db_path, "SELECT content FROM messages WHERE session_id = ? ORDER BY id", sid)[0] == (
            "plan the trip",
        )
        assert rows(run.db_path, "SELECT content FROM messages WHERE session_id = ? ORDER BY id DESC LIMIT 1",
                    sid) == [("echo: and the hotel?",)]
        assert any(m.get("content") == "plan the trip" for m in fake_openai.chat_requests[-1].body["messages"])
        assert (await say(run, f"/resume {title}")).startswith(f'↻ Resumed session "{title}"')
        assert bound(run.db_path, key_of("alice")) == sid


async def test_a_refused_request_can_be_retried_and_is_refused_alike(gateway_home: Path,
                                                                      fake_openai: FakeOpenAI) -> None:
    """A request refused with an error ("too long", "nothing to read") did nothing: a retry with the same
    Idempotency-Key is judged again (the same error), never a 409, and nothing is recorded for it."""
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        for key, text, status, notice in (("k-long", "y" * 40_000, 413, "That message is too long (40000 characters"),
                                          ("k-blank", "   ", 400, "messages[0] is empty")):
            body = {"model": "fake-model", "messages": [{"role": "user", "content": text}], "user": "alice"}
            for _ in range(2):
                resp = await run.http.post("/v1/chat/completions", headers={"Idempotency-Key": key}, json=body)
                assert resp.status_code == status, resp.text
                assert resp.json()["error"]["message"].startswith(notice)
        assert fake_openai.chat_requests == []
        assert rows(run.db_path, "SELECT COUNT(*) FROM gateway_inbound_seen") == [(0,)]
        assert rows(run.db_path, "SELECT COUNT(*) FROM sessions") == [(0,)]
