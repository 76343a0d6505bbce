"""Raw updates (from getUpdates or the webhook) to the router, one update at a time.

An update that fails to parse is logged (update id and error type, never its
content: it is a user's message) and dropped; the rest of its batch goes on.
Messages are handed to the router in arrival order per chat, chats in parallel. The parts of an
album are collected first (``_albums``) and go to the router as one message. A button press
(``callback_query``) is acknowledged to Telegram, then goes to the router as the command it
stands for (``_approvals``).

A message the router deferred (``Disposition.DEFERRED``: storage away, nothing stored or answered)
is noted (``take_deferred``): the poll loop asks for it again; the webhook answers it 503.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any

import structlog
from telegram import Update

from .._dispatch import ChatOrderedDispatch
from ..base import Disposition, InboundMessage, MessageHandler
from ._albums import AlbumCollector
from ._approvals import ApprovalButtons, to_press
from ._client import BotConnection, TelegramBot
from ._inbound import PLATFORM, to_inbound
from ._settings import TelegramSettings

__all__ = ["UpdateIntake"]

log = structlog.get_logger("hermes.telegram")

#: How long an update whose dispatch is still running stays unacknowledged (``held``): the router
#: with the database away waits for a connection (the pool's timeout, 10 s by default) per message,
#: messages of one chat one after another, before it can answer ``Disposition.DEFERRED``.
DISPATCH_HOLD = 60.0


class UpdateIntake:
    def __init__(self, settings: TelegramSettings, connection: BotConnection, dispatch: MessageHandler,
                 note_forum: Callable[[str, bool], None], *, download_limit: Callable[[], int],
                 album_window: Callable[[], float], buttons: ApprovalButtons) -> None:
        """``note_forum(chat_id, is_forum)`` learns from every message whether its chat has topics;
        ``download_limit()`` is the gateway's download limit, ``album_window()`` how long an album's
        parts are waited for (both read when needed)."""
        self._settings = settings
        self._connection = connection
        self._note_forum = note_forum
        self._download_limit = download_limit
        self.album_window = album_window
        self._dispatches = ChatOrderedDispatch(PLATFORM, dispatch)
        self.albums = AlbumCollector(self._dispatches.schedule, window=album_window,
                                     release_after=lambda: DISPATCH_HOLD)
        self._buttons = buttons
        self._presses: set[asyncio.Task[Disposition | None]] = set()
        #: the lowest update id whose dispatch the router deferred (storage away), until taken
        self._deferred: int | None = None
        #: dispatches still running: task -> (update id, until when it holds the acknowledgement)
        self._unsettled: dict[asyncio.Task[Disposition | None], tuple[int, float]] = {}
        self._changed = asyncio.Event()

    def take(self, bot: TelegramBot, update_id: int, item: dict[str, Any]) -> asyncio.Task[Disposition | None] | None:
        """Parse one update and schedule its dispatch; None when it is malformed or not for us, or
        is part of an album (``albums.held`` says when that reached the router)."""
        me = self._connection.me
        if me is None:  # pragma: no cover - set by BotConnection.ensure before any intake
            return None
        if "callback_query" in item:
            return self._take_press(bot, update_id, item)
        try:
            update = Update.de_json(item, bot)
            message = to_inbound(update, me, require_mention=self._settings.require_mention,
                                 max_download_bytes=self._download_limit())
        except Exception as exc:
            # Never the payload: it is a user's message.
            log.warning("telegram.update_malformed", update_id=update_id, error=type(exc).__name__)
            return None
        if message is None:
            log.debug("telegram.update_ignored", update_id=update_id, kinds=sorted(k for k in item if k != "update_id"))
            return None
        if update.message is not None and isinstance(update.message.chat.is_forum, bool):
            self._note_forum(message.chat_id, update.message.chat.is_forum)
        group = update.message.media_group_id if update.message is not None else None
        album = group if isinstance(group, str) and group and message.attachments else None
        # Polling fetches a deferred update again; a webhook's answer (503) makes Telegram send it
        # again, but an album part was answered before its album reached the router.
        polling = self._settings.mode == "polling"
        message = dataclasses.replace(message, platform_retries=polling or album is None)
        if album is not None:
            self.albums.add(update_id, album, message)
            return None
        self.albums.flush_chat(message.chat_id)
        task = self._dispatches.schedule(message)
        self._unsettled[task] = (update_id, asyncio.get_running_loop().time() + DISPATCH_HOLD)
        task.add_done_callback(partial(self._settled, update_id))
        return task

    def running(self, update_id: int) -> asyncio.Task[Disposition | None] | None:
        """The dispatch of ``update_id`` if the router has not finished it (a webhook's retry joins it)."""
        return next((task for task, (uid, _) in self._unsettled.items() if uid == update_id), None)

    def held(self) -> int | None:
        """The lowest update id that must not be acknowledged yet (an album not dispatched, a dispatch
        the router has not finished, for ``DISPATCH_HOLD`` at most), or None."""
        now = asyncio.get_running_loop().time()
        ids = [uid for uid, until in self._unsettled.values() if until > now]
        album = self.albums.held()
        if album is not None:
            ids.append(album)
        return min(ids, default=None)

    async def changed(self, within: float) -> None:
        """Wait until an album or a dispatch moved (at most ``within`` seconds)."""
        mine = asyncio.ensure_future(self._changed.wait())
        albums = asyncio.ensure_future(self.albums.changed(within))
        try:
            await asyncio.wait({mine, albums}, timeout=within, return_when=asyncio.FIRST_COMPLETED)
        finally:
            mine.cancel()
            albums.cancel()

    def take_deferred(self) -> int | None:
        """The lowest update id the router deferred (an album's lowest part included) since the
        last call: it and what follows must be fetched again. None if there is none."""
        lows = [low for low in (self._deferred, self.albums.take_deferred()) if low is not None]
        self._deferred = None
        return min(lows, default=None)

    def _settled(self, update_id: int, task: asyncio.Task[Disposition | None]) -> None:
        self._unsettled.pop(task, None)
        self._changed.set()
        self._changed = asyncio.Event()
        if not task.cancelled() and task.exception() is None and task.result() is Disposition.DEFERRED:
            self._deferred = update_id if self._deferred is None else min(self._deferred, update_id)

    def _take_press(self, bot: TelegramBot, update_id: int,
                    item: dict[str, Any]) -> asyncio.Task[Disposition | None] | None:
        try:
            press = to_press(Update.de_json(item, bot))
        except Exception as exc:
            log.warning("telegram.update_malformed", update_id=update_id, error=type(exc).__name__)
            return None
        if press is None:
            return None
        if press.message is None:
            log.info("telegram.press_ignored", update_id=update_id)
        task = asyncio.create_task(self._press(press.query_id, press.message), name=f"telegram:press:{update_id}")
        self._presses.add(task)
        task.add_done_callback(self._presses.discard)
        return task

    async def _press(self, query_id: str, message: InboundMessage | None) -> Disposition | None:
        # Answered (answerCallbackQuery) first, so never deferred: the press keeps today's notice.
        await self._buttons.acknowledge(query_id)
        if message is None:
            return None
        return await self._dispatches.schedule(message)

    async def wait(self, bound: float) -> None:
        """Wait (at most ``bound`` seconds) for what was taken to reach the router; albums go at once."""
        self.albums.flush_all()
        if self._presses:
            await asyncio.wait(set(self._presses), timeout=bound)
        await self._dispatches.wait(bound)
