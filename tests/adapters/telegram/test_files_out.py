"""Telegram files out: the real adapter and python-telegram-bot upload to ``FakeTelegram`` over a real socket, as
the Bot API takes them (multipart parts, ``attach://`` albums, photo rules, 413, 429). The files are real files on
disk, as the gateway's media store keeps them (named by their sha256)."""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from structlog.testing import capture_logs

from adapters.base import (
    AdapterError,
    MediaTooLargeError,
    MediaUnavailableError,
    OutboundMessage,
    RateLimitedError,
)
from adapters.media import AttachmentKind, OutboundFile
from adapters.telegram import TelegramAdapter, TelegramSettings
from tests.emulators.fake_telegram import FakeTelegram

SPEECH = Path(__file__).resolve().parents[2] / "fakes" / "data" / "speech.ogg"
IMAGE, DOCUMENT, VOICE = AttachmentKind.IMAGE, AttachmentKind.DOCUMENT, AttachmentKind.VOICE


def png(width: int = 64, height: int = 48, color: str = "red") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, "PNG")
    return out.getvalue()


def stored(tmp_path: Path, name: str, data: bytes, mime: str = "application/octet-stream",
           kind: AttachmentKind = DOCUMENT) -> OutboundFile:
    digest = hashlib.sha256(data).hexdigest()
    path = tmp_path / digest
    path.write_bytes(data)
    return OutboundFile(path=path, name=name, mime=mime, kind=kind, size=len(data), id=digest)


def image(tmp_path: Path, name: str, data: bytes) -> OutboundFile:
    return stored(tmp_path, name, data, "image/png", IMAGE)


class Progress:
    """The ``sent`` callback: the indexes reported, in order."""

    def __init__(self) -> None:
        self.indexes: list[int] = []

    async def __call__(self, index: int) -> None:
        self.indexes.append(index)


@pytest.fixture
async def adapter(fake_telegram: FakeTelegram) -> AsyncIterator[TelegramAdapter]:
    a = TelegramAdapter(TelegramSettings(token=fake_telegram.token, base_url=fake_telegram.base_url,
                                         base_file_url=fake_telegram.base_file_url, max_flood_wait=5))
    yield a
    await a.disconnect()


def to(chat: int, *, thread: int | None = None, reply_to: int | None = None) -> OutboundMessage:
    return OutboundMessage("telegram", str(chat), "", thread_id=None if thread is None else str(thread),
                           reply_to=None if reply_to is None else str(reply_to))


def methods(fake: FakeTelegram) -> list[tuple[str, int | None]]:
    """Every upload call, with its status."""
    upload_methods = {"sendPhoto", "sendDocument", "sendVoice", "sendAudio", "sendMediaGroup"}
    return [(c.method, c.status) for c in fake.calls if c.method in upload_methods]


def bot_messages(fake: FakeTelegram, chat: int, thread: int | None = None) -> list[dict[str, Any]]:
    return [m for m in fake.history(chat, thread=thread) if m["from"]["id"] == fake.bot_id]


async def test_a_photo(fake_telegram: FakeTelegram, adapter: TelegramAdapter, tmp_path: Path) -> None:
    fake, data = fake_telegram, png(800, 600)
    progress = Progress()
    result = await adapter.send_files(to(fake.user["id"]), (image(tmp_path, "chart.png", data),), sent=progress)
    [message] = bot_messages(fake, fake.user["id"])
    assert result.message_ids == (str(message["message_id"]),) and progress.indexes == [0]
    assert message["photo"][-1]["width"] == 800 and methods(fake) == [("sendPhoto", 200)]
    upload = fake.uploads.of(message)
    assert (upload.data, upload.filename, upload.content_type) == (data, "chart.png", "image/png")


