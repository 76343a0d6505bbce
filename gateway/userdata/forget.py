"""Forgetting a sender: their rows in one transaction (``storage.forget``), then their files.

``Forgetter.forget`` commits every row of theirs together with a request row; after the commit
it removes the media files no row names any more (``MediaStore.sweep``), clears the memory
profile when it was theirs (an owner's), marks the request done and VACUUMs in the background
(the deleted pages leave the file). ``resume`` runs at daemon start for requests a crash cut off
after their commit: the rows are gone already, the files are dealt with now, the report logged.
A crash before the commit deleted nothing: the person asks again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from core.memory import MemoryStore
from storage import ForgetRequestRow, MediaStore, Store, forget

__all__ = ["ForgetReport", "Forgetter"]

log = structlog.get_logger("hermes.userdata")


@dataclass(frozen=True)
class ForgetReport:
    counts: dict[str, int]
    files_removed: int = 0
    profile_entries_removed: int = 0
    resumed: bool = False

    def lines(self) -> list[str]:
        shown = {k: v for k, v in self.counts.items() if k != "files"}
        out = [f"• {what}: {n}" for what, n in shown.items()]
        out.append(f"• media files removed: {self.files_removed}")
        if self.profile_entries_removed:
            out.append(f"• memory profile entries removed: {self.profile_entries_removed}")
        return out

    def as_json(self) -> dict[str, Any]:
        return {"counts": self.counts, "files_removed": self.files_removed,
                "profile_entries_removed": self.profile_entries_removed}


def clear_profile(home: Path) -> int:
    """Remove every entry of the memory profile (USER.md); how many there were."""
    return MemoryStore(home).clear("user")


class Forgetter:
    def __init__(self, store: Store, blobs: MediaStore | None, home: Path, *,
                 forgotten: Callable[[str, str], None] | None = None) -> None:
        """``forgotten``: told (platform, user id) once their rows are gone, so that what the daemon
        keeps in memory about them (whom pairing let in, the owners it recorded) goes too."""
        self._store = store
        self._blobs = blobs
        self._home = home
        self._forgotten = forgotten
        self._vacuums: set[asyncio.Task[None]] = set()

    async def forget(self, platform: str, user_id: str, *, requested_by: str, forget_memory: bool,
                     vacuum: bool = True) -> ForgetReport:
        outcome = await self._store.write(lambda c: forget.forget_sender(
            c, platform, user_id, requested_by=requested_by, forget_memory=forget_memory, now=time.time()))
        log.info("userdata.forgotten", platform=platform, request_id=outcome.request_id, **{
            k.replace(" ", "_"): v for k, v in outcome.counts.items()})
        if self._forgotten is not None:
            self._forgotten(platform, user_id)
        row = ForgetRequestRow(outcome.request_id, platform, user_id, requested_by, "files", forget_memory,
                               outcome.digests, {"counts": outcome.counts})
        report = await self.finish(row)
        if vacuum:
            self.vacuum_later()
        return report

    async def finish(self, row: ForgetRequestRow, *, resumed: bool = False) -> ForgetReport:
        """The files of a committed forget: media no row names, the profile; then the row is done."""
        files = 0
        if self._blobs is not None and row.digests:
            async def referenced(digests: set[str]) -> set[str]:
                return await self._store.read(lambda c: forget.referenced_digests(c, digests))

            files, _ = await self._blobs.sweep(referenced, only=row.digests)
        profile = await asyncio.to_thread(clear_profile, self._home) if row.forget_memory else 0
        counts = dict(row.report.get("counts", {}))
        report = ForgetReport(counts, files, profile, resumed)
        await self._store.write(lambda c: forget.finish(c, row.id, report.as_json(), now=time.time()))
        return report

    async def resume(self) -> list[ForgetReport]:
        """Finish the forgets a crash cut off after their commit (at daemon start)."""
        reports = []
        for row in await self._store.read(forget.unfinished):
            report = await self.finish(row, resumed=True)
            log.info("userdata.forget_resumed", platform=row.platform, request_id=row.id,
                     files_removed=report.files_removed)
            reports.append(report)
        if reports:
            self.vacuum_later()
        return reports

    def vacuum_later(self) -> None:
        """VACUUM through the writer, in the background (the pages of deleted rows leave the file)."""
        async def run() -> None:
            try:
                await self._store.vacuum()
            except Exception as exc:  # the rows are gone either way; the file shrinks another time
                log.warning("userdata.vacuum_failed", error_type=type(exc).__name__, error=str(exc))

        task = asyncio.get_running_loop().create_task(run(), name="userdata:vacuum")
        self._vacuums.add(task)
        task.add_done_callback(self._vacuums.discard)

    async def aclose(self) -> None:
        """Wait for a VACUUM under way (the writer is about to stop)."""
        if self._vacuums:
            await asyncio.gather(*self._vacuums, return_exceptions=True)
