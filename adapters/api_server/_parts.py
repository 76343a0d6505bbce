"""A user message's ``content`` as the OpenAI Chat Completions API words it: a string, or a list of
content parts (text, ``image_url``, ``input_audio``, ``file``), read into text and attachments.

Media arrives inline: a data URL (``data:image/png;base64,...``) or, for audio, bare
base64. Each media part becomes an ``Attachment`` carrying its decoded bytes (``ref``
is ""); the file name is kept as the sender's label, never used as a path. A remote
``image_url`` (``http(s)://``) becomes an attachment with the URL as ``ref`` and no
bytes, when remote media is allowed; the adapter's ``fetch`` downloads it later,
after the router let the sender in. Anything that cannot be taken as it is raises
``ContentError`` with the status and the words of the OpenAI-style refusal.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any

from ..base import MalformedUpdateError
from ..media import Attachment, AttachmentKind

__all__ = ["MAX_MEDIA_PARTS", "Content", "ContentError", "read_content"]

MAX_MEDIA_PARTS = 10
_MAX_NAME_CHARS = 255
_MAX_URL_CHARS = 8192
_AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg"}
_SPACE = re.compile(r"\s")
_MIME = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*")
_PART_TYPES = "'text', 'image_url', 'input_audio' or 'file'"
_REMOTE_SETTING = "platforms.api_server.allow_remote_media"
_MEDIA_SETTING = "platforms.api_server.max_media_bytes"


class ContentError(MalformedUpdateError):
    """A content part that cannot be taken: the HTTP status, the message a client reads, the
    OpenAI-style code, and ``param`` (where in the request, ``messages[0].content[1]``)."""

    def __init__(self, status: int, message: str, code: str, param: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param


@dataclass(frozen=True)
class Content:
    text: str
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True)
class _Limits:
    max_media_bytes: int
    allow_remote: bool


def read_content(content: Any, *, where: str, max_media_bytes: int, allow_remote: bool) -> Content:
    """``content`` (a message's ``content``, found at ``where``) read into text and attachments."""
    if isinstance(content, str):
        return Content(content)
    if not isinstance(content, list):
        raise ContentError(400, f"{where} must be a string or a list of content parts ({_PART_TYPES}).",
                           "invalid_content", where)
    limits = _Limits(max_media_bytes, allow_remote)
    texts: list[str] = []
    attachments: list[Attachment] = []
    for n, part in enumerate(content):
        at = f"{where}[{n}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise ContentError(400, f"{at}.text must be a string.", "invalid_content", f"{at}.text")
            texts.append(text)
            continue
        if kind not in ("image_url", "input_audio", "file"):
            shown = f"of type {kind!r}" if isinstance(kind, str) else "without a string 'type'"
            raise ContentError(400, f"{at} is a content part {shown[:80]}; this API takes {_PART_TYPES}.",
                               "invalid_content", f"{at}.type")
        if len(attachments) == MAX_MEDIA_PARTS:
            raise ContentError(400, f"A message may carry at most {MAX_MEDIA_PARTS} images, audio clips and "
                                    "files.", "too_many_media", at)
        assert isinstance(part, dict)
        attachments.append(_media(kind, part.get(kind), at, limits))
    return Content("\n".join(texts), tuple(attachments))


def _media(kind: str, body: Any, at: str, limits: _Limits) -> Attachment:
    if kind == "image_url":
        return _image(body, f"{at}.image_url", limits)
    if kind == "input_audio":
        return _audio(body, f"{at}.input_audio", limits)
    return _file(body, f"{at}.file", limits)


def _object(body: Any, at: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ContentError(400, f"{at} must be an object.", "invalid_content", at)
    return body


def _image(body: Any, at: str, limits: _Limits) -> Attachment:
    # Some clients send the URL itself rather than {"url": ...}; ``detail`` is not used: the
    # gateway sizes every image for the model itself.
    url = body if isinstance(body, str) else _object(body, at).get("url")
    at = at if isinstance(body, str) else f"{at}.url"
    if not isinstance(url, str) or not url:
        raise ContentError(400, f"{at} must be a data URL (data:image/png;base64,...).", "invalid_content", at)
    scheme = url[:8].lower()
    if scheme.startswith(("http://", "https://")):
        return _remote(url, at, limits)
    if not scheme.startswith("data:"):
        raise ContentError(400, f"{at} must be a data URL (data:image/png;base64,...) or an http(s) URL.",
                           "invalid_media", at)
    mime, data = _data_url(url, at, limits)
    if mime is None or not mime.startswith("image/"):
        raise ContentError(400, f"{at} is a data URL of type {mime or 'none'}; an image_url must hold an image "
                                "(image/png, image/jpeg, image/webp, image/gif).", "invalid_media", at)
    return Attachment(AttachmentKind.IMAGE, "", mime=mime, size=len(data), data=data)


def _remote(url: str, at: str, limits: _Limits) -> Attachment:
    if not limits.allow_remote:
        raise ContentError(400, f"{at} is a remote URL, and this gateway does not download remote media: send the "
                                f"image inline as a data URL (data:image/png;base64,...), or set {_REMOTE_SETTING}: "
                                "true.", "remote_media_disabled", at)
    if len(url) > _MAX_URL_CHARS or any(c.isspace() or not c.isprintable() for c in url):
        raise ContentError(400, f"{at} is not a URL this gateway can download (at most {_MAX_URL_CHARS} "
                                "characters, no spaces).", "invalid_media", at)
    return Attachment(AttachmentKind.IMAGE, url)


def _audio(body: Any, at: str, limits: _Limits) -> Attachment:
    fields = _object(body, at)
    fmt = fields.get("format")
    if not isinstance(fmt, str) or fmt not in _AUDIO_TYPES:
        raise ContentError(400, f"{at}.format must be 'wav' or 'mp3'.", "invalid_media", f"{at}.format")
    raw = fields.get("data")
    if isinstance(raw, str) and raw[:5].lower() == "data:":
        raise ContentError(400, f"{at}.data must be the audio's bare base64, without a data: prefix.",
                           "invalid_media", f"{at}.data")
    data = _base64(raw, f"{at}.data", limits)
    return Attachment(AttachmentKind.VOICE, "", mime=_AUDIO_TYPES[fmt], size=len(data), data=data)


def _file(body: Any, at: str, limits: _Limits) -> Attachment:
    fields = _object(body, at)
    url = fields.get("file_data")
    if not isinstance(url, str):
        hint = (" (there is no Files API here to take a file_id)" if "file_id" in fields else "")
        raise ContentError(400, f"{at}.file_data must be the file as a data URL "
                                f"(data:application/pdf;base64,...){hint}.", "invalid_content", f"{at}.file_data")
    if url[:5].lower() != "data:":
        raise ContentError(400, f"{at}.file_data must be a data URL (data:application/pdf;base64,...).",
                           "invalid_media", f"{at}.file_data")
    mime, data = _data_url(url, f"{at}.file_data", limits)
    name = fields.get("filename")
    if name is not None and (not isinstance(name, str) or len(name) > _MAX_NAME_CHARS or not _is_text(name)):
        raise ContentError(400, f"{at}.filename must be text of at most {_MAX_NAME_CHARS} characters.",
                           "invalid_content", f"{at}.filename")
    return Attachment(AttachmentKind.DOCUMENT, "", name=name or None, mime=mime, size=len(data), data=data)


def _data_url(url: str, at: str, limits: _Limits) -> tuple[str | None, bytes]:
    """A ``data:<type>[;param...];base64,<data>`` URL's type (None when it names none) and bytes."""
    head, comma, payload = url.partition(",")
    params = head[5:].split(";")
    mime = params[0].strip().lower() or None
    if not comma or "base64" not in (p.strip().lower() for p in params[1:]):
        raise ContentError(400, f"{at} must be a base64 data URL (data:<type>;base64,<data>).", "invalid_media", at)
    if mime is not None and not _MIME.fullmatch(mime):
        raise ContentError(400, f"{at} names no media type a file can have ({mime[:40]!r}).", "invalid_media", at)
    return mime, _base64(payload, at, limits)


def _base64(raw: Any, at: str, limits: _Limits) -> bytes:
    if not isinstance(raw, str) or not raw:
        raise ContentError(400, f"{at} must be base64 text.", "invalid_media", at)
    # Base64 wrapped in lines (as MIME writes it) is still base64.
    text = _SPACE.sub("", raw) if _SPACE.search(raw) else raw
    # Refused before decoding: four base64 characters make three bytes.
    if len(text) // 4 * 3 - text[-2:].count("=") > limits.max_media_bytes:
        raise _too_large(len(text) // 4 * 3, at, limits)
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ContentError(400, f"{at} is not valid base64.", "invalid_media", at) from None
    if not data:
        raise ContentError(400, f"{at} holds no bytes.", "invalid_media", at)
    if len(data) > limits.max_media_bytes:
        raise _too_large(len(data), at, limits)
    return data


def _too_large(size: int, at: str, limits: _Limits) -> ContentError:
    return ContentError(413, f"{at} is about {size} bytes; a file may be at most {limits.max_media_bytes} bytes "
                             f"({_MEDIA_SETTING}).", "media_too_large", at)


def _is_text(text: str) -> bool:
    """False for a lone UTF-16 surrogate (valid JSON, not text) or a control character."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return text.isprintable()
