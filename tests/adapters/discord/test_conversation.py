"""/retry, /undo, /btw and /bg on Discord: the real daemon and discord.py against ``FakeDiscord``,
the scripted ``FakeOpenAI`` (what the model is shown next is asserted on its recorded requests)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.emulators.fake_discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI

from .test_adapter import WAIT, rows, run_discord_gateway
from .test_commands import QUIET_AGENT, command


def seen(fake_openai: FakeOpenAI) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in fake_openai.chat_requests[-1].body["messages"]
            if m["role"] != "system"]


async def test_conversation_controls_in_a_discord_dm(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url, config=QUIET_AGENT) as gw:
        fake_openai.reply("wrong")
        assert await command(fake, "name a colour") == "wrong"
        fake_openai.reply("blue")
        assert await command(fake, "/retry") == "blue"
        assert seen(fake_openai) == [("user", "name a colour")]
        fake_openai.reply("you asked for a colour")
        assert await command(fake, "/btw what did I ask?") == "💬 (by the way) you asked for a colour"
        assert await command(fake, "another") == "echo: another"
        assert seen(fake_openai) == [("user", "name a colour"), ("assistant", "blue"), ("user", "another")]
        assert await command(fake, "/undo") == "↩️ Removed the last exchange (2 messages in all)."
        assert (await command(fake, "/undo x")).startswith("Usage: /undo [n]")
        started = await command(fake, "/bg write a haiku")
        found = re.search(r"Background task ([0-9a-f]{6}) started", started)
        assert found, started
        done = f"🔙 Background task {found.group(1)} is done:\n\necho: write a haiku"
        await fake.wait_for(lambda: any(m.get("text") == done for m in fake.sent), WAIT, what="the bg answer")
        assert (await command(fake, "/stop abc123")).startswith("No background task 'abc123' runs in this chat.")
        assert await command(fake, "/undo 1000") == ("↩️ There was only 1 exchange here: removed all of them "
                                                     "(3 messages). This conversation is empty now.")
        assert rows(gw.db_path, "SELECT COUNT(*) FROM messages m JOIN gateway_session_index i "
                                "ON i.session_id = m.session_id") == [(0,)]
