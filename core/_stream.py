"""A streamed chat completion: its server-sent events, read as they come and put back together.

With ``stream: true`` an OpenAI-compatible server answers ``text/event-stream``:
one ``chat.completion.chunk`` per ``data:`` event, each carrying a delta of the
message (a piece of the content or of a reasoning field, pieces of tool calls by
``index``), then a chunk with the ``finish_reason``, a chunk with the ``usage``
when ``stream_options.include_usage`` asked for it, and ``data: [DONE]``.
``read_stream`` feeds the deltas to an ``_Assembly`` that rebuilds the
``chat.completion`` the server would have sent without streaming, so the client
parses both with the same ``parse_completion``.

What is capped is the message, not the stream: an event's framing is many times
the few characters of text it carries, so ``max_response_bytes`` counts the
UTF-8 bytes of the text assembled (content, reasoning, tool arguments); a longer
answer is cut there, as a long JSON body is. One event larger than the cap is
refused.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import structlog

from ._body import INLINE_PARSE_BYTES, parse_json
from .errors import ModelError
from .streaming import AnswerListener

__all__ = ["BrokenStream", "EventTooLarge", "Relay", "StreamError", "StreamResult", "read_stream"]

log = structlog.get_logger("hermes.core")

_REASONING_TEXT = ("reasoning", "reasoning_content")
# The string fields of a ``reasoning_details`` item that arrive in pieces (OpenRouter).
_DETAIL_PIECES = frozenset({"text", "summary", "data"})
# A delta with only these keys carries nothing but content.
_PLAIN_DELTA = frozenset({"content", "role"})


class BrokenStream(ModelError):
    """The stream ended, or sent something unreadable, before the answer was complete (worth another try)."""


class EventTooLarge(ModelError):
    """One event was larger than the whole answer may be."""


class StreamError(ModelError):
    """The server reported an error inside a 2xx stream; ``payload`` is the chunk, read like an error body."""

    def __init__(self, payload: dict[str, Any]) -> None:
        super().__init__("the stream carried an error")
        self.payload = payload


class Relay:
    """The caller's ``AnswerListener`` behind a guard: a listener that raises is logged, never the
    turn's failure. Keeps the text given since the last ``discard`` (what ``/stop`` stores)."""

    def __init__(self, listener: AnswerListener) -> None:
        self._listener = listener
        self._parts: list[str] = []

    @property
    def given(self) -> bool:
        """Whether any text was given since the last discard."""
        return bool(self._parts)

    @property
    def partial(self) -> str:
        return "".join(self._parts)

    def text(self, delta: str) -> None:
        self._parts.append(delta)
        self._forward(self._listener.text, delta)

    def discard(self) -> None:
        self._parts.clear()
        self._forward(self._listener.discard)

    def tool(self, name: str) -> None:
        self._forward(self._listener.tool, name)

    @staticmethod
    def _forward(call: Callable[..., None], *args: str) -> None:
        try:
            call(*args)
        except Exception:
            log.exception("agent.listener_failed", method=getattr(call, "__name__", "?"))


class StreamResult:
    """What a stream assembled: ``completion`` in ``chat.completion`` shape; ``cut`` when it passed the cap."""

    def __init__(self, completion: dict[str, Any], cut: bool) -> None:
        self.completion = completion
        self.cut = cut


