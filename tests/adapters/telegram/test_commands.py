"""Chat commands and /handoff on Telegram: the real daemon and python-telegram-bot against
``FakeTelegram``, the model is ``FakeOpenAI`` (it echoes). Every wait has a timeout."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.cli.test_cli_chat import chat as terminal_chat

from ..conftest import RunningTelegram, run_telegram_gateway

WAIT = 15.0


def rows(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def shown(m: dict[str, Any]) -> str:
    return str(m.get("rendered") or m["text"])


def bound(db: Path, key: str) -> str | None:
    found = rows(db, "SELECT session_id FROM gateway_session_index WHERE session_key = ?", key)
    return found[0][0] if found else None


async def topic_shows(fake: FakeTelegram, forum: dict[str, Any], thread: int, prefix: str) -> None:
    """Wait until the bot's one message in the topic shows text starting with ``prefix`` (a streamed
    answer grows in place, so its first state is only the start of it)."""
    def ready() -> bool:
        mine = [m for m in fake.history(forum, thread=thread)
                if m.get("from", {}).get("id") == fake.bot_id and m.get("text")]  # not the topic's service note
        return len(mine) == 1 and str(mine[0].get("text", "")).startswith(prefix)

    await fake.wait_for(ready, WAIT, what=f"{prefix!r} in topic {thread}")


def in_place(chat_id: int, thread: int | None = None) -> Any:
    def match(m: dict[str, Any]) -> bool:
        return bool(m["chat_id"] == chat_id and (thread is None or m.get("thread_id") == thread))

    match.__name__ = f"in_{chat_id}_{thread}"
    return match


async def command(fake: FakeTelegram, text: str, *, chat: Any = None, thread: int | None = None,
                  user: Any = None) -> str:
    """Send ``text`` and return the next message the bot sends to that chat (and thread)."""
    chat_id = fake.user["id"] if chat is None else (chat["id"] if isinstance(chat, dict) else chat)
    where = in_place(chat_id, thread)
    before = len([m for m in fake.sent if where(m)])
    await fake.user_says(text, chat=chat, thread=thread, user=user)
    sent = await fake.wait_sent(before + 1, timeout=WAIT, match=where)
    return shown(sent[before])


async def api(gw: RunningTelegram, text: str, user: str = "alice") -> str:
    body = {"model": "fake-model", "messages": [{"role": "user", "content": text}], "user": user}
    resp = await gw.http.post("/v1/chat/completions", json=body)
    assert resp.status_code == 200, resp.text
    return str(resp.json()["choices"][0]["message"]["content"])


async def test_every_command_in_a_telegram_dm(tmp_path: Path, fake_openai: FakeOpenAI,
                                              fake_telegram: FakeTelegram) -> None:
    fake = fake_telegram
    uid = fake.user["id"]
    key = f"agent:main:telegram:dm:{uid}"
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        help_text = await command(fake, "/help")
        for name in ("title", "new", "reset", "resume", "sessions", "status", "stop", "queue", "compress",
                     "sethome", "handoff"):
            assert f"/{name}" in help_text
        assert "Session: none yet" in await command(fake, "/status")
        assert 'Title "Morning notes" saved' in await command(fake, "/title Morning notes")
        assert "No sessions yet" in await command(fake, "/sessions")
        assert await command(fake, "good morning") == "echo: good morning"
        sid = bound(gw.db_path, key)
        assert rows(gw.db_path, "SELECT title, source, user_id FROM sessions") == [
            ("Morning notes", "telegram", str(uid))
        ]
        assert "Title: Morning notes" in await command(fake, "/title")
        assert f"Session: {sid}" in await command(fake, "/status@" + fake.bot_username)
        assert "Morning notes (current) — good morning" in await command(fake, "/sessions")
        assert "Nothing is waiting" in await command(fake, "/queue")
        assert await command(fake, "/compress") == "This session is still short; there is nothing to compress yet."
        assert "Nothing is running" in await command(fake, "/stop")
        assert (await command(fake, "/handoff")).startswith("Usage: /handoff <platform>")
        assert "no home channel yet" in await command(fake, "/handoff telegram")
        assert "Home channel of telegram set" in await command(fake, "/sethome")
        assert rows(gw.db_path, "SELECT platform, chat_id, thread_id, chat_type FROM gateway_home_channels") == [
            ("telegram", str(uid), None, "dm")
        ]
        assert "home channel already" in await command(fake, "/handoff telegram")
        assert (await command(fake, "/new Evening")).startswith("✨ New session started: Evening.")
        assert (await command(fake, "/reset")).startswith("✨ New session started.")
        assert "• Morning notes — good morning" in await command(fake, "/resume")
        assert "Resumed session \"Morning notes\"" in await command(fake, "/resume Morning notes")
        assert bound(gw.db_path, key) == sid
        assert "Unknown command /frobnicate" in await command(fake, "/frobnicate")


async def test_commands_are_authorized_like_messages(tmp_path: Path, fake_openai: FakeOpenAI,
                                                     fake_telegram: FakeTelegram) -> None:
    fake = fake_telegram
    stranger = fake.add_user("Eve")
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        for text in ("/sethome", "/title mine now", "/new", "/sessions", "/handoff telegram", "/help"):
            await fake.user_says(text, user=stranger)
        # Ordering proves the refusals happened: the allowed user's command is answered after them.
        assert "Session: none yet" in await command(fake, "/status")
        assert [m for m in fake.sent if m["chat_id"] == stranger["id"]] == []
        assert rows(gw.db_path, "SELECT COUNT(*) FROM gateway_home_channels") == [(0,)]
        assert rows(gw.db_path, "SELECT COUNT(*) FROM gateway_pending_titles") == [(0,)]
        assert rows(gw.db_path, "SELECT COUNT(*) FROM sessions") == [(0,)]


async def _set_forum_home(fake: FakeTelegram) -> dict[str, Any]:
    forum = fake.forum("Hermes home")
    reply = await command(fake, "/sethome", chat=forum)
    assert "Home channel of telegram set to Hermes home" in reply
    return forum


def _new_topic(fake: FakeTelegram, forum: dict[str, Any]) -> tuple[int, str]:
    topics = fake.topics(forum)
    assert len(topics) == 1, topics
    return next(iter(topics.items()))


async def test_handoff_from_the_http_api_to_a_telegram_forum_topic(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        assert await api(gw, "remember the number 42") == "echo: remember the number 42"
        refused = await api(gw, "/handoff telegram")
        assert "telegram has no home channel yet" in refused and "/sethome" in refused
        forum = await _set_forum_home(fake)
        await api(gw, "/title Number talk")
        sid = bound(gw.db_path, "agent:main:api-server:dm:alice")
        done = await api(gw, "/handoff telegram")
        assert done.startswith("Handoff complete: handed off to telegram.")
        assert done.endswith("/resume Number talk")
        thread, name = _new_topic(fake, forum)
        assert name == "Hermes — Number talk"
        await topic_shows(fake, forum, thread, 'echo: [This session ("Number talk") was just handed off from api-server')
        topic_key = f"agent:main:telegram:group:{forum['id']}:{thread}"
        assert bound(gw.db_path, topic_key) == sid
        assert rows(gw.db_path, "SELECT state, error, target_key FROM gateway_handoffs") == [
            ("completed", None, topic_key)
        ]
        # The next real message in the topic continues the same session, with its history.
        assert await command(fake, "what was the number?", chat=forum, thread=thread) == "echo: what was the number?"
        history = [r[0] for r in rows(gw.db_path, "SELECT content FROM messages WHERE session_id = ? ORDER BY id", sid)]
        assert history[:2] == ["remember the number 42", "echo: remember the number 42"]
        assert history[-2:] == ["what was the number?", "echo: what was the number?"]
        last_request = fake_openai.chat_requests[-1].body["messages"]
        assert any(m.get("content") == "remember the number 42" for m in last_request)
        # ...and /resume brings it back to the API chat.
        assert (await api(gw, "/resume Number talk")).startswith('↻ Resumed session "Number talk"')
        assert bound(gw.db_path, "agent:main:api-server:dm:alice") == sid


async def test_handoff_from_a_telegram_dm_to_the_home_topic(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    uid = fake.user["id"]
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        forum = await _set_forum_home(fake)
        assert await command(fake, "let us plan") == "echo: let us plan"
        sid = bound(gw.db_path, f"agent:main:telegram:dm:{uid}")
        assert sid is not None
        await fake.user_says("/handoff telegram")
        done = await fake.wait_sent(1, timeout=WAIT, match=lambda m: shown(m).startswith("Handoff complete"))
        assert done[0]["chat_id"] == uid
        title = f"handoff-{sid.rsplit('_', 1)[-1]}"
        assert shown(done[0]).endswith(f"/resume {title}")
        assert any(shown(m).startswith("⏳ Handing this session over") for m in fake.sent if m["chat_id"] == uid)
        thread, name = _new_topic(fake, forum)
        assert name == f"Hermes — {title}"
        await fake.wait_sent(1, timeout=WAIT, match=in_place(forum["id"], thread))
        assert bound(gw.db_path, f"agent:main:telegram:group:{forum['id']}:{thread}") == sid
        assert bound(gw.db_path, f"agent:main:telegram:dm:{uid}") is None
        assert await command(fake, "next step?", chat=forum, thread=thread) == "echo: next step?"
        count = rows(gw.db_path, "SELECT COUNT(*) FROM messages WHERE session_id = ?", sid)[0][0]
        assert count == 6  # plan, the handoff turn, the topic message: each with its answer
        # Back in the DM: the session comes back by its title.
        assert f'Resumed session "{title}" (6 messages)' in await command(fake, f"/resume {title}")


async def test_handoff_send_failure_is_recorded_and_a_retry_works(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    # The summary is sent whole here: a streamed one would show its first part by an edit later.
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                    telegram={"max_flood_wait": 1.0, "streaming": False}) as gw:
        forum = await _set_forum_home(fake)
        await api(gw, "keep this safe")
        sid = bound(gw.db_path, "agent:main:api-server:dm:alice")
        fake.rate_limit_next("sendMessage", retry_after=30)  # longer than we may wait: the send fails
        failed = await api(gw, "/handoff telegram")
        assert failed.startswith("Handoff failed: sending the summary to telegram failed (RetryAfter")
        assert "try /handoff telegram again" in failed
        (state, error), = rows(gw.db_path, "SELECT state, error FROM gateway_handoffs")
        assert state == "failed" and "RetryAfter" in error
        assert bound(gw.db_path, "agent:main:api-server:dm:alice") == sid  # the source keeps its session
        done = await api(gw, "/handoff telegram")
        assert done.startswith("Handoff complete")
        assert [r[0] for r in rows(gw.db_path, "SELECT state FROM gateway_handoffs ORDER BY id")] == [
            "failed", "completed"
        ]
        assert len(fake.topics(forum)) == 2  # the retry opened a fresh topic
        contents = [r[0] for r in rows(gw.db_path, "SELECT content FROM messages WHERE session_id = ? ORDER BY id",
                                       sid)]
        assert contents[:2] == ["keep this safe", "echo: keep this safe"]  # nothing lost


async def test_handoff_when_the_topic_cannot_be_created(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        forum = await _set_forum_home(fake)
        await api(gw, "hello")
        fake.fail_next("createForumTopic", 400, "Bad Request: not enough rights to create a topic")
        failed = await api(gw, "/handoff telegram")
        assert failed.startswith("Handoff failed: could not open a thread in the telegram home channel")
        assert "not enough rights" in failed.lower()
        assert rows(gw.db_path, "SELECT state FROM gateway_handoffs") == [("failed",)]
        assert fake.topics(forum) == {}
        assert (await api(gw, "/handoff telegram")).startswith("Handoff complete")
        assert len(fake.topics(forum)) == 1


async def test_a_group_without_topics_is_refused_as_a_handoff_home(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    """Its "thread" would be a seed message that later messages do not carry: refused up front."""
    fake = fake_telegram
    group = fake.supergroup("Plain group")
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        home = await command(fake, "/sethome", chat=group)
        assert "Home channel of telegram set to Plain group" in home
        assert "Note: /handoff telegram will be refused here: the Telegram home channel is a group without " \
               "topics" in home
        await api(gw, "keep this")
        sid = bound(gw.db_path, "agent:main:api-server:dm:alice")
        refused = await api(gw, "/handoff telegram")
        assert refused.startswith("⚠️ Cannot hand off to telegram: the Telegram home channel is a group without topics")
        assert "Turn on Topics" in refused and "/sethome in your private chat with the bot" in refused
        assert rows(gw.db_path, "SELECT COUNT(*) FROM gateway_handoffs") == [(0,)]
        assert [m for m in fake.sent if m["chat_id"] == group["id"]][1:] == []  # no seed message, nothing
        assert bound(gw.db_path, "agent:main:api-server:dm:alice") == sid


async def test_handoff_with_per_user_thread_sessions_keys_the_topic_like_its_messages(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    uid = fake.user["id"]
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                    config={"gateway": {"thread_sessions_per_user": True}}) as gw:
        forum = await _set_forum_home(fake)
        await api(gw, "remember the number 7")
        sid = bound(gw.db_path, "agent:main:api-server:dm:alice")
        assert (await api(gw, "/handoff telegram")).startswith("Handoff complete")
        thread, _ = _new_topic(fake, forum)
        await fake.wait_sent(1, timeout=WAIT, match=in_place(forum["id"], thread))
        # The key of the one who set the home, in that topic: what their messages there get.
        key = f"agent:main:telegram:group:{forum['id']}:{thread}:{uid}"
        assert rows(gw.db_path, "SELECT target_key FROM gateway_handoffs") == [(key,)]
        assert bound(gw.db_path, key) == sid
        assert await command(fake, "and the number?", chat=forum, thread=thread) == "echo: and the number?"
        last = rows(gw.db_path, "SELECT session_id, content FROM messages ORDER BY id DESC LIMIT 1")
        assert last == [(sid, "echo: and the number?")]


async def test_a_redelivered_update_gets_its_notice_once(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    uid = fake.user["id"]
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url):
        photo_only = await fake.user_says("")  # no text, no caption
        await fake.wait_sent(1, timeout=WAIT, match=in_place(uid))
        await fake.redeliver(photo_only)
        # Updates of one chat are handled in order: once /status is answered, the redelivery was too.
        assert "Session: none yet" in await command(fake, "/status")
        notices = [m for m in fake.sent if m["chat_id"] == uid and "nothing I can read" in shown(m)]
        assert len(notices) == 1


async def test_handoff_from_the_terminal_to_a_telegram_topic_and_back(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    """`hermes-gateway chat` (a real subprocess on the control socket) hands its session to the
    forum home; the topic continues it; `/resume <title>` in a later terminal brings it back."""
    fake = fake_telegram
    home = tmp_path / "h"
    async with run_telegram_gateway(home, fake, fake_openai.base_url) as gw:
        forum = await _set_forum_home(fake)
        done = await terminal_chat(home, "remember the number 42\n/title Forty two\n/handoff telegram\nnot sent\n")
        assert done.code == 0, done
        assert "echo: remember the number 42" in done.out
        assert "Handoff complete: handed off to telegram." in done.out and "/resume Forty two" in done.out
        assert "not sent" not in done.out
        [(sid, title)] = rows(gw.db_path, "SELECT id, title FROM sessions WHERE source = 'cli'")
        assert title == "Forty two"
        thread, name = _new_topic(fake, forum)
        assert name == "Hermes — Forty two"
        await topic_shows(fake, forum, thread, 'echo: [This session ("Forty two") was just handed off from cli')
        topic_key = f"agent:main:telegram:group:{forum['id']}:{thread}"
        assert bound(gw.db_path, topic_key) == sid
        # The next real message in the topic continues the same session.
        assert await command(fake, "what was the number?", chat=forum, thread=thread) == "echo: what was the number?"
        assert rows(gw.db_path, "SELECT session_id FROM messages ORDER BY id DESC LIMIT 2") == [(sid,), (sid,)]
        # A new terminal gets it back by its title.
        back = await terminal_chat(home, "/resume Forty two\nstill there?\n")
        assert back.code == 0, back
        assert back.out.splitlines()[0].startswith('↻ Resumed session "Forty two" (6 messages)')
        assert back.out.splitlines()[1] == "echo: still there?"
        contents = [r[0] for r in rows(gw.db_path, "SELECT content FROM messages WHERE session_id = ? ORDER BY id",
                                       sid)]
        assert contents[0] == "remember the number 42" and contents[-2:] == ["still there?", "echo: still there?"]
        assert len(contents) == 8
