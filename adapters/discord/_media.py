"""A Discord message's attachments: what they are, and where their bytes may come from.

Discord's attachment object carries ``url`` (on cdn.discordapp.com, signed in
its query: ``ex``, ``is``, ``hm``), ``proxy_url`` (media.discordapp.net),
``filename``, ``size``, ``content_type`` and, for a voice message (message flag
``IS_VOICE_MESSAGE``), ``duration_secs`` and ``waveform``. The CDN wants no
token, so none is ever sent there; only those two hosts (and the configured
``base_url``'s origin: a proxy, or the emulator in tests) are fetched from.
"""

from __future__ import annotations

import discord

from ..media import Attachment, AttachmentKind

__all__ = ["CDN_HOSTS", "attachments_of"]

CDN_HOSTS = ("cdn.discordapp.com", "media.discordapp.net")


def _kind(item: discord.Attachment, voice_message: bool) -> AttachmentKind:
    mime = (item.content_type or "").split(";", 1)[0].strip().lower()
    if item.duration is not None or (voice_message and not mime.startswith(("image/", "video/"))):
        return AttachmentKind.VOICE
    for prefix, kind in (("image/", AttachmentKind.IMAGE), ("audio/", AttachmentKind.AUDIO),
                         ("video/", AttachmentKind.VIDEO)):
        if mime.startswith(prefix):
            return kind
    return AttachmentKind.DOCUMENT


def attachments_of(message: discord.Message) -> tuple[Attachment, ...]:
    """The message's files as the gateway event described them (nothing is downloaded)."""
    voice_message = bool(message.flags.voice)
    found: list[Attachment] = []
    for item in message.attachments or ():
        if not isinstance(item, discord.Attachment) or not isinstance(item.url, str) or not item.url:
            continue
        size = item.size if isinstance(item.size, int) and item.size >= 0 else None
        duration = float(item.duration) if isinstance(item.duration, int | float) else None
        found.append(Attachment(
            kind=_kind(item, voice_message),
            ref=item.url,
            name=item.filename if isinstance(item.filename, str) else None,
            mime=item.content_type if isinstance(item.content_type, str) else None,
            size=size,
            duration=duration,
            unique_id=str(item.id),
        ))
    return tuple(found)
