"""Speech to text: an OpenAI-compatible ``/audio/transcriptions`` endpoint, or faster-whisper here.

``HttpTranscriber`` works with OpenAI, Groq and self-hosted whisper servers: it sends
the audio as multipart form data and asks for ``verbose_json`` (which carries the duration
and language); a server that refuses that format (OpenAI's gpt-4o models) is asked once
more for plain ``json``. ``LocalTranscriber`` (``core/media/_local_stt.py``) needs the
optional extra ``stt-local``.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, Protocol, Self

import httpx

from ._http import endpoint, post_json, status_message
from .errors import TranscriptionError

_WHAT = "speech-to-text"
NO_SPEECH = "no speech was found in that recording"

# The endpoints pick the decoder by the file name's extension (OpenAI refuses ".oga"), so
# the name sent is "audio.<ext>" for the sniffed type: the sender's own name never leaves.
_EXT_BY_MIME = {
    "audio/ogg": "ogg", "audio/opus": "ogg", "application/ogg": "ogg",
    "audio/mpeg": "mp3", "audio/mp3": "mp3", "audio/mp4": "m4a", "audio/m4a": "m4a", "audio/x-m4a": "m4a",
    "audio/aac": "m4a", "audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav",
    "audio/webm": "webm", "video/webm": "webm", "audio/flac": "flac", "audio/x-flac": "flac",
    "video/mp4": "mp4", "video/quicktime": "mp4", "audio/mpga": "mpga",
}


@dataclass(frozen=True)
class Transcript:
    """What was said, how long the recording is (seconds) and its language, when known."""

    text: str
    duration: float | None
    language: str | None


class Transcriber(Protocol):
    """Turns a recording into text; raises :class:`TranscriptionError` when it cannot."""

    async def transcribe(self, data: bytes, *, mime: str, name: str) -> Transcript: ...


class HttpTranscriber:
    """``POST {base_url}/audio/transcriptions``; safe to share between tasks, close with ``aclose``."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        timeout: float,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._url = endpoint(base_url, "/audio/transcriptions")
        self._model = model
        self._api_key = api_key
        self._timeout = timeout
        self._http = httpx.AsyncClient(transport=transport, headers={"Accept": "application/json"})

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def transcribe(self, data: bytes, *, mime: str, name: str) -> Transcript:
        """The transcript of ``data`` (of type ``mime``, sent as ``name``)."""
        upload_name = upload_name_for(mime, name)
        status, payload = await self._post(data, mime, upload_name, "verbose_json")
        if status == 400 and "response_format" in str(payload):
            status, payload = await self._post(data, mime, upload_name, "json")
        if status == 400:
            raise TranscriptionError(status_message(_WHAT, status, payload, "", self._api_key))
        return parse_transcript(payload)

    async def _post(self, data: bytes, mime: str, upload_name: str, response_format: str) -> tuple[int, Any]:
        return await post_json(
            self._http, self._url, what=_WHAT, api_key=self._api_key, seconds=self._timeout,
            error=TranscriptionError,
            files={"file": (upload_name, data, mime or "application/octet-stream")},
            data={"model": self._model, "response_format": response_format},
        )


def upload_name_for(mime: str, name: str) -> str:
    """``audio.<ext>``: the extension from ``mime``, else from ``name``'s own (if it is plain)."""
    ext = _EXT_BY_MIME.get(mime.split(";")[0].strip().lower(), "")
    if not ext:
        suffix = posixpath.splitext(posixpath.basename(name.replace("\\", "/")))[1].lstrip(".").lower()
        ext = suffix if suffix.isascii() and suffix.isalnum() and len(suffix) <= 5 else "bin"
    return f"audio.{ext}"


def parse_transcript(payload: Any) -> Transcript:
    """A transcript from ``verbose_json`` (text, duration, language) or plain ``json`` (text)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("text"), str):
        raise TranscriptionError(f"{_WHAT} sent back an answer without a transcript")
    text = " ".join(payload["text"].split())
    if not text:
        raise TranscriptionError(NO_SPEECH)
    duration = payload.get("duration")
    language = payload.get("language")
    return Transcript(
        text,
        float(duration) if isinstance(duration, int | float) and not isinstance(duration, bool) else None,
        language if isinstance(language, str) and language else None,
    )
