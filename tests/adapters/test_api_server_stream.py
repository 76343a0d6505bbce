"""The HTTP API's real SSE: ``ApiServerAdapter.open_stream`` on the daemon's own HTTP server, read
by a real client byte by byte. Through the real router and a slowly writing model first; then the
stream on its own, where ``Turns`` below takes each request in place of the router and drives the
stream the way the gateway's driver does, so each case can be provoked exactly."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from adapters.api_server import ApiServerAdapter
from adapters.base import (
    Disposition,
    InboundMessage,
    OutboundMessage,
    ReplyError,
    ReplyStream,
    SendKind,
    TokenUsage,
)
from tests.adapters.test_api_server import rows, until_model_called
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import Running, free_port, run_gateway

WAIT = 30.0
DONE = "[DONE]"


class SseClient:
    """One ``stream: true`` request, read as the bytes arrive; every event is queued as it comes."""

    def __init__(self, http: httpx.AsyncClient, text: str = "hi", **extra: Any) -> None:
        self.body = {"model": "fake-model", "messages": [{"role": "user", "content": text}], "user": "alice",
                     "stream": True, **extra}
        self.events: asyncio.Queue[Any] = asyncio.Queue()
        self.all: list[Any] = []
        self.raw = b""
        self.status: int | None = None
        self.headers: httpx.Headers | None = None
        self._http = http
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async with self._http.stream("POST", "/v1/chat/completions", json=self.body) as resp:
            self.status, self.headers = resp.status_code, resp.headers
            if resp.headers.get("Content-Type") != "text/event-stream":
                self.raw = await resp.aread()
                return
            buf = b""
            async for chunk in resp.aiter_raw():
                self.raw += chunk
                buf += chunk
                while b"\n\n" in buf:
                    frame, buf = buf.split(b"\n\n", 1)
                    assert frame.startswith(b"data: "), frame
                    data = frame[6:].decode()
                    event = DONE if data == DONE else json.loads(data)
                    self.all.append(event)
                    self.events.put_nowait(event)
            assert buf == b"", buf

    async def next(self) -> Any:
        return await asyncio.wait_for(self.events.get(), WAIT)

    async def done(self) -> list[Any]:
        await asyncio.wait_for(self.task, WAIT)
        return self.all


def chunks(events: list[Any]) -> list[dict[str, Any]]:
    return [e for e in events if isinstance(e, dict) and e.get("object") == "chat.completion.chunk"]


def assembled(events: list[Any]) -> str:
    return "".join(c["choices"][0]["delta"].get("content", "") for c in chunks(events) if c["choices"])


class Turns:
    """Takes each request in place of the router and hands the test its stream."""

    def __init__(self, api: ApiServerAdapter) -> None:
        self.api = api
        self.messages: asyncio.Queue[InboundMessage] = asyncio.Queue()
        api.bind(self._take)

    async def _take(self, msg: InboundMessage) -> Disposition:
        self.messages.put_nowait(msg)
        return Disposition.ACCEPTED

    async def next(self) -> InboundMessage:
        return await asyncio.wait_for(self.messages.get(), WAIT)

    def open(self, msg: InboundMessage) -> ReplyStream | None:
        return self.api.open_stream(OutboundMessage(msg.platform, msg.chat_id, "", reply_to=msg.message_id))

    async def stream(self) -> tuple[InboundMessage, ReplyStream]:
        msg = await self.next()
        stream = self.open(msg)
        assert stream is not None and not stream.throttled
        return msg, stream


def answer(msg: InboundMessage, text: str, **extra: Any) -> OutboundMessage:
    return OutboundMessage(msg.platform, msg.chat_id, text, reply_to=msg.message_id, **extra)


def api_of(run: Running) -> ApiServerAdapter:
    assert run.gateway.services is not None
    api = run.gateway.services.adapters["api-server"]
    assert isinstance(api, ApiServerAdapter)
    return api


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[Running]:
    async with run_gateway(tmp_path / "hermes", None) as run:
        yield run


async def test_each_update_is_one_chunk_sent_at_once_and_finish_ends_the_stream(daemon: Running) -> None:
    turns = Turns(api_of(daemon))
    client = SseClient(daemon.http, stream_options={"include_usage": True})
    msg, stream = await turns.stream()
    await stream.update("Hel")
    first = await client.next()  # the headers and the first chunk are out before the next update
    assert client.status == 200 and client.headers is not None
    assert client.headers["Content-Type"] == "text/event-stream"
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": "Hel"}
    for text, delta in (("Hello", "lo"), ("Hello, wor", ", wor")):
        await stream.update(text)
        assert (await client.next())["choices"][0]["delta"] == {"content": delta}
    result = await stream.finish(answer(msg, "Hello, world!", usage=TokenUsage(7, 5)))
    assert result.message_ids == (msg.message_id,)
    events = await client.done()
    assert events[-1] == DONE and events.count(DONE) == 1
    last_text, final, usage = chunks(events)[-3:]
    assert last_text["choices"][0]["delta"] == {"content": "ld!"} and last_text["choices"][0]["finish_reason"] is None
    assert final["choices"] == [{"index": 0, "delta": {}, "finish_reason": "stop"}]
    assert usage["choices"] == [] and usage["usage"] == {"prompt_tokens": 7, "completion_tokens": 5,
                                                         "total_tokens": 12}
    served = (await daemon.http.get("/v1/models")).json()["data"][0]["id"]
    assert {(c["id"], c["created"], c["model"]) for c in chunks(events)} == {(first["id"], first["created"], served)}
    assert assembled(events) == "Hello, world!"
    # The handler wrote nothing after the stream: the response is exactly these events.
    assert client.raw == b"".join(b"data: " + (e.encode() if e == DONE else json.dumps(e, ensure_ascii=False)
                                               .encode()) + b"\n\n" for e in events)


async def test_driven_like_the_gateway_the_client_assembles_the_final_text(daemon: Running) -> None:
    """Many updates, a model call's preamble dropped (the text shrinks), more updates, finish."""
    turns = Turns(api_of(daemon))
    client = SseClient(daemon.http)
    msg, stream = await turns.stream()
    preamble = "Let me look that up in my notes"
    for end in [*range(1, len(preamble), 4), len(preamble)]:
        await stream.update(preamble[:end])
    await stream.update("")  # the call asked for tools: its text is dropped
    final = " ".join(f"word{i}" for i in range(60))
    for end in range(1, len(final), 7):
        await stream.update(final[:end])
    await stream.finish(answer(msg, final))
    events = await client.done()
    shown = assembled(events)
    assert shown == f"{preamble}\n\n{final}"  # SSE cannot take text back: a blank line, then the answer
    assert len(chunks(events)) > 50 and chunks(events)[-1]["choices"][0]["finish_reason"] == "stop"


