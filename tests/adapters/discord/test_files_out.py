"""Discord files out: the real adapter and discord.py upload to ``FakeDiscord`` over a real socket, as
Discord takes them (multipart ``payload_json`` + ``files[n]``, 10 a message, a size cap with 413/40005,
``nonce`` + ``enforce_nonce``). The files are real files on disk, as the gateway's media store keeps them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from adapters.base import (
    AdapterError,
    Disposition,
    InboundMessage,
    MediaTooLargeError,
    MediaUnavailableError,
    OutboundMessage,
    RateLimitedError,
)
from adapters.discord import DiscordAdapter, DiscordSettings
from adapters.media import Attachment, AttachmentKind, OutboundFile
from tests.emulators.fake_discord import FakeDiscord

WAIT = 15.0


@asynccontextmanager
async def connected(fake: FakeDiscord, **settings: Any) -> AsyncIterator[DiscordAdapter]:
    adapter = DiscordAdapter(DiscordSettings(token=fake.token, base_url=fake.base_url, gateway_url=fake.gateway_url,
                                             guild_ready_timeout=0.05, identify_delay=0, **settings))

    async def take(message: InboundMessage) -> Disposition:
        return Disposition.ACCEPTED

    adapter.bind(take)
    task = asyncio.create_task(adapter.connect())
    try:
        await asyncio.wait_for(adapter.ready.wait(), WAIT)
        yield adapter
    finally:
        await adapter.disconnect()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, WAIT)


def stored(tmp_path: Path, name: str, data: bytes, mime: str = "application/octet-stream",
           kind: AttachmentKind = AttachmentKind.DOCUMENT) -> OutboundFile:
    """A file as the gateway's store keeps it: named by its sha256, which is its id."""
    digest = hashlib.sha256(data).hexdigest()
    path = tmp_path / digest
    path.write_bytes(data)
    return OutboundFile(path=path, name=name, mime=mime, kind=kind, size=len(data), id=digest)


class Progress:
    """The ``sent`` callback: the indexes reported, in order."""

    def __init__(self) -> None:
        self.indexes: list[int] = []

    async def __call__(self, index: int) -> None:
        self.indexes.append(index)


def bot_messages(fake: FakeDiscord, channel: str) -> list[dict[str, Any]]:
    return [m for m in fake.channel_messages(channel) if m["author"]["id"] == fake.bot["id"]]


async def test_one_file_is_a_message_with_the_attachment(fake_discord: FakeDiscord, tmp_path: Path) -> None:
    fake = fake_discord
    png = b"\x89PNG\r\n\x1a\n" + os.urandom(2000)
    file = stored(tmp_path, "chart.png", png, "image/png", AttachmentKind.IMAGE)
    progress = Progress()
    async with connected(fake) as adapter:
        result = await adapter.send_files(OutboundMessage("discord", fake.general, ""), (file,), sent=progress)
        [message] = bot_messages(fake, fake.general)
        [attachment] = message["attachments"]
        # On the CDN like a user's file: what went up comes down.
        link = Attachment(AttachmentKind.IMAGE, attachment["url"])
        assert b"".join([c async for c in adapter.fetch(link, limit=10_000)]) == png
    assert result.message_ids == (message["id"],) and progress.indexes == [0]
    assert (attachment["filename"], attachment["size"], attachment["content_type"]) == ("chart.png", len(png),
                                                                                       "image/png")
    [record] = [m for m in fake.sent if m["message_id"] == message["id"]]
    [upload] = record["files"]
    assert upload.data == png and upload.filename == "chart.png"
    assert record["params"]["enforce_nonce"] is True and 0 < len(record["params"]["nonce"]) <= 25


async def test_several_files_keep_their_order_ten_to_a_message(fake_discord: FakeDiscord, tmp_path: Path) -> None:
    fake = fake_discord
    files = tuple(stored(tmp_path, f"part-{i:02}.txt", f"part {i}\n".encode(), "text/plain") for i in range(12))
    progress = Progress()
    async with connected(fake) as adapter:
        result = await adapter.send_files(OutboundMessage("discord", fake.general, ""), files, sent=progress)
    messages = bot_messages(fake, fake.general)
    assert result.message_ids == tuple(m["id"] for m in messages) and len(messages) == 2
    names = [[a["filename"] for a in m["attachments"]] for m in messages]
    assert names == [[f"part-{i:02}.txt" for i in range(10)], ["part-10.txt", "part-11.txt"]]
    assert progress.indexes == list(range(12))