async def test_a_document_keeps_its_name(fake_telegram: FakeTelegram, adapter: TelegramAdapter,
                                         tmp_path: Path) -> None:
    fake = fake_telegram
    files = (stored(tmp_path, "report.csv", b"a,b\n1,2\n", "text/csv"),
             stored(tmp_path, "../../.hermes/.env", b"KEY=1\n", "text/plain"),
             stored(tmp_path, "notes", b"plain words\n", "text/plain"))
    await adapter.send_files(to(fake.user["id"]), files)
    names = [fake.uploads.of(m).filename for m in bot_messages(fake, fake.user["id"])]
    # Never a path, never a hidden file; an extension from the type where the name had none.
    assert names == ["report.csv", "env.txt", "notes.txt"]
    # Three documents together are one album of documents.
    assert methods(fake) == [("sendMediaGroup", 200)]
    assert [m["document"]["mime_type"] for m in bot_messages(fake, fake.user["id"])] == ["text/csv", "text/plain",
                                                                                         "text/plain"]


async def test_an_album_of_three_photos_is_one_call(fake_telegram: FakeTelegram, adapter: TelegramAdapter,
                                                    tmp_path: Path) -> None:
    fake = fake_telegram
    photos = [png(color=c) for c in ("red", "green", "blue")]
    files = tuple(image(tmp_path, f"{i}.png", d) for i, d in enumerate(photos))
    progress = Progress()
    result = await adapter.send_files(to(fake.user["id"]), files, sent=progress)
    messages = bot_messages(fake, fake.user["id"])
    assert methods(fake) == [("sendMediaGroup", 200)] and progress.indexes == [0, 1, 2]
    assert len({m["media_group_id"] for m in messages}) == 1 and len(messages) == 3
    assert result.message_ids == tuple(str(m["message_id"]) for m in messages)
    assert [fake.uploads.of(m).data for m in messages] == photos
    [call] = fake.calls_to("sendMediaGroup")
    assert all(item["type"] == "photo" and item["media"].startswith("attach://") for item in call.params["media"])


async def test_mixed_files_keep_their_order(fake_telegram: FakeTelegram, adapter: TelegramAdapter,
                                            tmp_path: Path) -> None:
    fake = fake_telegram
    files = (image(tmp_path, "a.png", png(color="red")), image(tmp_path, "b.png", png(color="green")),
             stored(tmp_path, "data.json", b'{"x": 1}', "application/json"),
             image(tmp_path, "c.png", png(color="blue")))
    progress = Progress()
    await adapter.send_files(to(fake.user["id"]), files, sent=progress)
    assert methods(fake) == [("sendMediaGroup", 200), ("sendDocument", 200), ("sendPhoto", 200)]
    shown = [fake.uploads.of(m).filename for m in bot_messages(fake, fake.user["id"])]
    assert shown == ["a.png", "b.png", "data.json", "c.png"] and progress.indexes == [0, 1, 2, 3]


async def test_an_album_carries_no_more_than_one_upload_may(fake_telegram: FakeTelegram, tmp_path: Path) -> None:
    fake = fake_telegram
    adapter = TelegramAdapter(TelegramSettings(token=fake.token, base_url=fake.base_url,
                                               max_upload_mb=3000 / (1024 * 1024)))  # 3000 bytes
    try:
        files = tuple(stored(tmp_path, f"{i}.bin", bytes([i]) * 1200) for i in range(5))
        progress = Progress()
        await adapter.send_files(to(fake.user["id"]), files, sent=progress)
    finally:
        await adapter.disconnect()
    assert methods(fake) == [("sendMediaGroup", 200), ("sendMediaGroup", 200), ("sendDocument", 200)]
    assert progress.indexes == [0, 1, 2, 3, 4]
    shown = [fake.uploads.of(m).data[0] for m in bot_messages(fake, fake.user["id"])]
    assert shown == [0, 1, 2, 3, 4]


async def test_a_voice_note(fake_telegram: FakeTelegram, adapter: TelegramAdapter, tmp_path: Path) -> None:
    fake, data = fake_telegram, SPEECH.read_bytes()
    await adapter.send_files(to(fake.user["id"]), (stored(tmp_path, "answer.ogg", data, "audio/ogg", VOICE),))
    [message] = bot_messages(fake, fake.user["id"])
    assert methods(fake) == [("sendVoice", 200)] and message["voice"]["mime_type"] == "audio/ogg"
    assert fake.uploads.of(message).data == data
    # A person who takes no voice notes gets the recording as a file.
    fake.uploads.forbid_voice(fake.user)
    await adapter.send_files(to(fake.user["id"]), (stored(tmp_path, "answer.ogg", data, "audio/ogg", VOICE),))
    assert methods(fake)[1:] == [("sendVoice", 400), ("sendDocument", 200)]
    assert bot_messages(fake, fake.user["id"])[-1]["document"]["file_name"] == "answer.ogg"


