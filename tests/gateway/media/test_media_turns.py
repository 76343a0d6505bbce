"""Attachments through the real daemon: downloaded, stored, read, and what the model and the person get.

The chat adapter carries each file's bytes inline (``Attachment.data``), so the
default ``Adapter.fetch`` hands them over; the platforms' own downloads are
tested with their emulators in tests/adapters.
"""

from __future__ import annotations

import asyncio
import base64
import io
import sqlite3
import time
from pathlib import Path
from typing import Any

from PIL import Image

from adapters.base import ChatType
from adapters.media import Attachment, AttachmentKind
from gateway.control.client import call
from storage import queries
from tests.fakes.openai_server import FakeOpenAI, echo_last_user_message
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway.conftest import run_gateway

ALLOW = {"TESTCHAT_ALLOWED_USERS": "u1,u2"}
VISION = {"model": {"vision": True}}


def rows(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def jpeg(width: int = 3000, height: int = 2000, *, gps: bool = True) -> bytes:
    img = Image.new("RGB", (width, height), (200, 40, 40))
    exif = Image.Exif()
    if gps:
        exif[0x8825] = {2: (52.0, 31.0, 12.0), 1: "N"}  # GPSInfo
    exif[0x010F] = "PhoneMaker"
    out = io.BytesIO()
    img.save(out, "JPEG", quality=80, exif=exif)
    return out.getvalue()


def photo(data: bytes, name: str | None = "photo.jpg") -> Attachment:
    return Attachment(AttachmentKind.IMAGE, ref="", name=name, mime="image/jpeg", size=len(data), data=data)


def image_parts(body: dict[str, Any]) -> list[tuple[int, Image.Image]]:
    """(message index, decoded image) of every image part the model got."""
    found = []
    for i, message in enumerate(body["messages"]):
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                if part.get("type") == "image_url":
                    url = part["image_url"]["url"]
                    assert url.startswith("data:image/")
                    raw = base64.b64decode(url.split(",", 1)[1])
                    found.append((i, Image.open(io.BytesIO(raw))))
    return found


def names_in(home: Path) -> set[str]:
    return {p.name for p in home.iterdir()}


def user_contents(db: Path) -> list[str]:
    return [r[0] for r in rows(db, "SELECT content FROM messages WHERE role = 'user' ORDER BY id")]


async def test_a_photo_reaches_a_vision_model_resized_and_without_exif(gateway_home: Path,
                                                                      fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat, config=VISION) as gw:
        await chat.say("what is on this whiteboard?", user="u1", attachments=(photo(jpeg()),))
        [reply] = await chat.wait_sent(1)
    assert reply.text.startswith("echo: what is on this whiteboard?")
    body = fake_openai.chat_requests[-1].body
    [(index, img)] = image_parts(body)
    assert body["messages"][index]["role"] == "user" and index == len(body["messages"]) - 1
    assert max(img.size) == 1568 and img.format == "JPEG"
    assert not img.getexif()  # no GPS, no maker: nothing of the phone's metadata left
    [stored] = user_contents(gw.db_path)
    assert stored.startswith("what is on this whiteboard?\n\n[image ") and "photo.jpg, 1568×1045]" in stored
    kinds = rows(gw.db_path, "SELECT kind, name, size, sha256 FROM gateway_attachments ORDER BY id")
    assert [k[0] for k in kinds] == ["image", "image_shown"]
    for _, _, size, sha in kinds:
        blob = next((gateway_home / "media").rglob(sha))
        assert blob.stat().st_size == size
    # A session export lists the files with the messages.
    conn = sqlite3.connect(gw.db_path)
    conn.row_factory = sqlite3.Row
    try:
        [(sid,)] = conn.execute("SELECT id FROM sessions").fetchall()
        exported = queries.export_session(conn, sid)
    finally:
        conn.close()
    assert exported is not None
    assert [(a["kind"], a["name"]) for a in exported["attachments"]] == [("image", "photo.jpg"),
                                                                         ("image_shown", "photo.jpg")]


async def test_without_vision_the_person_is_told_and_the_caption_is_answered(gateway_home: Path,
                                                                            fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat):
        await chat.say("nice, right?", user="u1", attachments=(photo(jpeg(gps=False)),))
        [reply] = await chat.wait_sent(1)
    assert reply.text.startswith("echo: nice, right?")
    assert "cannot see images" in reply.text and "model.vision" in reply.text
    assert image_parts(fake_openai.chat_requests[-1].body) == []


async def test_the_vision_auxiliary_describes_the_image_into_text(gateway_home: Path,
                                                                 fake_openai: FakeOpenAI) -> None:
    def respond(body: dict[str, Any]) -> str:
        if body.get("model") == "eyes":
            return "a red rectangle"
        return echo_last_user_message(body)

    fake_openai.responder = respond
    chat = ChatAdapter()
    config = {"model": {"vision_auxiliary": "eyes"}}
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat, config=config) as gw:
        await chat.say("", user="u1", attachments=(photo(jpeg(800, 600, gps=False), name=None),))
        [reply] = await chat.wait_sent(1)
    aux = [r.body for r in fake_openai.chat_requests if r.body.get("model") == "eyes"]
    assert len(aux) == 1 and len(image_parts(aux[0])) == 1
    main = fake_openai.chat_requests[-1].body
    assert main["model"] == "fake-model" and image_parts(main) == []
    assert "a red rectangle" in main["messages"][-1]["content"]
    assert "a red rectangle" in reply.text
    [stored] = user_contents(gw.db_path)
    assert stored.startswith("[image ") and stored.endswith("800×600] a red rectangle")


