"""/export-my-data and /forget-me through the whole daemon on Discord (FakeDiscord): asked in a channel,
the export goes to the DM channel the gateway knows; /forget-me's question has two buttons (its press
is an ``INTERACTION_CREATE``, as an approval's), bob's press is refused, alice's deletes her data and
nothing of bob's."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from adapters.approvals import approval_data
from tests.emulators.fake_discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.storage._userdata_fixture import fts_hits, rows_naming, wait_indexed

from .test_adapter import run_discord_gateway
from .test_approvals_e2e import wait_question, wait_said, wait_settled

ALICE_WORD, BOB_WORD = "zorbalicious", "quaxbobbly"


def _sent_files(fake: FakeDiscord, channel: str) -> list[Any]:
    return [f for s in fake.sent if s["method"] == "create_message" and s["chat_id"] == channel for f in s["files"]]


async def test_export_to_the_dm_then_forget_with_the_button(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    bob = fake.add_user("bob")
    alice_id = fake.user["id"]
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                   env={"DISCORD_ALLOWED_USERS": f"{alice_id},{bob['id']}"},
                                   config={"agent": {"auto_title": False}}) as gw:
        fake_openai.reply("dm answer")
        dm = (await fake.user_says(f"{ALICE_WORD} in my dm"))["channel_id"]
        await wait_said(fake, dm, "dm answer")
        fake_openai.reply("channel answer")
        await fake.user_says(f"{ALICE_WORD} in general", chat="general", mention=True)
        await wait_said(fake, fake.general, "channel answer")
        fake_openai.reply("bob answer")
        await fake.user_says(f"{BOB_WORD} in general", chat="general", mention=True, user=bob)
        await wait_said(fake, fake.general, "bob answer")

        # Bob never wrote to the bot directly: no DM is known, and he is told where to ask.
        await fake.user_says("/export-my-data", chat="general", mention=True, user=bob)
        await wait_said(fake, fake.general, "I have not talked with you in one on this platform yet")
        await fake.user_says("/export-my-data", chat="general", mention=True)
        await wait_said(fake, fake.general, "I sent your data to you in a direct message")
        [file] = _sent_files(fake, dm)
        export = json.loads(file.data)
        assert export["sender"]["user_id"] == alice_id and len(export["sessions"]) == 2
        assert BOB_WORD not in file.data.decode()

        await fake.user_says("/forget-me", chat="general", mention=True)
        question = await wait_question(fake, fake.general)
        assert [b["label"] for b in question["components"][0]["components"]] == ["🗑 Delete my data", "Cancel"]
        press = approval_data(question["approval_id"], "approve")
        await fake.user_presses(question["id"], press, user=bob)
        await wait_said(fake, fake.general, "Only the person who asked to delete their data")
        await fake.user_presses(question["id"], press)
        await wait_settled(fake, question, "Deleting your data")
        await wait_said(fake, fake.general, "Your data is deleted")
        await wait_indexed(gw.home / "state.db")
        with sqlite3.connect(str(gw.home / "state.db")) as conn:
            assert fts_hits(conn, ALICE_WORD) == 0 and rows_naming(conn, alice_id) == []
            assert fts_hits(conn, BOB_WORD) == 2
            assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 2  # bob's question and answer