async def test_what_cannot_be_a_photo_goes_as_a_document(fake_telegram: FakeTelegram, adapter: TelegramAdapter,
                                                         tmp_path: Path) -> None:
    fake = fake_telegram
    big = image(tmp_path, "big.png", png() + bytes(10 * 1024 * 1024))  # a valid image, past 10 MiB
    tall = image(tmp_path, "tall.png", png(40, 1000))  # a ratio of 25
    progress = Progress()
    await adapter.send_files(to(fake.user["id"]), (big, tall), sent=progress)
    # Known before asking: both are documents (together, an album of documents), never tried as photos.
    assert methods(fake) == [("sendMediaGroup", 200)] and progress.indexes == [0, 1]
    assert [m["document"]["file_name"] for m in bot_messages(fake, fake.user["id"])] == ["big.png", "tall.png"]


async def test_a_photo_telegram_refuses_is_sent_again_as_a_document(fake_telegram: FakeTelegram,
                                                                    adapter: TelegramAdapter, tmp_path: Path) -> None:
    fake = fake_telegram
    broken = image(tmp_path, "broken.png", b"\x89PNG\r\n\x1a\n" + bytes(200))  # Pillow cannot tell its size
    await adapter.send_files(to(fake.user["id"]), (broken,))
    assert methods(fake) == [("sendPhoto", 400), ("sendDocument", 200)]
    # In an album, only the photo Telegram named goes as a document; the order stays.
    files = (image(tmp_path, "a.png", png(color="red")), broken, image(tmp_path, "c.png", png(color="blue")))
    progress = Progress()
    await adapter.send_files(to(fake.user["id"]), files, sent=progress)
    assert methods(fake)[2:] == [("sendMediaGroup", 400), ("sendPhoto", 200), ("sendDocument", 200),
                                 ("sendPhoto", 200)]
    assert progress.indexes == [0, 1, 2]
    kinds = ["photo" if "photo" in m else "document" for m in bot_messages(fake, fake.user["id"])[1:]]
    assert kinds == ["photo", "document", "photo"]


async def test_an_album_refused_without_naming_its_photo_goes_file_by_file(
        fake_telegram: FakeTelegram, adapter: TelegramAdapter, tmp_path: Path) -> None:
    fake = fake_telegram
    small = png(8, 8)
    noisy = Image.frombytes("RGB", (64, 64), bytes(range(256)) * 48)
    out = io.BytesIO()
    noisy.save(out, "PNG")
    large = out.getvalue()
    # A Telegram stricter about photo sizes than the adapter knows: it says "too big for a photo", not which.
    fake.uploads.photo_limit = (len(small) + len(large)) // 2
    await adapter.send_files(to(fake.user["id"]), (image(tmp_path, "s.png", small), image(tmp_path, "l.png", large)))
    assert methods(fake) == [("sendMediaGroup", 400), ("sendPhoto", 200), ("sendPhoto", 400), ("sendDocument", 200)]
    assert ["photo" in m for m in bot_messages(fake, fake.user["id"])] == [True, False]


async def test_too_large_is_media_too_large(fake_telegram: FakeTelegram, adapter: TelegramAdapter,
                                            tmp_path: Path) -> None:
    fake = fake_telegram
    fake.uploads.upload_limit = 1000
    files = (stored(tmp_path, "small.bin", bytes(10)), image(tmp_path, "x.png", png()),
             stored(tmp_path, "big.bin", b"\x01" * 2000))
    progress = Progress()
    with pytest.raises(MediaTooLargeError) as refused:
        await adapter.send_files(to(fake.user["id"]), files, sent=progress)
    assert (refused.value.size, refused.value.limit) == (2000, 50 * 1024 * 1024)
    assert "max_upload_mb" in str(refused.value) and progress.indexes == [0, 1]
    assert methods(fake)[-1] == ("sendDocument", 413)


