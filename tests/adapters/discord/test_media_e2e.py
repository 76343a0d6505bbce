"""Media through the whole daemon on Discord: an attached photo reaches a vision model, an attached text
file is read into the turn, a file the agent sends arrives as an attachment after its text; discord.py
against FakeDiscord (its CDN and its multipart message creates) over real sockets."""

from __future__ import annotations

import base64
import io
import sqlite3
from pathlib import Path
from typing import Any

from PIL import Image

from tests.emulators.fake_discord import DiscordFile, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI

from .test_adapter import run_discord_gateway

WAIT = 15.0
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


def bot_creates(fake: FakeDiscord) -> list[dict[str, Any]]:
    return [m for m in fake.sent if m["method"] == "create_message"]


async def test_an_attached_photo_reaches_a_vision_model(tmp_path: Path, fake_openai: FakeOpenAI,
                                                        fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url, config=VISION):
        msg = await fake.user_says("what colour?", files=[DiscordFile("red.jpg", jpeg(3000, 2000, (255, 0, 0)),
                                                                      "image/jpeg")])
        await fake.wait_for(lambda: bot_creates(fake), WAIT, what="the answer")
    [red] = images_sent(fake_openai.chat_requests[-1].body)
    pixel = red.getpixel((10, 10))
    assert max(red.size) == 1568 and isinstance(pixel, tuple) and pixel[0] > 200
    assert "echo: what colour?" in bot_creates(fake)[0]["text"]
    # Fetched from the CDN once, with its signed URL and no token.
    [attachment] = msg["attachments"]
    assert fake.cdn.served(attachment["id"]) == 1
    assert not any(r["authorization"] for r in fake.cdn.requests)


async def test_an_attached_text_file_is_read_into_the_stored_turn(tmp_path: Path, fake_openai: FakeOpenAI,
                                                                  fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    notes = b"# Plan\n- buy milk\n- fix the gateway\n"
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url, config=QUIET) as gw:
        await fake.user_says("see attached", files=[DiscordFile("plan.md", notes)])
        await fake.wait_for(lambda: bot_creates(fake), WAIT, what="the answer")
    [stored] = user_contents(gw.db_path)
    assert stored.startswith("see attached")
    assert "[file plan.md" in stored and "- fix the gateway" in stored
    assert "- fix the gateway" in fake_openai.chat_requests[-1].body["messages"][-1]["content"]


async def test_a_file_the_agent_sends_arrives_as_an_attachment_after_the_text(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    fake_openai.reply_tool_calls([{"name": "send_file", "arguments": {"content": "a,b\n1,2\n", "name": "t.csv"}}]) \
        .reply("Here is the table.")
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url, config=QUIET):
        await fake.user_says("make me a table")
        await fake.wait_for(lambda: any(m["files"] for m in bot_creates(fake)), WAIT, what="the file")
    text, attachment = bot_creates(fake)
    assert (text["text"], text["files"]) == ("Here is the table.", [])
    [upload] = attachment["files"]
    assert (upload.filename, upload.data) == ("t.csv", b"a,b\n1,2\n")
    assert attachment["chat_id"] == text["chat_id"] and attachment["text"] == ""
    # What a person sees in the channel: the text, then a message with the file, served back as sent.
    [shown] = [m for m in fake.channel_messages(text["chat_id"]) if m["attachments"] and m["author"]["id"] == fake.bot["id"]]
    assert shown["attachments"][0]["filename"] == "t.csv" and shown["attachments"][0]["content_type"] == "text/csv"
    assert fake.sent.index(text) < fake.sent.index(attachment)
