"""``UserData`` (``Services.userdata``): a sender's export and forget, as the commands, the control
socket and the command line use them.

An export is written on a reader thread to a temporary file under ``$HERMES_HOME/tmp/`` (0600),
moved into the media store (content-addressed, so the delivery ledger can send it again after a
crash) and the temporary file removed. It goes to the sender's direct messages: the chat where
they asked when that is their DM; else the DM chat the gateway has seen them in (Telegram: a
user's DM chat is their user id). The HTTP API cannot upload: the file is a ``/v1/files/<id>``
link in the answer to the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from adapters.base import ChatType, InboundMessage, OutboundMessage, SendKind
from adapters.media import AttachmentKind, OutboundFile
from core.memory import MemoryStore
from gateway.routing.services import Services
from gateway.userdata.confirm import Confirmations
from gateway.userdata.export import ExportSummary, write_export
from gateway.userdata.forget import Forgetter
from storage import MediaStore, Store, userdata

__all__ = ["ExportSent", "UserData", "userdata_of"]

log = structlog.get_logger("hermes.userdata")

#: platforms where a user's DM chat id is their user id (the bot may write there once they started it)
_DM_IS_USER = frozenset({"telegram"})
#: the most an export file may be (beyond any platform's upload limit anyway)
_EXPORT_LIMIT = 2**31
_CHUNK = 256 * 2**10


@dataclass(frozen=True)
class ExportSent:
    """Where an export went, for the reply in the chat where it was asked."""

    #: what it held (None: nothing was built)
    summary: ExportSummary | None
    #: the DM it went to (None: no DM is known, nothing was sent)
    chat_id: str | None
    ok: bool
    #: it went to the chat where it was asked
    same_chat: bool


def userdata_of(services: Services) -> UserData | None:
    value = services.userdata
    return value if isinstance(value, UserData) else None


async def _chunks(path: Path) -> AsyncIterator[bytes]:
    with await asyncio.to_thread(path.open, "rb") as f:
        while chunk := await asyncio.to_thread(f.read, _CHUNK):
            yield chunk


class UserData:
    def __init__(self, store: Store, blobs: MediaStore | None, home: Path, *,
                 forgotten: Callable[[str, str], None] | None = None) -> None:
        self.store = store
        self.blobs = blobs
        self.home = home
        self.confirmations = Confirmations()
        self.forgetter = Forgetter(store, blobs, home, forgotten=forgotten)
        #: forgets under way, by sender (a second request waits for none: it is refused)
        self.forgetting: set[tuple[str, str]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ export

    @staticmethod
    def profile_of(home: Path) -> tuple[str, ...]:
        """The memory entries an owner's export lists: the profile (USER.md)."""
        return MemoryStore(home).entries("user")

    def profile(self, owner: bool) -> tuple[str, ...] | None:
        """The memory entries an export lists: the owner's profile, for an owner only."""
        return self.profile_of(self.home) if owner else None

    async def write_file(self, platform: str, user_id: str, *, owner: bool) -> tuple[Path, ExportSummary]:
        """The export in a new temporary file (the caller removes it); built on a reader thread."""
        folder = self.home / "tmp"
        await asyncio.to_thread(folder.mkdir, mode=0o700, parents=True, exist_ok=True)
        path = folder / f"export-{secrets.token_hex(8)}.json"
        profile = await asyncio.to_thread(self.profile, owner)
        try:
            summary = await self.store.read(lambda c: write_export(c, path, platform, user_id, profile=profile))
        except BaseException:
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        return path, summary

    async def _stored(self, path: Path, platform: str) -> OutboundFile:
        assert self.blobs is not None
        blob = await self.blobs.put(_chunks(path), limit=_EXPORT_LIMIT)
        day = datetime.now(UTC).strftime("%Y-%m-%d")
        return OutboundFile(blob.path, f"my-data-{platform}-{day}.json", "application/json",
                            AttachmentKind.DOCUMENT, blob.size, id=blob.sha256)

    async def dm_chat(self, msg: InboundMessage) -> str | None:
        if msg.chat_type is ChatType.DM or msg.platform == "api-server":
            return msg.chat_id
        user = msg.user_id or ""
        seen = await self.store.read(lambda c: userdata.dm_chat(c, msg.platform, user))
        if seen is not None:
            return seen
        return user if msg.platform in _DM_IS_USER and user else None

    async def send_export(self, services: Services, msg: InboundMessage, *, owner: bool) -> ExportSent:
        """Build the sender's export and send it to their DM (or, on the HTTP API, as a link)."""
        if self.blobs is None:
            raise RuntimeError("the media store is not available")
        user = msg.user_id or ""
        chat = await self.dm_chat(msg)
        if chat is None:  # nowhere to send it: nothing is built
            return ExportSent(None, None, False, False)
        path, summary = await self.write_file(msg.platform, user, owner=owner)
        try:
            file = await self._stored(path, msg.platform)
        finally:
            with contextlib.suppress(OSError):
                path.unlink()
        same = chat == msg.chat_id
        text = (f"📦 Your data: {summary.sessions} sessions, {summary.messages} messages, "
                f"{summary.jobs} scheduled jobs (JSON).")
        try:
            # A file of the sender's DM: through the ledger, so a crash mid-upload sends it again.
            out = OutboundMessage(msg.platform, chat, text, msg.thread_id if same else None,
                                  msg.message_id if same else None,
                                  SendKind.NOTICE if msg.awaits_answer else SendKind.REPLY, files=(file,))
            ok = await services.delivery.send(out)
        finally:
            self.blobs.release(file.id)
        log.info("userdata.exported", platform=msg.platform, sessions=summary.sessions, messages=summary.messages,
                 bytes=summary.bytes, delivered=ok)
        return ExportSent(summary, chat, ok, same)

    # ------------------------------------------------------------------ forget

    async def running_key(self, services: Services, platform: str, user_id: str, *also: str) -> str | None:
        """A chat key where a turn of the sender's runs now (None: none)."""
        keys = await self.store.read(lambda c: userdata.keys_of(c, platform, user_id))
        return next((k for k in (*also, *keys) if services.lanes.is_running(k)), None)

    def spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """Run ``work`` (a forget and its report) in the background; ``aclose`` waits for it."""
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        """Wait for forgets under way (their rows are one transaction: they finish or never were),
        then for a VACUUM."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.forgetter.aclose()