async def test_a_flood_wait_is_waited_out(fake_telegram: FakeTelegram, adapter: TelegramAdapter,
                                          tmp_path: Path) -> None:
    fake = fake_telegram
    fake.rate_limit_next("sendMediaGroup", retry_after=0.05)
    files = (image(tmp_path, "a.png", png(color="red")), image(tmp_path, "b.png", png(color="blue")))
    progress = Progress()
    await adapter.send_files(to(fake.user["id"]), files, sent=progress)
    # The album is sent again whole (the file opened anew) once the wait is over.
    assert methods(fake) == [("sendMediaGroup", 429), ("sendMediaGroup", 200)] and progress.indexes == [0, 1]
    assert [fake.uploads.of(m).filename for m in bot_messages(fake, fake.user["id"])] == ["a.png", "b.png"]
    fake.rate_limit_next("sendDocument", retry_after=30)  # longer than max_flood_wait
    with pytest.raises(RateLimitedError):
        await adapter.send_files(to(fake.user["id"]), (stored(tmp_path, "c.txt", b"c", "text/plain"),))


async def test_in_a_forum_topic_quoting_the_question_once(fake_telegram: FakeTelegram, adapter: TelegramAdapter,
                                                          tmp_path: Path) -> None:
    fake = fake_telegram
    forum = fake.forum()
    topic = fake.create_topic(forum, "Plans")
    update = await fake.user_says("send me the charts", chat=forum, thread=topic)
    question = update["message"]["message_id"]
    files = (image(tmp_path, "a.png", png(color="red")), image(tmp_path, "b.png", png(color="green")),
             stored(tmp_path, "plan.md", b"# Plan\n", "text/markdown"))
    result = await adapter.send_files(to(forum["id"], thread=topic, reply_to=question), files)
    messages = bot_messages(fake, forum["id"], thread=topic)
    assert result.message_ids == tuple(str(m["message_id"]) for m in messages) and len(messages) == 3
    assert all(m["message_thread_id"] == topic for m in messages)
    # The album (every message of it) answers the question; the document after it does not quote it again.
    assert [m.get("reply_to_message", {}).get("message_id") for m in messages] == [question, question, None]


async def test_the_token_is_never_told(fake_telegram: FakeTelegram, adapter: TelegramAdapter, tmp_path: Path,
                                       caplog: pytest.LogCaptureFixture) -> None:
    fake = fake_telegram
    token = fake.token
    await adapter.send_files(to(fake.user["id"]), (stored(tmp_path, "first.txt", b"1", "text/plain"),))
    # (python-telegram-bot itself logs its URLs at DEBUG when the bot is made: the gateway's log redaction
    # is for those. From here on, only the failures' own records.)
    caplog.clear()
    caplog.set_level(logging.DEBUG)
    fake.fail_next("sendDocument", 400, {"ok": False, "error_code": 400,
                                         "description": f"Bad Request: not for {token}"})
    fake.uploads.upload_limit = 10
    errors: list[Exception] = []
    with capture_logs() as logs:
        for file in (stored(tmp_path, "a.txt", b"a", "text/plain"), stored(tmp_path, "b.bin", bytes(20))):
            with pytest.raises(AdapterError) as refused:
                await adapter.send_files(to(fake.user["id"]), (file,))
            errors.append(refused.value)
        gone = stored(tmp_path, "c.txt", b"c", "text/plain")
        gone.path.unlink()
        with pytest.raises(MediaUnavailableError) as missing:
            await adapter.send_files(to(fake.user["id"]), (gone,))
        errors.append(missing.value)
    assert "<token>" in str(errors[0]) and isinstance(errors[1], MediaTooLargeError)
    told = [str(e) for e in errors] + [str(entry) for entry in logs] + [r.getMessage() for r in caplog.records]
    assert told and not [line for line in told if token.split(":")[1].lower() in line.lower()]


def test_the_upload_limit(fake_telegram: FakeTelegram) -> None:
    def limit(**settings: Any) -> int:
        return TelegramAdapter(TelegramSettings(token=fake_telegram.token, **settings)).max_upload_bytes

    assert limit() == 50 * 1024 * 1024 and limit(max_upload_mb=2000) == 2000 * 1024 * 1024
