"""Telegram media in: the real adapter (python-telegram-bot on our aiohttp layer) polling the real
``FakeTelegram`` over 127.0.0.1, its messages taken by a recording handler in place of the router.

What arrives: attachments, captions, stickers, albums (fetching is in ``test_media_fetch``).
"""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from adapters.base import MediaTooLargeError
from adapters.media import Attachment, AttachmentKind
from adapters.telegram import TelegramAdapter, TelegramSettings
from tests.emulators.fake_telegram import FakeTelegram
from tests.gateway.conftest import free_port

from ._media import WAIT, Inbox, Running, fetched, jpeg, next_message, start

# -- what arrives ---------------------------------------------------------------------------------


async def test_a_photo_is_its_largest_size_with_the_caption(fake_telegram: FakeTelegram, tg: Running) -> None:
    media = fake_telegram.photo(jpeg(1400, 700))
    largest = media["photo"][-1]
    msg = await next_message(tg, fake_telegram, media, caption="what is this?")
    assert msg.text == "what is this?" and msg.addressed
    assert msg.attachments == (Attachment(kind=AttachmentKind.IMAGE, ref=largest["file_id"], mime="image/jpeg",
                                          size=largest["file_size"], unique_id=largest["file_unique_id"]),)
    assert await fetched(tg.adapter, msg.attachments[0]) == fake_telegram.file_bytes(largest["file_id"])


async def test_a_photo_size_is_picked_within_the_download_limit(fake_telegram: FakeTelegram, tg: Running) -> None:
    media = fake_telegram.photo(jpeg(1400, 700))
    sizes = media["photo"]
    assert sizes[-1]["file_size"] > sizes[-2]["file_size"]
    tg.adapter.max_download_bytes = sizes[-2]["file_size"]
    msg = await next_message(tg, fake_telegram, media)
    assert [a.ref for a in msg.attachments] == [sizes[-2]["file_id"]]
    assert msg.text == ""
    tg.adapter.max_download_bytes = 10  # none fits: the smallest, for the download to refuse plainly
    msg = await next_message(tg, fake_telegram, media)
    assert [a.ref for a in msg.attachments] == [sizes[0]["file_id"]]
    with pytest.raises(MediaTooLargeError):
        await fetched(tg.adapter, msg.attachments[0], limit=10)


async def test_documents_voice_audio_video_and_video_notes(fake_telegram: FakeTelegram, tg: Running) -> None:
    f = fake_telegram
    doc = await next_message(tg, f, f.document(b"%PDF-1.4 tiny", file_name="../../.env", mime_type="application/pdf"),
                             caption="read it")
    voice = await next_message(tg, f, f.voice(b"OggS voice", duration=12))
    audio = await next_message(tg, f, f.audio(b"ID3 song", duration=200, file_name="song.mp3"))
    note = await next_message(tg, f, f.video_note(b"mp4 round", duration=9))
    video = await next_message(tg, f, f.video(b"mp4 clip", duration=5, file_name="clip.mp4"))
    assert doc.text == "read it"
    [d] = doc.attachments
    assert (d.kind, d.name, d.mime, d.size) == (AttachmentKind.DOCUMENT, "../../.env", "application/pdf", 13)
    [v] = voice.attachments
    assert (v.kind, v.mime, v.duration, v.size) == (AttachmentKind.VOICE, "audio/ogg", 12.0, 10)
    [a] = audio.attachments
    assert (a.kind, a.name, a.mime, a.duration) == (AttachmentKind.AUDIO, "song.mp3", "audio/mpeg", 200.0)
    [n] = note.attachments
    assert (n.kind, n.mime, n.duration) == (AttachmentKind.AUDIO, "video/mp4", 9.0)
    [c] = video.attachments
    assert (c.kind, c.name, c.mime) == (AttachmentKind.VIDEO, "clip.mp4", "video/mp4")
    for m, data in ((doc, b"%PDF-1.4 tiny"), (voice, b"OggS voice"), (note, b"mp4 round")):
        assert m.attachments[0].unique_id and await fetched(tg.adapter, m.attachments[0]) == data