async def test_an_error_after_the_stream_began_is_an_error_event(daemon: Running) -> None:
    turns = Turns(api_of(daemon))
    client = SseClient(daemon.http, stream_options={"include_usage": True})
    msg, stream = await turns.stream()
    await stream.update("The first half")
    await stream.finish(answer(msg, "⚠️ The model failed.", kind=SendKind.NOTICE,
                               error=ReplyError(502, "server_error", "upstream_error")))
    events = await client.done()
    assert client.status == 200 and assembled(events) == "The first half"
    assert events[-2:] == [{"error": {"message": "The model failed.", "type": "server_error", "param": None,
                                      "code": "upstream_error"}}, DONE]
    assert not [c for c in chunks(events) if c["choices"] and c["choices"][0]["finish_reason"]]


async def test_before_any_text_an_error_is_still_an_http_status(daemon: Running) -> None:
    turns = Turns(api_of(daemon))
    client = SseClient(daemon.http)
    msg, stream = await turns.stream()
    await stream.finish(answer(msg, "⚠️ Too many requests.", kind=SendKind.NOTICE,
                               error=ReplyError(429, "rate_limit_error", "rate_limit_exceeded", 7)))
    await client.done()
    assert client.status == 429 and client.headers is not None and client.headers["Retry-After"] == "7"
    assert json.loads(client.raw)["error"]["code"] == "rate_limit_exceeded"


