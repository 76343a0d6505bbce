"""The aiohttp request layer under python-telegram-bot, against real servers on 127.0.0.1.

Everything above it is PTB's own code, so it must send what PTB's httpx layer
sends (form fields, multipart with files) and raise the errors PTB and our
adapter act on.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from aiohttp import web
from telegram import Bot, InputFile
from telegram.error import NetworkError, TimedOut
from telegram.request import RequestData
from telegram.request._requestparameter import RequestParameter

from adapters.telegram._outbound import _never_sent
from adapters.telegram._request import AiohttpRequest

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def test_form_fields_go_out_as_ptb_encodes_them() -> None:
    seen: dict[str, object] = {}

    async def handler(request: web.Request) -> web.Response:
        if request.path.endswith("/getMe"):
            return web.json_response({"ok": True, "result": {"id": 1, "is_bot": True, "first_name": "b",
                                                             "username": "b_bot"}})
        seen["type"] = request.content_type
        seen["form"] = dict(await request.post())
        seen["ua"] = request.headers["User-Agent"]
        return web.json_response({"ok": True, "result": {"message_id": 7, "date": 0,
                                                         "chat": {"id": 42, "type": "private"}, "text": "hé"}})

    async with serve(handler) as base:
        bot = Bot("123:abc", base_url=f"{base}/bot", request=AiohttpRequest(connection_pool_size=2))
        async with bot:
            message = await bot.send_message(42, "hé", reply_parameters=None, disable_notification=True)
    assert message.message_id == 7
    assert seen["type"] == "application/x-www-form-urlencoded"
    assert seen["form"] == {"chat_id": "42", "text": "hé", "disable_notification": "true"}
    assert str(seen["ua"]).startswith("python-telegram-bot")


async def test_files_go_out_as_multipart() -> None:
    seen: dict[str, object] = {}

    async def handler(request: web.Request) -> web.Response:
        form = await request.post()
        doc = form["document"]
        assert isinstance(doc, web.FileField)
        seen.update(type=request.content_type, chat_id=form["chat_id"], name=doc.filename, body=doc.file.read())
        return web.json_response({"ok": True, "result": True})

    data = RequestData([
        RequestParameter.from_input("chat_id", 42),
        RequestParameter.from_input("document", InputFile(io.BytesIO(b"\x00binary\xff"), filename="a.bin")),
    ])
    request = AiohttpRequest(connection_pool_size=1)
    async with serve(handler) as base:
        async with request:
            status, _ = await request.do_request(f"{base}/bot123:abc/sendDocument", "POST", data)
    assert status == 200
    assert seen == {"type": "multipart/form-data", "chat_id": "42", "name": "a.bin", "body": b"\x00binary\xff"}


async def test_a_refused_connection_is_a_network_error_known_never_sent() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response()

    async with serve(handler) as base:
        pass  # closed: nothing listens on that port any more
    request = AiohttpRequest(connection_pool_size=1)
    async with request:
        with pytest.raises(NetworkError) as caught:
            await request.do_request(f"{base}/bot123:abc/getMe", "POST")
    assert not isinstance(caught.value, TimedOut)
    assert _never_sent(caught.value)


async def test_a_silent_server_is_timed_out_and_maybe_sent() -> None:
    release = asyncio.Event()

    async def handler(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response()

    request = AiohttpRequest(connection_pool_size=1, read_timeout=0.3)
    async with serve(handler) as base:
        async with request:
            with pytest.raises(TimedOut) as caught:
                await request.do_request(f"{base}/bot123:abc/sendMessage", "POST")
        release.set()
    assert not _never_sent(caught.value)  # it reached the server: a retry could duplicate it


async def test_requests_need_initialize_and_work_again_after_shutdown() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "result": True})

    request = AiohttpRequest(connection_pool_size=1)
    async with serve(handler) as base:
        with pytest.raises(RuntimeError, match="not initialized"):
            await request.do_request(f"{base}/x", "POST")
        for _ in range(2):  # PTB shuts the layer down on a reconnect and initializes it again
            async with request:
                assert (await request.do_request(f"{base}/x", "POST"))[0] == 200
