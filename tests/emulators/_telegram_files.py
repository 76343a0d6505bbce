"""Files on the fake Bot API: ``getFile``, the download route, and the media a user's message carries.

The way the Bot API documents it:

* ``getFile(file_id)`` returns a File (``file_id``, ``file_unique_id``, ``file_size``, ``file_path``);
  bots may download files of up to 20 MB, so a larger one is refused with 400 "Bad Request: file is
  too big", and an unknown id gets 400 "Bad Request: invalid file_id".
* ``GET /file/bot<token>/<file_path>`` serves the bytes (with Content-Length) of a path that a
  ``getFile`` handed out; any other path is 404, a malformed token 404 and a wrong one 401, like
  the method routes.
* Media in messages as Telegram sends them: a photo is several PhotoSize (each its own file, the
  smaller ones scaled down from the original with Pillow, smallest first); a document with its
  ``file_name`` and ``mime_type``; a voice note (``audio/ogg``) with its duration; audio; a video; a
  video note; stickers (static WebP, or animated / video ones that carry an emoji).

Test API: ``add_file`` (a file the bot may fetch), ``photo``/``document``/``voice``/``audio``/
``video``/``video_note``/``sticker`` (the Message fields of one medium, for ``user_sends``),
``break_downloads`` (a download stops halfway, the connection dropped), ``downloads`` (every
download request: path, status).
"""

from __future__ import annotations

import io
import itertools
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from ._base import FakeServer

__all__ = ["FILE_TOO_BIG", "INVALID_FILE_ID", "MAX_DOWNLOAD", "PHOTO_SIDES", "TelegramFiles"]

#: The Bot API's download limit for bots ("bots can download files of up to 20MB in size").
MAX_DOWNLOAD = 20 * 2**20
FILE_TOO_BIG = "Bad Request: file is too big"
INVALID_FILE_ID = "Bad Request: invalid file_id"
#: The long sides Telegram keeps of a photo (s, m, x, y, w), the original capped at the largest.
PHOTO_SIDES = (90, 320, 800, 1280, 2560)

_TOKEN_RE = re.compile(r"\d+:[A-Za-z0-9_-]+")


@dataclass
class _StoredFile:
    file_id: str
    unique_id: str
    data: bytes
    path: str
    declare_size: bool = True
    #: downloads left that stop halfway (the connection dropped)
    broken: int = 0


