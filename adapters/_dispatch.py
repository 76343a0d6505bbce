"""Hand inbound messages to the router in arrival order per chat, chats in parallel.

A platform delivers a chat's messages in order, but the router's answer to one
(dedupe, a notice) can take a moment; the next message of the same chat must
not overtake it, while other chats go on meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial

import structlog

from .base import Disposition, InboundMessage

__all__ = ["ChatOrderedDispatch"]

log = structlog.get_logger("hermes.adapters")


class ChatOrderedDispatch:
    def __init__(
        self,
        platform: str,
        dispatch: Callable[[InboundMessage], Awaitable[Disposition]],
        *,
        after: Callable[[InboundMessage, Disposition], None] | None = None,
    ) -> None:
        """``after(message, disposition)`` runs once the router has taken a message."""
        self._platform = platform
        self._dispatch = dispatch
        self._after = after
        self._tails: dict[str, asyncio.Task[Disposition | None]] = {}
        self.pending: set[asyncio.Task[Disposition | None]] = set()

    def schedule(self, message: InboundMessage) -> asyncio.Task[Disposition | None]:
        """The task's result is what the router did with it (None: the dispatch failed)."""
        prev = self._tails.get(message.chat_id)
        task = asyncio.create_task(self._run(prev, message), name=f"{self._platform}:dispatch:{message.chat_id}")
        self._tails[message.chat_id] = task
        self.pending.add(task)
        task.add_done_callback(partial(self._done, message.chat_id))
        return task

    async def wait(self, bound: float) -> None:
        """Wait (at most ``bound`` seconds) for what was scheduled to reach the router."""
        if self.pending:
            await asyncio.wait(set(self.pending), timeout=bound)

    def _done(self, chat_id: str, task: asyncio.Task[Disposition | None]) -> None:
        self.pending.discard(task)
        if self._tails.get(chat_id) is task:
            del self._tails[chat_id]

    async def _run(self, prev: asyncio.Task[Disposition | None] | None, message: InboundMessage) -> Disposition | None:
        if prev is not None and not prev.done():
            await asyncio.wait({prev})
        try:
            disposition = await self._dispatch(message)
        except Exception:
            log.exception(f"{self._platform}.dispatch_failed", chat_id=message.chat_id,
                          message_id=message.message_id)
            return None
        log.debug(f"{self._platform}.dispatched", chat_id=message.chat_id, message_id=message.message_id,
                  disposition=str(disposition))
        if self._after is not None:
            self._after(message, disposition)
        return disposition