async def test_a_stream_that_never_showed_text_answers_in_one_chunk(daemon: Running) -> None:
    turns = Turns(api_of(daemon))
    client = SseClient(daemon.http)
    msg, stream = await turns.stream()
    await stream.update("")
    await stream.finish(answer(msg, "short"))
    events = await client.done()
    assert assembled(events) == "short" and events[-1] == DONE and len(chunks(events)) == 2


async def test_an_answer_sent_around_a_begun_stream_ends_it_once(daemon: Running) -> None:
    """The gateway sends anew when a stream fails: the request's stream ends with it, once."""
    api = api_of(daemon)
    turns = Turns(api)
    client = SseClient(daemon.http)
    msg, stream = await turns.stream()
    await stream.update("partial")
    await client.next()
    await api.send(answer(msg, "partial and whole"))
    events = await client.done()
    assert assembled(events) == "partial and whole" and events.count(DONE) == 1
    await stream.finish(answer(msg, "partial and whole"))  # too late: nothing more is written
    assert client.raw.count(b"[DONE]") == 1


async def test_no_stream_without_stream_true_or_with_streaming_off(daemon: Running, tmp_path: Path) -> None:
    turns = Turns(api_of(daemon))
    plain = asyncio.create_task(daemon.ask("no stream asked"))
    msg = await turns.next()
    assert turns.open(msg) is None
    await api_of(daemon).send(answer(msg, "whole"))
    assert (await plain).json()["choices"][0]["message"]["content"] == "whole"
    config = {"platforms": {"api_server": {"port": free_port(), "streaming": False}}}
    async with run_gateway(tmp_path / "off", None, config=config) as run:
        turns = Turns(api_of(run))
        client = SseClient(run.http)
        msg = await turns.next()
        assert turns.open(msg) is None
        await api_of(run).send(answer(msg, "all at once"))
        events = await client.done()
        assert assembled(events) == "all at once" and len(chunks(events)) == 2


async def test_a_client_that_leaves_mid_stream_costs_the_turn_nothing(daemon: Running) -> None:
    assert daemon.gateway.http_server is not None
    server = daemon.gateway.http_server
    turns = Turns(api_of(daemon))
    async with httpx.AsyncClient(base_url=str(daemon.http.base_url), timeout=WAIT) as own:
        client = SseClient(own)
        msg, stream = await turns.stream()
        await stream.update("one")
        await client.next()
        client.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await client.task
    async with asyncio.timeout(WAIT):  # the daemon saw the connection go
        while server.connections:
            await asyncio.sleep(0.02)
    for text in ("one two", "one two three", "one two three four"):
        await stream.update(text)  # quietly written nowhere
    assert (await stream.finish(answer(msg, "one two three four five"))).message_ids == (msg.message_id,)
    # The daemon goes on serving.
    again = SseClient(daemon.http)
    msg, stream = await turns.stream()
    await stream.update("still here")
    await stream.finish(answer(msg, "still here"))
    assert assembled(await again.done()) == "still here"


