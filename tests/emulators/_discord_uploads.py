"""Uploads to ``FakeDiscord``: message creates with files, and the nonces Discord dedupes them by.

As Discord's "Uploading Files" describes: a message create with files is ``multipart/form-data`` with a
``payload_json`` part (the message as JSON; its ``attachments`` list names each file by ``id`` = n) and
one ``files[n]`` part per file (its ``filename``; the bytes). At most 10 files a message (more: 400, code
50035); the files of one request together over the upload limit: 413 with code 40005 "Request entity
too large" (10 MiB for a bot in a server without boosts). Discord sets an attachment's ``content_type``
from the file name's extension, whatever the part declared (discord.py sends every part as
``application/octet-stream``); the part's own type is kept in the record.

``nonce`` with ``enforce_nonce: true``: the nonce (at most 25 characters, else 400 code 50035) is checked
for uniqueness among the author's messages of the last few minutes (:attr:`NonceBook.window`); a second
create with the same one returns the first message and creates nothing.
"""

from __future__ import annotations

import json
import mimetypes
import re
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import BodyPartReader, web

__all__ = ["MAX_NONCE", "NonceBook", "Upload", "read_multipart"]

MAX_NONCE = 25
_FILE_PART = re.compile(r"files\[(\d+)\]")


@dataclass(frozen=True)
class Upload:
    """One file as it arrived in a message create."""

    index: int
    filename: str
    #: the type the part declared
    part_type: str | None
    data: bytes

    @property
    def content_type(self) -> str | None:
        """The type Discord gives the attachment: by the file name."""
        return mimetypes.guess_type(self.filename)[0]


async def read_multipart(request: web.Request) -> dict[str, Any]:
    """The message of a multipart create: ``payload_json``'s fields, and ``_files`` (the ``Upload``s, by n)."""
    params: dict[str, Any] = {}
    files: list[Upload] = []
    reader = await request.multipart()
    while True:
        part = await reader.next()
        if part is None:
            break
        if not isinstance(part, BodyPartReader):
            continue  # a nested multipart: Discord takes none
        name = part.name or ""
        data = bytes(await part.read(decode=False))
        if name == "payload_json":
            body = json.loads(data)
            if isinstance(body, dict):
                params.update(body)
            continue
        found = _FILE_PART.fullmatch(name)
        if found is not None:
            files.append(Upload(int(found[1]), part.filename or "", part.headers.get("Content-Type"), data))
    params["_files"] = sorted(files, key=lambda f: f.index)
    return params


class NonceBook:
    """The nonces of enforced creates: (author, nonce) -> (message, when), for ``window`` seconds."""

    def __init__(self, window: float = 180.0) -> None:
        #: seconds a nonce is remembered ("the past few minutes")
        self.window = window
        self._seen: dict[tuple[str, str], tuple[dict[str, Any], float]] = {}

    def earlier(self, author: str, nonce: str) -> dict[str, Any] | None:
        """The message this author created with ``nonce`` within the window, if any."""
        now = time.monotonic()
        self._seen = {k: v for k, v in self._seen.items() if v[1] > now - self.window}
        found = self._seen.get((author, nonce))
        return found[0] if found is not None else None

    def note(self, author: str, nonce: str, message: dict[str, Any]) -> None:
        self._seen[(author, nonce)] = (message, time.monotonic())
