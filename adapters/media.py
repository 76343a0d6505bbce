"""What a message carries besides its text: the attachments an adapter reports, and how their bytes arrive.

An adapter only *describes* an attachment (``Attachment``: its kind, the
platform's own handle for it, what the platform declared about it). Nothing is
downloaded until the router has let the sender in; then the gateway calls
``Adapter.fetch(attachment, limit=...)`` and reads the bytes as they arrive.
Every adapter fetches only from its platform's own file endpoints (a Telegram
``file_id`` through ``getFile``, a Discord CDN URL the gateway event carried, a
Slack ``url_private_download`` with the bot token), never from a URL a person
wrote in a message.

The sender's file name is shown to the model and the person, never used as a
path; the declared type and size are hints (the gateway sniffs the bytes and
counts them itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

__all__ = ["Attachment", "AttachmentKind", "OutboundFile"]


class AttachmentKind(StrEnum):
    IMAGE = "image"  # a photo, a screenshot, a static sticker
    VOICE = "voice"  # a voice note (recorded in the app)
    AUDIO = "audio"  # an audio file; a video note's sound
    VIDEO = "video"  # a video (described, not watched)
    DOCUMENT = "document"  # any other file


@dataclass(frozen=True)
class Attachment:
    """One file that came with a message, as its platform described it."""

    kind: AttachmentKind
    #: the platform's own handle: a Telegram ``file_id``, a Discord or Slack file URL; "" when
    #: ``data`` carries the bytes
    ref: str
    #: the sender's name for it, shown as it is; never a path
    name: str | None = None
    #: the type the platform declared (the bytes are sniffed again)
    mime: str | None = None
    #: the size the platform declared, in bytes (a larger one is refused before any download)
    size: int | None = None
    #: seconds, where the platform says (voice notes, audio)
    duration: float | None = None
    #: the bytes themselves, where the message carried them inline (the HTTP API's data URLs)
    data: bytes | None = None
    #: the platform's own id of the file, stable across messages (dedupes an album's parts)
    unique_id: str | None = None


@dataclass(frozen=True)
class OutboundFile:
    """A file the agent sends: already stored by the gateway (content-addressed, read-only)."""

    #: where its bytes are (under ``$HERMES_HOME/media/``); never a path the model wrote
    path: Path
    #: the name the person sees
    name: str
    #: sniffed from its bytes
    mime: str
    #: IMAGE: shown as a photo where the platform can; VOICE: a voice note (OGG/Opus); else a file
    kind: AttachmentKind
    size: int
    #: the gateway's id of it (its sha256): links (the HTTP API's ``/v1/files/<id>``) name it
    id: str = ""
