"""/forget-me through the whole daemon on Slack (FakeSlack, Socket Mode): the question is Block Kit
with two buttons (a press is a ``block_actions`` payload, as an approval's); bob's press is refused,
alice's deletes her data and nothing of bob's."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from tests.emulators.fake_slack import FakeSlack
from tests.fakes.openai_server import FakeOpenAI
from tests.storage._userdata_fixture import fts_hits, rows_naming, wait_indexed

from .test_adapter import USER, run_slack_gateway
from .test_approvals_e2e import BOB, CHANNEL, DM, press, wait_question, wait_said, wait_settled

ALICE_WORD, BOB_WORD = "zorbalicious", "quaxbobbly"


async def test_forget_with_the_button(tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, mode="socket",
                                 env={"SLACK_ALLOWED_USERS": f"{USER},{BOB}"},
                                 config={"agent": {"auto_title": False}}) as gw:
        fake_openai.reply("dm answer")
        await fake.user_says(f"{ALICE_WORD} in my dm", chat=DM)
        await wait_said(fake, DM, "dm answer")
        fake_openai.reply("bob answer")
        await fake.user_says(f"{BOB_WORD} in the channel", chat=CHANNEL, user=BOB, mention=True)
        await wait_said(fake, CHANNEL, "bob answer")

        await fake.user_says("/forget-me", chat=DM)
        question = await wait_question(fake, DM)
        assert [b["text"]["text"] for b in question["buttons"]] == ["🗑 Delete my data", "Cancel"]
        await press(fake, question, "approve", user=BOB)
        await wait_said(fake, DM, "Only the person who asked to delete their data")
        await press(fake, question, "approve")
        await wait_settled(fake, question, "Deleting your data")
        await wait_said(fake, DM, "Your data is deleted")
        await wait_indexed(gw.home / "state.db")
        with sqlite3.connect(str(gw.home / "state.db")) as conn:
            assert fts_hits(conn, ALICE_WORD) == 0 and rows_naming(conn, USER) == []
            assert fts_hits(conn, BOB_WORD) == 2


async def test_export_asked_in_a_channel_is_uploaded_to_her_dm(tmp_path: Path, fake_openai: FakeOpenAI,
                                                              fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, mode="socket",
                                 env={"SLACK_ALLOWED_USERS": f"{USER},{BOB}"},
                                 config={"agent": {"auto_title": False}}):
        fake_openai.reply("dm answer")
        await fake.user_says(f"{ALICE_WORD} in my dm", chat=DM)
        await wait_said(fake, DM, "dm answer")
        fake_openai.reply("bob answer")
        await fake.user_says(f"{BOB_WORD} in the channel", chat=CHANNEL, user=BOB, mention=True)
        await wait_said(fake, CHANNEL, "bob answer")

        await fake.user_says("/export-my-data", chat=CHANNEL, mention=True)
        await wait_said(fake, DM, "Your data")
        for _ in range(200):
            done = [u for u in fake.uploads.values() if u.completed]
            if done:
                break
            await asyncio.sleep(0.05)
        [upload] = done
        assert upload.filename.startswith("my-data-slack-") and upload.data is not None
        export = json.loads(upload.data)
        assert export["sender"]["user_id"] == USER
        text = json.dumps(export)
        assert ALICE_WORD in text and BOB_WORD not in text and "bob answer" not in text