async def test_only_the_last_turns_images_go_to_the_model_again(gateway_home: Path,
                                                               fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    config = {**VISION, "media": {"image_history_turns": 2}}
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat, config=config):
        for n, colour in enumerate(((255, 0, 0), (0, 255, 0), (0, 0, 255))):
            img = Image.new("RGB", (64 + n, 64), colour)
            out = io.BytesIO()
            img.save(out, "PNG")
            await chat.say(f"picture {n}", user="u1",
                           attachments=(photo(out.getvalue(), name=f"p{n}.png"),))
            await chat.wait_sent(n + 1)
        await chat.say("which colours did I send?", user="u1")
        await chat.wait_sent(4)
    body = fake_openai.chat_requests[-1].body
    seen = image_parts(body)
    # The first picture's turn is text now; the last two come with their pixels.
    assert [img.size[0] for _, img in seen] == [65, 66]
    assert isinstance(body["messages"][1]["content"], str) and "[image " in body["messages"][1]["content"]


async def test_text_files_are_inlined_and_other_files_described(gateway_home: Path,
                                                               fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    notes = b"# Plan\n- buy milk\n- fix the gateway\n"
    blob = bytes(range(256)) * 40
    files = (
        Attachment(AttachmentKind.DOCUMENT, ref="", name="plan.md", mime="text/markdown", data=notes),
        Attachment(AttachmentKind.DOCUMENT, ref="", name="../../.hermes/.env", mime="application/octet-stream",
                   data=blob),
    )
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat) as gw:
        await chat.say("see attached", user="u1", attachments=files)
        await chat.wait_sent(1)
    [stored] = user_contents(gw.db_path)
    assert "[file plan.md" in stored and "- fix the gateway" in stored
    assert "saved at " + str(gateway_home / "media") in stored
    # The sender's name is a label, never a path: nothing was written outside media storage.
    assert not (gateway_home.parent / ".hermes").exists()
    assert names_in(gateway_home) <= {"media", "state.db", "state.db-wal", "state.db-shm", "config.yaml", ".env",
                                      "state.db.lock", "memories", "skills", "logs", "gateway.sock", "workspace",
                                      "gateway.state.json"}