async def test_a_message_carries_no_more_than_the_upload_limit(fake_discord: FakeDiscord, tmp_path: Path) -> None:
    fake = fake_discord
    limit_mb = 2048 / (1024 * 1024)  # 2048 bytes
    files = tuple(stored(tmp_path, f"f{i}.bin", bytes([i]) * 900) for i in range(5))
    progress = Progress()
    async with connected(fake, max_upload_mb=limit_mb) as adapter:
        assert adapter.max_upload_bytes == 2048
        await adapter.send_files(OutboundMessage("discord", fake.general, ""), files, sent=progress)
    sizes = [[a["size"] for a in m["attachments"]] for m in bot_messages(fake, fake.general)]
    assert sizes == [[900, 900], [900, 900], [900]]
    assert progress.indexes == [0, 1, 2, 3, 4]


async def test_files_go_into_the_thread_and_reply_to_the_question(fake_discord: FakeDiscord, tmp_path: Path) -> None:
    fake = fake_discord
    file = stored(tmp_path, "notes.md", b"# notes\n", "text/markdown")
    question = await fake.user_says("make me notes", chat="general", mention=True, dispatch=False)
    async with connected(fake) as adapter:
        made = await adapter.create_thread(fake.general, "Notes")
        assert made is not None
        asked = await fake.user_says("and as a file?", thread=made, dispatch=False)
        # Files alone: the first message replies to the question, in the thread.
        files_only = OutboundMessage("discord", fake.general, "", thread_id=made, reply_to=asked["id"])
        await adapter.send_files(files_only, (file, stored(tmp_path, "more.md", b"more\n", "text/markdown")))
        # After the answer's text (which replied already), the files do not reply again.
        again = OutboundMessage("discord", fake.general, "here", thread_id=made, reply_to=question["id"])
        await adapter.send(again)
        await adapter.send_files(again, (stored(tmp_path, "late.md", b"late\n", "text/markdown"),))
    first, text, late = bot_messages(fake, made)
    assert first["message_reference"]["message_id"] == asked["id"] and len(first["attachments"]) == 2
    assert text["content"] == "here" and "message_reference" not in late
    assert bot_messages(fake, fake.general) == []


async def test_too_large_for_discord_is_media_too_large(fake_discord: FakeDiscord, tmp_path: Path) -> None:
    fake = fake_discord
    fake.upload_limit = 4000  # a server that takes less than the setting says
    file = stored(tmp_path, "big.bin", os.urandom(5000))
    progress = Progress()
    async with connected(fake) as adapter:
        with pytest.raises(MediaTooLargeError) as refused:
            await adapter.send_files(OutboundMessage("discord", fake.general, ""), (file,), sent=progress)
    assert refused.value.size == 5000 and refused.value.limit == adapter.max_upload_bytes
    assert "max_upload_mb" in str(refused.value)
    assert [c.status for c in fake.calls_to("create_message")] == [413]
    assert bot_messages(fake, fake.general) == [] and progress.indexes == []


async def test_a_rate_limit_is_waited_out_and_the_bytes_sent_again(fake_discord: FakeDiscord, tmp_path: Path) -> None:
    fake = fake_discord
    data = os.urandom(3000)
    fake.rate_limit_next("create_message", retry_after=0.05)
    async with connected(fake) as adapter:
        result = await adapter.send_files(OutboundMessage("discord", fake.general, ""),
                                          (stored(tmp_path, "a.bin", data),))
    calls = fake.calls_to("create_message")
    assert [c.status for c in calls] == [429, 200]
    assert calls[1].params["_files"][0].data == data
    [message] = bot_messages(fake, fake.general)
    assert result.message_ids == (message["id"],)


async def test_a_rate_limit_longer_than_allowed_is_rate_limited_error(fake_discord: FakeDiscord,
                                                                      tmp_path: Path) -> None:
    fake = fake_discord
    fake.rate_limit_next("create_message", retry_after=3600)
    async with connected(fake) as adapter:
        with pytest.raises(RateLimitedError) as limited:
            await adapter.send_files(OutboundMessage("discord", fake.general, ""), (stored(tmp_path, "a.bin", b"a"),))
    assert limited.value.retry_after == pytest.approx(3600)
    assert bot_messages(fake, fake.general) == []


