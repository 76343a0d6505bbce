"""Every chat command on Slack, the two ways the README gives: as slash commands of the app (in a DM, or at
the top of a channel) and written after a mention (``@hermes /status``), here inside a channel's
conversation thread. The real daemon and slack-bolt against ``FakeSlack``; the model is ``FakeOpenAI``
(it echoes). Every wait has a timeout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.emulators.fake_slack import FakeSlack
from tests.fakes.openai_server import FakeOpenAI

from .test_adapter import USER, WAIT, rows, run_slack_gateway, ts_of

DM = "D0DM0001"
CHANNEL = "C0CHAN001"
#: Background model calls (titles, reviews) would race the scripted replies.
QUIET_AGENT = {"agent": {"auto_title": False, "memory_nudge_interval": 0, "skill_nudge_interval": 0}}
COMMANDS = ("help", "status", "queue", "title", "new", "reset", "resume", "sessions", "compress", "sethome",
            "handoff", "stop")


def bound(db: Path, key: str) -> str | None:
    found = rows(db, "SELECT session_id FROM gateway_session_index WHERE session_key = ?", key)
    return found[0][0] if found else None


def shown(mrkdwn: str) -> str:
    """What Slack displays for a mrkdwn text (``&lt;``, ``&gt;``, ``&amp;`` are its only escapes)."""
    return mrkdwn.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def posted(fake: FakeSlack, channel: str, thread: str | None) -> list[dict[str, Any]]:
    return [m for m in fake.sent if m["method"] == "chat.postMessage" and m["chat_id"] == channel
            and m["thread_id"] == thread]


async def slash(fake: FakeSlack, line: str, *, chat: str = DM) -> str:
    """Run ``/name args`` as a slash command and return the bot's next message at the top of ``chat``."""
    name, _, args = line.partition(" ")
    before = len(posted(fake, chat, None))
    await fake.slash_command(name, args, chat=chat)
    await fake.wait_for(lambda: len(posted(fake, chat, None)) > before, WAIT, what=f"the answer to {line}")
    return shown(posted(fake, chat, None)[before]["text"])


async def said(fake: FakeSlack, text: str, *, chat: str = DM, thread: str | None = None,
               mention: bool = False) -> str:
    """Post ``text`` and return the bot's next message where it was written."""
    before = len(posted(fake, chat, thread))
    await fake.user_says(text, chat=chat, thread=thread, mention=mention)
    await fake.wait_for(lambda: len(posted(fake, chat, thread)) > before, WAIT, what=f"the answer to {text}")
    return shown(posted(fake, chat, thread)[before]["text"])


async def test_every_command_as_a_slash_command_in_a_dm(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake = fake_slack
    key = f"agent:main:slack:dm:{DM}"
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, config=QUIET_AGENT) as gw:
        help_text = await slash(fake, "/help")
        for name in COMMANDS:
            assert f"/{name}" in help_text
        assert "Session: none yet" in await slash(fake, "/status")
        assert 'Title "Morning notes" saved' in await slash(fake, "/title Morning notes")
        assert "No sessions yet" in await slash(fake, "/sessions")
        # A DM message and the DM's slash commands share one session.
        assert await said(fake, "good morning") == "echo: good morning"
        sid = bound(gw.db_path, key)
        assert sid is not None
        assert rows(gw.db_path, "SELECT title, source, user_id FROM sessions") == [("Morning notes", "slack", USER)]
        assert "Title: Morning notes" in await slash(fake, "/title")
        status = await slash(fake, "/status")
        assert f"Session: {sid}" in status and "Messages: 2" in status
        assert "Morning notes (current) — good morning" in await slash(fake, "/sessions")
        assert "Nothing is waiting" in await slash(fake, "/queue")
        assert await slash(fake, "/compress") == "This session is still short; there is nothing to compress yet."
        assert "Nothing is running" in await slash(fake, "/stop")
        assert (await slash(fake, "/handoff")).startswith("Usage: /handoff <platform>")
        assert "slack has no home channel yet" in await slash(fake, "/handoff slack")
        assert "Home channel of slack set" in await slash(fake, "/sethome")
        assert rows(gw.db_path, "SELECT platform, chat_id, thread_id, chat_type FROM gateway_home_channels") == [
            ("slack", DM, None, "dm")
        ]
        assert "home channel already" in await slash(fake, "/handoff slack")
        assert (await slash(fake, "/new Evening")).startswith("✨ New session started: Evening.")
        assert bound(gw.db_path, key) != sid
        assert (await slash(fake, "/reset")).startswith("✨ New session started.")
        assert "• Morning notes — good morning" in await slash(fake, "/resume")
        assert 'Resumed session "Morning notes"' in await slash(fake, "/resume Morning notes")
        assert bound(gw.db_path, key) == sid
        assert "Unknown command /frobnicate" in await slash(fake, "/frobnicate")
    assert [r[0] for r in rows(gw.db_path, "SELECT content FROM messages WHERE role = 'user'")] == ["good morning"]
    assert all(m["thread_id"] is None for m in fake.sent)  # a DM is answered where the user wrote


