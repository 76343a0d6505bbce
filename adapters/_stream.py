"""A reply stream made of ordinary messages: post one, edit it as the text grows, and
continue in a new message past the platform's limit.

Telegram (outside private chats), Discord and Slack (where its streaming methods
are missing) all show a growing answer this way; each says only how one message
is posted and edited. The text is split with the adapter's own ``split`` on every
update, so a chunk that is full never changes again, and the final text (which
may format differently) is split once more by ``finish``: messages it no longer
needs are removed.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from .base import AdapterError, OutboundMessage, RateLimitedError, ReplyStream, SendResult

__all__ = ["EditingStream"]

T = TypeVar("T")

#: ``finish`` waits out at most this many rate limits before it gives up (the gateway then sends anew)
_FINISH_ATTEMPTS = 6
#: and never a single wait longer than this many seconds
_FINISH_MAX_WAIT = 60.0


class EditingStream(ReplyStream):
    #: the final text is rendered differently from the live one (markup), so ``finish`` edits every
    #: message; False: a message already showing its final chunk is left alone
    formats_final: bool = True

    def __init__(self, split: Callable[[str], list[str]], message_ids: Sequence[str] = ()) -> None:
        self._split = split
        self._ids: list[str] = list(message_ids)
        #: what each message shows now, and whether as final text (None: unknown, after a restart)
        self._shown: list[tuple[str, bool] | None] = [None] * len(self._ids)

    @property
    def message_ids(self) -> tuple[str, ...]:
        return tuple(self._ids)

    # ------------------------------------------------------------ what a platform says

    @abc.abstractmethod
    async def _post(self, text: str, *, final: bool) -> str:
        """Post a new message showing ``text``; its id. ``final``: format it as a reply."""

    @abc.abstractmethod
    async def _edit(self, message_id: str, text: str, *, final: bool) -> None:
        """Make message ``message_id`` show ``text``; an edit to the same text is not an error."""

    async def _delete(self, message_id: str) -> None:
        """Remove a message the final text no longer needs (by default: leave an ellipsis)."""
        await self._edit(message_id, "…", final=False)

    def _split_final(self, text: str) -> list[str]:
        """The final text in the chunks ``finish`` sends (a platform that formats may split otherwise)."""
        return self._split(text)

    # ------------------------------------------------------------------ the stream

    async def update(self, text: str) -> None:
        if text.strip():
            await self._show(self._split(text), final=False)

    async def finish(self, message: OutboundMessage) -> SendResult:
        text = message.text
        chunks: list[str] = self._split_final(text) if text else [text]
        await self._patiently(lambda: self._show(chunks, final=True))
        while len(self._ids) > len(chunks):
            await self._patiently(self._drop_last)
        return SendResult(tuple(self._ids))

    async def _drop_last(self) -> None:
        await self._delete(self._ids[-1])
        self._ids.pop()
        self._shown.pop()

    async def _show(self, chunks: list[str], *, final: bool) -> None:
        for i, chunk in enumerate(chunks):
            if i < len(self._ids):
                shown = self._shown[i]
                if shown is not None and shown[0] == chunk and (shown[1] == final or not self.formats_final):
                    continue
                await self._edit(self._ids[i], chunk, final=final)
                self._shown[i] = (chunk, final)
            else:
                self._ids.append(await self._post(chunk, final=final))
                self._shown.append((chunk, final))

    @staticmethod
    async def _patiently(call: Callable[[], Awaitable[T]]) -> T:
        """``call()``, again after each rate limit (up to a bound): the final text must land."""
        for attempt in range(1, _FINISH_ATTEMPTS + 1):
            try:
                return await call()
            except RateLimitedError as exc:
                if attempt == _FINISH_ATTEMPTS or exc.retry_after > _FINISH_MAX_WAIT:
                    raise
                await asyncio.sleep(exc.retry_after)
        raise AdapterError("unreachable: the last attempt returns or raises")