async def test_a_retry_gets_the_message_already_sent(fake_discord: FakeDiscord, tmp_path: Path) -> None:
    fake = fake_discord
    files = (stored(tmp_path, "a.txt", b"a\n", "text/plain"), stored(tmp_path, "b.txt", b"b\n", "text/plain"))
    target = OutboundMessage("discord", fake.general, "", reply_to="1234")
    async with connected(fake) as adapter:
        first = await adapter.send_files(target, files)
        # The same files again, as after a crash before the ledger noted them: Discord hands back the message.
        retry = await adapter.send_files(target, files)
        assert retry == first and len(bot_messages(fake, fake.general)) == 1
        # Another question, or other files, make another message.
        other = await adapter.send_files(OutboundMessage("discord", fake.general, "", reply_to="5678"), files)
        assert other != first and len(bot_messages(fake, fake.general)) == 2
        # Past Discord's window the nonce is forgotten: a late retry posts again (it is the nonce that dedupes).
        fake.nonces.window = 0
        late = await adapter.send_files(target, files)
    assert late != first and len(bot_messages(fake, fake.general)) == 3


async def test_a_hostile_name_is_a_plain_file_name(fake_discord: FakeDiscord, tmp_path: Path) -> None:
    fake = fake_discord
    async with connected(fake) as adapter:
        await adapter.send_files(OutboundMessage("discord", fake.general, ""),
                                 (stored(tmp_path, "../../.hermes/.env", b"KEY=1\n", "text/plain"),
                                  stored(tmp_path, "chart", b"\x89PNG\r\n\x1a\n", "image/png", AttachmentKind.IMAGE)))
    [message] = bot_messages(fake, fake.general)
    names = [a["filename"] for a in message["attachments"]]
    assert names == ["env.txt", "chart.png"]


async def test_failures_say_why_without_the_token(fake_discord: FakeDiscord, tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    fake = fake_discord
    caplog.set_level(logging.WARNING)
    for name in ("hermes", "aiohttp"):
        caplog.set_level(logging.DEBUG, logger=name)
    file = stored(tmp_path, "a.bin", b"abc")
    errors: list[str] = []
    with capture_logs() as logs:
        async with connected(fake) as adapter:
            fake.fail_next("create_message", 403, {"message": "Missing Permissions", "code": 50013})
            with pytest.raises(AdapterError) as forbidden:
                await adapter.send_files(OutboundMessage("discord", fake.general, ""), (file,))
            errors.append(str(forbidden.value))
            fake.upload_limit = 1
            with pytest.raises(MediaTooLargeError) as large:
                await adapter.send_files(OutboundMessage("discord", fake.general, ""), (file,))
            errors.append(str(large.value))
            gone = OutboundFile(path=tmp_path / "missing", name="x.bin", mime="application/octet-stream",
                                kind=AttachmentKind.DOCUMENT, size=3, id="0" * 64)
            with pytest.raises(MediaUnavailableError) as missing:
                await adapter.send_files(OutboundMessage("discord", fake.general, ""), (gone,))
            errors.append(str(missing.value))
    assert "403" in errors[0] and "50013" in errors[0]
    seen = "\n".join([*errors, *(str(entry) for entry in logs), caplog.text])
    assert fake.token not in seen


async def test_files_open_a_thread_recovered_after_a_restart(fake_discord: FakeDiscord, tmp_path: Path) -> None:
    fake = fake_discord
    # auto_thread: the answer to this message goes into a thread started from it, which this process never
    # saw asked for (a reply recovered after a restart); Discord answers "unknown channel" until it is opened.
    question = await fake.user_says("a file please", chat="general", mention=True, dispatch=False)
    target = OutboundMessage("discord", fake.general, "", thread_id=question["id"], reply_to=question["id"])
    async with connected(fake) as adapter:
        result = await adapter.send_files(target, (stored(tmp_path, "a.txt", b"a\n", "text/plain"),))
    assert [t["id"] for t in fake.threads] == [question["id"]]
    [message] = bot_messages(fake, question["id"])
    assert result.message_ids == (message["id"],) and "message_reference" not in message
    assert [c.status for c in fake.calls_to("create_message")] == [404, 200]
