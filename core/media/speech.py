"""Text to speech: an OpenAI-compatible ``POST {base_url}/audio/speech``, for answers sent as voice notes.

The body is JSON (``model``, ``input``, ``voice``, ``response_format``) and the answer is the audio itself
(OpenAI's "Create speech"; the same endpoint is served by other providers and by self-hosted servers such as
openedai-speech or Kokoro-FastAPI). ``opus`` is OGG/Opus, what Telegram plays as a voice note. OpenAI takes
at most 4096 characters of input: a longer text is cut at the end of its last sentence that fits. The audio
is read up to a cap, so a server that never stops sending cannot fill the memory.
"""

from __future__ import annotations

import asyncio
import json
import re

import httpx

from ._http import endpoint, host_of, status_message
from .errors import SpeechError

__all__ = ["MAX_SPEECH_BYTES", "MAX_SPEECH_INPUT", "speech_input", "synthesize"]

_WHAT = "text-to-speech"
#: OpenAI's limit on ``input``
MAX_SPEECH_INPUT = 4096
#: the most audio read back (4096 characters are about five minutes of speech, a few MB in any format)
MAX_SPEECH_BYTES = 25 * 1024 * 1024
#: an error body is read this far (it is only quoted, cut short)
_ERROR_BYTES = 64 * 1024
#: what each format's bytes start with, where it has a signature: a 200 with an HTML page is no audio
_MAGIC = {"opus": (b"OggS",), "flac": (b"fLaC",), "wav": (b"RIFF",), "mp3": (b"ID3", b"\xff")}
#: the end of a sentence: its mark, then a space or the end of the text
_SENTENCE_END = re.compile(r"[.!?…。！？](?=\s|$)")


def speech_input(text: str, limit: int = MAX_SPEECH_INPUT) -> str:
    """``text`` as it is spoken: at most ``limit`` characters, cut at the end of a sentence (else of a word)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = text[:limit]
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] > limit // 2:
        return head[:ends[-1]]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip()


async def synthesize(
    text: str,
    *,
    base_url: str,
    model: str,
    voice: str,
    api_key: str | None,
    timeout: float,  # noqa: ASYNC109 - it caps the whole exchange, which asyncio.timeout does inside
    response_format: str = "opus",
    transport: httpx.AsyncBaseTransport | None = None,
) -> bytes:
    """The audio of ``text`` spoken by ``voice`` (``response_format``: opus, mp3, aac, flac, wav, pcm).

    Raises :class:`SpeechError` (its message fit to show a person: never the key, never a URL's path) when
    there is nothing to say, the call fails or times out (``timeout`` caps the whole exchange), or the
    answer is no audio of that format.
    """
    spoken = speech_input(text)
    if not spoken:
        raise SpeechError(f"{_WHAT} was given no text to speak")
    url = endpoint(base_url, "/audio/speech")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    body = {"model": model, "input": spoken, "voice": voice, "response_format": response_format}
    try:
        async with httpx.AsyncClient(transport=transport) as client, asyncio.timeout(timeout):
            async with client.stream("POST", url, json=body, headers=headers, timeout=timeout) as response:
                if response.status_code >= 400:
                    raw = await _read(response, _ERROR_BYTES, cut=True)
                    raise SpeechError(status_message(_WHAT, response.status_code, _json(raw),
                                                     raw.decode("utf-8", "replace"), api_key))
                audio = await _read(response, MAX_SPEECH_BYTES, cut=False)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise SpeechError(f"{_WHAT} timed out after {timeout:g} s") from exc
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise SpeechError(f"{_WHAT} could not be reached at {host_of(url)}") from exc
    if not audio:
        raise SpeechError(f"{_WHAT} sent back no audio")
    magic = _MAGIC.get(response_format)
    if magic is not None and not audio.startswith(magic):
        raise SpeechError(f"{_WHAT} sent back something that is not {response_format} audio")
    return audio


async def _read(response: httpx.Response, limit: int, *, cut: bool) -> bytes:
    """The body up to ``limit`` bytes: the rest dropped (``cut``), or a ``SpeechError``."""
    chunks: list[bytes] = []
    total = 0
    async for chunk in response.aiter_bytes():
        total += len(chunk)
        if total > limit:
            if cut:
                chunks.append(chunk[: len(chunk) - (total - limit)])
                break
            raise SpeechError(f"{_WHAT} sent back more than {limit // (1024 * 1024)} MB of audio")
        chunks.append(chunk)
    return b"".join(chunks)


def _json(raw: bytes) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        return None
