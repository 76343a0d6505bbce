"""``ModelClient.chat`` with a listener: the answer streamed from FakeOpenAI over HTTP, assembled
into the ChatResult an unstreamed call returns.

No assertion is about elapsed time: a slow stream is made far slower than the budget that
must cut it, and the tests look at what the server saw (the stream ended, by the client).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import pytest

from core import (
    ChatResult,
    ModelClient,
    ModelContextLengthError,
    ModelSettings,
    ModelTimeoutError,
    ModelUnavailableError,
    Usage,
)
from core._budget import turn_budget
from gateway.daemon.transport import AiohttpTransport
from tests.fakes import FakeOpenAI

from ._listener import RecordingListener

HELLO = [{"role": "user", "content": "hello there"}]
FAST = ModelSettings(model="test-model", backoff_base=0.001, backoff_max=0.01, timeout=60)
LONG = " ".join(f"word{i}" for i in range(200))
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
         "prompt_tokens_details": {"cached_tokens": 3}}

MakeClient = Callable[..., ModelClient]


@pytest.fixture
async def make_client(fake_openai: FakeOpenAI) -> AsyncIterator[MakeClient]:
    clients: list[ModelClient] = []

    def make(transport: AiohttpTransport | None = None, **overrides: Any) -> ModelClient:
        client = ModelClient(replace(FAST, base_url=fake_openai.base_url, **overrides), transport=transport)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


def _same(a: ChatResult, b: ChatResult) -> None:
    assert a.message == b.message
    assert (a.finish_reason, a.usage, a.model, a.cut_at) == (b.finish_reason, b.usage, b.model, b.cut_at)


# ------------------------------------------------------------------ assembly


async def test_streamed_text_assembles_to_the_unstreamed_message(fake_openai: FakeOpenAI,
                                                                 make_client: MakeClient) -> None:
    client = make_client()
    for _ in range(2):
        fake_openai.reply("Hello! Here is a longer answer, with ünïcode 🎉 too.", usage=USAGE,
                          reasoning_content="first I think, then I answer")
    whole = await client.chat(HELLO)
    listener = RecordingListener()
    streamed = await client.chat(HELLO, listener=listener)

    _same(streamed, whole)
    assert streamed.usage == Usage(input_tokens=11, output_tokens=7, cache_read_tokens=3)
    # The deltas came one by one, in order, and join to the answer; reasoning is not shown.
    assert len(listener.deltas) > 5 and "".join(listener.deltas) == whole.content
    assert listener.kinds == ["text"]
    plain, asked = (r.body for r in fake_openai.chat_requests)
    assert "stream" not in plain and "stream_options" not in plain
    assert asked["stream"] is True and asked["stream_options"] == {"include_usage": True}
    assert fake_openai.chat_requests[1].headers["Accept"] == "text/event-stream"
    assert fake_openai.streams[0].outcome == "done"


async def test_streamed_tool_calls_assemble_to_the_unstreamed_message(fake_openai: FakeOpenAI,
                                                                      make_client: MakeClient) -> None:
    client = make_client()
    calls = [{"name": "memory", "arguments": {"action": "add", "content": "likes long arguments " * 4}},
             {"id": "call_given", "name": "echo", "arguments": {"text": "two"}}]
    for _ in range(2):
        fake_openai.reply_tool_calls(calls, content="Let me look that up.")
        fake_openai.reply_tool_calls(calls)
    whole_with_text, whole = await client.chat(HELLO), await client.chat(HELLO)
    listener = RecordingListener()
    streamed_with_text = await client.chat(HELLO, listener=listener)
    streamed = await client.chat(HELLO, listener=listener)

    _same(streamed_with_text, whole_with_text)
    _same(streamed, whole)
    assert whole.message["content"] is None and whole.finish_reason == "tool_calls"
    assert [c["id"] for c in streamed.tool_calls] == ["call_0_memory", "call_given"]
    assert "".join(listener.deltas) == "Let me look that up."  # tool calls are not text


async def test_without_model_stream_a_listener_gets_the_answer_whole(fake_openai: FakeOpenAI,
                                                                     make_client: MakeClient) -> None:
    fake_openai.reply("not streamed")
    listener = RecordingListener()
    result = await make_client(stream=False).chat(HELLO, listener=listener)
    assert result.content == "not streamed" and listener.events == []
    assert "stream" not in fake_openai.chat_requests[0].body and not fake_openai.streams


async def test_a_server_that_ignores_stream_is_read_as_json(fake_openai: FakeOpenAI,
                                                            make_client: MakeClient) -> None:
    client = make_client()
    fake_openai.reply("plain JSON answer", usage=USAGE).reply("plain JSON answer", usage=USAGE)
    whole = await client.chat(HELLO)
    fake_openai.ignore_stream = True
    listener = RecordingListener()
    result = await client.chat(HELLO, listener=listener)
    _same(result, whole)
    assert fake_openai.chat_requests[1].body["stream"] is True and not fake_openai.streams
    assert listener.events == []  # the caller shows the answer it gets back


async def test_a_long_stream_is_cut_at_max_response_bytes(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    cap = 64 * 2**10
    text = " ".join(("x" * 999) for _ in range(100))  # 100 KB in 100 tokens
    fake_openai.reply(text)
    listener = RecordingListener()
    result = await make_client(max_response_bytes=cap).chat(HELLO, listener=listener)
    assert result.cut_at == cap
    assert result.content is not None and len(result.content) == cap and text.startswith(result.content)
    assert "".join(listener.deltas) == result.content


async def test_a_stream_is_timed_per_read_not_as_a_whole(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    """An answer written slowly takes longer than ``model.timeout`` in all; each read waits far less."""
    fake_openai.tokens_per_second = 40
    fake_openai.reply(" ".join(f"w{i}" for i in range(60)))  # 1.5 s at 40 tokens a second
    result = await make_client(timeout=1.0, connect_timeout=0.1).chat(HELLO, listener=RecordingListener())
    assert result.content is not None and result.content.endswith("w59")
    assert len(fake_openai.chat_requests) == 1


# ------------------------------------------------------------------ broken streams


@pytest.mark.parametrize("mode", ["drop", "malformed", "eof"])
async def test_a_stream_that_breaks_off_is_retried_after_a_discard(fake_openai: FakeOpenAI,
                                                                   make_client: MakeClient, mode: str) -> None:
    fake_openai.break_stream("this answer will not be finished", after=3, mode=mode)  # type: ignore[arg-type]
    fake_openai.reply("the answer, whole this time")
    listener = RecordingListener()
    result = await make_client().chat(HELLO, listener=listener)
    assert result.content == "the answer, whole this time"
    assert listener.kinds == ["text", "discard", "text"]
    assert "".join(listener.deltas[:3]) == "this answer will "
    assert listener.shown == result.content
    assert len(fake_openai.chat_requests) == 2 and fake_openai.streams[0].outcome == "broken"


async def test_a_stream_that_breaks_on_every_attempt_fails_as_unreachable(fake_openai: FakeOpenAI,
                                                                          make_client: MakeClient) -> None:
    for _ in range(2):
        fake_openai.break_stream("never finished", after=1, mode="eof")
    listener = RecordingListener()
    with pytest.raises(ModelUnavailableError) as caught:
        await make_client(max_retries=1).chat(HELLO, listener=listener)
    assert "stream broke off" in str(caught.value) and caught.value.attempts == 2
    assert listener.kinds == ["text", "discard", "text", "discard"] and listener.shown == ""


async def test_an_error_event_in_the_stream_maps_like_an_error_body(fake_openai: FakeOpenAI,
                                                                    make_client: MakeClient) -> None:
    client = make_client()
    fake_openai.break_stream("upstream went away", after=2, mode="error",
                             error={"message": "Provider returned error", "code": 503})
    fake_openai.reply("recovered")
    listener = RecordingListener()
    assert (await client.chat(HELLO, listener=listener)).content == "recovered"
    assert listener.kinds == ["text", "discard", "text"] and len(fake_openai.chat_requests) == 2

    fake_openai.break_stream("x", after=0, mode="error",
                             error={"message": "This model's maximum context length is 8192 tokens", "code": 400})
    with pytest.raises(ModelContextLengthError):
        await client.chat(HELLO, listener=RecordingListener())
    assert len(fake_openai.chat_requests) == 3  # not retried


# ------------------------------------------------------------------ cut at once


async def test_the_turn_budget_cuts_a_slow_stream(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.tokens_per_second = 5  # 40 s for the whole answer
    fake_openai.reply(LONG)
    listener = RecordingListener()
    with turn_budget(0.6), pytest.raises(ModelTimeoutError) as caught:
        await asyncio.wait_for(make_client().chat(HELLO, listener=listener), 30)
    assert caught.value.turn_timeout == 0.6
    [stream] = fake_openai.streams
    await asyncio.wait_for(stream.ended.wait(), 10)
    assert stream.outcome == "client gone"  # the client closed the connection: the request ended
    assert len(fake_openai.chat_requests) == 1


async def test_cancelling_a_call_closes_its_stream(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.tokens_per_second = 5
    fake_openai.reply(LONG)
    listener = RecordingListener(wait_for=2)
    call = asyncio.create_task(make_client().chat(HELLO, listener=listener))
    await asyncio.wait_for(listener.texts.wait(), 10)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    [stream] = fake_openai.streams
    await asyncio.wait_for(stream.ended.wait(), 10)
    assert stream.outcome == "client gone" and stream.chunks_sent < len(LONG.split())
    assert "discard" not in listener.kinds  # a stop keeps what was shown


async def test_a_listener_that_raises_does_not_fail_the_call(fake_openai: FakeOpenAI,
                                                             make_client: MakeClient) -> None:
    class Broken(RecordingListener):
        def text(self, delta: str) -> None:
            raise RuntimeError("the screen is gone")

    fake_openai.reply("still answered")
    assert (await make_client().chat(HELLO, listener=Broken())).content == "still answered"


# ------------------------------------------------------------------ the daemon's transport


async def test_the_daemons_transport_streams_retries_and_cuts_the_same(fake_openai: FakeOpenAI,
                                                                       make_client: MakeClient) -> None:
    """The daemon sends through aiohttp (gateway/daemon/transport.py): the body still comes as it is written."""
    client = make_client(transport=AiohttpTransport())
    fake_openai.break_stream("dropped half way", after=1, mode="drop").reply("whole", usage=USAGE)
    listener = RecordingListener()
    result = await client.chat(HELLO, listener=listener)
    assert result.content == "whole" and result.usage.input_tokens == 11
    assert listener.kinds == ["text", "discard", "text"]

    fake_openai.tokens_per_second = 5
    fake_openai.reply(LONG)
    listener = RecordingListener(wait_for=2)
    call = asyncio.create_task(client.chat(HELLO, listener=listener))
    await asyncio.wait_for(listener.texts.wait(), 10)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await asyncio.wait_for(fake_openai.streams[-1].ended.wait(), 10)
    assert fake_openai.streams[-1].outcome == "client gone"
