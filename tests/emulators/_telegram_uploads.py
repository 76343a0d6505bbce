"""Files the bot sends to ``FakeTelegram``: ``sendPhoto``, ``sendDocument``, ``sendVoice``, ``sendAudio``
and ``sendMediaGroup``, as the Bot API documents them ("Sending files").

A file is uploaded as ``multipart/form-data``: in the part named after the parameter (``photo``), or in
any part that the parameter names as ``attach://<part>`` (how ``sendMediaGroup``'s ``media`` JSON names
its files). A string that is neither is a ``file_id`` of a file uploaded before (sent again without an
upload); anything else is ``Bad Request: wrong file identifier/HTTP URL specified`` (URLs are not
emulated). What each upload carried (part name, file name, declared type, bytes) is kept in
:attr:`Uploads.files` and on the ``sent`` record of its message (``files``), so tests assert what went up.

Limits, checked as Telegram checks them:

* a file over :attr:`Uploads.upload_limit` (50 MiB, the cloud Bot API's): 413 ``Request Entity Too
  Large``, before anything else is looked at (api.telegram.org refuses the request outright);
* an empty file: ``Bad Request: file must be non-empty``;
* a photo over :attr:`Uploads.photo_limit` (10 MiB): ``Bad Request: file of size <n> bytes is too big for
  a photo; the maximum size is 10485760 bytes``;
* a caption over 1024 characters (after entity parsing): ``Bad Request: message caption is too long``;
* a photo that is no image (read with Pillow): ``Bad Request: IMAGE_PROCESS_FAILED``; one whose width
  + height exceed 10000 or whose sides' ratio exceeds 20: ``Bad Request: PHOTO_INVALID_DIMENSIONS``;
* a voice note to a user whose privacy forbids them (:meth:`Uploads.forbid_voice`): ``Bad Request:
  VOICE_MESSAGES_FORBIDDEN``.

``sendMediaGroup``: ``media`` is a JSON array of ``InputMediaPhoto`` / ``InputMediaDocument`` /
``InputMediaAudio``; empty: ``there are no messages to send``; more than 10: ``too many messages to send
as an album``; documents (or audio) mixed with other types: ``document can't be mixed with other media
types``; an ``attach://`` part that is missing: ``can't parse InputMedia: media not found``. A photo
Telegram's servers cannot process fails the whole album as ``failed to send message #<position> with
the error message "<error>"``. As the official server does, one item is sent as a single message,
outside any album. The answer is the list of messages, which share a ``media_group_id``.

Messages carry ``photo`` (a list of ``PhotoSize``, smallest first, the largest at most 2560 pixels a
side as Telegram recompresses it), ``document`` (``file_name`` as uploaded, without any path;
``mime_type`` by its extension), ``voice`` or ``audio``, and ``caption``. A request larger than the fake
server's body cap (64 MiB) is refused by aiohttp itself with a plain 413.

``hold(method)``: the next call of ``method`` waits, before Telegram takes it (nothing is checked,
made or recorded yet), as a request whose upload is still on its way; ``Hold.arrived`` is set when it
comes. ``release()`` lets Telegram take it; ``drop()`` is what happens when the client goes away before
the request was whole: no message is made (the call, if anyone still listens, gets a 400).
"""

from __future__ import annotations

import asyncio
import copy
import io
import itertools
import mimetypes
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PIL import Image, UnidentifiedImageError

if TYPE_CHECKING:
    from .fake_telegram import FakeTelegram

__all__ = ["ALBUM_MAX", "CAPTION_MAX", "PHOTO_MAX", "UPLOAD_MAX", "Hold", "Upload", "Uploads"]

MIB = 1024 * 1024
#: the cloud Bot API's largest upload
UPLOAD_MAX = 50 * MIB
#: the largest photo (TDLib's ``10 << 20``)
PHOTO_MAX = 10 * MIB
CAPTION_MAX = 1024
ALBUM_MAX = 10
#: Telegram's photo rules (sendPhoto): width + height, and the longer side over the shorter
PHOTO_SIDES_MAX = 10_000
PHOTO_RATIO_MAX = 20
#: the boxes of the sizes Telegram makes of a photo; the largest it keeps is 2560
_PHOTO_BOXES = (90, 320, 800, 1280, 2560)

