"""The fake Telegram's uploads (``_telegram_uploads``), proven with the real python-telegram-bot: files go up
as multipart parts (``attach://`` for albums), come back as Telegram's message objects, and the limits
answer as Telegram's do."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import pytest
from PIL import Image
from telegram import Bot, InputFile, InputMediaDocument, InputMediaPhoto, ReplyParameters
from telegram.error import BadRequest, NetworkError

from tests.emulators import FakeTelegram

pytest_plugins = ["tests.emulators.plugin"]


def png(width: int = 64, height: int = 48, color: str = "red") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, "PNG")
    return out.getvalue()


async def refused(call: Awaitable[Any], error: type[Exception] = BadRequest) -> str:
    """What Telegram said (python-telegram-bot drops "Bad Request: " and capitalises the rest): in lower case."""
    with pytest.raises(error) as caught:
        await call
    return str(caught.value).lower()


@pytest.fixture
async def bot(fake_telegram: FakeTelegram) -> AsyncIterator[Bot]:
    async with Bot(fake_telegram.token, base_url=fake_telegram.base_url,
                   base_file_url=fake_telegram.base_file_url) as b:
        yield b


async def test_a_photo_comes_back_as_its_sizes(fake_telegram: FakeTelegram, bot: Bot) -> None:
    fake, data = fake_telegram, png(3000, 1000)
    chat = fake.user["id"]
    message = await bot.send_photo(chat, InputFile(data, filename="chart.png"), caption="the chart")
    sizes = [(p.width, p.height) for p in message.photo]
    # Smallest first; the largest as Telegram keeps it: at most 2560 a side.
    assert sizes[0] == (90, 30) and sizes[-1] == (2560, 853) and sizes == sorted(sizes)
    assert message.caption == "the chart" and message.from_user is not None and message.from_user.is_bot
    [record] = fake.sent
    [upload] = record["files"]
    assert (record["method"], upload.part, upload.filename, upload.data) == ("sendPhoto", "photo", "chart.png", data)
    assert upload.content_type == "image/png"
    assert fake.uploads.of(fake.history(chat)[-1]) is upload


async def test_a_document_keeps_its_name_but_never_a_path(fake_telegram: FakeTelegram, bot: Bot) -> None:
    fake = fake_telegram
    chat = fake.user["id"]
    report = await bot.send_document(chat, InputFile(b"a,b\n1,2\n", filename="report.csv"))
    hostile = await bot.send_document(chat, InputFile(b"KEY=1\n", filename="../../.hermes/.env"))
    assert report.document is not None and hostile.document is not None
    assert (report.document.file_name, report.document.mime_type, report.document.file_size) == (
        "report.csv", "text/csv", 8)
    assert hostile.document.file_name == ".env"
    # What the bot sent is kept as sent, so a test can see the adapter's own name.
    assert fake.sent[-1]["files"][0].filename == "../../.hermes/.env"
    # A file sent again by its file_id is not uploaded again.
    again = await bot.send_document(chat, report.document.file_id)
    assert again.document is not None and again.document.file_unique_id == report.document.file_unique_id


async def test_voice_and_audio(fake_telegram: FakeTelegram, bot: Bot) -> None:
    fake = fake_telegram
    chat = fake.user["id"]
    voice = await bot.send_voice(chat, InputFile(b"OggS" + bytes(60), filename="answer.ogg"), duration=3)
    assert voice.voice is not None and voice.voice.mime_type == "audio/ogg"
    assert fake.history(chat)[-1]["voice"]["duration"] == 3
    song = await bot.send_audio(chat, InputFile(b"ID3" + bytes(60), filename="song.mp3"), title="Song")
    assert song.audio is not None and (song.audio.file_name, song.audio.title) == ("song.mp3", "Song")
    fake.uploads.forbid_voice(fake.user)
    forbidden = await refused(bot.send_voice(chat, InputFile(b"OggS" + bytes(60), filename="answer.ogg")))
    assert "voice_messages_forbidden" in forbidden


async def test_an_album_is_one_call_its_files_attached(fake_telegram: FakeTelegram, bot: Bot) -> None:
    fake = fake_telegram
    forum = fake.forum()
    topic = fake.create_topic(forum, "Plans")
    question = fake.history(forum["id"])[-1]["message_id"]
    photos = [png(color=c) for c in ("red", "green", "blue")]
    media = [InputMediaPhoto(InputFile(d, filename=f"{i}.png", attach=True)) for i, d in enumerate(photos)]
    messages = await bot.send_media_group(forum["id"], media, message_thread_id=topic,
                                          reply_parameters=ReplyParameters(question))
    [call] = fake.calls_to("sendMediaGroup")
    assert [m["media"] for m in call.params["media"]] == [f"attach://{m.media.attach_name}" for m in media]
    groups = {m.media_group_id for m in messages}
    assert len(messages) == 3 and len(groups) == 1 and None not in groups
    assert all(m.message_thread_id == topic and m.reply_to_message is not None for m in messages)
    assert [fake.uploads.of(m).data for m in fake.history(forum["id"], thread=topic)[-3:]] == photos


async def test_album_rules(fake_telegram: FakeTelegram, bot: Bot) -> None:
    chat = fake_telegram.user["id"]

    def photo(i: int) -> InputMediaPhoto:
        return InputMediaPhoto(InputFile(png(), filename=f"{i}.png", attach=True))

    eleven = [photo(i) for i in range(11)]
    assert "too many messages to send as an album" in await refused(bot.send_media_group(chat, eleven))
    document = InputMediaDocument(InputFile(b"x", filename="x.txt", attach=True))
    mixed = await refused(bot.send_media_group(chat, [photo(0), document]))
    assert "document can't be mixed with other media types" in mixed
    bad = InputMediaPhoto(InputFile(b"not an image", filename="bad.png", attach=True))
    failed = await refused(bot.send_media_group(chat, [photo(0), bad]))
    assert 'failed to send message #2 with the error message "image_process_failed"' in failed
    assert fake_telegram.sent == []  # a refused album sends nothing
    # One item is one message, outside any album (as the official server sends it).
    [single] = await bot.send_media_group(chat, [photo(0)])
    assert single.media_group_id is None and single.photo


async def test_photo_rules(fake_telegram: FakeTelegram, bot: Bot) -> None:
    chat = fake_telegram.user["id"]

    async def photo(data: bytes, **kw: Any) -> str:
        return await refused(bot.send_photo(chat, InputFile(data, filename="p.png"), **kw))

    assert "photo_invalid_dimensions" in await photo(png(50, 1100))  # a ratio of 22
    assert "photo_invalid_dimensions" in await photo(png(6000, 4100))  # 10100 together
    assert "image_process_failed" in await photo(b"\x89PNG\r\n\x1a\n" + bytes(100))
    big = png() + bytes(10 * 1024 * 1024)  # a valid image, padded past 10 MiB
    assert await photo(big) == (f"file of size {len(big)} bytes is too big for a photo; the maximum size is "
                                "10485760 bytes")
    # The same bytes are a fine document.
    assert (await bot.send_document(chat, InputFile(big, filename="big.png"))).document is not None
    assert "message caption is too long" in await photo(png(), caption="x" * 1025)
    assert "file must be non-empty" in await refused(bot.send_document(chat, InputFile(b"", filename="empty.txt")))
    unknown = await refused(bot.send_document(chat, "no-such-file-id"))
    assert "wrong file identifier/http url specified" in unknown
    assert [m["method"] for m in fake_telegram.sent] == ["sendDocument"]


async def test_a_file_over_the_upload_limit_is_413(fake_telegram: FakeTelegram, bot: Bot) -> None:
    fake = fake_telegram
    fake.uploads.upload_limit = 1000
    with pytest.raises(NetworkError, match="Request Entity Too Large"):
        await bot.send_document(fake.user["id"], InputFile(bytes(1001), filename="big.bin"))
    [call] = fake.calls_to("sendDocument")
    assert call.status == 413 and fake.sent == []
    assert (await bot.send_document(fake.user["id"], InputFile(bytes(1000), filename="ok.bin"))).document


async def test_a_held_call_is_taken_on_release_and_never_when_dropped(fake_telegram: FakeTelegram, bot: Bot) -> None:
    fake = fake_telegram
    chat = fake.user["id"]
    held = fake.uploads.hold("sendDocument")
    first = asyncio.create_task(bot.send_document(chat, InputFile(b"one\n", filename="one.txt")))
    await asyncio.wait_for(held.arrived.wait(), 5)
    # Held before Telegram takes it: nothing made, and only that one call waits.
    assert fake.sent == [] and not first.done()
    await bot.send_document(chat, InputFile(b"two\n", filename="two.txt"))
    held.release()
    message = await asyncio.wait_for(first, 5)
    assert message.document is not None and message.document.file_name == "one.txt"
    assert [u.filename for m in fake.sent for u in m["files"]] == ["two.txt", "one.txt"]

    dropped = fake.uploads.hold("sendDocument")
    third = asyncio.create_task(bot.send_document(chat, InputFile(b"three\n", filename="three.txt")))
    await asyncio.wait_for(dropped.arrived.wait(), 5)
    dropped.drop()
    assert "not complete" in await refused(third)
    assert len(fake.sent) == 2
