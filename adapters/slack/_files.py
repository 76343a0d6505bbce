"""A Slack message's files: what they are, and how their bytes are had.

A ``message`` event (subtype ``file_share``) carries ``files``: each with
``id``, ``name``, ``mimetype``, ``filetype``, ``size`` and ``url_private`` /
``url_private_download`` on files.slack.com. Those URLs want the bot token
(``Authorization: Bearer xoxb-...``, scope ``files:read``). Without it (or
without the scope) Slack answers 200 with its HTML sign-in page instead of the
file: ``refuse_login_page`` turns that into ``MediaUnavailableError`` rather
than a file. An audio clip recorded in Slack has ``subtype: slack_audio`` and
``duration_ms``; a file that is gone (``mode: tombstone``) or hidden by the
workspace's plan has no URL and is left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp

from ..base import MediaUnavailableError
from ..media import Attachment, AttachmentKind

__all__ = ["FILE_HOSTS", "attachments_of", "refuse_login_page"]

FILE_HOSTS = ("files.slack.com",)
#: Slack's own recordings: a clip recorded in the message box is a voice note
_VOICE_SUBTYPES = frozenset({"slack_audio"})
_KINDS = (("image/", AttachmentKind.IMAGE), ("audio/", AttachmentKind.AUDIO), ("video/", AttachmentKind.VIDEO))


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _kind(mime: str | None, subtype: str | None) -> AttachmentKind:
    if subtype in _VOICE_SUBTYPES:
        return AttachmentKind.VOICE
    bare = (mime or "").split(";", 1)[0].strip().lower()
    return next((kind for prefix, kind in _KINDS if bare.startswith(prefix)), AttachmentKind.DOCUMENT)


def _attachment(item: Mapping[str, Any]) -> Attachment | None:
    url = _str(item.get("url_private_download")) or _str(item.get("url_private"))
    if url is None or item.get("mode") in ("tombstone", "hidden_by_limit"):
        return None
    mime = _str(item.get("mimetype"))
    size = item.get("size")
    millis = item.get("duration_ms")
    return Attachment(
        kind=_kind(mime, _str(item.get("subtype"))),
        ref=url,
        name=_str(item.get("name")) or _str(item.get("title")),
        mime=mime,
        size=size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None,
        duration=millis / 1000 if isinstance(millis, int | float) and not isinstance(millis, bool) else None,
        unique_id=_str(item.get("id")),
    )


def attachments_of(event: Mapping[str, Any]) -> tuple[Attachment, ...]:
    """The event's files as Slack described them (nothing is downloaded)."""
    files = event.get("files")
    if not isinstance(files, list):
        return ()
    found = (_attachment(item) for item in files if isinstance(item, Mapping))
    return tuple(a for a in found if a is not None)


def refuse_login_page(response: aiohttp.ClientResponse, attachment: Attachment) -> None:
    """Slack's answer to a request without a token it accepts: 200 and its HTML sign-in page."""
    declared = (attachment.mime or "").split(";", 1)[0].strip().lower()
    if response.content_type == "text/html" and declared != "text/html":
        raise MediaUnavailableError(
            "Slack answered with its sign-in page instead of the file: the bot token was refused, or the app "
            "lacks the files:read scope (add it under OAuth & Permissions and reinstall the app)"
        )