class TelegramFiles(FakeServer):
    """The file half of ``FakeTelegram`` (a base class of it; see the module docstring)."""

    _token: str

    def _init_files(self) -> None:
        self._files: dict[str, _StoredFile] = {}
        self._issued: dict[str, _StoredFile] = {}  # file_path -> file, once getFile handed it out
        self._file_numbers = itertools.count(1)
        #: every request to the download route: ``{path, status}`` (``path`` without the token)
        self.downloads: list[dict[str, Any]] = []

    def _file_routes(self, app: web.Application) -> None:
        app.router.add_route("GET", "/file/bot{token}/{path:.+}", self._download)

    # ---------------------------------------------------------------------------- test API

    def add_file(self, data: bytes, *, folder: str = "documents", ext: str = "bin",
                 declare_size: bool = True) -> dict[str, Any]:
        """Store ``data`` as a file the bot can fetch; returns its ``file_id``, ``file_unique_id`` and
        ``file_size``. ``declare_size=False``: getFile leaves ``file_size`` out (it is optional)."""
        n = next(self._file_numbers)
        stored = _StoredFile(
            file_id=f"AgAC{secrets.token_urlsafe(24)}{n}",
            unique_id=f"AQAD{secrets.token_urlsafe(6)}{n}",
            data=bytes(data),
            path=f"{folder}/file_{n}.{ext}",
            declare_size=declare_size,
        )
        self._files[stored.file_id] = stored
        return {"file_id": stored.file_id, "file_unique_id": stored.unique_id, "file_size": len(stored.data)}

    def file_bytes(self, file_id: str) -> bytes:
        return self._files[file_id].data

    def break_downloads(self, file_id: str, times: int = 1) -> None:
        """The next ``times`` downloads of ``file_id`` send half the bytes, then drop the connection."""
        self._files[file_id].broken += times

    def photo(self, image: bytes | None = None, *,
              sizes: Sequence[tuple[bytes, int, int]] | None = None) -> dict[str, Any]:
        """``{"photo": [PhotoSize, ...]}``, smallest first: from ``image`` (any format Pillow reads) as
        Telegram makes them (JPEGs of each side in ``PHOTO_SIDES`` below the original's, and the
        original's capped at 2560), or from ``sizes`` given as ``(bytes, width, height)``."""
        if sizes is None:
            if image is None:
                raise ValueError("photo() needs image or sizes")
            sizes = _scaled_jpegs(image)
        photo = []
        for data, width, height in sizes:
            info = self.add_file(data, folder="photos", ext="jpg")
            photo.append({**info, "width": width, "height": height})
        return {"photo": photo}

    def document(self, data: bytes, *, file_name: str | None = "file.bin",
                 mime_type: str | None = "application/octet-stream", declare_size: bool = True) -> dict[str, Any]:
        ext = (file_name or "bin").rsplit(".", 1)[-1][:8] or "bin"
        info = self.add_file(data, folder="documents", ext=re.sub(r"[^A-Za-z0-9]", "", ext) or "bin",
                             declare_size=declare_size)
        if not declare_size:
            info.pop("file_size")
        return {"document": _present(info, file_name=file_name, mime_type=mime_type)}

    def voice(self, data: bytes, *, duration: int = 3, mime_type: str = "audio/ogg") -> dict[str, Any]:
        info = self.add_file(data, folder="voice", ext="oga")
        return {"voice": {**info, "duration": duration, "mime_type": mime_type}}

    def audio(self, data: bytes, *, duration: int = 30, file_name: str | None = "song.mp3",
              mime_type: str = "audio/mpeg", title: str | None = None,
              performer: str | None = None) -> dict[str, Any]:
        info = self.add_file(data, folder="music", ext="mp3")
        return {"audio": _present({**info, "duration": duration, "mime_type": mime_type}, file_name=file_name,
                                  title=title, performer=performer)}

    def video(self, data: bytes, *, duration: int = 5, width: int = 640, height: int = 360,
              file_name: str | None = "clip.mp4", mime_type: str = "video/mp4") -> dict[str, Any]:
        info = self.add_file(data, folder="videos", ext="mp4")
        return {"video": _present({**info, "duration": duration, "width": width, "height": height,
                                   "mime_type": mime_type}, file_name=file_name)}

    def video_note(self, data: bytes, *, duration: int = 4, length: int = 240) -> dict[str, Any]:
        """A round video message (no ``mime_type``: Telegram's VideoNote has none)."""
        info = self.add_file(data, folder="video_notes", ext="mp4")
        return {"video_note": {**info, "duration": duration, "length": length}}

    def sticker(self, data: bytes, *, emoji: str | None = "😀", animated: bool = False, video: bool = False,
                width: int = 512, height: int = 512, set_name: str | None = "TestPack") -> dict[str, Any]:
        """A sticker: static (WebP), ``animated`` (TGS) or ``video`` (WebM)."""
        ext = "tgs" if animated else "webm" if video else "webp"
        info = self.add_file(data, folder="stickers", ext=ext)
        sticker = {**info, "type": "regular", "width": width, "height": height,
                   "is_animated": animated, "is_video": video}
        return {"sticker": _present(sticker, emoji=emoji, set_name=set_name)}

    # ------------------------------------------------------------------------------ wire

    def _m_get_file(self, p: dict[str, Any]) -> dict[str, Any]:
        from .fake_telegram import BotApiError  # the module that imports this one

        file_id = p.get("file_id")
        stored = self._files.get(file_id) if isinstance(file_id, str) else None
        if stored is None:
            raise BotApiError(400, INVALID_FILE_ID)
        if len(stored.data) > MAX_DOWNLOAD:
            raise BotApiError(400, FILE_TOO_BIG)
        self._issued[stored.path] = stored
        result: dict[str, Any] = {"file_id": stored.file_id, "file_unique_id": stored.unique_id,
                                  "file_path": stored.path}
        if stored.declare_size:
            result["file_size"] = len(stored.data)
        return result

    async def _download(self, request: web.Request) -> web.StreamResponse:
        token, path = request.match_info["token"], request.match_info["path"]
        call = self._record_call("download", {"path": path}, http_method=request.method, path=f"/file/bot…/{path}")
        status = 200
        if not _TOKEN_RE.fullmatch(token):
            status = 404
        elif token != self._token:
            status = 401
        elif path not in self._issued:
            status = 404
        self.downloads.append({"path": path, "status": status})
        if status != 200:
            description = {401: "Unauthorized", 404: "Not Found"}[status]
            return self._respond(call, status, self._error_body(status, description))
        stored = self._issued[path]
        call.status = 200
        self._notify()
        if stored.broken:
            stored.broken -= 1
            return await self._send_half(request, stored.data)
        return web.Response(body=stored.data, content_type="application/octet-stream")

    async def _send_half(self, request: web.Request, data: bytes) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.content_length = len(data)
        await response.prepare(request)
        await response.write(data[: len(data) // 2])
        if request.transport is not None:
            request.transport.close()
        return response


def _present(base: dict[str, Any], **optional: Any) -> dict[str, Any]:
    """``base`` plus the optional fields that are set (the Bot API leaves absent ones out)."""
    return {**base, **{k: v for k, v in optional.items() if v is not None}}


def _scaled_jpegs(image: bytes) -> list[tuple[bytes, int, int]]:
    from PIL import Image

    with Image.open(io.BytesIO(image)) as original:
        original.load()
        source = original.convert("RGB")
    long_side = max(source.size)
    sides = [s for s in PHOTO_SIDES if s < long_side] + [min(long_side, PHOTO_SIDES[-1])]
    out = []
    for side in sides:
        scale = side / long_side
        size = (max(1, round(source.width * scale)), max(1, round(source.height * scale)))
        scaled = source if size == source.size else source.resize(size)
        buf = io.BytesIO()
        scaled.save(buf, "JPEG", quality=85)
        out.append((buf.getvalue(), size[0], size[1]))
    return out