async def test_a_static_sticker_is_an_image_and_an_animated_one_its_emoji(
    fake_telegram: FakeTelegram, tg: Running
) -> None:
    f = fake_telegram
    static = await next_message(tg, f, f.sticker(b"RIFF....WEBP", emoji="🙂"))
    animated = await next_message(tg, f, f.sticker(b"tgs", animated=True, emoji="🎉"))
    video = await next_message(tg, f, f.sticker(b"webm", video=True, emoji=None))
    [s] = static.attachments
    assert (s.kind, s.mime, static.text) == (AttachmentKind.IMAGE, "image/webp", "")
    assert (animated.attachments, animated.text) == ((), "[sticker 🎉]")
    assert (video.attachments, video.text) == ((), "[sticker]")


async def test_in_a_group_a_caption_addresses_the_bot_like_text(fake_telegram: FakeTelegram, tg: Running) -> None:
    f = fake_telegram
    group = f.group()
    mentioned = await next_message(tg, f, f.photo(jpeg(64, 64)), caption="what is it?", mention=True,
                                   chat=group, user=f.user)
    bare = await next_message(tg, f, f.photo(jpeg(64, 64)), chat=group, user=f.user)
    reply = await next_message(tg, f, f.voice(b"OggS"), chat=group, user=f.user, reply_to_bot=True)
    command = await next_message(tg, f, f.document(b"log"), caption="/status", chat=group, user=f.user)
    assert (mentioned.addressed, mentioned.text) == (True, "what is it?")
    assert len(mentioned.attachments) == 1
    assert bare.addressed is False and len(bare.attachments) == 1
    assert reply.addressed is True
    assert command.addressed is True and command.text == "/status"


# -- albums ---------------------------------------------------------------------------------------


async def test_an_album_is_one_message_with_every_part(fake_telegram: FakeTelegram, tg: Running) -> None:
    f = fake_telegram
    parts = [f.photo(jpeg(80, 60, seed=i)) for i in range(3)] + [f.video(b"mp4")]
    updates = await f.user_sends_album(parts, caption="our trip", caption_on=1)
    await f.user_says("and this is after")
    album, after = await tg.inbox.wait(2)
    chat = f.user["id"]
    group = updates[0]["message"]["media_group_id"]
    assert after.text == "and this is after"  # a later message of the chat does not overtake the album
    assert album.text == "our trip"
    assert album.message_id == str(updates[0]["message"]["message_id"])
    assert album.dedupe_id == f"album:{chat}:{group}"
    assert [a.ref for a in album.attachments] == [p["photo"][-1]["file_id"] for p in parts[:3]] + [
        parts[3]["video"]["file_id"]]
    # The same parts delivered again (as after a restart) are no second message.
    await f.redeliver(updates[2])
    await f.user_says("last")
    assert (await tg.inbox.wait(3))[-1].text == "last"
    assert len(tg.inbox.messages) == 3


async def test_albums_of_ten_go_at_once_and_other_chats_are_not_mixed_in(
    fake_telegram: FakeTelegram, tg: Running
) -> None:
    f = fake_telegram
    tg.adapter.media_group_window = 60.0  # only the tenth part (Telegram's maximum) can end it
    bob = f.add_user("Bob")
    await f.user_sends_album([f.document(f"part {i}".encode(), file_name=f"{i}.txt") for i in range(10)])
    await f.user_sends_album([f.document(b"x"), f.document(b"y")], user=bob)
    [album] = await tg.inbox.wait(1)
    assert [a.name for a in album.attachments] == [f"{i}.txt" for i in range(10)]
    assert album.chat_id == str(f.user["id"])
    # Bob's album is still open (its window is long): a disconnect dispatches it rather than losing it.
    await tg.adapter.disconnect()
    bobs = await tg.inbox.wait_for(lambda m: m.chat_id == str(bob["id"]))
    assert [a.name for a in bobs.attachments] == ["file.bin", "file.bin"]