class _Events:
    """Server-sent events from a byte stream: ``(event type, data)``, the ``data`` lines of an event
    joined; comments and other fields skipped. A CR LF split between two reads may end an event early,
    which costs a server that sends one ``data`` line an event (all of them) nothing."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._pending: list[bytes] = []  # the reads of an unfinished line, joined once it ends
        self._pending_size = 0
        self._data: list[bytes] = []
        self._size = 0
        self._kind = b""

    def feed(self, chunk: bytes) -> list[tuple[bytes, bytes]]:
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" not in chunk:  # a long line in many reads is kept, not joined and split again each time
            self._keep(chunk)
            return []
        if self._pending:
            chunk = b"".join(self._pending) + chunk
            self._pending.clear()
            self._pending_size = 0
        lines = chunk.split(b"\n")
        self._keep(lines.pop())
        return self._lines(lines)

    def _keep(self, piece: bytes) -> None:
        if piece:
            self._pending.append(piece)
            self._pending_size += len(piece)
            if self._pending_size + self._size > self._limit:
                raise EventTooLarge("an event is larger than model.max_response_bytes")

    def close(self) -> list[tuple[bytes, bytes]]:
        """The events a body that ends without a last blank line still completes."""
        lines = [b"".join(self._pending), b""]
        self._pending.clear()
        return self._lines(lines)

    def _lines(self, lines: list[bytes]) -> list[tuple[bytes, bytes]]:
        events: list[tuple[bytes, bytes]] = []
        data = self._data
        for line in lines:
            if not line:  # a blank line ends the event
                if data:
                    events.append((self._kind or b"message", data[0] if len(data) == 1 else b"\n".join(data)))
                    data.clear()
                    self._size, self._kind = 0, b""
            elif line.startswith(b"data:"):
                value = line[6:] if line[5:6] == b" " else line[5:]
                data.append(value)
                self._size += len(value)
                if self._size > self._limit:
                    raise EventTooLarge("an event is larger than model.max_response_bytes")
            elif line.startswith(b"event:"):
                self._kind = line[6:].strip()
        return events


class _Assembly:
    """The deltas of the first choice, put back together into one assistant message."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.cut = False
        self.done = False
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.head: dict[str, Any] = {}
        self.content: list[str] | None = None
        self.reasoning: dict[str, list[str]] = {}
        self.details: list[dict[str, Any]] = []
        self.calls: dict[int, dict[str, Any]] = {}

    @property
    def complete(self) -> bool:
        return self.done or self.finish_reason is not None

    def add(self, chunk: Any) -> str:
        """Take one chunk; returns the content text it adds ("" for none).

        Called for every token of every streamed answer: the common chunk (one choice whose
        delta is a piece of content) takes the shortest path.
        """
        if type(chunk) is not dict:
            raise BrokenStream("an event is not a JSON object")
        if chunk.get("error"):
            raise StreamError(chunk)
        if not self.head:
            self.head = {key: chunk[key] for key in ("id", "created", "model") if chunk.get(key) is not None}
        usage = chunk.get("usage")
        if type(usage) is dict:
            self.usage = usage
        choices = chunk.get("choices")
        if not choices:
            return ""
        if type(choices) is not list:
            raise BrokenStream("a chunk's choices is not a list")
        text = ""
        for choice in choices:
            if type(choice) is not dict or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if delta and type(delta) is dict:
                text += self._delta(delta)
            reason = choice.get("finish_reason")
            if reason is not None and type(reason) is str:
                self.finish_reason = reason
        return text

    def _fit(self, piece: str) -> str:
        """``piece``, or as much of it as the cap leaves room for (then the answer is cut)."""
        size = len(piece) if piece.isascii() else len(piece.encode())
        if self.size + size <= self.limit:
            self.size += size
            return piece
        room = self.limit - self.size
        self.size, self.cut = self.limit, True
        return piece.encode()[:room].decode(errors="ignore")

    def _delta(self, delta: dict[str, Any]) -> str:
        text = ""
        content = delta.get("content")
        if type(content) is str:
            if self.content is None:
                self.content = []
            if content:
                text = self._fit(content)
                self.content.append(text)
        elif content is not None:
            raise BrokenStream("a content delta is not text")
        if delta.keys() <= _PLAIN_DELTA:
            return text
        for key in _REASONING_TEXT:
            piece = delta.get(key)
            if isinstance(piece, str) and piece and not self.cut:
                self.reasoning.setdefault(key, []).append(self._fit(piece))
        details = delta.get("reasoning_details")
        if isinstance(details, list):
            self._details(details)
        calls = delta.get("tool_calls")
        if isinstance(calls, list) and not self.cut:
            for call in calls:
                if isinstance(call, dict):
                    self._tool_call(call)
        return text

    def _details(self, items: list[Any]) -> None:
        for item in items:
            if not isinstance(item, dict):
                continue
            last = self.details[-1] if self.details else None
            if (last is not None and "index" in item and last.get("index") == item["index"]
                    and last.get("type") == item.get("type")):
                for key, value in item.items():
                    if key in _DETAIL_PIECES and isinstance(value, str) and isinstance(last.get(key), str):
                        last[key] += value
                    else:
                        last[key] = value
            else:
                self.details.append(dict(item))

    def _tool_call(self, piece: dict[str, Any]) -> None:
        index = piece.get("index")
        if not isinstance(index, int):
            index = self._index_of(piece.get("id"))
        call = self.calls.setdefault(index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
        for key, value in piece.items():
            if key == "index":
                continue
            if key == "id":
                if isinstance(value, str) and value and not call["id"]:
                    call["id"] = value
            elif key == "function" and isinstance(value, dict):
                self._function(call["function"], value)
            elif key != "type":
                call[key] = value

    def _index_of(self, call_id: Any) -> int:
        """Where a piece without an ``index`` goes (some servers leave it out): the call with its id,
        a new call for a new id, else the last call."""
        last = max(self.calls, default=-1)
        if not call_id:
            return max(last, 0)
        known = [i for i, call in self.calls.items() if call["id"] == call_id]
        return known[0] if known else last + 1

    def _function(self, function: dict[str, Any], piece: dict[str, Any]) -> None:
        for key, value in piece.items():
            if key == "name":
                # Pieces of a name are joined; a server that repeats the whole name each time is not.
                if isinstance(value, str) and value and value != function["name"]:
                    function["name"] += value
            elif key == "arguments":
                if isinstance(value, str):
                    function["arguments"] += self._fit(value)
                elif value is not None:  # an object in one piece (a few local servers)
                    function["arguments"] = json.dumps(value, ensure_ascii=False)
            else:
                function[key] = value

    def completion(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant",
                                   "content": None if self.content is None else "".join(self.content)}
        for key, pieces in self.reasoning.items():
            message[key] = "".join(pieces)
        if self.details:
            message["reasoning_details"] = self.details
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        return {
            **self.head,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
            "usage": self.usage,
        }


_DECODER = json.JSONDecoder()


def _loads(data: bytes) -> Any:
    """``json.loads`` of one event, without its per-call checks (half its cost on a token's chunk)."""
    text = data.decode()
    try:
        value, end = _DECODER.raw_decode(text)
    except ValueError:
        return json.loads(text)  # leading whitespace is json's to handle, and so is the error
    if end != len(text) and text[end:].strip():
        raise ValueError("an event holds more than one JSON value")
    return value


async def read_stream(chunks: AsyncIterator[bytes], limit: int, on_text: Callable[[str], None]) -> StreamResult:
    """Read the events of ``chunks`` until ``[DONE]``, the cap, or the end; ``on_text`` gets each
    piece of content as it comes. Raises ``BrokenStream``, ``StreamError`` or ``EventTooLarge``;
    a transport error after the answer was complete (its ``finish_reason`` came) is not one."""
    events, assembly = _Events(limit), _Assembly(limit)
    try:
        async for chunk in chunks:
            if await _take(events.feed(chunk), assembly, on_text):
                break
        else:
            await _take(events.close(), assembly, on_text)
    except httpx.TransportError:
        if not assembly.complete:
            raise
    if not (assembly.complete or assembly.cut):
        raise BrokenStream("the stream ended before the answer was complete")
    return StreamResult(assembly.completion(), assembly.cut)


async def _take(events: list[tuple[bytes, bytes]], assembly: _Assembly, on_text: Callable[[str], None]) -> bool:
    """Give ``events`` to ``assembly``; True when the stream is over (``[DONE]``, or the cap reached)."""
    for kind, data in events:
        if data == b"[DONE]":
            assembly.done = True
            return True
        try:
            # One long event is parsed in steps, as a long body is (core/_body.py).
            chunk = _loads(data) if len(data) <= INLINE_PARSE_BYTES else await parse_json(data)
        except (ValueError, RecursionError) as exc:
            if kind == b"error":  # an error event whose text is not JSON
                raise StreamError({"error": {"message": data[:300].decode(errors="replace")}}) from exc
            raise BrokenStream("an event is not JSON") from exc
        if kind == b"error":
            raise StreamError(chunk if isinstance(chunk, dict) and chunk.get("error") else {"error": chunk})
        text = assembly.add(chunk)
        if text:
            on_text(text)
        if assembly.cut:
            return True
    return False
