"""How an answer's files go to Telegram: which method sends each, and which of them go together as albums.

An image is a photo (``sendPhoto``) when Telegram will take it as one: at most 10 MiB, width + height at
most 10000, the longer side at most 20 times the shorter ("sendPhoto" in the Bot API reference); else,
or when its size cannot be read, it goes as a document (which shows it as a file, at full quality). A
voice note is ``sendVoice`` when it is in a format Telegram plays as one (OGG/Opus, MP3, M4A), other
audio ``sendAudio``, everything else ``sendDocument`` with its name.

Files keep their order. Runs of photos go as albums (``sendMediaGroup``, 2 to 10 a call, together no larger
than one upload may be), and so do runs of documents and of audio files (Telegram does not mix them with
anything else in an album); a voice note always goes alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

from ..media import AttachmentKind, OutboundFile

__all__ = ["ALBUM_MAX", "PHOTO_MAX_BYTES", "Method", "method_for", "next_group", "photo_fits"]

#: the most files an album holds
ALBUM_MAX = 10
PHOTO_MAX_BYTES = 10 * 1024 * 1024
_PHOTO_SIDES_MAX = 10_000
_PHOTO_RATIO_MAX = 20
#: what ``sendVoice`` plays as a voice note ("sendVoice": OGG with Opus, MP3, M4A)
_VOICE_TYPES = frozenset({"audio/ogg", "audio/opus", "application/ogg", "audio/mpeg", "audio/mp3", "audio/mp4",
                          "audio/m4a", "audio/x-m4a"})


class Method(StrEnum):
    """The Bot API method that sends a file, by the name of its file parameter."""

    PHOTO = "photo"
    DOCUMENT = "document"
    AUDIO = "audio"
    VOICE = "voice"


def photo_fits(path: Path, size: int) -> bool | None:
    """Whether Telegram takes the image at ``path`` as a photo; None: its size in pixels cannot be read
    (Telegram is asked, and a refusal sends it as a document). Reads the header only: call it in a thread."""
    if size > PHOTO_MAX_BYTES:
        return False
    from PIL import Image  # here: the adapter loads without Pillow until an image is sent

    try:
        with Image.open(path) as image:
            width, height = image.size
    except Image.DecompressionBombError:
        return False  # more pixels than any photo Telegram takes
    except Exception:  # whatever Pillow cannot read, Telegram is asked about
        return None
    short, long = sorted((width, height))
    return short > 0 and width + height <= _PHOTO_SIDES_MAX and long <= _PHOTO_RATIO_MAX * short


def method_for(file: OutboundFile, fits: bool | None) -> Method:
    """The method for ``file``; ``fits``: ``photo_fits`` of an image."""
    mime = file.mime.split(";", 1)[0].strip().lower()
    if file.kind is AttachmentKind.IMAGE:
        return Method.DOCUMENT if fits is False else Method.PHOTO
    if file.kind is AttachmentKind.VOICE:
        return Method.VOICE if mime in _VOICE_TYPES else Method.DOCUMENT
    if file.kind is AttachmentKind.AUDIO:
        return Method.AUDIO
    return Method.DOCUMENT


def next_group(methods: Sequence[Method], sizes: Sequence[int], start: int, *, limit: int,
               alone: frozenset[int] = frozenset()) -> list[int]:
    """The indexes of the next call from ``start``: an album of the run of one method there (at most
    ``ALBUM_MAX``, their ``sizes`` together within ``limit``: one request never carries more than a file
    may be), or the one file (a voice note, a run of one, a file in ``alone``)."""
    method = methods[start]
    group = [start]
    total = sizes[start]
    if method is Method.VOICE or start in alone:
        return group
    while len(group) < ALBUM_MAX:
        i = group[-1] + 1
        if i >= len(methods) or methods[i] is not method or i in alone or total + sizes[i] > limit:
            break
        group.append(i)
        total += sizes[i]
    return group
