"""The files of ``FakeSlack``: what users share, served from the fake's own HTTP server like files.slack.com.

A message that shares files is a ``message`` event with subtype ``file_share`` (``upload``,
``display_as_bot``) and ``files``: Slack's file objects (``id``, ``name``, ``title``, ``mimetype``,
``filetype``, ``pretty_type``, ``user``, ``size``, ``mode: hosted``, ``url_private``,
``url_private_download``, ``permalink``; an audio clip recorded in Slack also ``subtype: slack_audio``,
``media_display_type: audio`` and ``duration_ms``). ``url_private`` is
``/files-pri/<team>-<file id>/<name>`` and ``url_private_download`` the same with ``/download/`` before
the name (the name lowercased, anything but letters, digits, ``.``, ``_`` and ``-`` as ``_``).

Both need ``Authorization: Bearer <bot token>``. Without it, or with another token, Slack does not
answer 401: it answers 200 with its HTML sign-in page, which a client must not take for the file. An
unknown file gets 404. ``redirect(file_id, url)`` makes the file's URLs answer 302 to ``url`` (to test
where a client's token goes). Each GET is recorded in :attr:`SlackFiles.requests` (with whether the
right token came along, never the token itself).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from aiohttp import web

__all__ = ["LOGIN_PAGE", "SlackFile", "SlackFiles"]

LOGIN_PAGE = (b"<!DOCTYPE html><html lang=\"en\"><head><title>Slack</title></head><body>"
              b"<h1>Sign in to Slack</h1><p>We suggest using the email address you use at work.</p></body></html>")
_UNSAFE = re.compile(r"[^a-z0-9._-]")


@dataclass(frozen=True)
class SlackFile:
    """One file a user shares (``FakeSlack.user_says(..., files=[...])``)."""

    name: str
    data: bytes
    mimetype: str = "application/octet-stream"
    #: an audio clip recorded in Slack (``subtype: slack_audio``, ``duration_ms``)
    audio_clip: bool = False
    duration_ms: int = 4200
    #: the size the file object declares, when a test wants it to differ from the bytes served
    size: int | None = None


@dataclass
class _Stored:
    data: bytes
    mimetype: str
    redirect: str | None = None


class SlackFiles:
    def __init__(self, team: str, bot_token: Callable[[], str]) -> None:
        """``bot_token()``: the token a request must carry now."""
        self._team = team
        self._token = bot_token
        self._files: dict[str, _Stored] = {}
        self._n = 0
        #: every GET: path, status, ``authorized`` (the bot token came along), ``authorization`` (any header did)
        self.requests: list[dict[str, Any]] = []

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/files-pri/{key}/{name}", self._serve)
        app.router.add_get("/files-pri/{key}/download/{name}", self._serve)

    def file_object(self, endpoint: str, user: str, file: SlackFile, fid: str | None = None) -> dict[str, Any]:
        """Store ``file`` (under ``fid``, or a new id); its file object as a ``file_share`` event carries it."""
        self._n += 1
        fid = fid or f"F0FILE{self._n:04d}"
        self._files[fid] = _Stored(file.data, file.mimetype)
        slug = quote(_UNSAFE.sub("_", file.name.lower()) or "file")
        base = f"{endpoint}/files-pri/{self._team}-{fid}"
        filetype = file.name.rsplit(".", 1)[-1].lower() if "." in file.name else "binary"
        item: dict[str, Any] = {
            "id": fid, "created": int(time.time()), "timestamp": int(time.time()), "name": file.name,
            "title": file.name, "mimetype": file.mimetype, "filetype": filetype, "pretty_type": filetype.upper(),
            "user": user, "user_team": self._team, "editable": False,
            "size": len(file.data) if file.size is None else file.size, "mode": "hosted", "is_external": False,
            "external_type": "", "is_public": False, "public_url_shared": False, "display_as_bot": False,
            "username": "", "url_private": f"{base}/{slug}", "url_private_download": f"{base}/download/{slug}",
            "permalink": f"{endpoint}/files/{user}/{fid}/{slug}", "file_access": "visible",
        }
        if file.audio_clip:
            item.update({"subtype": "slack_audio", "media_display_type": "audio", "duration_ms": file.duration_ms,
                         "transcription": {"status": "none"}})
        return item

    def redirect(self, file_id: str, url: str | None) -> None:
        """The file's URLs answer 302 to ``url`` (None: they serve the file again)."""
        self._files[file_id].redirect = url

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        authorized = header == f"Bearer {self._token()}"
        record: dict[str, Any] = {"path": request.path, "authorized": authorized, "authorization": bool(header)}
        self.requests.append(record)
        key = request.match_info["key"]
        stored = self._files.get(key.removeprefix(f"{self._team}-")) if key.startswith(f"{self._team}-") else None
        if not authorized:
            record["status"] = 200
            return web.Response(status=200, body=LOGIN_PAGE, content_type="text/html", charset="utf-8")
        if stored is None:
            record["status"] = 404
            return web.Response(status=404, text="file not found")
        if stored.redirect is not None:
            record["status"] = 302
            raise web.HTTPFound(stored.redirect)
        record["status"] = 200
        download = "/download/" in request.path
        response = web.StreamResponse(status=200, headers={
            "Content-Type": stored.mimetype, "Content-Length": str(len(stored.data)),
            "Content-Disposition": "attachment" if download else "inline",
        })
        await response.prepare(request)
        for start in range(0, len(stored.data), 64 * 1024):
            await response.write(stored.data[start:start + 64 * 1024])
        await response.write_eof()
        return response
