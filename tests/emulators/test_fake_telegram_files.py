"""The fake Bot API's files (getFile, /file/bot<token>/<path>) and media messages, proven with the
real python-telegram-bot (its own default HTTP client, not the gateway's)."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import aiohttp
import pytest
from PIL import Image
from telegram import Bot
from telegram.error import BadRequest

from tests.emulators import FakeTelegram
from tests.emulators._telegram_files import MAX_DOWNLOAD

pytest_plugins = ["tests.emulators.plugin"]


@pytest.fixture
async def bot(fake_telegram: FakeTelegram) -> AsyncIterator[Bot]:
    async with Bot(fake_telegram.token, base_url=fake_telegram.base_url,
                   base_file_url=fake_telegram.base_file_url) as b:
        yield b


def jpeg(width: int, height: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 90)).save(buf, "JPEG")
    return buf.getvalue()


async def test_get_file_then_download_gives_the_bytes(fake_telegram: FakeTelegram, bot: Bot) -> None:
    data = bytes(range(256)) * 40
    info = fake_telegram.add_file(data, folder="documents", ext="pdf")
    file = await bot.get_file(info["file_id"])
    assert file.file_unique_id == info["file_unique_id"]
    assert file.file_size == len(data)
    assert file.file_path is not None and file.file_path.startswith(f"{fake_telegram.base_file_url}")
    assert bytes(await file.download_as_bytearray()) == data
    assert fake_telegram.downloads[-1]["status"] == 200


async def test_get_file_refuses_unknown_ids_and_files_over_20_mb(fake_telegram: FakeTelegram, bot: Bot) -> None:
    with pytest.raises(BadRequest, match=r"(?i)invalid file_id"):
        await bot.get_file("AgACnot-a-file")
    big = fake_telegram.add_file(b"\0" * (MAX_DOWNLOAD + 1))
    with pytest.raises(BadRequest, match=r"(?i)file is too big"):
        await bot.get_file(big["file_id"])
    exact = fake_telegram.add_file(b"\0" * MAX_DOWNLOAD)
    assert (await bot.get_file(exact["file_id"])).file_size == MAX_DOWNLOAD


async def test_download_route_checks_token_and_path(fake_telegram: FakeTelegram, bot: Bot) -> None:
    info = fake_telegram.add_file(b"secret bytes", folder="voice", ext="oga")
    never_asked = fake_telegram.add_file(b"other")
    file = await bot.get_file(info["file_id"])
    assert file.file_path is not None
    path = file.file_path.rsplit("/", 2)[-2:]
    root = fake_telegram.endpoint()
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{root}/file/bot{fake_telegram.token}/{'/'.join(path)}") as ok:
            assert ok.status == 200
            assert ok.content_length == len(b"secret bytes")
            assert await ok.read() == b"secret bytes"
        async with http.get(f"{root}/file/bot999:WRONG/{'/'.join(path)}") as wrong:
            assert wrong.status == 401
        async with http.get(f"{root}/file/botnot-a-token/{'/'.join(path)}") as malformed:
            assert malformed.status == 404
        async with http.get(f"{root}/file/bot{fake_telegram.token}/documents/nothing.bin") as unknown:
            assert unknown.status == 404
        # A path exists only once getFile handed it out.
        n = never_asked["file_id"][-1]
        async with http.get(f"{root}/file/bot{fake_telegram.token}/documents/file_{n}.bin") as hidden:
            assert hidden.status == 404


async def test_a_broken_download_drops_the_connection_halfway(fake_telegram: FakeTelegram, bot: Bot) -> None:
    info = fake_telegram.add_file(b"x" * 200_000)
    fake_telegram.break_downloads(info["file_id"])
    file = await bot.get_file(info["file_id"])
    assert file.file_path is not None
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientPayloadError):
            async with http.get(file.file_path) as resp:
                await resp.read()
        async with http.get(file.file_path) as again:
            assert len(await again.read()) == 200_000


async def test_media_messages_parse_in_ptb(fake_telegram: FakeTelegram, bot: Bot) -> None:
    group = fake_telegram.group()
    await fake_telegram.user_sends(fake_telegram.photo(jpeg(1600, 900)), caption="look", chat=group,
                                   user=fake_telegram.user, mention=True)
    await fake_telegram.user_sends(fake_telegram.document(b"%PDF-1.4", file_name="a.pdf", mime_type="application/pdf"))
    await fake_telegram.user_sends(fake_telegram.voice(b"OggS", duration=7))
    await fake_telegram.user_sends(fake_telegram.sticker(b"tgs", animated=True, emoji="🎉"))
    await fake_telegram.user_sends_album([fake_telegram.photo(jpeg(100, 50)), fake_telegram.photo(jpeg(60, 60))],
                                         caption="two")
    updates = await bot.get_updates(timeout=0)
    photo, doc, voice, sticker, a1, a2 = (u.message for u in updates)
    assert photo is not None and doc is not None and voice is not None and sticker is not None
    assert [(p.width, p.height) for p in photo.photo] == [(90, 51), (320, 180), (800, 450), (1280, 720), (1600, 900)]
    assert len({p.file_id for p in photo.photo}) == 5
    assert photo.caption == f"@{fake_telegram.bot_username} look"
    assert photo.caption_entities[0].type == "mention" and photo.text is None
    assert doc.document is not None and doc.document.file_name == "a.pdf"
    assert doc.document.mime_type == "application/pdf" and doc.document.file_size == 8
    assert voice.voice is not None and voice.voice.mime_type == "audio/ogg"
    assert sticker.sticker is not None and sticker.sticker.is_animated and sticker.sticker.emoji == "🎉"
    assert a1 is not None and a2 is not None
    assert a1.media_group_id == a2.media_group_id is not None
    assert (a1.caption, a2.caption) == ("two", None)
    assert a2.message_id == a1.message_id + 1
