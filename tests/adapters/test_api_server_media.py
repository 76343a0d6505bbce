"""The HTTP API takes OpenAI content parts: the adapter on its own real server, a real client, and
``Turns`` (in place of the router) holding the message the router would get. Real media bytes
(a PNG from Pillow, a WAV, a PDF from pypdf); every bad part is an OpenAI-style error and reaches
nothing; a remote image is downloaded only when allowed, and never from this machine."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import random
import wave
from collections.abc import AsyncIterator
from ipaddress import ip_network
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from PIL import Image
from pypdf import PdfWriter

from adapters._ssrf import RemoteRefusedError
from adapters.api_server import ApiServerAdapter
from adapters.base import InboundMessage, MediaTooLargeError, MediaUnavailableError
from adapters.media import Attachment, AttachmentKind
from tests.adapters.test_api_server import error_of, rows
from tests.adapters.test_api_server_stream import Turns, answer, serving
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import run_gateway

WAIT = 30.0


def png(size: tuple[int, int] = (8, 6), noise: bool = False) -> bytes:
    # Noise does not compress: the PNG is about as large as its pixels.
    img = Image.frombytes("RGB", size, random.Random(7).randbytes(size[0] * size[1] * 3)) if noise \
        else Image.new("RGB", size, (200, 30, 30))
    out = io.BytesIO()
    img.save(out, "PNG")
    return out.getvalue()


def wav() -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x01" * 800)
    return out.getvalue()


def pdf() -> bytes:
    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def image_part(data: bytes, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{b64(data)}", "detail": "high"}}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


class Api:
    """The adapter serving on 127.0.0.1, a client, and the messages it dispatched."""

    def __init__(self, api: ApiServerAdapter, http: httpx.AsyncClient) -> None:
        self.api, self.http, self.turns = api, http, Turns(api)

    async def post(self, content: Any, messages: list[dict[str, Any]] | None = None) -> httpx.Response:
        body = {"messages": [*(messages or []), {"role": "user", "content": content}], "user": "alice"}
        # ASCII JSON: a lone surrogate goes out as the escape ``\ud800``, as a client's JSON would send it.
        return await self.http.post("/v1/chat/completions", content=json.dumps(body).encode(),
                                    headers={"Content-Type": "application/json"})

    async def taken(self, content: Any, messages: list[dict[str, Any]] | None = None) -> InboundMessage:
        """The message a request with ``content`` dispatched; its request is answered "ok"."""
        request = asyncio.create_task(self.post(content, messages))
        msg = await self.turns.next()
        await self.api.send(answer(msg, "ok"))
        resp = await asyncio.wait_for(request, WAIT)
        assert resp.status_code == 200 and resp.json()["choices"][0]["message"]["content"] == "ok"
        return msg

    async def refused(self, content: Any, status: int = 400) -> dict[str, Any]:
        request = asyncio.create_task(self.post(content))
        taken = asyncio.create_task(self.turns.next())
        await asyncio.wait({request, taken}, timeout=WAIT, return_when=asyncio.FIRST_COMPLETED)
        if taken.done():  # wrongly taken: answered, so the request ends and the check below fails
            await self.api.send(answer(taken.result(), "taken"))
        taken.cancel()
        error = error_of(await asyncio.wait_for(request, WAIT), status)
        assert error["type"] == "invalid_request_error"
        assert self.turns.messages.empty()  # a refused request reaches nothing behind it
        return error


@contextlib.asynccontextmanager
async def api_server(adapter: ApiServerAdapter) -> AsyncIterator[Api]:
    async with serving(adapter) as port, httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
        yield Api(adapter, http)


@pytest.fixture
async def client() -> AsyncIterator[Api]:
    async with api_server(ApiServerAdapter(key=None, model_name="fake-model")) as api:
        yield api


@pytest.fixture
def gateway_home(tmp_path: Path) -> Path:
    return tmp_path / "hermes"


async def test_text_image_audio_and_file_parts_become_text_and_attachments(client: Api) -> None:
    image, audio, doc = png(), wav(), pdf()
    msg = await client.taken([
        text_part("what is on this"),
        image_part(image),
        {"type": "input_audio", "input_audio": {"data": b64(audio), "format": "wav"}},
        text_part("and this?"),
        {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{b64(doc)}", "filename": "plan.pdf"}},
        {"type": "input_audio", "input_audio": {"data": b64(b"ID3\x03fake mp3"), "format": "mp3"}},
    ])
    assert msg.text == "what is on this\nand this?"
    assert msg.attachments == (
        Attachment(AttachmentKind.IMAGE, "", mime="image/png", size=len(image), data=image),
        Attachment(AttachmentKind.VOICE, "", mime="audio/wav", size=len(audio), data=audio),
        Attachment(AttachmentKind.DOCUMENT, "", name="plan.pdf", mime="application/pdf", size=len(doc), data=doc),
        Attachment(AttachmentKind.VOICE, "", mime="audio/mpeg", size=len(b"ID3\x03fake mp3"),
                   data=b"ID3\x03fake mp3"),
    )
    # The adapter hands the inline bytes over as they came, within the gateway's limit.
    got = b"".join([chunk async for chunk in client.api.fetch(msg.attachments[0], limit=len(image))])
    assert got == image
    with pytest.raises(MediaTooLargeError):
        async for _ in client.api.fetch(msg.attachments[0], limit=len(image) - 1):
            pass


async def test_an_image_alone_and_plain_text_are_both_messages(client: Api) -> None:
    image = png()
    alone = await client.taken([image_part(image)])
    assert alone.text == "" and [a.data for a in alone.attachments] == [image]
    # The bare-string form some clients send for image_url, and base64 wrapped in lines.
    wrapped = "\n".join(b64(image)[i:i + 76] for i in range(0, len(b64(image)), 76))
    bare = await client.taken([{"type": "image_url", "image_url": f"data:image/png;base64,{wrapped}"}])
    assert [a.data for a in bare.attachments] == [image]
    plain = await client.taken("just text")
    assert (plain.text, plain.attachments) == ("just text", ())


async def test_a_file_name_is_kept_as_a_label_never_a_path(client: Api, tmp_path: Path) -> None:
    msg = await client.taken([{"type": "file", "file": {"file_data": f"data:text/plain;base64,{b64(b'KEY=1')}",
                                                        "filename": "../../.hermes/.env"}}])
    assert msg.attachments[0].name == "../../.hermes/.env" and msg.attachments[0].data == b"KEY=1"
    assert msg.attachments[0].ref == ""  # nothing was written anywhere: the bytes ride on the message


async def test_media_in_earlier_messages_is_not_read(client: Api) -> None:
    """The gateway keeps the history: earlier messages are skipped whole, even a broken image there."""
    history = [
        {"role": "user", "content": [text_part("old"), {"type": "image_url", "image_url": {"url": "data:x"}}]},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
    ]
    msg = await client.taken([text_part("new question")], history)
    assert (msg.text, msg.attachments) == ("new question", ())


async def test_a_large_body_is_read_off_the_loop_the_same() -> None:
    image = png((400, 300), noise=True)
    assert len(image) > 300_000  # past the size that moves decoding to a thread
    async with api_server(ApiServerAdapter(key=None, model_name="fake-model", max_body_bytes=4 << 20)) as client:
        msg = await client.taken([text_part("big"), image_part(image)])
        assert msg.attachments[0].data == image
        error = await client.refused([text_part("big"), image_part(image, "text/html")])
        assert error["code"] == "invalid_media"


NOT_BASE64 = "data:image/png;base64,iVBORw0KGgo@@@!"


@pytest.mark.parametrize(("content", "code", "param", "words"), [
    ([{"type": "image_url", "image_url": {"url": NOT_BASE64}}],
     "invalid_media", "messages[0].content[0].image_url.url", "not valid base64"),
    ([{"type": "image_url", "image_url": {"url": "data:image/png;base64,"}}], "invalid_media", None, "base64 text"),
    ([{"type": "image_url", "image_url": {"url": "data:image/png,rawbytes"}}], "invalid_media", None,
     "base64 data URL"),
    ([image_part(b"<b>hi</b>", "text/html")], "invalid_media", None, "data URL of type text/html"),
    ([{"type": "image_url", "image_url": {"url": f"data:;base64,{b64(b'abc')}"}}], "invalid_media", None,
     "of type none"),
    ([{"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}], "invalid_media", None,
     "data URL (data:image/png;base64,...) or an http(s) URL"),
    ([{"type": "image_url", "image_url": {}}], "invalid_content", None, "must be a data URL"),
    ([{"type": "image_url", "image_url": 42}], "invalid_content", None, "must be an object"),
    ([{"type": "video_url", "video_url": {"url": "x"}}], "invalid_content", "messages[0].content[0].type",
     "of type 'video_url'; this API takes 'text', 'image_url', 'input_audio' or 'file'"),
    ([{"text": "no type"}], "invalid_content", None, "without a string 'type'"),
    (["a bare string"], "invalid_content", None, "without a string 'type'"),
    ([{"type": "text", "text": 5}], "invalid_content", "messages[0].content[0].text", "must be a string"),
    ({"type": "text", "text": "parts in an object"}, "invalid_content", "messages[0].content",
     "must be a string or a list of content parts"),
    (None, "invalid_content", None, "must be a string or a list of content parts"),
    ([{"type": "input_audio", "input_audio": {"data": b64(b"x"), "format": "ogg"}}], "invalid_media", None,
     "'wav' or 'mp3'"),
    ([{"type": "input_audio", "input_audio": {"data": f"data:audio/wav;base64,{b64(b'x')}", "format": "wav"}}],
     "invalid_media", None, "without a data: prefix"),
    ([{"type": "input_audio", "input_audio": {"data": "é" * 8, "format": "wav"}}], "invalid_media", None,
     "not valid base64"),
    ([{"type": "file", "file": {"file_id": "file-abc"}}], "invalid_content", None, "no Files API"),
    ([{"type": "file", "file": {"file_data": b64(b"raw")}}], "invalid_media", None, "must be a data URL"),
    ([{"type": "file", "file": {"file_data": f"data:not a type;base64,{b64(b'x')}"}}], "invalid_media", None,
     "names no media type"),
    ([{"type": "file", "file": {"file_data": f"data:text/plain;base64,{b64(b'x')}", "filename": "a\nb"}}],
     "invalid_content", "messages[0].content[0].file.filename", "filename must be text"),
    ([{"type": "file", "file": {"file_data": f"data:text/plain;base64,{b64(b'x')}", "filename": "\ud800.txt"}}],
     "invalid_content", None, "filename must be text"),
    ([image_part(png())] * 11, "too_many_media", "messages[0].content[10]", "at most 10"),
    ([], "empty_message", "messages[0].content", "is empty"),
    ([text_part("  "), text_part("")], "empty_message", None, "is empty"),
    ("", "empty_message", None, "is empty"),
])
async def test_bad_parts_are_400s_that_say_what_is_wrong(client: Api, content: Any, code: str, param: str | None,
                                                         words: str) -> None:
    error = await client.refused(content)
    assert error["code"] == code and words in error["message"], error
    if param is not None:
        assert error["param"] == param


async def test_a_remote_image_is_refused_by_default_naming_the_setting(client: Api) -> None:
    error = await client.refused([text_part("see"), {"type": "image_url",
                                                    "image_url": {"url": "https://example.com/cat.png"}}])
    assert error["code"] == "remote_media_disabled"
    assert "platforms.api_server.allow_remote_media: true" in error["message"]


async def test_a_part_over_the_media_cap_is_a_413_with_the_limit() -> None:
    async with api_server(ApiServerAdapter(key=None, model_name="fake-model", max_media_bytes=1000)) as client:
        assert (await client.taken([image_part(b"\x89PNG" + b"\0" * 996)])).attachments[0].size == 1000
        error = await client.refused([image_part(b"\x89PNG" + b"\0" * 997)], 413)
        assert error["code"] == "media_too_large"
        assert "at most 1000 bytes (platforms.api_server.max_media_bytes)" in error["message"]
        # Far over: refused by the base64's length, before anything is decoded.
        error = await client.refused([{"type": "input_audio", "input_audio": {"data": "A" * 40_000,
                                                                              "format": "wav"}}], 413)
        assert error["code"] == "media_too_large"


async def test_a_body_over_the_cap_is_a_413_naming_the_setting() -> None:
    async with api_server(ApiServerAdapter(key=None, model_name="fake-model", max_body_bytes=4096)) as client:
        error = await client.refused([image_part(png((64, 64), noise=True))], 413)
        assert error["code"] == "request_too_large" and "platforms.api_server.max_request_bytes" in error["message"]


async def test_json_nested_too_deep_is_a_400_not_a_500(client: Api) -> None:
    resp = await client.http.post("/v1/chat/completions", content=b"[" * 200_000 + b"]" * 200_000)
    assert error_of(resp, 400)["code"] == "invalid_json"


# ------------------------------------------------------------------ remote images, where allowed


async def test_an_allowed_remote_image_is_fetched_from_public_addresses_only() -> None:
    image = png()
    hits: list[str] = []

    async def serve_image(request: web.Request) -> web.StreamResponse:
        hits.append(request.path)
        return web.Response(body=image, content_type="image/png")

    app = web.Application()
    app.router.add_get("/cat.png", serve_image)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/cat.png"
    try:
        async with api_server(ApiServerAdapter(key=None, model_name="fake-model", allow_remote_media=True)) as client:
            msg = await client.taken([text_part("see"), {"type": "image_url", "image_url": {"url": url}}])
            assert msg.attachments == (Attachment(AttachmentKind.IMAGE, url),)
            # The server is this machine: refused, and never asked.
            with pytest.raises(RemoteRefusedError):
                async for _ in client.api.fetch(msg.attachments[0], limit=1 << 20):
                    pass
            assert hits == []
        # A test that lets 127.0.0.1 count as public sees the same attachment downloaded.
        allowing = ApiServerAdapter(key=None, model_name="fake-model", allow_remote_media=True,
                                    remote_allow_networks=[ip_network("127.0.0.1/32")])
        got = b"".join([chunk async for chunk in allowing.fetch(msg.attachments[0], limit=1 << 20)])
        assert got == image and hits == ["/cat.png"]
        # With remote media off, an attachment with a URL is never downloaded.
        off = ApiServerAdapter(key=None, model_name="fake-model", remote_allow_networks=[ip_network("127.0.0.1/32")])
        with pytest.raises(MediaUnavailableError) as err:
            async for _ in off.fetch(msg.attachments[0], limit=1 << 20):
                pass
        assert "allow_remote_media" in str(err.value) and hits == ["/cat.png"]
    finally:
        await runner.cleanup()


async def test_the_daemon_takes_its_settings_from_config(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    config = {"platforms": {"api_server": {"max_media_bytes": 1024}}}
    async with run_gateway(gateway_home, fake_openai.base_url, config=config) as run:
        def post(content: Any) -> Any:
            body = {"model": "fake-model", "messages": [{"role": "user", "content": content}], "user": "alice"}
            return run.http.post("/v1/chat/completions", json=body)

        too_big = error_of(await post([text_part("hi"), image_part(b"\0" * 2000)]), 413)
        assert too_big["code"] == "media_too_large" and "1024" in too_big["message"]
        remote = error_of(await post([{"type": "image_url", "image_url": {"url": "http://10.0.0.1/a.png"}}]), 400)
        assert remote["code"] == "remote_media_disabled"
        assert rows(run.db_path, "SELECT count(*) FROM messages") == [(0,)]
    assert fake_openai.chat_requests == []


async def test_the_daemon_takes_a_remote_image_when_allowed(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    config = {"platforms": {"api_server": {"allow_remote_media": True}}}
    async with run_gateway(gateway_home, fake_openai.base_url, config=config) as run:
        body = {"model": "fake-model", "user": "alice", "messages": [{"role": "user", "content": [
            text_part("see"), {"type": "image_url", "image_url": {"url": "http://10.255.255.1/a.png"}}]}]}
        resp = await run.http.post("/v1/chat/completions", json=body)
        # Taken (what the gateway then makes of an image it may not download is its own answer).
        assert resp.status_code == 200 or resp.json()["error"]["code"] != "remote_media_disabled", resp.text