async def test_bad_files_get_a_clear_reply_and_the_daemon_keeps_serving(gateway_home: Path,
                                                                       fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    truncated = jpeg(1200, 900)[:3000]
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat, config=VISION) as gw:
        # Only a broken image: nothing to answer, the person is told why.
        await chat.say("", user="u1", attachments=(photo(truncated, name="broken.jpg"),))
        [first] = await chat.wait_sent(1)
        assert "broken.jpg" in first.text and "could not" in first.text
        # Too large, by what the platform declared: refused before any download.
        huge = Attachment(AttachmentKind.DOCUMENT, ref="", name="big.iso", size=25 * 2**20, data=b"x")
        await chat.say("and this?", user="u1", attachments=(huge,))
        [_, second] = await chat.wait_sent(2)
        assert second.text.startswith("echo: and this?") and "big.iso" in second.text and "20" in second.text
        # Voice without speech-to-text: how to set it up.
        voice = Attachment(AttachmentKind.VOICE, ref="", mime="audio/ogg", duration=3,
                           data=b"OggS" + bytes(200))
        await chat.say("", user="u2", chat_type=ChatType.DM, attachments=(voice,))
        [third] = await chat.wait_sent(1, chat="u2")
        assert "stt.base_url" in third.text
        await chat.say("still there?", user="u1")
        await chat.wait_sent(3, chat="u1")
    assert chat.to("u1")[-1].text == "echo: still there?"
    assert rows(gw.db_path, "PRAGMA integrity_check") == [("ok",)]


def stt(fake: FakeOpenAI, **extra: Any) -> dict[str, Any]:
    return {"stt": {"base_url": fake.base_url, "api_key": "stt-secret-key", **extra}}


def voice_note(seconds: float = 12.0) -> Attachment:
    return Attachment(AttachmentKind.VOICE, ref="", mime="audio/ogg", duration=seconds,
                      data=b"OggS\x00\x02" + bytes(range(256)) * 8)


async def test_a_voice_note_is_transcribed_stored_with_its_marker_and_answered(gateway_home: Path,
                                                                              fake_openai: FakeOpenAI) -> None:
    fake_openai.transcriptions.reply("remind me to water the plants", duration=12.0)
    fake_openai.transcriptions.reply("remind me to water the plants", duration=5.0)
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat, config=stt(fake_openai)) as gw:
        await chat.say("", user="u1", attachments=(voice_note(),))
        [reply] = await chat.wait_sent(1)
        # In a group the transcript is shown with the answer.
        await chat.say("", user="u2", chat="g1", chat_type=ChatType.GROUP, attachments=(voice_note(5),))
        [group_reply] = await chat.wait_sent(1, chat="g1")
    [request, _] = fake_openai.transcriptions.requests
    assert request.fields["model"] == "whisper-1" and (request.file or b"").startswith(b"OggS")
    assert request.headers["Authorization"] == "Bearer stt-secret-key"
    assert user_contents(gw.db_path)[0] == "[voice 0:12] remind me to water the plants"
    assert reply.text == "echo: [voice 0:12] remind me to water the plants"  # a private chat: no echo
    assert group_reply.text.startswith("🎤 “remind me to water the plants”\n\necho: [voice 0:05]")
    assert rows(gw.db_path, "SELECT kind, description FROM gateway_attachments ORDER BY id")[0] == (
        "voice", "remind me to water the plants")


async def test_a_failed_transcription_is_said_and_the_caption_still_answered(gateway_home: Path,
                                                                            fake_openai: FakeOpenAI) -> None:
    fake_openai.transcriptions.fail(500)
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat, config=stt(fake_openai)):
        await chat.say("listen to this", user="u1", attachments=(voice_note(),))
        [reply] = await chat.wait_sent(1)
    assert reply.text.startswith("echo: listen to this\n\n[voice 0:12] (not transcribed)")
    assert "could not transcribe the voice message" in reply.text
    assert "stt-secret-key" not in reply.text


def stored_files(home: Path) -> list[Path]:
    return [p for p in (home / "media").rglob("*") if p.is_file() and len(p.name) == 64]


