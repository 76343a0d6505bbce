"""Slack files in: the real adapter (slack-bolt, Socket Mode) against ``FakeSlack``, which serves shared
files at ``url_private_download`` to the bot token only, over a real socket. The adapter reports what a
message shares (kind, name, size, type, the private URL) and ``fetch`` streams the bytes with the token,
from Slack's own file host only, never handing the token to another origin.
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
from adapters.media import Attachment, AttachmentKind
from adapters.slack import SlackAdapter, SlackSettings
from tests.emulators.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack, SlackFile

WAIT = 10.0
CHANNEL = "C0CHAN001"
LIMIT = 1_000_000


def settings(fake: FakeSlack, **overrides: Any) -> SlackSettings:
    config: dict[str, Any] = {"bot_token": BOT_TOKEN, "app_token": APP_TOKEN, "api_base_url": fake.api_base_url,
                              "ping_interval": 0.5, "thinking_placeholder": False, **overrides}
    return SlackSettings(**config)


@asynccontextmanager
async def connected(fake: FakeSlack) -> AsyncIterator[tuple[SlackAdapter, list[InboundMessage]]]:
    """A connected adapter whose router accepts every message (and keeps it, in order)."""
    adapter = SlackAdapter(settings(fake))
    got: list[InboundMessage] = []

    async def accept(message: InboundMessage) -> Disposition:
        got.append(message)
        return Disposition.ACCEPTED

    adapter.bind(accept)
    task = asyncio.create_task(adapter.connect())
    try:
        await asyncio.wait_for(adapter.ready.wait(), WAIT)
        yield adapter, got
    finally:
        await adapter.disconnect()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, WAIT)


async def shared(fake: FakeSlack, got: list[InboundMessage], text: str, files: list[SlackFile],
                 **where: Any) -> InboundMessage:
    body = await fake.user_says(text, files=files, **where)
    ts = body["event"]["ts"]
    await fake.wait_for(lambda: any(m.message_id == ts for m in got), WAIT, what="the message at the router")
    return next(m for m in got if m.message_id == ts)


async def read_all(adapter: SlackAdapter, attachment: Attachment, limit: int = LIMIT) -> bytes:
    return b"".join([chunk async for chunk in adapter.fetch(attachment, limit=limit)])


@asynccontextmanager
async def bystander() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """Another HTTP server on 127.0.0.1 (another origin): its root, and each request it got (path, auth)."""
    asked: list[dict[str, Any]] = []

    async def anything(request: web.Request) -> web.Response:
        asked.append({"path": request.path, "authorization": request.headers.get("Authorization")})
        return web.Response(body=b"not a slack file", content_type="image/png")

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


async def test_files_arrive_with_their_kinds_and_caption(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    files = [SlackFile("Screen Shot.png", b"\x89PNG", "image/png"), SlackFile("talk.mp3", b"ID3", "audio/mpeg"),
             SlackFile("audio_message.webm", b"webm", "audio/webm", audio_clip=True, duration_ms=2500),
             SlackFile("demo.mov", b"moov", "video/quicktime"), SlackFile("notes.md", b"# hi", "text/markdown")]
    async with connected(fake) as (_adapter, got):
        message = await shared(fake, got, "what is this?", files)
        only_files = await shared(fake, got, "", files[:1])
        in_channel = await shared(fake, got, "look", files[:1], chat=CHANNEL, mention=True)
    assert message.text == "what is this?" and message.addressed
    assert [(a.kind, a.name, a.mime, a.size) for a in message.attachments] == [
        (AttachmentKind.IMAGE, "Screen Shot.png", "image/png", 4), (AttachmentKind.AUDIO, "talk.mp3", "audio/mpeg", 3),
        (AttachmentKind.VOICE, "audio_message.webm", "audio/webm", 4),
        (AttachmentKind.VIDEO, "demo.mov", "video/quicktime", 4),
        (AttachmentKind.DOCUMENT, "notes.md", "text/markdown", 4)]
    assert message.attachments[2].duration == 2.5
    event = fake.messages[("D0DM0001", message.message_id or "")]
    assert [a.ref for a in message.attachments] == [f["url_private_download"] for f in event["files"]]
    assert [a.unique_id for a in message.attachments] == [f["id"] for f in event["files"]]
    assert only_files.text == "" and len(only_files.attachments) == 1
    assert in_channel.text == "look" and in_channel.addressed and len(in_channel.attachments) == 1


async def test_fetch_streams_the_exact_bytes_with_the_bot_token(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    data = os.urandom(300_000)
    async with connected(fake) as (adapter, got):
        message = await shared(fake, got, "", [SlackFile("dump.bin", data, "application/octet-stream")])
        assert await read_all(adapter, message.attachments[0]) == data
    assert [(r["status"], r["authorized"]) for r in fake.files.requests] == [(200, True)]
    assert "/download/" in fake.files.requests[0]["path"]


async def test_too_large_is_refused_before_the_body(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with connected(fake) as (adapter, got):
        message = await shared(fake, got, "", [SlackFile("big.bin", b"x" * 5000)])
        with pytest.raises(MediaTooLargeError) as declared:
            await read_all(adapter, message.attachments[0], limit=4999)
        assert (declared.value.size, declared.value.limit) == (5000, 4999)
        assert fake.files.requests == []
        lying = await shared(fake, got, "", [SlackFile("liar.bin", b"y" * 5000, size=10)])
        with pytest.raises(MediaTooLargeError) as by_header:
            await read_all(adapter, lying.attachments[0], limit=4999)
        assert by_header.value.size == 5000


async def test_the_sign_in_page_is_not_taken_for_the_file(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with connected(fake) as (_adapter, got):
        message = await shared(fake, got, "", [SlackFile("photo.jpg", b"\xff\xd8\xff", "image/jpeg")])
    # A token Slack no longer takes (revoked, or the app lacks files:read): 200 and the HTML sign-in page.
    revoked = SlackAdapter(settings(fake, bot_token="xoxb-9999-revoked"))
    try:
        with pytest.raises(MediaUnavailableError) as refused:
            await read_all(revoked, message.attachments[0])
    finally:
        await revoked.disconnect()
    assert "sign-in page" in str(refused.value) and "files:read" in str(refused.value)
    assert "xoxb-9999-revoked" not in str(refused.value)
    assert [(r["status"], r["authorized"], r["authorization"]) for r in fake.files.requests] == [(200, False, True)]


async def test_hostile_refs_and_redirects_never_get_the_token(fake_slack: FakeSlack,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    fake = fake_slack
    caplog.set_level(logging.WARNING)
    for name in ("hermes", "aiohttp"):
        caplog.set_level(logging.DEBUG, logger=name)
    with capture_logs() as logs:
        async with bystander() as (elsewhere, asked), connected(fake) as (adapter, got):
            message = await shared(fake, got, "", [SlackFile("a.png", b"\x89PNG", "image/png"),
                                                   SlackFile("b.png", b"\x89PNG", "image/png")])
            first, second = message.attachments
            real = yarl.URL(first.ref)
            for ref in (f"{elsewhere}{real.path}", str(real.with_host("localhost")),
                        "https://files.slack.com.evil.example/files-pri/T-F/a.png", "file:///etc/passwd", "../.env"):
                with pytest.raises(MediaUnavailableError) as refused:
                    await read_all(adapter, Attachment(AttachmentKind.IMAGE, ref))
                assert "own file host" in str(refused.value)
            # Slack's file answers with a redirect to another origin: not followed, so the token stays here.
            fake.files.redirect(first.unique_id or "", f"{elsewhere}/stolen.png")
            with pytest.raises(MediaUnavailableError) as redirected:
                await read_all(adapter, first)
            assert "redirected to another host" in str(redirected.value)
            # A redirect on Slack's own origin is followed, with the token.
            fake.files.redirect(first.unique_id or "", second.ref)
            assert await read_all(adapter, first) == b"\x89PNG"
            # Gone: a 404.
            with pytest.raises(MediaUnavailableError) as gone:
                await read_all(adapter, Attachment(AttachmentKind.IMAGE, first.ref.replace(first.unique_id or "",
                                                                                           "F0GONE")))
            assert str(gone.value) == "Slack would not hand the file over (HTTP 404)"
    assert asked == []
    assert [(r["status"], r["authorized"]) for r in fake.files.requests] == [(302, True), (302, True), (200, True),
                                                                             (404, True)]
    seen = "\n".join([str(refused.value), str(redirected.value), str(gone.value), *(str(e) for e in logs),
                      caplog.text])
    assert BOT_TOKEN not in seen and "xoxb-" not in seen
    # files.slack.com is the host allowed, beside api_base_url's origin.
    allowed = allowed_origins("https://slack.com/api/", "files.slack.com")
    assert Origin.of("https://files.slack.com/files-pri/T1-F1/download/a.png") in allowed
    assert Origin.of("https://files.slack.com:8443/files-pri/T1-F1/a.png") not in allowed


async def test_odd_file_objects_are_left_out_not_fatal(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    base = f"{fake.endpoint()}/files-pri/T0TEAM001-F0X"
    files: list[Any] = [
        "not an object", {"id": "F1", "url_private": 5, "size": "big"},
        {"id": "F2", "mode": "tombstone", "url_private": f"{base}/gone.png"},  # deleted since
        {"id": "F3", "name": "../../.hermes/.env", "url_private": f"{base}/env", "size": -1, "duration_ms": True,
         "mimetype": ["image/png"]},
    ]
    async with connected(fake) as (_adapter, got):
        event = {"type": "message", "subtype": "file_share", "user": fake.user, "text": "hm", "ts": "1700000999.000001",
                 "channel": "D0DM0001", "channel_type": "im", "files": files}
        await fake.deliver(fake.event_body(event))
        await fake.wait_for(lambda: got, WAIT, what="the message at the router")
    [only] = got[0].attachments
    assert (only.kind, only.name, only.ref, only.size, only.duration, only.mime) == (
        AttachmentKind.DOCUMENT, "../../.hermes/.env", f"{base}/env", None, None, None)
