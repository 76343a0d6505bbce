"""Slack files out: the real adapter (slack_sdk's client) against ``FakeSlack`` over real sockets, through
Slack's external upload (``files.getUploadURLExternal``, the bytes to the upload URL,
``files.completeUploadExternal``), with its scope, its size cap and its rate limits. The files are real
files on disk, as the gateway's media store keeps them.
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
from aiohttp import web
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
from adapters.media import Attachment, AttachmentKind, OutboundFile
from adapters.slack import SlackAdapter, SlackSettings
from tests.emulators.fake_slack import APP_TOKEN, BOT_TOKEN, BOT_USER, DEFAULT_SCOPES, FakeSlack

WAIT = 10.0
CHANNEL = "C0CHAN001"
DM = "D0DM0001"


@asynccontextmanager
async def connected(fake: FakeSlack, **overrides: Any) -> AsyncIterator[tuple[SlackAdapter, list[InboundMessage]]]:
    config: dict[str, Any] = {"bot_token": BOT_TOKEN, "app_token": APP_TOKEN, "api_base_url": fake.api_base_url,
                              "ping_interval": 0.5, "thinking_placeholder": False, **overrides}
    adapter = SlackAdapter(SlackSettings(**config))
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


def stored(tmp_path: Path, name: str, data: bytes, mime: str = "application/octet-stream",
           kind: AttachmentKind = AttachmentKind.DOCUMENT, size: int | None = None) -> OutboundFile:
    """A file as the gateway's store keeps it: named by its sha256, which is its id."""
    digest = hashlib.sha256(data).hexdigest()
    path = tmp_path / digest
    path.write_bytes(data)
    return OutboundFile(path=path, name=name, mime=mime, kind=kind, size=len(data) if size is None else size,
                        id=digest)


class Progress:
    def __init__(self) -> None:
        self.indexes: list[int] = []

    async def __call__(self, index: int) -> None:
        self.indexes.append(index)


def shares(fake: FakeSlack, channel: str) -> list[dict[str, Any]]:
    """The bot's messages that share files in ``channel``, oldest first."""
    return [m for (c, _), m in sorted(fake.messages.items(), key=lambda kv: kv[0][1])
            if c == channel and m.get("user") == BOT_USER and m.get("files")]


async def test_one_file_is_shared_with_its_bytes(fake_slack: FakeSlack, tmp_path: Path) -> None:
    fake = fake_slack
    png = b"\x89PNG\r\n\x1a\n" + os.urandom(100_000)
    progress = Progress()
    async with connected(fake) as (adapter, _):
        result = await adapter.send_files(OutboundMessage("slack", DM, ""),
                                          (stored(tmp_path, "chart.png", png, "image/png", AttachmentKind.IMAGE),),
                                          sent=progress)
        [message] = shares(fake, DM)
        [item] = message["files"]
        # Shared like a user's file: the bot can read it back from url_private with its token.
        link = Attachment(AttachmentKind.IMAGE, item["url_private_download"], size=item["size"])
        assert b"".join([c async for c in adapter.fetch(link, limit=1_000_000)]) == png
    assert result.message_ids == (message["ts"],) and progress.indexes == [0]
    assert "thread_ts" not in message and (item["name"], item["mimetype"], item["size"]) == ("chart.png", "image/png",
                                                                                            len(png))
    [upload] = fake.uploads.values()
    assert upload.data == png and upload.completed and not upload.authorization


async def test_several_files_share_as_one_message_per_ten_in_the_thread(fake_slack: FakeSlack,
                                                                         tmp_path: Path) -> None:
    fake = fake_slack
    files = tuple(stored(tmp_path, f"part-{i:02}.txt", f"part {i}\n".encode(), "text/plain") for i in range(12))
    progress = Progress()
    thread = fake.next_ts()
    async with connected(fake) as (adapter, _):
        result = await adapter.send_files(OutboundMessage("slack", CHANNEL, "", thread_id=thread, reply_to=thread),
                                          files, sent=progress)
    messages = shares(fake, CHANNEL)
    assert result.message_ids == tuple(m["ts"] for m in messages)
    assert [[f["name"] for f in m["files"]] for m in messages] == [
        [f"part-{i:02}.txt" for i in range(10)], ["part-10.txt", "part-11.txt"]]
    assert all(m["thread_ts"] == thread for m in messages)
    assert [m["text"] for m in messages] == ["", ""]  # the answer's text went before, by itself
    assert progress.indexes == list(range(12))
    assert len(fake.calls_to("files.completeUploadExternal")) == 2


