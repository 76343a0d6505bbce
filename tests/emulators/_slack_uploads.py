"""Uploads to ``FakeSlack``: the external upload flow of Slack's file API (what ``files_upload_v2`` does).

1. ``files.getUploadURLExternal`` (``filename``, ``length``; scope ``files:write``) answers ``upload_url``
   (here ``http://127.0.0.1:<port>/upload/v1/<secret>``, on the fake's own server as files.slack.com is
   Slack's) and ``file_id``. Errors as Slack documents them: ``length`` 0 or missing ``missing_argument``,
   not a number ``invalid_arguments``, more than :attr:`UploadMethods.upload_limit` (Slack's 1 GB, or a
   workspace's restriction) ``file_upload_size_restricted``.
2. ``POST upload_url`` with the bytes, raw or as a ``multipart/form-data`` file part; no token (the URL is
   the credential). HTTP 200 ``OK - <length>`` when the bytes are exactly the declared ``length``; else 400.
   An unknown or already used URL: 404.
3. ``files.completeUploadExternal`` (``files``: JSON ``[{"id", "title"}]``; ``channel_id``, ``thread_ts``,
   ``initial_comment``; scope ``files:write``) shares every file of the call as one message (its text the
   comment, its ``files`` the file objects, in the given order) in the channel, or in the thread of
   ``thread_ts``; without ``channel_id`` the files stay private. It answers the file objects, each with
   ``shares`` (``public`` for a channel, ``private`` for a DM or private channel: ``{channel: [{"ts",
   "thread_ts"}]}``). A file id that is unknown, not uploaded yet or already completed gets
   ``file_not_found`` (Slack's docs name no error for these; the method "can only be called once").

The shared files are served at their ``url_private`` like a user's (``_slack_files``). Each upload is kept
in :attr:`UploadMethods.uploads` (file id -> ``PendingUpload``: name, declared length, the bytes, the
content type of the POST, whether an Authorization header came along, whether it was completed).
"""

from __future__ import annotations

import json
import mimetypes
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import BodyPartReader, web

from ._slack_chat import BOT_ID, BOT_USER
from ._slack_files import SlackFile, SlackFiles

__all__ = ["UPLOAD_LIMIT", "PendingUpload", "UploadMethods"]

#: Slack's own cap on one file
UPLOAD_LIMIT = 1024 * 1024 * 1024


@dataclass
class PendingUpload:
    file_id: str
    filename: str
    length: int
    secret: str
    data: bytes | None = None
    #: the Content-Type of the POST to the upload URL
    content_type: str | None = None
    #: an Authorization header came with the POST (the URL is the credential: a client sends none)
    authorization: bool = False
    completed: bool = False


class UploadMethods:
    """Mixed into ``FakeSlack``: the ``_m_files_*`` handlers of its Web API route, and the upload URL route."""

    messages: dict[tuple[str, str], dict[str, Any]]
    files: SlackFiles
    upload_limit: int
    uploads: dict[str, PendingUpload]

    if TYPE_CHECKING:  # provided by FakeSlack and FakeServer
        def next_ts(self) -> str: ...
        def endpoint(self) -> str: ...
        def _record_sent(self, message: dict[str, Any]) -> dict[str, Any]: ...
        def _notify(self) -> None: ...
        def _seen(self, method: str, channel: str, message: dict[str, Any], *, deleted: bool = False) -> None: ...

    def add_upload_routes(self, app: web.Application) -> None:
        app.router.add_post("/upload/v1/{secret}", self._receive_upload)

    def _m_files_getUploadURLExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        filename = params.get("filename")
        if not isinstance(filename, str) or not filename:
            return {"ok": False, "error": "invalid_arguments"}
        try:
            length = int(params.get("length") or 0)
        except (TypeError, ValueError):
            return {"ok": False, "error": "invalid_arguments"}
        if length <= 0:
            return {"ok": False, "error": "missing_argument"}
        if length > self.upload_limit:
            return {"ok": False, "error": "file_upload_size_restricted"}
        upload = PendingUpload(f"F0UP{len(self.uploads) + 1:06d}", filename, length, secrets.token_urlsafe(24))
        self.uploads[upload.file_id] = upload
        return {"ok": True, "upload_url": f"{self.endpoint()}/upload/v1/{upload.secret}", "file_id": upload.file_id}

    async def _receive_upload(self, request: web.Request) -> web.StreamResponse:
        secret = request.match_info["secret"]
        upload = next((u for u in self.uploads.values() if u.secret == secret), None)
        if upload is None or upload.data is not None:
            return web.Response(status=404, text="upload not found")
        if request.content_type == "multipart/form-data":
            data = b""
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                if isinstance(part, BodyPartReader) and part.filename is not None:
                    data = bytes(await part.read(decode=False))
                    break
        else:
            data = await request.read()
        if len(data) != upload.length:
            return web.Response(status=400, text=f"length mismatch: declared {upload.length}, got {len(data)}")
        upload.data = data
        upload.content_type = request.headers.get("Content-Type")
        upload.authorization = "Authorization" in request.headers
        self._notify()
        return web.Response(status=200, text=f"OK - {len(data)}")

    def _m_files_completeUploadExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            wanted = json.loads(params.get("files") or "")
        except (TypeError, ValueError):
            return {"ok": False, "error": "invalid_arguments"}
        if not isinstance(wanted, list) or not wanted or not all(isinstance(w, dict) for w in wanted):
            return {"ok": False, "error": "invalid_arguments"}
        found: list[tuple[PendingUpload, str]] = []
        for item in wanted:
            upload = self.uploads.get(str(item.get("id")))
            if upload is None or upload.data is None or upload.completed:
                return {"ok": False, "error": "file_not_found"}
            found.append((upload, str(item.get("title") or upload.filename)))
        channel = params.get("channel_id") or None
        thread_ts = params.get("thread_ts") or None
        comment = params.get("initial_comment") or ""
        objects = []
        for upload, title in found:
            upload.completed = True
            mime = mimetypes.guess_type(upload.filename)[0] or "application/octet-stream"
            item = self.files.file_object(self.endpoint(), BOT_USER, SlackFile(upload.filename, upload.data or b"", mime),
                                          fid=upload.file_id)
            item.update({"title": title, "shares": {}})
            objects.append(item)
        if channel is not None:
            ts = self.next_ts()
            message: dict[str, Any] = {"type": "message", "subtype": "file_share", "user": BOT_USER, "bot_id": BOT_ID,
                                       "text": comment, "ts": ts, "upload": True, "files": objects}
            if thread_ts:
                message["thread_ts"] = thread_ts
            self.messages[(channel, ts)] = message
            where = "private" if channel.startswith(("D", "G")) else "public"
            for item in objects:
                item["shares"] = {where: {channel: [{"ts": ts, **({"thread_ts": thread_ts} if thread_ts else {})}]}}
            self._record_sent({"method": "files.completeUploadExternal", "chat_id": channel, "text": comment,
                               "thread_id": thread_ts, "reply_to": None, "message_id": ts, "ts": ts,
                               "files": [upload for upload, _ in found]})
            self._seen("files.completeUploadExternal", channel, message)
        return {"ok": True, "files": objects}