TOO_LARGE = "Request Entity Too Large"
WRONG_FILE = "Bad Request: wrong file identifier/HTTP URL specified"
EMPTY_FILE = "Bad Request: file must be non-empty"
CAPTION_TOO_LONG = "Bad Request: message caption is too long"
IMAGE_PROCESS_FAILED = "IMAGE_PROCESS_FAILED"
PHOTO_INVALID_DIMENSIONS = "PHOTO_INVALID_DIMENSIONS"
VOICE_FORBIDDEN = "Bad Request: VOICE_MESSAGES_FORBIDDEN"
_ATTACH = "attach://"
_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f]")
_GROUPABLE = {"photo": "photo", "video": "photo", "document": "document", "audio": "audio"}


@dataclass(frozen=True)
class Upload:
    """One file as the bot uploaded it."""

    #: the multipart part it came in
    part: str
    #: the file name of the part (as the bot sent it)
    filename: str | None
    #: the type the part declared
    content_type: str | None
    data: bytes
    file_id: str
    file_unique_id: str


class _Refused(Exception):
    """Telegram's servers (not the Bot API's checks) refused a file: ``description`` without "Bad Request"."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class Hold:
    """One upload call held before Telegram takes it (``Uploads.hold``)."""

    def __init__(self, method: str) -> None:
        self.method = method
        #: set when the call has come and is waiting
        self.arrived = asyncio.Event()
        self._take: bool | None = None
        self._decided = asyncio.Event()

    def release(self) -> None:
        """Telegram takes the call as if it had just come."""
        self._take = True
        self._decided.set()

    def drop(self) -> None:
        """The request never became whole: Telegram makes nothing of it."""
        self._take = False
        self._decided.set()

    async def _wait(self, serve: Callable[[dict[str, Any]], Any], p: dict[str, Any]) -> Any:
        from .fake_telegram import BotApiError

        self.arrived.set()
        await self._decided.wait()
        if not self._take:
            raise BotApiError(400, "Bad Request: the request was not complete")
        return serve(p)


class Uploads:
    """The upload methods of one ``FakeTelegram`` (``fake.uploads``) and what they took."""

    def __init__(self, fake: FakeTelegram) -> None:
        self._fake = fake
        #: the largest file accepted (413 above it); tests may lower it
        self.upload_limit = UPLOAD_MAX
        #: the largest photo accepted
        self.photo_limit = PHOTO_MAX
        #: every file uploaded, by ``file_id`` (a photo's sizes each name their upload)
        self.files: dict[str, Upload] = {}
        self._ids = itertools.count(1)
        self._album_ids = itertools.count(13_000_000_000_000_001)
        self._voice_forbidden: set[int] = set()
        self._holds: dict[str, Hold] = {}

    def methods(self) -> list[tuple[str, Callable[[dict[str, Any]], Any]]]:
        """The Bot API methods to register on the fake."""
        served: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
            ("sendPhoto", lambda p: self._send_one(p, "photo")),
            ("sendDocument", lambda p: self._send_one(p, "document")),
            ("sendVoice", lambda p: self._send_one(p, "voice")),
            ("sendAudio", lambda p: self._send_one(p, "audio")),
            ("sendMediaGroup", self._send_media_group),
        ]
        return [(name, self._held(name, serve)) for name, serve in served]

    def hold(self, method: str) -> Hold:
        """The next call of ``method`` waits before Telegram takes it, until released or dropped."""
        held = self._holds[method] = Hold(method)
        return held

    def _held(self, name: str, serve: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        def call(p: dict[str, Any]) -> Any:
            held = self._holds.pop(name, None)
            return serve(p) if held is None else held._wait(serve, p)

        return call

    def forbid_voice(self, user: Any) -> None:
        """``user`` (a private chat) does not take voice notes: sendVoice there is refused."""
        self._voice_forbidden.add(self._fake._resolve_chat(user)["id"])

    def of(self, message: dict[str, Any]) -> Upload:
        """The upload behind a message's photo (its largest size), document, voice or audio."""
        for key in ("document", "voice", "audio"):
            if key in message:
                return self.files[message[key]["file_id"]]
        return self.files[message["photo"][-1]["file_id"]]

    # ------------------------------------------------------------------------------- methods

    def _send_one(self, p: dict[str, Any], kind: str) -> dict[str, Any]:
        from .fake_telegram import BotApiError

        upload = self._file(p, p.get(kind), kind, missing=f"Bad Request: there is no {kind} in the request")
        self._check_size([(kind, upload)])
        caption, entities = self._caption(p)
        chat, thread, target = self._place(p)
        if kind == "voice" and chat["id"] in self._voice_forbidden:
            raise BotApiError(400, VOICE_FORBIDDEN)
        try:
            media = self._media(kind, upload, p)
        except _Refused as exc:
            raise BotApiError(400, f"Bad Request: {exc.description}") from None
        message = self._message(chat, thread, target, kind, media, caption, entities)
        self._record(f"send{kind.capitalize()}", p, message, [upload], target, None)
        return copy.deepcopy(message)

    def _send_media_group(self, p: dict[str, Any]) -> list[dict[str, Any]]:
        from .fake_telegram import BotApiError

        items = p.get("media")
        if items is None or items == "":
            raise BotApiError(400, 'Bad Request: parameter "media" is required')
        if not isinstance(items, list):
            raise BotApiError(400, "Bad Request: can't parse media JSON object")
        if not items:
            raise BotApiError(400, "Bad Request: there are no messages to send")
        if len(items) > ALBUM_MAX:
            raise BotApiError(400, "Bad Request: too many messages to send as an album")
        read: list[tuple[str, Upload, dict[str, Any]]] = []
        for item in items:
            kind = item.get("type") if isinstance(item, dict) else None
            if kind not in ("photo", "document", "audio"):
                raise BotApiError(400, f"Bad Request: can't parse InputMedia: type \"{kind}\" is unsupported")
            upload = self._file(p, item.get("media"), kind, missing="Bad Request: can't parse InputMedia: media not found")
            read.append((kind, upload, item))
        self._check_size([(kind, upload) for kind, upload, _ in read])
        kinds = {_GROUPABLE[kind] for kind, _, _ in read}
        for lone in ("document", "audio"):
            if lone in kinds and len(kinds) > 1:
                raise BotApiError(400, f"Bad Request: {lone} can't be mixed with other media types")
        captions = [self._caption(item) for _, _, item in read]
        chat, thread, target = self._place(p)
        made: list[dict[str, Any]] = []
        for position, (kind, upload, item) in enumerate(read, start=1):
            try:
                made.append(self._media(kind, upload, item))
            except _Refused as exc:
                raise BotApiError(400, f'Bad Request: failed to send message #{position} with the error message '
                                       f'"{exc.description}"') from None
        album = str(next(self._album_ids)) if len(read) > 1 else None
        messages: list[dict[str, Any]] = []
        for (kind, upload, _), media, (caption, entities) in zip(read, made, captions, strict=True):
            message = self._message(chat, thread, target, kind, media, caption, entities)
            if album is not None:
                message["media_group_id"] = album
            self._record("sendMediaGroup", p, message, [upload], target, album)
            messages.append(copy.deepcopy(message))
        return messages

    # ------------------------------------------------------------------------------- checks

    def _file(self, p: dict[str, Any], value: Any, kind: str, *, missing: str) -> Upload:
        """The upload (or earlier file) a file parameter names."""
        from .fake_telegram import BotApiError

        if isinstance(value, str) and value.startswith(_ATTACH):
            value = p.get(value[len(_ATTACH):])
        if isinstance(value, dict) and isinstance(value.get("data"), bytes):
            n = next(self._ids)
            prefix = {"photo": "AgAC", "voice": "AwAC", "audio": "CQAC"}.get(kind, "BQAC")
            part = next((k for k, v in p.items() if v is value), kind)
            upload = Upload(part, value.get("filename"), value.get("content_type"), value["data"],
                            f"{prefix}fake{n:08d}", f"AQAD{n:08d}")
            self.files[upload.file_id] = upload
            return upload
        if isinstance(value, str) and value in self.files:
            return self.files[value]
        if value is None or value == "":
            raise BotApiError(400, missing)
        raise BotApiError(400, WRONG_FILE)

    def _check_size(self, uploads: list[tuple[str, Upload]]) -> None:
        from .fake_telegram import BotApiError

        if any(len(u.data) > self.upload_limit for _, u in uploads):
            raise BotApiError(413, TOO_LARGE)
        for kind, upload in uploads:
            if not upload.data:
                raise BotApiError(400, EMPTY_FILE)
            if kind == "photo" and len(upload.data) > self.photo_limit:
                raise BotApiError(400, f"Bad Request: file of size {len(upload.data)} bytes is too big for a photo; "
                                       f"the maximum size is {self.photo_limit} bytes")

    def _caption(self, p: dict[str, Any]) -> tuple[str | None, list[dict[str, Any]]]:
        from .fake_telegram import BotApiError, EntityParseError, parse_html, parse_markdown_v2, utf16_len

        raw = p.get("caption")
        if not isinstance(raw, str) or not raw:
            return None, []
        mode = str(p.get("parse_mode") or "").lower()
        try:
            if mode == "markdownv2":
                rendered, entities = parse_markdown_v2(raw)
            elif mode == "html":
                rendered, entities = parse_html(raw)
            else:
                given = p.get("caption_entities")
                rendered, entities = raw, given if isinstance(given, list) else []
        except EntityParseError as exc:
            raise BotApiError(400, f"Bad Request: can't parse entities: {exc}") from None
        if utf16_len(rendered) > CAPTION_MAX:
            raise BotApiError(400, CAPTION_TOO_LONG)
        return rendered, entities

    def _place(self, p: dict[str, Any]) -> tuple[dict[str, Any], int | None, dict[str, Any] | None]:
        fake = self._fake
        chat = fake._chat_param(p)
        fake._check_blocked(chat)
        return chat, fake._thread_param(chat, p), fake._reply_param(chat, p)

    # ------------------------------------------------------------------------------- results

    def _media(self, kind: str, upload: Upload, p: dict[str, Any]) -> Any:
        """What the message shows: a photo's sizes, or the file's object."""
        if kind == "photo":
            return self._photo_sizes(upload)
        name = _clean_name(upload.filename)
        media: dict[str, Any] = {"file_id": upload.file_id, "file_unique_id": upload.file_unique_id,
                                 "file_size": len(upload.data)}
        if kind == "voice":
            media.update(duration=_int(p.get("duration")), mime_type="audio/ogg")
            return media
        media["file_name"] = name
        media["mime_type"] = (mimetypes.guess_type(name)[0] if name else None) or "application/octet-stream"
        if kind == "audio":
            media["duration"] = _int(p.get("duration"))
            for key in ("performer", "title"):
                if isinstance(p.get(key), str):
                    media[key] = p[key]
        return media

    def _photo_sizes(self, upload: Upload) -> list[dict[str, Any]]:
        try:
            with Image.open(io.BytesIO(upload.data)) as image:
                width, height = image.size
        except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
            raise _Refused(IMAGE_PROCESS_FAILED) from None
        if min(width, height) < 1 or width + height > PHOTO_SIDES_MAX or max(width, height) > PHOTO_RATIO_MAX * min(
                width, height):
            raise _Refused(PHOTO_INVALID_DIMENSIONS)
        longest = max(width, height)
        boxes = [b for b in _PHOTO_BOXES if b < longest] + [min(longest, _PHOTO_BOXES[-1])]
        sizes = []
        for i, box in enumerate(dict.fromkeys(boxes)):
            scale = box / longest
            size = len(upload.data) if box == boxes[-1] else max(1, int(len(upload.data) * scale * scale))
            file_id = upload.file_id if box == boxes[-1] else f"{upload.file_id}-{i}"
            sizes.append({"file_id": file_id, "file_unique_id": f"{upload.file_unique_id}-{i}", "file_size": size,
                          "width": max(1, round(width * scale)), "height": max(1, round(height * scale))})
            self.files[file_id] = upload
        return sizes

    def _message(self, chat: dict[str, Any], thread: int | None, target: dict[str, Any] | None, kind: str,
                 media: Any, caption: str | None, entities: list[dict[str, Any]]) -> dict[str, Any]:
        from .fake_telegram import _without_reply

        fake = self._fake
        message = fake._new_message(chat, fake.bot, None, thread=thread)
        fake._live_drafts.pop((chat["id"], thread), None)  # a message takes the draft's place
        message[kind] = media
        if caption:
            message["caption"] = caption
            if entities:
                message["caption_entities"] = copy.deepcopy(entities)
        if target is not None:
            message["reply_to_message"] = _without_reply(target)
        return message

    def _record(self, method: str, p: dict[str, Any], message: dict[str, Any], files: list[Upload],
                target: dict[str, Any] | None, album: str | None) -> None:
        self._fake._record_sent({
            "method": method,
            "chat_id": message["chat"]["id"],
            "message_id": message["message_id"],
            "text": message.get("caption", ""),
            "thread_id": message.get("message_thread_id"),
            "reply_to": target["message_id"] if target is not None else None,
            "media_group_id": album,
            "files": files,
            "params": {k: v for k, v in p.items() if not isinstance(v, dict) or "data" not in v},
        })


def _clean_name(name: str | None) -> str | None:
    """The last part of the part's file name (never a path), without control characters."""
    if not name:
        return None
    base = _UNSAFE_NAME.sub("", name.replace("\\", "/").rsplit("/", 1)[-1]).strip()
    return base[:255] or None


def _int(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0
