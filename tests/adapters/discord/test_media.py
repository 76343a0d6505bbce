"""Discord attachments in: the real adapter and discord.py against ``FakeDiscord``, whose CDN serves the
files by signed URLs over a real socket. The adapter reports what a message carries (kind, name, size,
type, the CDN URL) and ``fetch`` streams the bytes, from Discord's own file hosts only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import yarl
from aiohttp import web
from structlog.testing import capture_logs

from adapters._http_fetch import Origin, allowed_origins
from adapters.base import Disposition, InboundMessage, MediaTooLargeError, MediaUnavailableError
from adapters.discord import DiscordAdapter, DiscordSettings
from adapters.media import Attachment, AttachmentKind
from tests.emulators.fake_discord import DiscordFile, FakeDiscord

WAIT = 15.0
LIMIT = 1_000_000


@asynccontextmanager
async def connected(fake: FakeDiscord, **settings: Any) -> AsyncIterator[tuple[DiscordAdapter, list[InboundMessage]]]:
    """The adapter connected to the fake; the messages it took in, in order."""
    adapter = DiscordAdapter(DiscordSettings(token=fake.token, base_url=fake.base_url, gateway_url=fake.gateway_url,
                                             guild_ready_timeout=0.05, identify_delay=0, **settings))
    inbound: list[InboundMessage] = []

    async def take(message: InboundMessage) -> Disposition:
        inbound.append(message)
        return Disposition.ACCEPTED

    adapter.bind(take)
    task = asyncio.create_task(adapter.connect())
    try:
        await asyncio.wait_for(adapter.ready.wait(), WAIT)
        yield adapter, inbound
    finally:
        await adapter.disconnect()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, WAIT)


async def received(fake: FakeDiscord, inbound: list[InboundMessage], text: str, files: list[DiscordFile],
                   **where: Any) -> InboundMessage:
    payload = await fake.user_says(text, files=files, **where)
    await fake.wait_for(lambda: any(m.message_id == payload["id"] for m in inbound), WAIT, what="the message")
    return next(m for m in inbound if m.message_id == payload["id"])


async def read_all(adapter: DiscordAdapter, attachment: Attachment, limit: int = LIMIT) -> bytes:
    return b"".join([chunk async for chunk in adapter.fetch(attachment, limit=limit)])


@asynccontextmanager
async def bystander() -> AsyncIterator[tuple[str, list[str]]]:
    """Another HTTP server on 127.0.0.1 (another origin than the fake's): its root and the paths it was asked."""
    asked: list[str] = []

    async def anything(request: web.Request) -> web.Response:
        asked.append(request.path_qs)
        return web.Response(body=b"not a discord file")

    app = web.Application()
    app.router.add_get("/{tail:.*}", anything)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", asked
    finally:
        await runner.cleanup()


async def test_attachments_arrive_with_their_kinds_and_caption(fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    files = [DiscordFile("shot.png", b"\x89PNG", "image/png"), DiscordFile("notes.pdf", b"%PDF-1.4", "application/pdf"),
             DiscordFile("song.mp3", b"ID3", "audio/mpeg"), DiscordFile("clip.mp4", b"mp4", "video/mp4"),
             DiscordFile("data.bin", b"\x00\x01", None)]
    async with connected(fake) as (_adapter, inbound):
        message = await received(fake, inbound, "what do you see?", files)
        voice = await received(fake, inbound, "", [DiscordFile("voice-message.ogg", b"OggS", "audio/ogg", voice=True,
                                                               duration=3.25)])
        only_files = await received(fake, inbound, "", files[:1])
    assert message.text == "what do you see?" and message.addressed
    assert [(a.kind, a.name, a.mime, a.size) for a in message.attachments] == [
        (AttachmentKind.IMAGE, "shot.png", "image/png", 4), (AttachmentKind.DOCUMENT, "notes.pdf", "application/pdf", 8),
        (AttachmentKind.AUDIO, "song.mp3", "audio/mpeg", 3), (AttachmentKind.VIDEO, "clip.mp4", "video/mp4", 3),
        (AttachmentKind.DOCUMENT, "data.bin", None, 2)]
    payload = fake.channel_messages(message.chat_id)[0]
    assert [a.ref for a in message.attachments] == [item["url"] for item in payload["attachments"]]
    assert [a.unique_id for a in message.attachments] == [item["id"] for item in payload["attachments"]]
    [clip] = voice.attachments
    assert (clip.kind, clip.duration, clip.mime, voice.text) == (AttachmentKind.VOICE, 3.25, "audio/ogg", "")
    assert only_files.text == "" and only_files.addressed and len(only_files.attachments) == 1


async def test_in_a_channel_files_follow_the_mention_rules(fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    png = [DiscordFile("a.png", b"\x89PNG", "image/png")]
    async with connected(fake) as (_adapter, inbound):
        unaddressed = await received(fake, inbound, "", png, chat="general")
        mentioned = await received(fake, inbound, "this one", png, chat="general", mention=True)
    assert not unaddressed.addressed and len(unaddressed.attachments) == 1
    assert mentioned.addressed and mentioned.text == "this one" and len(mentioned.attachments) == 1


async def test_fetch_streams_the_exact_bytes_from_the_cdn(fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    data = os.urandom(300_000)  # several chunks on the wire
    async with connected(fake) as (adapter, inbound):
        message = await received(fake, inbound, "", [DiscordFile("big.bin", data, "application/octet-stream")])
        [attachment] = message.attachments
        assert await read_all(adapter, attachment) == data
        # The data of the HTTP API's kind needs no download.
        inline = Attachment(AttachmentKind.IMAGE, "", data=b"inline")
        assert await read_all(adapter, inline) == b"inline"
    assert [r["status"] for r in fake.cdn.requests] == [200]
    assert not fake.cdn.requests[0]["authorization"]  # the CDN is never sent the bot token


async def test_too_large_is_refused_by_the_declared_size_before_any_request(fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    async with connected(fake) as (adapter, inbound):
        message = await received(fake, inbound, "", [DiscordFile("big.bin", b"x" * 5000, "application/octet-stream")])
        [attachment] = message.attachments
        with pytest.raises(MediaTooLargeError) as refused:
            await read_all(adapter, attachment, limit=4999)
        assert (refused.value.size, refused.value.limit) == (5000, 4999)
        assert fake.cdn.requests == []
        # A size that lies is caught by Content-Length, before the body is read.
        lying = await received(fake, inbound, "", [DiscordFile("liar.bin", b"y" * 5000, "text/plain", size=10)])
        with pytest.raises(MediaTooLargeError) as by_header:
            await read_all(adapter, lying.attachments[0], limit=4999)
        assert by_header.value.size == 5000


async def test_hostile_refs_are_refused_unfetched(fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    async with bystander() as (elsewhere, asked), connected(fake) as (adapter, inbound):
        message = await received(fake, inbound, "", [DiscordFile("a.png", b"\x89PNG", "image/png")])
        real = yarl.URL(message.attachments[0].ref)
        hostile = [
            f"{elsewhere}{real.path_qs}",  # the same path on another origin
            str(real.with_host("localhost")),  # another host name for the same machine
            str(real.with_scheme("https")),  # another scheme (another origin)
            "https://cdn.discordapp.com.evil.example/attachments/1/2/a.png",
            f"http://user:pw@127.0.0.1:{fake.port}{real.path_qs}",
            "file:///etc/passwd", "../../.env", "", "http://[::1",
        ]
        for ref in hostile:
            with pytest.raises(MediaUnavailableError) as refused:
                await read_all(adapter, Attachment(AttachmentKind.IMAGE, ref, name="../../.env"))
            assert "own file host" in str(refused.value), ref
    assert asked == [] and fake.cdn.requests == []
    # Discord's own hosts are the ones allowed, beside base_url's origin.
    allowed = allowed_origins("https://discord.com/api/v10", "cdn.discordapp.com", "media.discordapp.net")
    assert Origin.of("https://cdn.discordapp.com/attachments/1/2/a.png?ex=1") in allowed
    assert Origin.of("https://media.discordapp.net/attachments/1/2/a.png") in allowed
    assert Origin.of("http://cdn.discordapp.com/attachments/1/2/a.png") not in allowed


async def test_failures_say_why_without_the_signed_url_or_token(fake_discord: FakeDiscord,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    fake = fake_discord
    # The levels the daemon runs with (gateway.logs): discord.py's own debug log, which prints every
    # gateway event whole, is off there; ours and aiohttp's are at their most talkative.
    caplog.set_level(logging.WARNING)
    for name in ("hermes", "aiohttp"):
        caplog.set_level(logging.DEBUG, logger=name)
    with capture_logs() as logs:
        async with connected(fake) as (adapter, inbound):
            message = await received(fake, inbound, "", [DiscordFile("a.png", b"\x89PNG", "image/png")])
            [attachment] = message.attachments
            url = yarl.URL(attachment.ref)
            tampered = Attachment(AttachmentKind.IMAGE, str(url.update_query(hm="f" * 64)))
            fake.cdn.forget(attachment.unique_id or "")
            errors = []
            for broken in (tampered, attachment):
                with pytest.raises(MediaUnavailableError) as gone:
                    await read_all(adapter, broken)
                errors.append(str(gone.value))
            # and a server that is not there at all: a connection refused
            async with bystander() as (elsewhere, _asked):
                pass
            closed = Attachment(AttachmentKind.IMAGE, f"{elsewhere}/attachments/1/2/a.png?hm=deadbeefcafe0042")
            unreachable = DiscordAdapter(DiscordSettings(token=fake.token, base_url=f"{elsewhere}/api/v10"))
            with pytest.raises(MediaUnavailableError) as refused:
                await read_all(unreachable, closed)
            await unreachable.disconnect()
            errors.append(str(refused.value))
    assert errors[:2] == ["Discord would not hand the file over (HTTP 404)"] * 2
    assert errors[2].startswith("Discord would not hand the file over (")
    signature = url.query["hm"]
    seen = "\n".join([*errors, *(str(entry) for entry in logs), caplog.text])
    for secret in (fake.token, signature, "deadbeefcafe0042", url.query_string):
        assert secret not in seen
