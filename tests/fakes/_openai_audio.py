"""How ``FakeOpenAI`` answers ``POST /v1/audio/transcriptions``, as OpenAI documents it.

The request is multipart form data: ``file`` (the recording; OpenAI picks the decoder
by its name's extension), ``model``, and optionally ``response_format`` (``json``, the
default: ``{"text": ...}``; ``verbose_json``: the text with ``task``, ``language`` (a
language's English name), ``duration`` and ``segments``), ``language`` and ``prompt``.
A file over 25 MB gets a 413, a request without a file a 400, as OpenAI answers them.
With ``refuse_verbose`` set, ``verbose_json`` gets the 400 that OpenAI's gpt-4o
transcription models give it.

Tests script the next answers (``reply``, ``fail``, ``respond``, ``hang``); once the
script runs out, the answer is ``"transcript of <file name> (<n> bytes)"``. Every request
is recorded in ``requests`` with its form fields and the file's bytes.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import BodyPartReader, web
from multidict import CIMultiDict, CIMultiDictProxy

#: OpenAI's cap on an uploaded recording.
MAX_FILE_BYTES = 25 * 1024 * 1024


@dataclass(frozen=True)
class TranscriptionRequest:
    """One transcription request: its headers, its text fields, and the file as sent."""

    headers: CIMultiDictProxy[str]
    fields: dict[str, str]
    file_name: str | None
    file_type: str | None
    file: bytes | None


@dataclass(frozen=True)
class _Transcript:
    text: str
    duration: float
    language: str


@dataclass(frozen=True)
class _Status:
    status: int
    body: bytes
    content_type: str


class _Hang:
    pass


@dataclass
class FakeTranscriptions:
    """The transcription endpoint's script and its record (``FakeOpenAI.transcriptions``)."""

    requests: list[TranscriptionRequest] = field(default_factory=list)
    refuse_verbose: bool = False
    _script: deque[_Transcript | _Status | _Hang] = field(default_factory=deque)

    def reply(self, text: str, *, duration: float = 1.0, language: str = "english") -> Self:
        """The next request gets this transcript (``text`` may be ``""``: a recording without speech)."""
        self._script.append(_Transcript(text, duration, language))
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
        recorded = await _read(request)
        if recorded is None:
            return _error(413, "Maximum content size limit (26214400) exceeded.", "invalid_request_error")
        self.requests.append(recorded)
        if recorded.file is None:
            return _error(400, "you must provide a file", "invalid_request_error")
        if "model" not in recorded.fields:
            return _error(400, "you must provide a model parameter", "invalid_request_error")
        response_format = recorded.fields.get("response_format", "json")
        if response_format == "verbose_json" and self.refuse_verbose:
            return _error(400, f"response_format 'verbose_json' is not compatible with model "
                               f"'{recorded.fields['model']}'. Use 'json' or 'text' instead.",
                          "invalid_request_error", param="response_format")
        step = self._script.popleft() if self._script else None
        if isinstance(step, _Hang):
            await released.wait()
            return web.Response(status=504, text="fake server stopped while hanging")
        if isinstance(step, _Status):
            return web.Response(status=step.status, body=step.body, content_type=step.content_type)
        if step is None:
            step = _Transcript(f"transcript of {recorded.file_name} ({len(recorded.file)} bytes)", 1.0, "english")
        if response_format == "verbose_json":
            segment = {"id": 0, "start": 0.0, "end": step.duration, "text": step.text}
            return web.json_response({"task": "transcribe", "language": step.language, "duration": step.duration,
                                      "text": step.text, "segments": [segment] if step.text else []})
        return web.json_response({"text": step.text})


async def _read(request: web.Request) -> TranscriptionRequest | None:
    """The multipart form, or None when the file is over OpenAI's cap."""
    fields: dict[str, str] = {}
    name = ctype = None
    data: bytes | None = None
    reader = await request.multipart()
    while (part := await reader.next()) is not None:
        if not isinstance(part, BodyPartReader):
            continue
        if part.name == "file":
            name, ctype = part.filename, part.headers.get("Content-Type")
            data = bytes(await part.read())
            if len(data) > MAX_FILE_BYTES:
                return None
        elif part.name:
            fields[part.name] = await part.text()
    return TranscriptionRequest(CIMultiDictProxy(CIMultiDict(request.headers)), fields, name, ctype, data)


def _error(status: int, message: str, kind: str, *, param: str | None = None) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "param": param, "code": None}},
                             status=status)
