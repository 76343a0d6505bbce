"""The files of one answer: what the agent's ``send_file`` hands over, stored before they are sent.

Each file is copied into the content-addressed store as it is taken (so a file
the agent changes or deletes afterwards is still sent as it was, and a restart
can send it again from the ledger), its type read from its bytes, and it goes
out with the answer (``OutboundMessage.files``). A file larger than
``media.max_download_mb`` or past ``MAX_FILES`` is refused to the model, which
can say so.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

from adapters.media import AttachmentKind, OutboundFile
from core.media import SNIFF_BYTES, human_size, sniff
from core.tools import ToolError
from storage import BlobTooLargeError, LedgerFile, MediaStore, StoredBlob

__all__ = ["MAX_FILES", "TurnFiles", "from_ledger", "to_ledger"]

#: files one answer may carry
MAX_FILES = 10
_CHUNK = 256 * 2**10
#: image types every platform shows as a picture
_PICTURES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def _kind(mime: str) -> AttachmentKind:
    if mime in _PICTURES:
        return AttachmentKind.IMAGE
    if mime.startswith("audio/"):
        return AttachmentKind.AUDIO
    if mime.startswith("video/"):
        return AttachmentKind.VIDEO
    return AttachmentKind.DOCUMENT


async def _chunks(path: Path) -> AsyncIterator[bytes]:
    with await asyncio.to_thread(path.open, "rb") as f:
        while chunk := await asyncio.to_thread(f.read, _CHUNK):
            yield chunk


class TurnFiles:
    """``core.tools.FileOutbox`` for one turn."""

    def __init__(self, blobs: MediaStore, *, limit: int) -> None:
        self._blobs = blobs
        self._limit = limit
        self.files: list[OutboundFile] = []
        #: the real paths taken (a file both sent and linked to goes once)
        self._sources: set[Path] = set()

    def has(self, path: Path) -> bool:
        return path in self._sources

    def _room(self) -> None:
        if len(self.files) >= MAX_FILES:
            raise ToolError(f"An answer can carry at most {MAX_FILES} files; this one has them already.")

    async def _taken(self, blob: StoredBlob, name: str, head: bytes, kind: AttachmentKind | None = None) -> str:
        sniffed = sniff(head, name)
        file = OutboundFile(blob.path, name, sniffed.mime, kind or _kind(sniffed.mime), blob.size, id=blob.sha256)
        self.files.append(file)
        return f"{name} ({sniffed.mime}, {human_size(blob.size)})"

    async def add_path(self, path: Path, name: str) -> str:
        self._room()
        try:
            blob = await self._blobs.put(_chunks(path), limit=self._limit)
        except BlobTooLargeError:
            raise ToolError(f"{name} is larger than {human_size(self._limit)}, the most that can be sent.") from None
        except OSError as exc:
            raise ToolError(f"{name} could not be read: {exc.strerror or exc}") from None
        head = await asyncio.to_thread(_head, blob.path)
        self._sources.add(path)
        return await self._taken(blob, name, head)

    async def add_bytes(self, data: bytes, name: str, *, kind: AttachmentKind | None = None) -> str:
        """``kind``: how it is sent (a voice note) when its type alone does not say."""
        self._room()
        if len(data) > self._limit:
            raise ToolError(f"{name} is larger than {human_size(self._limit)}, the most that can be sent.")
        blob = await self._blobs.put_bytes(data)
        return await self._taken(blob, name, data[:SNIFF_BYTES], kind)

    def release(self) -> None:
        """The answer (and with it the ledger's note of these files) is written, or never will be."""
        self._blobs.release(*(f.id for f in self.files))


def _head(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(SNIFF_BYTES)


def to_ledger(files: tuple[OutboundFile, ...]) -> tuple[LedgerFile, ...]:
    return tuple(LedgerFile(f.id, f.name, f.mime, f.kind.value, f.size) for f in files)


def from_ledger(files: tuple[LedgerFile, ...], blobs: MediaStore) -> tuple[OutboundFile, ...]:
    """The files a ledger row keeps, as a retry sends them (a file pruned meanwhile is left out)."""
    out = []
    for f in files:
        try:
            path = blobs.path_for(f.sha256)
        except ValueError:
            continue
        if path.exists():
            out.append(OutboundFile(path, f.name, f.mime, AttachmentKind(f.kind), f.size, id=f.sha256))
    return tuple(out)