async def test_too_large_for_slack_is_media_too_large(fake_slack: FakeSlack, tmp_path: Path) -> None:
    fake = fake_slack
    fake.upload_limit = 1000  # a workspace that restricts large files
    progress = Progress()
    async with connected(fake) as (adapter, _):
        with pytest.raises(MediaTooLargeError) as refused:
            await adapter.send_files(OutboundMessage("slack", DM, ""), (stored(tmp_path, "big.bin", os.urandom(1500)),),
                                     sent=progress)
    assert refused.value.size == 1500 and refused.value.limit == adapter.max_upload_bytes
    assert "file_upload_size_restricted" in str(refused.value)
    assert shares(fake, DM) == [] and progress.indexes == [] and fake.uploads == {}


async def test_the_upload_limit_is_a_setting(fake_slack: FakeSlack) -> None:
    async with connected(fake_slack, max_upload_mb=5) as (adapter, _):
        assert adapter.max_upload_bytes == 5 * 1024 * 1024
    assert SlackAdapter(SlackSettings(enabled=False)).max_upload_bytes == 1024 * 1024 * 1024


async def test_a_rate_limit_is_waited_out(fake_slack: FakeSlack, tmp_path: Path) -> None:
    fake = fake_slack
    fake.fail_next("files.completeUploadExternal", 429, headers={"Retry-After": "0"})
    async with connected(fake) as (adapter, _):
        result = await adapter.send_files(OutboundMessage("slack", DM, ""), (stored(tmp_path, "a.txt", b"a"),))
    assert [c.status for c in fake.calls_to("files.completeUploadExternal")] == [429, 200]
    [message] = shares(fake, DM)
    assert result.message_ids == (message["ts"],)


async def test_a_rate_limit_past_the_retries_is_rate_limited_error(fake_slack: FakeSlack, tmp_path: Path) -> None:
    fake = fake_slack
    fake.fail_next("files.getUploadURLExternal", 429, headers={"Retry-After": "7"})
    async with connected(fake, rate_limit_retries=0) as (adapter, _):
        with pytest.raises(RateLimitedError) as limited:
            await adapter.send_files(OutboundMessage("slack", DM, ""), (stored(tmp_path, "a.txt", b"a"),))
    assert limited.value.retry_after == 7
    assert shares(fake, DM) == []


async def test_without_files_write_slack_says_missing_scope(tmp_path: Path) -> None:
    async with FakeSlack(scopes=DEFAULT_SCOPES - {"files:write"}) as fake, connected(fake) as (adapter, _):
        with pytest.raises(AdapterError) as refused:
            await adapter.send_files(OutboundMessage("slack", DM, ""), (stored(tmp_path, "a.txt", b"a"),))
    assert "missing_scope" in str(refused.value) and "files:write" in str(refused.value)
    assert fake.calls_to("files.getUploadURLExternal")[0].response["needed"] == "files:write"


async def test_a_files_only_answer_takes_the_placeholder_off(fake_slack: FakeSlack, tmp_path: Path) -> None:
    fake = fake_slack
    async with connected(fake, thinking_placeholder=True, thinking_delay=0) as (adapter, _):
        body = await fake.user_says("draw it", chat=CHANNEL, mention=True)
        ts = body["event"]["ts"]
        await fake.wait_for(lambda: any(m["text"] == "_…thinking_" for m in fake.thread_replies(CHANNEL, ts)), WAIT,
                            what="the placeholder")
        await adapter.send_files(OutboundMessage("slack", CHANNEL, "", thread_id=ts, reply_to=ts),
                                 (stored(tmp_path, "plot.png", b"\x89PNG", "image/png", AttachmentKind.IMAGE),))
    [message] = fake.thread_replies(CHANNEL, ts)
    assert [f["name"] for f in message["files"]] == ["plot.png"]
    assert [c.status for c in fake.calls_to("chat.delete")] == [200]