async def test_every_command_after_a_mention_in_a_channel_thread(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, config=QUIET_AGENT) as gw:
        body = await fake.user_says("remember the number 42", chat=CHANNEL, mention=True)
        root = ts_of(body)
        await fake.wait_reply(CHANNEL, root, text="echo: remember the number 42", timeout=WAIT)
        key = f"agent:main:slack:group:{CHANNEL}:{root}"
        sid = bound(gw.db_path, key)
        assert sid is not None

        async def command(text: str) -> str:
            return await said(fake, text, chat=CHANNEL, thread=root, mention=True)

        help_text = await command("/help")
        for name in COMMANDS:
            assert f"/{name}" in help_text
        status = await command("/status")
        assert f"Session: {sid}" in status and "Messages: 2" in status
        assert await command("/title Thread work") == "✏️ Session title set: Thread work"
        assert "Title: Thread work" in await command("/title")
        assert "Thread work (current) — remember the number 42" in await command("/sessions")
        assert "Nothing is waiting" in await command("/queue")
        assert await command("/compress") == "This session is still short; there is nothing to compress yet."
        assert "Nothing is running" in await command("/stop")
        assert (await command("/handoff")).startswith("Usage: /handoff <platform>")
        assert "slack has no home channel yet" in await command("/handoff slack")
        assert "Home channel of slack set" in await command("/sethome")
        assert rows(gw.db_path, "SELECT platform, chat_id, thread_id, chat_type FROM gateway_home_channels") == [
            ("slack", CHANNEL, root, "thread")
        ]
        assert "home channel already" in await command("/handoff slack")
        assert (await command("/new Fresh start")).startswith("✨ New session started: Fresh start.")
        assert bound(gw.db_path, key) != sid
        assert (await command("/reset")).startswith("✨ New session started.")
        assert "• Thread work — remember the number 42" in await command("/resume")
        assert 'Resumed session "Thread work"' in await command("/resume Thread work")
        assert bound(gw.db_path, key) == sid
        assert "Unknown command /frobnicate" in await command("/frobnicate")
        # The resumed thread session still has the first exchange.
        assert await said(fake, "which number?", chat=CHANNEL, thread=root) == "echo: which number?"
        last = fake_openai.chat_requests[-1].body["messages"]
        assert any(m.get("content") == "remember the number 42" for m in last)
        # A slash command at the top of the channel acts on the channel itself.
        assert "Home channel of slack set" in await slash(fake, "/sethome", chat=CHANNEL)
        assert rows(gw.db_path, "SELECT platform, chat_id, thread_id, chat_type FROM gateway_home_channels") == [
            ("slack", CHANNEL, None, "channel")
        ]
    assert [r[0] for r in rows(gw.db_path, "SELECT content FROM messages WHERE role = 'user' ORDER BY id")] == [
        "remember the number 42", "which number?"
    ]
