"""Every chat command on Discord: the real daemon and discord.py against ``FakeDiscord``, the model is
``FakeOpenAI`` (it echoes). In a DM a command is the message itself; in a server channel it follows a
mention (``@hermes /status``). Every wait has a timeout; "nothing happened" is proven by ordering."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.emulators.fake_discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI

from .test_adapter import WAIT, rows, run_discord_gateway

#: Background model calls (titles, reviews) would take the scripted replies.
QUIET_AGENT = {"agent": {"auto_title": False, "memory_nudge_interval": 0, "skill_nudge_interval": 0}}
COMMANDS = ("help", "status", "queue", "title", "new", "reset", "resume", "sessions", "compress", "sethome",
            "handoff", "stop")


def bound(db: Path, key: str) -> str | None:
    found = rows(db, "SELECT session_id FROM gateway_session_index WHERE session_key = ?", key)
    return found[0][0] if found else None


async def command(fake: FakeDiscord, text: str, *, chat: Any = None, mention: bool = False) -> str:
    """Send ``text`` and return the next message the bot sends to that channel."""
    channel = fake.dm_channel()["id"] if chat is None else chat

    def here(m: dict[str, Any]) -> bool:
        return bool(m["chat_id"] == channel and m["method"] == "create_message")

    before = len([m for m in fake.sent if here(m)])
    await fake.user_says(text, chat=chat, mention=mention)
    sent = await fake.wait_sent(before + 1, timeout=WAIT, match=here)
    return str(sent[before]["text"])


async def test_every_command_in_a_discord_dm(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    dm = fake.dm_channel()["id"]
    key = f"agent:main:discord:dm:{dm}"
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url, config=QUIET_AGENT) as gw:
        help_text = await command(fake, "/help")
        for name in COMMANDS:
            assert f"/{name}" in help_text
        assert "Session: none yet" in await command(fake, "/status")
        assert 'Title "Morning notes" saved' in await command(fake, "/title Morning notes")
        assert "No sessions yet" in await command(fake, "/sessions")
        assert await command(fake, "good morning") == "echo: good morning"
        sid = bound(gw.db_path, key)
        assert sid is not None
        assert rows(gw.db_path, "SELECT title, source, user_id FROM sessions") == [
            ("Morning notes", "discord", fake.user["id"])
        ]
        assert "Title: Morning notes" in await command(fake, "/title")
        status = await command(fake, "/status")
        assert f"Session: {sid}" in status and "Title: Morning notes" in status and "Messages: 2" in status
        assert "Morning notes (current) — good morning" in await command(fake, "/sessions")
        assert "Nothing is waiting" in await command(fake, "/queue")
        assert await command(fake, "/compress") == "This session is still short; there is nothing to compress yet."
        assert "Nothing is running" in await command(fake, "/stop")
        assert (await command(fake, "/handoff")).startswith("Usage: /handoff <platform>")
        assert "discord has no home channel yet" in await command(fake, "/handoff discord")
        assert "Home channel of discord set" in await command(fake, "/sethome")
        assert rows(gw.db_path, "SELECT platform, chat_id, thread_id, chat_type FROM gateway_home_channels") == [
            ("discord", dm, None, "dm")
        ]
        assert "home channel already" in await command(fake, "/handoff discord")
        assert (await command(fake, "/new Evening")).startswith("✨ New session started: Evening.")
        assert bound(gw.db_path, key) != sid
        assert (await command(fake, "/reset")).startswith("✨ New session started.")
        assert "• Morning notes — good morning" in await command(fake, "/resume")
        assert 'Resumed session "Morning notes"' in await command(fake, "/resume Morning notes")
        assert bound(gw.db_path, key) == sid
        assert "Unknown command /frobnicate" in await command(fake, "/frobnicate")
    # Commands are not turns: the only user turn is the one real message.
    assert [r[0] for r in rows(gw.db_path, "SELECT content FROM messages WHERE role = 'user'")] == ["good morning"]


async def test_commands_after_a_mention_in_a_channel(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    """``@hermes /cmd`` in a server channel acts on this user's channel session; /queue and /stop see a
    turn that is running."""
    fake = fake_discord
    general = fake.general
    key = f"agent:main:discord:channel:{general}:{fake.user['id']}"
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url, config=QUIET_AGENT) as gw:
        await fake.user_says("/status", chat=general)  # no mention: not for the bot
        assert "Session: none yet" in await command(fake, "/status", chat=general, mention=True)
        assert "✏️ Title \"Channel work\" saved" in await command(fake, "/title Channel work", chat=general,
                                                                  mention=True)
        fake_openai.hang()  # the first turn runs until /stop
        await fake.user_says("a slow question", chat=general, mention=True)
        await fake.wait_for(lambda: len(fake_openai.chat_requests) == 1, WAIT, what="the model call")
        await fake.user_says("the next question", chat=general, mention=True)
        await fake.wait_for(lambda: gw.gateway.services is not None
                            and gw.gateway.services.lanes.waiting(key) == 1, WAIT, what="the queued message")
        queue = await command(fake, "/queue", chat=general, mention=True)
        assert queue == "A reply is being written now.\nWaiting (1), in order:\n1. the next question"
        assert (await command(fake, "/stop", chat=general, mention=True)).startswith("⚡ Stopped.")
        answered = await fake.wait_sent(1, timeout=WAIT, match=lambda m: m["text"] == "echo: the next question")
        assert answered[0]["chat_id"] == general
        sid = bound(gw.db_path, key)
        assert rows(gw.db_path, "SELECT title FROM sessions WHERE id = ?", sid) == [("Channel work",)]
        home = await command(fake, "/sethome", chat=general, mention=True)
        assert f"Home channel of discord set to general (ID {general})" in home
        assert rows(gw.db_path, "SELECT platform, chat_id, thread_id, chat_type FROM gateway_home_channels") == [
            ("discord", general, None, "channel")
        ]
    texts = [r[0] for r in rows(gw.db_path, "SELECT content FROM messages WHERE role = 'user' ORDER BY id")]
    assert texts == ["a slow question", "the next question"]
    # The unmentioned "/status" came first and got nothing: the first answer is the mentioned one's.
    assert [m["text"] for m in fake.sent if "Session: none yet" in m["text"]] == [fake.sent[0]["text"]]
