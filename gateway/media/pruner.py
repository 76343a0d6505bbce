"""Stored media kept as long as it is wanted: a pass the daemon's sweeper runs.

One pass: attachment rows past ``media.retention_days`` go, then the least
recently used files (with every row naming them) until the rest fits
``media.max_total_mb`` (``storage.retention_plan``); rows a session deletion
outside the daemon left behind go too (``delete_dangling``); then every file
that no row names any more is removed. A session deleted or pruned through
the daemon loses its files at once (``after_delete``), not at the next pass.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

import structlog

from gateway.config import MediaConfig
from storage import MediaStore, Store, attachments, outbound, retention_plan

log = structlog.get_logger("hermes.media")

__all__ = ["MediaPruner", "PruneReport"]


@dataclass(frozen=True)
class PruneReport:
    rows: int
    files: int
    bytes: int


class MediaPruner:
    def __init__(self, store: Store, blobs: MediaStore, settings: MediaConfig) -> None:
        self._store = store
        self._blobs = blobs
        self._settings = settings

    async def _referenced(self, digests: set[str]) -> set[str]:
        """Files some attachment row names, or some reply of the retention period sends."""
        since = time.time() - self._settings.retention_days * 86400

        def read(conn: sqlite3.Connection) -> set[str]:
            return attachments.referenced(conn, digests) | outbound.files_referenced(conn, digests, since=since)

        return await self._store.read(read)

    async def run(self, *, now: float | None = None) -> PruneReport:
        s = self._settings
        at = time.time() if now is None else now

        def prune(conn: sqlite3.Connection) -> int:
            plan = retention_plan(attachments.all_rows(conn), now=at, retention_days=s.retention_days,
                                  max_total_bytes=int(s.max_total_mb * 2**20))
            gone = attachments.delete_rows(conn, list(plan.row_ids)) if plan.row_ids else []
            dangling = attachments.delete_dangling(conn)
            return len(gone) + len(dangling)

        rows = await self._store.write(prune)
        files, freed = await self._blobs.sweep(self._referenced)
        if rows or files:
            log.info("media.pruned", rows=rows, files=files, bytes=freed)
        return PruneReport(rows, files, freed)

    async def after_delete(self) -> None:
        """A session was deleted or pruned (its rows went in that transaction): its files go now."""
        files, freed = await self._blobs.sweep(self._referenced)
        if files:
            log.info("media.swept", files=files, bytes=freed)
