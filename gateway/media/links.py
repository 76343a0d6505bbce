"""Images an answer links to on this machine, sent as uploads with it.

A model that made a chart in its workspace often answers ``![chart](chart.png)``:
a link no one else can open. Such a link (a local path, relative to the
workspace, inside the folders ``send_file`` may read) becomes a file of the
answer. Links to ``http(s)://`` stay links: fetching whatever URL an answer
names would let it reach this machine's network.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from pathlib import Path

import structlog

from core.tools import ToolError
from core.tools.send_file import confine
from storage import Store, outbound

from .outbox import TurnFiles, to_ledger

log = structlog.get_logger("hermes.media")

__all__ = ["attach_linked_images", "note_files"]

#: ``![alt](target)`` or ``![alt](<target with spaces>)``
_IMAGE_LINK = re.compile(r"!\[[^\]\n]*\]\(\s*(?:<([^>\n]+)>|([^)\s]+))(?:\s+\"[^\"\n]*\")?\s*\)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _local_targets(text: str) -> list[str]:
    targets = []
    for m in _IMAGE_LINK.finditer(text):
        target = (m.group(1) or m.group(2) or "").strip()
        if target.startswith("file://"):
            target = target[len("file://"):]
        elif _SCHEME.match(target) or target.startswith("//"):
            continue  # a URL: left as the link it is
        if target and target not in targets:
            targets.append(target)
    return targets


async def attach_linked_images(text: str, files: TurnFiles, roots: tuple[Path, ...]) -> int:
    """Add the local images ``text`` links to (and ``send_file`` did not send already) to ``files``."""
    added = 0
    for target in _local_targets(text):
        try:
            real = await asyncio.to_thread(confine, target, roots)
            if files.has(real):  # send_file took it already
                continue
            await files.add_path(real, real.name)
        except ToolError as exc:  # outside the folders, missing, too many: the link stays text
            log.info("media.link_not_sent", reason=str(exc)[:200])
            continue
        added += 1
    return added


async def note_files(store: Store, ledger_id: int | None, files: TurnFiles) -> None:
    """Tell the reply's ledger row about files added after its answer was stored."""
    if ledger_id is None:
        return
    noted = to_ledger(tuple(files.files))

    def note(conn: sqlite3.Connection) -> None:
        outbound.set_files(conn, ledger_id, noted)

    await store.write(note)