async def test_an_album_is_not_acknowledged_before_it_reached_the_router(fake_telegram: FakeTelegram) -> None:
    f = fake_telegram
    first = await start(f, window=60.0)
    updates = await f.user_sends_album([f.photo(jpeg(40, 40, seed=i)) for i in range(3)], caption="three")
    ids = [u["update_id"] for u in updates]

    def polled_again_after_the_parts() -> bool:
        polls = f.calls_to("getUpdates")
        for i, c in enumerate(polls):
            if c.status == 200 and isinstance(c.response, dict) and {
                    u["update_id"] for u in c.response["result"]} >= set(ids):
                return len(polls) > i + 1
        return False

    # The next getUpdates after the one that brought the parts is where an acknowledgement would be.
    await f.wait_for(polled_again_after_the_parts, timeout=WAIT)
    # The process dies while the album is collected: nothing flushed, nothing acknowledged.
    first.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first.task
    assert first.inbox.messages == []
    assert f.acked_offset <= ids[0]
    assert [u["update_id"] for u in f.updates] == ids
    second = await start(f)
    try:
        [album] = await second.inbox.wait(1)
        assert album.text == "three" and len(album.attachments) == 3
        assert album.dedupe_id == f"album:{f.user['id']}:{updates[0]['message']['media_group_id']}"
    finally:
        await second.stop()
        await first.adapter.disconnect()


async def test_while_an_album_is_collected_polling_holds_its_offset(fake_telegram: FakeTelegram) -> None:
    f = fake_telegram
    tg = await start(f, window=0.3)
    try:
        updates = await f.user_sends_album([f.photo(jpeg(40, 40, seed=i)) for i in range(2)])
        first_id = updates[0]["update_id"]
        [album] = await tg.inbox.wait(1)
        dispatched = tg.inbox.times[0]

        def polls() -> list[tuple[float, int | None]]:
            return [(c.time, c.params.get("offset")) for c in f.calls_to("getUpdates")]

        # Once the album went out, a poll acknowledges its parts; none did before.
        await f.wait_for(lambda: any(o is not None and o > updates[-1]["update_id"] for _, o in polls()),
                         timeout=WAIT)
        assert all(offset is None or offset <= first_id for at, offset in polls() if at < dispatched)
        assert len(album.attachments) == 2
    finally:
        await tg.stop()


async def test_malformed_media_is_dropped_and_the_chat_goes_on(fake_telegram: FakeTelegram, tg: Running) -> None:
    f = fake_telegram
    good = await f.user_sends(f.photo(jpeg(32, 32)))
    message = good["message"]
    broken_photos = [
        {**message, "message_id": 900, "photo": [{"file_id": "a", "file_unique_id": "u", "width": 1,
                                                  "height": 1, "file_size": "big"}]},
        {**{k: v for k, v in message.items() if k != "photo"}, "message_id": 902,
         "voice": {"file_id": "v", "file_unique_id": "w", "duration": "long"}},
        {**message, "message_id": 901, "photo": [{"file_id": "a", "file_unique_id": "u", "width": -1,
                                                  "height": 1, "file_size": 3}]},
    ]
    for broken in broken_photos:
        await f.raw_update({"message": broken})
    await f.user_says("still here")
    texts = [m.text for m in await tg.inbox.wait(2)]
    assert texts[-1] == "still here"
    assert len(tg.inbox.messages) == 2


async def test_webhook_answers_album_parts_at_once_so_the_album_stays_whole(fake_telegram: FakeTelegram) -> None:
    # Telegram posts a chat's updates one at a time, each after the previous one was answered: a part
    # whose answer waited for its album's window would hold the next part back, splitting the album.
    f = fake_telegram
    port = free_port()
    adapter = TelegramAdapter(TelegramSettings(
        token=f.token, base_url=f.base_url, base_file_url=f.base_file_url, mode="webhook",
        webhook_secret="album-webhook-secret-0123456789", webhook_path="/tg",
        webhook_url=f"http://127.0.0.1:{port}/tg"))
    adapter.media_group_window = 0.3
    app = web.Application()
    adapter.add_routes(app)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    inbox = Inbox()
    adapter.bind(inbox.handle)
    tg = Running(adapter, inbox, asyncio.create_task(adapter.connect()))
    try:
        await asyncio.wait_for(adapter.ready.wait(), WAIT)
        updates = await f.user_sends_album([f.photo(jpeg(30, 30, seed=i)) for i in range(3)], caption="hook")
        await f.user_says("then text")
        album, text = await inbox.wait(2)
        assert text.text == "then text"
        assert album.text == "hook" and len(album.attachments) == 3
        assert [d["update_id"] for d in f.webhook_deliveries][:3] == [u["update_id"] for u in updates]
        assert {d["status"] for d in f.webhook_deliveries} == {200}
    finally:
        await tg.stop()
        await runner.cleanup()
