"""Streams as other servers write them, sent byte for byte by FakeOpenAI over HTTP: line endings,
comments, fields split differently, errors as events. Each must assemble as OpenAI's does."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from core import ModelAuthError, ModelClient, ModelResponseError, ModelSettings, Usage
from tests.fakes import FakeOpenAI

from ._listener import RecordingListener

HELLO = [{"role": "user", "content": "hi"}]
SSE = {"Content-Type": "text/event-stream; charset=utf-8"}


@pytest.fixture
async def client(fake_openai: FakeOpenAI) -> AsyncIterator[ModelClient]:
    async with ModelClient(ModelSettings(base_url=fake_openai.base_url, model="m", backoff_base=0.001,
                                         backoff_max=0.01)) as client:
        yield client


def _chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **top: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "gen-1", "object": "chat.completion.chunk", "created": 1, "model": "other/model",
            "choices": choices, **top}


def _body(*chunks: dict[str, Any], newline: str = "\n", done: bool = True) -> bytes:
    events = [f"data: {json.dumps(c)}{newline}{newline}" for c in chunks]
    return ("".join(events) + (f"data: [DONE]{newline}{newline}" if done else "")).encode()


async def test_crlf_comments_and_a_missing_done_after_the_finish(fake_openai: FakeOpenAI,
                                                                 client: ModelClient) -> None:
    body = b": OPENROUTER PROCESSING\r\n\r\nid: 1\r\n" + _body(
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": "Hello"}),
        _chunk({"content": ", world"}),
        _chunk({}, "stop"),
        _chunk(None, usage={"prompt_tokens": 5, "completion_tokens": 2}),
        newline="\r\n", done=False)
    fake_openai.respond(200, body, headers=SSE)
    listener = RecordingListener()
    result = await client.chat(HELLO, listener=listener)
    assert result.message == {"role": "assistant", "content": "Hello, world"}
    assert (result.finish_reason, result.model) == ("stop", "other/model")
    assert result.usage == Usage(input_tokens=5, output_tokens=2)
    assert listener.deltas == ["Hello", ", world"]


async def test_tool_calls_without_index_and_with_repeated_fields(fake_openai: FakeOpenAI,
                                                                 client: ModelClient) -> None:
    """A server that leaves out ``index`` and repeats the id and name in every piece."""
    def piece(call_id: str, name: str, arguments: str) -> dict[str, Any]:
        return _chunk({"tool_calls": [{"id": call_id, "type": "function",
                                       "function": {"name": name, "arguments": arguments}}]})

    body = _body(_chunk({"role": "assistant", "content": None}),
                 piece("a", "memory", '{"action": '), piece("a", "memory", '"add"}'),
                 piece("b", "echo", '{"text"'), piece("b", "echo", ': "x"}'),
                 _chunk({}, "tool_calls"), _chunk(None, usage={"prompt_tokens": 1, "completion_tokens": 1}))
    fake_openai.respond(200, body, headers=SSE)
    result = await client.chat(HELLO, listener=RecordingListener())
    assert result.message["content"] is None
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in result.tool_calls] == [
        ("a", "memory", {"action": "add"}), ("b", "echo", {"text": "x"})]


async def test_reasoning_in_pieces_is_kept_whole(fake_openai: FakeOpenAI, client: ModelClient) -> None:
    detail = {"type": "reasoning.text", "index": 0, "format": "anthropic-claude-v1"}
    body = _body(_chunk({"role": "assistant", "reasoning": "Think", "reasoning_details": [{**detail, "text": "Think"}]}),
                 _chunk({"reasoning": "ing.", "reasoning_details": [{**detail, "text": "ing.", "signature": "sig"}]}),
                 _chunk({"content": "Done."}, "stop"))
    fake_openai.respond(200, body, headers=SSE)
    result = await client.chat(HELLO, listener=RecordingListener())
    assert result.message == {"role": "assistant", "content": "Done.", "reasoning": "Thinking.",
                              "reasoning_details": [{**detail, "text": "Thinking.", "signature": "sig"}]}


async def test_an_error_event_is_read_like_an_error_body(fake_openai: FakeOpenAI, client: ModelClient) -> None:
    error = {"error": {"message": "Rate limit exceeded upstream", "code": 429}}
    fake_openai.respond(200, b"event: error\ndata: " + json.dumps(error).encode() + b"\n\n", headers=SSE)
    fake_openai.reply("after the retry")
    assert (await client.chat(HELLO, listener=RecordingListener())).content == "after the retry"

    denied = {"error": {"message": "No auth credentials found", "code": 401}}
    fake_openai.respond(200, _body(_chunk({"role": "assistant", "content": ""}), {"error": denied["error"]}),
                        headers=SSE)
    with pytest.raises(ModelAuthError):
        await client.chat(HELLO, listener=RecordingListener())
    assert len(fake_openai.chat_requests) == 3


async def test_one_event_larger_than_the_cap_is_refused(fake_openai: FakeOpenAI) -> None:
    cap = 64 * 2**10
    body = _body(_chunk({"role": "assistant", "content": "x" * (cap + 10)}, "stop"))
    fake_openai.respond(200, body, headers=SSE)
    async with ModelClient(ModelSettings(base_url=fake_openai.base_url, model="m", max_response_bytes=cap)) as client:
        with pytest.raises(ModelResponseError, match="longer than 64 KB"):
            await client.chat(HELLO, listener=RecordingListener())
    assert len(fake_openai.chat_requests) == 1
