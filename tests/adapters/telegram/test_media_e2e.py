"""Media through the whole daemon on Telegram: a photo and an album reach a vision model, a file the
agent sends arrives as a document, a voice note is transcribed; python-telegram-bot against
FakeTelegram over real sockets."""

from __future__ import annotations

import asyncio
import base64
import io
from pathlib import Path
from typing import Any

from PIL import Image

from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from ..conftest import run_telegram_gateway

WAIT = 15.0


def jpeg(width: int, height: int, colour: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, "JPEG")
    return out.getvalue()


def images_sent(body: dict[str, Any]) -> list[Image.Image]:
    found = []
    for message in body["messages"]:
        if isinstance(message.get("content"), list):
            for part in message["content"]:
                if part.get("type") == "image_url":
                    raw = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
                    found.append(Image.open(io.BytesIO(raw)))
    return found


async def until(check: Any) -> None:
    for _ in range(int(WAIT / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out")


async def test_a_photo_and_an_album_reach_a_vision_model(tmp_path: Path, fake_openai: FakeOpenAI,
                                                         fake_telegram: FakeTelegram) -> None:
    fake = fake_telegram
    config = {"model": {"vision": True}}
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, config=config,
                                    telegram={"streaming": False}):
        await fake.user_sends(fake.photo(jpeg(3000, 2000, (255, 0, 0))), caption="what colour?")
        await fake.wait_sent(1, timeout=WAIT)
        [red] = images_sent(fake_openai.chat_requests[-1].body)
        # Telegram keeps a photo at most 2560 px on its long side; the model gets it at 1568.
        assert max(red.size) == 1568 and red.getpixel((10, 10))[0] > 200
        await fake.user_sends_album([fake.photo(jpeg(400, 300, (0, 255, 0))), fake.photo(jpeg(300, 400, (0, 0, 255)))],
                                    caption="and these two?")
        await fake.wait_sent(2, timeout=WAIT)
    body = fake_openai.chat_requests[-1].body
    assert body["messages"][-1]["content"][0]["text"].startswith("and these two?\n\n[image ")
    # This turn's two images, and the photo of the turn before it again.
    assert sorted(max(img.size) for img in images_sent(body)) == [400, 400, 1568]
    assert "echo: and these two?" in str(fake.sent[-1].get("text"))


async def test_a_file_the_agent_sends_arrives_as_a_document(tmp_path: Path, fake_openai: FakeOpenAI,
                                                          fake_telegram: FakeTelegram) -> None:
    fake = fake_telegram
    fake_openai.reply_tool_calls([{"name": "send_file", "arguments": {"content": "a,b\n1,2\n", "name": "t.csv"}}]) \
        .reply("Here is the table.")
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, telegram={"streaming": False}):
        await fake.user_says("make me a table")
        await until(lambda: any(m["method"] == "sendDocument" for m in fake.sent))
    text = [m for m in fake.sent if m.get("text")]
    assert text[-1]["rendered"] == "Here is the table."
    [document] = [m for m in fake.sent if m["method"] == "sendDocument"]
    [upload] = document["files"]
    assert (upload.filename, upload.data) == ("t.csv", b"a,b\n1,2\n")
    assert text[-1]["time"] < document["time"]  # the text first, then its file


async def test_a_voice_note_is_transcribed_and_answered(tmp_path: Path, fake_openai: FakeOpenAI,
                                                       fake_telegram: FakeTelegram) -> None:
    fake = fake_telegram
    fake_openai.transcriptions.reply("buy oat milk", duration=3.0)
    config = {"stt": {"base_url": fake_openai.base_url}}
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, config=config,
                                    telegram={"streaming": False}):
        await fake.user_sends(fake.voice(b"OggS\x00\x02" + bytes(300), duration=3))
        await fake.wait_sent(1, timeout=WAIT)
    assert str(fake.sent[-1].get("rendered") or fake.sent[-1]["text"]) == "echo: [voice 0:03] buy oat milk"
    assert (fake_openai.transcriptions.requests[0].file or b"").startswith(b"OggS")