async def test_deleting_a_session_deletes_its_files_and_retention_prunes_the_rest(gateway_home: Path,
                                                                                 fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat, config=VISION) as gw:
        await chat.say("one", user="u1", attachments=(photo(jpeg(400, 300, gps=False), name="a.jpg"),))
        await chat.say("two", user="u2", attachments=(photo(jpeg(300, 400, gps=False), name="b.jpg"),))
        await chat.wait_sent(1, chat="u1")
        await chat.wait_sent(1, chat="u2")
        assert len(stored_files(gateway_home)) == 4  # each: the photo as sent and as the model saw it
        [(sid,)] = rows(gw.db_path, "SELECT session_id FROM gateway_attachments WHERE name = 'a.jpg' LIMIT 1")
        await call(gateway_home, "sessions.delete", {"id_or_prefix": sid})
        assert len(stored_files(gateway_home)) == 2
        assert rows(gw.db_path, "SELECT DISTINCT name FROM gateway_attachments") == [("b.jpg",)]
        media = gw.gateway.runtime.services.media
        assert media is not None
        report = await media.pruner.run(now=time.time() + 31 * 86400)  # past media.retention_days
        assert (report.rows, report.files) == (2, 2)
    assert stored_files(gateway_home) == []
    assert rows(gw.db_path, "SELECT COUNT(*) FROM gateway_attachments") == [(0,)]
    # The conversation itself is kept: only its files went.
    assert any("[image " in c for c in user_contents(gw.db_path))


async def test_a_voice_message_is_answered_with_a_voice_note_too(gateway_home: Path,
                                                                fake_openai: FakeOpenAI) -> None:
    fake_openai.transcriptions.reply("what time is it", duration=2.0)
    chat = ChatAdapter()
    config = {**stt(fake_openai), "tts": {"base_url": fake_openai.base_url, "reply_to_voice": True, "voice": "nova"}}
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat, config=config) as gw:
        await chat.say("", user="u1", attachments=(voice_note(2),))
        [reply] = await chat.wait_sent(1)
        for _ in range(100):
            if chat.files:
                break
            await asyncio.sleep(0.02)
    assert reply.text == "echo: [voice 0:02] what time is it"
    [(chat_id, name, audio)] = chat.files
    assert (chat_id, name) == ("u1", "answer.ogg") and audio.startswith(b"OggS")
    [spoken] = fake_openai.speech.requests
    assert spoken.body["input"] == reply.text and spoken.body["voice"] == "nova"
    assert spoken.body["response_format"] == "opus"
    [(files, sent)] = rows(gw.db_path, "SELECT files, files_sent FROM gateway_outbound")
    assert '"kind": "voice"' in files and sent == 1


async def test_a_file_over_the_limit_without_a_declared_size_is_refused(gateway_home: Path,
                                                                     fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    liar = Attachment(AttachmentKind.DOCUMENT, ref="", name="small.log", size=None, data=b"x" * (2 * 2**20))
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat,
                           config={"media": {"max_download_mb": 1}}) as gw:
        await chat.say("read this", user="u1", attachments=(liar,))
        [reply] = await chat.wait_sent(1)
    assert reply.text.startswith("echo: read this")
    assert "small.log (2.0 MB) is too large: the limit is 1.0 MB" in reply.text
    assert stored_files(gateway_home) == [] and rows(gw.db_path, "SELECT COUNT(*) FROM gateway_attachments") == [(0,)]


async def test_an_image_part_of_the_http_api_reaches_a_vision_model(gateway_home: Path,
                                                                   fake_openai: FakeOpenAI) -> None:
    out = io.BytesIO()
    Image.new("RGB", (200, 100), (0, 0, 255)).save(out, "PNG")
    url = "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()
    async with run_gateway(gateway_home, fake_openai.base_url, config=VISION) as gw:
        resp = await gw.http.post("/v1/chat/completions", json={"model": "fake-model", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "colour?"},
                                         {"type": "image_url", "image_url": {"url": url}}]}]})
        assert resp.status_code == 200, resp.text
    [(_, img)] = image_parts(fake_openai.chat_requests[-1].body)
    assert img.size == (200, 100) and img.getpixel((5, 5))[2] > 240  # re-encoded as JPEG
    assert resp.json()["choices"][0]["message"]["content"].startswith("echo: colour?")


async def test_a_photo_alone_for_a_model_without_vision_costs_no_model_call(gateway_home: Path,
                                                                           fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat):
        await chat.say("", user="u1", attachments=(photo(jpeg(640, 480, gps=False)),))
        [reply] = await chat.wait_sent(1)
    assert "cannot see images" in reply.text and not reply.text.startswith("echo")
    assert fake_openai.chat_requests == []
