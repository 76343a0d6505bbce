"""One stored attachment, read by what its bytes are: an image, a voice note, a document, or a file.

Each reading returns a ``Piece``: the block of text the user message keeps for
it (a marker the model and any v11 reader can read), the content parts the
model sees in this turn, its attachment rows, and what the person should be
told. The CPU-heavy steps (decoding, resizing, reading a PDF) run in a thread.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from typing import Any

import structlog

from adapters.media import Attachment, AttachmentKind
from core.media import (
    PreparedImage,
    Sniffed,
    Transcriber,
    TranscriptionError,
    VisionError,
    describe_image,
    display_name,
    image_marker,
    image_part,
    prepare_image,
    read_document,
)
from storage import MediaStore, StoredBlob

log = structlog.get_logger("hermes.media")

__all__ = ["Kinds", "Piece", "VisionSettings"]

#: what the person is told when voice arrives and nothing can transcribe it
NO_STT = ("I cannot listen to voice messages yet: speech-to-text is not set up. Set stt.base_url (an "
          "OpenAI-compatible /v1/audio/transcriptions endpoint such as OpenAI, Groq or a whisper server) "
          "and stt.api_key in config.yaml, or install the [stt-local] extra and set stt.provider: local.")
NO_VISION = ("The configured model cannot see images (model.vision is off and no model.vision_auxiliary "
             "is set), so I could not look at {label}.")


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = round(seconds)
    return f" {s // 60}:{s % 60:02d}"


@dataclass(frozen=True)
class VisionSettings:
    """How images reach a model: as pixels (``enabled``), described by ``auxiliary``, or not at all."""

    enabled: bool = False
    auxiliary: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    timeout: float = 60.0


@dataclass
class Piece:
    text: str
    parts: tuple[dict[str, Any], ...] = ()
    problems: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    transcript: str | None = None
    #: the agent can read something of it (False: only that it came, unseen or unheard)
    useful: bool = True


def _row(attachment: Attachment, blob: StoredBlob, kind: str, mime: str, description: str | None) -> dict[str, Any]:
    return {"kind": kind, "mime": mime, "name": attachment.name, "size": blob.size, "sha256": blob.sha256,
            "description": description}


class Kinds:
    def __init__(self, blobs: MediaStore, *, image_max_px: int, max_inline_bytes: int, pdf_max_pages: int,
                 vision: VisionSettings, transcriber: Transcriber | None) -> None:
        self._blobs = blobs
        self._max_px = image_max_px
        self._max_inline = max_inline_bytes
        self._pdf_pages = pdf_max_pages
        self._vision = vision
        self._transcriber = transcriber

    async def aclose(self) -> None:
        close = getattr(self._transcriber, "aclose", None)
        if close is not None:
            await close()

    async def read(self, attachment: Attachment, blob: StoredBlob, data: bytes, sniffed: Sniffed) -> Piece:
        if sniffed.kind == "image":
            return await self._image(attachment, blob, data, sniffed)
        if sniffed.kind == "audio" or (attachment.kind in (AttachmentKind.VOICE, AttachmentKind.AUDIO) \
                and sniffed.kind == "video"):  # a video note is heard, not watched
            return await self._audio(attachment, blob, data, sniffed)
        return await self._document(attachment, blob, data, sniffed)

    async def _image(self, attachment: Attachment, blob: StoredBlob, data: bytes, sniffed: Sniffed) -> Piece:
        img: PreparedImage = await asyncio.to_thread(prepare_image, data, max_px=self._max_px)
        digest = hashlib.sha256(img.data).hexdigest()
        label = display_name(attachment.name) or "the image"
        rows = [_row(attachment, blob, "image", sniffed.mime, None)]
        v = self._vision
        if v.enabled:
            # What the model sees is kept too: the next turns send it again, found by its digest.
            shown = await self._blobs.put_bytes(img.data)
            rows.append(_row(attachment, shown, "image_shown", img.mime, None))
            marker = image_marker(shown.sha256, attachment.name, img.width, img.height, None)
            return Piece(marker, parts=(image_part(img),), rows=rows)
        if v.auxiliary and v.base_url:
            try:
                description = await describe_image(img, base_url=v.base_url, model=v.auxiliary,
                                                   api_key=v.api_key, timeout=v.timeout)
            except VisionError as exc:
                log.warning("media.vision_failed", error=str(exc))
                return Piece(image_marker(digest, attachment.name, img.width, img.height, "(not seen)"),
                             problems=[f"I could not look at {label}: {exc}"], rows=rows, useful=False)
            rows[0]["description"] = description
            return Piece(image_marker(digest, attachment.name, img.width, img.height, description), rows=rows)
        return Piece(image_marker(digest, attachment.name, img.width, img.height, "(not seen)"),
                     problems=[NO_VISION.format(label=label)], rows=rows, useful=False)

    async def _audio(self, attachment: Attachment, blob: StoredBlob, data: bytes, sniffed: Sniffed) -> Piece:
        voice = attachment.kind is AttachmentKind.VOICE
        what = "voice" if voice else "audio"
        name = display_name(attachment.name).replace("]", ")")
        label = name or ("the voice message" if voice else "the audio")
        head = f"[{what}{'' if voice else ' ' + name}".rstrip()
        rows = [_row(attachment, blob, what, sniffed.mime, None)]
        if self._transcriber is None:
            return Piece(f"{head}{_clock(attachment.duration)}] (not transcribed)", problems=[NO_STT], rows=rows,
                         useful=False)
        try:
            transcript = await self._transcriber.transcribe(data, mime=sniffed.mime,
                                                            name=attachment.name or f"{what}.{sniffed.ext or 'bin'}")
        except TranscriptionError as exc:
            log.warning("media.transcription_failed", error=str(exc))
            return Piece(f"{head}{_clock(attachment.duration)}] (not transcribed)",
                         problems=[f"I could not transcribe {label}: {exc}"], rows=rows, useful=False)
        duration = attachment.duration if attachment.duration is not None else transcript.duration
        rows[0]["description"] = transcript.text
        return Piece(f"{head}{_clock(duration)}] {transcript.text}", rows=rows, transcript=transcript.text)

    async def _document(self, attachment: Attachment, blob: StoredBlob, data: bytes, sniffed: Sniffed) -> Piece:
        doc = await asyncio.to_thread(read_document, data, sniffed, attachment.name,
                                      max_inline_bytes=self._max_inline, pdf_max_pages=self._pdf_pages)
        rows = [_row(attachment, blob, "document" if sniffed.kind in ("pdf", "text") else sniffed.kind,
                     sniffed.mime, doc.note)]
        if doc.text is not None:
            cut = " (cut short)" if doc.truncated else ""
            return Piece(f"[file {doc.note}{cut}]\n{doc.text}", rows=rows)
        return Piece(f"[file {doc.note}, saved at {blob.path}]", rows=rows)
