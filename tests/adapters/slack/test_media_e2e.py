"""Media through the whole daemon on Slack: a shared photo reaches a vision model, a shared text file is
read into the turn (both downloaded with the bot token), a file the agent sends is uploaded and shared
into the same thread after its text; slack-bolt / slack-sdk against FakeSlack over real sockets."""

from __future__ import annotations

import base64
import io
import sqlite3
from pathlib import Path
from typing import Any

from PIL import Image

from tests.emulators.fake_slack import BOT_USER, FakeSlack, SlackFile
from tests.fakes.openai_server import FakeOpenAI

from .test_adapter import run_slack_gateway

WAIT = 15.0
DM = "D0DM0001"
CHANNEL = "C0CHAN001"
# Background model calls (titles, reviews) would race the scripted replies.
QUIET = {"agent": {"auto_title": False, "memory_nudge_interval": 0, "skill_nudge_interval": 0}}
VISION = {**QUIET, "model": {"vision": True}}


def jpeg(width: int, height: int, colour: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, "JPEG")
    return out.getvalue()


def images_sent(body: dict[str, Any]) -> list[Image.Image]:
    found: list[Image.Image] = []
    for message in body["messages"]:
        if isinstance(message.get("content"), list):
            for part in message["content"]:
                if part.get("type") == "image_url":
                    url = part["image_url"]["url"]
                    assert url.startswith("data:image/")
                    found.append(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
    return found


def user_contents(db: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute("SELECT content FROM messages WHERE role = 'user' ORDER BY id")]
    finally:
        conn.close()


def file_gets(fake: FakeSlack) -> list[dict[str, Any]]:
    return list(fake.files.requests)


async def test_a_shared_photo_reaches_a_vision_model(tmp_path: Path, fake_openai: FakeOpenAI,
                                                     fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, config=VISION):
        await fake.user_says("what colour?", chat=DM,
                             files=[SlackFile("red.jpg", jpeg(3000, 2000, (255, 0, 0)), "image/jpeg")])
        [answer] = await fake.wait_reply(DM, None, timeout=WAIT)
    [red] = images_sent(fake_openai.chat_requests[-1].body)
    pixel = red.getpixel((10, 10))
    assert max(red.size) == 1568 and isinstance(pixel, tuple) and pixel[0] > 200
    assert "echo: what colour?" in answer["text"]
    # Downloaded once, with the bot token (without it Slack would have answered its sign-in page).
    [get] = file_gets(fake)
    assert get["status"] == 200 and get["authorized"]


async def test_a_shared_text_file_is_read_into_the_stored_turn(tmp_path: Path, fake_openai: FakeOpenAI,
                                                               fake_slack: FakeSlack) -> None:
    fake = fake_slack
    notes = b"# Plan\n- buy milk\n- fix the gateway\n"
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, config=QUIET) as gw:
        await fake.user_says("see attached", chat=DM, files=[SlackFile("plan.md", notes, "text/markdown")])
        await fake.wait_reply(DM, None, timeout=WAIT)
    [stored] = user_contents(gw.db_path)
    assert stored.startswith("see attached")
    assert "[file plan.md" in stored and "- fix the gateway" in stored
    assert "- fix the gateway" in fake_openai.chat_requests[-1].body["messages"][-1]["content"]
    assert [(g["status"], g["authorized"]) for g in file_gets(fake)] == [(200, True)]


async def test_a_file_the_agent_sends_is_shared_into_the_thread_after_the_text(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake = fake_slack
    fake_openai.reply_tool_calls([{"name": "send_file", "arguments": {"content": "a,b\n1,2\n", "name": "t.csv"}}]) \
        .reply("Here is the table.")
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, config=QUIET):
        body = await fake.user_says("make me a table", chat=CHANNEL, mention=True)
        thread = str(body["event"]["ts"])
        await fake.wait_for(lambda: fake.calls_to("files.completeUploadExternal"), WAIT, what="the file shared")
        replies = await fake.wait_reply(CHANNEL, thread, n=2, timeout=WAIT, text="Here is the table.")
    text, shared = sorted(replies, key=lambda m: float(m["ts"]))
    assert text["text"] == "Here is the table." and not text.get("files")
    assert shared["subtype"] == "file_share" and shared["thread_ts"] == thread
    [item] = shared["files"]
    assert item["name"] == "t.csv" and item["shares"] == {"public": {CHANNEL: [{"ts": shared["ts"],
                                                                               "thread_ts": thread}]}}
    [upload] = [u for u in fake.uploads.values() if u.completed]
    assert (upload.filename, upload.data) == ("t.csv", b"a,b\n1,2\n")
    assert not upload.authorization  # the upload URL is the credential; the token stays home
    assert all(m.get("user") == BOT_USER for m in replies)
