"""Earlier images, found again by the digest their marker names, as the content parts a model reads."""

from __future__ import annotations

import asyncio
import base64
import sqlite3
from typing import Any

import structlog

from storage import AttachmentRow, MediaStore, Store, attachments

log = structlog.get_logger("hermes.media")

__all__ = ["ImageRecall"]


class ImageRecall:
    """``core``'s ``ImageRecall``: digests -> image parts, read from the images the model was sent
    (rows of kind ``image_shown``) of the same session only."""

    def __init__(self, store: Store, blobs: MediaStore) -> None:
        self._store = store
        self._blobs = blobs

    async def __call__(self, session_id: str, digests: list[str]) -> dict[str, dict[str, Any]]:
        wanted = sorted(set(digests))

        def read(conn: sqlite3.Connection) -> dict[str, AttachmentRow | None]:
            return {d: attachments.by_digest(conn, session_id, d) for d in wanted}

        rows = await self._store.read(read)
        found: dict[str, dict[str, Any]] = {}
        for digest, row in rows.items():
            if row is None or row.kind != "image_shown":
                continue
            try:
                data = await asyncio.to_thread(self._blobs.path_for(row.sha256).read_bytes)
            except (OSError, ValueError):  # pruned meanwhile: the marker's text stands for it
                log.info("media.recall_missing", digest=digest)
                continue
            url = f"data:{row.mime or 'image/jpeg'};base64,{base64.b64encode(data).decode('ascii')}"
            found[digest] = {"type": "image_url", "image_url": {"url": url}}
        return found
