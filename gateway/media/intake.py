"""A message's attachments, made into what the agent reads: downloaded, stored, sniffed, read.

The router has let the sender in, and the turn runs in its chat's lane: only
now is anything downloaded. Each attachment goes, in turn,

- through its adapter's ``fetch`` (the platform's own file endpoint) into the
  content-addressed store, counted against ``media.max_download_mb`` as it
  arrives and bounded by ``media.download_timeout``;
- to a kind decided by its bytes (``core.media.sniff``), not by what the
  platform or the sender's file name claimed;
- to text and parts (``_kinds``): an image resized for the model (or described
  by the vision model, or said to be unseen), a voice note transcribed, a
  document read, anything else described with its stored path.

What the person is told about a file that could not be used goes in
``TakenMedia.problems``; the rest of the message is still answered. Decoding
runs in threads, never on the event loop, and at most ``_DECODERS`` at once
(so ten photos at once cost one decoder's memory, not ten).
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass, field
from typing import Any

import structlog

from adapters.base import Adapter, InboundMessage, MediaTooLargeError, MediaUnavailableError
from adapters.media import Attachment
from core.media import SNIFF_BYTES, MediaProcessingError, display_name, human_size, sniff
from gateway.config import MediaConfig
from storage import BlobTooLargeError, MediaStore, attachments

from ._kinds import Kinds, Piece
from .pruner import MediaPruner
from .recall import ImageRecall

log = structlog.get_logger("hermes.media")

__all__ = ["MediaIntake", "TakenMedia"]

#: how many files are decoded at once: one (a 12-megapixel photo decodes to ~9 MB at half scale,
#: plus its file); two decoders raised the RSS of ten photos at once from ~36 to ~60 MB and the
#: event loop's p99 lag by ~2 ms for no gain a person sees (bench/media.py)
_DECODERS = 1


@dataclass
class TakenMedia:
    """A message's attachments as the turn uses them."""

    #: what the user message stores: the caption, then one block per attachment (markers, transcripts, text)
    text: str
    #: the images the model sees with it in this turn
    parts: tuple[dict[str, Any], ...] = ()
    #: what could not be used, one line each, said to the person before the answer
    problems: list[str] = field(default_factory=list)
    #: the voice notes' transcripts (shown with the answer where ``stt.echo_transcript`` says so)
    transcripts: list[str] = field(default_factory=list)
    #: the attachment rows, written with the user message (``TurnRequest.link``)
    rows: list[dict[str, Any]] = field(default_factory=list)
    #: the files the agent can read something of
    readable: int = 0
    #: the message's own words (its caption)
    caption: str = ""

    @property
    def digests(self) -> tuple[str, ...]:
        """The stored files this message holds (``MediaStore.release`` them once its rows are written)."""
        return tuple(row["sha256"] for row in self.rows)

    @property
    def answerable(self) -> bool:
        """There is something for the agent to answer: words, or a file it could read (a photo no
        model can see, alone, is only told so; no model call is spent on it)."""
        return bool(self.caption) or self.readable > 0

    def notes(self, *, shared: bool, echo: bool | None) -> tuple[str, str]:
        """What the reply says about the files: the transcripts before the answer (where ``echo``
        says so; unset: in shared chats only), what could not be used after it."""
        header = ""
        if self.transcripts and (echo if echo is not None else shared):
            header = "".join(f"🎤 “{t}”\n\n" for t in self.transcripts)
        return header, "".join(f"\n\n⚠️ {p}" for p in self.problems)

    def link(self, conn: sqlite3.Connection, session_id: str, message_id: int) -> None:
        for row in self.rows:
            attachments.add(conn, message_id=message_id, session_id=session_id, **row)


class MediaIntake:
    """Built once by the daemon; ``take`` runs for each message with attachments."""

    def __init__(self, blobs: MediaStore, settings: MediaConfig, *, kinds: Kinds, recall: ImageRecall,
                 pruner: MediaPruner) -> None:
        self.blobs = blobs
        #: the last turns' images, for ``TurnRequest.recall_images``
        self.recall = recall
        #: retention, and the files of deleted sessions
        self.pruner = pruner
        self._settings = settings
        self._limit = int(settings.max_download_mb * 2**20)
        self._kinds = kinds
        self._decoders = asyncio.Semaphore(_DECODERS)

    @property
    def limit(self) -> int:
        return self._limit

    async def aclose(self) -> None:
        await self._kinds.aclose()

    async def take(self, msg: InboundMessage, adapter: Adapter | None) -> TakenMedia:
        taken = TakenMedia(text=msg.text.strip(), caption=msg.text.strip())
        wanted = msg.attachments[: self._settings.max_attachments]
        if len(msg.attachments) > len(wanted):
            taken.problems.append(f"Only the first {len(wanted)} files of a message are read; "
                                  f"{len(msg.attachments) - len(wanted)} were left out.")
        blocks: list[str] = []
        for attachment in wanted:
            label = display_name(attachment.name) or f"the {attachment.kind.value}"
            try:
                piece = await self._one(attachment, adapter)
            except (MediaTooLargeError, BlobTooLargeError) as exc:
                size = getattr(exc, "size", None)
                said = f" ({human_size(size)})" if size else ""
                taken.problems.append(f"{label}{said} is too large: the limit is {human_size(self._limit)}.")
                log.info("media.too_large", kind=attachment.kind.value, size=size, limit=self._limit)
                continue
            except MediaUnavailableError as exc:
                taken.problems.append(f"I could not download {label}: {exc}")
                log.warning("media.download_failed", kind=attachment.kind.value, error=str(exc))
                continue
            except TimeoutError:
                taken.problems.append(f"Downloading {label} took too long, so I left it out.")
                log.warning("media.download_timeout", kind=attachment.kind.value)
                continue
            except MediaProcessingError as exc:
                taken.problems.append(f"I could not use {label}: {exc}")
                log.info("media.unreadable", kind=attachment.kind.value, error=str(exc))
                continue
            blocks.append(piece.text)
            taken.parts += piece.parts
            taken.problems += piece.problems
            taken.rows += piece.rows
            taken.readable += piece.useful
            if piece.transcript is not None:
                taken.transcripts.append(piece.transcript)
        if blocks:
            taken.text = "\n\n".join([*([taken.text] if taken.text else []), *blocks])
        return taken

    async def _one(self, attachment: Attachment, adapter: Adapter | None) -> Piece:
        if attachment.size is not None and attachment.size > self._limit:
            raise MediaTooLargeError("too large", size=attachment.size, limit=self._limit)
        if adapter is not None:
            async with asyncio.timeout(self._settings.download_timeout):
                blob = await self.blobs.put(adapter.fetch(attachment, limit=self._limit), limit=self._limit)
        elif attachment.data is not None:
            blob = await self.blobs.put_bytes(attachment.data, limit=self._limit)
        else:
            raise MediaUnavailableError("its platform is not connected")
        try:
            # Read whole only once a decoder is free: ten photos waiting hold ten files on disk, not in memory.
            async with self._decoders:
                data = await asyncio.to_thread(blob.path.read_bytes)
                sniffed = sniff(data[:SNIFF_BYTES], attachment.name)
                return await self._kinds.read(attachment, blob, data, sniffed)
        except BaseException:
            self.blobs.release(blob.sha256)  # no row will name it: the next sweep removes it
            raise

