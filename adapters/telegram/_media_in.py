"""The files a Telegram message carries, as ``Attachment``s (described, not downloaded).

- photo: the largest PhotoSize whose declared size is within the download limit (Telegram sends
  several sizes of every photo); when none is, the smallest, so that the download refuses it
  plainly instead of the photo vanishing;
- document -> DOCUMENT (its name, type, size); voice -> VOICE; audio -> AUDIO; a video note ->
  AUDIO (its sound; the bytes are an MP4); video -> VIDEO;
- a static sticker -> IMAGE (WebP); an animated or video sticker is no attachment: its emoji
  is what the person said (``[sticker 😀]``).

``ref`` is the ``file_id`` (what ``getFile`` takes), ``unique_id`` the ``file_unique_id``.
"""

from __future__ import annotations

import datetime as dtm
from typing import Protocol

from telegram import Message, PhotoSize

from ..base import MalformedUpdateError
from ..media import Attachment, AttachmentKind

__all__ = ["media_of"]


def media_of(msg: Message, limit: int) -> tuple[tuple[Attachment, ...], str | None]:
    """The attachments of ``msg`` and, for a sticker shown as its emoji, that text (else None)."""
    if msg.photo:
        return (_photo(msg.photo, limit),), None
    if msg.sticker is not None:
        sticker = msg.sticker
        if sticker.is_animated is True or sticker.is_video is True:
            emoji = _text(sticker.emoji, "sticker.emoji")
            return (), f"[sticker {emoji}]" if emoji else "[sticker]"
        return (_file(AttachmentKind.IMAGE, sticker, mime="image/webp"),), None
    if msg.voice is not None:
        voice = msg.voice
        return (_file(AttachmentKind.VOICE, voice, mime=_text(voice.mime_type, "voice.mime_type") or "audio/ogg",
                      duration=_seconds(voice.duration)),), None
    if msg.video_note is not None:
        note = msg.video_note
        return (_file(AttachmentKind.AUDIO, note, mime="video/mp4", duration=_seconds(note.duration)),), None
    if msg.audio is not None:
        audio = msg.audio
        return (_file(AttachmentKind.AUDIO, audio, name=_text(audio.file_name, "audio.file_name"),
                      mime=_text(audio.mime_type, "audio.mime_type"), duration=_seconds(audio.duration)),), None
    if msg.video is not None:
        video = msg.video
        return (_file(AttachmentKind.VIDEO, video, name=_text(video.file_name, "video.file_name"),
                      mime=_text(video.mime_type, "video.mime_type"), duration=_seconds(video.duration)),), None
    if msg.document is not None:
        doc = msg.document
        return (_file(AttachmentKind.DOCUMENT, doc, name=_text(doc.file_name, "document.file_name"),
                      mime=_text(doc.mime_type, "document.mime_type")),), None
    return (), None


def _photo(sizes: tuple[PhotoSize, ...], limit: int) -> Attachment:
    usable = [s for s in sizes if isinstance(s, PhotoSize)]
    if not usable:
        raise MalformedUpdateError("photo has no sizes")

    def area(s: PhotoSize) -> int:
        return _count(s.width, "photo.width") * _count(s.height, "photo.height")

    # A size Telegram did not declare may still fit; the download checks it.
    fitting = [s for s in usable if s.file_size is None or _count(s.file_size, "photo.file_size") <= limit]
    best = max(fitting, key=area) if fitting else min(usable, key=area)
    return _file(AttachmentKind.IMAGE, best, mime="image/jpeg")


class _HasFile(Protocol):
    """What every Telegram file object has (PhotoSize, Document, Voice, ...)."""

    @property
    def file_id(self) -> str: ...

    @property
    def file_unique_id(self) -> str: ...

    @property
    def file_size(self) -> int | None: ...


def _file(kind: AttachmentKind, obj: _HasFile, *, name: str | None = None, mime: str | None = None,
          duration: float | None = None) -> Attachment:
    file_id = obj.file_id
    if not isinstance(file_id, str) or not file_id:
        raise MalformedUpdateError(f"{kind} has no file_id")
    size = obj.file_size
    return Attachment(
        kind=kind,
        ref=file_id,
        name=name,
        mime=mime,
        size=None if size is None else _count(size, "file_size"),
        duration=duration,
        unique_id=_text(obj.file_unique_id, "file_unique_id"),
    )


def _text(value: object, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise MalformedUpdateError(f"{what} is not a string")
    return value or None


def _count(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise MalformedUpdateError(f"{what} is not a count")
    return value


def _seconds(value: object) -> float | None:
    # PTB gives durations as timedelta when PTB_TIMEDELTA is set (our client sets it), else as int.
    if value is None:
        return None
    if isinstance(value, dtm.timedelta):
        return value.total_seconds()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise MalformedUpdateError("duration is not a number")
