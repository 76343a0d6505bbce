"""The CDN of ``FakeDiscord``: the files users attach, served from the fake's own HTTP server like Discord's CDN.

Discord's attachment object (``id``, ``filename``, ``size``, ``url``, ``proxy_url``, ``content_type``;
``duration_secs`` and ``waveform`` for a voice message, whose message has the flag ``IS_VOICE_MESSAGE``
= 1 << 13 and no content) points at ``cdn.discordapp.com/attachments/<channel>/<id>/<filename>``
(``proxy_url``: the same path on media.discordapp.net). Since 2024 those URLs are signed: ``ex`` (expiry,
hex epoch seconds), ``is`` (issued, hex) and ``hm`` (a signature over both); an unknown file, a missing
or wrong signature or an expired URL gets 404 with "This content is no longer available.". The CDN
asks for no token. Filenames are sanitized on upload (anything but letters, digits, ``.``, ``_`` and
``-`` becomes ``_``), the original kept in ``title`` when it differs.

Here ``url`` is ``http://127.0.0.1:<port>/attachments/...`` and ``proxy_url`` the same under
``/media/attachments/...``. Each GET is recorded in :attr:`DiscordCDN.requests`. ``ttl`` (seconds)
sets the expiry of URLs made from now on (negative: already expired); ``forget(id)`` deletes a file (a
deleted message's attachments are gone). Not emulated: image resizing query parameters, range requests.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from aiohttp import web

__all__ = ["IS_VOICE_MESSAGE", "MAX_ATTACHMENTS", "DiscordCDN", "DiscordFile"]

IS_VOICE_MESSAGE = 1 << 13
#: files one message may carry
MAX_ATTACHMENTS = 10
_GONE = "This content is no longer available."
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class DiscordFile:
    """One file a user attaches (``FakeDiscord.user_says(..., files=[...])``)."""

    filename: str
    data: bytes
    content_type: str | None = None
    #: recorded in the app as a voice message: ``duration_secs``, ``waveform``, IS_VOICE_MESSAGE on the message
    voice: bool = False
    duration: float = 1.5
    #: the size the payload declares, when a test wants it to differ from the bytes served
    size: int | None = None


@dataclass
class _Stored:
    channel_id: str
    filename: str
    data: bytes
    content_type: str | None
    served: int = field(default=0)


class DiscordCDN:
    def __init__(self) -> None:
        self._secret = os.urandom(16)
        self._files: dict[str, _Stored] = {}
        #: seconds until the URLs made from now on expire (Discord: about a day)
        self.ttl = 86400.0
        #: every GET: path, query, status, and whether an Authorization header came along
        self.requests: list[dict[str, Any]] = []

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/attachments/{cid}/{aid}/{name}", self._serve)
        app.router.add_get("/media/attachments/{cid}/{aid}/{name}", self._serve)

    def _sign(self, path: str, ex: str, issued: str) -> str:
        return hmac.new(self._secret, f"{path}?ex={ex}&is={issued}".encode(), hashlib.sha256).hexdigest()

    def attachment(self, endpoint: str, channel_id: str, attachment_id: str, file: DiscordFile) -> dict[str, Any]:
        """Store ``file`` and return its attachment object (URLs under ``endpoint``)."""
        filename = _UNSAFE.sub("_", file.filename) or "unknown"
        self._files[attachment_id] = _Stored(channel_id, filename, file.data, file.content_type)
        path = f"/attachments/{channel_id}/{attachment_id}/{quote(filename)}"
        now = int(time.time())
        ex, issued = format(int(now + self.ttl), "x"), format(now, "x")
        query = f"?ex={ex}&is={issued}&hm={self._sign(path, ex, issued)}&"
        item: dict[str, Any] = {
            "id": attachment_id, "filename": filename, "size": len(file.data) if file.size is None else file.size,
            "url": f"{endpoint}{path}{query}", "proxy_url": f"{endpoint}/media{path}{query}",
        }
        if file.content_type is not None:
            item["content_type"] = file.content_type
        if filename != file.filename:
            item["title"] = file.filename
        if file.voice:
            item["duration_secs"] = file.duration
            item["waveform"] = base64.b64encode(bytes(range(0, 256, 4))).decode()
            item["flags"] = 0
        return item

    def forget(self, attachment_id: str) -> None:
        self._files.pop(str(attachment_id), None)

    def served(self, attachment_id: str) -> int:
        """How many times the file was handed out whole or in part (a GET answered 200)."""
        stored = self._files.get(str(attachment_id))
        return stored.served if stored is not None else 0

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        cid, aid, name = (request.match_info[k] for k in ("cid", "aid", "name"))
        record: dict[str, Any] = {"path": request.path, "query": dict(request.query), "status": 404,
                                  "authorization": "Authorization" in request.headers}
        self.requests.append(record)
        stored = self._files.get(aid)
        path = request.path.removeprefix("/media")
        ex, issued, signature = (request.query.get(k, "") for k in ("ex", "is", "hm"))
        try:
            expired = int(ex, 16) < time.time()
        except ValueError:
            expired = True
        if (stored is None or stored.channel_id != cid or stored.filename != name or expired
                or not hmac.compare_digest(signature, self._sign(quote(path), ex, issued))):
            return web.Response(status=404, text=_GONE)
        stored.served += 1
        record["status"] = 200
        response = web.StreamResponse(status=200, headers={
            "Content-Type": stored.content_type or "application/octet-stream",
            "Content-Length": str(len(stored.data)), "Cache-Control": "public, max-age=31536000",
        })
        await response.prepare(request)
        for start in range(0, len(stored.data), 64 * 1024):
            await response.write(stored.data[start:start + 64 * 1024])
        await response.write_eof()
        return response
