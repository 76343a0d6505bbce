"""How ``FakeOpenAI`` answers ``POST /v1/audio/speech``, as OpenAI documents it ("Create speech").

The request is JSON: ``model``, ``input`` (the text, at most 4096 characters), ``voice`` and optionally
``response_format`` (``mp3`` by default; ``opus``, ``aac``, ``flac``, ``wav``, ``pcm``) and ``speed``. The
answer is the audio itself, with its format's content type. A missing ``model``, ``input`` or ``voice``, a
longer input, an unknown format: 400 with an OpenAI-style error object.

The fake speaks every text as the same recording: ``opus`` is ``data/speech.ogg`` (half a second of a
tone, encoded with ``opusenc`` from opus-tools: a real OGG/Opus file), ``wav`` half a second of silence,
``pcm`` its samples. It has no MP3, AAC or FLAC encoder, so it refuses those formats with a 400 that says
so. Tests script the next answers (``reply``, ``fail``, ``respond``, ``hang``); every request is recorded in
``requests`` with its headers and JSON body.
"""

from __future__ import annotations

import asyncio
import io
import json
import wave
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

#: OpenAI's cap on ``input``
MAX_INPUT = 4096
#: a real OGG/Opus recording (0.5 s, 440 Hz)
SPEECH_OGG = Path(__file__).with_name("data") / "speech.ogg"
_FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
_TYPES = {"opus": "audio/ogg", "wav": "audio/wav", "pcm": "audio/pcm"}
_RATE = 24_000  # OpenAI's PCM: 24 kHz, 16-bit, mono


@dataclass(frozen=True)
class SpeechRequest:
    """One speech request: its headers and its JSON body (None when it was not JSON)."""

    headers: CIMultiDictProxy[str]
    body: dict[str, Any] | None


@dataclass(frozen=True)
class _Audio:
    data: bytes
    content_type: str


@dataclass(frozen=True)
class _Status:
    status: int
    body: bytes
    content_type: str


class _Hang:
    pass


def silence_wav(seconds: float = 0.5) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(_RATE)
        w.writeframes(bytes(2 * int(_RATE * seconds)))
    return out.getvalue()


@dataclass
class FakeSpeech:
    """The speech endpoint's script and its record (``FakeOpenAI.speech``)."""

    requests: list[SpeechRequest] = field(default_factory=list)
    _script: deque[_Audio | _Status | _Hang] = field(default_factory=deque)

    def reply(self, audio: bytes, content_type: str = "audio/ogg") -> Self:
        """The next request gets these bytes as its audio."""
        self._script.append(_Audio(audio, content_type))
        return self

    def fail(self, status: int, message: str | None = None) -> Self:
        """The next request gets ``status`` with an OpenAI-style error object."""
        error = {"message": message or f"fake failure (HTTP {status})", "type": "fake_error", "code": status}
        return self.respond(status, {"error": error})

    def respond(self, status: int, body: Any) -> Self:
        """The next request gets exactly this: ``str``/``bytes`` bodies go out as-is, others as JSON."""
        if isinstance(body, bytes):
            self._script.append(_Status(status, body, "application/octet-stream"))
        elif isinstance(body, str):
            self._script.append(_Status(status, body.encode(), "text/plain"))
        else:
            self._script.append(_Status(status, json.dumps(body).encode(), "application/json"))
        return self

    def hang(self) -> Self:
        """Never answer the next request (until the server stops): for client timeouts."""
        self._script.append(_Hang())
        return self

    async def handle(self, request: web.Request, released: asyncio.Event) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            body = None
        self.requests.append(SpeechRequest(CIMultiDictProxy(CIMultiDict(request.headers)), body))
        refused = _refusal(body)
        if refused is not None:
            return _error(400, *refused)
        assert body is not None
        step = self._script.popleft() if self._script else None
        if isinstance(step, _Hang):
            await released.wait()
            return web.Response(status=504, text="fake server stopped while hanging")
        if isinstance(step, _Status):
            return web.Response(status=step.status, body=step.body, content_type=step.content_type)
        if isinstance(step, _Audio):
            return web.Response(body=step.data, content_type=step.content_type)
        response_format = body.get("response_format", "mp3")
        if response_format == "opus":
            return web.Response(body=SPEECH_OGG.read_bytes(), content_type=_TYPES["opus"])
        wav = silence_wav()
        if response_format == "wav":
            return web.Response(body=wav, content_type=_TYPES["wav"])
        if response_format == "pcm":
            return web.Response(body=wav[44:], content_type=_TYPES["pcm"])
        return _error(400, f"the fake speaks only opus, wav and pcm, not {response_format}", "response_format")


def _refusal(body: dict[str, Any] | None) -> tuple[str, str | None] | None:
    """OpenAI's 400 for a body it cannot take: (message, param), else None."""
    if body is None:
        return "We could not parse the JSON body of your request.", None
    for name in ("model", "input", "voice"):
        if not isinstance(body.get(name), str) or not body[name]:
            return f"Missing required parameter: '{name}'.", name
    if len(body["input"]) > MAX_INPUT:
        return f"String should have at most {MAX_INPUT} characters", "input"
    if body.get("response_format", "mp3") not in _FORMATS:
        return f"Invalid value: '{body['response_format']}'. Supported values are: {', '.join(_FORMATS)}.", \
            "response_format"
    return None


def _error(status: int, message: str, param: str | None) -> web.Response:
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": None}
    return web.json_response({"error": error}, status=status)
