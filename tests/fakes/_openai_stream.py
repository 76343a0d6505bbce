"""How ``FakeOpenAI`` streams an answer: OpenAI's ``chat.completion.chunk`` events over SSE.

As OpenAI sends them: a first chunk with the role (and ``content: ""``, or
``null`` for a reply of tool calls only), the reasoning and the content a token
at a time, each tool call as a chunk with its ``id`` and ``name`` followed by
its arguments in pieces (all with the call's ``index``), a chunk with the
``finish_reason``, a chunk with the ``usage`` and no choices when
``stream_options.include_usage`` asked for it, then ``data: [DONE]``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

#: how a scripted stream ends early: the connection dropped, a chunk that is not JSON, the body
#: ended cleanly without a finish or [DONE], or an ``error`` chunk as OpenRouter sends mid-stream
BreakMode = Literal["drop", "malformed", "eof", "error"]

# Tool-call arguments go out this many characters a piece.
_ARGUMENT_PIECE = 8


@dataclass
class StreamRecord:
    """One streamed answer as the fake sent it; ``ended`` is set once it is over, ``outcome`` says how:
    "done" ([DONE] sent), "broken" (a scripted break), "client gone" (the client closed the connection)."""

    chunks_sent: int = 0
    outcome: str | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(frozen=True)
class StreamBreak:
    mode: BreakMode
    #: tokens sent before the break
    after: int
    error: dict[str, Any] | None = None


def tokens(text: str) -> list[str]:
    """``text`` cut after each space: a fake's "tokens", so a stream has several content chunks."""
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + ([words[-1]] if words[-1] else [])


def _token_steps(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The deltas of ``message`` after the first: reasoning, content, then tool calls in pieces."""
    steps: list[dict[str, Any]] = []
    for key in ("reasoning", "reasoning_content"):
        if isinstance(message.get(key), str):
            steps += [{key: piece} for piece in tokens(message[key])]
    if isinstance(message.get("content"), str):
        steps += [{"content": piece} for piece in tokens(message["content"])]
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        head = {k: v for k, v in call.items() if k != "function"}
        steps.append({"tool_calls": [{"index": index, **head,
                                      "function": {"name": function["name"], "arguments": ""}}]})
        arguments = function["arguments"]
        steps += [{"tool_calls": [{"index": index, "function": {"arguments": arguments[i:i + _ARGUMENT_PIECE]}}]}
                  for i in range(0, len(arguments), _ARGUMENT_PIECE)]
    return steps


async def write_stream(
    request: web.Request,
    completion: dict[str, Any],
    *,
    include_usage: bool,
    first_token_delay: float,
    tokens_per_second: float | None,
    brk: StreamBreak | None,
    record: StreamRecord,
    pause: Callable[[float], Awaitable[None]],
) -> web.StreamResponse:
    """Send ``completion`` (a ``chat.completion``) as a stream of chunks; ``pause`` waits (cut short
    when the fake stops)."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    choice = completion["choices"][0]
    message = choice["message"]
    base = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

    async def send(data: bytes) -> None:
        await response.write(b"data: " + data + b"\n\n")
        record.chunks_sent += 1

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return json.dumps({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}).encode()

    gap = 1 / tokens_per_second if tokens_per_second else 0.0
    try:
        if first_token_delay:
            await pause(first_token_delay)
        first = {"role": "assistant", "content": "" if isinstance(message.get("content"), str) else None}
        await send(chunk(first))
        for sent, delta in enumerate(_token_steps(message)):
            if brk is not None and sent >= brk.after:
                break
            if gap and sent:
                await pause(gap)
            await send(chunk(delta))
        if brk is not None:
            return await _break(request, response, brk, base, send, record)
        await send(chunk({}, choice["finish_reason"]))
        if include_usage:
            await send(json.dumps({**base, "choices": [], "usage": completion["usage"]}).encode())
        await send(b"[DONE]")
        await response.write_eof()
        record.outcome = "done"
        return response
    except (ConnectionError, asyncio.CancelledError):
        record.outcome = "client gone"
        raise
    finally:
        record.ended.set()


async def _break(request: web.Request, response: web.StreamResponse, brk: StreamBreak, base: dict[str, Any],
                 send: Callable[[bytes], Awaitable[None]], record: StreamRecord) -> web.StreamResponse:
    record.outcome = "broken"
    if brk.mode == "drop":
        if request.transport is not None:
            request.transport.abort()  # no end chunk: the client sees the connection drop mid-body
        return response
    if brk.mode == "malformed":
        await send(b'{"id": "chatcmpl-broken", "choices": [{"delta": {"content": "unfinish')
    elif brk.mode == "error":
        error = brk.error or {"message": "fake upstream failure", "code": 502}
        await send(json.dumps({**base, "error": error,
                               "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]}).encode())
    await response.write_eof()
    return response