async def test_a_request_left_mid_turn_has_its_answer_stored(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    """Through the real router and model: the client leaves while the model writes; the turn ends."""
    hold = fake_openai.hold_when(lambda body: True)
    async with run_gateway(tmp_path / "hermes", fake_openai.base_url) as run:
        async with httpx.AsyncClient(base_url=str(run.http.base_url), timeout=WAIT) as own:
            client = SseClient(own, "a question left behind")
            await until_model_called(fake_openai)
            client.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await client.task
        hold.release.set()
        async with asyncio.timeout(WAIT):
            while not rows(run.db_path, "SELECT 1 FROM messages WHERE role = 'assistant'"):
                await asyncio.sleep(0.02)
    assert rows(run.db_path, "SELECT role, content FROM messages ORDER BY id") == [
        ("user", "a question left behind"), ("assistant", "echo: a question left behind")]


async def test_a_slow_answer_arrives_as_chunks_and_the_client_assembles_the_stored_text(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    answer_text = " ".join(f"word{i}" for i in range(40)) + " done."
    fake_openai.tokens_per_second = 40
    fake_openai.reply(answer_text, usage={"prompt_tokens": 7, "completion_tokens": 41, "total_tokens": 48})
    async with run_gateway(tmp_path / "hermes", fake_openai.base_url) as run:
        client = SseClient(run.http, "a long one", stream_options={"include_usage": True})
        events = await client.done()
    parts = [c for c in chunks(events) if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert len(parts) >= 3
    assert assembled(events) == answer_text
    assert [c["choices"][0]["finish_reason"] for c in chunks(events) if c["choices"]][-1] == "stop"
    usage = [c["usage"] for c in chunks(events) if not c["choices"]]
    assert usage and usage[-1]["completion_tokens"] == 41
    assert events[-1] == DONE
    assert rows(run.db_path, "SELECT content FROM messages WHERE role = 'assistant'") == [(answer_text,)]


async def test_a_client_gone_mid_stream_leaves_the_answer_stored_whole(tmp_path: Path,
                                                                      fake_openai: FakeOpenAI) -> None:
    answer_text = " ".join(f"word{i}" for i in range(60)) + " done."
    fake_openai.tokens_per_second = 40
    fake_openai.reply(answer_text)
    async with run_gateway(tmp_path / "hermes", fake_openai.base_url) as run:
        async with httpx.AsyncClient(base_url=str(run.http.base_url), timeout=WAIT) as own:
            client = SseClient(own, "leaving early")
            await client.next()
            await client.next()
            client.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await client.task
        async with asyncio.timeout(WAIT):
            while not rows(run.db_path, "SELECT 1 FROM messages WHERE role = 'assistant'"):
                await asyncio.sleep(0.02)
        assert rows(run.db_path, "SELECT content, finish_reason FROM messages WHERE role = 'assistant'") == [
            (answer_text, "stop")]


# ------------------------------------------------------------------ the adapter on its own server


@contextlib.asynccontextmanager
async def serving(api: ApiServerAdapter) -> AsyncIterator[int]:
    app = web.Application()
    api.add_routes(app)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    connected = asyncio.create_task(api.connect())
    try:
        yield runner.addresses[0][1]
    finally:
        await api.disconnect()
        await connected
        await runner.cleanup()


async def test_a_shutdown_mid_stream_ends_it_with_an_error_event() -> None:
    api = ApiServerAdapter(key=None, model_name="fake-model")
    turns = Turns(api)
    async with serving(api) as port, httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as http:
        client = SseClient(http)
        msg, stream = await turns.stream()
        await stream.update("so far")
        await client.next()
        await api.disconnect()
        events = await client.done()
        assert assembled(events) == "so far"
        assert events[-2]["error"]["code"] == "shutting_down" and events[-1] == DONE
        await stream.finish(answer(msg, "so far, and more"))  # the turn's end finds the stream over
    assert events == client.all


async def test_a_client_that_stops_reading_does_not_hold_the_stream() -> None:
    """Updates that the client never reads fill the socket; past ``write_timeout`` the stream gives
    the client up instead of waiting on it (which would hold the turn's end forever)."""
    api = ApiServerAdapter(key=None, model_name="fake-model", write_timeout=0.2)
    turns = Turns(api)
    async with serving(api) as port:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # small and fixed: fills soon
        sock.connect(("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock)
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "stream": True}).encode()
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        await writer.drain()
        msg, stream = await turns.stream()
        piece = "x" * 256_000
        for n in range(1, 33):  # far more than the socket buffers hold
            await stream.update(piece * n)
        text = piece * 33
        await stream.finish(answer(msg, text))
        assert await asyncio.wait_for(reader.read(), WAIT) != b""  # the server closed the connection
        writer.close()