async def test_a_name_is_never_a_path(fake_slack: FakeSlack, tmp_path: Path) -> None:
    fake = fake_slack
    async with connected(fake) as (adapter, _):
        await adapter.send_files(OutboundMessage("slack", DM, ""),
                                 (stored(tmp_path, "../../.hermes/.env", b"KEY=1\n", "text/plain"),))
    [message] = shares(fake, DM)
    assert [f["name"] for f in message["files"]] == [".env"]


class ElsewhereSlack(FakeSlack):
    """A Slack whose upload URLs point at another host (``elsewhere``)."""

    elsewhere = ""

    def _m_files_getUploadURLExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        answer = super()._m_files_getUploadURLExternal(params)
        if answer.get("ok"):
            answer["upload_url"] = f"{self.elsewhere}/upload/v1/stolen"
        return answer


async def test_bytes_go_only_to_slacks_file_host(tmp_path: Path) -> None:
    asked: list[str] = []

    async def anything(request: web.Request) -> web.Response:
        asked.append(request.path)
        return web.Response(text="OK")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", anything)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        async with ElsewhereSlack() as fake:
            fake.elsewhere = f"http://127.0.0.1:{runner.addresses[0][1]}"
            async with connected(fake) as (adapter, _):
                with pytest.raises(AdapterError) as refused:
                    await adapter.send_files(OutboundMessage("slack", DM, ""), (stored(tmp_path, "a.txt", b"a"),))
    finally:
        await runner.cleanup()
    assert "outside its file host" in str(refused.value) and asked == []


async def test_failures_say_why_without_token_or_upload_url(fake_slack: FakeSlack, tmp_path: Path,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    fake = fake_slack
    # The levels the daemon runs with (gateway.logs): slack_sdk's own debug log, which prints whole answers
    # (an upload URL among them), is at WARNING there; ours and aiohttp's are at their most talkative.
    caplog.set_level(logging.WARNING)
    for name in ("hermes", "aiohttp"):
        caplog.set_level(logging.DEBUG, logger=name)
    errors: list[str] = []
    with capture_logs() as logs:
        async with connected(fake) as (adapter, _):
            # A stored file whose size is not what the gateway recorded: the upload URL refuses the bytes.
            changed = stored(tmp_path, "a.bin", b"abcdef", size=4)
            with pytest.raises(AdapterError) as mismatch:
                await adapter.send_files(OutboundMessage("slack", DM, ""), (changed,))
            errors.append(str(mismatch.value))
            fake.fail_next("files.completeUploadExternal", 200, {"ok": False, "error": "channel_not_found"})
            with pytest.raises(AdapterError) as channel:
                await adapter.send_files(OutboundMessage("slack", "C0GONE", ""), (stored(tmp_path, "b", b"b"),))
            errors.append(str(channel.value))
            gone = OutboundFile(path=tmp_path / "missing", name="x.bin", mime="application/octet-stream",
                                kind=AttachmentKind.DOCUMENT, size=3, id="0" * 64)
            with pytest.raises(MediaUnavailableError):
                await adapter.send_files(OutboundMessage("slack", DM, ""), (gone,))
    assert errors == ["Slack refused the bytes of a file (HTTP 400)", "Slack refused the files (channel_not_found)"]
    seen = "\n".join([*errors, *(str(entry) for entry in logs), caplog.text])
    secrets = [BOT_TOKEN, APP_TOKEN, *(u.secret for u in fake.uploads.values())]
    assert fake.uploads and not any(secret in seen for secret in secrets)
    assert shares(fake, DM) == []
