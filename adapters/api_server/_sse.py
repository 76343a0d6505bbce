"""The answer to a ``stream: true`` request as OpenAI streams one: server-sent events, one
``chat.completion.chunk`` per piece of new text, while the model writes it.

Every chunk of a response has the same ``id``, ``created`` and ``model``; the first carries
``delta.role``. ``finish`` sends what is still missing, a last chunk with ``finish_reason:
"stop"`` (a stopped turn too: its text says so), the usage chunk when the request asked for it
(``stream_options.include_usage``), and ``data: [DONE]``. An error after the stream began cannot
be a status any more: it is an event ``data: {"error": {...}}`` in OpenAI's error shape, then
``[DONE]``. SSE cannot take text back: when the answer drops text it showed (a model call's
preamble before it asked for tools), the stream sends a blank line and the answer anew.

A client that goes away (or stops reading for ``write_timeout`` seconds) ends the writing, never
the turn: ``update`` and ``finish`` then return quietly, and the answer is stored as ever.

``interject`` shows text that is not the answer (a tool's approval question, then its outcome) as
content where the answer stands now, set apart by blank lines; the answer goes on after it.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from .._append import SEPARATOR, AppendOnly
from ..base import OutboundMessage, ReplyError, ReplyStream, SendResult, TokenUsage
from ._request import error_body

__all__ = ["DONE", "Completion", "SseStream", "event", "usage_json"]

DONE = b"data: [DONE]\n\n"
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


def event(obj: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


def usage_json(usage: TokenUsage | None) -> dict[str, int]:
    counts = usage or TokenUsage()  # a notice or a replayed answer cost no tokens now
    return {"prompt_tokens": counts.prompt_tokens, "completion_tokens": counts.completion_tokens,
            "total_tokens": counts.total_tokens}


class Completion:
    """One answer's identity, shared by all its chunks."""

    def __init__(self, model: str) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        self.created = int(time.time())
        self.model = model

    def _base(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def whole(self, text: str, usage: TokenUsage | None) -> dict[str, Any]:
        """The answer as one ``chat.completion`` (a request without ``stream``)."""
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        return {**self._base("chat.completion"), "choices": [choice], "usage": usage_json(usage)}

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return event({**self._base("chat.completion.chunk"), "choices": [choice]})

    def usage_chunk(self, usage: TokenUsage | None) -> bytes:
        # As OpenAI streams it: one last chunk without choices.
        return event({**self._base("chat.completion.chunk"), "choices": [], "usage": usage_json(usage)})


def error_event(text: str, error: ReplyError) -> bytes:
    return event(error_body(text.removeprefix("⚠️ "), error.type, error.code))


class SseStream(ReplyStream):
    """The stream of one waiting request. It sends its headers with its first text; ``finish``
    before any text hands the message to the request's handler (``hand_over``), which answers it
    as without a stream (an error then is still an HTTP status)."""

    throttled = False

    def __init__(self, request: web.Request, message_id: str, model: str, *, include_usage: bool,
                 write_timeout: float, hand_over: Callable[[OutboundMessage], None]) -> None:
        self._request = request
        self._id = message_id
        self._completion = Completion(model)
        self._include_usage = include_usage
        self._write_timeout = write_timeout
        self._hand_over = hand_over
        self._text = AppendOnly()
        self._lock = asyncio.Lock()  # one writer at a time: the gateway's updates, or the handler's end
        self.response: web.StreamResponse | None = None  # prepared with the first text
        self._ended = False  # the response has its end (or its handler answered without it)
        self._broken = False  # the client went away: nothing more is written

    @property
    def started(self) -> bool:
        """The response's headers are out: the request is answered by this stream, whatever comes."""
        return self.response is not None

    @property
    def message_ids(self) -> tuple[str, ...]:
        return (self._id,) if self.started else ()

    async def update(self, text: str) -> None:
        async with self._lock:
            if not self._ended:
                await self._send_text(text)

    async def interject(self, text: str) -> bool:
        """Show ``text`` now, apart from the answer (which starts anew after it); False when the
        stream has ended (or its client left), so nobody saw it."""
        async with self._lock:
            if self._ended or self._broken:
                return False
            block = f"{SEPARATOR if self._text.started else ''}{text}{SEPARATOR}"
            delta = {"content": block} if self.started else {"role": "assistant", "content": block}
            await self._write(self._completion.chunk(delta))
            self._text = AppendOnly()
            return not self._broken

    async def finish(self, message: OutboundMessage) -> SendResult:
        async with self._lock:
            if not self._ended and not self.started:
                self._ended = True
                self._hand_over(message)
            elif not self._ended:
                await self._finish(message)
                # Only now may the handler return (which would end the response itself).
                self._hand_over(message)
        return SendResult((self._id,))

    async def end_with(self, message: OutboundMessage) -> bool:
        """The handler's end of its request (its answer came, or it stopped waiting): True when this
        stream answers the request (it began; ``message`` ends it unless it has ended), False when
        the handler answers as without a stream (nothing will be written here any more)."""
        async with self._lock:
            if not self.started:
                self._ended = True
                return False
            if not self._ended:
                await self._finish(message)
            return True

    async def _finish(self, message: OutboundMessage) -> None:
        self._ended = True
        if message.error is not None:
            await self._write(error_event(message.text, message.error))
        else:
            await self._send_text(message.text)
            await self._write(self._completion.chunk({}, "stop"))
            if self._include_usage:
                await self._write(self._completion.usage_chunk(message.usage))
        await self._write(DONE)
        if not self._broken and self.response is not None:
            await self._guarded(self.response.write_eof())

    async def _send_text(self, text: str) -> None:
        new, restart = self._text.next(text)
        if restart:
            new = SEPARATOR + new
        if not new:
            return
        delta = {"content": new} if self.started else {"role": "assistant", "content": new}
        await self._write(self._completion.chunk(delta))

    async def _write(self, data: bytes) -> None:
        if self._broken:
            return
        if self.response is None:
            self.response = web.StreamResponse(headers=SSE_HEADERS)
            await self._guarded(self.response.prepare(self._request))
        if not self._broken:
            await self._guarded(self.response.write(data))

    async def _guarded(self, call: Awaitable[Any]) -> None:
        try:
            await asyncio.wait_for(call, self._write_timeout)
        except (ConnectionError, OSError, TimeoutError):
            # Gone, or no longer reading: the turn must not wait for it. The answer is stored anyway.
            self._broken = True
            transport = self._request.transport
            if transport is not None:
                transport.close()
