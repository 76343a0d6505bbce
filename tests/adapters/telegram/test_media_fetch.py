"""``TelegramAdapter.fetch`` against ``FakeTelegram``: getFile, then the file endpoint; sizes refused
before any download, the bytes exact, errors plain and never carrying the token."""

from __future__ import annotations

import logging

import pytest
import structlog

from adapters.base import MediaTooLargeError, MediaUnavailableError
from adapters.media import Attachment, AttachmentKind
from tests.emulators.fake_telegram import FakeTelegram

from ._media import Running, fetched, next_message, start


async def test_a_25_mb_file_is_refused_before_any_download(fake_telegram: FakeTelegram, tg: Running) -> None:
    f = fake_telegram
    msg = await next_message(tg, f, f.document(b"\0" * (25 * 2**20), file_name="big.zip"))
    [big] = msg.attachments
    assert big.size == 25 * 2**20
    with pytest.raises(MediaTooLargeError) as err:
        await fetched(tg.adapter, big)
    assert (err.value.size, err.value.limit) == (25 * 2**20, 20 * 2**20)
    assert f.calls_to("getFile") == [] and f.downloads == []
    # Its size not declared: Telegram's own refusal ("file is too big") says it.
    with pytest.raises(MediaTooLargeError):
        await fetched(tg.adapter, Attachment(kind=AttachmentKind.DOCUMENT, ref=big.ref))
    assert f.downloads == []


async def test_content_length_over_the_limit_is_refused_before_reading(
    fake_telegram: FakeTelegram, tg: Running
) -> None:
    f = fake_telegram
    msg = await next_message(tg, f, f.document(b"z" * 5000, declare_size=False))
    [doc] = msg.attachments
    assert doc.size is None
    with pytest.raises(MediaTooLargeError) as err:
        await fetched(tg.adapter, doc, limit=4000)
    assert err.value.size == 5000
    assert await fetched(tg.adapter, doc, limit=5000) == b"z" * 5000


async def test_fetch_streams_a_large_file_exactly(fake_telegram: FakeTelegram, tg: Running) -> None:
    data = bytes(range(251)) * 20_000  # about 5 MB, not a multiple of any chunk size
    msg = await next_message(tg, fake_telegram, fake_telegram.document(data, file_name="data.bin"))
    chunks = [c async for c in tg.adapter.fetch(msg.attachments[0], limit=len(data))]
    assert len(chunks) > 1 and b"".join(chunks) == data


def _token_free(fake: FakeTelegram, text: str) -> None:
    assert fake.token not in text
    assert fake.token.split(":", 1)[1] not in text
    assert "/file/bot" not in text


async def test_unavailable_files_fail_plainly_and_never_show_the_token(
    fake_telegram: FakeTelegram, tg: Running, caplog: pytest.LogCaptureFixture
) -> None:
    f = fake_telegram
    msg = await next_message(tg, f, f.document(b"y" * 100_000))
    [doc] = msg.attachments
    f.break_downloads(doc.ref)
    errors: list[str] = []
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as events:
        for attachment in (Attachment(kind=AttachmentKind.IMAGE, ref="AgACno-such-file"), doc):
            with pytest.raises(MediaUnavailableError) as err:
                await fetched(tg.adapter, attachment)
            errors.append(str(err.value))
            assert err.value.__cause__ is None and err.value.__suppress_context__
    assert "no longer has this file" in errors[0]
    assert "ClientPayloadError" in errors[1]
    for text in (*errors, caplog.text, repr(events)):
        _token_free(f, text)
    assert await fetched(tg.adapter, doc) == b"y" * 100_000  # the next download is whole


async def test_a_file_endpoint_that_refuses_or_is_unreachable(fake_telegram: FakeTelegram) -> None:
    f = fake_telegram
    for base_file_url, expected in ((f"{f.endpoint()}/elsewhere/bot", "HTTP 404"),
                                    ("http://127.0.0.1:9/file/bot", "ClientConnectorError")):
        tg = await start(f, base_file_url=base_file_url)
        try:
            msg = await next_message(tg, f, f.voice(b"OggS"))
            with pytest.raises(MediaUnavailableError) as err:
                await fetched(tg.adapter, msg.attachments[0])
            assert expected in str(err.value)
            _token_free(f, str(err.value))
        finally:
            await tg.stop()


